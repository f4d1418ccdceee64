//! The Kubernetes resource types tollgate reads and writes, as dynamic API resources.
//!
//! Sveltos types are used through `DynamicObject`: tollgate only reads a handful of their fields and
//! must carry the rest verbatim, so typed structs for the large Sveltos schemas would add nothing.

use kube::CustomResourceExt;
use kube::core::{ApiResource, GroupVersionKind};

use super::crd::GitPromotion;

/// The field manager of every tollgate write (server-side apply and status updates).
pub const FIELD_MANAGER: &str = "tollgate";

pub fn cluster_profile() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.projectsveltos.io", "v1beta1", "ClusterProfile"),
        "clusterprofiles",
    )
}

pub fn cluster_summary() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.projectsveltos.io", "v1beta1", "ClusterSummary"),
        "clustersummaries",
    )
}

pub fn sveltos_cluster() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("lib.projectsveltos.io", "v1beta1", "SveltosCluster"),
        "sveltosclusters",
    )
}

/// Cluster API clusters: watched only when their CRD is served.
pub fn capi_cluster() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "Cluster"),
        "clusters",
    )
}

/// tollgate's own state object: one per promotion, cluster-scoped, named like the promotion.
/// Its group, version, kind and plural come from the derived type, the one place they are spelled.
pub fn git_promotion() -> ApiResource {
    GitPromotion::api_resource()
}

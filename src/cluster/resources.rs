//! The Kubernetes resource types tollgate reads and writes, as dynamic API resources.
//!
//! Sveltos types are used through `DynamicObject`: tollgate only reads a handful of their fields and
//! must carry the rest verbatim, so typed structs for the large Sveltos schemas would add nothing.

use kube::core::{ApiResource, GroupVersionKind};

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

pub const GITPROMOTION_GROUP: &str = "tollgate.dev";
pub const GITPROMOTION_VERSION: &str = "v1alpha1";
pub const GITPROMOTION_KIND: &str = "GitPromotion";
pub const GITPROMOTION_PLURAL: &str = "gitpromotions";

/// tollgate's own state object: one per promotion, cluster-scoped, named like the promotion.
pub fn git_promotion() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GITPROMOTION_GROUP, GITPROMOTION_VERSION, GITPROMOTION_KIND),
        GITPROMOTION_PLURAL,
    )
}

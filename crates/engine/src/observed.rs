//! What the controller's watches show now: generated ClusterProfiles, their ClusterSummaries and
//! the clusters. Plain data, built by the controller from its reflectors.

use std::collections::BTreeMap;
use std::sync::Arc;

pub use crate::fleet::{Fleet, ObservedCluster};
pub use crate::observed_spec::{ObservedSpec, SpecField, WeakField, WeakSpec};
use chrono::{DateTime, Utc};
use tollgate_render::{
    MANAGED_BY_LABEL, MANAGED_BY_VALUE, PROMOTION_LABEL, SNAPSHOT_INDEX_ANNOTATION,
    SPEC_HASH_ANNOTATION, STAGE_LABEL, VERIFICATION_LABEL,
};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// ClusterProfiles labelled `tollgate.dev/promotion=<p>`, plus any profile whose name tollgate
    /// would generate for `<p>` (so that a foreign profile of that name is detected), by name.
    pub profiles: BTreeMap<String, ObservedProfile>,
    /// ClusterSummaries whose `projectsveltos.io/cluster-profile-name` is one of those profiles.
    pub summaries: Vec<ObservedSummary>,
    /// SveltosClusters and CAPI Clusters. Shared: every promotion sees the same fleet, and a
    /// copy per step would cost O(fleet) per step.
    pub clusters: Arc<Fleet>,
}

/// A ClusterProfile as the engine reads it: its name, spec and the labels and annotations tollgate
/// sets. Every other label and annotation is dropped on conversion: a profile's metadata maps
/// weighed ten times its fields at fleet scale, and nothing reads them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObservedProfile {
    pub name: String,
    /// Label `app.kubernetes.io/managed-by` is `tollgate`.
    pub managed_by_tollgate: bool,
    /// Label `tollgate.dev/promotion`.
    pub promotion: Option<Box<str>>,
    /// Label `tollgate.dev/stage`.
    pub stage: Option<Box<str>>,
    /// Label `tollgate.dev/verification` is `true`.
    pub verification: bool,
    /// Annotation `tollgate.dev/spec-hash`: the hash of the spec tollgate last applied.
    pub spec_hash: Option<Box<str>>,
    /// Annotation `tollgate.dev/snapshot-index`: the snapshot it carries.
    pub snapshot_index: Option<u64>,
    /// [`tollgate_render::snapshot_annotations_digest`] of its annotations: drift there is seen
    /// without keeping the strings.
    pub snapshot_annotations: u64,
    /// Shared with the ClusterSummaries that carry the same spec (the controller interns both).
    pub spec: ObservedSpec,
    /// `metadata.deletionTimestamp` is set: add-ons are being withdrawn.
    pub deleting: bool,
}

impl ObservedProfile {
    /// Reads what tollgate needs from a profile's labels and annotations (looked up by key).
    pub fn from_metadata<'a>(
        name: String,
        label: impl Fn(&str) -> Option<&'a str>,
        annotation: impl Fn(&str) -> Option<&'a str>,
        spec: ObservedSpec,
        deleting: bool,
    ) -> Self {
        ObservedProfile {
            name,
            managed_by_tollgate: label(MANAGED_BY_LABEL) == Some(MANAGED_BY_VALUE),
            promotion: label(PROMOTION_LABEL).map(Box::from),
            stage: label(STAGE_LABEL).map(Box::from),
            verification: label(VERIFICATION_LABEL) == Some("true"),
            spec_hash: annotation(SPEC_HASH_ANNOTATION).map(Box::from),
            snapshot_index: annotation(SNAPSHOT_INDEX_ANNOTATION).and_then(|i| i.parse().ok()),
            snapshot_annotations: tollgate_render::snapshot_annotations_digest(&annotation),
            spec,
            deleting,
        }
    }

    /// The profile an apply of `object` leaves on the server (as the controller writes through
    /// its own applies, and as the simulation and the test world play them).
    pub fn of_applied(name: String, object: &serde_json::Value) -> Self {
        let metadata = &object["metadata"];
        ObservedProfile::from_metadata(
            name,
            |key| metadata["labels"][key].as_str(),
            |key| metadata["annotations"][key].as_str(),
            ObservedSpec::of(&object["spec"]),
            false,
        )
    }

    /// Carries tollgate's managed-by label (whatever promotion it belongs to).
    pub fn is_managed_by_tollgate(&self) -> bool {
        self.managed_by_tollgate
    }

    /// Managed by tollgate for this promotion.
    pub fn is_owned_by(&self, promotion: &str) -> bool {
        self.managed_by_tollgate && self.promotion.as_deref() == Some(promotion)
    }

    /// The hash of the spec tollgate last applied to it, if tollgate applied it and it is not
    /// being deleted (a profile on its way out carries nothing).
    pub fn applied_spec_hash(&self) -> Option<&str> {
        if self.managed_by_tollgate && !self.deleting {
            self.spec_hash.as_deref()
        } else {
            None
        }
    }
}

/// One ClusterSummary. A fleet holds hundreds of thousands, so the strings repeated across
/// summaries (namespace, profile, cluster, feature ids, statuses) are shared `Arc<str>`s
/// (the controller interns them), and a clone, one per summary per step, allocates nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObservedSummary {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    /// Label `projectsveltos.io/cluster-profile-name`.
    pub profile_name: Arc<str>,
    /// `spec.clusterName` (the cluster lives in `namespace`).
    pub cluster_name: Arc<str>,
    /// `spec.clusterProfileSpec`. Shared: every summary of a profile carries the same spec.
    pub spec: ObservedSpec,
    pub features: Vec<FeatureSummary>,
    /// `status.failureMessage`: errors that are not feature-specific.
    pub failure_message: Option<Box<str>>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct FeatureSummary {
    /// `Helm`, `Resources` or `Kustomize`.
    pub feature_id: Arc<str>,
    /// `Provisioning`, `Provisioned`, `Failed`, `FailedNonRetriable`, `Removing`, …
    pub status: Arc<str>,
    pub last_applied_time: Option<DateTime<Utc>>,
    pub failure_message: Option<Box<str>>,
    /// Sveltos' `hash`: it changes with what the feature deploys, so a status carrying the hash a
    /// feature had before an apply is not about that apply (whatever its `lastAppliedTime`).
    pub hash: Option<Arc<str>>,
}

impl FeatureSummary {
    pub fn is_provisioned(&self) -> bool {
        &*self.status == PROVISIONED
    }
    pub fn is_failed(&self) -> bool {
        &*self.status == "Failed" || &*self.status == "FailedNonRetriable"
    }
}

pub const PROVISIONED: &str = "Provisioned";

/// `namespace/name` of a cluster.
pub(crate) fn cluster_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

//! Label and annotation keys on generated ClusterProfiles.
//!
//! These are tollgate's own keys, deliberately not upstream's
//! `config.projectsveltos.io/promotionname`: an upstream ClusterPromotion controller running in the
//! same cluster must never list, prune or adopt tollgate's profiles.

pub const CLUSTER_PROFILE_API_VERSION: &str = "config.projectsveltos.io/v1beta1";
pub const CLUSTER_PROFILE_KIND: &str = "ClusterProfile";

pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "tollgate";
pub const PROMOTION_LABEL: &str = "tollgate.dev/promotion";
pub const STAGE_LABEL: &str = "tollgate.dev/stage";
/// Present (`"true"`) only on pre-verification profiles.
pub const VERIFICATION_LABEL: &str = "tollgate.dev/verification";

pub const SNAPSHOT_INDEX_ANNOTATION: &str = "tollgate.dev/snapshot-index";
/// The full SHA of the commit that introduced the snapshot.
pub const SNAPSHOT_COMMIT_ANNOTATION: &str = "tollgate.dev/snapshot-commit";
pub const SNAPSHOT_ID_ANNOTATION: &str = "tollgate.dev/snapshot-id";
pub const PROFILE_SPEC_HASH_ANNOTATION: &str = "tollgate.dev/profile-spec-hash";
/// Hash of the rendered `spec`: the engine compares it to recognise "already applied".
pub const SPEC_HASH_ANNOTATION: &str = "tollgate.dev/spec-hash";

/// The snapshot annotations tollgate sets on a generated profile besides the spec hash.
pub const SNAPSHOT_ANNOTATIONS: [&str; 4] = [
    SNAPSHOT_INDEX_ANNOTATION,
    SNAPSHOT_COMMIT_ANNOTATION,
    SNAPSHOT_ID_ANNOTATION,
    PROFILE_SPEC_HASH_ANNOTATION,
];

/// A digest of a profile's [`SNAPSHOT_ANNOTATIONS`] (absent ones included): the watch cache keeps
/// this instead of the strings, and drift detection compares it with the rendered object's. Only
/// compared within one process, so the std hasher's fixed keys are enough.
pub fn snapshot_annotations_digest<'a>(annotation: impl Fn(&str) -> Option<&'a str>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    for key in SNAPSHOT_ANNOTATIONS {
        annotation(key).hash(&mut hasher);
    }
    hasher.finish()
}

/// [`snapshot_annotations_digest`] of the annotations a profile rendered from `snapshot` carries.
pub fn snapshot_digest(snapshot: &tollgate_model::Snapshot) -> u64 {
    let index = snapshot.index.to_string();
    snapshot_annotations_digest(|key| match key {
        SNAPSHOT_INDEX_ANNOTATION => Some(index.as_str()),
        SNAPSHOT_COMMIT_ANNOTATION => Some(snapshot.commit.sha.as_str()),
        SNAPSHOT_ID_ANNOTATION => Some(snapshot.hashes.snapshot_id.as_str()),
        PROFILE_SPEC_HASH_ANNOTATION => Some(snapshot.hashes.profile_spec.as_str()),
        _ => None,
    })
}

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

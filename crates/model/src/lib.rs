//! The ClusterPromotion model: its types with CRD defaults, canonical hashes, Go durations, cron
//! promotion windows, and the snapshots and approval events the engine decides from.
//!
//! Pure and small on purpose: the engine depends on this crate alone, so reading manifests (YAML
//! with locations, validation, Lua and CEL checks: `tollgate-manifest`) never links into it.
#![forbid(unsafe_code)]

pub mod analysis;
pub mod analysis_template;
pub mod approval_policy;
pub mod blackout;
pub mod compare;
pub mod cron;
pub mod depends_on;
pub mod duration;
pub mod hash;
pub mod label_map;
pub mod model;
pub mod policy;
pub mod policy_schema;
pub mod profile_spec;
pub mod retry_value;
pub mod signature;
pub mod snapshot;
pub mod window;

pub use hash::SpecHashes;
pub use model::{ClusterPromotion, Stage, Trigger};
pub use policy::{RolloutPolicy, StagePolicy};
pub use signature::{SignatureCheck, Unverified};
pub use snapshot::{ApprovalEvent, ApprovalKind, CommitInfo, Snapshot};

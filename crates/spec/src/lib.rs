//! The ClusterPromotion format: typed model, parsing with locations, validation, canonical hashes.
//!
//! Pure: every function takes bytes or values and returns values. No I/O beyond what it is given.
#![forbid(unsafe_code)]

pub mod duration;
pub mod hash;
pub mod model;
pub mod snapshot;

pub use hash::SpecHashes;
pub use model::ClusterPromotion;
pub use snapshot::{ApprovalEvent, ApprovalKind, CommitInfo, Snapshot};

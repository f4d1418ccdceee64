//! Reading ClusterPromotion manifests: YAML with locations (a fast reader behind `parse`),
//! CRD-driven validation with file/line/column diagnostics, Lua and CEL script checks. The model
//! it reads into (types, defaults, hashes, windows) is `tollgate-model`, re-exported here.
//!
//! Pure: every function takes bytes or values and returns values. No I/O beyond what it is given.
#![forbid(unsafe_code)]

pub mod crd_rules;
pub mod diagnostic;
pub mod fast_yaml;
pub mod fast_yaml_check;
pub mod field_path;
pub mod loc_tree;
pub mod located;
pub mod parse;
pub mod plain_scalar;
pub mod policy;
pub mod report;
pub mod rules;
pub mod schema;
pub mod validate;

pub use tollgate_model::policy::RolloutPolicy;
pub use tollgate_model::{cron, duration, hash, label_map, model, snapshot, window};

pub use diagnostic::{Diagnostic, Severity};
pub use hash::SpecHashes;
pub use model::{ClusterPromotion, Stage, Trigger};
pub use parse::{IgnoredDocument, Limits, ParsedFile, ParsedPromotion, parse_file};
pub use policy::ParsedPolicy;
pub use snapshot::{ApprovalEvent, ApprovalKind, CommitInfo, Snapshot};

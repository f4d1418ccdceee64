//! The ClusterPromotion format: typed model, parsing with locations, validation, canonical hashes.
//!
//! Pure: every function takes bytes or values and returns values. No I/O beyond what it is given.
#![forbid(unsafe_code)]

pub mod crd_rules;
pub mod cron;
pub mod diagnostic;
pub mod duration;
pub mod fast_yaml;
pub mod fast_yaml_check;
pub mod field_path;
pub mod hash;
pub mod label_map;
pub mod loc_tree;
pub mod located;
pub mod model;
pub mod parse;
pub mod plain_scalar;
pub mod report;
pub mod rules;
pub mod schema;
pub mod snapshot;
pub mod validate;
pub mod window;

pub use diagnostic::{Diagnostic, Severity};
pub use hash::SpecHashes;
pub use model::{ClusterPromotion, Stage, Trigger};
pub use parse::{IgnoredDocument, Limits, ParsedFile, ParsedPromotion, parse_file};
pub use snapshot::{ApprovalEvent, ApprovalKind, CommitInfo, Snapshot};

//! Reading ClusterPromotion manifests: YAML with locations (a fast reader behind `parse`),
//! CRD-driven validation with file/line/column diagnostics, Lua and CEL script checks. The model
//! it reads into (types, defaults, hashes, windows) is `tollgate-model`, re-exported here.
//!
//! Pure: every function takes bytes or values and returns values. No I/O beyond what it is given.
//!
//! Modules form layers; each uses only layers below it (the model crate is below them all), so
//! the module graph has no cycle (`tests/module_layers.rs` checks it). Bottom to top:
//!
//! 1. leaves: `location` (positions, field paths), `limits`, `plain_scalar`, `crd_rules`,
//!    `suggest` (did you mean)
//! 2. `diagnostic` (findings placed at locations), `field_path`, `located` (serde-saphyr tree),
//!    `loc_tree` (the fast reader's tree)
//! 3. `fast_yaml` (private), `schema`, `context` (what rules may consult), `report`
//! 4. `fast_yaml_check` (private; public door: [`check_fast_reader`]), `rules`, `policy_fields`
//!    (rules shared by the RolloutPolicy modules), `policy_wording` (how a violation of the
//!    RolloutPolicy schema is told), `policy_schema` (a policy's structure checked against the
//!    schema derived from the model)
//! 5. `validate` (one ClusterPromotion document: schema, rules, model), `policy_analyses` (a
//!    RolloutPolicy's analysis gates), `policy` (one RolloutPolicy document, using it)
//! 6. `parse` (one file: YAML, documents, validation)
//! 7. `documents` (rules across parsed files)
#![forbid(unsafe_code)]

// The fast YAML reader is an accelerator behind `parse`; only its differential check is public.
mod fast_yaml;
mod fast_yaml_check;
pub use fast_yaml_check::check_fast_reader;

pub mod context;
pub mod crd_rules;
pub mod diagnostic;
pub mod documents;
pub mod field_path;
pub mod key_position;
pub mod limits;
pub mod loc_tree;
pub mod located;
pub mod location;
pub mod parse;
pub mod plain_scalar;
pub mod policy;
pub mod policy_analyses;
pub mod policy_analysis_providers;
mod policy_approvals;
pub mod policy_compare;
pub mod policy_fields;
pub mod policy_schema;
mod policy_wording;
pub mod report;
pub mod rules;
pub mod schema;
pub mod suggest;
pub mod validate;

pub use tollgate_model::policy::RolloutPolicy;
pub use tollgate_model::{cron, duration, hash, label_map, model, snapshot, window};

pub use diagnostic::{Diagnostic, Severity};
pub use hash::SpecHashes;
pub use model::{ClusterPromotion, Stage, Trigger};
pub use parse::{IgnoredDocument, Limits, ParsedFile, ParsedPromotion, parse_file};
pub use policy::ParsedPolicy;
pub use snapshot::{ApprovalEvent, ApprovalKind, CommitInfo, Snapshot};

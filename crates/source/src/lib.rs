//! The git source: reads ClusterPromotion manifests from a branch of a git repository (local, or
//! fetched into a cache), keeps per-promotion snapshot history along first-parent history, and
//! finds approval events (docs/architecture.md#snapshots-and-history, #d2-approvals-are-consumed-never-lost). No Kubernetes here.
// `deny`, not `forbid`: `timeouts.rs` holds the one audited `unsafe` block (libgit2's timeouts).
#![deny(unsafe_code)]

mod approvals;
mod attribution;
pub mod backoff;
mod blob;
mod claim_name;
pub mod config;
pub mod edit;
pub mod error;
pub mod governance;
mod index;
mod known_hosts;
pub mod plan;
pub mod poker;
mod policies;
mod read;
pub mod repo;
pub mod report;
pub mod rewind;
pub mod sign;
pub mod signer_principals;
mod source;
mod statement;
pub mod timeouts;
pub mod trailers;
mod treediff;
pub mod trust;
mod unapproved;
pub mod verify;
pub mod watch;

// The paths the edit commands' modules had before they moved into `edit/` (issue #46).
pub use edit::{
    annotation as edit_annotation, policy as edit_policy, retry as edit_retry, seal as edit_seal,
};

pub use blob::{Diagnostic, Limits};
pub use config::{Auth, Secret, SourceConfig};
pub use error::{SourceError, redact_url};
pub use index::IgnoredStatement;
pub use poker::Poker;
pub use policies::{PolicyProblem, PolicySet};
pub use repo::current_branch;
pub use report::{Change, PromotionView, SyncReport};
pub use source::GitSource;
pub use trust::{Refusal, TrustConfig, VerifyCommits};
pub use watch::{LocalWatch, watch_keys, watch_local};

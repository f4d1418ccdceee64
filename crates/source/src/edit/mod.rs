//! `approve` and `rollback` as git edits: change one promotion's manifest text surgically
//! (comments and formatting kept), check the result still parses to the intended content, and
//! commit it on a new branch built from the branch tip's tree. The working tree, the index and the
//! current checkout are never touched, and nothing is pushed.
//!
//! One module per part:
//! - `document`: a promotion's document in a multi-document file, parsed back after an edit;
//! - `annotation` (block style, flow style) and `spec`: the text surgery;
//! - `target`: what an edit reads (the branch, its tip and promotions);
//! - `commit`: the git plumbing that commits an edit, signed as git is configured;
//! - `annotate`, `approve`, `rollback`, `retry`, `policy`, `seal`: the commands.

mod annotate;
pub mod annotation;
mod approve;
mod branch;
mod checkout;
mod commit;
mod document;
mod error;
pub mod policy;
pub mod retry;
mod rollback;
pub mod seal;
mod spec;
mod target;
#[cfg(test)]
mod tests;

pub(crate) use annotate::{AnnotationCommit, commit_annotation};
pub use annotate::{AnnotationEdit, annotate};
pub use annotation::{Annotated, set_annotation};
pub use approve::{
    WaitingRun, approval_annotation_value, approval_branch, approval_in_trailer, approve,
    approve_run, approver_slug,
};
pub(crate) use branch::branch_for;
pub use branch::fresh_branch_name;
pub use commit::{FileCommit, commit_on_new_branch, commit_tree};
pub(crate) use commit::{Statement, commit_statement, signing_note};
pub use document::{DocumentSpan, find_promotion_document, split_documents};
pub use error::EditError;
pub(crate) use error::git_error;
pub use rollback::rollback;
pub use spec::splice_spec;
pub(crate) use target::{Loaded, current_snapshot, load, tip};
pub use target::{Target, read_file_at};

/// A commit made on a new branch, for the CLI to report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditOutcome {
    /// The new branch, or the tracked branch itself when `direct`.
    pub branch: String,
    /// Committed on the tracked branch itself (`--commit`), not on a new branch.
    pub direct: bool,
    pub commit: String,
    /// The tip of the source branch the new commit sits on.
    pub base: String,
    pub file: String,
    pub message: String,
    pub snapshot_index: u64,
    pub snapshot_id: String,
    /// What was written and why, for the user (e.g. which form of approval value).
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
}

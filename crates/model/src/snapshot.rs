//! Snapshots and approval events: the git facts the engine reasons about, as plain data.
//!
//! The `source` crate produces these from first-parent history; the `engine` consumes them. They
//! live here so that neither depends on the other and the engine stays free of git.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::hash::SpecHashes;
use crate::model::ClusterPromotion;
use crate::signature::SignatureCheck;

/// Who made a commit and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitInfo {
    /// Full 40-hex SHA.
    pub sha: String,
    /// Position in first-parent history of the tracked branch: the root commit is 0, each
    /// following first-parent commit adds one. Lets the engine order commits without git.
    pub seq: u64,
    pub author: String,
    pub author_email: String,
    pub committer: String,
    pub committer_email: String,
    /// Author time: what `git log` shows, and what people mean by "when".
    pub time: DateTime<Utc>,
    /// Committer time: part of what a signature covers, so for a signed commit the signer's own
    /// statement of when it was made. An approval is fresh only if committed at or after its
    /// run's start commit (docs/trust.md#freshness).
    #[serde(default)]
    pub committed: DateTime<Utc>,
    /// First line of the commit message.
    pub subject: String,
    /// The commit's signature checked against the controller's trusted keys; `None`: not checked
    /// (no trusted keys configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<SignatureCheck>,
}

/// One promotion's content as of a commit. Its identity is its content (`hashes`), not the commit:
/// a force-push that rewrites commits without changing content keeps the same snapshot.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// 1-based; increases by one each time the promotion's (profileSpec hash, stages hash) changes
    /// along first-parent history.
    pub index: u64,
    pub hashes: Arc<SpecHashes>,
    /// The first commit (in first-parent order) carrying this content. Shared: one commit's
    /// info is built once and referenced by every snapshot and approval event it makes.
    pub commit: Arc<CommitInfo>,
    /// Set when these hashes equal those of an earlier snapshot (the first one): a git fact, not a
    /// verdict. Whether it is a rollback depends on what that content did when it ran, which the
    /// engine knows (`tollgate_engine::lineage`): only content that completed a run, or that the
    /// stages run now, is restored as a rollback.
    pub same_content_as: Option<u64>,
    /// The promotion as of the newest commit that carries this snapshot's content. Trigger edits
    /// (which do not change the hashes) show up here without creating a new snapshot.
    pub promotion: Arc<ClusterPromotion>,
    /// The file (relative to the repository root) the promotion was read from.
    pub file: String,
    /// Who brought this content: the authors, committers and verified signers (lowercase e-mail
    /// addresses and principals) of the commits that changed the promotion since the previous
    /// snapshot, with the commits a merge brought in and the unverified commits a verified one
    /// folds in (docs/trust.md#self-approval). `forbidSelfApproval` refuses their approvals.
    pub contributors: Arc<[String]>,
}

impl Snapshot {
    /// The content identity: `sha256(profileSpecHash || stagesHash)` in hex.
    pub fn id(&self) -> &str {
        &self.hashes.snapshot_id
    }

    /// This snapshot's content with `newer`'s metadata (labels, annotations): an older run that
    /// goes on while a newer snapshot waits reads the file's current pause and approval
    /// annotations.
    pub fn with_metadata_of(&self, newer: &Snapshot) -> Snapshot {
        let mut promotion = (*self.promotion).clone();
        promotion.metadata = newer.promotion.metadata.clone();
        Snapshot {
            promotion: Arc::new(promotion),
            ..self.clone()
        }
    }
}

/// How a stage was approved in git.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum ApprovalKind {
    /// `spec.stages[i].trigger.manual.approved` went from not-true to true in this commit.
    Field,
    /// `metadata.annotations["approve.tollgate.dev/<stage>"]` was set (or changed) to this value
    /// in this commit. The value names one snapshot: a snapshot-id prefix of at least 12 hex
    /// characters, or the SHA (at least 7 hex characters) of the commit that introduced it.
    Annotation { value: String },
    /// A commit carrying the trailer `Tollgate-Approve: <promotion>/<stage>@<snapshot>` (one
    /// approval per commit; several people can approve one snapshot). `snapshot` names one
    /// snapshot as an annotation value does.
    Trailer { snapshot: String },
}

/// One approval event for one manual stage, found in first-parent history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalEvent {
    pub stage: String,
    pub kind: ApprovalKind,
    /// The approving commit: its author and committer are the approver of record, its
    /// signature says who signed it. Shared as in [`Snapshot::commit`]; serialized as the plain
    /// object. For a commit a merge brought in, `seq` is the merge's.
    pub commit: Arc<CommitInfo>,
}

/// The annotation prefix of snapshot-bound approvals: `approve.tollgate.dev/<stage>: <snapshot>`.
pub const APPROVE_ANNOTATION_PREFIX: &str = "approve.tollgate.dev/";
/// The annotation prefix of retries of a halted stage: `retry.tollgate.dev/<stage>:
/// <snapshot>/<n>` re-drives the stage's failed and timed-out clusters once per counter `n`.
pub const RETRY_ANNOTATION_PREFIX: &str = "retry.tollgate.dev/";
/// `tollgate.dev/paused: "true"` on a ClusterPromotion holds its pipeline where it is.
pub const PAUSED_ANNOTATION: &str = "tollgate.dev/paused";
pub use crate::depends_on::{DEPENDS_ON_ANNOTATION, depends_on, depends_on_names};

/// Shortest snapshot-id prefix an annotation may use.
pub const MIN_SNAPSHOT_ID_PREFIX: usize = 12;
/// Shortest commit-SHA prefix an annotation may use.
pub const MIN_COMMIT_PREFIX: usize = 7;

/// Whether an annotation value names the snapshot of id `snapshot_id` introduced by `commit`: a
/// prefix of its id (12+ hex characters) or of that commit's SHA (7+ hex characters).
pub fn names_snapshot(value: &str, snapshot_id: &str, commit: &str) -> bool {
    let value = value.trim().to_ascii_lowercase();
    if value.is_empty() || !value.chars().all(|c| c.is_ascii_hexdigit()) {
        return false;
    }
    (value.len() >= MIN_SNAPSHOT_ID_PREFIX && snapshot_id.starts_with(&value))
        || (value.len() >= MIN_COMMIT_PREFIX && commit.to_ascii_lowercase().starts_with(&value))
}

/// Characters of an abbreviated commit SHA wherever tollgate shows one (git's default).
pub const SHORT_SHA_LEN: usize = 7;

/// A commit SHA abbreviated to [`SHORT_SHA_LEN`] characters (the whole text if shorter).
pub fn short_sha(sha: &str) -> &str {
    sha.get(..SHORT_SHA_LEN).unwrap_or(sha)
}

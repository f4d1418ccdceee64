//! Reading what a run of first-parent commits changed under the tracked path: tree diffs in
//! commit order, then one parse per new blob (in parallel: parsing dominates a full index build).
//! Pure reading: the index is not touched, so an error leaves it intact.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use git2::{Commit, Oid, Repository};
use tollgate_manifest::CommitInfo;
use tollgate_model::SignatureCheck;
use tracing::warn;

use crate::attribution::{Attribution, Attributor, facts_of};
use crate::blob::{BlobContent, Limits, ParsedBlob, parse_blobs};
use crate::error::SourceError;
use crate::index::{CommitDelta, FileDelta, IgnoredStatement, TrailerApproval};
use crate::statement::{self, is_statement};
use crate::trailers::PolicyApproval;
use crate::trailers::{self, ApproveTrailer};
use crate::treediff::{FileChange, Root, diff_roots, resolve_root};
use crate::verify::CommitChecks;

/// The indexed branch head: where the next incremental read starts.
pub(crate) struct IndexedHead {
    pub oid: Oid,
    pub root: Option<Root>,
    pub info: Arc<CommitInfo>,
}

pub(crate) struct ReadResult {
    pub deltas: Vec<CommitDelta>,
    /// The last commit read (`None` only for an empty commit list).
    pub head: Option<IndexedHead>,
}

pub(crate) struct DeltaReader<'a> {
    pub repo: &'a Repository,
    pub display: &'a str,
    pub path: &'a str,
    pub limits: &'a Limits,
}

/// A changed file whose blob is either parsed already or waiting at a queue position.
enum Pending {
    Deleted,
    Parsed(Oid, Arc<ParsedBlob>),
    Queued(Oid, usize),
}

/// An accepted commit that changed files or brought approvals, with each changed path's new blob.
struct PendingCommit {
    info: Arc<CommitInfo>,
    files: Vec<(String, Pending)>,
    approvals: Vec<TrailerApproval>,
    contributors: Arc<[String]>,
    /// The commits it brings besides itself, when there are any (see [`crate::attribution`]).
    brought: Vec<(Oid, u64)>,
    ignored: Vec<IgnoredStatement>,
    policy_approvals: Vec<PolicyApproval>,
}

/// A first-parent commit to read: its position, whether it is accepted as a snapshot point, and
/// the commits it brings (itself, then what a merge brings in).
pub(crate) struct NewCommit {
    pub oid: Oid,
    pub seq: u64,
    pub accepted: bool,
    pub range: Vec<Oid>,
}

/// What the commits folded into the next accepted one bring.
#[derive(Default)]
struct Folded {
    identities: Vec<String>,
    /// Approval trailers of statement commits, each with its commit.
    approvals: Vec<(ApproveTrailer, CommitInfo)>,
    /// Every commit brought, oldest first-parent first, each with the `seq` of the first-parent
    /// commit that brought it (its own for a first-parent commit, a merge's for what it merges).
    brought: Vec<(Oid, u64)>,
    /// Trailers that are no statements (see [`crate::statement`]).
    ignored: Vec<IgnoredStatement>,
    /// `Tollgate-Approve-Policy` trailers of statement commits.
    policy_approvals: Vec<PolicyApproval>,
}

impl Folded {
    /// The approvals and the contributors (sorted, distinct).
    /// Approvals or statements to record even when no file changed.
    fn has_news(&self) -> bool {
        !self.approvals.is_empty() || !self.ignored.is_empty() || !self.policy_approvals.is_empty()
    }

    fn finish(mut self) -> (Vec<TrailerApproval>, Arc<[String]>) {
        self.identities.sort();
        self.identities.dedup();
        let approvals = self
            .approvals
            .into_iter()
            .map(|(trailer, info)| TrailerApproval {
                trailer,
                commit: Arc::new(info),
            })
            .collect();
        (approvals, self.identities.into())
    }
}

impl DeltaReader<'_> {
    fn error(&self, commit: Oid, what: &str) -> impl FnOnce(git2::Error) -> SourceError {
        let repo = self.display.to_string();
        let commit = commit.to_string();
        let what = what.to_string();
        move |source| SourceError::Read {
            repo,
            commit,
            what,
            source,
        }
    }

    /// Reads `commits` (oldest first; the first one's parent had `root` at the tracked path).
    /// Only accepted commits are diffed: the ones between fold into the next accepted one (see
    /// [`crate::trust`]). New blobs are parsed and added to `parsed_blobs`.
    pub fn read(
        &self,
        parsed_blobs: &mut HashMap<Oid, Arc<ParsedBlob>>,
        commits: &[NewCommit],
        mut root: Option<Root>,
        mut checks: Option<&mut CommitChecks>,
    ) -> Result<ReadResult, SourceError> {
        let mut pending: Vec<PendingCommit> = Vec::new();
        let mut queue = ParseQueue::default();
        let mut changes: Vec<FileChange> = Vec::new();
        let mut head = None;
        let last_accepted = commits.iter().rposition(|c| c.accepted);
        // What the commits since the last accepted one bring: who, and which approvals.
        let mut folded = Folded::default();
        for (position, new) in commits.iter().enumerate() {
            let oid = &new.oid;
            let commit = self
                .repo
                .find_commit(*oid)
                .map_err(self.error(*oid, "the commit"))?;
            for member in &new.range {
                self.fold(&mut folded, (*member, new.seq), &mut checks)
                    .map_err(self.error(*member, "the commit"))?;
            }
            if !new.accepted {
                continue;
            }
            let new_root = resolve_root(self.repo, commit.tree_id(), self.path)
                .map_err(self.error(*oid, "the tracked path"))?;
            changes.clear();
            diff_roots(self.repo, self.path, root, new_root, &mut changes)
                .map_err(self.error(*oid, "the tree"))?;
            root = new_root;
            let is_head = Some(position) == last_accepted;
            let folded_now = std::mem::take(&mut folded);
            let news = folded_now.has_news();
            if changes.is_empty() && !news && !is_head {
                continue;
            }
            let signature = checks.as_deref_mut().map(|c| c.check(self.repo, *oid));
            let info = Arc::new(commit_info(&commit, new.seq, signature));
            if !changes.is_empty() || news {
                let mut files = Vec::with_capacity(changes.len());
                for change in &changes {
                    let state = match change.new {
                        None => Pending::Deleted,
                        Some(blob) => {
                            self.pending_blob(parsed_blobs, &mut queue, (*oid, blob), change)?
                        }
                    };
                    files.push((change.path.clone(), state));
                }
                pending.push(PendingCommit::new(Arc::clone(&info), files, folded_now));
            }
            if is_head {
                head = Some(IndexedHead {
                    oid: *oid,
                    root,
                    info,
                });
            }
        }
        let parsed: Vec<Arc<ParsedBlob>> = parse_blobs(&queue.blobs, self.limits)
            .into_iter()
            .map(Arc::new)
            .collect();
        for ((blob, _, _), result) in queue.blobs.iter().zip(&parsed) {
            parsed_blobs.insert(*blob, Arc::clone(result));
        }
        let deltas = pending
            .into_iter()
            .map(|commit| self.delta_of(commit, &parsed, parsed_blobs, &mut checks))
            .collect();
        Ok(ReadResult { deltas, head })
    }

    /// A changed file's new blob: parsed already, queued already, or read and queued now.
    fn pending_blob(
        &self,
        parsed_blobs: &HashMap<Oid, Arc<ParsedBlob>>,
        queue: &mut ParseQueue,
        (commit, blob): (Oid, Oid),
        change: &FileChange,
    ) -> Result<Pending, SourceError> {
        if let Some(parsed) = parsed_blobs.get(&blob) {
            return Ok(Pending::Parsed(blob, Arc::clone(parsed)));
        }
        if let Some(slot) = queue.slots.get(&blob) {
            return Ok(Pending::Queued(blob, *slot));
        }
        let content = BlobContent::read(self.repo, blob, self.limits)
            .map_err(self.error(commit, &change.path))?;
        queue.slots.insert(blob, queue.blobs.len());
        queue.blobs.push((blob, change.path.clone(), content));
        Ok(Pending::Queued(blob, queue.blobs.len() - 1))
    }

    /// A pending commit with its blobs parsed (`parsed`: one result per queued blob, in order).
    fn delta_of(
        &self,
        commit: PendingCommit,
        parsed: &[Arc<ParsedBlob>],
        parsed_blobs: &mut HashMap<Oid, Arc<ParsedBlob>>,
        checks: &mut Option<&mut CommitChecks>,
    ) -> CommitDelta {
        let files: Vec<FileDelta> = commit
            .files
            .into_iter()
            .map(|(path, state)| FileDelta {
                path,
                new: match state {
                    Pending::Deleted => None,
                    Pending::Parsed(blob, result) => Some((blob, result)),
                    Pending::Queued(blob, slot) => Some((blob, Arc::clone(&parsed[slot]))),
                },
            })
            .collect();
        let attributions =
            self.attribute(parsed_blobs, &commit.brought, &files, &commit.info, checks);
        CommitDelta {
            info: commit.info,
            approvals: commit.approvals,
            contributors: commit.contributors,
            files,
            attributions,
            ignored: commit.ignored,
            policy_approvals: commit.policy_approvals,
        }
    }
}

/// Blobs to parse: (blob, path it was first seen at, content), in first-seen order, and each
/// blob's place in that order.
#[derive(Default)]
struct ParseQueue {
    blobs: Vec<(Oid, String, BlobContent)>,
    slots: HashMap<Oid, usize>,
}

impl PendingCommit {
    fn new(info: Arc<CommitInfo>, files: Vec<(String, Pending)>, mut folded: Folded) -> Self {
        let ignored = std::mem::take(&mut folded.ignored);
        let policy_approvals = std::mem::take(&mut folded.policy_approvals);
        let brought = match folded.brought.len() {
            0 | 1 => Vec::new(),
            _ => std::mem::take(&mut folded.brought),
        };
        let (approvals, contributors) = folded.finish();
        PendingCommit {
            info,
            files,
            approvals,
            contributors,
            brought,
            ignored,
            policy_approvals,
        }
    }
}

impl DeltaReader<'_> {
    /// Adds one commit of a range to what the next accepted commit brings: its author,
    /// committer and verified signers, and the approval trailers of a statement commit.
    fn fold(
        &self,
        folded: &mut Folded,
        (oid, seq): (Oid, u64),
        checks: &mut Option<&mut CommitChecks>,
    ) -> Result<(), git2::Error> {
        let commit = self.repo.find_commit(oid)?;
        folded.brought.push((oid, seq));
        let signature = checks.as_deref_mut().map(|c| c.check(self.repo, oid));
        let email = |bytes: &[u8]| String::from_utf8_lossy(bytes).to_ascii_lowercase();
        folded.identities.push(email(commit.author().email_bytes()));
        folded
            .identities
            .push(email(commit.committer().email_bytes()));
        if let Some(principals) = signature.as_ref().and_then(|s| s.principals()) {
            folded.identities.extend(principals.iter().cloned());
        }
        let message = String::from_utf8_lossy(commit.message_bytes());
        if !message.contains(':') {
            return Ok(());
        }
        let (found, errors) = trailers::approvals(&message);
        let (policies, policy_errors) = trailers::policy_approvals(&message);
        for error in errors.iter().chain(&policy_errors) {
            warn!(commit = %oid, %error, "approval trailer ignored");
        }
        if found.is_empty() && policies.is_empty() {
            return Ok(());
        }
        if !is_statement(&commit) {
            if !policies.is_empty() {
                let why = statement::why_not(&commit);
                warn!(commit = %oid, why, "Tollgate-Approve-Policy trailer ignored");
            }
            let why = statement::why_not(&commit);
            warn!(commit = %oid, why, "Tollgate-Approve trailer ignored");
            for trailer in found {
                folded.ignored.push(IgnoredStatement {
                    trailer,
                    commit: Arc::new(commit_info(&commit, seq, signature.clone())),
                    why,
                });
            }
            return Ok(());
        }
        let info = commit_info(&commit, seq, signature);
        for trailer in policies {
            folded.policy_approvals.push(PolicyApproval {
                trailer,
                commit: Arc::new(info.clone()),
            });
        }
        for trailer in found {
            folded.approvals.push((trailer, info.clone()));
        }
        Ok(())
    }

    /// The approval facts of `files` that a commit of `brought` (other than the accepted one,
    /// `accepted`) introduced, each credited to that commit (see [`crate::attribution`]).
    fn attribute(
        &self,
        parsed: &mut HashMap<Oid, Arc<ParsedBlob>>,
        brought: &[(Oid, u64)],
        files: &[FileDelta],
        accepted: &CommitInfo,
        checks: &mut Option<&mut CommitChecks>,
    ) -> Vec<Attribution> {
        if brought.is_empty() {
            return Vec::new();
        }
        let oids: Vec<Oid> = brought.iter().map(|(oid, _)| *oid).collect();
        let mut attributor = Attributor {
            repo: self.repo,
            limits: self.limits,
            parsed,
            read: HashMap::new(),
        };
        let mut found = Vec::new();
        for file in files {
            let Some((_, blob)) = &file.new else { continue };
            for doc in &blob.docs {
                let Ok(promotion) = &doc.outcome else {
                    continue;
                };
                for (stage, kind) in facts_of(promotion) {
                    let Some(introducer) =
                        attributor.introducer(&oids, &file.path, &doc.name, (&stage, &kind))
                    else {
                        continue;
                    };
                    if introducer.to_string() == accepted.sha {
                        continue;
                    }
                    let Ok(commit) = self.repo.find_commit(introducer) else {
                        continue;
                    };
                    let seq = brought
                        .iter()
                        .find(|(oid, _)| *oid == introducer)
                        .map_or(accepted.seq, |(_, seq)| *seq);
                    let signature = checks
                        .as_deref_mut()
                        .map(|c| c.check(self.repo, introducer));
                    found.push(Attribution {
                        promotion: doc.name.clone(),
                        stage,
                        kind,
                        commit: Arc::new(commit_info(&commit, seq, signature)),
                    });
                }
            }
        }
        found
    }
}

fn commit_info(commit: &Commit<'_>, seq: u64, signature: Option<SignatureCheck>) -> CommitInfo {
    let author = commit.author();
    let committer = commit.committer();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let at = |seconds: i64| DateTime::<Utc>::from_timestamp(seconds, 0).unwrap_or_default();
    CommitInfo {
        sha: commit.id().to_string(),
        seq,
        author: text(author.name_bytes()),
        author_email: text(author.email_bytes()),
        committer: text(committer.name_bytes()),
        committer_email: text(committer.email_bytes()),
        // Author time: what `git log` shows, and what people mean by "when".
        time: at(author.when().seconds()),
        committed: at(committer.when().seconds()),
        subject: commit.summary_bytes().map(text).unwrap_or_default(),
        signature,
    }
}

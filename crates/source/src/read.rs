//! Reading what a run of first-parent commits changed under the tracked path: tree diffs in
//! commit order, then one parse per new blob (in parallel: parsing dominates a full index build).
//! Pure reading: the index is not touched, so an error leaves it intact.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use git2::{Commit, Oid, Repository};
use tollgate_manifest::CommitInfo;

use crate::blob::{BlobContent, Limits, ParsedBlob, parse_blobs};
use crate::error::SourceError;
use crate::index::{CommitDelta, FileDelta};
use crate::treediff::{FileChange, Root, diff_roots, resolve_root};

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

/// A commit that changed files, with each changed path's new blob.
type PendingCommit = (Arc<CommitInfo>, Vec<(String, Pending)>);

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
    /// New blobs are parsed and added to `parsed_blobs`.
    pub fn read(
        &self,
        parsed_blobs: &mut HashMap<Oid, Arc<ParsedBlob>>,
        commits: &[Oid],
        mut root: Option<Root>,
        first_seq: u64,
    ) -> Result<ReadResult, SourceError> {
        let mut pending: Vec<PendingCommit> = Vec::new();
        // Blobs to parse: (blob, path it was first seen at, content), in first-seen order.
        let mut queue: Vec<(Oid, String, BlobContent)> = Vec::new();
        let mut queued: HashMap<Oid, usize> = HashMap::new();
        let mut changes: Vec<FileChange> = Vec::new();
        let mut head = None;
        for (position, oid) in commits.iter().enumerate() {
            let seq = first_seq + position as u64;
            let commit = self
                .repo
                .find_commit(*oid)
                .map_err(self.error(*oid, "the commit"))?;
            let new_root = resolve_root(self.repo, commit.tree_id(), self.path)
                .map_err(self.error(*oid, "the tracked path"))?;
            changes.clear();
            diff_roots(self.repo, self.path, root, new_root, &mut changes)
                .map_err(self.error(*oid, "the tree"))?;
            root = new_root;
            let is_head = position + 1 == commits.len();
            if changes.is_empty() && !is_head {
                continue;
            }
            let info = Arc::new(commit_info(&commit, seq));
            if !changes.is_empty() {
                let mut files = Vec::with_capacity(changes.len());
                for change in &changes {
                    let state = match change.new {
                        None => Pending::Deleted,
                        Some(blob) => {
                            if let Some(parsed) = parsed_blobs.get(&blob) {
                                Pending::Parsed(blob, Arc::clone(parsed))
                            } else if let Some(slot) = queued.get(&blob) {
                                Pending::Queued(blob, *slot)
                            } else {
                                let content = BlobContent::read(self.repo, blob, self.limits)
                                    .map_err(self.error(*oid, &change.path))?;
                                queued.insert(blob, queue.len());
                                queue.push((blob, change.path.clone(), content));
                                Pending::Queued(blob, queue.len() - 1)
                            }
                        }
                    };
                    files.push((change.path.clone(), state));
                }
                pending.push((Arc::clone(&info), files));
            }
            if is_head {
                head = Some(IndexedHead {
                    oid: *oid,
                    root,
                    info,
                });
            }
        }

        let parsed: Vec<Arc<ParsedBlob>> = parse_blobs(&queue, self.limits)
            .into_iter()
            .map(Arc::new)
            .collect();
        for ((blob, _, _), result) in queue.iter().zip(&parsed) {
            parsed_blobs.insert(*blob, Arc::clone(result));
        }
        let deltas = pending
            .into_iter()
            .map(|(info, files)| CommitDelta {
                info,
                files: files
                    .into_iter()
                    .map(|(path, state)| FileDelta {
                        path,
                        new: match state {
                            Pending::Deleted => None,
                            Pending::Parsed(blob, result) => Some((blob, result)),
                            // `parse_blobs` returns one result per queued blob, in order.
                            Pending::Queued(blob, slot) => Some((blob, Arc::clone(&parsed[slot]))),
                        },
                    })
                    .collect(),
            })
            .collect();
        Ok(ReadResult { deltas, head })
    }
}

fn commit_info(commit: &Commit<'_>, seq: u64) -> CommitInfo {
    let author = commit.author();
    let committer = commit.committer();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    // Author time: what `git log` shows, and what people mean by "when".
    let seconds = author.when().seconds();
    CommitInfo {
        sha: commit.id().to_string(),
        seq,
        author: text(author.name_bytes()),
        author_email: text(author.email_bytes()),
        committer: text(committer.name_bytes()),
        committer_email: text(committer.email_bytes()),
        time: DateTime::<Utc>::from_timestamp(seconds, 0).unwrap_or_default(),
        subject: commit.summary_bytes().map(text).unwrap_or_default(),
    }
}

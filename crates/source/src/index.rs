//! Per-promotion snapshot history, built commit by commit along first-parent history. Pure: it
//! is fed commit deltas that were already read from git, so applying them cannot fail and a
//! failed read leaves the index untouched.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use git2::Oid;
use tollgate_spec::{ApprovalEvent, ClusterPromotion, CommitInfo, Snapshot, SpecHashes};

use crate::approvals::approval_events;
use crate::blob::{Diagnostic, ParsedBlob, duplicate_name_diagnostic};
use crate::report::{Change, PromotionView};

/// The manifest files one first-parent commit changed under the tracked path.
#[derive(Clone, Debug)]
pub(crate) struct CommitDelta {
    /// Shared by every snapshot and approval event this commit makes.
    pub info: Arc<CommitInfo>,
    pub files: Vec<FileDelta>,
}

#[derive(Clone, Debug)]
pub(crate) struct FileDelta {
    pub path: String,
    /// The new blob and its parse; `None` when the file was deleted.
    pub new: Option<(Oid, Arc<ParsedBlob>)>,
}

#[derive(Clone, Debug)]
struct FileEntry {
    parsed: Arc<ParsedBlob>,
    /// Names this file defines. A file that no longer parses at all keeps the names it had, so
    /// those promotions turn invalid (last good snapshot kept) rather than vanish.
    claims: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
enum State {
    #[default]
    Absent,
    Valid,
    Invalid(Vec<Diagnostic>),
}

#[derive(Clone, Debug, Default)]
pub(crate) struct PromotionHistory {
    pub snapshots: Vec<Snapshot>,
    pub approvals: Vec<ApprovalEvent>,
    /// The newest valid content, the baseline for approval events.
    last_valid: Option<Arc<ClusterPromotion>>,
    state: State,
    pub view: Option<PromotionView>,
}

/// A promotion's state at head, reduced to what decides its [`Change`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Summary {
    Absent,
    Valid {
        hashes: SpecHashes,
        promotion: Arc<ClusterPromotion>,
    },
    Invalid(Vec<Diagnostic>),
}

/// A promotion's resolved definition at one commit.
enum Definition {
    Absent,
    Valid {
        promotion: Arc<ClusterPromotion>,
        file: String,
    },
    Invalid(Vec<Diagnostic>),
}

#[derive(Clone, Debug, Default)]
pub(crate) struct HistoryIndex {
    /// By path; the key is shared with `definers`.
    files: HashMap<Arc<str>, FileEntry>,
    /// name → files that define it, sorted (more than one is an error for that name). A sorted
    /// vector sized for the usual one file: a set would cost a B-tree leaf per name.
    definers: HashMap<String, Vec<Arc<str>>>,
    pub promotions: BTreeMap<String, PromotionHistory>,
}

impl HistoryIndex {
    /// Applies one commit; adds the names it touched to `touched`.
    pub fn apply(&mut self, delta: &CommitDelta, touched: &mut BTreeSet<String>) {
        let mut names = BTreeSet::new();
        for file in &delta.files {
            let (path, old_claims) = match self.files.remove_entry(file.path.as_str()) {
                Some((path, entry)) => (path, entry.claims),
                None => (Arc::from(file.path.as_str()), Vec::new()),
            };
            for name in &old_claims {
                if let Some(files) = self.definers.get_mut(name) {
                    files.retain(|defining| *defining != path);
                    if files.is_empty() {
                        self.definers.remove(name);
                    }
                }
            }
            names.extend(old_claims.iter().cloned());
            let Some((_, parsed)) = &file.new else {
                continue;
            };
            let mut claims: Vec<String> = parsed.docs.iter().map(|d| d.name.clone()).collect();
            if claims.is_empty() && parsed.file_errors.iter().any(Diagnostic::is_error) {
                claims = old_claims;
            }
            claims.sort();
            claims.dedup();
            for name in &claims {
                let files = self
                    .definers
                    .entry(name.clone())
                    .or_insert_with(|| Vec::with_capacity(1));
                if let Err(at) = files.binary_search(&path) {
                    files.insert(at, Arc::clone(&path));
                }
            }
            names.extend(claims.iter().cloned());
            self.files.insert(
                path,
                FileEntry {
                    parsed: Arc::clone(parsed),
                    claims,
                },
            );
        }
        for name in names {
            let definition = self.resolve(&name);
            let history = self.promotions.entry(name.clone()).or_default();
            history.record(definition, &delta.info);
            touched.insert(name);
        }
    }

    /// Names a commit may touch: those its changed files defined before and define after.
    pub fn names_in(&self, delta: &CommitDelta) -> Vec<String> {
        let mut names = Vec::new();
        for file in &delta.files {
            if let Some(entry) = self.files.get(file.path.as_str()) {
                names.extend(entry.claims.iter().cloned());
            }
            if let Some((_, parsed)) = &file.new {
                names.extend(parsed.docs.iter().map(|d| d.name.clone()));
            }
        }
        names
    }

    fn resolve(&self, name: &str) -> Definition {
        let Some(files) = self.definers.get(name) else {
            return Definition::Absent;
        };
        let files: Vec<&str> = files.iter().map(|path| &**path).collect();
        let [file] = files.as_slice() else {
            return Definition::Invalid(vec![duplicate_name_diagnostic(name, &files)]);
        };
        let Some(entry) = self.files.get(*file) else {
            return Definition::Absent;
        };
        let mut docs = entry.parsed.docs.iter().filter(|d| d.name == name);
        match (docs.next(), docs.next()) {
            (Some(_), Some(_)) => {
                Definition::Invalid(vec![duplicate_name_diagnostic(name, &[file, file])])
            }
            (Some(doc), None) => match &doc.outcome {
                Ok(promotion) => Definition::Valid {
                    promotion: Arc::clone(promotion),
                    file: file.to_string(),
                },
                Err(errors) => Definition::Invalid(ParsedBlob::relocate(errors, file)),
            },
            // The file stopped parsing altogether: its file-level errors are this name's errors.
            (None, _) => Definition::Invalid(ParsedBlob::relocate(&entry.parsed.file_errors, file)),
        }
    }

    /// Rebuilds the [`PromotionView`] of the given names after a batch of commits.
    pub fn refresh_views<'a>(&mut self, names: impl IntoIterator<Item = &'a String>) {
        for name in names {
            if let Some(history) = self.promotions.get_mut(name) {
                history.view = history.current_view();
            }
        }
    }

    pub fn summary(&self, name: &str) -> Summary {
        self.promotions
            .get(name)
            .map_or(Summary::Absent, PromotionHistory::summary)
    }

    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.promotions.keys()
    }

    /// Files with errors that belong to no promotion (e.g. a document without a name, or a file
    /// that never parsed).
    pub fn file_errors(&self) -> BTreeMap<&str, &[Diagnostic]> {
        self.files
            .iter()
            .filter(|(_, entry)| !entry.parsed.file_errors.is_empty())
            .map(|(path, entry)| (&**path, entry.parsed.file_errors.as_slice()))
            .collect()
    }
}

impl PromotionHistory {
    fn record(&mut self, definition: Definition, commit: &Arc<CommitInfo>) {
        match definition {
            Definition::Absent => self.state = State::Absent,
            Definition::Invalid(errors) => self.state = State::Invalid(errors),
            Definition::Valid { promotion, file } => {
                let events = approval_events(self.last_valid.as_deref(), &promotion, commit);
                // As for snapshots below: most promotions see few approvals, so the first ones
                // are stored without a vector's spare slots.
                if self.approvals.capacity() == 0 {
                    self.approvals.reserve_exact(events.len());
                }
                self.approvals.extend(events);
                let hashes = SpecHashes::of(&promotion);
                // A promotion restored after it was gone from git starts a new run (a new
                // snapshot, even with the same content): the removal ended the earlier run, and
                // its approvals, consumed or not, must not carry over (DESIGN D2).
                let restored = self.state == State::Absent;
                match self.snapshots.last_mut() {
                    Some(last) if last.hashes == hashes && !restored => {
                        // Trigger/annotation edit: same snapshot, newest content.
                        last.promotion = Arc::clone(&promotion);
                        last.file = file;
                    }
                    _ => {
                        let rollback_of = self
                            .snapshots
                            .iter()
                            .find(|s| s.hashes == hashes)
                            .map(|s| s.index);
                        let index = self.snapshots.len() as u64 + 1;
                        // Most promotions keep one snapshot for a long time, and a vector's
                        // first growth reserves four (over 500 bytes here): start at one, then
                        // grow as usual (amortized doubling) for promotions that change often.
                        if self.snapshots.capacity() == 0 {
                            self.snapshots.reserve_exact(1);
                        }
                        self.snapshots.push(Snapshot {
                            index,
                            hashes,
                            commit: Arc::clone(commit),
                            rollback_of,
                            promotion: Arc::clone(&promotion),
                            file,
                        });
                    }
                }
                self.last_valid = Some(promotion);
                self.state = State::Valid;
            }
        }
    }

    fn current_view(&self) -> Option<PromotionView> {
        match &self.state {
            State::Absent => None,
            State::Valid => self.snapshots.last().map(|snapshot| PromotionView::Valid {
                snapshot: Arc::new(snapshot.clone()),
            }),
            State::Invalid(errors) => Some(PromotionView::Invalid {
                errors: errors.clone(),
                last_good: self.snapshots.last().cloned().map(Arc::new),
            }),
        }
    }

    fn summary(&self) -> Summary {
        match (&self.state, self.snapshots.last()) {
            (State::Valid, Some(last)) => Summary::Valid {
                hashes: last.hashes.clone(),
                promotion: Arc::clone(&last.promotion),
            },
            (State::Invalid(errors), _) => Summary::Invalid(errors.clone()),
            _ => Summary::Absent,
        }
    }
}

/// The change between two summaries of one name; `None` when it is absent on both sides.
pub(crate) fn change_between(before: &Summary, after: &Summary) -> Option<Change> {
    Some(match (before, after) {
        (Summary::Absent, Summary::Absent) => return None,
        (_, Summary::Absent) => Change::Removed,
        (Summary::Absent, Summary::Valid { .. }) => Change::Added,
        (Summary::Invalid(old), Summary::Invalid(new)) if old == new => Change::Unchanged,
        (_, Summary::Invalid(_)) => Change::Invalid,
        (Summary::Invalid(_), Summary::Valid { .. }) => Change::Recovered,
        (
            Summary::Valid {
                hashes: old_hashes,
                promotion: old,
            },
            Summary::Valid {
                hashes: new_hashes,
                promotion: new,
            },
        ) => {
            if old_hashes != new_hashes {
                Change::SpecChanged {
                    profile_spec: old_hashes.profile_spec != new_hashes.profile_spec,
                    stages: old_hashes.stages != new_hashes.stages,
                }
            } else if Arc::ptr_eq(old, new) || old == new {
                Change::Unchanged
            } else {
                Change::TriggerOnly
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;

    use super::*;
    use crate::blob::{BlobContent, Limits, parse_blob};

    fn commit(seq: u64) -> Arc<CommitInfo> {
        Arc::new(CommitInfo {
            sha: format!("{seq:040x}"),
            seq,
            author: "Ada".into(),
            author_email: "ada@example.com".into(),
            committer: "Ada".into(),
            committer_email: "ada@example.com".into(),
            time: DateTime::UNIX_EPOCH,
            subject: format!("commit {seq}"),
        })
    }

    fn manifest(name: &str, env: &str) -> Vec<u8> {
        format!(
            "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\nmetadata:\n  name: {name}\nspec:\n  stages:\n  - name: one\n    clusterSelector:\n      matchLabels:\n        env: {env}\n    trigger:\n      manual:\n        approved: true\n"
        )
        .into_bytes()
    }

    /// `(path, Some((promotion name, label)))` writes the file, `(path, None)` deletes it.
    fn delta(seq: u64, files: &[(&str, Option<(&str, &str)>)]) -> CommitDelta {
        CommitDelta {
            info: commit(seq),
            files: files
                .iter()
                .map(|(path, content)| FileDelta {
                    path: path.to_string(),
                    new: content.map(|(name, env)| {
                        let bytes = manifest(name, env);
                        let oid = Oid::hash_object(git2::ObjectType::Blob, &bytes).expect("oid");
                        let parsed =
                            parse_blob(path, &BlobContent::Loaded(bytes), &Limits::default());
                        (oid, Arc::new(parsed))
                    }),
                })
                .collect(),
        }
    }

    fn apply(index: &mut HistoryIndex, delta: &CommitDelta) {
        index.apply(delta, &mut BTreeSet::new());
    }

    fn is_valid(index: &HistoryIndex, name: &str) -> bool {
        matches!(index.summary(name), Summary::Valid { .. })
    }

    #[test]
    fn one_commit_info_is_shared_by_every_snapshot_and_approval_it_makes() {
        let mut index = HistoryIndex::default();
        let first = delta(
            0,
            &[
                ("a.yaml", Some(("a", "dev"))),
                ("b.yaml", Some(("b", "dev"))),
            ],
        );
        apply(&mut index, &first);
        for name in ["a", "b"] {
            let history = &index.promotions[name];
            assert_eq!(history.snapshots.len(), 1);
            assert!(Arc::ptr_eq(&history.snapshots[0].commit, &first.info));
            assert_eq!(history.approvals.len(), 1);
            assert!(Arc::ptr_eq(&history.approvals[0].commit, &first.info));
            // One snapshot is one slot, not the four of a vector's first growth.
            assert_eq!(history.snapshots.capacity(), 1);
            assert_eq!(history.approvals.capacity(), 1);
        }
        let second = delta(1, &[("a.yaml", Some(("a", "prod")))]);
        apply(&mut index, &second);
        let snapshots = &index.promotions["a"].snapshots;
        assert_eq!(snapshots.len(), 2);
        assert!(Arc::ptr_eq(&snapshots[0].commit, &first.info));
        assert!(Arc::ptr_eq(&snapshots[1].commit, &second.info));
    }

    #[test]
    fn definers_follow_files_and_share_their_paths() {
        let mut index = HistoryIndex::default();
        apply(&mut index, &delta(0, &[("b.yaml", Some(("p", "dev")))]));
        assert!(is_valid(&index, "p"));
        let (key, _) = index.files.get_key_value("b.yaml").expect("file");
        assert!(Arc::ptr_eq(key, &index.definers["p"][0]));

        apply(&mut index, &delta(1, &[("a.yaml", Some(("p", "dev")))]));
        let paths: Vec<&str> = index.definers["p"].iter().map(|p| &**p).collect();
        assert_eq!(paths, ["a.yaml", "b.yaml"], "sorted");
        assert!(matches!(index.summary("p"), Summary::Invalid(_)));

        // Rewriting a file keeps one entry for it.
        apply(&mut index, &delta(2, &[("a.yaml", Some(("p", "prod")))]));
        assert_eq!(index.definers["p"].len(), 2);

        apply(&mut index, &delta(3, &[("b.yaml", None)]));
        let paths: Vec<&str> = index.definers["p"].iter().map(|p| &**p).collect();
        assert_eq!(paths, ["a.yaml"]);
        assert!(is_valid(&index, "p"));

        // Moving the name to another file and deleting the last one leave nothing behind.
        apply(
            &mut index,
            &delta(
                4,
                &[
                    ("a.yaml", Some(("q", "prod"))),
                    ("c.yaml", Some(("p", "prod"))),
                ],
            ),
        );
        let paths: Vec<&str> = index.definers["p"].iter().map(|p| &**p).collect();
        assert_eq!(paths, ["c.yaml"]);
        assert!(is_valid(&index, "q"));
        apply(&mut index, &delta(5, &[("a.yaml", None), ("c.yaml", None)]));
        assert!(index.definers.is_empty());
        assert!(index.files.is_empty());
        assert_eq!(index.summary("p"), Summary::Absent);
    }
}

//! Per-promotion snapshot history, built commit by commit along first-parent history. Pure: it
//! is fed commit deltas that were already read from git, so applying them cannot fail and a
//! failed read leaves the index untouched.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use git2::Oid;
use tollgate_manifest::{
    ApprovalEvent, ApprovalKind, ClusterPromotion, CommitInfo, Snapshot, SpecHashes,
};

use crate::approvals::approval_events;
use crate::blob::{Diagnostic, ParsedBlob, duplicate_name_diagnostic};
use crate::claim_name::path_name;
use crate::report::{Change, PromotionView};

/// The manifest files one first-parent commit changed under the tracked path.
#[derive(Clone, Debug)]
pub(crate) struct CommitDelta {
    /// Shared by every snapshot and approval event this commit makes.
    pub info: Arc<CommitInfo>,
    pub files: Vec<FileDelta>,
    /// `Tollgate-Approve` trailers of the commits this one brings (itself, a merge's side
    /// commits, the unverified commits folded into it).
    pub approvals: Vec<TrailerApproval>,
    /// Who brought the changes (see [`Snapshot::contributors`]).
    pub contributors: Arc<[String]>,
    /// Approval facts of the changed files that a commit this one brings introduced, credited
    /// to that commit (see [`crate::attribution`]); empty when it brings only itself.
    pub attributions: Vec<crate::attribution::Attribution>,
    /// `Tollgate-Approve` trailers of commits that are no statements, ignored.
    pub ignored: Vec<IgnoredStatement>,
    /// `Tollgate-Approve-Policy` statements of the commits this one brings.
    pub policy_approvals: Vec<crate::trailers::PolicyApproval>,
}

/// A `Tollgate-Approve` trailer in a commit that is no statement commit (a merge, a commit that
/// changes files): ignored, and shown by `tollgate history` with why (issue #44).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnoredStatement {
    pub trailer: crate::trailers::ApproveTrailer,
    pub commit: Arc<CommitInfo>,
    pub why: &'static str,
}

/// One `Tollgate-Approve` trailer and the commit that carries it.
#[derive(Clone, Debug)]
pub(crate) struct TrailerApproval {
    pub trailer: crate::trailers::ApproveTrailer,
    pub commit: Arc<CommitInfo>,
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
    /// The one extra name the file's unattributed errors are shown under (see
    /// [`crate::claim_name`]), when it has such errors.
    fallback: Option<String>,
    /// The file defines RolloutPolicies (or did, and no longer parses): its file-level errors
    /// are the policies' errors (see [`crate::policies`]), not a promotion of their own.
    holds_policies: bool,
}

impl FileEntry {
    fn names(&self) -> impl Iterator<Item = &String> {
        self.claims.iter().chain(&self.fallback)
    }
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
    /// Shared with the readers of the history (the controller keeps it per promotion): a sync
    /// hands out a reference, and only a change of the history copies it, once.
    pub snapshots: Arc<Vec<Snapshot>>,
    pub approvals: Arc<Vec<ApprovalEvent>>,
    /// Trailers naming this promotion that were ignored (no statement commit), oldest first.
    pub ignored: Vec<IgnoredStatement>,
    /// The newest valid content, the baseline for approval events.
    last_valid: Option<Arc<ClusterPromotion>>,
    state: State,
    /// Gone from git at some commit since the newest snapshot: that run ended with the removal,
    /// so the promotion coming back broken has no last good snapshot, and coming back valid
    /// starts a new one.
    removed_since_snapshot: bool,
    pub view: Option<PromotionView>,
}

/// A promotion's state at head, reduced to what decides its [`Change`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Summary {
    Absent,
    Valid {
        hashes: Arc<SpecHashes>,
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
    /// Promotions that got trailer approvals since the caller last took them (an approval
    /// without a content change is still news for the controller).
    pub approved: BTreeSet<String>,
}

impl HistoryIndex {
    /// Applies one commit. Every name it touches gets an entry in `before`: its summary before
    /// the first commit (of those applied with the same map) that touched it. Returns the names
    /// whose definition the commit touched.
    pub fn apply(
        &mut self,
        delta: &CommitDelta,
        before: &mut BTreeMap<String, Summary>,
    ) -> Vec<String> {
        let mut names = BTreeSet::new();
        // Every changed file lets go of its names first, so that a name moving between files in
        // one commit is free whatever order the files come in.
        let mut released = Vec::with_capacity(delta.files.len());
        for file in &delta.files {
            let (path, old) = match self.files.remove_entry(file.path.as_str()) {
                Some((path, entry)) => (path, Some(entry)),
                None => (Arc::from(file.path.as_str()), None),
            };
            if let Some(entry) = &old {
                for name in entry.names() {
                    self.undefine(name, &path);
                    names.insert(name.clone());
                }
            }
            released.push((path, old));
        }
        for (file, (path, old)) in delta.files.iter().zip(released) {
            let Some((_, parsed)) = &file.new else {
                continue;
            };
            let was_policy_file = old.as_ref().is_some_and(|old| old.holds_policies);
            let (claims, mut fallback) = self.claims_of(&path, parsed, old);
            let holds_policies = !parsed.policies.is_empty()
                || parsed.broken_policy_file
                || (was_policy_file && claims.is_empty() && parsed.docs.is_empty());
            if holds_policies && parsed.policies.is_empty() {
                fallback = None;
            }
            let entry = FileEntry {
                parsed: Arc::clone(parsed),
                claims,
                fallback,
                holds_policies,
            };
            for name in entry.names() {
                self.define(name, &path);
                names.insert(name.clone());
            }
            self.files.insert(path, entry);
        }
        let touched: Vec<String> = names.into_iter().collect();
        for name in &touched {
            let definition = self.resolve(name);
            let history = self.promotions.entry(name.clone()).or_default();
            before
                .entry(name.clone())
                .or_insert_with(|| history.summary());
            history.record(definition, delta);
        }
        for ignored in &delta.ignored {
            if let Some(history) = self.promotions.get_mut(&ignored.trailer.promotion) {
                history.ignored.push(ignored.clone());
            }
        }
        for approval in &delta.approvals {
            let name = &approval.trailer.promotion;
            // A trailer for a promotion git never defined approves nothing.
            if let Some(history) = self.promotions.get_mut(name) {
                Arc::make_mut(&mut history.approvals).push(ApprovalEvent {
                    stage: approval.trailer.stage.clone(),
                    kind: ApprovalKind::Trailer {
                        snapshot: approval.trailer.snapshot.clone(),
                    },
                    commit: Arc::clone(&approval.commit),
                });
                self.approved.insert(name.clone());
            }
        }
        touched
    }

    /// The names a file defines, and the extra name its unattributed errors go under.
    fn claims_of(
        &self,
        path: &str,
        parsed: &ParsedBlob,
        old: Option<FileEntry>,
    ) -> (Vec<String>, Option<String>) {
        let mut claims: Vec<String> = parsed.docs.iter().map(|d| d.name.clone()).collect();
        claims.sort();
        claims.dedup();
        if !parsed.file_errors.iter().any(Diagnostic::is_error) {
            return (claims, None);
        }
        if claims.is_empty()
            && let Some(old) = old
            && !old.claims.is_empty()
        {
            // An existing promotion's file stopped parsing: its promotions turn invalid.
            return (old.claims, None);
        }
        let fallback = match parsed.readable_name.as_deref() {
            Some(name) if !claims.iter().any(|claim| claim == name) => name.to_string(),
            _ => {
                let plain = path_name(path, false);
                let taken = self.definers.contains_key(&plain) || claims.contains(&plain);
                if taken { path_name(path, true) } else { plain }
            }
        };
        (claims, Some(fallback))
    }

    fn define(&mut self, name: &str, path: &Arc<str>) {
        let files = self
            .definers
            .entry(name.to_string())
            .or_insert_with(|| Vec::with_capacity(1));
        if let Err(at) = files.binary_search(path) {
            files.insert(at, Arc::clone(path));
        }
    }

    fn undefine(&mut self, name: &str, path: &Arc<str>) {
        if let Some(files) = self.definers.get_mut(name) {
            files.retain(|defining| defining != path);
            if files.is_empty() {
                self.definers.remove(name);
            }
        }
    }

    fn resolve(&self, name: &str) -> Definition {
        let Some(files) = self.definers.get(name) else {
            return Definition::Absent;
        };
        let files: Vec<&str> = files.iter().map(|path| &**path).collect();
        let [file] = files.as_slice() else {
            let mut errors = vec![duplicate_name_diagnostic(name, &files)];
            // A definer that does not parse says why too: its errors are seen nowhere else.
            for file in &files {
                if let Some(entry) = self.files.get(*file)
                    && !entry.parsed.docs.iter().any(|d| d.name == name)
                {
                    errors.extend(ParsedBlob::relocate(&entry.parsed.file_errors, file));
                }
            }
            return Definition::Invalid(errors);
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
            // The file stopped parsing altogether, or this is the name its unattributed errors go
            // under: its file-level errors are this name's errors.
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

    /// The promotion's newest valid content, while git defines it (invalid: its last good).
    pub fn valid_content(&self, name: &str) -> Option<&Arc<ClusterPromotion>> {
        let history = self.promotions.get(name)?;
        if history.state == State::Absent {
            return None;
        }
        history.last_valid.as_ref()
    }

    pub fn summary(&self, name: &str) -> Summary {
        self.promotions
            .get(name)
            .map_or(Summary::Absent, PromotionHistory::summary)
    }

    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.promotions.keys()
    }

    /// Files with file-level errors (a document without a name, a file that does not parse), by
    /// path. Each is also shown as the promotion it claims (see `claims_of`).
    pub fn file_errors(&self) -> BTreeMap<&str, &[Diagnostic]> {
        self.files
            .iter()
            .filter(|(_, entry)| !entry.parsed.file_errors.is_empty())
            .map(|(path, entry)| (&**path, entry.parsed.file_errors.as_slice()))
            .collect()
    }
}

impl PromotionHistory {
    fn record(&mut self, definition: Definition, delta: &CommitDelta) {
        let commit = &delta.info;
        match definition {
            Definition::Absent => {
                self.state = State::Absent;
                self.removed_since_snapshot = !self.snapshots.is_empty();
            }
            Definition::Invalid(errors) => self.state = State::Invalid(errors),
            Definition::Valid { promotion, file } => {
                let events = approval_events(
                    self.last_valid.as_deref(),
                    &promotion,
                    commit,
                    &delta.attributions,
                );
                // As for snapshots below: most promotions see few approvals, so the first ones
                // are stored without a vector's spare slots.
                if !events.is_empty() {
                    let approvals = Arc::make_mut(&mut self.approvals);
                    if approvals.capacity() == 0 {
                        approvals.reserve_exact(events.len());
                    }
                    approvals.extend(events);
                }
                let hashes = Arc::new(SpecHashes::of(&promotion));
                // A promotion restored after it was gone from git starts a new run (a new
                // snapshot, even with the same content): the removal ended the earlier run, and
                // its approvals, consumed or not, must not carry over (docs/architecture.md#d2-approvals-are-consumed-never-lost).
                let restored = std::mem::take(&mut self.removed_since_snapshot);
                let snapshots = Arc::make_mut(&mut self.snapshots);
                match snapshots.last_mut() {
                    Some(last) if last.hashes == hashes && !restored => {
                        // Trigger/annotation edit: same snapshot, newest content.
                        last.promotion = Arc::clone(&promotion);
                        last.file = file;
                    }
                    _ => {
                        let same_content_as = snapshots
                            .iter()
                            .find(|s| s.hashes == hashes)
                            .map(|s| s.index);
                        let index = snapshots.len() as u64 + 1;
                        // Most promotions keep one snapshot for a long time, and a vector's
                        // first growth reserves four (over 500 bytes here): start at one, then
                        // grow as usual (amortized doubling) for promotions that change often.
                        if snapshots.capacity() == 0 {
                            snapshots.reserve_exact(1);
                        }
                        snapshots.push(Snapshot {
                            index,
                            hashes,
                            commit: Arc::clone(commit),
                            same_content_as,
                            promotion: Arc::clone(&promotion),
                            file,
                            contributors: Arc::clone(&delta.contributors),
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
                last_good: self
                    .snapshots
                    .last()
                    .filter(|_| !self.removed_since_snapshot)
                    .cloned()
                    .map(Arc::new),
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
            committed: DateTime::UNIX_EPOCH,
            subject: format!("commit {seq}"),
            signature: None,
        })
    }

    fn manifest(name: &str, env: &str) -> Vec<u8> {
        tollgate_fixtures::promotion(name)
            .stage(
                tollgate_fixtures::stage("one")
                    .selector("env", env)
                    .approved(true),
            )
            .to_yaml()
            .into_bytes()
    }

    /// `(path, Some((promotion name, label)))` writes the file, `(path, None)` deletes it.
    fn delta(seq: u64, files: &[(&str, Option<(&str, &str)>)]) -> CommitDelta {
        CommitDelta {
            attributions: Vec::new(),
            ignored: Vec::new(),
            policy_approvals: Vec::new(),
            info: commit(seq),
            approvals: Vec::new(),
            contributors: Arc::from([]),
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
        index.apply(delta, &mut BTreeMap::new());
    }

    /// `(path, Some(text))` writes the file, `(path, None)` deletes it.
    fn raw_delta(seq: u64, files: &[(&str, Option<&str>)]) -> CommitDelta {
        CommitDelta {
            attributions: Vec::new(),
            ignored: Vec::new(),
            policy_approvals: Vec::new(),
            info: commit(seq),
            approvals: Vec::new(),
            contributors: Arc::from([]),
            files: files
                .iter()
                .map(|(path, content)| FileDelta {
                    path: path.to_string(),
                    new: content.map(|text| {
                        let bytes = text.as_bytes().to_vec();
                        let oid = Oid::hash_object(git2::ObjectType::Blob, &bytes).expect("oid");
                        let parsed =
                            parse_blob(path, &BlobContent::Loaded(bytes), &Limits::default());
                        (oid, Arc::new(parsed))
                    }),
                })
                .collect(),
        }
    }

    fn is_valid(index: &HistoryIndex, name: &str) -> bool {
        matches!(index.summary(name), Summary::Valid { .. })
    }

    #[test]
    fn a_history_handed_out_is_shared_until_its_promotion_changes() {
        let mut index = HistoryIndex::default();
        apply(
            &mut index,
            &delta(
                0,
                &[
                    ("a.yaml", Some(("a", "dev"))),
                    ("b.yaml", Some(("b", "dev"))),
                ],
            ),
        );
        let handed_out = Arc::clone(&index.promotions["a"].snapshots);
        let approvals = Arc::clone(&index.promotions["a"].approvals);
        apply(&mut index, &delta(1, &[("b.yaml", Some(("b", "prod")))]));
        assert!(
            Arc::ptr_eq(&handed_out, &index.promotions["a"].snapshots),
            "another promotion's commit copies nothing of a's"
        );
        assert!(Arc::ptr_eq(&approvals, &index.promotions["a"].approvals));
        apply(&mut index, &delta(2, &[("a.yaml", Some(("a", "prod")))]));
        assert_eq!(index.promotions["a"].snapshots.len(), 2);
        assert_eq!(handed_out.len(), 1, "the reader's copy stays what it was");
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

    /// A syntax error where the name is still readable (`metadata.name` on line 4).
    const SYNTAX_ERROR: &str = "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\nmetadata:\n  name: web\nspec:\n  stages:\n  - name: a\n     clusterSelector: x: y\n";
    /// A billion-laughs document whose name cannot be read.
    const ALIAS_BOMB: &str = "kind: ClusterPromotion\nmetadata: {name: bomb}\nspec:\n  a0: &a0 [x, x, x, x, x, x, x, x, x]\n  a1: &a1 [*a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0]\n  a2: &a2 [*a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1]\n  a3: &a3 [*a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2]\n  a4: &a4 [*a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3]\n  a5: &a5 [*a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4]\n  a6: &a6 [*a5, *a5, *a5, *a5, *a5, *a5, *a5, *a5, *a5]\n  a7: &a7 [*a6, *a6, *a6, *a6, *a6, *a6, *a6, *a6, *a6]\n  a8: &a8 [*a7, *a7, *a7, *a7, *a7, *a7, *a7, *a7, *a7]\n";

    fn view(index: &mut HistoryIndex, name: &str) -> Option<PromotionView> {
        index.refresh_views([&name.to_string()]);
        index.promotions.get(name)?.view.clone()
    }

    /// The errors of a promotion that never was valid.
    fn never_valid_errors(index: &mut HistoryIndex, name: &str) -> Vec<Diagnostic> {
        match view(index, name) {
            Some(PromotionView::Invalid {
                errors,
                last_good: None,
            }) => errors,
            other => panic!("{name}: expected invalid and never valid, got {other:?}"),
        }
    }

    #[test]
    fn a_new_file_with_a_syntax_error_claims_its_readable_name() {
        let mut index = HistoryIndex::default();
        let mut before = BTreeMap::new();
        index.apply(
            &raw_delta(0, &[("web.yaml", Some(SYNTAX_ERROR))]),
            &mut before,
        );
        assert_eq!(
            before.get("web"),
            Some(&Summary::Absent),
            "reported as a change"
        );
        let errors = never_valid_errors(&mut index, "web");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].code, "yaml-syntax");
        assert_eq!(
            (errors[0].file.as_str(), errors[0].line),
            ("web.yaml", 8),
            "{errors:?}"
        );
        assert!(
            errors[0].to_string().starts_with("web.yaml:8:"),
            "{}",
            errors[0]
        );

        // Fixed: the same name turns valid, and nothing else is left behind.
        apply(&mut index, &delta(1, &[("web.yaml", Some(("web", "dev")))]));
        assert!(is_valid(&index, "web"));
        assert_eq!(index.definers.len(), 1);
    }

    #[test]
    fn a_new_alias_bomb_without_a_readable_name_claims_a_name_from_its_path() {
        let mut index = HistoryIndex::default();
        apply(
            &mut index,
            &raw_delta(
                0,
                &[
                    ("apps/Bomb.yaml", Some(ALIAS_BOMB)),
                    (
                        "good.yaml",
                        Some(std::str::from_utf8(&manifest("good", "dev")).expect("utf8")),
                    ),
                ],
            ),
        );
        let name = "invalid-file-apps-bomb-yaml";
        let errors = never_valid_errors(&mut index, name);
        assert_eq!(errors[0].code, "yaml-alias-bomb", "{errors:?}");
        assert_eq!(errors[0].file, "apps/Bomb.yaml");
        assert!(is_valid(&index, "good"), "the good promotion is unaffected");

        // Fixed: the path-derived name goes away, the real one appears.
        apply(
            &mut index,
            &delta(1, &[("apps/Bomb.yaml", Some(("bomb", "dev")))]),
        );
        assert_eq!(index.summary(name), Summary::Absent);
        assert!(view(&mut index, name).is_none());
        assert!(is_valid(&index, "bomb"));
    }

    #[test]
    fn deleting_a_bad_file_removes_its_claim() {
        let mut index = HistoryIndex::default();
        apply(&mut index, &raw_delta(0, &[("x.yaml", Some("kind: [\n"))]));
        assert!(matches!(
            index.summary("invalid-file-x-yaml"),
            Summary::Invalid(_)
        ));
        let mut before = BTreeMap::new();
        index.apply(&raw_delta(1, &[("x.yaml", None)]), &mut before);
        assert!(matches!(
            before.get("invalid-file-x-yaml"),
            Some(Summary::Invalid(_))
        ));
        assert_eq!(index.summary("invalid-file-x-yaml"), Summary::Absent);
        assert!(index.definers.is_empty() && index.files.is_empty());
    }

    #[test]
    fn two_bad_files_never_share_a_name() {
        let mut index = HistoryIndex::default();
        apply(
            &mut index,
            &raw_delta(
                0,
                &[
                    ("a-b.yaml", Some("kind: [\n")),
                    ("a_b.yaml", Some("kind: {\n")),
                ],
            ),
        );
        let names: Vec<&String> = index.definers.keys().collect();
        assert_eq!(names.len(), 2, "{names:?}");
        for (name, files) in &index.definers {
            assert_eq!(files.len(), 1, "{name} has one file");
            assert!(name.starts_with("invalid-file-a-b-yaml"), "{name}");
            assert!(matches!(index.summary(name), Summary::Invalid(errors) if errors.len() == 1));
        }
        // A still-broken edit keeps the file on a name of its own.
        apply(
            &mut index,
            &raw_delta(1, &[("a_b.yaml", Some("kind: [[\n"))]),
        );
        assert_eq!(index.definers.len(), 2);
        assert!(index.definers.values().all(|files| files.len() == 1));
    }

    #[test]
    fn a_nameless_promotion_beside_a_good_one_is_shown_under_the_file_name() {
        let mut index = HistoryIndex::default();
        let text = format!(
            "{}---\nkind: ClusterPromotion\napiVersion: config.projectsveltos.io/v1beta1\nmetadata:\n  labels: {{a: b}}\nspec: {{}}\n",
            String::from_utf8(manifest("good", "dev")).expect("utf8")
        );
        apply(&mut index, &raw_delta(0, &[("two.yaml", Some(&text))]));
        assert!(is_valid(&index, "good"));
        let errors = never_valid_errors(&mut index, "invalid-file-two-yaml");
        assert!(
            errors.iter().any(|e| e.path == "metadata.name"),
            "{errors:?}"
        );
    }

    #[test]
    fn an_existing_promotion_whose_file_stops_parsing_keeps_its_name_and_last_good_snapshot() {
        let mut index = HistoryIndex::default();
        apply(&mut index, &delta(0, &[("app.yaml", Some(("app", "dev")))]));
        // Broken, and its readable name is another one now: still `app`, invalid, last good kept.
        apply(
            &mut index,
            &raw_delta(1, &[("app.yaml", Some(SYNTAX_ERROR))]),
        );
        match view(&mut index, "app") {
            Some(PromotionView::Invalid {
                errors,
                last_good: Some(last),
            }) => {
                assert_eq!(last.index, 1);
                assert_eq!(errors[0].code, "yaml-syntax");
            }
            other => panic!("expected invalid with last good, got {other:?}"),
        }
        assert_eq!(index.summary("web"), Summary::Absent);
        assert_eq!(index.definers.len(), 1);
    }

    #[test]
    fn a_promotion_moved_into_a_broken_file_stays_invalid_whatever_the_file_order() {
        for (from, to) in [("a.yaml", "z.yaml"), ("z.yaml", "a.yaml")] {
            let mut index = HistoryIndex::default();
            apply(&mut index, &delta(0, &[(from, Some(("web", "dev")))]));
            apply(
                &mut index,
                &raw_delta(1, &[(to, Some(SYNTAX_ERROR)), (from, None)]),
            );
            match view(&mut index, "web") {
                Some(PromotionView::Invalid {
                    last_good: Some(_), ..
                }) => {}
                other => panic!("{from} → {to}: expected invalid with last good, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_broken_second_definition_of_a_name_says_why_it_is_broken() {
        let mut index = HistoryIndex::default();
        apply(&mut index, &delta(0, &[("a.yaml", Some(("web", "dev")))]));
        apply(&mut index, &raw_delta(1, &[("b.yaml", Some(SYNTAX_ERROR))]));
        let Summary::Invalid(errors) = index.summary("web") else {
            panic!("web is defined twice");
        };
        let codes: Vec<&str> = errors.iter().map(|e| e.code).collect();
        assert_eq!(codes, ["duplicate-promotion-name", "yaml-syntax"]);
        assert_eq!(errors[1].file, "b.yaml");
    }

    #[test]
    fn files_over_a_parse_limit_are_claimed_too() {
        let limits = Limits {
            max_file_bytes: 400,
            max_depth: 8,
            ..Limits::default()
        };
        let deep = format!(
            "kind: ClusterPromotion\nmetadata:\n  name: deep\nspec: {}{}\n",
            "[".repeat(10),
            "]".repeat(10)
        );
        let files = [
            ("big.yaml", BlobContent::TooLarge(4096)),
            ("deep.yaml", BlobContent::Loaded(deep.into_bytes())),
        ];
        let delta = CommitDelta {
            attributions: Vec::new(),
            ignored: Vec::new(),
            policy_approvals: Vec::new(),
            info: commit(0),
            approvals: Vec::new(),
            contributors: Arc::from([]),
            files: files
                .into_iter()
                .map(|(path, content)| FileDelta {
                    path: path.to_string(),
                    new: Some((
                        Oid::ZERO_SHA1,
                        Arc::new(parse_blob(path, &content, &limits)),
                    )),
                })
                .collect(),
        };
        let mut index = HistoryIndex::default();
        apply(&mut index, &delta);
        let big = never_valid_errors(&mut index, "invalid-file-big-yaml");
        assert_eq!(
            (big[0].code, big[0].file.as_str()),
            ("file-too-large", "big.yaml")
        );
        let deep = never_valid_errors(&mut index, "deep");
        assert_eq!(
            (deep[0].code, deep[0].file.as_str()),
            ("yaml-too-deep", "deep.yaml")
        );
        assert!(deep[0].line == 4 && deep[0].column > 1, "{}", deep[0]);
    }

    // A removal ends the run: what comes back under the same name starts over.

    const BROKEN_WEB: &str = "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\nmetadata:\n  name: web\nspec:\n  stages:\n  - name: a\n     clusterSelector: x: y\n";

    fn snapshot_of(index: &HistoryIndex, name: &str) -> (u64, Option<u64>) {
        let last = index.promotions[name].snapshots.last().expect("snapshot");
        (last.index, last.same_content_as)
    }

    #[test]
    fn a_restored_promotion_starts_a_new_snapshot_of_the_same_content() {
        let mut index = HistoryIndex::default();
        index.apply(
            &delta(0, &[("web.yaml", Some(("web", "dev")))]),
            &mut BTreeMap::new(),
        );
        index.apply(&delta(1, &[("web.yaml", None)]), &mut BTreeMap::new());
        index.apply(
            &delta(2, &[("web.yaml", Some(("web", "dev")))]),
            &mut BTreeMap::new(),
        );
        assert_eq!(snapshot_of(&index, "web"), (2, Some(1)));
        // Approval content restored is no new approval event: the field was true before.
        assert_eq!(index.promotions["web"].approvals.len(), 1);
        // A trigger-only edit afterwards stays in the restored snapshot.
        index.apply(
            &delta(3, &[("web.yaml", Some(("web", "dev")))]),
            &mut BTreeMap::new(),
        );
        assert_eq!(snapshot_of(&index, "web"), (2, Some(1)));
    }

    #[test]
    fn a_promotion_restored_broken_has_no_last_good_snapshot() {
        let mut index = HistoryIndex::default();
        let mut touched = BTreeMap::new();
        index.apply(
            &delta(0, &[("web.yaml", Some(("web", "dev")))]),
            &mut touched,
        );
        index.apply(&delta(1, &[("web.yaml", None)]), &mut touched);
        index.apply(
            &raw_delta(2, &[("web.yaml", Some(BROKEN_WEB))]),
            &mut touched,
        );
        index.refresh_views(["web".to_string()].iter());
        match index.promotions["web"].view.as_ref() {
            Some(PromotionView::Invalid { last_good, .. }) => assert!(last_good.is_none()),
            other => panic!("invalid view expected, got {other:?}"),
        }
        // Fixed later: a new run, even with the content of the removed one.
        index.apply(
            &delta(3, &[("web.yaml", Some(("web", "dev")))]),
            &mut touched,
        );
        assert_eq!(snapshot_of(&index, "web"), (2, Some(1)));
    }

    #[test]
    fn a_broken_commit_without_removal_keeps_the_last_good_snapshot() {
        let mut index = HistoryIndex::default();
        let mut touched = BTreeMap::new();
        index.apply(
            &delta(0, &[("web.yaml", Some(("web", "dev")))]),
            &mut touched,
        );
        index.apply(
            &raw_delta(1, &[("web.yaml", Some(BROKEN_WEB))]),
            &mut touched,
        );
        index.refresh_views(["web".to_string()].iter());
        match index.promotions["web"].view.as_ref() {
            Some(PromotionView::Invalid { last_good, .. }) => {
                assert_eq!(last_good.as_ref().map(|s| s.index), Some(1));
            }
            other => panic!("invalid view expected, got {other:?}"),
        }
        index.apply(
            &delta(2, &[("web.yaml", Some(("web", "dev")))]),
            &mut touched,
        );
        assert_eq!(
            snapshot_of(&index, "web"),
            (1, None),
            "the same run goes on"
        );
    }
}

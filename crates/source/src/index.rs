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
    pub info: CommitInfo,
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
    files: HashMap<String, FileEntry>,
    /// name → files that define it (more than one is an error for that name).
    definers: HashMap<String, BTreeSet<String>>,
    pub promotions: BTreeMap<String, PromotionHistory>,
}

impl HistoryIndex {
    /// Applies one commit; adds the names it touched to `touched`.
    pub fn apply(&mut self, delta: &CommitDelta, touched: &mut BTreeSet<String>) {
        let mut names = BTreeSet::new();
        for file in &delta.files {
            let previous = self.files.remove(&file.path);
            let old_claims = previous.map(|entry| entry.claims).unwrap_or_default();
            for name in &old_claims {
                if let Some(set) = self.definers.get_mut(name) {
                    set.remove(&file.path);
                    if set.is_empty() {
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
                self.definers
                    .entry(name.clone())
                    .or_default()
                    .insert(file.path.clone());
            }
            names.extend(claims.iter().cloned());
            self.files.insert(
                file.path.clone(),
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
            if let Some(entry) = self.files.get(&file.path) {
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
        let files: Vec<&str> = files.iter().map(String::as_str).collect();
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
            .map(|(path, entry)| (path.as_str(), entry.parsed.file_errors.as_slice()))
            .collect()
    }
}

impl PromotionHistory {
    fn record(&mut self, definition: Definition, commit: &CommitInfo) {
        match definition {
            Definition::Absent => self.state = State::Absent,
            Definition::Invalid(errors) => self.state = State::Invalid(errors),
            Definition::Valid { promotion, file } => {
                self.approvals.extend(approval_events(
                    self.last_valid.as_deref(),
                    &promotion,
                    commit,
                ));
                let hashes = SpecHashes::of(&promotion);
                match self.snapshots.last_mut() {
                    Some(last) if last.hashes == hashes => {
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
                        self.snapshots.push(Snapshot {
                            index,
                            hashes,
                            commit: commit.clone(),
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
                snapshot: snapshot.clone(),
            }),
            State::Invalid(errors) => Some(PromotionView::Invalid {
                errors: errors.clone(),
                last_good: self.snapshots.last().cloned(),
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

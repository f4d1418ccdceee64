//! The `RolloutPolicy` documents at the branch head. Policies need no history: only the head
//! state, plus each name's last valid version, so that a typo in a policy file never silently
//! drops a deadline or a failure budget from the runs it governs.
//!
//! Fed the same commit deltas as the promotion index, commit by commit (the last valid version is
//! the one of the last commit where the name was valid).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tollgate_manifest::model::ClusterPromotion;
use tollgate_model::policy::{POLICY_ANNOTATION, PolicyChoiceError, RolloutPolicy, choose_policy};

use crate::blob::{Diagnostic, ParsedBlob, PolicyDoc, Severity};
use crate::index::CommitDelta;

/// What one file at head says about policies.
#[derive(Clone, Debug)]
struct PolicyFile {
    docs: Vec<PolicyDoc>,
    /// The file does not parse (no document is readable): the names its last readable version
    /// defined (none for a new file), which these errors now belong to.
    broken: Option<(Vec<String>, Vec<Diagnostic>)>,
}

impl PolicyFile {
    fn names(&self) -> BTreeSet<&str> {
        let named = self.docs.iter().filter_map(|d| d.name.as_deref());
        let kept = self.broken.iter().flat_map(|(names, _)| names.iter());
        named.chain(kept.map(String::as_str)).collect()
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct PolicyIndex {
    /// Files that define policies (or did, before they stopped parsing), by path.
    files: BTreeMap<String, PolicyFile>,
    /// Each name's last valid version and its file, while some file defines the name.
    last_valid: BTreeMap<String, (Arc<RolloutPolicy>, String)>,
}

impl PolicyIndex {
    /// Applies one commit's changed files.
    pub fn apply(&mut self, delta: &CommitDelta) {
        let mut touched: BTreeSet<String> = BTreeSet::new();
        for file in &delta.files {
            let old = self.files.remove(&file.path);
            if let Some(old) = &old {
                touched.extend(old.names().into_iter().map(str::to_string));
            }
            let new = file
                .new
                .as_ref()
                .and_then(|(_, parsed)| policy_file(&file.path, parsed, old));
            if let Some(new) = new {
                touched.extend(new.names().into_iter().map(str::to_string));
                self.files.insert(file.path.clone(), new);
            }
        }
        for name in touched {
            self.refresh_last_valid(&name);
        }
    }

    /// The files defining `name`, with its documents in each.
    fn definers<'a>(&'a self, name: &'a str) -> impl Iterator<Item = (&'a str, &'a PolicyFile)> {
        self.files
            .iter()
            .filter(move |(_, file)| file.names().contains(name))
            .map(|(path, file)| (path.as_str(), file))
    }

    fn refresh_last_valid(&mut self, name: &str) {
        let definers: Vec<(&str, &PolicyFile)> = self.definers(name).collect();
        let valid = match definers.as_slice() {
            [] => {
                self.last_valid.remove(name);
                return;
            }
            [(path, file)] => {
                let mut docs = file.docs.iter().filter(|d| d.name.as_deref() == Some(name));
                match (docs.next(), docs.next(), &file.broken) {
                    (
                        Some(PolicyDoc {
                            outcome: Ok(policy),
                            ..
                        }),
                        None,
                        None,
                    ) => Some((Arc::clone(policy), path.to_string())),
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(valid) = valid {
            self.last_valid.insert(name.to_string(), valid);
        }
    }

    /// The set at head: valid (or last valid) policies and the current errors.
    pub fn set(&self) -> PolicySet {
        let policies = self
            .last_valid
            .values()
            .map(|(policy, file)| (Arc::clone(policy), file.clone()))
            .collect();
        let mut errors = Vec::new();
        let mut duplicates: BTreeSet<&str> = BTreeSet::new();
        for (path, file) in &self.files {
            if let Some((_, file_errors)) = &file.broken {
                errors.extend(ParsedBlob::relocate(file_errors, path));
            }
            for doc in &file.docs {
                if let Err(diagnostics) = &doc.outcome {
                    errors.extend(ParsedBlob::relocate(diagnostics, path));
                }
            }
            for name in file.names() {
                if !duplicates.contains(name) && self.is_defined_twice(name) {
                    duplicates.insert(name);
                }
            }
        }
        for name in duplicates {
            errors.extend(self.duplicate_errors(name));
        }
        errors.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
        PolicySet::new(policies, errors).with_unusable(self.unusable())
    }

    /// Names defined at head without a valid version, each with the first file defining it.
    fn unusable(&self) -> BTreeMap<String, String> {
        let mut unusable = BTreeMap::new();
        for (path, file) in &self.files {
            for name in file.names() {
                if !self.last_valid.contains_key(name) {
                    unusable
                        .entry(name.to_string())
                        .or_insert_with(|| path.clone());
                }
            }
        }
        unusable
    }

    fn is_defined_twice(&self, name: &str) -> bool {
        let documents: usize = self
            .definers(name)
            .map(|(_, file)| {
                let docs = file.docs.iter().filter(|d| d.name.as_deref() == Some(name));
                docs.count().max(1)
            })
            .sum();
        documents > 1
    }

    /// An error at every definition of a name defined more than once, naming every file.
    fn duplicate_errors(&self, name: &str) -> Vec<Diagnostic> {
        let places: Vec<(&str, u32)> = self
            .definers(name)
            .flat_map(|(path, file)| {
                let lines: Vec<u32> = file
                    .docs
                    .iter()
                    .filter(|d| d.name.as_deref() == Some(name))
                    .map(|d| d.line)
                    .collect();
                let lines = if lines.is_empty() { vec![1] } else { lines };
                lines.into_iter().map(move |line| (path, line))
            })
            .collect();
        let all: Vec<String> = places.iter().map(|(f, l)| format!("{f}:{l}")).collect();
        places
            .iter()
            .map(|(file, line)| Diagnostic {
                severity: Severity::Error,
                code: "duplicate-policy-name",
                file: file.to_string(),
                line: *line,
                column: 1,
                path: "metadata.name".to_string(),
                message: format!(
                    "RolloutPolicy {name:?} is defined more than once ({}); its last valid version stays in force until one definition is removed",
                    all.join(", ")
                ),
            })
            .collect()
    }
}

/// What a changed file now says about policies, given what it said before (`old`).
fn policy_file(path: &str, parsed: &ParsedBlob, old: Option<PolicyFile>) -> Option<PolicyFile> {
    if !parsed.policies.is_empty() {
        return Some(PolicyFile {
            docs: parsed.policies.clone(),
            broken: None,
        });
    }
    let unreadable = parsed.docs.is_empty() && parsed.file_errors.iter().any(Diagnostic::is_error);
    let old_names: Vec<String> = old
        .as_ref()
        .map(|old| old.names().into_iter().map(str::to_string).collect())
        .unwrap_or_default();
    if unreadable && (!old_names.is_empty() || parsed.broken_policy_file) {
        return Some(PolicyFile {
            docs: Vec::new(),
            broken: Some((old_names, ParsedBlob::relocate(&parsed.file_errors, path))),
        });
    }
    None
}

#[derive(Clone, Debug, Default, PartialEq)]
struct PolicySetInner {
    /// By name; each with the file it was read from.
    policies: Vec<(Arc<RolloutPolicy>, String)>,
    errors: Vec<Diagnostic>,
    /// Names defined at head without a valid version, each with a file defining it.
    unusable: BTreeMap<String, String>,
}

/// The policies at the branch head. Cheap to clone.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicySet {
    inner: Arc<PolicySetInner>,
}

impl PolicySet {
    /// A set from policies (each with its file) and errors; the policies are kept by name.
    pub fn new(mut policies: Vec<(Arc<RolloutPolicy>, String)>, errors: Vec<Diagnostic>) -> Self {
        policies.sort_by(|a, b| a.0.name().cmp(b.0.name()));
        PolicySet {
            inner: Arc::new(PolicySetInner {
                policies,
                errors,
                unusable: BTreeMap::new(),
            }),
        }
    }

    /// Records names that are defined (by name, a file defining each) but have no valid
    /// version, so that an annotation naming one says where to look instead of "does not exist".
    pub fn with_unusable(mut self, names: impl IntoIterator<Item = (String, String)>) -> Self {
        Arc::make_mut(&mut self.inner).unusable.extend(names);
        self
    }

    /// Valid policies at head (for a policy whose file became invalid: its last valid version,
    /// so a typo never silently drops a deadline), by name, each with its file path.
    pub fn policies(&self) -> impl Iterator<Item = (&Arc<RolloutPolicy>, &str)> {
        self.inner
            .policies
            .iter()
            .map(|(p, file)| (p, file.as_str()))
    }

    /// Current errors in policy files (file:line:col diagnostics), including duplicate names.
    pub fn errors(&self) -> &[Diagnostic] {
        &self.inner.errors
    }

    pub fn is_empty(&self) -> bool {
        self.inner.policies.is_empty() && self.inner.errors.is_empty()
    }

    /// The file a policy was read from.
    pub fn file_of(&self, name: &str) -> Option<&str> {
        self.policies()
            .find(|(policy, _)| policy.name() == name)
            .map(|(_, file)| file)
    }

    /// The policy governing a promotion: [`choose_policy`], with errors turned into text naming
    /// the policies' files.
    pub fn choose(
        &self,
        promotion: &ClusterPromotion,
    ) -> Result<Option<Arc<RolloutPolicy>>, String> {
        let chosen = choose_policy(&promotion.metadata, self.policies().map(|(p, _)| &**p));
        match chosen {
            Ok(None) => Ok(None),
            Ok(Some(chosen)) => Ok(self
                .policies()
                .find(|(policy, _)| std::ptr::eq(&***policy, chosen))
                .map(|(policy, _)| Arc::clone(policy))),
            Err(error) => Err(self.describe(&error)),
        }
    }

    fn describe(&self, error: &PolicyChoiceError) -> String {
        let file = |name: &str| self.file_of(name).unwrap_or("?");
        match error {
            PolicyChoiceError::Conflict { first, second } => format!(
                "RolloutPolicies {first:?} ({}) and {second:?} ({}) both select this promotion: name one with the annotation {POLICY_ANNOTATION}, or narrow a selector",
                file(first),
                file(second)
            ),
            PolicyChoiceError::Missing(name) => match self.inner.unusable.get(name) {
                Some(file) => format!(
                    "annotation {POLICY_ANNOTATION} names RolloutPolicy {name:?}, which {file} defines but which has no valid version: fix the errors reported for it"
                ),
                None => error.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::{BlobContent, Limits, parse_blob};
    use crate::index::FileDelta;
    use tollgate_manifest::CommitInfo;

    fn policy(name: &str, deadline: &str) -> String {
        format!(
            "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: {name}\nspec:\n  progressDeadline: {deadline}\n"
        )
    }

    /// `(path, Some(text))` writes the file, `(path, None)` deletes it.
    fn apply(index: &mut PolicyIndex, files: &[(&str, Option<&str>)]) {
        let delta = CommitDelta {
            info: Arc::new(CommitInfo {
                sha: "0".repeat(40),
                seq: 0,
                author: String::new(),
                author_email: String::new(),
                committer: String::new(),
                committer_email: String::new(),
                time: chrono::DateTime::UNIX_EPOCH,
                subject: String::new(),
            }),
            files: files
                .iter()
                .map(|(path, text)| FileDelta {
                    path: path.to_string(),
                    new: text.map(|text| {
                        let content = BlobContent::Loaded(text.as_bytes().to_vec());
                        let parsed = parse_blob(path, &content, &Limits::default());
                        (git2::Oid::ZERO_SHA1, Arc::new(parsed))
                    }),
                })
                .collect(),
        };
        index.apply(&delta);
    }

    fn deadline(set: &PolicySet, name: &str) -> Option<u64> {
        let (policy, _) = set.policies().find(|(p, _)| p.name() == name)?;
        policy
            .spec
            .progress_deadline
            .as_ref()
            .map(|d| d.value.as_secs())
    }

    #[test]
    fn a_file_that_stops_parsing_keeps_its_policies_last_valid_version() {
        let mut index = PolicyIndex::default();
        apply(&mut index, &[("p.yaml", Some(&policy("a", "1m")))]);
        apply(&mut index, &[("p.yaml", Some("kind: [\n"))]);
        let set = index.set();
        assert_eq!(deadline(&set, "a"), Some(60));
        assert_eq!(set.errors()[0].code, "yaml-syntax");
        assert_eq!(set.errors()[0].file, "p.yaml");
        apply(&mut index, &[("p.yaml", Some(&policy("a", "2m")))]);
        assert_eq!(deadline(&index.set(), "a"), Some(120));
        assert!(index.set().errors().is_empty());
    }

    #[test]
    fn an_annotation_naming_a_policy_without_a_valid_version_says_where_it_is() {
        let mut index = PolicyIndex::default();
        apply(&mut index, &[("p.yaml", Some(&policy("a", "forever")))]);
        let promotion: ClusterPromotion = serde_json::from_value(serde_json::json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "app", "annotations": {POLICY_ANNOTATION: "a"}},
            "spec": {"stages": []},
        }))
        .expect("promotion");
        let error = index.set().choose(&promotion).expect_err("unusable");
        assert!(
            error.contains("\"a\", which p.yaml defines but which has no valid version"),
            "{error}"
        );
    }

    #[test]
    fn a_name_defined_twice_in_one_file_is_an_error() {
        let mut index = PolicyIndex::default();
        let text = format!("{}---\n{}", policy("a", "1m"), policy("a", "2m"));
        apply(&mut index, &[("p.yaml", Some(&text))]);
        let set = index.set();
        assert_eq!(set.policies().count(), 0, "never valid");
        let lines: Vec<u32> = set.errors().iter().map(|d| d.line).collect();
        assert_eq!(lines, [1, 8]);
        assert!(set.errors()[0].message.contains("p.yaml:1, p.yaml:8"));
    }
}

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
    /// Each name's last valid version, its file and the line of its selector, while some file
    /// defines the name.
    last_valid: BTreeMap<String, (Arc<RolloutPolicy>, String, u32)>,
    /// The last valid version of each name no file defines any more: a run it governed goes on
    /// under it while its promotion's policy cannot be resolved (fail closed).
    retired: BTreeMap<String, Arc<RolloutPolicy>>,
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
                if let Some((policy, _, _)) = self.last_valid.remove(name) {
                    self.retired.insert(name.to_string(), policy);
                }
                return;
            }
            [(path, file)] => {
                let mut docs = file.docs.iter().filter(|d| d.name.as_deref() == Some(name));
                match (docs.next(), docs.next(), &file.broken) {
                    (
                        Some(PolicyDoc {
                            outcome: Ok(policy),
                            selector_line,
                            ..
                        }),
                        None,
                        None,
                    ) => Some((Arc::clone(policy), path.to_string(), *selector_line)),
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(valid) = valid {
            self.retired.remove(name);
            self.last_valid.insert(name.to_string(), valid);
        }
    }

    /// Each name's last valid version while some file defines it.
    pub fn heads(&self) -> impl Iterator<Item = (&String, &Arc<RolloutPolicy>)> {
        self.last_valid
            .iter()
            .map(|(name, (policy, _, _))| (name, policy))
    }

    /// The set at head: valid (or last valid) policies and the current errors.
    pub fn set(&self) -> PolicySet {
        let policies = self
            .last_valid
            .values()
            .map(|(policy, file, _)| (Arc::clone(policy), file.clone()))
            .collect();
        let lines = self
            .last_valid
            .iter()
            .map(|(name, (_, _, line))| (name.clone(), *line))
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
        let troubled = self.troubled(&errors);
        let mut set = PolicySet::new(policies, errors).with_unusable(self.unusable());
        let inner = Arc::make_mut(&mut set.inner);
        inner.lines = lines;
        inner.troubled = troubled;
        inner.retired = self.retired.clone();
        set
    }

    /// Names whose definition at head has an error (a file that does not parse, an invalid
    /// document, a second definition), each with its first error: such a name keeps its last
    /// valid version, and a promotion it governs holds new snapshots until it is fixed.
    fn troubled(&self, errors: &[Diagnostic]) -> BTreeMap<String, Diagnostic> {
        let mut troubled = BTreeMap::new();
        for (path, file) in &self.files {
            let names_in_error: Vec<&str> = match &file.broken {
                Some((names, _)) => names.iter().map(String::as_str).collect(),
                None => file
                    .docs
                    .iter()
                    .filter(|d| d.outcome.is_err())
                    .filter_map(|d| d.name.as_deref())
                    .collect(),
            };
            let first_error = errors.iter().find(|d| &d.file == path);
            for name in names_in_error {
                if let Some(error) = first_error {
                    troubled
                        .entry(name.to_string())
                        .or_insert_with(|| error.clone());
                }
            }
        }
        for error in errors.iter().filter(|d| d.code == "duplicate-policy-name") {
            for name in self
                .files
                .get(&error.file)
                .into_iter()
                .flat_map(PolicyFile::names)
            {
                if self.is_defined_twice(name) {
                    troubled
                        .entry(name.to_string())
                        .or_insert_with(|| error.clone());
                }
            }
        }
        troubled
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
    /// The line each valid policy's document starts at, by name.
    lines: BTreeMap<String, u32>,
    /// Names whose definition at head has errors, with the first one (see `PolicyIndex`).
    troubled: BTreeMap<String, Diagnostic>,
    /// Last valid versions of names no file defines any more.
    retired: BTreeMap<String, Arc<RolloutPolicy>>,
    /// The changes waiting for an admin's approval (issue #44).
    governance: crate::unapproved::Governance,
}

/// Why the policy governing a promotion cannot be resolved now. The controller fails closed on
/// it: the run in progress goes on under its last valid policy, nothing new starts.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyProblem {
    /// What is wrong, where (file and line) and how to fix it.
    pub message: String,
    /// The chosen policy when only its file is broken: its last valid version. For a change no
    /// admin approved yet: the version in force.
    pub chosen: Option<Arc<RolloutPolicy>>,
    /// The problem is a change waiting for an admin (`PolicyChangeUnapproved`), not an error.
    pub unapproved: bool,
    /// The policies at head, for the last valid version of the one that governed a run.
    pub set: PolicySet,
}

impl PolicyProblem {
    /// The last valid version of the policy to keep a run going under: the chosen one, or the
    /// one that governed the run (`governed`, the name in its status), if git ever had it.
    pub fn last_valid(&self, governed: Option<&str>) -> Option<Arc<RolloutPolicy>> {
        self.chosen
            .clone()
            .or_else(|| self.set.last_valid(governed?))
    }
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
                ..PolicySetInner::default()
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

    /// `file:line` of a valid policy's document.
    fn place_of(&self, name: &str) -> String {
        let file = self.file_of(name).unwrap_or("?");
        match self.inner.lines.get(name) {
            Some(line) => format!("{file}:{line}"),
            None => file.to_string(),
        }
    }

    /// The last valid version of `name`, whether a file still defines it or not.
    pub fn last_valid(&self, name: &str) -> Option<Arc<RolloutPolicy>> {
        self.policies()
            .find(|(policy, _)| policy.name() == name)
            .map(|(policy, _)| Arc::clone(policy))
            .or_else(|| self.inner.retired.get(name).cloned())
    }

    /// The policy governing a promotion: [`choose_policy`]. A conflict, a missing name, or a
    /// chosen policy whose definition at head has errors is a [`PolicyProblem`] naming files,
    /// lines and the fix. `file` is the promotion's file (where its annotation is written).
    pub fn choose(
        &self,
        promotion: &ClusterPromotion,
        file: &str,
    ) -> Result<Option<Arc<RolloutPolicy>>, PolicyProblem> {
        self.choose_at(promotion, file, None)
    }

    /// [`Self::choose`], with where the promotion's `tollgate.dev/policy` annotation is written
    /// (line, column), for a message that names it as `validate` does.
    pub fn choose_at(
        &self,
        promotion: &ClusterPromotion,
        file: &str,
        annotation_at: Option<(u32, u32)>,
    ) -> Result<Option<Arc<RolloutPolicy>>, PolicyProblem> {
        let place = match annotation_at {
            Some((line, column)) => format!("{file}:{line}:{column}"),
            None => file.to_string(),
        };
        let file = place.as_str();
        let chosen = choose_policy(&promotion.metadata, self.policies().map(|(p, _)| &**p));
        let problem = |message: String, chosen: Option<Arc<RolloutPolicy>>| PolicyProblem {
            message,
            chosen,
            unapproved: false,
            set: self.clone(),
        };
        let chosen_name = chosen.as_ref().ok().copied().flatten().map(|p| p.name());
        if let Some(waiting) = self.unapproved(&promotion.metadata.name, chosen_name) {
            return Err(PolicyProblem {
                message: waiting.message(),
                chosen: Some(Arc::clone(&waiting.in_force)),
                unapproved: true,
                set: self.clone(),
            });
        }
        match chosen {
            Ok(None) => Ok(None),
            Ok(Some(chosen)) => {
                let chosen = self
                    .policies()
                    .find(|(policy, _)| std::ptr::eq(&***policy, chosen))
                    .map(|(policy, _)| Arc::clone(policy));
                match chosen.as_ref().and_then(|c| self.troubled(c.name())) {
                    Some(message) => Err(problem(message, chosen)),
                    None => Ok(chosen),
                }
            }
            Err(error) => Err(problem(self.describe(&error, file), None)),
        }
    }

    /// The changes waiting for an admin's approval.
    pub fn governance(&self) -> &crate::unapproved::Governance {
        &self.inner.governance
    }

    /// The set with the changes waiting for an admin.
    pub(crate) fn with_governance(mut self, governance: crate::unapproved::Governance) -> Self {
        Arc::make_mut(&mut self.inner).governance = governance;
        self
    }

    /// The change an admin has to approve before promotion `name` may start a run: one to the
    /// promotion's relation to its policy, or to the policy it chooses (`chosen`).
    fn unapproved(
        &self,
        name: &str,
        chosen: Option<&str>,
    ) -> Option<&crate::unapproved::Unapproved> {
        let governance = &self.inner.governance;
        governance
            .promotions
            .get(name)
            .or_else(|| governance.policies.get(chosen?))
    }

    /// The error of a chosen policy whose definition at head is broken, and the fix.
    fn troubled(&self, name: &str) -> Option<String> {
        let error = self.inner.troubled.get(name)?;
        let what = field_and_message(error);
        Some(format!(
            "RolloutPolicy {name:?} has an error at {}:{}:{} ({what}); its last valid version governs the run in progress: fix the file",
            error.file, error.line, error.column
        ))
    }

    fn describe(&self, error: &PolicyChoiceError, file: &str) -> String {
        match error {
            PolicyChoiceError::Conflict { first, second } => format!(
                "RolloutPolicies {first:?} ({}) and {second:?} ({}) both select this promotion ({file}): name one with the annotation {POLICY_ANNOTATION}, or narrow a selector",
                self.place_of(first),
                self.place_of(second)
            ),
            PolicyChoiceError::Missing(name) => match self.inner.unusable.get(name) {
                Some(defined) => {
                    // Where its definition fails, as `validate` reports it.
                    let error = match self.inner.troubled.get(name) {
                        Some(e) => format!(
                            "has no valid version ({}:{}:{}: {})",
                            e.file,
                            e.line,
                            e.column,
                            field_and_message(e)
                        ),
                        None => format!("{defined} defines but which has no valid version"),
                    };
                    format!(
                        "{file}: annotation {POLICY_ANNOTATION} names RolloutPolicy {name:?}, which {error}: fix the errors reported for it"
                    )
                }
                None => format!(
                    "{file}: annotation {POLICY_ANNOTATION} names RolloutPolicy {name:?}, which no file defines: add it, or correct the annotation"
                ),
            },
        }
    }
}

/// `field: message`, or the message alone for a syntax error (it belongs to no field: no empty
/// `(: …`).
fn field_and_message(error: &Diagnostic) -> String {
    match error.path.as_str() {
        "" => error.message.clone(),
        path => format!("{path}: {}", error.message),
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
            attributions: Vec::new(),
            ignored: Vec::new(),
            policy_approvals: Vec::new(),
            approvals: Vec::new(),
            contributors: Arc::from([]),
            info: Arc::new(CommitInfo {
                sha: "0".repeat(40),
                seq: 0,
                author: String::new(),
                author_email: String::new(),
                committer: String::new(),
                committer_email: String::new(),
                time: chrono::DateTime::UNIX_EPOCH,
                committed: chrono::DateTime::UNIX_EPOCH,
                subject: String::new(),
                signature: None,
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
        let error = index
            .set()
            .choose(&promotion, "app.yaml")
            .expect_err("unusable")
            .message;
        assert!(
            error.contains(
                "\"a\", which has no valid version (p.yaml:6:21: spec.progressDeadline: "
            ),
            "{error}"
        );
    }

    fn app(annotation: Option<&str>) -> ClusterPromotion {
        let annotations = match annotation {
            Some(name) => serde_json::json!({POLICY_ANNOTATION: name}),
            None => serde_json::json!({}),
        };
        serde_json::from_value(serde_json::json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "app", "annotations": annotations},
            "spec": {"stages": []},
        }))
        .expect("promotion")
    }

    #[test]
    fn a_chosen_policy_whose_file_stops_parsing_is_a_problem_with_its_last_valid_version() {
        let mut index = PolicyIndex::default();
        apply(&mut index, &[("p.yaml", Some(&policy("a", "1m")))]);
        let chosen = index.set().choose(&app(Some("a")), "app.yaml");
        assert!(matches!(chosen, Ok(Some(_))));
        apply(&mut index, &[("p.yaml", Some("kind: [\n"))]);
        let problem = index
            .set()
            .choose(&app(Some("a")), "app.yaml")
            .expect_err("broken");
        assert!(
            problem
                .message
                .starts_with("RolloutPolicy \"a\" has an error at p.yaml:1:"),
            "{}",
            problem.message
        );
        assert!(
            problem.message.ends_with("fix the file"),
            "{}",
            problem.message
        );
        let last = problem.last_valid(None).expect("last valid version");
        assert_eq!(
            last.spec
                .progress_deadline
                .as_ref()
                .map(|d| d.value.as_secs()),
            Some(60)
        );
        // An invalid document (not a syntax error) is a problem too.
        apply(&mut index, &[("p.yaml", Some(&policy("a", "forever")))]);
        let problem = index.set().choose(&app(Some("a")), "app.yaml");
        assert!(problem.is_err(), "{problem:?}");
        apply(&mut index, &[("p.yaml", Some(&policy("a", "2m")))]);
        assert!(matches!(
            index.set().choose(&app(Some("a")), "app.yaml"),
            Ok(Some(_))
        ));
    }

    #[test]
    fn a_removed_policy_keeps_its_last_valid_version_for_the_run_it_governed() {
        let mut index = PolicyIndex::default();
        apply(&mut index, &[("p.yaml", Some(&policy("a", "1m")))]);
        apply(&mut index, &[("p.yaml", None)]);
        let set = index.set();
        assert_eq!(set.policies().count(), 0, "not selectable any more");
        let problem = set
            .choose(&app(Some("a")), "app.yaml")
            .expect_err("missing");
        assert!(
            problem.message.contains("which no file defines"),
            "{}",
            problem.message
        );
        assert!(problem.last_valid(None).is_none(), "nothing chosen");
        assert!(
            problem.last_valid(Some("a")).is_some(),
            "the governing one is kept"
        );
        apply(&mut index, &[("q.yaml", Some(&policy("a", "3m")))]);
        assert_eq!(
            index.set().last_valid("a").and_then(|p| p
                .spec
                .progress_deadline
                .as_ref()
                .map(|d| d.value.as_secs())),
            Some(180)
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

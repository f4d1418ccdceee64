//! `plan`: what a commit range would do to each promotion, computed offline from git. Reads every
//! manifest at both ends of the range, compares each promotion's two versions under the restart
//! rules (DESIGN §4: any content-hash change restarts from stage 1, trigger edits do not), and
//! walks first-parent history of the range's end to recognise rollbacks (DESIGN §5).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use git2::{Commit, ObjectType, Oid, Repository, TreeWalkMode, TreeWalkResult};
use serde_json::Value;
use tollgate_spec::model::{LabelSelector, Trigger};
use tollgate_spec::{ClusterPromotion, SpecHashes};

use crate::blob::{
    BlobContent, Diagnostic, Limits, ParsedBlob, duplicate_name_diagnostic, parse_blob,
};
use crate::treediff::{Root, is_manifest, resolve_root};

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("cannot open git repository {repo}: {source}")]
    Open {
        repo: String,
        #[source]
        source: git2::Error,
    },
    #[error("cannot resolve revision {rev:?} to a commit: {source}")]
    Revision {
        rev: String,
        #[source]
        source: git2::Error,
    },
    #[error("cannot read {what} at commit {commit}: {source}")]
    Read {
        commit: String,
        what: String,
        #[source]
        source: git2::Error,
    },
    #[error("cannot walk first-parent history from {commit}: {source}")]
    Walk {
        commit: String,
        #[source]
        source: git2::Error,
    },
}

/// One end of the range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revision {
    /// As the user wrote it.
    pub rev: String,
    pub sha: String,
    pub subject: String,
}

/// What the range does to every promotion defined at either end.
#[derive(Clone, Debug, PartialEq)]
pub struct RangePlan {
    pub from: Revision,
    pub to: Revision,
    /// By name.
    pub promotions: Vec<PromotionPlan>,
    /// Errors at `to` in files that define no (nameable) promotion.
    pub file_errors: Vec<Diagnostic>,
}

impl RangePlan {
    /// Whether `to` has invalid promotions or unreadable manifest files.
    pub fn has_invalid(&self) -> bool {
        !self.file_errors.is_empty()
            || self
                .promotions
                .iter()
                .any(|p| p.status == PlanStatus::Invalid)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanStatus {
    /// New at `to`: the pipeline starts at stage 1.
    Added,
    /// Gone at `to`.
    Removed,
    /// Content hashes changed: the pipeline restarts from stage 1.
    Restart,
    /// Only triggers, annotations or other non-hashed fields changed: no restart.
    TriggerOnly,
    Unchanged,
    /// Invalid at `to`: the last good snapshot keeps running.
    Invalid,
    /// Invalid at `from`, valid at `to`.
    Recovered,
}

impl PlanStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanStatus::Added => "added",
            PlanStatus::Removed => "removed",
            PlanStatus::Restart => "restart",
            PlanStatus::TriggerOnly => "trigger-only",
            PlanStatus::Unchanged => "unchanged",
            PlanStatus::Invalid => "invalid",
            PlanStatus::Recovered => "recovered",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct PromotionPlan {
    pub name: String,
    /// The file defining it at `to` (at `from` when removed).
    pub file: Option<String>,
    pub status: PlanStatus,
    /// Snapshot id (hex) at `from` and at `to`, when valid there.
    pub snapshot_from: Option<String>,
    pub snapshot_to: Option<String>,
    /// Which content hash changed (for [`PlanStatus::Restart`]).
    pub profile_spec_changed: bool,
    pub stages_changed: bool,
    /// The stages that will run (again), in order: all of them when the pipeline (re)starts.
    pub stages_rerun: Vec<String>,
    pub approvals: Vec<ApprovalNeed>,
    pub selector_changes: Vec<SelectorChange>,
    pub stages_added: Vec<String>,
    pub stages_removed: Vec<String>,
    /// Old and new order of the stages both versions have, when it changed.
    pub stages_reordered: Option<(Vec<String>, Vec<String>)>,
    pub chart_changes: Vec<ChartChange>,
    /// Top-level profileSpec fields other than `helmCharts` whose value changed.
    pub profile_fields_changed: Vec<String>,
    pub trigger_changes: Vec<TriggerChange>,
    /// Set when `to`'s content equals an earlier snapshot's along first-parent history.
    pub rollback_to: Option<u64>,
    pub warnings: Vec<String>,
    /// Why it is invalid at `to`.
    pub diagnostics: Vec<Diagnostic>,
}

impl PromotionPlan {
    fn new(name: &str, status: PlanStatus) -> Self {
        PromotionPlan {
            name: name.to_string(),
            file: None,
            status,
            snapshot_from: None,
            snapshot_to: None,
            profile_spec_changed: false,
            stages_changed: false,
            stages_rerun: Vec::new(),
            approvals: Vec::new(),
            selector_changes: Vec::new(),
            stages_added: Vec::new(),
            stages_removed: Vec::new(),
            stages_reordered: None,
            chart_changes: Vec::new(),
            profile_fields_changed: Vec::new(),
            trigger_changes: Vec::new(),
            rollback_to: None,
            warnings: Vec::new(),
            diagnostics: Vec::new(),
        }
    }
}

/// An approval the new run of a manual stage will need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalNeed {
    pub stage: String,
    pub need: Need,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// `automaticReset: true` (default): approvals are consumed by one run, so the new run needs
    /// a fresh one (`tollgate approve <name> <stage>` once the run reaches the stage).
    Fresh,
    /// `automaticReset: false` and `approved: true`: the standing approval lets it pass.
    Standing,
    /// `automaticReset: false`, not approved: needs `approved: true` or an approval annotation.
    Pending,
}

impl Need {
    pub fn as_str(self) -> &'static str {
        match self {
            Need::Fresh => "fresh approval needed",
            Need::Standing => "passes (standing approval)",
            Need::Pending => "approval needed",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectorChange {
    pub stage: String,
    pub old: String,
    pub new: String,
}

/// A Helm chart, identified by its release (`releaseNamespace/releaseName`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChartChange {
    pub release: String,
    pub old: Option<ChartRef>,
    pub new: Option<ChartRef>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChartRef {
    pub repository_url: String,
    pub chart_name: String,
    pub chart_version: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriggerChange {
    pub stage: String,
    pub old: String,
    pub new: String,
}

/// A promotion's definition at one commit.
#[derive(Clone, Debug)]
enum Definition {
    Valid {
        promotion: Arc<ClusterPromotion>,
        file: String,
    },
    Invalid {
        diagnostics: Vec<Diagnostic>,
        file: String,
    },
}

/// Every promotion defined at one commit, plus errors of files that name none.
#[derive(Default)]
struct Definitions {
    by_name: BTreeMap<String, Definition>,
    /// Names each file defines.
    claims: BTreeMap<String, Vec<String>>,
    /// Files with errors that belong to no name.
    file_errors: BTreeMap<String, Vec<Diagnostic>>,
}

/// Reads and parses manifests; a blob is parsed once.
struct Reader<'r> {
    repo: &'r Repository,
    path: String,
    limits: Limits,
    parsed: HashMap<Oid, Arc<ParsedBlob>>,
}

impl<'r> Reader<'r> {
    fn read_error(commit: Oid, what: &str) -> impl FnOnce(git2::Error) -> PlanError {
        let what = what.to_string();
        move |source| PlanError::Read {
            commit: commit.to_string(),
            what,
            source,
        }
    }

    fn root(&self, commit: &Commit<'_>) -> Result<Option<Root>, PlanError> {
        resolve_root(self.repo, commit.tree_id(), &self.path)
            .map_err(Self::read_error(commit.id(), "the tracked path"))
    }

    /// Manifest files (path from the repository root, blob) under the tracked path.
    fn manifests(&self, commit: Oid, root: Option<Root>) -> Result<Vec<(String, Oid)>, PlanError> {
        let mut files = Vec::new();
        match root {
            None => {}
            Some(Root::File(blob)) => files.push((self.path.clone(), blob)),
            Some(Root::Tree(tree)) => {
                let tree = self
                    .repo
                    .find_tree(tree)
                    .map_err(Self::read_error(commit, "the tracked tree"))?;
                let prefix = if self.path.is_empty() {
                    String::new()
                } else {
                    format!("{}/", self.path)
                };
                tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
                    let name = entry.name().unwrap_or_default();
                    let regular = entry.filemode() == 0o100644 || entry.filemode() == 0o100755;
                    if entry.kind() == Some(ObjectType::Blob) && regular && is_manifest(name) {
                        files.push((format!("{prefix}{dir}{name}"), entry.id()));
                    }
                    TreeWalkResult::Ok
                })
                .map_err(Self::read_error(commit, "the tracked tree"))?;
            }
        }
        files.sort();
        Ok(files)
    }

    fn parse(&mut self, commit: Oid, file: &str, blob: Oid) -> Result<Arc<ParsedBlob>, PlanError> {
        if let Some(parsed) = self.parsed.get(&blob) {
            return Ok(Arc::clone(parsed));
        }
        let content = BlobContent::read(self.repo, blob, &self.limits)
            .map_err(Self::read_error(commit, file))?;
        let parsed = Arc::new(parse_blob(file, &content, &self.limits));
        self.parsed.insert(blob, Arc::clone(&parsed));
        Ok(parsed)
    }

    fn definitions(&mut self, commit: &Commit<'_>) -> Result<Definitions, PlanError> {
        let root = self.root(commit)?;
        self.definitions_at(commit.id(), root)
    }

    fn definitions_at(
        &mut self,
        commit: Oid,
        root: Option<Root>,
    ) -> Result<Definitions, PlanError> {
        let mut found: BTreeMap<String, Vec<Definition>> = BTreeMap::new();
        let mut definitions = Definitions::default();
        for (file, blob) in self.manifests(commit, root)? {
            let parsed = self.parse(commit, &file, blob)?;
            let mut names = Vec::new();
            for doc in &parsed.docs {
                names.push(doc.name.clone());
                let definition = match &doc.outcome {
                    Ok(promotion) => Definition::Valid {
                        promotion: Arc::clone(promotion),
                        file: file.clone(),
                    },
                    Err(errors) => Definition::Invalid {
                        diagnostics: ParsedBlob::relocate(errors, &file),
                        file: file.clone(),
                    },
                };
                found.entry(doc.name.clone()).or_default().push(definition);
            }
            if !parsed.file_errors.is_empty() {
                definitions.file_errors.insert(
                    file.clone(),
                    ParsedBlob::relocate(&parsed.file_errors, &file),
                );
            }
            definitions.claims.insert(file, names);
        }
        for (name, mut list) in found {
            let definition = if list.len() == 1 {
                list.remove(0)
            } else {
                let files: Vec<String> = list.iter().map(|d| file_of(d).to_string()).collect();
                let files: Vec<&str> = files.iter().map(String::as_str).collect();
                Definition::Invalid {
                    diagnostics: vec![duplicate_name_diagnostic(&name, &files)],
                    file: files.first().copied().unwrap_or_default().to_string(),
                }
            };
            definitions.by_name.insert(name, definition);
        }
        Ok(definitions)
    }

    /// Snapshot hashes per promotion along first-parent history up to `tip`, in index order
    /// (index = position + 1), numbered as the source's history numbers them.
    fn snapshot_history(
        &mut self,
        tip: &Commit<'_>,
    ) -> Result<BTreeMap<String, Vec<SpecHashes>>, PlanError> {
        let walk_error = |source| PlanError::Walk {
            commit: tip.id().to_string(),
            source,
        };
        let mut walk = self.repo.revwalk().map_err(walk_error)?;
        walk.simplify_first_parent().map_err(walk_error)?;
        walk.push(tip.id()).map_err(walk_error)?;
        let mut commits = walk.collect::<Result<Vec<Oid>, _>>().map_err(walk_error)?;
        commits.reverse();
        let mut history: BTreeMap<String, Vec<SpecHashes>> = BTreeMap::new();
        let mut previous_root = None;
        for oid in commits {
            let commit = self
                .repo
                .find_commit(oid)
                .map_err(Self::read_error(oid, "the commit"))?;
            let root = self.root(&commit)?;
            if previous_root == Some(root) {
                continue;
            }
            previous_root = Some(root);
            for (name, definition) in self.definitions_at(oid, root)?.by_name {
                if let Definition::Valid { promotion, .. } = definition {
                    let hashes = SpecHashes::of(&promotion);
                    let snapshots = history.entry(name).or_default();
                    if snapshots.last() != Some(&hashes) {
                        snapshots.push(hashes);
                    }
                }
            }
        }
        Ok(history)
    }
}

fn file_of(definition: &Definition) -> &str {
    match definition {
        Definition::Valid { file, .. } | Definition::Invalid { file, .. } => file,
    }
}

fn resolve<'r>(repo: &'r Repository, rev: &str) -> Result<Commit<'r>, PlanError> {
    repo.revparse_single(rev)
        .and_then(|object| object.peel_to_commit())
        .map_err(|source| PlanError::Revision {
            rev: rev.to_string(),
            source,
        })
}

fn revision(rev: &str, commit: &Commit<'_>) -> Revision {
    Revision {
        rev: rev.to_string(),
        sha: commit.id().to_string(),
        subject: commit
            .summary_bytes()
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .unwrap_or_default(),
    }
}

/// Plans the range `from..to` of the local repository at `repo`.
pub fn plan_range(
    repo: &std::path::Path,
    from: &str,
    to: &str,
    path: &str,
) -> Result<RangePlan, PlanError> {
    let repository = Repository::open(repo).map_err(|source| PlanError::Open {
        repo: repo.display().to_string(),
        source,
    })?;
    plan_range_in(&repository, from, to, path)
}

/// Plans the range `from..to` for the manifests under `path` (`""` = the whole repository).
pub fn plan_range_in(
    repo: &Repository,
    from: &str,
    to: &str,
    path: &str,
) -> Result<RangePlan, PlanError> {
    let from_commit = resolve(repo, from)?;
    let to_commit = resolve(repo, to)?;
    let mut reader = Reader {
        repo,
        path: path
            .split('/')
            .filter(|part| !part.is_empty() && *part != ".")
            .collect::<Vec<_>>()
            .join("/"),
        limits: Limits::default(),
        parsed: HashMap::new(),
    };
    let before = reader.definitions(&from_commit)?;
    let after = reader.definitions(&to_commit)?;
    let history = reader.snapshot_history(&to_commit)?;
    // A promotion invalid at `from` still runs its last good snapshot: that is what `to`
    // compares against. Only walked when some promotion recovers.
    let recovers = before.by_name.iter().any(|(name, definition)| {
        matches!(definition, Definition::Invalid { .. })
            && matches!(after.by_name.get(name), Some(Definition::Valid { .. }))
    });
    let from_history = if recovers {
        reader.snapshot_history(&from_commit)?
    } else {
        BTreeMap::new()
    };

    let names: BTreeSet<&String> = before.by_name.keys().chain(after.by_name.keys()).collect();
    let mut promotions = Vec::new();
    let mut claimed_file_errors = BTreeSet::new();
    for name in names {
        let old = before.by_name.get(name.as_str());
        let new = after.by_name.get(name.as_str());
        let mut plan = match (old, new) {
            (_, Some(Definition::Invalid { diagnostics, file })) => {
                let mut plan = PromotionPlan::new(name, PlanStatus::Invalid);
                plan.file = Some(file.clone());
                plan.diagnostics = diagnostics.clone();
                plan
            }
            (
                None | Some(Definition::Invalid { .. }),
                Some(Definition::Valid { promotion, file }),
            ) => {
                let status = if old.is_some() {
                    PlanStatus::Recovered
                } else {
                    PlanStatus::Added
                };
                let mut plan = PromotionPlan::new(name, status);
                plan.file = Some(file.clone());
                let hashes = SpecHashes::of(promotion);
                let last_good = from_history.get(name.as_str()).and_then(|s| s.last());
                if let Some(last_good) = last_good {
                    plan.snapshot_from = Some(last_good.snapshot_id.clone());
                    plan.profile_spec_changed = last_good.profile_spec != hashes.profile_spec;
                    plan.stages_changed = last_good.stages != hashes.stages;
                }
                if last_good != Some(&hashes) {
                    starts_run(&mut plan, promotion);
                }
                plan.snapshot_to = Some(hashes.snapshot_id);
                plan
            }
            (
                Some(Definition::Valid { promotion: old, .. }),
                Some(Definition::Valid {
                    promotion: new,
                    file,
                }),
            ) => {
                let mut plan = compare(name, old, new);
                plan.file = Some(file.clone());
                plan
            }
            (Some(old), None) => {
                // A file that no longer parses at all keeps the names it defined: they are
                // invalid, not removed (as the controller sees it).
                let file = file_of(old);
                match after.file_errors.get(file) {
                    Some(errors) if after.claims.get(file).is_some_and(Vec::is_empty) => {
                        claimed_file_errors.insert(file.to_string());
                        let mut plan = PromotionPlan::new(name, PlanStatus::Invalid);
                        plan.file = Some(file.to_string());
                        plan.diagnostics = errors.clone();
                        plan
                    }
                    _ => removed(name, old),
                }
            }
            (None, None) => continue,
        };
        if let Some(snapshots) = history.get(name.as_str())
            && let Some(Definition::Valid { promotion, .. }) = new
            && plan.status != PlanStatus::Unchanged
        {
            let hashes = SpecHashes::of(promotion);
            if let Some(position) = snapshots.iter().position(|h| *h == hashes)
                && position + 1 < snapshots.len()
            {
                plan.rollback_to = Some(position as u64 + 1);
            }
        }
        promotions.push(plan);
    }
    let file_errors = after
        .file_errors
        .iter()
        .filter(|(file, _)| !claimed_file_errors.contains(*file))
        .flat_map(|(_, errors)| errors.iter().cloned())
        .collect();
    Ok(RangePlan {
        from: revision(from, &from_commit),
        to: revision(to, &to_commit),
        promotions,
        file_errors,
    })
}

fn removed(name: &str, old: &Definition) -> PromotionPlan {
    let mut plan = PromotionPlan::new(name, PlanStatus::Removed);
    plan.file = Some(file_of(old).to_string());
    if let Definition::Valid { promotion, .. } = old {
        plan.snapshot_from = Some(SpecHashes::of(promotion).snapshot_id);
        let stages = promotion.spec.stages.len();
        plan.warnings.push(if promotion.spec.preserve_cluster_profiles_on_delete {
            format!(
                "removal keeps the {stages} generated ClusterProfile(s) (preserveClusterProfilesOnDelete: true): add-ons stay deployed, unmanaged"
            )
        } else {
            format!(
                "removal deletes the {stages} generated ClusterProfile(s): add-ons are withdrawn from every matching cluster (set preserveClusterProfilesOnDelete: true first to keep them)"
            )
        });
    }
    plan
}

/// A (re)started pipeline: every stage runs, in order; every manual stage needs its approval.
fn starts_run(plan: &mut PromotionPlan, promotion: &ClusterPromotion) {
    plan.stages_rerun = promotion
        .spec
        .stages
        .iter()
        .map(|s| s.name.clone())
        .collect();
    plan.approvals = promotion
        .spec
        .stages
        .iter()
        .filter_map(|stage| match &stage.trigger {
            Some(Trigger::Manual(manual)) => Some(ApprovalNeed {
                stage: stage.name.clone(),
                need: if manual.automatic_reset {
                    Need::Fresh
                } else if manual.approved == Some(true) {
                    Need::Standing
                } else {
                    Need::Pending
                },
            }),
            _ => None,
        })
        .collect();
    for stage in &promotion.spec.stages {
        if stage.cluster_selector.is_empty() {
            plan.warnings.push(format!(
                "stage {:?} has an empty clusterSelector: it matches no cluster and completes at once",
                stage.name
            ));
        }
    }
}

fn compare(name: &str, old: &ClusterPromotion, new: &ClusterPromotion) -> PromotionPlan {
    let old_hashes = SpecHashes::of(old);
    let new_hashes = SpecHashes::of(new);
    let restart = old_hashes != new_hashes;
    let status = if restart {
        PlanStatus::Restart
    } else if old == new {
        PlanStatus::Unchanged
    } else {
        PlanStatus::TriggerOnly
    };
    let mut plan = PromotionPlan::new(name, status);
    plan.snapshot_from = Some(old_hashes.snapshot_id.clone());
    plan.snapshot_to = Some(new_hashes.snapshot_id.clone());
    plan.profile_spec_changed = old_hashes.profile_spec != new_hashes.profile_spec;
    plan.stages_changed = old_hashes.stages != new_hashes.stages;
    if restart {
        starts_run(&mut plan, new);
    }

    let old_stages: Vec<&str> = old.spec.stages.iter().map(|s| s.name.as_str()).collect();
    let new_stages: Vec<&str> = new.spec.stages.iter().map(|s| s.name.as_str()).collect();
    plan.stages_added = new_stages
        .iter()
        .filter(|s| !old_stages.contains(s))
        .map(|s| s.to_string())
        .collect();
    plan.stages_removed = old_stages
        .iter()
        .filter(|s| !new_stages.contains(s))
        .map(|s| s.to_string())
        .collect();
    for stage in &plan.stages_removed {
        plan.warnings.push(format!(
            "stage {stage:?} is removed: its generated ClusterProfile is pruned"
        ));
    }
    let common_old: Vec<String> = old_stages
        .iter()
        .filter(|s| new_stages.contains(s))
        .map(|s| s.to_string())
        .collect();
    let common_new: Vec<String> = new_stages
        .iter()
        .filter(|s| old_stages.contains(s))
        .map(|s| s.to_string())
        .collect();
    if common_old != common_new {
        plan.stages_reordered = Some((common_old, common_new));
    }
    for new_stage in &new.spec.stages {
        let Some(old_stage) = old.stage(&new_stage.name) else {
            continue;
        };
        if old_stage.cluster_selector != new_stage.cluster_selector {
            plan.selector_changes.push(SelectorChange {
                stage: new_stage.name.clone(),
                old: describe_selector(&old_stage.cluster_selector),
                new: describe_selector(&new_stage.cluster_selector),
            });
        }
        if old_stage.trigger != new_stage.trigger {
            plan.trigger_changes.push(TriggerChange {
                stage: new_stage.name.clone(),
                old: describe_trigger(old_stage.trigger.as_ref()),
                new: describe_trigger(new_stage.trigger.as_ref()),
            });
        }
    }
    plan.chart_changes = chart_changes(
        old.spec.profile_spec.helm_charts(),
        new.spec.profile_spec.helm_charts(),
    );
    let old_spec = &old.spec.profile_spec.0;
    let new_spec = &new.spec.profile_spec.0;
    let fields: BTreeSet<&String> = old_spec.keys().chain(new_spec.keys()).collect();
    plan.profile_fields_changed = fields
        .into_iter()
        .filter(|field| *field != "helmCharts" && old_spec.get(*field) != new_spec.get(*field))
        .cloned()
        .collect();
    if old.spec.preserve_cluster_profiles_on_delete != new.spec.preserve_cluster_profiles_on_delete
    {
        plan.profile_fields_changed.push(format!(
            "preserveClusterProfilesOnDelete ({} → {})",
            old.spec.preserve_cluster_profiles_on_delete,
            new.spec.preserve_cluster_profiles_on_delete
        ));
    }
    // A restart's warnings come from `starts_run`; an edit without restart still deserves the
    // empty-selector warning.
    if status == PlanStatus::TriggerOnly {
        for stage in &new.spec.stages {
            if stage.cluster_selector.is_empty() {
                plan.warnings.push(format!(
                    "stage {:?} has an empty clusterSelector: it matches no cluster and completes at once",
                    stage.name
                ));
            }
        }
    }
    plan
}

fn text_field(chart: &Value, field: &str) -> String {
    match chart.get(field) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn chart_ref(chart: &Value) -> ChartRef {
    ChartRef {
        repository_url: text_field(chart, "repositoryURL"),
        chart_name: text_field(chart, "chartName"),
        chart_version: text_field(chart, "chartVersion"),
    }
}

fn release_of(chart: &Value) -> String {
    let namespace = text_field(chart, "releaseNamespace");
    let release = text_field(chart, "releaseName");
    if namespace.is_empty() {
        release
    } else {
        format!("{namespace}/{release}")
    }
}

fn chart_changes(old: &[Value], new: &[Value]) -> Vec<ChartChange> {
    let old: BTreeMap<String, ChartRef> =
        old.iter().map(|c| (release_of(c), chart_ref(c))).collect();
    let new: BTreeMap<String, ChartRef> =
        new.iter().map(|c| (release_of(c), chart_ref(c))).collect();
    let releases: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    releases
        .into_iter()
        .filter(|release| old.get(*release) != new.get(*release))
        .map(|release| ChartChange {
            release: release.clone(),
            old: old.get(release).cloned(),
            new: new.get(release).cloned(),
        })
        .collect()
}

/// kubectl-style: `env=prod,tier in (a,b),!legacy`.
pub fn describe_selector(selector: &LabelSelector) -> String {
    if selector.is_empty() {
        return "(empty: matches no cluster)".to_string();
    }
    let mut parts: Vec<String> = selector
        .match_labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for requirement in &selector.match_expressions {
        let key = &requirement.key;
        let values = requirement.values.join(",");
        parts.push(match requirement.operator.as_str() {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other} ({values})"),
        });
    }
    parts.join(",")
}

/// A one-line summary of a stage trigger.
pub fn describe_trigger(trigger: Option<&Trigger>) -> String {
    let mut parts = Vec::new();
    let kind = match trigger {
        None => return "none".to_string(),
        Some(Trigger::Auto(auto)) => {
            if let Some(window) = &auto.promotion_window {
                parts.push(format!("window {}..{}", window.from, window.to));
            }
            "auto"
        }
        Some(Trigger::Manual(manual)) => {
            parts.push(format!("approved: {}", manual.approved.unwrap_or(false)));
            parts.push(format!("automaticReset: {}", manual.automatic_reset));
            "manual"
        }
    };
    if let Some(trigger) = trigger {
        if let Some(delay) = trigger.delay() {
            parts.insert(0, format!("delay {}", delay.text));
        }
        if !trigger.post_delay_health_checks().is_empty() {
            parts.push(format!(
                "{} post-delay health check(s)",
                trigger.post_delay_health_checks().len()
            ));
        }
        if !trigger.pre_health_check_deployment().is_empty() {
            parts.push(format!(
                "{} pre-health-check deployment(s)",
                trigger.pre_health_check_deployment().len()
            ));
        }
    }
    if parts.is_empty() {
        kind.to_string()
    } else {
        format!("{kind} ({})", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_spec::parse::parse_file;

    fn promotion(version: &str, selector: &str, approved: bool) -> ClusterPromotion {
        let text = format!(
            "apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata:
  name: app
spec:
  profileSpec:
    helmCharts:
    - repositoryURL: https://charts.example.com
      repositoryName: example
      chartName: example/app
      chartVersion: {version}
      releaseName: app
      releaseNamespace: apps
      helmChartAction: Install
  stages:
  - name: staging
    clusterSelector:
      matchLabels:
        env: {selector}
  - name: production
    clusterSelector:
      matchLabels:
        env: production
    trigger:
      manual:
        approved: {approved}
"
        );
        let parsed = parse_file("app.yaml", text.as_bytes(), &Limits::default());
        parsed.promotions[0]
            .promotion
            .clone()
            .unwrap_or_else(|| panic!("invalid fixture: {:?}", parsed.all_diagnostics()))
    }

    #[test]
    fn chart_bump_restarts_every_stage_and_needs_fresh_approval() {
        let plan = compare(
            "app",
            &promotion("1.0.0", "staging", false),
            &promotion("1.1.0", "staging", false),
        );
        assert_eq!(plan.status, PlanStatus::Restart);
        assert!(plan.profile_spec_changed && !plan.stages_changed);
        assert_eq!(plan.stages_rerun, ["staging", "production"]);
        assert_eq!(
            plan.approvals,
            [ApprovalNeed {
                stage: "production".into(),
                need: Need::Fresh
            }]
        );
        assert_eq!(plan.chart_changes.len(), 1);
        assert_eq!(plan.chart_changes[0].release, "apps/app");
        assert_eq!(
            plan.chart_changes[0]
                .new
                .as_ref()
                .map(|c| c.chart_version.as_str()),
            Some("1.1.0")
        );
    }

    #[test]
    fn trigger_edit_does_not_restart() {
        let plan = compare(
            "app",
            &promotion("1.0.0", "staging", false),
            &promotion("1.0.0", "staging", true),
        );
        assert_eq!(plan.status, PlanStatus::TriggerOnly);
        assert!(plan.stages_rerun.is_empty() && plan.approvals.is_empty());
        assert_eq!(plan.trigger_changes.len(), 1);
        assert_eq!(
            plan.trigger_changes[0].new,
            "manual (approved: true, automaticReset: true)"
        );
    }

    #[test]
    fn selector_change_is_reported_old_to_new() {
        let plan = compare(
            "app",
            &promotion("1.0.0", "staging", false),
            &promotion("1.0.0", "qa", false),
        );
        assert_eq!(plan.status, PlanStatus::Restart);
        assert!(plan.stages_changed && !plan.profile_spec_changed);
        assert_eq!(
            plan.selector_changes,
            [SelectorChange {
                stage: "staging".into(),
                old: "env=staging".into(),
                new: "env=qa".into()
            }]
        );
    }

    #[test]
    fn selectors_read_like_kubectl() {
        let selector: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"env": "prod"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "legacy", "operator": "DoesNotExist"}
            ]
        }))
        .expect("selector");
        assert_eq!(
            describe_selector(&selector),
            "env=prod,tier in (a,b),!legacy"
        );
        assert_eq!(
            describe_selector(&LabelSelector::default()),
            "(empty: matches no cluster)"
        );
    }

    #[test]
    fn empty_selector_warns_and_removal_names_what_happens_to_profiles() {
        let old = promotion("1.0.0", "staging", false);
        let mut new = promotion("1.1.0", "staging", false);
        new.spec.stages[0].cluster_selector = LabelSelector::default();
        let plan = compare("app", &old, &new);
        assert_eq!(plan.warnings.len(), 1, "{:?}", plan.warnings);
        assert!(plan.warnings[0].contains("\"staging\" has an empty clusterSelector"));

        let definition = |preserve| {
            let mut promotion = promotion("1.0.0", "staging", false);
            promotion.spec.preserve_cluster_profiles_on_delete = preserve;
            Definition::Valid {
                promotion: Arc::new(promotion),
                file: "app.yaml".into(),
            }
        };
        assert!(removed("app", &definition(true)).warnings[0].contains("keeps the 2 generated"));
        assert!(removed("app", &definition(false)).warnings[0].contains("deletes the 2 generated"));
    }
}

//! `plan`: the git side of "what would a commit range do". It reads first-parent history up to
//! each end of the range into the same snapshot index the controller builds, and reports per
//! promotion the snapshot running at the start, the one at the end, the approval events, and a
//! description of what changed. What that means for the rollout (restart, gates, prunes) is the
//! engine's to say (`tollgate_engine::preview`): no rollout rule lives here.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use git2::{Commit, Oid, Repository};
use serde_json::Value;
use tollgate_manifest::model::{LabelSelector, Trigger};
use tollgate_manifest::{ApprovalEvent, ClusterPromotion, Snapshot};
use tollgate_model::policy::RolloutPolicy;

use crate::blob::{Diagnostic, Limits, ParsedBlob};
use crate::error::SourceError;
use crate::index::HistoryIndex;
use crate::policies::{PolicyIndex, PolicySet};
use crate::read::DeltaReader;
use crate::report::PromotionView;

mod base;
mod policy_words;
pub use base::{BaseChoice, MergeBase};
pub use policy_words::describe_policy;

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("cannot open git repository {repo}: {source}")]
    Open {
        repo: String,
        #[source]
        source: git2::Error,
    },
    #[error("unknown revision {rev:?}: no commit, branch or tag of that name ({source})")]
    Revision {
        rev: String,
        #[source]
        source: git2::Error,
    },
    #[error(
        "{from} and {to} have no common ancestor (unrelated histories), so there is no merge base to compare with; pass --no-merge-base to compare the two tips"
    )]
    NoMergeBase { from: String, to: String },
    #[error(
        "the merge base of {from} and {to} is not in this shallow clone: fetch more history (`git fetch --unshallow`, or `fetch-depth: 0` for actions/checkout)"
    )]
    ShallowMissingBase { from: String, to: String },
    #[error("cannot find the merge base of {from} and {to}: {source}")]
    MergeBase {
        from: String,
        to: String,
        #[source]
        source: git2::Error,
    },
    #[error("cannot walk first-parent history from {commit}: {source}")]
    Walk {
        commit: String,
        #[source]
        source: git2::Error,
    },
    #[error(transparent)]
    Read(#[from] SourceError),
}

/// One end of the range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revision {
    /// As the user wrote it.
    pub rev: String,
    pub sha: String,
    pub subject: String,
}

/// What the range changes in every promotion defined at either end.
#[derive(Clone, Debug, PartialEq)]
pub struct RangePlan {
    pub from: Revision,
    pub to: Revision,
    /// The merge base of `from` and `to` the range starts from, when one was used (otherwise the
    /// range starts at `from`).
    pub merge_base: Option<MergeBase>,
    /// By name.
    pub promotions: Vec<PromotionPlan>,
    /// Errors at `to` in files that define no promotion.
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

/// What git shows of a promotion between the two ends (facts, not rollout meaning).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanStatus {
    /// New at `to`.
    Added,
    /// Gone at `to`.
    Removed,
    /// Valid at both ends with different content (spec, triggers or metadata).
    Changed,
    Unchanged,
    /// Invalid at `to`: the last good snapshot keeps running.
    Invalid,
    /// Invalid at `from`, valid at `to`.
    Recovered,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PromotionPlan {
    pub name: String,
    /// The file defining it at `to` (at `from` when removed).
    pub file: Option<String>,
    pub status: PlanStatus,
    /// The snapshot running at `from`: its last good snapshot there.
    pub before: Option<Arc<Snapshot>>,
    /// At `to`: the valid snapshot, or the last good one when invalid there.
    pub after: Option<Arc<Snapshot>>,
    /// Every approval event of the promotion up to `to`, in first-parent order.
    pub approvals: Vec<ApprovalEvent>,
    pub selector_changes: Vec<SelectorChange>,
    pub stages_added: Vec<String>,
    pub stages_removed: Vec<String>,
    /// Old and new order of the stages both versions have, when it changed.
    pub stages_reordered: Option<(Vec<String>, Vec<String>)>,
    pub chart_changes: Vec<ChartChange>,
    /// Top-level profileSpec fields other than `helmCharts` whose value changed.
    pub profile_fields_changed: Vec<String>,
    pub trigger_changes: Vec<TriggerChange>,
    /// Why it is invalid at `to`.
    pub diagnostics: Vec<Diagnostic>,
    /// The RolloutPolicy governing it at `to`.
    pub policy: Option<Arc<RolloutPolicy>>,
    /// Why no policy can be chosen at `to` (two select it, or its annotation names none).
    pub policy_error: Option<String>,
}

impl PromotionPlan {
    fn new(name: &str, status: PlanStatus) -> Self {
        PromotionPlan {
            name: name.to_string(),
            file: None,
            status,
            before: None,
            after: None,
            approvals: Vec::new(),
            selector_changes: Vec::new(),
            stages_added: Vec::new(),
            stages_removed: Vec::new(),
            stages_reordered: None,
            chart_changes: Vec::new(),
            profile_fields_changed: Vec::new(),
            trigger_changes: Vec::new(),
            diagnostics: Vec::new(),
            policy: None,
            policy_error: None,
        }
    }

    /// Snapshot id (hex) at `from`, when something ran there.
    pub fn snapshot_from(&self) -> Option<&str> {
        self.before
            .as_deref()
            .map(|s| s.hashes.snapshot_id.as_str())
    }

    /// Snapshot id (hex) at `to`, when valid there.
    pub fn snapshot_to(&self) -> Option<&str> {
        match self.status {
            PlanStatus::Invalid | PlanStatus::Removed => None,
            _ => self.after.as_deref().map(|s| s.hashes.snapshot_id.as_str()),
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

/// Reads first-parent history into snapshot indexes; a blob is parsed once for both ends.
struct Reader<'r> {
    repo: &'r Repository,
    display: String,
    path: String,
    limits: Limits,
    parsed: HashMap<Oid, Arc<ParsedBlob>>,
    /// The controller's `--verify-commits` and the checks made with its trusted keys: the
    /// indexes then number snapshots as the controller does (issue #44).
    verification: Option<(crate::VerifyCommits, crate::verify::CommitChecks)>,
}

impl Reader<'_> {
    /// The snapshot index of first-parent history up to `tip`, as the controller builds it.
    /// `proposed`: the tip is a change proposed for the branch (a pull request): it is read as
    /// a verified commit would be, the commits before it folding into it.
    fn index_at(
        &mut self,
        tip: &Commit<'_>,
        proposed: bool,
    ) -> Result<(HistoryIndex, PolicySet), PlanError> {
        let walk_error = |source| PlanError::Walk {
            commit: tip.id().to_string(),
            source,
        };
        let mut walk = self.repo.revwalk().map_err(walk_error)?;
        walk.simplify_first_parent().map_err(walk_error)?;
        walk.push(tip.id()).map_err(walk_error)?;
        let mut commits = walk.collect::<Result<Vec<Oid>, _>>().map_err(walk_error)?;
        commits.reverse();
        let reader = DeltaReader {
            repo: self.repo,
            display: &self.display,
            path: &self.path,
            limits: &self.limits,
        };
        let mut commits =
            crate::trust::accept_all(self.repo, &commits, 0).map_err(|(commit, source)| {
                PlanError::Walk {
                    commit: commit.to_string(),
                    source,
                }
            })?;
        let checks = match &mut self.verification {
            Some((mode, checks)) => {
                let ranges: Vec<(Oid, Vec<Oid>)> =
                    commits.iter().map(|c| (c.oid, c.range.clone())).collect();
                let pinned = proposed.then(|| tip.id());
                let screen =
                    crate::trust::screen(self.repo, &ranges, *mode, checks, (None, pinned));
                for (commit, accepted) in commits.iter_mut().zip(screen.accepted) {
                    commit.accepted = accepted;
                }
                Some(checks)
            }
            None => None,
        };
        let read = reader.read(&mut self.parsed, &commits, None, checks)?;
        let mut index = HistoryIndex::default();
        let mut policies = PolicyIndex::default();
        let mut prior = BTreeMap::new();
        for delta in &read.deltas {
            index.apply(delta, &mut prior);
            policies.apply(delta);
        }
        let names: Vec<String> = index.names().cloned().collect();
        index.refresh_views(&names);
        Ok((index, policies.set()))
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
    base: BaseChoice,
) -> Result<RangePlan, PlanError> {
    plan_range_verified(repo, (from, to), path, base, None)
}

/// [`plan_range`] under the controller's verification (`--verify-commits` with its trusted
/// keys): the base is indexed as the controller indexes the branch, and `to` as a verified
/// commit on top of it would be (issue #44).
pub fn plan_range_verified(
    repo: &std::path::Path,
    (from, to): (&str, &str),
    path: &str,
    base: BaseChoice,
    trust: Option<&crate::TrustConfig>,
) -> Result<RangePlan, PlanError> {
    let repository = Repository::open(repo).map_err(|source| PlanError::Open {
        repo: repo.display().to_string(),
        source,
    })?;
    let verification = match trust {
        Some(crate::TrustConfig {
            verify_commits: Some(mode),
            trusted_keys: Some(keys),
        }) => {
            let keys = crate::verify::TrustedKeys::read_dir(keys)
                .map_err(|error| PlanError::Read(SourceError::from(error)))?;
            Some((*mode, crate::verify::CommitChecks::new(Arc::new(keys))))
        }
        _ => None,
    };
    plan_in(&repository, (from, to), path, base, verification)
}

/// Plans the range `from..to` for the manifests under `path` (`""` = the whole repository),
/// starting from `from` or from the merge base of `from` and `to` as `base` says.
pub fn plan_range_in(
    repo: &Repository,
    from: &str,
    to: &str,
    path: &str,
    base: BaseChoice,
) -> Result<RangePlan, PlanError> {
    plan_in(repo, (from, to), path, base, None)
}

fn plan_in(
    repo: &Repository,
    (from, to): (&str, &str),
    path: &str,
    base: BaseChoice,
    verification: Option<(crate::VerifyCommits, crate::verify::CommitChecks)>,
) -> Result<RangePlan, PlanError> {
    let from_commit = resolve(repo, from)?;
    let to_commit = resolve(repo, to)?;
    let (start_commit, merge_base) =
        base::start_of_range(repo, base, (from, &from_commit), (to, &to_commit))?;
    let mut reader = Reader {
        repo,
        display: repo.path().display().to_string(),
        path: path
            .split('/')
            .filter(|part| !part.is_empty() && *part != ".")
            .collect::<Vec<_>>()
            .join("/"),
        limits: Limits::default(),
        parsed: HashMap::new(),
        verification,
    };
    let (before, _) = reader.index_at(&start_commit, false)?;
    let (after, policies) = reader.index_at(&to_commit, true)?;
    let view =
        |index: &HistoryIndex, name: &str| index.promotions.get(name).and_then(|h| h.view.clone());
    let names: BTreeSet<&String> = before.names().chain(after.names()).collect();
    let promotions: Vec<PromotionPlan> = names
        .into_iter()
        .filter_map(|name| {
            let mut plan = promotion_plan(name, view(&before, name), view(&after, name))?;
            if let Some(history) = after.promotions.get(name.as_str()) {
                plan.approvals = history.approvals.to_vec();
            }
            if let Some(snapshot) = &plan.after {
                match policies.choose(&snapshot.promotion, &snapshot.file) {
                    Ok(policy) => plan.policy = policy,
                    Err(problem) => plan.policy_error = Some(problem.message),
                }
            }
            Some(plan)
        })
        .collect();
    // Errors of files shown as no promotion's (each is normally claimed by an invalid one).
    let shown: BTreeSet<&str> = promotions
        .iter()
        .filter(|p| p.status == PlanStatus::Invalid)
        .filter_map(|p| p.file.as_deref())
        .collect();
    let file_errors = after
        .file_errors()
        .into_iter()
        .filter(|(file, _)| !shown.contains(file))
        .flat_map(|(_, errors)| errors.iter().cloned())
        .collect();
    Ok(RangePlan {
        from: revision(from, &from_commit),
        to: revision(to, &to_commit),
        merge_base,
        promotions,
        file_errors,
    })
}

/// A promotion's two ends; `None` when it exists at neither.
fn promotion_plan(
    name: &str,
    old: Option<PromotionView>,
    new: Option<PromotionView>,
) -> Option<PromotionPlan> {
    let running = old.as_ref().and_then(|v| v.effective_snapshot().cloned());
    let mut plan = match (&old, new) {
        (None, None) => return None,
        (_, Some(PromotionView::Invalid { errors, last_good })) => {
            let mut plan = PromotionPlan::new(name, PlanStatus::Invalid);
            plan.file = errors.first().map(|d| d.file.clone());
            plan.diagnostics = errors;
            plan.after = last_good;
            plan
        }
        (_, Some(PromotionView::Valid { snapshot })) => {
            let status = match (&old, &running) {
                (None, _) => PlanStatus::Added,
                (Some(PromotionView::Invalid { .. }), _) => PlanStatus::Recovered,
                (_, Some(running))
                    if running.hashes == snapshot.hashes
                        && running.promotion == snapshot.promotion =>
                {
                    PlanStatus::Unchanged
                }
                _ => PlanStatus::Changed,
            };
            let mut plan = PromotionPlan::new(name, status);
            plan.file = Some(snapshot.file.clone());
            if let Some(running) = &running {
                describe_changes(&mut plan, &running.promotion, &snapshot.promotion);
            }
            plan.after = Some(snapshot);
            plan
        }
        (Some(_), None) => {
            let mut plan = PromotionPlan::new(name, PlanStatus::Removed);
            plan.file = running.as_ref().map(|s| s.file.clone());
            plan
        }
    };
    plan.before = running;
    Some(plan)
}

/// What differs between two versions of a promotion, for a reader (not what it causes).
fn describe_changes(plan: &mut PromotionPlan, old: &ClusterPromotion, new: &ClusterPromotion) {
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
        &old.spec.profile_spec.helm_charts(),
        &new.spec.profile_spec.helm_charts(),
    );
    let old_spec = &old.spec.profile_spec.to_map();
    let new_spec = &new.spec.profile_spec.to_map();
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
    use tollgate_manifest::parse::parse_file;

    fn promotion(version: &str, selector: &str, approved: bool) -> ClusterPromotion {
        let text = tollgate_fixtures::promotion("app")
            .chart_in("apps", "app", version)
            .stage(tollgate_fixtures::stage("staging").selector("env", selector))
            .stage(
                tollgate_fixtures::stage("production")
                    .selector("env", "production")
                    .approved(approved),
            )
            .to_yaml();
        let parsed = parse_file("app.yaml", text.as_bytes(), &Limits::default());
        parsed.promotions[0]
            .promotion
            .clone()
            .unwrap_or_else(|| panic!("invalid fixture: {:?}", parsed.all_diagnostics()))
    }

    fn described(old: &ClusterPromotion, new: &ClusterPromotion) -> PromotionPlan {
        let mut plan = PromotionPlan::new("app", PlanStatus::Changed);
        describe_changes(&mut plan, old, new);
        plan
    }

    #[test]
    fn a_chart_bump_is_described_by_release() {
        let plan = described(
            &promotion("1.0.0", "staging", false),
            &promotion("1.1.0", "staging", false),
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
        assert!(plan.trigger_changes.is_empty() && plan.selector_changes.is_empty());
    }

    #[test]
    fn a_trigger_edit_is_described() {
        let plan = described(
            &promotion("1.0.0", "staging", false),
            &promotion("1.0.0", "staging", true),
        );
        assert_eq!(plan.trigger_changes.len(), 1);
        assert_eq!(
            plan.trigger_changes[0].new,
            "manual (approved: true, automaticReset: true)"
        );
    }

    #[test]
    fn selector_change_is_reported_old_to_new() {
        let plan = described(
            &promotion("1.0.0", "staging", false),
            &promotion("1.0.0", "qa", false),
        );
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
}

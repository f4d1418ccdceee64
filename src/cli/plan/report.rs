//! The plan of a commit range as one typed report (issue #46): built once from git's facts and
//! the engine's preview of each promotion; `-o json` serializes it as is, `text` and `markdown`
//! render it. Fields under `#[serde(skip)]` are words only those two print.

use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};
use tollgate_engine::preview::{GatePreview, RunStart, StartsAfter};
use tollgate_engine::{GateVerdict, RunChange};
use tollgate_manifest::snapshot::short_sha as short;
use tollgate_source::Diagnostic;
use tollgate_source::plan::{ChartRef, RangePlan, Revision};
use tollgate_source::trust::RangeVerification;

use super::estimate_report::EstimateReport;
use super::planned::{Planned, new_run_snapshot, outcome, planned, touched};
use super::targets::Fleet;
use super::{estimate, mermaid, words};

/// What a range would do, per promotion.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanReport {
    pub from: RevisionReport,
    pub to: RevisionReport,
    pub merge_base: Option<MergeBaseReport>,
    /// Whether `to` has invalid promotions (exit 1).
    pub invalid: bool,
    pub promotions: Vec<PromotionReport>,
    pub file_errors: Vec<DiagnosticReport>,
    /// `--trusted-keys`: whether the range's commits would verify (issue #33).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "serialize_verification"
    )]
    pub commit_verification: Option<RangeVerification>,
    /// Why the fleet's clusters (and the run history) could not be read.
    #[serde(skip)]
    pub fleet_warning: Option<String>,
}

#[derive(Serialize)]
pub struct RevisionReport {
    pub rev: String,
    pub sha: String,
    pub subject: String,
}

#[derive(Serialize)]
pub struct MergeBaseReport {
    pub sha: String,
    pub from: String,
    pub to: String,
}

/// One promotion: what the change does to its rollout.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromotionReport {
    pub name: String,
    pub file: Option<String>,
    /// The one-word outcome the summary counts: `restart`, `added`, `unchanged`…
    pub status: &'static str,
    pub restart: bool,
    pub profile_spec_changed: bool,
    pub stages_changed: bool,
    pub snapshot_from: Option<String>,
    pub snapshot_to: Option<String>,
    pub rollback_to: Option<u64>,
    pub same_content_as: Option<u64>,
    pub stages_rerun: Vec<String>,
    pub run_start: Option<RunStartReport>,
    pub approvals: Vec<GateReport>,
    pub prunes: Vec<String>,
    pub kept: Vec<String>,
    pub selector_changes: Vec<StageChange>,
    pub stages_added: Vec<String>,
    pub stages_removed: Vec<String>,
    pub stages_reordered: Option<Reordering>,
    pub chart_changes: Vec<ChartChangeReport>,
    pub profile_spec_fields_changed: Vec<String>,
    pub trigger_changes: Vec<StageChange>,
    pub warnings: Vec<String>,
    pub diagnostics: Vec<DiagnosticReport>,
    /// How long the run the change starts takes (none: it starts none).
    pub estimate: Option<EstimateReport>,
    /// What the change does, in a line.
    #[serde(skip)]
    pub headline: String,
    /// The detail rows as (label, text).
    #[serde(skip)]
    pub details: Vec<(&'static str, String)>,
    /// With the fleet (Markdown): the clusters each stage would hit, as (stage, targets).
    #[serde(skip)]
    pub clusters: Vec<(String, String)>,
    /// With the fleet: the Mermaid timeline of the run the change starts (Markdown prints it).
    #[serde(skip)]
    pub timeline: Option<String>,
}

/// A manual stage still ahead of the run: `need` is `approved`, `standing` or `needed`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GateReport {
    pub stage: String,
    pub need: &'static str,
    /// Approved: the approving commit, `null` when unknown (absent for other needs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<Option<String>>,
    /// Needed: how to approve.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// When the run starts, for scripts: what it waits for, and a blackout in force.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStartReport {
    pub waits: Waits,
    pub blackout_until: Option<DateTime<Utc>>,
    pub blackout_reason: Option<String>,
}

/// What the run waits for before its first stage (the engine's [`StartsAfter`]).
#[derive(Serialize)]
#[serde(tag = "for", rename_all_fields = "camelCase")]
pub enum Waits {
    #[serde(rename = "nothing")]
    Nothing { supersedes: Option<u64> },
    #[serde(rename = "nothing")]
    NothingAsARollback { rollback: bool },
    #[serde(rename = "runningRun")]
    RunningRun {
        on_new_snapshot: &'static str,
        running: u64,
        between: Vec<u64>,
    },
    #[serde(rename = "runInProgressIfAny")]
    RunInProgressIfAny { on_new_snapshot: &'static str },
    #[serde(rename = "policyFix")]
    PolicyFix { problem: String },
}

/// A stage's selector or trigger, before and after.
#[derive(Serialize)]
pub struct StageChange {
    pub stage: String,
    pub old: String,
    pub new: String,
}

/// The stage order, before and after.
#[derive(Serialize)]
pub struct Reordering {
    pub old: Vec<String>,
    pub new: Vec<String>,
}

#[derive(Serialize)]
pub struct ChartChangeReport {
    pub release: String,
    pub old: Option<ChartReport>,
    pub new: Option<ChartReport>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChartReport {
    #[serde(rename = "repositoryURL")]
    pub repository_url: String,
    pub chart_name: String,
    pub chart_version: String,
}

/// A validation problem, where it is.
#[derive(Serialize)]
pub struct DiagnosticReport {
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub path: String,
    pub code: &'static str,
    pub message: String,
    /// As `validate` prints it.
    #[serde(skip)]
    pub shown: String,
}

/// The outcomes the summary counts, in its order.
const OUTCOMES: [&str; 7] = [
    "restart",
    "added",
    "removed",
    "trigger-only",
    "recovered",
    "invalid",
    "unchanged",
];

impl PlanReport {
    /// The report of `plan` at `now`; with `fleet` (Markdown), each promotion is previewed with
    /// its live status and gets the clusters each stage hits and the estimated timeline.
    pub fn build(plan: &RangePlan, now: DateTime<Utc>, fleet: Option<&Fleet>) -> Self {
        let promotions = planned(plan, now, fleet)
            .iter()
            .map(|p| PromotionReport::build(p, fleet, now))
            .collect();
        PlanReport {
            from: RevisionReport::of(&plan.from),
            to: RevisionReport::of(&plan.to),
            merge_base: plan.merge_base.as_ref().map(|b| MergeBaseReport {
                sha: b.sha.clone(),
                from: b.from.clone(),
                to: b.to.clone(),
            }),
            invalid: plan.has_invalid(),
            promotions,
            file_errors: plan.file_errors.iter().map(DiagnosticReport::of).collect(),
            commit_verification: None,
            fleet_warning: fleet.and_then(Fleet::warning),
        }
    }

    /// How many promotions have each outcome: `1 restart, 2 unchanged`.
    pub fn summary_counts(&self) -> String {
        let parts: Vec<String> = OUTCOMES
            .iter()
            .filter_map(|label| {
                let n = self
                    .promotions
                    .iter()
                    .filter(|p| p.status == *label)
                    .count();
                (n > 0).then(|| format!("{n} {label}"))
            })
            .collect();
        if parts.is_empty() {
            "no promotions".to_string()
        } else {
            parts.join(", ")
        }
    }
}

fn serialize_verification<S: Serializer>(
    verification: &Option<RangeVerification>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    (verification.as_ref())
        .map(crate::cli::plan_verify::VerificationReport::of)
        .serialize(serializer)
}

impl RevisionReport {
    fn of(revision: &Revision) -> Self {
        RevisionReport {
            rev: revision.rev.clone(),
            sha: revision.sha.clone(),
            subject: revision.subject.clone(),
        }
    }

    /// The short sha, after the name it was given by when that is not the sha.
    pub fn label(&self) -> String {
        if self.rev == self.sha {
            short(&self.sha).to_string()
        } else {
            format!("{} ({})", self.rev, short(&self.sha))
        }
    }
}

impl MergeBaseReport {
    /// Which commit the range started from, when it is the merge base rather than `from`.
    pub fn line(&self) -> String {
        format!(
            "compared with merge base {} of {} and {}",
            short(&self.sha),
            self.from,
            self.to
        )
    }
}

impl DiagnosticReport {
    fn of(diagnostic: &Diagnostic) -> Self {
        DiagnosticReport {
            file: diagnostic.file.clone(),
            line: diagnostic.line,
            column: diagnostic.column,
            path: diagnostic.path.clone(),
            code: diagnostic.code,
            message: diagnostic.message.clone(),
            shown: diagnostic.to_string(),
        }
    }
}

impl PromotionReport {
    fn build(planned: &Planned<'_>, fleet: Option<&Fleet>, now: DateTime<Utc>) -> Self {
        let (plan, preview) = (planned.plan, &planned.preview);
        let (profile_spec_changed, stages_changed, same_content_as) = match &preview.run {
            RunChange::Restarts {
                profile_spec_changed,
                stages_changed,
                same_content_as,
                ..
            } => (*profile_spec_changed, *stages_changed, *same_content_as),
            _ => (false, false, None),
        };
        let estimated = fleet.and_then(|f| estimated(planned, f, now));
        let mut details = words::details(planned);
        if let Some((_, report)) = &estimated {
            details.push(("estimate", report.line()));
        }
        let approvals = match touched(planned) {
            true => preview.gates.iter().map(GateReport::of).collect(),
            false => Vec::new(),
        };
        PromotionReport {
            name: plan.name.clone(),
            file: plan.file.clone(),
            status: outcome(planned),
            restart: matches!(preview.run, RunChange::Restarts { .. }),
            profile_spec_changed,
            stages_changed,
            snapshot_from: plan.snapshot_from().map(str::to_string),
            snapshot_to: plan.snapshot_to().map(str::to_string),
            rollback_to: words::rollback_of(preview),
            same_content_as,
            stages_rerun: preview.stages_run.clone(),
            run_start: preview.run_start.as_ref().map(RunStartReport::of),
            approvals,
            prunes: preview.pruned.clone(),
            kept: preview.kept.clone(),
            selector_changes: (plan.selector_changes.iter())
                .map(|c| StageChange::of(&c.stage, &c.old, &c.new))
                .collect(),
            stages_added: plan.stages_added.clone(),
            stages_removed: plan.stages_removed.clone(),
            stages_reordered: (plan.stages_reordered.as_ref()).map(|(old, new)| Reordering {
                old: old.clone(),
                new: new.clone(),
            }),
            chart_changes: (plan.chart_changes.iter())
                .map(|c| ChartChangeReport {
                    release: c.release.clone(),
                    old: c.old.as_ref().map(ChartReport::of),
                    new: c.new.as_ref().map(ChartReport::of),
                })
                .collect(),
            profile_spec_fields_changed: plan.profile_fields_changed.clone(),
            trigger_changes: (plan.trigger_changes.iter())
                .map(|c| StageChange::of(&c.stage, &c.old, &c.new))
                .collect(),
            warnings: words::warnings(planned),
            diagnostics: plan.diagnostics.iter().map(DiagnosticReport::of).collect(),
            headline: words::headline(planned),
            details,
            clusters: fleet.map_or_else(Vec::new, |f| stage_targets(planned, f)),
            timeline: estimated.as_ref().map(|(timeline, _)| timeline.clone()),
            estimate: estimated.map(|(_, report)| report),
        }
    }
}

impl GateReport {
    fn of(gate: &GatePreview) -> Self {
        let (need, approved_by, hint) = match &gate.verdict {
            GateVerdict::Approved(approver) => ("approved", Some(approver.sha.clone()), None),
            GateVerdict::Standing => ("standing", None, None),
            GateVerdict::Waits(hint) => ("needed", None, Some(hint.clone())),
        };
        GateReport {
            stage: gate.stage.clone(),
            need,
            approved_by,
            hint,
        }
    }
}

impl RunStartReport {
    fn of(start: &RunStart) -> Self {
        let waits = match &start.after {
            StartsAfter::Nothing { supersedes } => Waits::Nothing {
                supersedes: *supersedes,
            },
            StartsAfter::NothingAsARollback => Waits::NothingAsARollback { rollback: true },
            StartsAfter::RunningRun {
                policy,
                running,
                between,
            } => Waits::RunningRun {
                on_new_snapshot: policy.as_str(),
                running: *running,
                between: between.clone(),
            },
            StartsAfter::RunInProgressIfAny { policy } => Waits::RunInProgressIfAny {
                on_new_snapshot: policy.as_str(),
            },
            StartsAfter::PolicyProblem { problem } => Waits::PolicyFix {
                problem: problem.clone(),
            },
        };
        RunStartReport {
            waits,
            blackout_until: start.blackout.as_ref().map(|b| b.until),
            blackout_reason: start.blackout.as_ref().and_then(|b| b.reason.clone()),
        }
    }
}

impl StageChange {
    fn of(stage: &str, old: &str, new: &str) -> Self {
        StageChange {
            stage: stage.to_string(),
            old: old.to_string(),
            new: new.to_string(),
        }
    }
}

impl ChartReport {
    fn of(chart: &ChartRef) -> Self {
        ChartReport {
            repository_url: chart.repository_url.clone(),
            chart_name: chart.chart_name.clone(),
            chart_version: chart.chart_version.clone(),
        }
    }
}

/// The clusters each stage of a changed promotion would hit, as (stage, targets) pairs.
fn stage_targets(planned: &Planned<'_>, fleet: &Fleet) -> Vec<(String, String)> {
    let Some(snapshot) = new_run_snapshot(planned).filter(|_| touched(planned)) else {
        return Vec::new();
    };
    snapshot
        .promotion
        .spec
        .stages
        .iter()
        .map(|stage| (stage.name.clone(), fleet.targets(&stage.cluster_selector)))
        .collect()
}

/// The Mermaid timeline of the run the change starts, if it starts one, and its estimate: the
/// engine's simulation.
fn estimated(
    planned: &Planned<'_>,
    fleet: &Fleet,
    now: DateTime<Utc>,
) -> Option<(String, EstimateReport)> {
    let snapshot = new_run_snapshot(planned)?;
    let (plan, preview) = (planned.plan, &planned.preview);
    let estimate = estimate::estimate(plan, preview, fleet, now)?;
    let timeline = mermaid::render(
        &plan.name,
        &estimate,
        snapshot.index,
        preview.run_start.as_ref(),
        now,
    );
    Some((timeline, EstimateReport::of(&estimate, snapshot.index, now)))
}

//! What a step tells people (issues #19, #29): the notices a status transition carries.
//!
//! Derived from two persisted statuses only, so the controller never restates a rollout rule: the
//! notices of a step are `notices(before, after, now)`. Each has a stable id (a hash of promotion,
//! snapshot index, run start, stage and kind, and for wave and blackout notices the wave or the
//! blackout's end), so a transition seen twice (a drift correction after completion, a restart, a
//! new leader) is recognised as the same notice.
//!
//! A notice is also the durable record of a delivery still owed: the controller carries the
//! undelivered ones in the status it writes with the transition (`pendingNotices`).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tollgate_model::hash::hash_value;
use tollgate_model::policy::NotifyEvent;

use crate::status::activity::StageActivity;
use crate::status::analysis_run::AnalysisPhase;
use crate::status::transitions::{self, Transition, TransitionKind, transitions};
use crate::status::{Phase, PromotionStatus, StageCounts, StageStatus};

/// Characters of the base64 SHA-256 kept as a notice id (96 bits).
const ID_CHARS: usize = 16;

pub use crate::status::notice::Notice;

/// The run a status belongs to: its snapshot and when its first stage started.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Run {
    snapshot_index: u64,
    start: DateTime<Utc>,
}

fn run_of(status: &PromotionStatus) -> Option<Run> {
    let (snapshot_index, start) = transitions::run_of(status)?;
    Some(Run {
        snapshot_index,
        start,
    })
}

/// The notices of the transition from `previous` to `next` (`None`: nothing persisted before),
/// persisted by a step at `now`. No transition, no notice: a step at steady state tells nothing.
pub fn notices(
    promotion: &str,
    previous: Option<&PromotionStatus>,
    next: &PromotionStatus,
    now: DateTime<Utc>,
) -> Vec<Notice> {
    let mut out: Vec<Notice> = held_start(promotion, previous, next, now)
        .into_iter()
        .chain(rewound(promotion, previous, next, now))
        .collect();
    let Some(run) = run_of(next) else {
        return out;
    };
    // The same run before, or nothing of it: every transition of `next` is then new.
    let before = previous.filter(|p| run_of(p) == Some(run));
    let notice = Builder {
        promotion,
        run,
        next,
    };
    let told = transitions(previous, next);
    for stage in &next.stages {
        let old = before.and_then(|b| b.stage(&stage.name));
        let of_stage: Vec<&Transition> = told.iter().filter(|t| t.stage == stage.name).collect();
        stage_notices(&notice, stage, old, &of_stage, &mut out);
    }
    if let Some(held) = held_wave(&notice, previous, now) {
        out.push(held);
    }
    if let Some(failure) = &next.failure
        && let Some(stage) = next.stage(&failure.stage)
    {
        let failed = told
            .iter()
            .any(|t| t.kind == TransitionKind::Failed && t.stage == failure.stage);
        if failed {
            let reason = Some(failure.reason.clone());
            out.push(notice.about(NotifyEvent::StageFailed, stage, reason, failure.at));
        }
        // Told with the rollback's last restore (as the Event is), whatever the phase after
        // it: a fix held by a policy problem in the same step leaves the promotion Held.
        let last_restored = failure.rollback.last().is_some_and(|last| {
            told.iter()
                .any(|t| t.stage == last.name && matches!(t.kind, TransitionKind::Restored { .. }))
        });
        if last_restored && failure.rollback_done() {
            let at = failure
                .rollback
                .iter()
                .filter_map(|r| r.restored_at)
                .max()
                .unwrap_or(failure.at);
            let reason = match next.phase {
                Phase::RolledBack => next.message.clone(),
                _ => Some(failure.rolled_back_words()),
            };
            out.push(notice.about(NotifyEvent::RolledBack, stage, reason, at));
        }
    }
    if next.phase == Phase::Completed
        && before.is_none_or(|b| b.phase != Phase::Completed)
        && let Some(last) = next.stages.last()
    {
        let at = last.succeeded_at.unwrap_or(run.start);
        out.push(notice.about(NotifyEvent::Completed, last, next.message.clone(), at));
    }
    out
}

/// A stage's own notices, in the order its transitions happened: started, its waves, approval,
/// its analyses' verdicts, completed.
fn stage_notices(
    notice: &Builder<'_>,
    stage: &StageStatus,
    old: Option<&StageStatus>,
    told: &[&Transition],
    out: &mut Vec<Notice>,
) {
    let mut analyses_told = false;
    for transition in told {
        let at = transition.at;
        match &transition.kind {
            TransitionKind::Started => {
                let reason = stage.current_status_description.clone();
                out.push(notice.about(NotifyEvent::StageStarted, stage, reason, at));
            }
            TransitionKind::WaveStarted { wave } => {
                let index = usize::try_from(wave.wave.saturating_sub(1)).unwrap_or(usize::MAX);
                let clusters = stage
                    .waves
                    .as_deref()
                    .and_then(|w| w.clusters.get(index))
                    .map(|c| c.join(", "));
                let text = format!(
                    "wave {}/{} started: {}",
                    wave.wave,
                    wave.of,
                    clusters.unwrap_or_default()
                );
                let kind = NotifyEvent::WaveStarted;
                out.push(notice.about_wave(kind, stage, wave.wave, text, at));
            }
            TransitionKind::WaveCompleted { wave } => {
                let text = format!("wave {}/{} provisioned", wave.wave, wave.of);
                let kind = NotifyEvent::WaveCompleted;
                out.push(notice.about_wave(kind, stage, wave.wave, text, at));
            }
            TransitionKind::AwaitingApproval => {
                let reason = stage.waiting_reason.clone();
                out.push(notice.about(NotifyEvent::ApprovalNeeded, stage, reason, at));
            }
            TransitionKind::Completed => {
                analysis_notices(notice, stage, old, out);
                analyses_told = true;
                let reason = stage
                    .provisioned_message
                    .clone()
                    .or_else(|| stage.current_status_description.clone());
                out.push(notice.about(NotifyEvent::StageCompleted, stage, reason, at));
            }
            TransitionKind::Provisioned
            | TransitionKind::Failed
            | TransitionKind::RestoreStarted { .. }
            | TransitionKind::Restored { .. } => {}
        }
    }
    if !analyses_told {
        analysis_notices(notice, stage, old, out);
    }
}

/// An analysis run of the stage newly failed or inconclusive. Deciding runs only: a dry run is
/// measured and shown, and never told as a verdict (a commit status `failure` it did not cause).
fn analysis_notices(
    notice: &Builder<'_>,
    stage: &StageStatus,
    old: Option<&StageStatus>,
    out: &mut Vec<Notice>,
) {
    let runs = stage.analyses.as_deref().map_or(&[][..], |r| r.as_slice());
    for run in runs.iter().filter(|r| !r.dry_run) {
        let kind = match run.phase {
            AnalysisPhase::Failed => NotifyEvent::AnalysisFailed,
            AnalysisPhase::Inconclusive => NotifyEvent::AnalysisInconclusive,
            AnalysisPhase::Running | AnalysisPhase::Successful | AnalysisPhase::Cancelled => {
                continue;
            }
        };
        let was = old
            .and_then(|o| o.analyses.as_deref())
            .and_then(|runs| {
                runs.iter()
                    .find(|r| r.name == run.name && r.cluster == run.cluster && r.wave == run.wave)
            })
            .map(|r| r.phase);
        if was == Some(run.phase) {
            continue;
        }
        let on = run
            .cluster
            .as_deref()
            .map(|c| format!(" on {c}"))
            .unwrap_or_default();
        let reason = format!(
            "analysis {}{on}: {}; query: {}",
            run.name,
            run.message.as_deref().unwrap_or(run.phase.as_str()),
            run.query
        );
        let at = run.measurements.last().map_or(run.started_at, |m| m.at);
        let which = Some(json!([run.name, run.cluster]));
        out.push(Notice {
            id: notice_id(notice.promotion, notice.run, &stage.name, kind, which),
            ..notice.about(kind, stage, Some(reason), at)
        });
    }
}

/// A blackout newly holding a stage start (a new blackout, or another stage): told about that
/// stage and the snapshot it would run, even before a first run exists.
fn held_start(
    promotion: &str,
    previous: Option<&PromotionStatus>,
    next: &PromotionStatus,
    now: DateTime<Utc>,
) -> Option<Notice> {
    let until = next.blackout_until?;
    let held = next.blackout_holds.as_deref()?;
    let told_before = previous.is_some_and(|p| {
        p.blackout_until == Some(until) && p.blackout_holds.as_deref() == Some(held)
    });
    if told_before {
        return None;
    }
    let key = json!([
        promotion,
        held.snapshot_index,
        held.stage,
        NotifyEvent::BlackoutHeld.as_str(),
        until.to_rfc3339()
    ]);
    Some(Notice {
        id: short_id(&key),
        kind: NotifyEvent::BlackoutHeld,
        promotion: promotion.to_string(),
        stage: held.stage.clone(),
        snapshot_index: held.snapshot_index,
        snapshot_commit: Some(held.snapshot_commit.clone()),
        author: None,
        phase: next.phase.clone(),
        reason: next.message.clone(),
        counts: StageCounts::default(),
        time: now,
    })
}

/// A branch newly rewritten under the promotion's newest snapshot (the `BranchRewound`
/// condition appeared, or names another rewrite).
fn rewound(
    promotion: &str,
    previous: Option<&PromotionStatus>,
    next: &PromotionStatus,
    now: DateTime<Utc>,
) -> Option<Notice> {
    let message = |status: &PromotionStatus| {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == crate::status::conditions::BRANCH_REWOUND && c.status == "True")
            .map(|c| c.message.clone())
    };
    let note = message(next)?;
    if previous.and_then(message).as_ref() == Some(&note) {
        return None;
    }
    let key = json!([
        promotion,
        next.snapshot_index,
        NotifyEvent::BranchRewound.as_str(),
        note
    ]);
    Some(Notice {
        id: short_id(&key),
        kind: NotifyEvent::BranchRewound,
        promotion: promotion.to_string(),
        stage: next.current_stage_name.clone().unwrap_or_default(),
        snapshot_index: next.snapshot_index.unwrap_or_default(),
        snapshot_commit: next.snapshot_commit.clone(),
        author: None,
        phase: next.phase.clone(),
        reason: Some(note),
        counts: StageCounts::default(),
        time: now,
    })
}

/// A blackout newly holding the next wave of a running stage: the stage's activity names it.
fn held_wave(
    notice: &Builder<'_>,
    previous: Option<&PromotionStatus>,
    now: DateTime<Utc>,
) -> Option<Notice> {
    notice.next.stages.iter().find_map(|stage| {
        let StageActivity::Blackout {
            until,
            wave: Some(_),
            ..
        } = &stage.activity
        else {
            return None;
        };
        let before = previous
            .and_then(|p| p.stage(&stage.name))
            .and_then(|s| match &s.activity {
                StageActivity::Blackout { until, .. } => Some(*until),
                _ => None,
            });
        if before == Some(*until) {
            return None;
        }
        let reason = stage
            .waiting_reason
            .clone()
            .or_else(|| notice.next.message.clone());
        let which = Some(json!(until.to_rfc3339()));
        Some(Notice {
            id: notice_id(
                notice.promotion,
                notice.run,
                &stage.name,
                NotifyEvent::BlackoutHeld,
                which,
            ),
            ..notice.about(NotifyEvent::BlackoutHeld, stage, reason, now)
        })
    })
}

struct Builder<'a> {
    promotion: &'a str,
    run: Run,
    next: &'a PromotionStatus,
}

impl Builder<'_> {
    fn about(
        &self,
        kind: NotifyEvent,
        stage: &StageStatus,
        reason: Option<String>,
        time: DateTime<Utc>,
    ) -> Notice {
        Notice {
            id: notice_id(self.promotion, self.run, &stage.name, kind, None),
            kind,
            promotion: self.promotion.to_string(),
            stage: stage.name.clone(),
            snapshot_index: self.run.snapshot_index,
            snapshot_commit: self.next.snapshot_commit.clone(),
            author: None,
            phase: self.next.phase.clone(),
            reason,
            counts: stage.counts.clone(),
            time,
        }
    }

    fn about_wave(
        &self,
        kind: NotifyEvent,
        stage: &StageStatus,
        wave: u32,
        text: String,
        time: DateTime<Utc>,
    ) -> Notice {
        Notice {
            id: notice_id(
                self.promotion,
                self.run,
                &stage.name,
                kind,
                Some(json!(wave)),
            ),
            ..self.about(kind, stage, Some(text), time)
        }
    }
}

/// The id of a notice; `which` tells apart notices of one kind about one stage of one run (the
/// wave; the blackout's end). Without it, ids are what they were before wave notices existed.
fn notice_id(
    promotion: &str,
    run: Run,
    stage: &str,
    kind: NotifyEvent,
    which: Option<Value>,
) -> String {
    let mut key = json!([
        promotion,
        run.snapshot_index,
        run.start.to_rfc3339(),
        stage,
        kind.as_str()
    ]);
    if let (Some(which), Some(key)) = (which, key.as_array_mut()) {
        key.push(which);
    }
    short_id(&key)
}

fn short_id(key: &Value) -> String {
    hash_value(key)
        .chars()
        .take(ID_CHARS)
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect()
}

//! Retry of a halted stage (issue #34): `retry.tollgate.dev/<stage>: <snapshot>/<n>` on the
//! ClusterPromotion re-drives the Failed and TimedOut clusters of a run halted at that stage with
//! that snapshot, with a fresh deadline and the failure budget counted over the stage's members
//! again; the provisioned clusters are kept. Then the run goes on.
//!
//! Each value acts once: the highest counter `n` consumed per stage and snapshot is kept in status
//! (`retries`), so the same value never re-drives twice, after a restart or with a new leader
//! either. A retry of another snapshot, of a run that is not halted at that stage, or of a
//! rolled-back snapshot (a rejected snapshot is never applied again) does nothing but say why:
//! the `Retry` condition and a `RetryRefused` Warning. A refused value is consumed too, so it never
//! acts on a later halt it was not written for.
//!
//! How the clusters are re-driven: Sveltos deploys a feature again for a new ClusterSummary. So
//! the stage's profile first targets every cluster it targets except the retried ones
//! (`clusterRefs` with `stopMatchingBehavior: LeavePolicies`, as between waves: their add-ons stay,
//! their ClusterSummaries go); once those summaries are gone, the profile targets them again and
//! Sveltos deploys to them from scratch. Targeting is not part of any feature's hash, so the
//! provisioned clusters are not redeployed.

use chrono::{DateTime, Utc};
use serde_json::Value;
use tollgate_model::model::Stage;
use tollgate_model::policy::OnFailure;
use tollgate_model::snapshot::{RETRY_ANNOTATION_PREFIX, Snapshot};
use tollgate_render::{
    ClusterRef, render_stage_profile_for, spec_hash, stage_profile_name, stage_profile_spec_for,
};

use crate::effects::Effects;
use crate::gates::approval::names_snapshot;
use crate::observed::{Observed, cluster_key};
use crate::output::{EngineEvent, EventReason};
use crate::status::activity::{self, StageActivity};
use crate::status::verdict::Verdict;
use crate::status::{ClusterState, Condition, Phase, PromotionStatus, RunFailure, StageStatus};

pub use crate::status::retry_state::{ConsumedRetry, StageRetry};

/// Consumed retries kept in status.
pub const RETRIES_KEPT: usize = 32;
/// `type` of the condition that says what the newest retry did.
pub const RETRY_CONDITION: &str = "Retry";

pub use tollgate_model::retry_value::{RetryValue, parse};

/// The highest counter consumed for `stage` and snapshot `id` (0: none).
pub fn last_consumed(status: &PromotionStatus, stage: &str, id: &str) -> u64 {
    status
        .retries
        .iter()
        .filter(|r| r.stage == stage && r.snapshot_id == id)
        .map(|r| r.n)
        .max()
        .unwrap_or(0)
}

/// What one retry annotation asks of the run.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Consumed already: nothing to do or say.
    Consumed,
    Redrive {
        stage: String,
        n: u64,
    },
    Refuse {
        stage: String,
        snapshot_id: String,
        n: u64,
        reason: String,
    },
}

/// Judges the retry annotations of `run` (the file's current annotations) against `status`;
/// `run_phase` is the phase the run was in before this step began (the step sets `Progressing`
/// while it looks, which a refusal must not report).
pub(crate) fn decide(
    status: &PromotionStatus,
    run: &Snapshot,
    history: &[Snapshot],
    run_phase: &Phase,
) -> Vec<Decision> {
    run.promotion
        .metadata
        .annotations
        .iter()
        .filter_map(|(key, value)| {
            let stage = key.strip_prefix(RETRY_ANNOTATION_PREFIX)?;
            Some(decide_one(status, (run, run_phase), history, stage, value))
        })
        .collect()
}

fn decide_one(
    status: &PromotionStatus,
    (run, run_phase): (&Snapshot, &Phase),
    history: &[Snapshot],
    stage: &str,
    value: &str,
) -> Decision {
    let refuse = |snapshot_id: &str, n: u64, reason: String| Decision::Refuse {
        stage: stage.to_string(),
        snapshot_id: snapshot_id.to_string(),
        n,
        reason,
    };
    let key = format!("{RETRY_ANNOTATION_PREFIX}{stage}");
    let parsed = match parse(value) {
        Ok(parsed) => parsed,
        Err(_) if last_value_refused(status, stage, value) => return Decision::Consumed,
        Err(problem) => return refuse(value, 0, format!("{key}: {problem}")),
    };
    let named = match names_snapshot(&parsed.snapshot, run) {
        true => Some(run),
        false => history
            .iter()
            .rev()
            .find(|s| names_snapshot(&parsed.snapshot, s)),
    };
    let id = named.map_or(parsed.snapshot.as_str(), |s| s.id());
    if parsed.n <= last_consumed(status, stage, id) {
        return Decision::Consumed;
    }
    let Some(named) = named.filter(|s| s.id() == run.id()) else {
        let which = named.map_or_else(
            || "no snapshot in git history".to_string(),
            |s| format!("snapshot #{}", s.index),
        );
        return refuse(
            id,
            parsed.n,
            format!(
                "{key}: {value:?} names {which}, not the run's snapshot #{} ({})",
                run.index,
                run.hashes.short()
            ),
        );
    };
    let run_index = named.index;
    if let Some(refusal) = not_retriable(status, stage) {
        let reason = match refusal {
            NotRetriable::NotHalted => format!(
                "{key}: the run of snapshot #{run_index} is not halted (phase {}): nothing to retry",
                run_phase.as_str()
            ),
            NotRetriable::RolledBack(failure) => format!(
                "{key}: snapshot #{} was rejected and rolled back: a rolled-back snapshot is never applied again; commit a fix",
                failure.snapshot_index
            ),
            NotRetriable::HaltedElsewhere(failure) => format!(
                "{key}: the run of snapshot #{run_index} is halted at stage {}, not {stage}",
                failure.stage
            ),
        };
        return refuse(id, parsed.n, reason);
    }
    Decision::Redrive {
        stage: stage.to_string(),
        n: parsed.n,
    }
}

/// An unreadable value is refused once (recorded with counter 0 and the value as its id).
fn last_value_refused(status: &PromotionStatus, stage: &str, value: &str) -> bool {
    status
        .retries
        .iter()
        .any(|r| r.stage == stage && r.n == 0 && r.snapshot_id == value)
}

/// Records that counter `n` of `stage` and snapshot `id` was consumed.
fn consume(status: &mut PromotionStatus, consumed: ConsumedRetry) {
    status
        .retries
        .retain(|r| !(r.stage == consumed.stage && r.snapshot_id == consumed.snapshot_id));
    status.retries.push(consumed);
    let excess = status.retries.len().saturating_sub(RETRIES_KEPT);
    status.retries.drain(..excess);
}

/// Acts on the run's retry annotations: re-drives a halted stage or says why not (`run_phase`:
/// see [`decide`]).
pub(crate) fn act(
    status: &mut PromotionStatus,
    (run, run_phase): (&Snapshot, &Phase),
    history: &[Snapshot],
    observed: &Observed,
    now: DateTime<Utc>,
    effects: &mut Effects,
) {
    for decision in decide(status, run, history, run_phase) {
        match decision {
            Decision::Consumed => {}
            Decision::Refuse {
                stage,
                snapshot_id,
                n,
                reason,
            } => {
                consume(
                    status,
                    ConsumedRetry {
                        stage,
                        snapshot_id,
                        n,
                        at: now,
                        redriven: false,
                    },
                );
                set_condition(status, "False", "RetryRefused", &reason, now);
                effects
                    .events
                    .push(EngineEvent::warning(EventReason::RetryRefused, reason));
            }
            Decision::Redrive { stage, n } => {
                redrive(status, run, &stage, n, observed, now, effects)
            }
        }
    }
}

/// Clears the halt and starts re-driving the stage's Failed and TimedOut clusters.
fn redrive(
    status: &mut PromotionStatus,
    run: &Snapshot,
    stage_name: &str,
    n: u64,
    observed: &Observed,
    now: DateTime<Utc>,
    effects: &mut Effects,
) {
    let Some(stage) = run.promotion.stage(stage_name) else {
        return;
    };
    let failure = status.failure.take();
    let id = run.id().to_string();
    status
        .verdicts
        .retain(|v| !(v.snapshot_id == id && v.verdict == Verdict::Rejected));
    consume(
        status,
        ConsumedRetry {
            stage: stage_name.to_string(),
            snapshot_id: id,
            n,
            at: now,
            redriven: true,
        },
    );
    let Some(st) = status.stage_mut(stage_name) else {
        return;
    };
    let promotion = run.promotion.name();
    let retry = plan(st, failure.as_deref(), (promotion, stage), observed, n, now);
    restart_stage(st, retry, run, stage, now);
    let st = status.stage(stage_name);
    let listed = st
        .and_then(|s| s.retry.as_deref())
        .map(|r| r.clusters.join(", "));
    let note = format!(
        "Stage {stage_name} of snapshot #{} retried (retry {n}): re-driving {}",
        run.index,
        listed.unwrap_or_default()
    );
    set_condition(status, "True", "Retried", &note, now);
    status.phase = Phase::Progressing;
    effects
        .events
        .push(EngineEvent::normal(EventReason::Retried, note));
}

/// The retry of `st`: its Failed and TimedOut clusters (at the halt) are re-driven, the others
/// it targets are kept.
fn plan(
    st: &StageStatus,
    failure: Option<&RunFailure>,
    (promotion, stage): (&str, &Stage),
    observed: &Observed,
    n: u64,
    now: DateTime<Utc>,
) -> StageRetry {
    let targeted = match crate::stage::waves::reached(st.waves.as_deref()) {
        Some(reached) => reached,
        None => crate::stage::clusters::targeted(&stage.cluster_selector, observed),
    };
    // Failed or timed out at the halt, those that failed while it was halted (see
    // `note_late_failures`), and those failing now.
    let profile = stage_profile_name(promotion, &stage.name);
    let failing_now = observed
        .summaries
        .iter()
        .filter(|s| *s.profile_name == *profile)
        .filter(|s| s.failure_message.is_some() || s.features.iter().any(|f| f.is_failed()))
        .map(|s| cluster_key(&s.namespace, &s.cluster_name))
        .filter(|k| targeted.contains(k));
    let mut clusters: Vec<String> = st
        .not_provisioned
        .iter()
        .filter(|c| matches!(c.state, ClusterState::Failed | ClusterState::TimedOut))
        .map(|c| c.cluster.clone())
        .chain(
            failure
                .iter()
                .flat_map(|f| f.clusters.iter().map(|c| c.cluster.clone())),
        )
        .chain(failing_now)
        .collect();
    clusters.sort();
    clusters.dedup();
    let kept: Vec<String> = targeted
        .into_iter()
        .filter(|c| clusters.binary_search(c).is_err())
        .collect();
    let capi = observed
        .clusters
        .iter()
        .filter(|c| c.capi)
        .map(|c| cluster_key(&c.namespace, &c.name))
        .filter(|k| kept.contains(k))
        .collect();
    StageRetry {
        n,
        at: now,
        clusters,
        kept,
        capi,
        readded_at: None,
    }
}

/// While a run is halted its stage is no longer judged, but a cluster still deploying at the halt
/// may fail afterwards: it is added to the failure's clusters (once), so a retry re-drives it even
/// when it recovers on its own before the retry.
pub(crate) fn note_late_failures(
    failure: &mut RunFailure,
    promotion: &str,
    observed: &Observed,
    now: DateTime<Utc>,
) {
    let profile = stage_profile_name(promotion, &failure.stage);
    for summary in observed
        .summaries
        .iter()
        .filter(|s| *s.profile_name == *profile)
    {
        let message = summary
            .failure_message
            .as_deref()
            .map(str::to_string)
            .or_else(|| {
                summary
                    .features
                    .iter()
                    .find(|f| f.is_failed())
                    .map(|f| f.failure_message.as_deref().unwrap_or("failed").to_string())
            });
        let Some(message) = message else {
            continue;
        };
        let key = cluster_key(&summary.namespace, &summary.cluster_name);
        let known = failure.clusters.iter().any(|c| c.cluster == key);
        if known || failure.clusters.len() >= crate::status::CLUSTERS_LISTED {
            continue;
        }
        failure.clusters.push(crate::status::ClusterCondition {
            cluster: key,
            state: ClusterState::Failed,
            message: Some(message),
            since: now,
        });
    }
}

/// The stage starts over for its re-driven clusters: its profile withdraws their summaries
/// (see the module documentation), its gates run again once they are provisioned.
fn restart_stage(
    st: &mut StageStatus,
    retry: StageRetry,
    run: &Snapshot,
    stage: &Stage,
    now: DateTime<Utc>,
) {
    let spec = withdrawing_spec(run, stage, &retry);
    st.applied_spec_hash = spec_hash(&spec);
    st.applied_at = now;
    st.fresh_features = Vec::new();
    st.hashes_before_apply = None;
    st.failure_message = None;
    st.waiting_reason = None;
    st.provisioned_at = None;
    st.provisioned_message = None;
    st.delay_ends_at = None;
    st.post_delay_checks_applied = false;
    st.preverification = None;
    st.succeeded_at = None;
    st.awaiting_approval_since = None;
    st.awaiting_window_since = None;
    st.approver = None;
    st.wave_approvers = None;
    st.approvals = None;
    st.analyses = None;
    st.deadline = None;
    st.not_provisioned.clear();
    st.retry = Some(Box::new(retry));
    activity::set(
        &mut st.activity,
        &mut st.activity_since,
        StageActivity::Provisioning { wave: None },
        now,
    );
}

/// The spec of the stage's profile while the re-driven clusters' summaries go.
pub(crate) fn withdrawing_spec(run: &Snapshot, stage: &Stage, retry: &StageRetry) -> Value {
    stage_profile_spec_for(run, stage, &[], Some(&kept_refs(retry)))
}

/// The whole profile while the re-driven clusters' summaries go.
pub(crate) fn withdrawing_object(run: &Snapshot, stage: &Stage, retry: &StageRetry) -> Value {
    render_stage_profile_for(run, stage, &[], Some(&kept_refs(retry)))
}

fn kept_refs(retry: &StageRetry) -> Vec<ClusterRef<'_>> {
    retry
        .kept
        .iter()
        .filter_map(|key| {
            let (namespace, name) = key.split_once('/')?;
            Some(ClusterRef {
                namespace,
                name,
                capi: retry.capi.contains(key),
            })
        })
        .collect()
}

/// Whether no summary of `profile` is left for the re-driven clusters.
pub(crate) fn withdrawn(retry: &StageRetry, profile: &str, observed: &Observed) -> bool {
    !observed.summaries.iter().any(|s| {
        &*s.profile_name == profile
            && retry
                .clusters
                .binary_search(&cluster_key(&s.namespace, &s.cluster_name))
                .is_ok()
    })
}

fn set_condition(
    status: &mut PromotionStatus,
    state: &str,
    reason: &str,
    message: &str,
    now: DateTime<Utc>,
) {
    let condition = Condition {
        type_: RETRY_CONDITION.to_string(),
        status: state.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        last_transition_time: now,
    };
    match status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == RETRY_CONDITION)
    {
        Some(existing) => *existing = condition,
        None => status.conditions.push(condition),
    }
}

/// Why the run `status` describes cannot be retried at `stage`: the one rule the controller
/// ([`decide`]) and the CLI ([`refusal_of`]) each put in their own words.
enum NotRetriable<'s> {
    NotHalted,
    /// Failed under `onFailure: Rollback`: its snapshot is never applied again.
    RolledBack(&'s RunFailure),
    HaltedElsewhere(&'s RunFailure),
}

fn not_retriable<'s>(status: &'s PromotionStatus, stage: &str) -> Option<NotRetriable<'s>> {
    let Some(failure) = status.failure.as_deref() else {
        return Some(NotRetriable::NotHalted);
    };
    if failure.on_failure == OnFailure::Rollback {
        return Some(NotRetriable::RolledBack(failure));
    }
    (failure.stage != stage).then_some(NotRetriable::HaltedElsewhere(failure))
}

/// Why the run `status` shows cannot be retried at `stage`, before anything is committed (the
/// CLI asks with the GitPromotion it read; the controller's own refusal is [`decide`]'s); `None`
/// when it is halted there. `name` is the promotion's.
pub fn refusal_of(status: &PromotionStatus, name: &str, stage: &str) -> Option<String> {
    let run = status.snapshot_index.map_or_else(
        || "the run".to_string(),
        |i| format!("the run of snapshot #{i}"),
    );
    let phase = status.phase.as_str();
    Some(match not_retriable(status, stage)? {
        NotRetriable::NotHalted => format!(
            "{run} of {name} is {phase}, not halted: nothing to retry (`tollgate status {name}`)"
        ),
        NotRetriable::RolledBack(failure) => format!(
            "{run} of {name} failed at stage {} and was rolled back (phase {phase}): a rolled-back snapshot is never applied again; commit a fix",
            failure.stage
        ),
        NotRetriable::HaltedElsewhere(failure) => format!(
            "{run} of {name} is halted at stage {}, not {stage}: retry {} instead",
            failure.stage, failure.stage
        ),
    })
}

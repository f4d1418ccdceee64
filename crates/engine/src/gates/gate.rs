//! The gate at the end of a provisioned, healthy stage: the only place a trigger kind is matched.
//! `auto` passes inside its promotion window; `manual` passes on an approval valid for this run
//! (docs/architecture.md#d2-approvals-are-consumed-never-lost).

use tollgate_model::model::{AutoTrigger, ManualTrigger, Stage, Trigger};
use tollgate_model::policy::StagePolicy;
use tollgate_model::window::{Window, WindowState};

use crate::status::activity::StageActivity;
use tollgate_model::approval_policy::ApprovalPolicy;

use crate::gates::approval;
use crate::gates::approval_quorum;
use crate::gates::stage_run::{Hold, StageRun};
use crate::messages;
use crate::output::EngineEvent;
use crate::output::EventReason;
use crate::status::ConsumedApproval;

/// The gate let the stage pass; an approval it used must be recorded as consumed.
pub(crate) struct Passed {
    pub consumes: Vec<ConsumedApproval>,
}

pub(crate) fn pass(run: &mut StageRun<'_, '_>, trigger: &Trigger) -> Result<Passed, Hold> {
    // Gates bind (issue #44): a stage the policy's `approvals` names waits for its quorum
    // whatever its trigger says, so editing `manual` into `auto` removes no gate.
    if let Some(policy) = run.policy.as_ref().and_then(|p| p.approvals.clone()) {
        let manual = match trigger {
            Trigger::Manual(manual) => manual.clone(),
            Trigger::Auto(auto) => {
                window_open(run, auto)?;
                ManualTrigger::default()
            }
        };
        let bound = !matches!(trigger, Trigger::Manual(_));
        return pass_quorum(run, &manual, &policy, bound);
    }
    match trigger {
        Trigger::Auto(auto) => {
            window_open(run, auto)?;
            Ok(Passed {
                consumes: Vec::new(),
            })
        }
        Trigger::Manual(manual) => {
            let stage = &run.stage.name;
            let Some(valid) =
                approval::find(run.snapshot, stage, manual, run.approvals, run.consumed)
            else {
                run.st.describe(messages::AWAITING_APPROVAL, run.now);
                run.st.awaiting_approval_since.get_or_insert(run.now);
                let reason =
                    approval::wanted(run.snapshot, stage, manual, run.approvals, run.consumed);
                return Err(Hold::Wait(StageActivity::AwaitingApproval, reason));
            };
            run.effects.events.push(EngineEvent::normal(
                EventReason::ApprovalUsed,
                approval::used_note(stage, run.snapshot, &valid.approver),
            ));
            run.st.approver = Some(Box::new(valid.approver));
            Ok(Passed {
                consumes: valid.consumes.into_iter().collect(),
            })
        }
    }
}

/// An `auto` trigger's promotion window: passes when it is open (or there is none).
fn window_open(run: &mut StageRun<'_, '_>, auto: &AutoTrigger) -> Result<(), Hold> {
    if let Some(window) = &auto.promotion_window {
        let window = Window::parse(window)
            .map_err(|error| Hold::Failed(format!("promotionWindow: {error}")))?;
        if let WindowState::Closed { opens_at } = window.state_at(run.now) {
            run.st.describe(&messages::window_closed(opens_at), run.now);
            run.st.awaiting_window_since.get_or_insert(run.now);
            run.effects.wake(opens_at);
            return Err(Hold::Wait(
                StageActivity::AwaitingWindow { until: opens_at },
                format!(
                    "waiting for the promotion window to open at {}",
                    messages::timestamp(opens_at)
                ),
            ));
        }
    }
    run.st.awaiting_window_since = None;
    Ok(())
}

/// The trigger a stage without one runs under when the policy's `approvals` names it (gates
/// bind whatever the trigger says); `None`: the stage has a trigger, or no approval policy.
pub(crate) fn bound_trigger(stage: &Stage, policy: Option<&StagePolicy>) -> Option<Trigger> {
    (stage.trigger.is_none() && policy.is_some_and(|p| p.approvals.is_some()))
        .then(|| Trigger::Auto(AutoTrigger::default()))
}

/// A manual gate under an approval policy: it opens at `minApprovals` distinct approvers that
/// count; status lists every approval it looked at. `bound`: the stage's trigger is not
/// `manual`, and the policy gates it anyway.
fn pass_quorum(
    run: &mut StageRun<'_, '_>,
    manual: &ManualTrigger,
    policy: &ApprovalPolicy,
    bound: bool,
) -> Result<Passed, Hold> {
    let stage = &run.stage.name;
    let quorum = approval_quorum::judge(
        run.snapshot,
        stage,
        manual,
        policy,
        run.approvals,
        run.consumed,
    );
    run.st.approvals = Some(Box::new(quorum.reviews.clone()));
    run.st.approvals_needed = Some(u16::try_from(quorum.needed).unwrap_or(u16::MAX));
    if !quorum.is_met() {
        run.st.describe(messages::AWAITING_APPROVAL, run.now);
        run.st.awaiting_approval_since.get_or_insert(run.now);
        let mut reason = quorum.waiting_reason(run.snapshot, stage);
        if bound {
            reason.push_str(&format!(
                "; the RolloutPolicy's approvals.{stage} gates the stage whatever its trigger says"
            ));
        }
        return Err(Hold::Wait(StageActivity::AwaitingApproval, reason));
    }
    run.effects.events.push(EngineEvent::normal(
        EventReason::ApprovalUsed,
        quorum.used_note(stage, run.snapshot),
    ));
    run.st.approver = quorum.counted.first().cloned().map(Box::new);
    Ok(Passed {
        consumes: quorum.consumes,
    })
}

/// The stage's manual trigger, when a person opens its gate.
pub(crate) fn manual(stage: &Stage) -> Option<&ManualTrigger> {
    match stage.trigger.as_ref()? {
        Trigger::Manual(manual) => Some(manual),
        Trigger::Auto(_) => None,
    }
}

//! The gate at the end of a provisioned, healthy stage: the only place a trigger kind is matched.
//! `auto` passes inside its promotion window; `manual` passes on an approval valid for this run
//! (docs/architecture.md#d2-approvals-are-consumed-never-lost).

use tollgate_model::model::{ManualTrigger, Stage, Trigger};
use tollgate_model::window::{Window, WindowState};

use crate::activity::StageActivity;
use crate::approval;
use crate::messages;
use crate::output::EngineEvent;
use crate::output::EventReason;
use crate::stage_run::{Hold, StageRun};
use crate::status::ConsumedApproval;

/// The gate let the stage pass; an approval it used must be recorded as consumed.
pub(crate) struct Passed {
    pub consumes: Option<ConsumedApproval>,
}

pub(crate) fn pass(run: &mut StageRun<'_, '_>, trigger: &Trigger) -> Result<Passed, Hold> {
    match trigger {
        Trigger::Auto(auto) => {
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
            Ok(Passed { consumes: None })
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
                consumes: valid.consumes,
            })
        }
    }
}

/// The stage's manual trigger, when a person opens its gate.
pub(crate) fn manual(stage: &Stage) -> Option<&ManualTrigger> {
    match stage.trigger.as_ref()? {
        Trigger::Manual(manual) => Some(manual),
        Trigger::Auto(_) => None,
    }
}

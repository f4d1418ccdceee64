//! A promotion whose file has never been valid: nothing can run, but the status says why, so that
//! `tollgate status` and `kubectl get gitpromotions` show the error instead of nothing at all.

use tollgate_spec::hash::HASH_SCHEME;

use crate::input::StepInput;
use crate::output::StepOutput;
use crate::status::{Phase, PromotionStatus};

pub(crate) fn step_never_valid(input: &StepInput<'_>, error: &str) -> StepOutput {
    let mut status = input.status.cloned().unwrap_or_else(PromotionStatus::empty);
    status.hash_scheme = HASH_SCHEME;
    status.phase = Phase::Invalid;
    status.invalid_spec = Some(error.to_string());
    status.message = Some("invalid in git and never valid: nothing has been applied".into());
    status.next_wake_up = None;
    StepOutput {
        actions: Vec::new(),
        status,
        events: Vec::new(),
        wake_at: None,
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use crate::input::{Desired, StepInput};
    use crate::observed::Observed;
    use crate::status::Phase;
    use crate::step;

    #[test]
    fn reports_the_error_and_does_nothing() {
        let observed = Observed::default();
        let input = StepInput {
            desired: Desired::NeverValid {
                promotion: "p",
                error: "p.yaml:3:5: spec.stages: Required value",
            },
            approvals: &[],
            observed: &observed,
            status: None,
            now: Utc.timestamp_opt(1_700_000_000, 0).single().expect("time"),
        };
        let out = step(&input);
        assert!(out.actions.is_empty());
        assert_eq!(out.status.phase, Phase::Invalid);
        assert_eq!(
            out.status.invalid_spec.as_deref(),
            Some("p.yaml:3:5: spec.stages: Required value")
        );
        // Idempotent: the same input with the persisted status changes nothing.
        let again = step(&StepInput {
            status: Some(&out.status),
            ..input
        });
        assert_eq!(again.status, out.status);
        assert!(again.actions.is_empty());
    }
}

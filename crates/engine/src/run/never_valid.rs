//! A promotion whose file has never been valid: nothing can run, but the status says why, so that
//! `tollgate status` and `kubectl get gitpromotions` show the error instead of nothing at all.

use tollgate_model::hash::HASH_SCHEME;

use crate::effects::{Effects, Outgoing};
use crate::input::StepInput;
use crate::output::{EngineEvent, EventReason, StepOutput};
use crate::status::{Phase, PromotionStatus};

/// Event reason for a promotion whose file in git is invalid.
pub(crate) const INVALID_SPEC: EventReason = EventReason::InvalidSpec;

pub(crate) fn step_never_valid(input: &StepInput<'_>, error: &str) -> StepOutput {
    let mut status = input.status.cloned().unwrap_or_else(PromotionStatus::empty);
    // Once per distinct error: the persisted status already carries one that was told.
    let events = if status.invalid_spec.as_deref() == Some(error) {
        Vec::new()
    } else {
        vec![EngineEvent::warning(INVALID_SPEC, error.to_string())]
    };
    status.hash_scheme = HASH_SCHEME;
    status.phase = Phase::Invalid;
    status.invalid_spec = Some(error.to_string());
    status.message = Some("invalid in git and never valid: nothing has been applied".into());
    let effects = Effects {
        events,
        ..Effects::default()
    };
    effects.into_output(status, Outgoing::EventsOnly)
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::INVALID_SPEC;
    use crate::input::{Desired, StepInput};
    use crate::observed::Observed;
    use crate::output::{EngineEvent, EventType};
    use crate::status::Phase;
    use crate::step;

    /// The step input of promotion `p`, whose file never parsed (`error`), over `status`.
    fn never_valid<'a>(
        error: &'a str,
        status: Option<&'a crate::PromotionStatus>,
        observed: &'a Observed,
    ) -> StepInput<'a> {
        StepInput {
            desired: Desired::NeverValid {
                promotion: "p",
                error,
            },
            approvals: &[],
            observed,
            status,
            now: Utc.timestamp_opt(1_700_000_000, 0).single().expect("time"),
            policy: None,
            history: &[],
            watch_problem: None,
            unverified: None,
            rewound: None,
            dependencies: &[],
            dependency_problem: None,
            policy_problem: None,
            policy_unapproved: false,
            measurements: &[],
        }
    }

    #[test]
    fn reports_the_error_and_does_nothing() {
        let observed = Observed::default();
        let input = never_valid("p.yaml:3:5: spec.stages: Required value", None, &observed);
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

    #[test]
    fn an_invalid_spec_is_a_warning_event_once_per_distinct_error() {
        let observed = Observed::default();
        let input = |error, status| never_valid(error, status, &observed);
        let first_error = "p.yaml:8:21: mapping values are not allowed in this context";
        let first = step(&input(first_error, None));
        assert_eq!(
            first.events,
            [EngineEvent::warning(INVALID_SPEC, first_error.to_string())]
        );
        assert_eq!(first.events[0].event_type, EventType::Warning);
        let repeated = step(&input(first_error, Some(&first.status)));
        assert!(repeated.events.is_empty(), "{:?}", repeated.events);
        let second_error = "p.yaml:4:3: alias expansion limit exceeded (YAML bomb?)";
        let changed = step(&input(second_error, Some(&repeated.status)));
        assert_eq!(
            changed.events,
            [EngineEvent::warning(INVALID_SPEC, second_error.to_string())]
        );
    }
}

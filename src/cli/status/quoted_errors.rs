//! A long measurement error is printed once in `status NAME` (issue #45): in its analysis's LAST
//! cell, beside its measurement. The texts that quote it — the promotion's message, the stage's
//! activity, the failure and the run's phase, all built from the run's message `(last: <error>)`
//! — point there instead of printing a paragraph of Prometheus output four more times. Status
//! and events keep the error whole: they are read one at a time.

use tollgate_engine::PromotionStatus;

/// Errors shorter than this read well inline and are left where they are.
const QUOTED_FROM_CHARS: usize = 40;

/// What a quoted error becomes.
const POINTER: &str = "an error, shown under analyses below";

/// The long errors of the newest measurements of a promotion's analysis runs.
pub(super) struct QuotedErrors(Vec<String>);

impl QuotedErrors {
    pub fn of(status: &PromotionStatus) -> QuotedErrors {
        let runs = status
            .stages
            .iter()
            .flat_map(|s| s.analyses.as_deref().into_iter().flatten());
        let mut errors: Vec<String> = runs
            .filter_map(|run| run.measurements.iter().max_by_key(|m| m.index))
            .filter_map(|newest| newest.error.clone())
            .filter(|error| error.chars().count() >= QUOTED_FROM_CHARS)
            .collect();
        // The longest first: one error may contain another.
        errors.sort_by_key(|e| std::cmp::Reverse(e.len()));
        errors.dedup();
        QuotedErrors(errors)
    }

    /// `text` with each long error replaced by a pointer to the analyses table.
    pub fn point(&self, text: &str) -> String {
        self.0
            .iter()
            .fold(text.to_string(), |text, error| text.replace(error, POINTER))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_error_is_replaced_by_a_pointer_and_a_short_one_is_kept() {
        let long =
            "Prometheus answered 422: execution: query processing would load too many samples";
        let status: PromotionStatus = serde_json::from_value(serde_json::json!({
            "hashScheme": 1, "phase": "Failed",
            "stages": [{"name": "prod", "snapshotIndex": 2,
                "appliedAt": "2026-11-24T17:00:00Z", "appliedSpecHash": "a",
                "analyses": [
                    {"name": "a", "query": "q", "startedAt": "2026-11-24T17:00:30Z", "count": 1,
                     "phase": "Failed", "measurements": [{"index": 0,
                        "at": "2026-11-24T17:00:30Z", "verdict": "Error", "error": long}]},
                    {"name": "b", "query": "q", "startedAt": "2026-11-24T17:00:30Z", "count": 1,
                     "phase": "Failed", "measurements": [{"index": 0,
                        "at": "2026-11-24T17:00:30Z", "verdict": "Error", "error": "answered 502"}]}
                ]}]
        }))
        .expect("a status");
        let quoted = QuotedErrors::of(&status);
        assert_eq!(
            quoted.point(&format!("analysis a: 1 error in a row (last: {long})")),
            "analysis a: 1 error in a row (last: an error, shown under analyses below)"
        );
        assert_eq!(
            quoted.point("analysis b: (last: answered 502)"),
            "analysis b: (last: answered 502)"
        );
    }
}

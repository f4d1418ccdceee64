//! The analyses of a stage in `status NAME`: for each run, where it stands, what was measured
//! and the resolved query, so a decision is never opaque (issue #32: the value, the query and the
//! verdict are shown).

use tollgate_engine::analysis_run::{AnalysisPhase, AnalysisRun};
use tollgate_engine::pipeline::StageView;

use super::quoted_errors::QuotedErrors;
use crate::views::fit;
use crate::views::relative::time;

/// The analyses table of `view`'s stage, or nothing when it has none.
pub(super) fn render(view: &StageView<'_>, quoted: &QuotedErrors, width: usize) -> String {
    let Some(runs) = view.status.and_then(|st| st.analyses.as_deref()) else {
        return String::new();
    };
    if runs.is_empty() {
        return String::new();
    }
    let rows: Vec<Vec<String>> = runs.iter().map(|run| row(run, quoted)).collect();
    let mut out = format!("\nStage {}: analyses\n", view.name);
    out.push_str(&fit::table(
        &["ANALYSIS", "PHASE", "MEASURED", "LAST", "QUERY"],
        &rows,
        width,
    ));
    out
}

/// The error of the newest measurement is printed in LAST only: the phase's message, which
/// quotes it, points there.
fn row(run: &AnalysisRun, quoted: &QuotedErrors) -> Vec<String> {
    let mut name = run.name.clone();
    if let Some(cluster) = &run.cluster {
        name.push_str(&format!(" on {cluster}"));
    }
    if let Some(wave) = run.wave {
        name.push_str(&format!(" (wave {wave})"));
    }
    if run.dry_run {
        name.push_str(" (dry run)");
    }
    let mut phase = run.phase.as_str().to_string();
    if let Some(message) = run
        .message
        .as_deref()
        .filter(|_| run.phase != AnalysisPhase::Running)
    {
        phase.push_str(&format!(": {}", quoted.point(message)));
    }
    if let Some(commit) = &run.approved_by {
        phase.push_str(&format!(
            " (approved by commit {})",
            &commit[..commit.len().min(7)]
        ));
    }
    vec![name, phase, measured(run), last(run), run.query.clone()]
}

/// "3/6: 2 successful, 1 failed" (only the verdicts that occurred).
fn measured(run: &AnalysisRun) -> String {
    let errors = match run.errors {
        1 => "error",
        _ => "errors",
    };
    let verdicts = [
        (run.successful, "successful"),
        (run.failed, "failed"),
        (run.inconclusive, "inconclusive"),
        (run.errors, errors),
    ];
    let counted: Vec<String> = verdicts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    match counted.is_empty() {
        true => format!("{}/{}", run.taken, run.count),
        false => format!("{}/{}: {}", run.taken, run.count, counted.join(", ")),
    }
}

/// The newest measurement: its value (or error), verdict and time.
fn last(run: &AnalysisRun) -> String {
    let Some(newest) = run.measurements.iter().max_by_key(|m| m.index) else {
        return String::new();
    };
    let value = match (&newest.value, &newest.error) {
        (_, Some(error)) => error.clone(),
        (Some(value), None) => value.clone(),
        (None, None) => "no data".to_string(),
    };
    let compared = newest
        .comparison
        .as_deref()
        .map(|c| format!("; {}", c.describe()))
        .unwrap_or_default();
    format!(
        "{value} ({} at {}){compared}",
        newest.verdict.as_str(),
        time(Some(newest.at))
    )
}

#[cfg(test)]
mod tests {
    use tollgate_engine::PromotionStatus;

    use super::render;

    #[test]
    fn each_run_shows_its_phase_counts_newest_value_and_resolved_query() {
        let status: PromotionStatus = serde_json::from_value(serde_json::json!({
            "hashScheme": 1, "phase": "Failed",
            "stages": [{"name": "prod", "snapshotIndex": 2,
                "appliedAt": "2026-11-24T17:00:00Z", "appliedSpecHash": "a",
                "analyses": [
                    {"name": "error-rate", "query": "sum(rate(errors{cluster=~\"prod-1\"}[2m]))",
                     "startedAt": "2026-11-24T17:00:30Z", "count": 6, "taken": 3,
                     "successful": 1, "failed": 2, "phase": "Failed",
                     "message": "2 failed measurements, over failureLimit 1",
                     "measurements": [
                        {"index": 0, "at": "2026-11-24T17:00:30Z", "value": "0.001", "verdict": "Successful"},
                        {"index": 2, "at": "2026-11-24T17:01:30Z", "value": "0.2", "verdict": "Failed"},
                        {"index": 1, "at": "2026-11-24T17:01:00Z", "value": "0.1", "verdict": "Failed"}]},
                    {"name": "smoke", "cluster": "fleet/prod-1", "dryRun": true, "query": "https://smoke/x",
                     "startedAt": "2026-11-24T17:00:30Z", "count": 2, "taken": 0, "errors": 1,
                     "phase": "Running",
                     "measurements": [{"index": 0, "at": "2026-11-24T17:00:30Z",
                        "verdict": "Error", "error": "connection refused"}]}
                ]}]
        }))
        .expect("a status");
        let pipeline = status.pipeline();
        let text = render(&pipeline[0], &super::QuotedErrors::of(&status), 150);
        // Rows, their cells wrapped over lines joined again.
        let mut rows: Vec<Vec<String>> = Vec::new();
        let lines = text
            .lines()
            .filter(|l| l.starts_with('│') && !l.contains("ANALYSIS"));
        for line in lines {
            let cells: Vec<&str> = line.trim_matches('│').split('┆').map(str::trim).collect();
            match rows.last_mut() {
                Some(row) if cells[0].is_empty() => {
                    for (cell, more) in row.iter_mut().zip(&cells).filter(|(_, m)| !m.is_empty()) {
                        cell.push(' ');
                        cell.push_str(more);
                    }
                }
                _ => rows.push(cells.iter().map(|c| c.to_string()).collect()),
            }
        }
        assert!(text.starts_with("\nStage prod: analyses\n"), "{text}");
        assert_eq!(
            rows,
            [
                vec![
                    "error-rate",
                    "Failed: 2 failed measurements, over failureLimit 1",
                    "3/6: 1 successful, 2 failed",
                    "0.2 (Failed at 2026-11-24T17:01:30Z)",
                    "sum(rate(errors{cluster=~\"prod-1\"}[2m]))",
                ],
                vec![
                    "smoke on fleet/prod-1 (dry run)",
                    "Running",
                    "0/2: 1 error",
                    "connection refused (Error at 2026-11-24T17:00:30Z)",
                    "https://smoke/x",
                ],
            ],
            "{text}"
        );
    }

    #[test]
    fn a_comparison_shows_its_cohorts_medians_effect_and_p_value() {
        let status: PromotionStatus = serde_json::from_value(serde_json::json!({
            "hashScheme": 1, "phase": "RolledBack",
            "stages": [{"name": "prod", "snapshotIndex": 2,
                "appliedAt": "2026-11-24T17:00:00Z", "appliedSpecHash": "a",
                "analyses": [
                    {"name": "latency", "query": "lat{cluster=~\"prod-1|prod-2\"}", "wave": 1,
                     "startedAt": "2026-11-24T17:00:30Z", "count": 1, "taken": 1,
                     "failed": 1, "phase": "Failed",
                     "measurements": [
                        {"index": 0, "at": "2026-11-24T17:00:30Z",
                         "value": "p=0.0015 effect=+26.9%", "verdict": "Failed",
                         "comparison": {"baseline": "OtherWaves",
                            "testCohort": ["prod-1", "prod-2"], "baselineCohort": ["prod-3", "prod-4"],
                            "record": {"testSize": 2, "baselineSize": 2, "testMedian": 0.26,
                                "baselineMedian": 0.2, "u": 4.0, "pValue": 0.0015, "effect": 0.3}}}]}]}]
        }))
        .expect("a status");
        let pipeline = status.pipeline();
        let text = render(&pipeline[0], &super::QuotedErrors::of(&status), 400);
        assert!(
            text.contains("prod-1, prod-2 (median 0.26) vs OtherWaves prod-3, prod-4 (median 0.2): effect +30%, p=0.0015"),
            "{text}"
        );
    }
}

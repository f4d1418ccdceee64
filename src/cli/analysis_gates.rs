//! How `validate` and `plan` describe a stage's analysis gates (issue #32): the stage's soak
//! (its trigger's `delay`, zero without one), how long an analysis measures
//! (`initialDelay + (count - 1) × interval`, the model's [`Analysis::duration`]) and by how much
//! it outlasts the soak, which holds the stage longer than the promotion alone says.

use std::time::Duration;

use tollgate_model::analysis::{Analysis, Provider};
use tollgate_model::duration::format_go_duration;
use tollgate_model::model::Stage;

/// The stage's soak: its trigger's delay, zero without one.
pub fn soak_of(stage: &Stage) -> Duration {
    stage
        .trigger
        .as_ref()
        .and_then(|t| t.delay())
        .map_or(Duration::ZERO, |d| d.value)
}

/// A soak as users read it: `5m0s`, and `0s` for none (not Go's `0ns`).
pub fn format_soak(soak: Duration) -> String {
    if soak.is_zero() {
        "0s".to_string()
    } else {
        format_go_duration(soak)
    }
}

/// How much longer than `soak` the analysis measures, when it does.
pub fn extends_soak_by(analysis: &Analysis, soak: Duration) -> Option<Duration> {
    Some(analysis.duration().saturating_sub(soak)).filter(|d| !d.is_zero())
}

/// `prometheus, 6 × 30s after 30s` (count × interval, after the initial delay when there is one).
pub fn describe(analysis: &Analysis) -> String {
    let provider = match analysis.provider() {
        Some(Provider::Prometheus(_)) => "prometheus",
        Some(Provider::Web(_)) => "web",
        Some(Provider::CommitStatus(_)) => "commitStatus",
        None => "no provider",
    };
    let delay = analysis.initial_delay();
    let after = if delay.is_zero() {
        String::new()
    } else {
        format!(" after {}", format_go_duration(delay))
    };
    let dry_run = if analysis.dry_run { ", dry run" } else { "" };
    format!(
        "{provider}, {} × {}{after}{dry_run}",
        analysis.count(),
        format_go_duration(analysis.interval())
    )
}

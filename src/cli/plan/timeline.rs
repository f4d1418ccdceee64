//! The estimated timeline of a new run: per stage, provisioning (of unknown length), the delay
//! (soak), then the gate: a manual approval (of unknown length) or, for an auto trigger, the wait
//! for its promotion window. Window openings come from the model's window code; nothing here
//! restates when a window is open.

use chrono::{DateTime, Duration, Timelike, Utc};
use tollgate_model::model::{ClusterPromotion, Trigger};
use tollgate_model::window::{Window, WindowState};

/// The bar drawn for provisioning, whose real length the plan cannot know.
pub const NOMINAL_PROVISIONING: Duration = Duration::minutes(1);

/// One step of a stage, in the order the run goes through them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Unknown length: drawn as [`NOMINAL_PROVISIONING`].
    Provisioning,
    /// The trigger's delay, as written (`5m`).
    Soak { delay: String, length: Duration },
    /// A manual gate: waits for an approval of unknown length (counted as none).
    Approval,
    /// The promotion window is closed when the stage would be ready: waits until it opens.
    Window {
        opens_at: DateTime<Utc>,
        length: Duration,
    },
    /// The promotion window is open when the stage would be ready: no wait.
    WindowOpen,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageEstimate {
    pub stage: String,
    pub steps: Vec<Step>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Estimate {
    pub start: DateTime<Utc>,
    pub stages: Vec<StageEstimate>,
    /// When the last stage would be done, counting unknown waits as nominal or none.
    pub end: DateTime<Utc>,
}

/// The estimate for a run of `stages` of `promotion` starting at `now` (to the minute: the
/// chart's resolution, so that bars end on whole minutes).
pub fn estimate(promotion: &ClusterPromotion, stages: &[String], now: DateTime<Utc>) -> Estimate {
    let now = now
        .with_second(0)
        .and_then(|t| t.with_nanosecond(0))
        .unwrap_or(now);
    let mut clock = now;
    let mut estimates = Vec::new();
    for name in stages {
        let Some(stage) = promotion.stage(name) else {
            continue;
        };
        let mut steps = vec![Step::Provisioning];
        clock += NOMINAL_PROVISIONING;
        if let Some(delay) = stage.trigger.as_ref().and_then(Trigger::delay) {
            let length = Duration::from_std(delay.value).unwrap_or(Duration::zero());
            steps.push(Step::Soak {
                delay: delay.text.clone(),
                length,
            });
            clock += length;
        }
        match &stage.trigger {
            Some(Trigger::Manual(_)) => steps.push(Step::Approval),
            Some(Trigger::Auto(auto)) => {
                // A window that does not parse cannot be at `to` (the snapshot is valid); if it
                // were, no wait is the honest estimate rather than a made-up one.
                if let Some(window) = auto
                    .promotion_window
                    .as_ref()
                    .and_then(|w| Window::parse(w).ok())
                {
                    match window.state_at(clock) {
                        WindowState::Open { .. } => steps.push(Step::WindowOpen),
                        WindowState::Closed { opens_at } => {
                            steps.push(Step::Window {
                                opens_at,
                                length: opens_at - clock,
                            });
                            clock = opens_at;
                        }
                    }
                }
            }
            None => {}
        }
        estimates.push(StageEstimate {
            stage: name.clone(),
            steps,
        });
    }
    Estimate {
        start: now,
        stages: estimates,
        end: clock,
    }
}

#[cfg(test)]
mod tests {
    use tollgate_fixtures::{promotion, stage};
    use tollgate_manifest::Limits;
    use tollgate_manifest::parse::parse_file;

    use super::*;

    fn window_promotion() -> ClusterPromotion {
        let text = promotion("app")
            .chart("app", "1.0.0")
            .stage(
                stage("staging")
                    .selector("env", "staging")
                    .delay("10m")
                    .window("0 10 * * *", "0 16 * * *"),
            )
            .to_yaml();
        let parsed = parse_file("app.yaml", text.as_bytes(), &Limits::default());
        parsed.promotions[0]
            .promotion
            .clone()
            .unwrap_or_else(|| panic!("invalid fixture: {:?}", parsed.all_diagnostics()))
    }

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("test time")
            .with_timezone(&Utc)
    }

    #[test]
    fn a_closed_window_waits_until_it_opens_after_provisioning_and_soak() {
        let estimate = estimate(
            &window_promotion(),
            &["staging".to_string()],
            at("2026-01-02T03:04:59Z"),
        );
        assert_eq!(estimate.start, at("2026-01-02T03:04:00Z"));
        assert_eq!(
            estimate.stages[0].steps,
            [
                Step::Provisioning,
                Step::Soak {
                    delay: "10m".into(),
                    length: Duration::minutes(10)
                },
                Step::Window {
                    opens_at: at("2026-01-02T10:00:00Z"),
                    length: Duration::minutes(7 * 60 - 15),
                },
            ]
        );
        assert_eq!(estimate.end, at("2026-01-02T10:00:00Z"));
    }

    #[test]
    fn an_open_window_adds_no_wait() {
        let estimate = estimate(
            &window_promotion(),
            &["staging".to_string()],
            at("2026-01-02T11:00:00Z"),
        );
        assert_eq!(estimate.stages[0].steps[2], Step::WindowOpen);
        assert_eq!(estimate.end, at("2026-01-02T11:11:00Z"));
    }
}

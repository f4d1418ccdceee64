//! How long provisioning took, per stage, in the runs the status keeps: what `tollgate plan`
//! estimates a rollout with instead of a guess. A sample is one provisioning of a stage (or of
//! one of its waves): an activity span `Provisioning` that ended, from its start to the next
//! span's (the instant the controller saw every cluster provisioned).

use std::collections::BTreeMap;

use chrono::Duration;

use crate::status::activity::StageActivity;
use crate::status::run_history::{RunRecord, StageRecord};

/// The runs, newest last, whose samples count.
pub const RUNS_SAMPLED: usize = 10;

/// The provisioning durations of one stage and the percentiles the estimate takes from them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageProvisioning {
    /// Each provisioning observed (a waved stage has one per wave), oldest first.
    pub samples: Vec<Duration>,
    /// The fast end: about one provisioning in ten took less.
    pub p10: Duration,
    /// The typical provisioning.
    pub p50: Duration,
    /// The slow end: about one provisioning in ten took longer.
    pub p90: Duration,
}

/// What the run history says of provisioning.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProvisioningHistory {
    /// The runs (of the last [`RUNS_SAMPLED`]) with at least one sample.
    pub runs: usize,
    pub by_stage: BTreeMap<String, StageProvisioning>,
}

impl ProvisioningHistory {
    /// Per stage, one percentile of its samples (`p10`, `p50` or `p90`), for a simulation.
    pub fn latencies(
        &self,
        pick: fn(&StageProvisioning) -> Duration,
    ) -> BTreeMap<String, Duration> {
        self.by_stage
            .iter()
            .map(|(stage, provisioning)| (stage.clone(), pick(provisioning)))
            .collect()
    }
}

/// The nearest-rank `percent` percentile of `samples` (`None` when there are none).
pub fn percentile(samples: &[Duration], percent: u32) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = (percent.clamp(1, 100) as usize * sorted.len()).div_ceil(100);
    Some(sorted[rank.max(1) - 1])
}

/// The provisionings of one stage record that ended.
fn stage_samples(stage: &StageRecord) -> impl Iterator<Item = Duration> + '_ {
    stage.activities.windows(2).filter_map(|pair| {
        matches!(pair[0].activity, StageActivity::Provisioning { .. })
            .then(|| pair[1].since - pair[0].since)
            .filter(|d| *d >= Duration::zero())
    })
}

/// The provisioning history of the last [`RUNS_SAMPLED`] of `runs` (oldest first).
pub fn provisioning_history(runs: &[RunRecord]) -> ProvisioningHistory {
    let recent = &runs[runs.len().saturating_sub(RUNS_SAMPLED)..];
    let mut samples: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    let mut sampled_runs = 0;
    for run in recent {
        let mut sampled = false;
        for stage in &run.stages {
            for duration in stage_samples(stage) {
                samples
                    .entry(stage.name.clone())
                    .or_default()
                    .push(duration);
                sampled = true;
            }
        }
        sampled_runs += usize::from(sampled);
    }
    let by_stage = samples
        .into_iter()
        .filter_map(|(stage, samples)| {
            let p10 = percentile(&samples, 10)?;
            let p50 = percentile(&samples, 50)?;
            let p90 = percentile(&samples, 90)?;
            let provisioning = StageProvisioning {
                samples,
                p10,
                p50,
                p90,
            };
            Some((stage, provisioning))
        })
        .collect();
    ProvisioningHistory {
        runs: sampled_runs,
        by_stage,
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, TimeZone, Utc};

    use super::*;
    use crate::status::activity::WaveOf;
    use crate::status::run_history::{ActivitySpan, RunOutcome};

    fn at(seconds: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + seconds, 0).unwrap()
    }

    fn span(activity: StageActivity, since: i64) -> ActivitySpan {
        ActivitySpan {
            activity,
            since: at(since),
        }
    }

    fn run(stages: Vec<StageRecord>) -> RunRecord {
        RunRecord {
            snapshot_index: 1,
            commit: "abc".to_string(),
            committed_at: None,
            rollback_of: None,
            started_at: at(0),
            trace_id: None,
            ended_at: None,
            outcome: RunOutcome::Completed,
            stages,
            held_starts: Vec::new(),
            rollback: None,
        }
    }

    fn stage(name: &str, activities: Vec<ActivitySpan>) -> StageRecord {
        StageRecord {
            activities,
            ..StageRecord::new(name.to_string(), at(0))
        }
    }

    fn provisioning(wave: Option<(u32, u32)>) -> StageActivity {
        StageActivity::Provisioning {
            wave: wave.map(|(wave, of)| WaveOf { wave, of }),
        }
    }

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=10).rev().map(Duration::seconds).collect();
        assert_eq!(percentile(&samples, 10), Some(Duration::seconds(1)));
        assert_eq!(percentile(&samples, 50), Some(Duration::seconds(5)));
        assert_eq!(percentile(&samples, 90), Some(Duration::seconds(9)));
        assert_eq!(percentile(&samples[..1], 90), Some(Duration::seconds(10)));
        assert_eq!(percentile(&samples[..1], 10), Some(Duration::seconds(10)));
        assert_eq!(percentile(&[], 50), None);
    }

    /// One recorded provisioning: the fast end, the typical one and the slow end are the same.
    #[test]
    fn one_sample_is_every_percentile() {
        let activities = vec![
            span(provisioning(None), 0),
            span(StageActivity::Completed, 7),
        ];
        let history = provisioning_history(&[run(vec![stage("dev", activities)])]);
        let dev = &history.by_stage["dev"];
        assert_eq!(history.runs, 1);
        assert_eq!(
            (dev.p10, dev.p50, dev.p90),
            (
                Duration::seconds(7),
                Duration::seconds(7),
                Duration::seconds(7)
            )
        );
    }

    /// A failed run counts: a provisioning that ended in the stage's failure is a sample (the
    /// time until the failure was seen), and the run is one of the recorded runs.
    #[test]
    fn a_provisioning_that_failed_is_a_sample_too() {
        let failed = StageActivity::Failed {
            reason: "2 of 2 clusters failed".to_string(),
        };
        let completed = run(vec![stage(
            "dev",
            vec![
                span(provisioning(None), 0),
                span(StageActivity::Completed, 10),
            ],
        )]);
        let mut failing = run(vec![stage(
            "dev",
            vec![span(provisioning(None), 0), span(failed, 90)],
        )]);
        failing.outcome = RunOutcome::Failed;
        let history = provisioning_history(&[completed, failing]);
        assert_eq!(history.runs, 2);
        let dev = &history.by_stage["dev"];
        assert_eq!(dev.samples, [Duration::seconds(10), Duration::seconds(90)]);
        assert_eq!(
            (dev.p10, dev.p90),
            (Duration::seconds(10), Duration::seconds(90))
        );
    }

    #[test]
    fn each_provisioning_that_ended_is_a_sample_of_its_stage() {
        let soak = StageActivity::Soaking { until: at(100) };
        let runs = vec![
            run(vec![
                stage(
                    "dev",
                    vec![span(provisioning(None), 0), span(soak.clone(), 12)],
                ),
                stage(
                    "prod",
                    vec![
                        span(provisioning(Some((1, 2))), 20),
                        span(
                            StageActivity::WavePause {
                                wave: WaveOf { wave: 1, of: 2 },
                                until: at(60),
                            },
                            50,
                        ),
                        span(provisioning(Some((2, 2))), 60),
                        span(soak.clone(), 100),
                    ],
                ),
            ]),
            // Still provisioning: no sample.
            run(vec![stage("dev", vec![span(provisioning(None), 0)])]),
        ];
        let history = provisioning_history(&runs);
        assert_eq!(history.runs, 1);
        let samples = |stage: &str| history.by_stage[stage].samples.clone();
        assert_eq!(samples("dev"), [Duration::seconds(12)]);
        assert_eq!(
            samples("prod"),
            [Duration::seconds(30), Duration::seconds(40)]
        );
        assert_eq!(history.by_stage["prod"].p10, Duration::seconds(30));
        assert_eq!(history.by_stage["prod"].p50, Duration::seconds(30));
        assert_eq!(history.by_stage["prod"].p90, Duration::seconds(40));
        let p90 = history.latencies(|s| s.p90);
        assert_eq!(p90["dev"], Duration::seconds(12));
    }

    #[test]
    fn only_the_last_runs_count() {
        let runs: Vec<RunRecord> = (0..RUNS_SAMPLED as i64 + 3)
            .map(|n| {
                let activities = vec![
                    span(provisioning(None), 0),
                    span(StageActivity::Completed, n + 1),
                ];
                run(vec![stage("dev", activities)])
            })
            .collect();
        let history = provisioning_history(&runs);
        assert_eq!(history.runs, RUNS_SAMPLED);
        assert_eq!(history.by_stage["dev"].samples[0], Duration::seconds(4));
    }
}

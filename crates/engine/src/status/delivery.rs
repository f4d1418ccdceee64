//! Delivery figures from the run history alone: per promotion and per stage, how many times a
//! snapshot was deployed, how long from commit to the stage completed (lead time), how many runs
//! failed (halted or rolled back) of those that ended (change-failure rate), and how long it took
//! to restore after a failure (time to restore). Pure: the web view and the metrics both call
//! this, with the commit times they know.

use chrono::{DateTime, Duration, Utc};

use crate::status::run_history::{RunOutcome, RunRecord};

/// The figures of one stage, or of the whole pipeline (its last stage completed = the run did).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    /// Runs that reached it and ended (completed, failed, rolled back or superseded).
    pub runs_ended: u32,
    /// Runs in which it completed: deployments.
    pub deployments: u32,
    /// Runs that reached it and were halted or rolled back.
    pub failures: u32,
    /// Lead time of the newest deployment, and the mean over the kept runs.
    pub lead_time_last: Option<Duration>,
    pub lead_time_mean: Option<Duration>,
    /// Mean time from a failure to the restore (rollback restored, or the next completed run).
    pub time_to_restore_mean: Option<Duration>,
}

impl Figures {
    /// Failed runs of the ended runs (`None` before any run ended).
    pub fn change_failure_rate(&self) -> Option<f64> {
        (self.runs_ended > 0).then(|| f64::from(self.failures) / f64::from(self.runs_ended))
    }
}

/// The figures for `stage` (`None`: the whole pipeline). Lead time counts from the commit that
/// introduced the run's snapshot; for a run recorded before commits were (no `committedAt`), from
/// the run's start. Every view (the web page, the metrics) reads these.
pub fn figures(runs: &[RunRecord], stage: Option<&str>) -> Figures {
    let mut figures = Figures::default();
    let mut lead_times = Vec::new();
    let mut restores = Vec::new();
    for (position, run) in runs.iter().enumerate() {
        let reached = match stage {
            None => true,
            Some(name) => run.stages.iter().any(|s| s.name == name),
        };
        if !reached {
            continue;
        }
        // A stage that completed is deployed, whether or not the rest of its run has ended.
        if let Some(done) = completed_at(run, stage) {
            figures.deployments += 1;
            let from = run.committed_at.unwrap_or(run.started_at);
            lead_times.push(done - from);
        }
        if run.outcome == RunOutcome::Running {
            continue;
        }
        figures.runs_ended += 1;
        if matches!(run.outcome, RunOutcome::Failed | RunOutcome::RolledBack) {
            figures.failures += 1;
            if let Some(restore) = time_to_restore(run, &runs[position + 1..]) {
                restores.push(restore);
            }
        }
    }
    figures.lead_time_last = lead_times.last().copied();
    figures.lead_time_mean = mean(&lead_times);
    figures.time_to_restore_mean = mean(&restores);
    figures
}

/// When `stage` (or, for `None`, the run) completed in `run`.
fn completed_at(run: &RunRecord, stage: Option<&str>) -> Option<DateTime<Utc>> {
    match stage {
        Some(name) => run.stages.iter().find(|s| s.name == name)?.succeeded_at,
        None => (run.outcome == RunOutcome::Completed)
            .then_some(run.ended_at)
            .flatten(),
    }
}

/// From the failure to the rollback's last restore, or else to the end of the next completed
/// run; `None` while not restored.
fn time_to_restore(run: &RunRecord, later: &[RunRecord]) -> Option<Duration> {
    let failed = run
        .stages
        .iter()
        .filter_map(|s| s.failed_at)
        .min()
        .or(run.ended_at)?;
    let restored = run.stages.iter().filter_map(|s| s.restored_at).max();
    let restored = match (run.outcome, restored) {
        (RunOutcome::RolledBack, Some(at)) => Some(at),
        _ => later
            .iter()
            .find(|next| next.outcome == RunOutcome::Completed)
            .and_then(|next| next.ended_at),
    }?;
    Some(restored - failed)
}

fn mean(durations: &[Duration]) -> Option<Duration> {
    let count = i32::try_from(durations.len()).ok().filter(|n| *n > 0)?;
    let total: Duration = durations.iter().copied().sum();
    Some(total / count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::run_history::StageRecord;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + Duration::seconds(seconds)
    }

    fn run(index: u64, outcome: RunOutcome, start: i64, end: Option<i64>) -> RunRecord {
        RunRecord {
            snapshot_index: index,
            commit: format!("c{index}"),
            committed_at: None,
            rollback_of: None,
            rollback: None,
            started_at: at(start),
            trace_id: None,
            ended_at: end.map(at),
            outcome,
            stages: Vec::new(),
            held_starts: Vec::new(),
        }
    }

    fn stage(name: &str, applied: i64, succeeded: Option<i64>, failed: Option<i64>) -> StageRecord {
        let mut record = StageRecord::new(name.to_string(), at(applied));
        record.succeeded_at = succeeded.map(at);
        record.failed_at = failed.map(at);
        record
    }

    #[test]
    fn deployments_lead_time_failure_rate_and_restore_come_from_the_runs() {
        let mut first = run(1, RunOutcome::Completed, 100, Some(300));
        first.stages = vec![
            stage("dev", 100, Some(150), None),
            stage("prod", 150, Some(300), None),
        ];
        let mut second = run(2, RunOutcome::RolledBack, 1000, Some(1300));
        second.stages = vec![
            stage("dev", 1000, Some(1100), None),
            stage("prod", 1100, None, Some(1200)),
        ];
        second.stages[1].restored_at = Some(at(1290));
        let mut third = run(3, RunOutcome::Completed, 2000, Some(2400));
        // The commit of #3 was made a minute before its run started.
        third.committed_at = Some(at(1940));
        third.stages = vec![
            stage("dev", 2000, Some(2100), None),
            stage("prod", 2100, Some(2400), None),
        ];
        let running = run(4, RunOutcome::Running, 3000, None);
        let runs = [first, second, third, running];
        let prod = figures(&runs, Some("prod"));
        assert_eq!(prod.runs_ended, 3);
        assert_eq!(prod.deployments, 2);
        assert_eq!(prod.failures, 1);
        assert_eq!(prod.change_failure_rate(), Some(1.0 / 3.0));
        assert_eq!(prod.lead_time_last, Some(Duration::seconds(460)));
        assert_eq!(prod.lead_time_mean, Some(Duration::seconds(330)));
        assert_eq!(prod.time_to_restore_mean, Some(Duration::seconds(90)));

        let dev = figures(&runs, Some("dev"));
        assert_eq!((dev.deployments, dev.failures), (3, 1));

        let whole = figures(&runs, None);
        assert_eq!((whole.runs_ended, whole.deployments), (3, 2));
    }

    #[test]
    fn a_stage_completed_in_a_run_still_running_is_a_deployment() {
        let mut running = run(1, RunOutcome::Running, 0, None);
        running.stages = vec![
            stage("dev", 0, Some(30), None),
            stage("prod", 30, None, None),
        ];
        let runs = [running];
        let dev = figures(&runs, Some("dev"));
        assert_eq!((dev.deployments, dev.runs_ended), (1, 0));
        assert_eq!(dev.lead_time_last, Some(Duration::seconds(30)));
        let prod = figures(&runs, Some("prod"));
        assert_eq!(prod.deployments, 0);
        assert_eq!(figures(&runs, None).deployments, 0);
    }

    #[test]
    fn a_halted_run_is_restored_by_the_next_completed_run_and_nothing_ended_has_no_rate() {
        let mut halted = run(1, RunOutcome::Failed, 0, Some(50));
        halted.stages = vec![stage("prod", 0, None, Some(40))];
        let mut fixed = run(2, RunOutcome::Completed, 100, Some(160));
        fixed.stages = vec![stage("prod", 100, Some(160), None)];
        let figures_ = figures(&[halted, fixed], Some("prod"));
        assert_eq!(figures_.time_to_restore_mean, Some(Duration::seconds(120)));
        assert_eq!(figures(&[], None).change_failure_rate(), None);
    }
}

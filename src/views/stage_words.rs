//! What every view says about a stage, in one place: its activity in words (from the engine's
//! [`StageActivity`], never re-derived from other status fields) and the counts that apply to
//! what it runs. The live view words times relative to now; the plain table words them as
//! RFC 3339 instants, so that its output stays stable for scripts.

use chrono::{DateTime, Utc};
use tollgate_engine::activity::{StageActivity, WaveOf};
use tollgate_engine::pipeline::{StageView, current_of};
use tollgate_engine::status::StageCounts;

use super::relative::{coarse, precise, time};

/// How times are worded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Times {
    /// As RFC 3339 instants ("ends 2026-11-24T17:41:12Z"): the plain table.
    Absolute,
    /// Relative to `now`, with the clock time of an end ("ends 17:41:12 (in 1m12s)").
    Relative(DateTime<Utc>),
    /// Relative to `now`, as short as it gets ("ends in 1m12s"): a narrow live view.
    Countdown(DateTime<Utc>),
}

/// The activity of `view`, in words.
pub fn activity(view: &StageView<'_>, times: Times) -> String {
    match view.activity {
        StageActivity::Pending => "pending".to_string(),
        StageActivity::Provisioning { wave } => provisioning(view, *wave, times),
        StageActivity::WavePause { wave, until } => {
            let done = format!("wave {}/{} done", wave.wave, wave.of);
            match times {
                Times::Countdown(now) => format!("{done}, next in {}", precise(now, *until)),
                _ => format!(
                    "{done}, wave {} starts {}",
                    wave.wave + 1,
                    end(*until, times)
                ),
            }
        }
        StageActivity::Soaking { until } => format!("soaking, ends {}", end(*until, times)),
        StageActivity::HealthChecks => "waiting for health checks".to_string(),
        StageActivity::AwaitingWindow { until } => match times {
            Times::Countdown(_) => format!("awaiting window, opens {}", end(*until, times)),
            _ => format!(
                "awaiting the promotion window, opens {}",
                end(*until, times)
            ),
        },
        StageActivity::AwaitingApproval => match view.quorum() {
            Some(quorum) => format!("awaiting approval, {}{}", quorum.tally(), age(view, times)),
            None => format!("awaiting approval{}", age(view, times)),
        },
        StageActivity::Analyzing { until } => analyzing(view, *until, times),
        StageActivity::AnalysisInconclusive { reason } => format!(
            "analysis inconclusive, awaiting approval{}: {}",
            age(view, times),
            reason.lines().next().unwrap_or_default()
        ),
        StageActivity::Blackout {
            until,
            reason,
            wave,
        } => blackout(*until, reason.as_deref(), *wave, times),
        StageActivity::AwaitingDependency { dependency } => {
            format!("waits for {dependency}{}", age(view, times))
        }
        StageActivity::Paused => format!("paused{}", age(view, times)),
        StageActivity::Completed => completed(view, times),
        StageActivity::Skipped => "skipped: no matching clusters".to_string(),
        StageActivity::Failed { reason } => {
            format!("failed: {}", reason.lines().next().unwrap_or_default())
        }
        StageActivity::RollingBack { snapshot } => match snapshot {
            Some(to) => format!("rolling back to #{to}"),
            None => "rolling back (withdrawing its profiles)".to_string(),
        },
        StageActivity::Restored { snapshot } => match snapshot {
            Some(to) => format!("restored to #{to}"),
            None => "restored: profiles withdrawn (none before this run)".to_string(),
        },
    }
}

/// The stage the promotion's phase is about (the engine's [`current_of`]).
pub fn current<'v, 's>(
    pipeline: &'v [StageView<'s>],
    current_stage_name: Option<&str>,
) -> Option<&'v StageView<'s>> {
    current_of(pipeline, current_stage_name)
}

/// The counts a view shows for `view` (the engine's [`StageView::shown_counts`]).
pub fn counts<'s>(view: &StageView<'s>) -> Option<&'s StageCounts> {
    view.shown_counts()
}

/// The clusters of `view` that are not Provisioned, as every view lists them: none while a
/// rollback restores the stage or once it has (those listed are the rejected snapshot's), and
/// how many more there are than listed.
pub fn not_provisioned<'s>(view: &StageView<'s>) -> (&'s [tollgate_engine::ClusterCondition], u32) {
    match (view.status, counts(view)) {
        (Some(stage), Some(_)) => (&stage.not_provisioned, stage.not_provisioned_unlisted),
        _ => (&[], 0),
    }
}

/// The clusters a stage is judged over: its members (every wave), or, in a status written
/// before members were counted, the clusters matching.
pub fn members(counts: &StageCounts) -> u32 {
    match counts.members {
        0 => counts.matching_clusters,
        members => members,
    }
}

/// Failed plus timed-out clusters: what the stage's failure budget counts.
pub fn failures(counts: &StageCounts) -> u32 {
    counts.failed.saturating_add(counts.timed_out)
}

/// "analyzing 3/5, next in 40s": the measurements taken of those the stage's analyses need.
fn analyzing(view: &StageView<'_>, next: Option<DateTime<Utc>>, times: Times) -> String {
    let runs = view.status.and_then(|st| st.analyses.as_deref());
    let (taken, count) = runs.into_iter().flatten().fold((0, 0), |(t, c), run| {
        (t + run.taken.min(run.count), c + run.count)
    });
    let mut text = match count {
        0 => "analyzing".to_string(),
        _ => format!("analyzing {taken}/{count}"),
    };
    if let Some(next) = next {
        text.push_str(&match times {
            Times::Countdown(now) => format!(", next in {}", precise(now, next)),
            _ => format!(", next measurement {}", end(next, times)),
        });
    }
    text
}

fn provisioning(view: &StageView<'_>, wave: Option<WaveOf>, times: Times) -> String {
    let mut text = match wave {
        Some(wave) => format!("wave {}/{}: provisioning", wave.wave, wave.of),
        None => "provisioning".to_string(),
    };
    let deadline = view.status.and_then(|st| st.deadline);
    match (deadline, times) {
        (Some(deadline), Times::Absolute) => {
            text.push_str(&format!(", deadline {}", time(Some(deadline))));
        }
        (Some(deadline), Times::Relative(now) | Times::Countdown(now)) if deadline > now => {
            text.push_str(&format!(", deadline in {}", precise(now, deadline)));
        }
        _ => {}
    }
    // Clusters Sveltos pauses hold the stage (pausedClusters: Wait) or are left out (Skip).
    let paused = view.status.map_or(0, |st| st.counts.paused);
    if paused > 0 {
        text.push_str(&format!(", {paused} waiting for a maintenance window"));
    }
    text
}

fn blackout(
    until: DateTime<Utc>,
    reason: Option<&str>,
    wave: Option<WaveOf>,
    times: Times,
) -> String {
    let reason = reason.map(|r| format!(" ({r})")).unwrap_or_default();
    match times {
        Times::Absolute => {
            let held = wave
                .map(|w| format!("wave {}/{} held: ", w.wave, w.of))
                .unwrap_or_default();
            format!("{held}blackout until {}{reason}", time(Some(until)))
        }
        Times::Relative(now) => {
            let held = wave
                .map(|w| format!("wave {}/{} held: ", w.wave, w.of))
                .unwrap_or_default();
            let left = precise(now, until);
            format!(
                "{held}blackout until {}{reason}, {left} left",
                clock(until, now)
            )
        }
        Times::Countdown(now) => {
            let held = wave
                .map(|w| format!("wave {}/{}: ", w.wave, w.of))
                .unwrap_or_default();
            format!("{held}blackout, {} left{reason}", precise(now, until))
        }
    }
}

fn completed(view: &StageView<'_>, times: Times) -> String {
    let tolerated = match view.counts.map(failures).unwrap_or(0) {
        0 => String::new(),
        1 => ", 1 failure tolerated".to_string(),
        n => format!(", {n} failures tolerated"),
    };
    match (times, view.since) {
        (Times::Absolute, Some(at)) => format!("completed at {}{tolerated}", time(Some(at))),
        // Short: the tolerated failures matter more than how long ago.
        (Times::Countdown(_), _) if !tolerated.is_empty() => format!("completed{tolerated}"),
        (Times::Relative(now) | Times::Countdown(now), Some(at)) => {
            format!("completed {} ago{tolerated}", coarse(at, now))
        }
        (_, None) => format!("completed{tolerated}"),
    }
}

/// When an activity with an end ends: an instant, or a countdown.
fn end(until: DateTime<Utc>, times: Times) -> String {
    match times {
        Times::Absolute => time(Some(until)),
        Times::Relative(now) => format!("{} (in {})", clock(until, now), precise(now, until)),
        Times::Countdown(now) => format!("in {}", precise(now, until)),
    }
}

/// How long an open-ended activity has lasted: " since <instant>", or " for 3m".
fn age(view: &StageView<'_>, times: Times) -> String {
    match (times, view.since) {
        (Times::Absolute, Some(since)) => format!(" since {}", time(Some(since))),
        (Times::Relative(now) | Times::Countdown(now), Some(since)) => {
            format!(" for {}", coarse(since, now))
        }
        (_, None) => String::new(),
    }
}

/// A clock time in UTC (the live view's clock line is in UTC): the time of day when it is
/// today, else the date too.
fn clock(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    if at.date_naive() == now.date_naive() {
        at.format("%H:%M:%S").to_string()
    } else {
        at.format("%Y-%m-%d %H:%M").to_string()
    }
}

#[cfg(test)]
#[path = "stage_words_tests.rs"]
mod tests;

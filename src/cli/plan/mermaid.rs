//! The estimated timeline as a Mermaid `gantt` block, which GitHub renders in a PR comment: one
//! section per stage, one task per activity the engine's simulation names for it (the same
//! activity spans the run history holds), and below it what the bars cannot say.
//!
//! Mermaid's rules this follows: `dateFormat` is how start dates are written and `axisFormat`
//! (d3 `%` codes) how the axis shows them; a task is `name :[tags, ]id, start, end` where the
//! tags are `crit` and `milestone`, ids are `[A-Za-z0-9_-]`, and `end` is a date or a length (a
//! milestone's `0m`); a colon ends a task name and `#`/`;` have meanings too, so names never
//! contain them. Times are written in UTC and labelled so.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use tollgate_engine::RunOutcome;
use tollgate_engine::activity::StageActivity;
use tollgate_engine::preview::{RunStart, StartsAfter};
use tollgate_engine::run_history::{RunRecord, StageRecord};
use tollgate_engine::simulate::{Simulation, SimulationEnd};

use super::estimate::{Estimate, PROVISIONING_LATENCY};

/// One bar (or milestone) of the chart.
struct Task {
    name: String,
    crit: bool,
    milestone: bool,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
}

/// The ```` ```mermaid ```` block of the run of `snapshot` in the estimate's median simulation
/// (after what is left of a run in progress that finishes first) and, below it, what the bars
/// cannot say, in Markdown.
pub fn render(
    promotion: &str,
    estimate: &Estimate,
    snapshot: u64,
    start: Option<&RunStart>,
    now: DateTime<Utc>,
) -> String {
    let simulation = &estimate.p50;
    let latency = latency_note(estimate);
    let run = simulation.run_of(snapshot);
    // And a run in progress at `now` that goes on (not one superseded at once).
    let runs: Vec<&RunRecord> = simulation
        .runs
        .iter()
        .filter(|r| {
            r.snapshot_index == snapshot
                || (r.outcome != RunOutcome::Superseded && r.ended_at.is_none_or(|end| end >= now))
        })
        .collect();
    if run.is_none() {
        return legend(promotion, simulation, None, start, (now, &latency));
    }
    let mut out = String::from("```mermaid\ngantt\n");
    let _ = writeln!(
        out,
        "    title {} estimated rollout (UTC)",
        task_name(promotion)
    );
    out.push_str("    dateFormat YYYY-MM-DD HH:mm:ss\n    axisFormat %m-%d %H:%M\n");
    let mut index = 0;
    for run in &runs {
        let run_end = run.ended_at.unwrap_or_else(|| simulation.end.at());
        for stage in sections(run) {
            let tasks = from_now(stage_tasks(run, &stage, run_end), now);
            if tasks.is_empty() {
                continue;
            }
            index += 1;
            // `#` starts an entity in Mermaid: runs are named in words.
            let section = match runs.len() {
                1 => stage,
                _ => format!("run {} - {stage}", run.snapshot_index),
            };
            write_section(&mut out, &section, index, &tasks);
        }
    }
    out.push_str("```\n\n");
    out.push_str(&legend(promotion, simulation, run, start, (now, &latency)));
    out
}

/// What is left of `tasks` from `now` on (a run in progress began before it).
fn from_now(tasks: Vec<Task>, now: DateTime<Utc>) -> Vec<Task> {
    tasks
        .into_iter()
        .filter(|t| {
            if t.milestone {
                t.start >= now
            } else {
                t.end > now
            }
        })
        .map(|t| Task {
            start: t.start.max(now),
            ..t
        })
        .collect()
}

/// One section: `section <name>`, then a line per task (ids `s<section>_<n>`).
fn write_section(out: &mut String, section: &str, index: usize, tasks: &[Task]) {
    let _ = writeln!(out, "    section {}", task_name(section));
    for (n, task) in tasks.iter().enumerate() {
        let mut tags = String::new();
        if task.crit {
            tags.push_str("crit, ");
        }
        let end = match task.milestone {
            true => {
                tags.push_str("milestone, ");
                "0m".to_string()
            }
            false => date(task.end),
        };
        let _ = writeln!(
            out,
            "    {} :{tags}s{index}_{}, {}, {end}",
            task_name(&task.name),
            n + 1,
            date(task.start),
        );
    }
}

/// The stages in the order the run reaches them: those entered, then those only a blackout held.
fn sections(run: &RunRecord) -> Vec<String> {
    let mut names: Vec<String> = run.stages.iter().map(|s| s.name.clone()).collect();
    for hold in &run.held_starts {
        if !names.contains(&hold.stage) {
            names.push(hold.stage.clone());
        }
    }
    names
}

/// The tasks of one stage: a blackout that held its start, then one per activity span (an
/// approval is a milestone; a span of no length, or a state that is no activity, is no bar).
fn stage_tasks(run: &RunRecord, stage: &str, run_end: DateTime<Utc>) -> Vec<Task> {
    let mut tasks: Vec<Task> = run
        .held_starts
        .iter()
        .filter(|h| h.stage == stage)
        .map(|h| Task {
            name: "blackout holds the start".to_string(),
            crit: true,
            milestone: false,
            start: h.since,
            end: h.until,
        })
        .collect();
    let Some(record) = run.stages.iter().find(|s| s.name == stage) else {
        return tasks;
    };
    for (i, span) in record.activities.iter().enumerate() {
        let end = span_end(record, i, run_end);
        let milestone = span.activity == StageActivity::AwaitingApproval;
        let Some((name, crit)) = task_of(&span.activity) else {
            continue;
        };
        if end <= span.since && !milestone {
            continue;
        }
        // An approval is the instant it comes (assumed: the moment it is asked, or `now` for a
        // gate that was waiting already).
        let start = if milestone { end } else { span.since };
        tasks.push(Task {
            name,
            crit,
            milestone,
            start,
            end,
        });
    }
    tasks
}

/// A span lasts until the next one starts, or the run's end.
fn span_end(record: &StageRecord, index: usize, run_end: DateTime<Utc>) -> DateTime<Utc> {
    record
        .activities
        .get(index + 1)
        .map_or(run_end, |next| next.since)
}

/// A span's task name, and whether it is shown as critical (something holds the rollout); `None`
/// for a state that is no activity to draw (done, skipped, restored).
fn task_of(activity: &StageActivity) -> Option<(String, bool)> {
    let wave = |w: tollgate_engine::activity::WaveOf| format!("wave {}/{}", w.wave, w.of);
    Some(match activity {
        StageActivity::Provisioning { wave: Some(w) } => {
            (format!("provisioning {}", wave(*w)), false)
        }
        StageActivity::Provisioning { wave: None } => ("provisioning".to_string(), false),
        StageActivity::WavePause { wave: w, .. } => (format!("pause after {}", wave(*w)), false),
        StageActivity::Soaking { .. } => ("soak".to_string(), false),
        StageActivity::HealthChecks => ("health checks".to_string(), false),
        StageActivity::AwaitingWindow { .. } => {
            ("wait for the promotion window".to_string(), false)
        }
        StageActivity::AwaitingApproval => ("approval (assumed at once)".to_string(), false),
        StageActivity::Analyzing { .. } => {
            ("analysis (measurements assumed to pass)".to_string(), false)
        }
        StageActivity::AnalysisInconclusive { .. } => (
            "analysis inconclusive, waits for an approval".to_string(),
            true,
        ),
        StageActivity::Blackout { wave: Some(w), .. } => {
            (format!("blackout holds {}", wave(*w)), true)
        }
        StageActivity::Blackout { wave: None, .. } => ("blackout".to_string(), true),
        StageActivity::AwaitingDependency { dependency } => {
            (format!("waits for {dependency}"), true)
        }
        StageActivity::Paused => ("paused".to_string(), true),
        StageActivity::Failed { .. } => ("failed".to_string(), true),
        StageActivity::RollingBack { .. } => ("rolling back".to_string(), true),
        StageActivity::Pending
        | StageActivity::Completed
        | StageActivity::Skipped
        | StageActivity::Restored { .. } => return None,
    })
}

/// A date as `dateFormat` reads it.
fn date(instant: DateTime<Utc>) -> String {
    instant.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// A name Mermaid reads as plain text: no `:` (ends the name), `;` (ends the line) or `#`
/// (starts an entity).
fn task_name(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            ':' | ';' | '#' => '-',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

fn utc(instant: DateTime<Utc>) -> String {
    instant.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// How long the bars' provisionings take.
fn latency_note(estimate: &Estimate) -> String {
    let assumed = format!("is assumed to take {}m", PROVISIONING_LATENCY.num_minutes());
    match estimate.history.runs {
        0 => format!("each provisioning (of a stage, or of a wave) {assumed}"),
        runs if estimate.assumed_stages.is_empty() => format!(
            "each provisioning (of a stage, or of a wave) takes the median of its stage's in {runs} recorded runs"
        ),
        runs => format!(
            "each provisioning (of a stage, or of a wave) takes the median of its stage's in {runs} recorded runs; of {} (none recorded) {assumed}",
            estimate.assumed_stages.join(", ")
        ),
    }
}

/// What the bars cannot say, as a short Markdown list (from `now`, provisioning taking `latency`).
fn legend(
    promotion: &str,
    simulation: &Simulation,
    run: Option<&RunRecord>,
    start: Option<&RunStart>,
    (now, latency): (DateTime<Utc>, &str),
) -> String {
    let mut lines = vec![format!(
        "- times in UTC, from {}; {latency}",
        now.format("%Y-%m-%d %H:%M"),
    )];
    if simulation.fleet_assumed {
        lines.push(
            "- clusters: the management cluster was not read, so each stage is assumed to have one cluster (a waved stage one per wave)"
                .to_string(),
        );
    }
    if let Some(note) = start.and_then(start_note) {
        lines.push(note);
    }
    if let Some(run) = run {
        lines.extend(waits(run));
    }
    let snapshot = run.map(|r| r.snapshot_index);
    for gate in &simulation.assumed_approvals {
        let stage = match Some(gate.snapshot) == snapshot {
            true => gate.stage.clone(),
            false => format!("{} of run #{} in progress", gate.stage, gate.snapshot),
        };
        lines.push(format!(
            "- {stage}: waits for an approval from {} (the milestone); later times assume it comes at once",
            utc(gate.at)
        ));
    }
    lines.push(end_note(promotion, &simulation.end));
    lines.join("\n") + "\n"
}

/// What the start of the run waits for, or depends on that the simulation could not know.
fn start_note(start: &RunStart) -> Option<String> {
    match &start.after {
        StartsAfter::RunInProgressIfAny { policy } => Some(format!(
            "- assumes no run in progress: with onNewSnapshot {}, a run in progress finishes first (the cluster's status was not read)",
            policy.as_str()
        )),
        StartsAfter::RunningRun {
            policy, running, ..
        } => Some(format!(
            "- run #{running} in progress finishes first (onNewSnapshot {}): the sections named run {running} are what is left of it",
            policy.as_str()
        )),
        StartsAfter::Nothing {
            supersedes: Some(running),
        } => Some(format!(
            "- run #{running} in progress is superseded at once"
        )),
        _ => None,
    }
}

/// The waits the engine named: blackouts and promotion windows, with their ends.
fn waits(run: &RunRecord) -> Vec<String> {
    let mut lines: Vec<String> = run
        .held_starts
        .iter()
        .map(|hold| {
            let reason = hold
                .reason
                .as_ref()
                .map_or(String::new(), |r| format!(" ({r})"));
            format!(
                "- {}: a blackout{reason} holds its start until {}: no stage starts before then",
                hold.stage,
                utc(hold.until)
            )
        })
        .collect();
    for stage in &run.stages {
        for span in &stage.activities {
            match &span.activity {
                StageActivity::AwaitingWindow { until } => lines.push(format!(
                    "- {}: waits for its promotion window, which opens at {}",
                    stage.name,
                    utc(*until)
                )),
                StageActivity::Blackout {
                    until,
                    wave: Some(w),
                    ..
                } => lines.push(format!(
                    "- {}: a blackout holds wave {}/{} until {}",
                    stage.name,
                    w.wave,
                    w.of,
                    utc(*until)
                )),
                _ => {}
            }
        }
    }
    lines
}

fn end_note(promotion: &str, end: &SimulationEnd) -> String {
    match end {
        SimulationEnd::Completed { at } => format!(
            "- estimated end: {}, plus any provisioning beyond the assumed time and any wait for approval",
            utc(*at)
        ),
        SimulationEnd::Failed { at, reason } => {
            format!("- the run would fail at {}: {reason}", utc(*at))
        }
        SimulationEnd::Stuck { at, reason } => format!(
            "- {promotion} would not go on by itself from {}: {reason}",
            utc(*at)
        ),
        SimulationEnd::StepLimit { at } => format!(
            "- the estimate stops at {} (too many steps to simulate)",
            utc(*at)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_names_never_carry_mermaid_syntax() {
        assert_eq!(task_name("eu:west;1#a\nb"), "eu-west-1-a b");
    }
}

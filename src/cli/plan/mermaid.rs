//! The estimated timeline as a Mermaid `gantt` block, which GitHub renders in a PR comment.
//!
//! Mermaid's rules this follows: `dateFormat` is how start dates are written and `axisFormat`
//! (d3 `%` codes) how the axis shows them; a task is `name :[milestone, ]id, start, length`
//! where start is a date or `after <id>`, ids are `[A-Za-z0-9_-]`, lengths are a number with
//! `s`, `m` (minutes), `h` or `d`; a colon ends a task name and `#`/`;` have meanings too, so
//! names never contain them. Times are written in UTC and labelled so.

use std::fmt::Write as _;

use chrono::{DateTime, Duration, Utc};

use super::timeline::{Estimate, NOMINAL_PROVISIONING, Step};

/// The ```` ```mermaid ```` block and, below it, what the bars cannot say (unknown lengths,
/// window openings), in Markdown.
pub fn render(promotion: &str, estimate: &Estimate) -> String {
    let mut out = String::from("```mermaid\ngantt\n");
    let _ = writeln!(
        out,
        "    title {} estimated rollout (UTC)",
        task_name(promotion)
    );
    out.push_str("    dateFormat YYYY-MM-DD HH:mm\n    axisFormat %m-%d %H:%M\n");
    let mut previous: Option<String> = None;
    for (index, stage) in estimate.stages.iter().enumerate() {
        let _ = writeln!(out, "    section {}", task_name(&stage.stage));
        for step in &stage.steps {
            let Some((name, suffix, length)) = task(step) else {
                continue;
            };
            let id = format!("s{}{suffix}", index + 1);
            let start = match &previous {
                Some(previous) => format!("after {previous}"),
                None => estimate.start.format("%Y-%m-%d %H:%M").to_string(),
            };
            let milestone = if *step == Step::Approval {
                "milestone, "
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "    {name} :{milestone}{id}, {start}, {}",
                mermaid_length(length)
            );
            previous = Some(id);
        }
    }
    out.push_str("```\n\n");
    out.push_str(&legend(estimate));
    out
}

/// A step's bar: its name, id suffix and length; `None` for a step drawn as no bar.
fn task(step: &Step) -> Option<(String, &'static str, Duration)> {
    match step {
        Step::Provisioning => Some((
            "provisioning (unknown)".to_string(),
            "_provisioning",
            NOMINAL_PROVISIONING,
        )),
        Step::Soak { delay, length } => {
            Some((format!("soak {}", task_name(delay)), "_soak", *length))
        }
        Step::Approval => Some((
            "approval (unknown wait)".to_string(),
            "_approval",
            Duration::zero(),
        )),
        Step::Window { length, .. } => Some((
            "wait for the next window opening".to_string(),
            "_window",
            *length,
        )),
        Step::WindowOpen => None,
    }
}

/// Mermaid lengths: whole minutes when exact, else seconds (rounded up, at least 1 for a bar).
fn mermaid_length(length: Duration) -> String {
    let seconds = length.num_seconds() + i64::from(length.subsec_nanos() > 0);
    if seconds % 60 == 0 {
        format!("{}m", seconds / 60)
    } else {
        format!("{seconds}s")
    }
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

/// What the bars cannot say, as a short Markdown list.
fn legend(estimate: &Estimate) -> String {
    let mut lines = vec![format!(
        "- times in UTC, from {}; provisioning takes an unknown time: each `provisioning (unknown)` bar is a nominal {}m",
        estimate.start.format("%Y-%m-%d %H:%M"),
        NOMINAL_PROVISIONING.num_minutes()
    )];
    for stage in &estimate.stages {
        for step in &stage.steps {
            match step {
                Step::Approval => lines.push(format!(
                    "- {}: waits for an approval, of unknown length (the `approval` milestone); later times assume it comes at once",
                    stage.stage
                )),
                Step::Window { opens_at, .. } => lines.push(format!(
                    "- {}: waits for its promotion window, which opens next at {}",
                    stage.stage,
                    utc(*opens_at)
                )),
                Step::WindowOpen => lines.push(format!(
                    "- {}: its promotion window would be open when the stage is ready",
                    stage.stage
                )),
                Step::Provisioning | Step::Soak { .. } => {}
            }
        }
    }
    lines.push(format!(
        "- estimated end: {}, plus any provisioning beyond the nominal bars and any wait for approval",
        utc(estimate.end)
    ));
    lines.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_whole_minutes_or_seconds_rounded_up() {
        assert_eq!(mermaid_length(Duration::minutes(5)), "5m");
        assert_eq!(mermaid_length(Duration::seconds(90)), "90s");
        assert_eq!(mermaid_length(Duration::milliseconds(300)), "1s");
        assert_eq!(mermaid_length(Duration::zero()), "0m");
    }

    #[test]
    fn task_names_never_carry_mermaid_syntax() {
        assert_eq!(task_name("eu:west;1#a\nb"), "eu-west-1-a b");
    }
}

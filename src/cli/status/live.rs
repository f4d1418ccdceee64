//! The live view of `status --watch` on a terminal: a clock line, then one block per promotion
//! (a header, one line per stage of the engine's pipeline, in spec order). Pure: `now` and the terminal size are arguments, so a frame
//! is a function of the statuses and can be pinned by snapshot tests.
//!
//! Every column has a width fixed by the layout, never by the content, so nothing jumps between
//! redraws. Nothing is cut inside a word: a name longer than its column gets a line of its own,
//! a run label longer than its column takes the padding beside it, and what a stage does wraps
//! at word boundaries under its column. No line is wider than the screen (below the narrowest
//! layout, 64 columns, lines are cut).

use chrono::{DateTime, Utc};
use tollgate_engine::PromotionStatus;
use tollgate_engine::conditions;
use tollgate_engine::pipeline::StageView;

use super::Shown;
use super::table::short;
use crate::views::bars::{self, bar};
use crate::views::fit::{cut, wrap};
use crate::views::relative::coarse;
use crate::views::stage_words::{self, Times};

/// What the frame may use of the terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    pub columns: usize,
    /// `None`: unknown, no limit.
    pub rows: Option<usize>,
}

/// The frame's first line: the time, and how fresh the statuses are.
pub struct Clock {
    pub now: DateTime<Utc>,
    /// When the statuses shown last changed (`None`: not read yet).
    pub updated: Option<DateTime<Utc>>,
    /// A problem reading them (the watch is retrying), shown under the clock.
    pub problem: Option<String>,
}

/// Widths of the fixed columns (characters).
const PHASE: usize = 11;
const SNAPSHOT: usize = 16;
const SINCE: usize = 12;
const STAGE: usize = 14;
const BAR: usize = 12;
const COUNTS: usize = 7;
const FAILED: usize = 4;
const STAGE_SNAPSHOT: usize = 4;
/// The narrowest frame laid out as designed; narrower terminals get its lines cut.
const MIN_COLUMNS: usize = 64;

/// The lines of one frame, each at most `size.columns` wide, at most `size.rows` of them.
pub fn frame(promotions: &[Shown], clock: &Clock, size: Size) -> Vec<String> {
    let columns = size.columns.max(1);
    let layout = columns.max(MIN_COLUMNS);
    let mut lines: Vec<String> = wrap(&clock_line(clock, promotions.len()), columns)
        .lines()
        .map(str::to_string)
        .collect();
    if let Some(problem) = &clock.problem {
        lines.push(format!("! {problem}"));
    }
    if promotions.is_empty() {
        lines.push(String::new());
        lines.push("no promotions".to_string());
    }
    for promotion in promotions {
        lines.push(String::new());
        lines.extend(block(promotion, clock.now, layout));
    }
    let mut lines: Vec<String> = lines.iter().map(|line| fit(line, columns)).collect();
    if let Some(rows) = size.rows
        && lines.len() > rows
    {
        let kept = rows.saturating_sub(1);
        let hidden = lines.len() - kept;
        lines.truncate(kept);
        lines.push(fit(
            &format!("… {hidden} more lines: enlarge the terminal or name one promotion"),
            columns,
        ));
    }
    lines
}

fn clock_line(clock: &Clock, promotions: usize) -> String {
    let now = clock.now.format("%Y-%m-%d %H:%M:%S UTC");
    let updated = match clock.updated {
        Some(at) => format!("updated {} ago", coarse(at, clock.now)),
        None => "not read yet".to_string(),
    };
    let plural = if promotions == 1 { "" } else { "s" };
    format!("tollgate status · {now} · {updated} · {promotions} promotion{plural}")
}

fn block(promotion: &Shown, now: DateTime<Utc>, columns: usize) -> Vec<String> {
    let name_width = columns - 3 - PHASE - SNAPSHOT - SINCE;
    let name = &promotion.name;
    let status = match &promotion.status {
        Ok(Some(status)) => status,
        Ok(None) => return vec![format!("{name:<name_width$} (no status yet)")],
        Err(error) => return vec![format!("{name:<name_width$} {error}")],
    };
    let pipeline = status.pipeline();
    // How long the promotion has been in its phase (a stage's line says how long it has done
    // what it does).
    let since = status
        .phase_since
        .map(|at| format!("for {}", coarse(at, now)))
        .unwrap_or_default();
    let mut lines = header(
        name,
        status.phase.as_str(),
        &run_label(status),
        &since,
        columns,
    );
    if let Some(message) = notable_message(status) {
        lines.extend(indent(&wrap(&message, columns - 2), 2));
    }
    let state_width = columns - 2 - STAGE - BAR - COUNTS - FAILED - STAGE_SNAPSHOT - 5;
    for view in &pipeline {
        lines.extend(stage_lines(view, now, state_width));
        lines.extend(comparison_lines(view, columns));
    }
    lines
}

/// The newest comparison of each of the stage's comparative analyses, in the engine's words
/// (cohorts, medians, effect, p-value) with its verdict, under the stage.
fn comparison_lines(view: &StageView<'_>, columns: usize) -> Vec<String> {
    let runs = view
        .status
        .and_then(|st| st.analyses.as_deref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    runs.iter()
        .filter_map(|run| run.newest_comparison())
        .flat_map(|line| indent(&wrap(&line, columns.saturating_sub(4).max(20)), 4))
        .collect()
}

/// The promotion's line: its name, then its phase, run and time in the phase at the right
/// edge; a name too long to share the line with them gets a line of its own.
fn header(name: &str, phase: &str, run: &str, since: &str, columns: usize) -> Vec<String> {
    let padding = (SNAPSHOT + 1 + SINCE)
        .saturating_sub(run.chars().count() + since.chars().count())
        .max(1);
    let right = format!("{phase:<PHASE$} {run}{}{since}", " ".repeat(padding));
    let name_width = columns.saturating_sub(right.chars().count() + 1);
    if name.chars().count() <= name_width {
        return vec![format!("{name:<name_width$} {right}")];
    }
    vec![name.to_string(), format!("{right:>columns$}")]
}

/// `text`'s lines, each indented by `by` spaces.
fn indent(text: &str, by: usize) -> Vec<String> {
    text.lines()
        .map(|line| format!("{:by$}{line}", ""))
        .collect()
}

/// One stage: name, bar, provisioned/members, failures, the snapshot it runs, its activity
/// (wrapped under its column when longer). A name longer than its column is on a line above.
fn stage_lines(view: &StageView<'_>, now: DateTime<Utc>, state_width: usize) -> Vec<String> {
    let (progress, counts, failed) = match stage_words::counts(view) {
        Some(counts) => {
            let failures = stage_words::failures(counts);
            (
                bar(counts, BAR),
                format!("{}/{}", counts.provisioned, stage_words::members(counts)),
                if failures > 0 {
                    format!("{}{failures}", bars::FAILED)
                } else {
                    String::new()
                },
            )
        }
        None => (" ".repeat(BAR), String::new(), String::new()),
    };
    let snapshot = view.snapshot.map_or("–".to_string(), |i| format!("#{i}"));
    let mut state = stage_words::activity(view, Times::Relative(now));
    if state.chars().count() > state_width {
        state = stage_words::activity(view, Times::Countdown(now));
    }
    let mut lines = Vec::new();
    let name = if view.name.chars().count() > STAGE {
        lines.push(format!("  {}", view.name));
        ""
    } else {
        view.name
    };
    let state = wrap(&state, state_width);
    let mut state_lines = state.lines();
    lines.push(format!(
        "  {name:<STAGE$} {progress} {counts:>COUNTS$} {failed:<FAILED$} {snapshot:<STAGE_SNAPSHOT$} {}",
        state_lines.next().unwrap_or_default(),
    ));
    let state_column = 2 + STAGE + BAR + COUNTS + FAILED + STAGE_SNAPSHOT + 5;
    lines.extend(state_lines.map(|line| format!("{:state_column$}{line}", "")));
    lines
}

/// `#N sha` of the run, with the snapshot it rolls back to.
fn run_label(status: &PromotionStatus) -> String {
    let Some(index) = status.snapshot_index else {
        // A first run held before its first stage: nothing runs yet.
        return "–".to_string();
    };
    let commit = short(status.snapshot_commit.as_deref().unwrap_or_default());
    match status.rollback_of {
        Some(earlier) => match status.rollback {
            Some(tollgate_engine::fast_rollback::RollbackMode::Fast) => {
                format!("#{index} {commit} ↶#{earlier} fast")
            }
            _ => format!("#{index} {commit} ↶#{earlier}"),
        },
        None => format!("#{index} {commit}"),
    }
}

/// The promotion's message where the stage lines cannot say it: failures, rollbacks, an invalid
/// file at HEAD, a held removal, a snapshot queued behind the run.
fn notable_message(status: &PromotionStatus) -> Option<String> {
    if let Some(refusal) = status.commit_refusal() {
        return Some(format!("refused: {}", first_line(refusal)));
    }
    if let Some(problem) = conditions::problem(status, conditions::POLICY_VALID) {
        return Some(format!("policy problem: {}", first_line(&problem.message)));
    }
    if let Some(rejected) = conditions::problem(status, conditions::REJECTED_CONTENT) {
        return Some(first_line(&rejected.message).to_string());
    }
    if let Some(queued) = status.queued_snapshot {
        return Some(format!(
            "snapshot #{queued} is queued: it starts when this run finishes"
        ));
    }
    let notable = status.phase.needs_attention();
    if let Some(error) = &status.invalid_spec {
        return Some(format!("invalid at HEAD: {}", first_line(error)));
    }
    notable
        .then(|| status.message.as_deref().map(first_line))
        .flatten()
        .map(str::to_string)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// A whole line in at most `width` characters, trailing blanks dropped.
fn fit(line: &str, width: usize) -> String {
    cut(line.trim_end(), width)
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;

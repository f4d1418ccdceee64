//! The live view of `status --watch` on a terminal: a clock line, then one block per promotion
//! (a header, one line per stage). Pure: `now` and the terminal size are arguments, so a frame
//! is a function of the statuses and can be pinned by snapshot tests.
//!
//! Every column has a width fixed by the layout, never by the content, so nothing jumps between
//! redraws; text too long for its column is cut with `…`, and no line is wider than the screen.

use chrono::{DateTime, Utc};
use tollgate_engine::conditions;
use tollgate_engine::{Phase, PromotionStatus, StageAhead, StageStatus};

use super::Shown;
use super::bar::{self, bar};
use super::relative::{coarse, precise};
use super::table::short;

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
    let mut lines = vec![clock_line(clock, promotions.len())];
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
    let name = cut(&promotion.name, name_width);
    let status = match &promotion.status {
        Ok(Some(status)) => status,
        Ok(None) => return vec![format!("{name:<name_width$} (no status yet)")],
        Err(error) => return vec![format!("{name:<name_width$} {error}")],
    };
    let header = format!(
        "{name:<name_width$} {:<PHASE$} {:<SNAPSHOT$} {:>SINCE$}",
        status.phase.as_str(),
        cut(&run_label(status), SNAPSHOT),
        phase_since(status)
            .map(|at| format!("for {}", coarse(at, now)))
            .unwrap_or_default(),
    );
    let mut lines = vec![header];
    if let Some(message) = notable_message(status) {
        lines.push(format!("  {message}"));
    }
    let state_width = columns - 2 - STAGE - BAR - COUNTS - FAILED - STAGE_SNAPSHOT - 5;
    for stage in &status.stages {
        let row = StageRow {
            name: &stage.name,
            counts: Some(&stage.counts),
            snapshot: Some(shown_snapshot(status, stage)),
            state: stage_state(status, stage, now),
        };
        lines.push(row.line(state_width));
    }
    for (i, ahead) in status.stages_ahead.iter().enumerate() {
        let mut row = ahead_row(ahead);
        // A blackout holds the next stage start: the first stage ahead is the one held.
        if let Some(until) = status.blackout_until.filter(|u| i == 0 && *u > now) {
            row.state = format!("held by a blackout for {}", precise(now, until));
        }
        lines.push(row.line(state_width));
    }
    lines
}

/// One stage line: name, bar, provisioned/matching, failures, snapshot, state.
struct StageRow<'a> {
    name: &'a str,
    counts: Option<&'a tollgate_engine::status::StageCounts>,
    snapshot: Option<u64>,
    state: String,
}

impl StageRow<'_> {
    fn line(&self, state_width: usize) -> String {
        let (progress, counts, failed) = match self.counts {
            Some(counts) => {
                let failures = bar::failures(counts);
                (
                    bar(counts, BAR),
                    format!("{}/{}", counts.provisioned, counts.matching_clusters),
                    if failures > 0 {
                        format!("{}{failures}", bar::FAILED)
                    } else {
                        String::new()
                    },
                )
            }
            None => (" ".repeat(BAR), String::new(), String::new()),
        };
        let snapshot = self.snapshot.map_or("–".to_string(), |i| format!("#{i}"));
        format!(
            "  {:<STAGE$} {progress} {counts:>COUNTS$} {failed:<FAILED$} {:<STAGE_SNAPSHOT$} {}",
            cut(self.name, STAGE),
            cut(&snapshot, STAGE_SNAPSHOT),
            cut(&self.state, state_width),
        )
    }
}

/// A stage the run has not reached: it keeps the snapshot an earlier run left there.
fn ahead_row(ahead: &StageAhead) -> StageRow<'_> {
    StageRow {
        name: &ahead.name,
        counts: None,
        snapshot: ahead.snapshot_index,
        state: match ahead.snapshot_index {
            Some(index) => format!("pending (still runs #{index})"),
            None => "pending".to_string(),
        },
    }
}

/// `#N sha` of the run, with the snapshot it rolls back to.
fn run_label(status: &PromotionStatus) -> String {
    let Some(index) = status.snapshot_index else {
        return String::new();
    };
    let commit = short(status.snapshot_commit.as_deref().unwrap_or_default());
    match status.rollback_of {
        Some(earlier) => format!("#{index} {commit} ↶#{earlier}"),
        None => format!("#{index} {commit}"),
    }
}

/// Since when the promotion is in its phase, as far as status records it.
fn phase_since(status: &PromotionStatus) -> Option<DateTime<Utc>> {
    match status.phase {
        Phase::Paused => status.paused_since,
        Phase::Failed | Phase::RollingBack | Phase::RolledBack if status.failure.is_some() => {
            status.failure.as_deref().map(|f| f.at)
        }
        Phase::Completed => status.stages.last().and_then(|s| s.succeeded_at),
        _ => status.last_promotion_time,
    }
}

/// The promotion's message where the stage lines cannot say it: failures, rollbacks, an invalid
/// file at HEAD, a held removal, a snapshot queued behind the run.
fn notable_message(status: &PromotionStatus) -> Option<String> {
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
    let notable = !matches!(
        status.phase,
        Phase::Progressing | Phase::Waiting | Phase::Completed
    );
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

/// The snapshot the stage's profile carries: a restored stage runs what it was restored to.
fn shown_snapshot(status: &PromotionStatus, stage: &StageStatus) -> u64 {
    status
        .failure
        .as_ref()
        .and_then(|f| f.rollback.iter().find(|r| r.name == stage.name))
        .filter(|restored| restored.restored_at.is_some())
        .and_then(|restored| restored.to_snapshot)
        .unwrap_or(stage.snapshot_index)
}

/// What the stage is doing, in words, with times relative to `now`.
fn stage_state(status: &PromotionStatus, stage: &StageStatus, now: DateTime<Utc>) -> String {
    if let Some(failure) = &status.failure {
        if failure.stage == stage.name {
            return "failed: budget exceeded".to_string();
        }
        if let Some(restored) = failure.rollback.iter().find(|r| r.name == stage.name) {
            return match (restored.restored_at, restored.to_snapshot) {
                (Some(_), Some(to)) => format!("rolled back to #{to}"),
                (Some(_), None) => "withdrawn (rolled back)".to_string(),
                (None, Some(to)) => format!("rolling back to #{to}"),
                (None, None) => "withdrawing (rolling back)".to_string(),
            };
        }
    }
    let current = status.current_stage_name.as_deref() == Some(stage.name.as_str());
    if stage.skipped {
        return "skipped: no matching clusters".to_string();
    }
    if let Some(at) = stage.succeeded_at {
        return format!("done {} ago", coarse(at, now));
    }
    if current && status.phase == Phase::Failed {
        let why = stage
            .failure_message
            .as_deref()
            .or(stage.waiting_reason.as_deref())
            .unwrap_or("see the message above");
        return format!("failed: {}", first_line(why));
    }
    if current && status.phase == Phase::Paused {
        return match status.paused_since {
            Some(at) => format!("paused {}", coarse(at, now)),
            None => "paused".to_string(),
        };
    }
    waiting_state(status, stage, current, now)
}

/// The states of a stage on its way: provisioning, soaking, waiting for a person or a window.
fn waiting_state(
    status: &PromotionStatus,
    stage: &StageStatus,
    current: bool,
    now: DateTime<Utc>,
) -> String {
    let counts = &stage.counts;
    if stage.provisioned_at.is_none()
        && let Some(waves) = stage.waves.as_deref().filter(|w| w.total() > 1)
    {
        let wave = format!("wave {}/{}", waves.reached, waves.total());
        let pausing = current && status.phase == Phase::Waiting && waves.wave_done_at.is_some();
        return match status.next_wake_up.filter(|w| pausing && *w > now) {
            Some(next) => format!("{wave} done, next in {}", precise(now, next)),
            None => format!(
                "{wave}: provisioning {}/{}",
                counts.provisioned, counts.matching_clusters
            ),
        };
    }
    if stage.provisioned_at.is_none() {
        let progress = format!(
            "provisioning {}/{}",
            counts.provisioned, counts.matching_clusters
        );
        return match stage.deadline.filter(|d| *d > now) {
            Some(deadline) => format!("{progress}, deadline in {}", precise(now, deadline)),
            None => progress,
        };
    }
    if let Some(ends) = stage.delay_ends_at.filter(|e| *e > now) {
        return format!("soak ends in {}", precise(now, ends));
    }
    if let Some(since) = stage.awaiting_approval_since {
        return format!("waiting for approval {}", coarse(since, now));
    }
    if current && status.phase == Phase::Waiting {
        if let Some(until) = status.blackout_until.filter(|u| *u > now) {
            return format!("held by a blackout for {}", precise(now, until));
        }
        return match status.next_wake_up.filter(|w| *w > now) {
            Some(opens) => format!("window opens in {}", precise(now, opens)),
            None => "waiting".to_string(),
        };
    }
    if current && stage.waiting_reason.is_some() {
        return "waiting for health checks".to_string();
    }
    "provisioned".to_string()
}

/// `text` in at most `width` characters, cut with `…`.
pub fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut kept: String = text.chars().take(width - 1).collect();
    kept.push('…');
    kept
}

/// A whole line in at most `width` characters, trailing blanks dropped.
fn fit(line: &str, width: usize) -> String {
    cut(line.trim_end(), width)
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;

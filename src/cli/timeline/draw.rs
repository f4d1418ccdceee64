//! The picture as SVG. Every element a reader (or a test) looks for carries a stable class and
//! `data-*` attributes, and every bar a `<title>` tooltip; colours are presentation attributes
//! rather than CSS so that any renderer (resvg for PNG) shows them.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use svg::Document;
use svg::node::element::{Group, Line, Path, Rectangle, Text, Title};

use super::layout::{Bar, BarKind, Run, Timeline, is_rollback};

pub const WIDTH: u32 = 1000;
const LEFT: f64 = 130.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 72.0;
const LANE: f64 = 44.0;
const AXIS: f64 = 36.0;
const LEGEND_ROW: f64 = 20.0;
/// Narrower bars are drawn this wide, so that an instant (a halt) stays visible.
const MIN_BAR: f64 = 3.0;
const FONT: &str = "DejaVu Sans, Verdana, sans-serif";

fn colour(kind: BarKind) -> &'static str {
    match kind {
        BarKind::Provisioning => "#4e79a7",
        BarKind::Soak => "#59a14f",
        BarKind::Window => "#edc948",
        BarKind::Approval => "#f28e2b",
        BarKind::Failed => "#e15759",
        BarKind::Rollback => "#b07aa1",
    }
}

/// The picture's height for `lanes` lanes (at least one, for the "no runs" line).
pub fn height(lanes: usize) -> u32 {
    // The legend's rows, and one for its note.
    let rows = BarKind::ALL.len().div_ceil(3) as f64 + 1.0;
    (TOP + LANE * lanes.max(1) as f64 + AXIS + LEGEND_ROW * rows + 16.0) as u32
}

/// Maps instants to x coordinates.
struct Scale {
    from: DateTime<Utc>,
    seconds: f64,
}

impl Scale {
    fn new(timeline: &Timeline<'_>) -> Self {
        let span = (timeline.to - timeline.from).num_milliseconds() as f64 / 1000.0;
        Scale {
            from: timeline.from,
            // An instant-long picture still gets a one-minute axis.
            seconds: if span > 0.0 { span } else { 60.0 },
        }
    }

    fn x(&self, at: DateTime<Utc>) -> f64 {
        let offset = (at - self.from).num_milliseconds() as f64 / 1000.0;
        let plot = f64::from(WIDTH) - LEFT - RIGHT;
        px(LEFT + (offset / self.seconds).clamp(0.0, 1.0) * plot)
    }
}

/// The SVG document of `timeline` for promotion `name`; `empty` says why there is nothing to draw.
pub fn svg(name: &str, timeline: &Timeline<'_>, period: &str, empty: Option<&str>) -> String {
    let height = height(timeline.lanes.len());
    let scale = Scale::new(timeline);
    let mut document = Document::new()
        .set("width", WIDTH)
        .set("height", height)
        .set("viewBox", (0, 0, WIDTH, height))
        .set("font-family", FONT)
        .set("font-size", 11)
        .set("id", "timeline")
        .set("data-promotion", name)
        .set("data-from", stamp(timeline.from))
        .set("data-to", stamp(timeline.to))
        .add(Title::new(format!("tollgate timeline: {name}")))
        .add(
            Rectangle::new()
                .set("class", "background")
                .set("width", "100%")
                .set("height", "100%")
                .set("fill", "#ffffff"),
        )
        .add(
            Text::new(format!("{name}: runs of the last {period} (UTC)"))
                .set("class", "heading")
                .set("x", 10)
                .set("y", 20)
                .set("font-size", 14)
                .set("font-weight", "bold"),
        );
    if let Some(reason) = empty {
        document = document.add(
            Text::new(reason)
                .set("class", "empty")
                .set("x", LEFT)
                .set("y", TOP + LANE / 2.0),
        );
    }
    let labels = bar_labels(timeline, &scale);
    for (index, lane) in timeline.lanes.iter().enumerate() {
        document = document.add(lane_group(index, lane, timeline, &scale, &labels));
    }
    // Run labels take the first of two rows where they do not cover an earlier one.
    let mut row_ends = [f64::MIN; 2];
    for run in &timeline.runs {
        let (marker, label) = run_marker(run, &scale, timeline.lanes.len(), &row_ends);
        row_ends[label.row] = label.end;
        document = document.add(marker);
    }
    let axis_y = TOP + LANE * timeline.lanes.len().max(1) as f64;
    document
        .add(axis(timeline, &scale, axis_y))
        .add(legend(axis_y + AXIS))
        .to_string()
}

/// A coordinate rounded to a tenth of a pixel: finer is invisible and only lengthens the file.
fn px(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A run's label on one of its bars: the lane, the run's position in the timeline, and x.
struct BarLabel {
    lane: usize,
    run: usize,
    x: f64,
}

/// Where each run's `#N abc1234` goes: on its first bar in each lane, unless it would cover the
/// previous label there (the bar's tooltip and the run's label on top still name it); a run
/// left without any label gets one on its first bar all the same.
fn bar_labels(timeline: &Timeline<'_>, scale: &Scale) -> Vec<BarLabel> {
    let mut labels = Vec::new();
    let mut lane_ends = vec![f64::MIN; timeline.lanes.len()];
    for (index, run) in timeline.runs.iter().enumerate() {
        let width = text_width(&run.label(), 9.0) + 4.0;
        let first_bars = (0..timeline.lanes.len()).filter_map(|lane| {
            run.bars
                .iter()
                .find(|(l, bar)| *l == lane && bar.kind != BarKind::Rollback)
                .map(|(_, bar)| (lane, px(scale.x(bar.start) + 2.0)))
        });
        let mut placed = false;
        let mut first = None;
        for (lane, x) in first_bars {
            first = first.or(Some((lane, x)));
            if x >= lane_ends[lane] {
                lane_ends[lane] = x + width;
                labels.push(BarLabel {
                    lane,
                    run: index,
                    x,
                });
                placed = true;
            }
        }
        if let (false, Some((lane, x))) = (placed, first) {
            lane_ends[lane] = lane_ends[lane].max(x + width);
            labels.push(BarLabel {
                lane,
                run: index,
                x,
            });
        }
    }
    labels
}

/// One lane: its stage name, then every run's bars in it, with their labels.
fn lane_group(
    index: usize,
    stage: &str,
    timeline: &Timeline<'_>,
    scale: &Scale,
    labels: &[BarLabel],
) -> Group {
    let top = TOP + LANE * index as f64;
    let mut group = Group::new()
        .set("class", "lane")
        .set("id", format!("lane-{stage}"))
        .set("data-stage", stage)
        .add(
            Rectangle::new()
                .set("class", "lane-background")
                .set("x", LEFT)
                .set("y", top)
                .set("width", f64::from(WIDTH) - LEFT - RIGHT)
                .set("height", LANE)
                .set(
                    "fill",
                    if index.is_multiple_of(2) {
                        "#f4f4f4"
                    } else {
                        "#ffffff"
                    },
                ),
        )
        .add(
            Text::new(stage)
                .set("class", "lane-label")
                .set("x", LEFT - 8.0)
                .set("y", top + LANE / 2.0 + 4.0)
                .set("text-anchor", "end"),
        );
    for run in &timeline.runs {
        for (_, bar) in run.bars.iter().filter(|(lane, _)| *lane == index) {
            group = group.add(bar_rect(stage, run, bar, top, scale));
        }
    }
    for label in labels.iter().filter(|l| l.lane == index) {
        let Some(run) = timeline.runs.get(label.run) else {
            continue;
        };
        group = group.add(
            Text::new(run.label())
                .set("class", "bar-label")
                .set("data-snapshot", run.record.snapshot_index)
                .set("x", label.x)
                .set("y", top + 10.0)
                .set("font-size", 9),
        );
    }
    group
}

/// A bar with its tooltip. Main bars fill the middle of the lane; rollback bars sit in a strip
/// below them, as they overlap the failed bar of the same stage.
fn bar_rect(stage: &str, run: &Run<'_>, bar: &Bar, lane_top: f64, scale: &Scale) -> Rectangle {
    let (x0, x1) = (scale.x(bar.start), scale.x(bar.end));
    let (y, height) = match bar.kind {
        BarKind::Rollback => (lane_top + LANE - 9.0, 7.0),
        _ => (lane_top + 13.0, LANE - 24.0),
    };
    let mut class = format!("bar {}", bar.kind.class());
    if is_rollback(run.record) {
        class.push_str(" rollback-run");
    }
    let what = match (bar.kind, bar.restored_to) {
        (BarKind::Rollback, Some(to)) => format!("rolling back {} to #{to}", run.label()),
        (BarKind::Rollback, None) => format!(
            "rolling back {}: its profiles withdrawn (no earlier snapshot)",
            run.label()
        ),
        (kind, _) => format!("{} {}", kind.caption(), run.label()),
    };
    let mut tooltip = format!(
        "{stage}: {what} from {} to {} ({})",
        stamp(bar.start),
        stamp(bar.end),
        span(bar.end - bar.start)
    );
    if let Some(label) = run.rollback_label() {
        tooltip.push_str(&format!("; the run is a {label}"));
    }
    let mut rect = Rectangle::new()
        .set("class", class)
        .set("data-stage", stage)
        .set("data-snapshot", run.record.snapshot_index)
        .set("data-start", stamp(bar.start))
        .set("data-end", stamp(bar.end))
        .set("x", px(x0))
        .set("y", y)
        .set("width", px((x1 - x0).max(MIN_BAR)))
        .set("height", height)
        .set("fill", colour(bar.kind));
    if let Some(to) = bar.restored_to {
        rect = rect.set("data-restored-to", to);
    }
    if is_rollback(run.record) {
        rect = rect
            .set("stroke", "#6b2c5f")
            .set("stroke-width", 1.5)
            .set("stroke-dasharray", "4 2");
    }
    rect.add(Title::new(tooltip))
}

/// A generous estimate of a text's width (DejaVu Sans averages about 0.6 em per character).
fn text_width(text: &str, font_size: f64) -> f64 {
    text.chars().count() as f64 * font_size * 0.62
}

/// A run's label on top of the lanes: its text, the row it takes, and its extent.
struct RunLabel {
    text: String,
    row: usize,
    /// Near the right edge the label goes left of its line, so that it is not cut off.
    left_of_line: bool,
    end: f64,
}

impl RunLabel {
    /// In the first row whose labels end before it (`row_ends`).
    fn place(run: &Run<'_>, x: f64, row_ends: &[f64; 2]) -> Self {
        let mut text = run.label();
        if let Some(rollback) = run.rollback_label() {
            text = format!("{text} {rollback}");
        } else if is_rollback(run.record) {
            text = format!("{text} rolled back");
        }
        let width = text_width(&text, 10.0);
        let left_of_line = x + width > f64::from(WIDTH) - 4.0;
        let (start, end) = if left_of_line {
            (x - 3.0 - width, x)
        } else {
            (x, x + 3.0 + width)
        };
        let row = row_ends.iter().position(|e| *e <= start).unwrap_or(0);
        RunLabel {
            text,
            row,
            left_of_line,
            end: end + 6.0,
        }
    }

    fn y(&self) -> f64 {
        TOP - 18.0 - 13.0 * self.row as f64
    }

    fn element(&self, x: f64) -> Text {
        let text = Text::new(self.text.as_str());
        let text = if self.left_of_line {
            text.set("x", px(x - 3.0)).set("text-anchor", "end")
        } else {
            text.set("x", px(x + 3.0))
        };
        text.set("class", "run-label")
            .set("y", self.y())
            .set("font-size", 10)
    }
}

/// A run's start: a vertical line through the lanes and its label on top; a rollback run (or a
/// failed run that was rolled back) gets a marker and "rollback to #N". Returns the group and its
/// label (for the next run's placement).
fn run_marker(
    run: &Run<'_>,
    scale: &Scale,
    lanes: usize,
    row_ends: &[f64; 2],
) -> (Group, RunLabel) {
    let x = scale.x(run.record.started_at);
    let rollback = is_rollback(run.record);
    let label = RunLabel::place(run, x, row_ends);
    let ended = run
        .record
        .ended_at
        .map(|end| format!(" to {}", stamp(end)))
        .unwrap_or_default();
    let mut group = Group::new()
        .set("class", if rollback { "run rollback-run" } else { "run" })
        .set("id", format!("run-{}", run.record.snapshot_index))
        .set("data-snapshot", run.record.snapshot_index)
        .set("data-commit", run.record.commit.as_str())
        .set("data-outcome", outcome(run))
        .set("data-start", stamp(run.record.started_at))
        .add(Title::new(format!(
            "{}: {} from {}{ended}",
            label.text,
            outcome(run),
            stamp(run.record.started_at),
        )))
        .add(
            Line::new()
                .set("class", "run-start")
                .set("x1", x)
                .set("x2", x)
                .set("y1", label.y() + 4.0)
                .set("y2", TOP + LANE * lanes.max(1) as f64)
                .set("stroke", if rollback { "#6b2c5f" } else { "#555555" })
                .set("stroke-dasharray", "3 3"),
        )
        .add(label.element(x));
    if rollback {
        group = group.add(
            Path::new()
                .set("class", "marker rollback-marker")
                .set("data-snapshot", run.record.snapshot_index)
                .set("d", format!("M {x} {} l -6 -8 l 12 0 z", TOP - 2.0))
                .set("fill", "#6b2c5f"),
        );
        if let Some(to) = run.record.rollback_of {
            group = group.set("data-rollback-of", to);
        }
    }
    (group, label)
}

fn outcome(run: &Run<'_>) -> &'static str {
    use tollgate_engine::RunOutcome::*;
    match run.record.outcome {
        Running => "Running",
        Completed => "Completed",
        Failed => "Failed",
        RolledBack => "RolledBack",
        Superseded => "Superseded",
    }
}

/// The time axis with ticks at a round step (at most about eight).
fn axis(timeline: &Timeline<'_>, scale: &Scale, y: f64) -> Group {
    let mut group = Group::new().set("class", "axis").set("id", "axis").add(
        Line::new()
            .set("x1", LEFT)
            .set("x2", f64::from(WIDTH) - RIGHT)
            .set("y1", y)
            .set("y2", y)
            .set("stroke", "#333333"),
    );
    let step = tick_step(Duration::milliseconds((scale.seconds * 1000.0) as i64));
    let to = timeline.from + Duration::milliseconds((scale.seconds * 1000.0) as i64);
    let format = if step < Duration::minutes(1) {
        "%H:%M:%S"
    } else if to - timeline.from > Duration::days(1) {
        "%m-%d %H:%M"
    } else {
        "%H:%M"
    };
    for at in ticks(timeline.from, to, step) {
        let x = scale.x(at);
        group = group.add(
            Group::new()
                .set("class", "tick")
                .set("data-time", stamp(at))
                .add(
                    Line::new()
                        .set("x1", x)
                        .set("x2", x)
                        .set("y1", y)
                        .set("y2", y + 5.0)
                        .set("stroke", "#333333"),
                )
                .add(
                    Text::new(at.format(format).to_string())
                        .set("x", x)
                        .set("y", y + 17.0)
                        .set("text-anchor", "middle")
                        .set("font-size", 10),
                ),
        );
    }
    group
}

/// The roundest step giving at most eight ticks over `span`.
fn tick_step(span: Duration) -> Duration {
    const STEPS: [i64; 17] = [
        1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200,
    ];
    STEPS
        .iter()
        .map(|s| Duration::seconds(*s))
        .find(|step| span.num_seconds() / step.num_seconds().max(1) <= 8)
        .unwrap_or_else(|| Duration::days((span.num_days() / 8).max(1)))
}

/// The multiples of `step` (since the epoch) within `[from, to]`.
fn ticks(from: DateTime<Utc>, to: DateTime<Utc>, step: Duration) -> Vec<DateTime<Utc>> {
    let step_ms = step.num_milliseconds().max(1);
    let first = from.timestamp_millis().div_euclid(step_ms) * step_ms;
    (0..)
        .map(|i| first + i * step_ms)
        .skip_while(|ms| *ms < from.timestamp_millis())
        .take_while(|ms| *ms <= to.timestamp_millis())
        .filter_map(DateTime::<Utc>::from_timestamp_millis)
        .take(20)
        .collect()
}

fn legend(y: f64) -> Group {
    let mut group = Group::new().set("class", "legend").set("id", "legend");
    for (i, kind) in BarKind::ALL.iter().enumerate() {
        let x = LEFT + 270.0 * (i % 3) as f64;
        let row_y = y + LEGEND_ROW * (i / 3) as f64;
        group = group.add(
            Group::new()
                .set("class", "legend-item")
                .set("data-kind", kind.class())
                .add(
                    Rectangle::new()
                        .set("x", x)
                        .set("y", row_y)
                        .set("width", 14)
                        .set("height", 10)
                        .set("fill", colour(*kind)),
                )
                .add(
                    Text::new(kind.caption())
                        .set("x", x + 20.0)
                        .set("y", row_y + 9.0),
                ),
        );
    }
    let note_y = y + LEGEND_ROW * BarKind::ALL.len().div_ceil(3) as f64;
    group.add(
        Text::new(
            "dashed outline and ▼ marker: a rollback (a revert, or a failed run rolled back)",
        )
        .set("class", "legend-note")
        .set("x", LEFT)
        .set("y", note_y + 9.0)
        .set("font-size", 9),
    )
}

/// `1h2m`, `3m5s`, `12s`: a bar's length in the tooltip.
fn span(length: Duration) -> String {
    let seconds = length.num_seconds().max(0);
    let (h, m, s) = (seconds / 3600, seconds % 3600 / 60, seconds % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m"),
    }
}

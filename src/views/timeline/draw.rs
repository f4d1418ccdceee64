//! The picture as SVG. Every element a reader (or a test) looks for carries a stable class and
//! `data-*` attributes, and every bar a `<title>` tooltip; colours are presentation attributes
//! rather than CSS so that any renderer (resvg for PNG) shows them. Labels never overlap
//! (`labels`): a label with no room is left out, and the bar's tooltip still says it.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use svg::Document;
use svg::node::element::{Definitions, Group, Line, Path, Pattern, Rectangle, Text, Title};

use super::labels::{Extent, Rows, beside_line, text_width};
use super::layout::{Bar, BarKind, Run, Timeline, is_rollback};

pub const WIDTH: u32 = 1000;
const LEFT: f64 = 130.0;
const RIGHT: f64 = 30.0;
/// The heading's band; the run labels' rows follow.
const HEADER: f64 = 30.0;
const ROW: f64 = 13.0;
const LANE: f64 = 44.0;
const AXIS: f64 = 36.0;
const LEGEND_ROW: f64 = 20.0;
/// Narrower bars are drawn this wide, so that an instant (a halt) stays visible.
const MIN_BAR: f64 = 3.0;
const RUN_FONT: f64 = 10.0;
const BAR_FONT: f64 = 9.0;
const FONT: &str = "DejaVu Sans, Verdana, sans-serif";
/// What the legend's colours cannot say.
const NOTES: [&str; 2] = [
    "dashed outline and ▼ marker: a rollback (a revert, or a failed run rolled back)",
    "faded and hatched: a superseded run (a newer snapshot replaced it before it finished)",
];

fn colour(kind: BarKind) -> &'static str {
    match kind {
        BarKind::Provisioning => "#4e79a7",
        BarKind::WavePause => "#a0cbe8",
        BarKind::Soak => "#59a14f",
        BarKind::HealthChecks => "#8cd17d",
        BarKind::Analysis => "#76b7b2",
        BarKind::Window => "#edc948",
        BarKind::Approval => "#f28e2b",
        BarKind::Blackout => "#333333",
        BarKind::Paused => "#bab0ac",
        BarKind::Failed => "#e15759",
        BarKind::Rollback => "#b07aa1",
    }
}

/// Where the lanes start, below `rows` rows of run labels.
fn lanes_top(rows: usize) -> f64 {
    HEADER + ROW * rows.max(1) as f64 + 14.0
}

/// The picture's height for `lanes` lanes (at least one, for the "no runs" line) below `rows` rows
/// of run labels.
fn height(lanes: usize, rows: usize) -> u32 {
    let legend_rows = BarKind::ALL.len().div_ceil(3) + NOTES.len();
    let height = lanes_top(rows)
        + LANE * lanes.max(1) as f64
        + AXIS
        + LEGEND_ROW * legend_rows as f64
        + 16.0;
    height as u32
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
    let scale = Scale::new(timeline);
    let (run_labels, rows) = run_labels(timeline, &scale);
    let top = lanes_top(rows);
    let height = height(timeline.lanes.len(), rows);
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
        .add(definitions())
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
                .set("y", top + LANE / 2.0),
        );
    }
    let labels = bar_labels(timeline, &scale);
    for (index, lane) in timeline.lanes.iter().enumerate() {
        let lane_top = top + LANE * index as f64;
        document = document.add(lane_group(index, lane, lane_top, timeline, &scale, &labels));
    }
    for (run, label) in timeline.runs.iter().zip(&run_labels) {
        document = document.add(run_marker(run, label, top, timeline.lanes.len()));
    }
    let axis_y = top + LANE * timeline.lanes.len().max(1) as f64;
    document
        .add(axis(timeline, &scale, axis_y))
        .add(legend(axis_y + AXIS))
        .to_string()
}

/// The hatch drawn over a superseded run's bars.
fn definitions() -> Definitions {
    Definitions::new().add(
        Pattern::new()
            .set("id", "superseded-hatch")
            .set("patternUnits", "userSpaceOnUse")
            .set("width", 6)
            .set("height", 6)
            .set("patternTransform", "rotate(45)")
            .add(
                Line::new()
                    .set("x1", 0)
                    .set("y1", 0)
                    .set("x2", 0)
                    .set("y2", 6)
                    .set("stroke", "#ffffff")
                    .set("stroke-width", 2),
            ),
    )
}

/// A coordinate rounded to a tenth of a pixel: finer is invisible and only lengthens the file.
fn px(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

fn stamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A run's label above the lanes: its text, the row it takes, and where its start line is.
struct RunLabel {
    text: String,
    row: usize,
    x: f64,
    /// Near the right edge the label goes left of its line, so that it is not cut off.
    left_of_line: bool,
}

impl RunLabel {
    fn y(&self, top: f64) -> f64 {
        top - 14.0 - ROW * self.row as f64
    }

    fn element(&self, top: f64) -> Text {
        let text = Text::new(self.text.as_str());
        let text = if self.left_of_line {
            text.set("x", px(self.x - 3.0)).set("text-anchor", "end")
        } else {
            text.set("x", px(self.x + 3.0))
        };
        text.set("class", "run-label")
            .set("y", self.y(top))
            .set("font-size", RUN_FONT)
    }
}

/// `#3 abc1234`, with what marks the run: a rollback, or the run that superseded it.
fn run_label_text(run: &Run<'_>) -> String {
    let mut text = run.label();
    if let Some(rollback) = run.rollback_label() {
        text = format!("{text} {rollback}");
    } else if is_rollback(run.record) {
        text = format!("{text} rolled back");
    }
    if let Some(superseded) = run.superseded_label() {
        text = format!("{text} {superseded}");
    }
    text
}

/// Every run's label, each in the first row where it covers no other; and how many rows.
fn run_labels(timeline: &Timeline<'_>, scale: &Scale) -> (Vec<RunLabel>, usize) {
    let mut rows = Rows::default();
    let labels = timeline
        .runs
        .iter()
        .map(|run| {
            let text = run_label_text(run);
            let x = scale.x(run.record.started_at);
            let width = text_width(&text, RUN_FONT);
            let (extent, left_of_line) = beside_line(x, width, f64::from(WIDTH) - 4.0);
            let row = rows.place(extent);
            RunLabel {
                text,
                row,
                x,
                left_of_line,
            }
        })
        .collect();
    (labels, rows.count())
}

/// A run's label on one of its bars: the lane, the run's position in the timeline, and x.
struct BarLabel {
    lane: usize,
    run: usize,
    x: f64,
}

/// A run's `#N abc1234` on its first bar in each lane, where it covers no other label there and
/// stays inside the picture (the run's label on top always names it).
fn bar_labels(timeline: &Timeline<'_>, scale: &Scale) -> Vec<BarLabel> {
    let mut lanes: Vec<Rows> = timeline.lanes.iter().map(|_| Rows::default()).collect();
    let mut labels = Vec::new();
    for (index, run) in timeline.runs.iter().enumerate() {
        let width = text_width(&run.label(), BAR_FONT);
        for (lane, rows) in lanes.iter_mut().enumerate() {
            let first = run
                .bars
                .iter()
                .find(|(l, bar)| *l == lane && bar.kind != BarKind::Rollback);
            let Some((_, bar)) = first else {
                continue;
            };
            let x = px(scale.x(bar.start) + 2.0);
            let extent = Extent {
                start: x,
                end: x + width,
            };
            if extent.end <= f64::from(WIDTH) - 2.0 && rows.place_in_one_row(extent) {
                labels.push(BarLabel {
                    lane,
                    run: index,
                    x,
                });
            }
        }
    }
    labels
}

/// One lane: its stage name, then every run's bars in it, with their labels.
fn lane_group(
    index: usize,
    stage: &str,
    top: f64,
    timeline: &Timeline<'_>,
    scale: &Scale,
    labels: &[BarLabel],
) -> Group {
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
    // Bars of different runs may meet: their inner labels too are kept apart.
    let mut inner_labels = Rows::default();
    for run in &timeline.runs {
        for (_, bar) in run.bars.iter().filter(|(lane, _)| *lane == index) {
            group = group.add(bar_group(stage, run, bar, top, scale, &mut inner_labels));
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
                .set("font-size", BAR_FONT),
        );
    }
    group
}

/// A bar's class: `bar`, its kind, and what marks its run.
fn bar_class(run: &Run<'_>, bar: &Bar) -> String {
    let mut class = format!("bar {}", bar.kind.class());
    if bar.held_start {
        class.push_str(" held-start");
    }
    if is_rollback(run.record) {
        class.push_str(" rollback-run");
    }
    if run.is_superseded() {
        class.push_str(" superseded");
    }
    class
}

/// A bar's tooltip: the stage, what it did in which run, and when.
fn tooltip(stage: &str, run: &Run<'_>, bar: &Bar) -> String {
    let what = match (bar.kind, bar.restored_to) {
        (BarKind::Rollback, Some(to)) => format!("rolling back {} to #{to}", run.label()),
        (BarKind::Rollback, None) => format!(
            "rolling back {}: its profiles withdrawn (no earlier snapshot)",
            run.label()
        ),
        _ => format!("{} {}", bar.description(), run.label()),
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
    if let Some(label) = run.superseded_label() {
        tooltip.push_str(&format!("; the run was {label}"));
    }
    // What the stage's analyses compared (issue #48), on each of its bars in the run but its
    // restore: a wave's analysis is often measured inside the wave's own bar.
    if bar.kind != BarKind::Rollback {
        let compared = run
            .record
            .stages
            .iter()
            .filter(|s| s.name == stage)
            .flat_map(|s| &s.comparisons);
        for line in compared {
            tooltip.push_str(&format!("; compared {line}"));
        }
    }
    tooltip
}

/// A bar with its tooltip, its hatch when its run was superseded, and its wave inside when it
/// fits (and covers no other bar's). Main bars fill the middle of the lane; rollback bars sit in
/// a strip below them, as they overlap the failed bar of the same stage.
fn bar_group(
    stage: &str,
    run: &Run<'_>,
    bar: &Bar,
    lane_top: f64,
    scale: &Scale,
    inner_labels: &mut Rows,
) -> Group {
    let (x0, x1) = (scale.x(bar.start), scale.x(bar.end));
    let width = px((x1 - x0).max(MIN_BAR));
    let (y, height) = match bar.kind {
        BarKind::Rollback => (lane_top + LANE - 9.0, 7.0),
        _ => (lane_top + 13.0, LANE - 24.0),
    };
    let mut rect = Rectangle::new()
        .set("class", bar_class(run, bar))
        .set("data-stage", stage)
        .set("data-snapshot", run.record.snapshot_index)
        .set("data-start", stamp(bar.start))
        .set("data-end", stamp(bar.end))
        .set("x", px(x0))
        .set("y", y)
        .set("width", width)
        .set("height", height)
        .set("fill", colour(bar.kind));
    if let Some(to) = bar.restored_to {
        rect = rect.set("data-restored-to", to);
    }
    if let Some(wave) = bar.wave {
        rect = rect.set("data-wave", format!("{}/{}", wave.wave, wave.of));
    }
    if is_rollback(run.record) {
        rect = rect
            .set("stroke", "#6b2c5f")
            .set("stroke-width", 1.5)
            .set("stroke-dasharray", "4 2");
    }
    if run.is_superseded() {
        rect = rect.set("fill-opacity", 0.45);
    }
    let mut group = Group::new().add(rect.add(Title::new(tooltip(stage, run, bar))));
    if run.is_superseded() {
        group = group.add(
            Rectangle::new()
                .set("class", "hatch")
                .set("x", px(x0))
                .set("y", y)
                .set("width", width)
                .set("height", height)
                .set("fill", "url(#superseded-hatch)"),
        );
    }
    let inner = bar.inner_label().filter(|text| {
        let text_width = text_width(text, BAR_FONT);
        text_width + 6.0 <= width
            && inner_labels.place_in_one_row(Extent {
                start: x0 + 3.0,
                end: x0 + 3.0 + text_width,
            })
    });
    if let Some(text) = inner {
        let colour = match bar.kind {
            BarKind::WavePause => "#1f3b57",
            _ => "#ffffff",
        };
        group = group.add(
            Text::new(text)
                .set("class", "wave-label")
                .set("x", px(x0 + 3.0))
                .set("y", y + height - 6.0)
                .set("font-size", BAR_FONT)
                .set("fill", colour),
        );
    }
    group
}

/// A run's start: a vertical line through the lanes and its label on top; a rollback run (or a
/// failed run that was rolled back) gets a marker, a superseded run the run that replaced it.
fn run_marker(run: &Run<'_>, label: &RunLabel, top: f64, lanes: usize) -> Group {
    let x = label.x;
    let rollback = is_rollback(run.record);
    let ended = run
        .record
        .ended_at
        .map(|end| format!(" to {}", stamp(end)))
        .unwrap_or_default();
    let mut class = String::from("run");
    if rollback {
        class.push_str(" rollback-run");
    }
    if run.is_superseded() {
        class.push_str(" superseded");
    }
    let mut group = Group::new()
        .set("class", class)
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
                .set("y1", label.y(top) + 4.0)
                .set("y2", top + LANE * lanes.max(1) as f64)
                .set("stroke", if rollback { "#6b2c5f" } else { "#555555" })
                .set("stroke-dasharray", "3 3"),
        )
        .add(label.element(top));
    if let Some(next) = run.superseded_by.filter(|_| run.is_superseded()) {
        group = group.set("data-superseded-by", next);
    }
    if rollback {
        group = group.add(
            Path::new()
                .set("class", "marker rollback-marker")
                .set("data-snapshot", run.record.snapshot_index)
                .set("d", format!("M {x} {} l -6 -8 l 12 0 z", top - 2.0))
                .set("fill", "#6b2c5f"),
        );
        if let Some(to) = run.record.rollback_of {
            group = group.set("data-rollback-of", to);
        }
        if let Some(mode) = run.record.rollback {
            group = group.set("data-rollback", mode.as_str());
        }
    }
    group
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
    let notes_y = y + LEGEND_ROW * BarKind::ALL.len().div_ceil(3) as f64;
    for (i, note) in NOTES.iter().enumerate() {
        group = group.add(
            Text::new(*note)
                .set("class", "legend-note")
                .set("x", LEFT)
                .set("y", notes_y + LEGEND_ROW * i as f64 + 9.0)
                .set("font-size", 9),
        );
    }
    group
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

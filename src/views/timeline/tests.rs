//! The picture from hand-written histories: lanes, a bar per activity span, waves, held starts,
//! superseded runs, labels that never overlap, markers, and records from before spans existed.

use chrono::{DateTime, Duration, Utc};
use tollgate_engine::activity::{StageActivity, WaveOf};
use tollgate_engine::run_history::{ActivitySpan, HeldStart};
use tollgate_engine::{RunOutcome, RunRecord, StageRecord};

use super::draw;
use super::labels::EM_PER_CHAR;
use super::layout::{BarKind, lay_out};

fn t(minute: i64) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-02T10:00:00Z")
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default()
        + Duration::minutes(minute)
}

fn stage(name: &str, applied: i64) -> StageRecord {
    StageRecord::new(name.to_string(), t(applied))
}

/// A stage whose activities are `spans` (the first one's instant is when it was entered).
fn spanned(name: &str, spans: &[(StageActivity, i64)]) -> StageRecord {
    let mut record = stage(name, spans.first().map_or(0, |(_, at)| *at));
    record.activities = spans
        .iter()
        .map(|(activity, at)| ActivitySpan {
            activity: activity.clone(),
            since: t(*at),
        })
        .collect();
    record
}

fn run(index: u64, started: i64, outcome: RunOutcome, stages: Vec<StageRecord>) -> RunRecord {
    RunRecord {
        snapshot_index: index,
        commit: format!("abc123{index}"),
        committed_at: None,
        rollback_of: None,
        started_at: t(started),
        trace_id: None,
        ended_at: None,
        outcome,
        stages,
        held_starts: Vec::new(),
        rollback: None,
    }
}

fn wave(wave: u32, of: u32) -> Option<WaveOf> {
    Some(WaveOf { wave, of })
}

fn provisioning(w: Option<WaveOf>) -> StageActivity {
    StageActivity::Provisioning { wave: w }
}

/// #1: dev soaks and passes its health checks, then a blackout holds prod's start; prod goes out
/// in three waves with pauses, its third wave held by a second blackout, then waits for an
/// approval. #1 is superseded by #2 while prod waits.
fn waved_history() -> Vec<RunRecord> {
    let dev = spanned(
        "dev",
        &[
            (provisioning(None), 0),
            (StageActivity::Soaking { until: t(10) }, 1),
            (StageActivity::HealthChecks, 10),
            (StageActivity::Completed, 12),
        ],
    );
    let pause = |w: u32, until: i64| StageActivity::WavePause {
        wave: WaveOf { wave: w, of: 3 },
        until: t(until),
    };
    let prod = spanned(
        "prod",
        &[
            (provisioning(wave(1, 3)), 20),
            (pause(1, 26), 21),
            (provisioning(wave(2, 3)), 26),
            (pause(2, 32), 27),
            (
                StageActivity::Blackout {
                    until: t(40),
                    reason: None,
                    wave: wave(3, 3),
                },
                32,
            ),
            (provisioning(wave(3, 3)), 40),
            (StageActivity::AwaitingApproval, 41),
        ],
    );
    let mut first = run(1, 0, RunOutcome::Superseded, vec![dev, prod]);
    first.held_starts.push(HeldStart {
        stage: "prod".into(),
        since: t(12),
        until: t(20),
        reason: Some("deploy freeze".into()),
    });
    first.ended_at = Some(t(50));
    let second = run(
        2,
        50,
        RunOutcome::Running,
        vec![spanned("dev", &[(provisioning(None), 50)])],
    );
    vec![first, second]
}

/// `(kind, wave, start, end)` of every bar of run `index` in `lane`, minutes after `t(0)`.
fn bars_of(
    timeline: &super::layout::Timeline<'_>,
    index: usize,
    lane: usize,
) -> Vec<(BarKind, Option<u32>, i64, i64)> {
    timeline.runs[index]
        .bars
        .iter()
        .filter(|(l, _)| *l == lane)
        .map(|(_, bar)| {
            (
                bar.kind,
                bar.wave.map(|w| w.wave),
                (bar.start - t(0)).num_minutes(),
                (bar.end - t(0)).num_minutes(),
            )
        })
        .collect()
}

#[test]
fn an_analysis_is_a_bar_and_an_inconclusive_one_waits_like_a_gate() {
    let dev = spanned(
        "dev",
        &[
            (provisioning(None), 0),
            (StageActivity::Analyzing { until: Some(t(5)) }, 1),
            (
                StageActivity::AnalysisInconclusive {
                    reason: "no data".into(),
                },
                11,
            ),
        ],
    );
    let history = vec![run(1, 0, RunOutcome::Running, vec![dev])];
    let timeline = lay_out(&history, t(-60), t(20));
    use BarKind::*;
    assert_eq!(
        bars_of(&timeline, 0, 0),
        [
            (Provisioning, None, 0, 1),
            (Analysis, None, 1, 11),
            (Approval, None, 11, 20)
        ]
    );
}

#[test]
fn every_activity_span_is_a_bar_that_ends_where_the_next_starts() {
    let history = waved_history();
    let timeline = lay_out(&history, t(-60), t(55));
    assert_eq!(timeline.lanes, ["dev", "prod"]);
    use BarKind::*;
    assert_eq!(
        bars_of(&timeline, 0, 0),
        [
            (Provisioning, None, 0, 1),
            (Soak, None, 1, 10),
            (HealthChecks, None, 10, 12)
        ]
    );
    assert_eq!(
        bars_of(&timeline, 0, 1),
        [
            (Blackout, None, 12, 20),
            (Provisioning, Some(1), 20, 21),
            (WavePause, Some(1), 21, 26),
            (Provisioning, Some(2), 26, 27),
            (WavePause, Some(2), 27, 32),
            (Blackout, Some(3), 32, 40),
            (Provisioning, Some(3), 40, 41),
            (Approval, None, 41, 50),
        ],
        "the approval wait ends with the run, superseded at 50"
    );
    let held = &timeline.runs[0].bars[0].1;
    assert!(held.held_start, "{held:?}");
    assert_eq!(bars_of(&timeline, 1, 0), [(Provisioning, None, 50, 55)]);
    assert_eq!(timeline.runs[0].superseded_by, Some(2));
    assert_eq!(timeline.runs[1].superseded_by, None);
}

#[test]
fn the_last_wave_recorded_without_its_number_continues_its_bar() {
    // Records from before the engine named the last wave: its provisioning span had no wave.
    let prod = spanned(
        "prod",
        &[
            (provisioning(wave(1, 2)), 0),
            (provisioning(wave(2, 2)), 5),
            (provisioning(None), 5),
            (StageActivity::Completed, 6),
        ],
    );
    let history = [run(1, 0, RunOutcome::Completed, vec![prod])];
    let timeline = lay_out(&history, t(-60), t(10));
    assert_eq!(
        bars_of(&timeline, 0, 0),
        [
            (BarKind::Provisioning, Some(1), 0, 5),
            (BarKind::Provisioning, Some(2), 5, 6)
        ]
    );
}

/// #1 completed through dev (delay) → staging (window) → prod (approval); #2 failed in staging
/// and was rolled back to #1; #3 reverts to #1 and is still provisioning dev. Recorded before
/// activity spans existed: only the transition instants.
fn legacy_history() -> Vec<RunRecord> {
    let mut dev = stage("dev", 0);
    dev.provisioned_at = Some(t(1));
    dev.succeeded_at = Some(t(6));
    let mut staging = stage("staging", 6);
    staging.provisioned_at = Some(t(7));
    staging.awaiting_window_since = Some(t(7));
    staging.succeeded_at = Some(t(20));
    let mut prod = stage("prod", 20);
    prod.provisioned_at = Some(t(21));
    prod.awaiting_approval_since = Some(t(21));
    prod.succeeded_at = Some(t(30));
    let mut first = run(1, 0, RunOutcome::Completed, vec![dev, staging, prod]);
    first.ended_at = Some(t(30));

    let mut dev = stage("dev", 40);
    dev.provisioned_at = Some(t(41));
    dev.succeeded_at = Some(t(42));
    dev.restored_at = Some(t(46));
    dev.restored_to = Some(1);
    let mut staging = stage("staging", 42);
    staging.failed_at = Some(t(44));
    staging.restored_at = Some(t(45));
    staging.restored_to = Some(1);
    let mut failed = run(2, 40, RunOutcome::RolledBack, vec![dev, staging]);
    failed.ended_at = Some(t(46));

    let mut revert = run(3, 50, RunOutcome::Running, vec![stage("dev", 50)]);
    revert.rollback_of = Some(1);
    vec![first, failed, revert]
}

#[test]
fn records_without_spans_are_drawn_from_their_transitions() {
    let history = legacy_history();
    let timeline = lay_out(&history, t(-60), t(55));
    assert_eq!(timeline.lanes, ["dev", "staging", "prod"]);
    assert_eq!(timeline.from, t(0));
    assert_eq!(
        timeline.to,
        t(55) + Duration::seconds(165),
        "now, and 5 % more room"
    );
    use BarKind::*;
    let kinds = |index: usize, lane: usize| -> Vec<(BarKind, i64, i64)> {
        bars_of(&timeline, index, lane)
            .into_iter()
            .map(|(kind, _, start, end)| (kind, start, end))
            .collect()
    };
    assert_eq!(kinds(0, 0), [(Provisioning, 0, 1), (Soak, 1, 6)]);
    assert_eq!(kinds(0, 1), [(Provisioning, 6, 7), (Window, 7, 20)]);
    assert_eq!(kinds(0, 2), [(Provisioning, 20, 21), (Approval, 21, 30)]);
    assert_eq!(
        kinds(1, 1),
        [(Provisioning, 42, 44), (Failed, 44, 45), (Rollback, 44, 45)]
    );
    assert_eq!(
        kinds(1, 0),
        [(Provisioning, 40, 41), (Soak, 41, 42), (Rollback, 44, 46)]
    );
    assert_eq!(kinds(2, 0), [(Provisioning, 50, 55)], "open until now");
}

#[test]
fn a_failed_stage_stays_failed_until_restored_and_its_restore_is_a_rollback_bar() {
    // The engine fails the stage and starts its rollback in one step: no Failed span is
    // recorded, only the instant (`failed_at`).
    let staging = spanned(
        "staging",
        &[
            (provisioning(None), 0),
            (StageActivity::RollingBack { snapshot: None }, 3),
            (StageActivity::Restored { snapshot: Some(1) }, 5),
        ],
    );
    let dev = spanned(
        "dev",
        &[
            (provisioning(None), 0),
            (StageActivity::Completed, 1),
            // Restored in the step the rollback began: no RollingBack span.
            (StageActivity::Restored { snapshot: None }, 4),
        ],
    );
    let mut failed = run(2, 0, RunOutcome::RolledBack, vec![dev, staging]);
    failed.stages[1].failed_at = Some(t(3));
    failed.ended_at = Some(t(5));
    let history = [failed];
    let timeline = lay_out(&history, t(-60), t(10));
    use BarKind::*;
    assert_eq!(
        bars_of(&timeline, 0, 1),
        [
            (Provisioning, None, 0, 3),
            (Failed, None, 3, 5),
            (Rollback, None, 3, 5)
        ]
    );
    assert_eq!(
        bars_of(&timeline, 0, 0),
        [(Provisioning, None, 0, 1), (Rollback, None, 3, 4)]
    );
    let restored: Vec<Option<u64>> = timeline.runs[0]
        .bars
        .iter()
        .filter(|(_, b)| b.kind == Rollback)
        .map(|(_, b)| b.restored_to)
        .collect();
    assert_eq!(restored, [None, Some(1)]);
}

#[test]
fn runs_that_ended_before_the_period_are_left_out() {
    let history = legacy_history();
    let timeline = lay_out(&history, t(35), t(55));
    let shown: Vec<u64> = timeline
        .runs
        .iter()
        .map(|r| r.record.snapshot_index)
        .collect();
    assert_eq!(shown, [2, 3]);
    assert_eq!(timeline.lanes, ["dev", "staging"]);
    assert_eq!(timeline.from, t(40));
}

#[test]
fn a_stage_only_an_older_run_reached_keeps_its_place_in_the_pipeline() {
    let older = run(
        1,
        0,
        RunOutcome::Superseded,
        vec![stage("dev", 0), stage("qa", 1), stage("prod", 2)],
    );
    let newer = run(
        2,
        5,
        RunOutcome::Running,
        vec![stage("dev", 5), stage("canary", 6)],
    );
    let history = [older, newer];
    let timeline = lay_out(&history, t(-60), t(10));
    assert_eq!(timeline.lanes, ["dev", "qa", "prod", "canary"]);
}

fn parse(svg: &str) -> roxmltree::Document<'_> {
    roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("invalid SVG: {e}\n{svg}"))
}

fn has_class(node: &roxmltree::Node<'_, '_>, class: &str) -> bool {
    node.attribute("class")
        .is_some_and(|c| c.split(' ').any(|c| c == class))
}

fn tooltip_of<'a>(node: &roxmltree::Node<'a, '_>) -> &'a str {
    node.children()
        .find(|c| c.has_tag_name("title"))
        .and_then(|c| c.text().map(str::trim))
        .unwrap_or_default()
}

#[test]
fn the_svg_names_lanes_bars_labels_and_rollbacks() {
    let history = legacy_history();
    let timeline = lay_out(&history, t(-60), t(55));
    let svg = draw::svg("web <&>", &timeline, "1h", None);
    let doc = parse(&svg);
    let root = doc.root_element();
    assert_eq!(root.attribute("data-promotion"), Some("web <&>"));
    let lanes: Vec<&str> = root
        .descendants()
        .filter(|n| has_class(n, "lane"))
        .filter_map(|n| n.attribute("data-stage"))
        .collect();
    assert_eq!(lanes, ["dev", "staging", "prod"]);
    let bar = |kind: &str, stage: &str, snapshot: &str| {
        root.descendants().find(|n| {
            has_class(n, "bar")
                && has_class(n, kind)
                && n.attribute("data-stage") == Some(stage)
                && n.attribute("data-snapshot") == Some(snapshot)
        })
    };
    let window = bar("window", "staging", "1").expect("a window bar");
    let tooltip = tooltip_of(&window);
    assert!(
        tooltip.contains("waiting for a promotion window #1 abc1231"),
        "{tooltip}"
    );
    assert!(tooltip.contains("(13m0s)"), "{tooltip}");
    assert!(bar("approval", "prod", "1").is_some());
    assert!(bar("soak", "dev", "1").is_some());
    assert!(bar("failed", "staging", "2").is_some());
    let restore = bar("rollback", "dev", "2").expect("a rollback bar");
    assert_eq!(restore.attribute("data-restored-to"), Some("1"));
    assert!(
        tooltip_of(&restore)
            .contains("dev: rolling back #2 abc1232 to #1 from 2026-03-02T10:44:00Z"),
        "{}",
        tooltip_of(&restore)
    );
    let labels: Vec<&str> = root
        .descendants()
        .filter(|n| has_class(n, "bar-label"))
        .filter_map(|n| n.text().map(str::trim))
        .collect();
    assert!(labels.contains(&"#2 abc1232"), "{labels:?}");
    let revert = root
        .descendants()
        .find(|n| n.attribute("id") == Some("run-3"))
        .expect("run 3");
    assert!(has_class(&revert, "rollback-run"));
    assert_eq!(revert.attribute("data-rollback-of"), Some("1"));
    assert!(
        revert
            .descendants()
            .any(|n| has_class(&n, "rollback-marker"))
    );
    assert!(
        revert
            .descendants()
            .any(|n| n.text().map(str::trim) == Some("#3 abc1233 rollback to #1"))
    );
    let ticks = root.descendants().filter(|n| has_class(n, "tick")).count();
    assert!((3..=9).contains(&ticks), "{ticks} ticks");
    let legend: Vec<&str> = root
        .descendants()
        .filter(|n| has_class(n, "legend-item"))
        .filter_map(|n| n.attribute("data-kind"))
        .collect();
    assert_eq!(
        legend,
        [
            "provisioning",
            "wave-pause",
            "soak",
            "health-checks",
            "analysis",
            "window",
            "approval",
            "blackout",
            "paused",
            "failed",
            "rollback"
        ]
    );
}

#[test]
fn waves_pauses_and_blackouts_are_drawn_and_named() {
    let history = waved_history();
    let timeline = lay_out(&history, t(-60), t(55));
    let svg = draw::svg("web", &timeline, "1h", None);
    let doc = parse(&svg);
    let prod_bars: Vec<roxmltree::Node<'_, '_>> = doc
        .descendants()
        .filter(|n| has_class(n, "bar") && n.attribute("data-stage") == Some("prod"))
        .collect();
    let waves: Vec<(&str, &str)> = prod_bars
        .iter()
        .filter_map(|n| Some((n.attribute("class")?, n.attribute("data-wave")?)))
        .collect();
    assert_eq!(
        waves,
        [
            ("bar provisioning superseded", "1/3"),
            ("bar wave-pause superseded", "1/3"),
            ("bar provisioning superseded", "2/3"),
            ("bar wave-pause superseded", "2/3"),
            ("bar blackout superseded", "3/3"),
            ("bar provisioning superseded", "3/3"),
        ]
    );
    let held = prod_bars
        .iter()
        .find(|n| has_class(n, "held-start"))
        .expect("prod's held start");
    assert!(has_class(held, "blackout"));
    assert!(
        tooltip_of(held).starts_with("prod: start held by a blackout #1 abc1231 from 2026-03-02T10:12:00Z to 2026-03-02T10:20:00Z"),
        "{}",
        tooltip_of(held)
    );
    let pause = prod_bars
        .iter()
        .find(|n| has_class(n, "wave-pause"))
        .expect("a pause");
    assert!(
        tooltip_of(pause).starts_with("prod: pause after wave 1/3 #1"),
        "{}",
        tooltip_of(pause)
    );
    // The pauses are wide enough to say which they are.
    let inner: Vec<&str> = doc
        .descendants()
        .filter(|n| has_class(n, "wave-label"))
        .filter_map(|n| n.text().map(str::trim))
        .collect();
    assert!(inner.contains(&"pause 1/3"), "{inner:?}");
    assert!(inner.contains(&"pause 2/3"), "{inner:?}");
}

#[test]
fn a_superseded_run_is_faded_hatched_and_names_its_successor() {
    let history = waved_history();
    let timeline = lay_out(&history, t(-60), t(55));
    let doc_text = draw::svg("web", &timeline, "1h", None);
    let doc = parse(&doc_text);
    let first = doc
        .descendants()
        .find(|n| n.attribute("id") == Some("run-1"))
        .expect("run 1");
    assert!(has_class(&first, "superseded"));
    assert_eq!(first.attribute("data-superseded-by"), Some("2"));
    assert_eq!(first.attribute("data-outcome"), Some("Superseded"));
    assert!(
        first
            .descendants()
            .any(|n| n.text().map(str::trim) == Some("#1 abc1231 superseded by #2")),
        "{doc_text}"
    );
    let second = doc
        .descendants()
        .find(|n| n.attribute("id") == Some("run-2"))
        .expect("run 2");
    assert!(!has_class(&second, "superseded"));
    for bar in doc.descendants().filter(|n| has_class(n, "bar")) {
        let superseded = bar.attribute("data-snapshot") == Some("1");
        assert_eq!(has_class(&bar, "superseded"), superseded);
        assert_eq!(bar.attribute("fill-opacity").is_some(), superseded);
    }
    let hatches = doc.descendants().filter(|n| has_class(n, "hatch")).count();
    let first_bars = timeline.runs[0].bars.len();
    assert_eq!(hatches, first_bars, "one hatch per bar of #1");
}

/// A text element's box as the picture lays it out: from its position, anchor, font size and a
/// generous width per character.
#[derive(Debug)]
struct TextBox {
    text: String,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

fn text_boxes(doc: &roxmltree::Document<'_>) -> Vec<TextBox> {
    let number = |node: &roxmltree::Node<'_, '_>, name: &str| -> Option<f64> {
        node.attribute(name).and_then(|v| v.parse().ok())
    };
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| {
            let text = n.text().unwrap_or_default().trim().to_string();
            let size = n
                .ancestors()
                .find_map(|a| number(&a, "font-size"))
                .unwrap_or(11.0);
            let width = text.chars().count() as f64 * size * EM_PER_CHAR;
            let x = number(&n, "x").unwrap_or_default();
            let y = number(&n, "y").unwrap_or_default();
            let x0 = match n.attribute("text-anchor") {
                Some("end") => x - width,
                Some("middle") => x - width / 2.0,
                _ => x,
            };
            TextBox {
                text,
                x0,
                x1: x0 + width,
                y0: y - size,
                y1: y,
            }
        })
        .collect()
}

fn assert_no_text_overlaps(svg: &str) {
    let doc = parse(svg);
    let boxes = text_boxes(&doc);
    for (i, a) in boxes.iter().enumerate() {
        for b in &boxes[i + 1..] {
            let apart = a.x1 <= b.x0 || b.x1 <= a.x0 || a.y1 <= b.y0 || b.y1 <= a.y0;
            assert!(
                apart,
                "{:?} and {:?} overlap:\n{a:?}\n{b:?}",
                a.text, b.text
            );
        }
    }
}

/// Runs seconds apart, one near the right edge, long commit labels: every run keeps its label,
/// and no two texts of the picture (labels, lanes, axis, legend) overlap.
#[test]
fn labels_never_overlap_however_close_the_runs() {
    let mut history: Vec<RunRecord> = (1..=8)
        .map(|index| {
            let start = if index == 8 { 60 } else { 0 };
            let mut record = run(
                index,
                start,
                RunOutcome::Superseded,
                vec![spanned(
                    "dev",
                    &[
                        (provisioning(wave(1, 2)), start),
                        (provisioning(wave(2, 2)), start),
                    ],
                )],
            );
            record.started_at += Duration::seconds(index as i64);
            for span in &mut record.stages[0].activities {
                span.since = record.started_at;
            }
            record.stages[0].applied_at = record.started_at;
            record.ended_at = Some(record.started_at + Duration::seconds(1));
            record.commit = format!("{index:0>7}");
            record
        })
        .collect();
    history[6].rollback_of = Some(2);
    history[7].outcome = RunOutcome::Running;
    history[7].ended_at = None;
    let timeline = lay_out(&history, t(-60), t(61));
    let svg = draw::svg("web", &timeline, "2h", None);
    assert_no_text_overlaps(&svg);
    let doc = parse(&svg);
    let mut labelled: Vec<&str> = doc
        .descendants()
        .filter(|n| has_class(n, "run"))
        .filter(|run| run.descendants().any(|n| has_class(&n, "run-label")))
        .filter_map(|n| n.attribute("data-snapshot"))
        .collect();
    labelled.sort_unstable();
    assert_eq!(labelled, ["1", "2", "3", "4", "5", "6", "7", "8"]);
    // Also with the spans of a whole rollout, and with a picture of nothing.
    let waved = waved_history();
    assert_no_text_overlaps(&draw::svg(
        "web",
        &lay_out(&waved, t(-60), t(55)),
        "1h",
        None,
    ));
    let legacy = legacy_history();
    assert_no_text_overlaps(&draw::svg(
        "web",
        &lay_out(&legacy, t(-60), t(55)),
        "1h",
        None,
    ));
}

#[test]
fn a_picture_without_runs_is_valid_and_says_so() {
    let timeline = lay_out(&[], t(-60), t(0));
    let svg = draw::svg(
        "web",
        &timeline,
        "1h",
        Some("No runs recorded for web yet."),
    );
    let doc = parse(&svg);
    let empty = doc
        .descendants()
        .find(|n| has_class(n, "empty"))
        .and_then(|n| n.text().map(str::trim));
    assert_eq!(empty, Some("No runs recorded for web yet."));
    assert_eq!(doc.descendants().filter(|n| has_class(n, "bar")).count(), 0);
    assert_no_text_overlaps(&svg);
}

/// The picture's declared size.
fn svg_size(svg: &str) -> (u32, u32) {
    let doc = parse(svg);
    let root = doc.root_element();
    let size = |name: &str| {
        root.attribute(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or_default()
    };
    (size("width"), size("height"))
}

#[test]
fn the_png_has_the_svg_size() {
    let history = waved_history();
    let timeline = lay_out(&history, t(-60), t(55));
    let svg = draw::svg("web", &timeline, "1h", None);
    let rendered = super::png::render(&svg).expect("a PNG");
    let png = rendered.png;
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
    let height = u32::from_be_bytes([png[20], png[21], png[22], png[23]]);
    assert_eq!((width, height), svg_size(&svg));
    assert_eq!(width, draw::WIDTH);
    if let Ok(path) = std::env::var("TOLLGATE_TIMELINE_PNG") {
        std::fs::write(path, &png).expect("PNG written");
    }
}

#[test]
fn a_png_without_fonts_says_why_its_text_is_missing() {
    let timeline = lay_out(&[], t(-60), t(0));
    let svg = draw::svg(
        "web",
        &timeline,
        "1h",
        Some("No runs recorded for web yet."),
    );
    let rendered = super::png::render_with(&svg, resvg::usvg::fontdb::Database::new())
        .expect("a PNG all the same");
    assert_eq!(rendered.warning, Some(super::png::NO_FONTS));
    assert!(rendered.png.starts_with(b"\x89PNG"));
}

#[test]
fn the_png_draws_its_text_with_the_system_fonts() {
    let mut fonts = resvg::usvg::fontdb::Database::new();
    fonts.load_system_fonts();
    if fonts.is_empty() {
        // .ci/run installs fonts-dejavu-core, so CI always runs this; a developer machine may not.
        assert!(
            std::env::var_os("CI").is_none(),
            "no fonts in CI: .ci/run must install fonts-dejavu-core"
        );
        eprintln!("skipping: no fonts installed (apt-get install fonts-dejavu-core)");
        return;
    }
    let history = legacy_history();
    let timeline = lay_out(&history, t(-60), t(55));
    let svg = draw::svg("web", &timeline, "1h", None);
    let with_text = super::png::render_with(&svg, fonts).expect("a PNG");
    assert_eq!(with_text.warning, None);
    let without_text = super::png::render_with(&svg, resvg::usvg::fontdb::Database::new())
        .expect("a PNG without text");
    assert_ne!(with_text.png, without_text.png, "the labels were drawn");
}

#[test]
fn a_halted_stage_stays_failed_until_a_later_run_enters_a_stage() {
    let failing = || {
        spanned(
            "dev",
            &[
                (provisioning(None), 0),
                (
                    StageActivity::Failed {
                        reason: "1 failed".into(),
                    },
                    2,
                ),
            ],
        )
    };
    let mut halted = run(1, 0, RunOutcome::Failed, vec![failing()]);
    halted.stages[0].failed_at = Some(t(2));
    halted.ended_at = Some(t(2));
    use BarKind::*;
    let alone = [halted.clone()];
    let timeline = lay_out(&alone, t(-60), t(10));
    assert_eq!(
        bars_of(&timeline, 0, 0),
        [(Provisioning, None, 0, 2), (Failed, None, 2, 10)],
        "failed until now"
    );
    // A next run whose start a blackout holds replaces nothing yet; one that enters a stage does.
    let mut held = run(2, 6, RunOutcome::Running, Vec::new());
    held.held_starts.push(HeldStart {
        stage: "dev".into(),
        since: t(6),
        until: t(30),
        reason: None,
    });
    let history = [halted.clone(), held];
    let timeline = lay_out(&history, t(-60), t(10));
    assert_eq!(bars_of(&timeline, 0, 0)[1], (Failed, None, 2, 10));
    assert_eq!(bars_of(&timeline, 1, 0), [(Blackout, None, 6, 10)]);
    let entered = run(2, 6, RunOutcome::Running, vec![stage("dev", 6)]);
    let history = [halted, entered];
    let timeline = lay_out(&history, t(-60), t(10));
    assert_eq!(bars_of(&timeline, 0, 0)[1], (Failed, None, 2, 6));
}

/// A comparative analysis (issue #48): its bar's tooltip says what was compared with what, the
/// medians, the effect, the p-value and the verdict, as the run history recorded it.
#[test]
fn an_analysis_bar_tells_its_comparison() {
    let mut prod = spanned(
        "prod",
        &[
            (provisioning(None), 0),
            (StageActivity::Analyzing { until: Some(t(5)) }, 1),
        ],
    );
    let compared = "latency: prod-1, prod-2 (median 0.26) vs OtherWaves prod-3, prod-4 \
                    (median 0.2): effect +30%, p=0.0015 (Failed)";
    prod.comparisons.push(compared.to_string());
    let dev = spanned("dev", &[(provisioning(None), 0)]);
    let history = vec![run(1, 0, RunOutcome::Running, vec![dev, prod])];
    let timeline = lay_out(&history, t(-60), t(20));
    let svg = draw::svg("web", &timeline, "1h", None);
    assert!(svg.contains(&format!("compared {compared}")), "{svg}");
    // prod's two bars carry it, dev's does not.
    assert_eq!(svg.matches("compared latency").count(), 2, "{svg}");
}

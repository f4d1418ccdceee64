//! The picture from hand-written histories: lanes, bar kinds and their extents, labels, markers.

use chrono::{DateTime, Duration, Utc};
use tollgate_engine::{RunOutcome, RunRecord, StageRecord};

use super::draw;
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

fn run(index: u64, started: i64, outcome: RunOutcome, stages: Vec<StageRecord>) -> RunRecord {
    RunRecord {
        snapshot_index: index,
        commit: format!("abc123{index}"),
        rollback_of: None,
        started_at: t(started),
        ended_at: None,
        outcome,
        stages,
        held_starts: Vec::new(),
    }
}

/// #1 completed through dev (delay) → staging (window) → prod (approval); #2 failed in staging
/// and was rolled back to #1; #3 reverts to #1 and is still provisioning dev.
fn history() -> Vec<RunRecord> {
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
fn every_state_of_a_stage_becomes_a_bar_that_ends_where_the_next_starts() {
    let history = history();
    let timeline = lay_out(&history, t(-60), t(55));
    assert_eq!(timeline.lanes, ["dev", "staging", "prod"]);
    assert_eq!(timeline.from, t(0));
    assert_eq!(
        timeline.to,
        t(55) + Duration::seconds(165),
        "now, and 5 % more room"
    );
    let kinds = |index: usize, lane: usize| -> Vec<(BarKind, i64, i64)> {
        timeline.runs[index]
            .bars
            .iter()
            .filter(|(l, _)| *l == lane)
            .map(|(_, bar)| {
                (
                    bar.kind,
                    (bar.start - t(0)).num_minutes(),
                    (bar.end - t(0)).num_minutes(),
                )
            })
            .collect()
    };
    use BarKind::*;
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
fn runs_that_ended_before_the_period_are_left_out() {
    let history = history();
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

#[test]
fn the_svg_names_lanes_bars_labels_and_rollbacks() {
    let history = history();
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
    let tooltip = window
        .children()
        .find(|c| c.has_tag_name("title"))
        .and_then(|c| c.text().map(str::trim))
        .unwrap_or_default();
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
    let restore_tooltip = restore
        .children()
        .find(|c| c.has_tag_name("title"))
        .and_then(|c| c.text())
        .unwrap_or_default();
    assert!(
        restore_tooltip.contains("dev: rolling back #2 abc1232 to #1 from 2026-03-02T10:44:00Z"),
        "{restore_tooltip}"
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
            "soak",
            "window",
            "approval",
            "failed",
            "rollback"
        ]
    );
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
}

#[test]
fn the_png_has_the_svg_size() {
    let history = history();
    let timeline = lay_out(&history, t(-60), t(55));
    let svg = draw::svg("web", &timeline, "1h", None);
    let rendered = super::png::render(&svg).expect("a PNG");
    let png = rendered.png;
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
    let height = u32::from_be_bytes([png[20], png[21], png[22], png[23]]);
    assert_eq!((width, height), (draw::WIDTH, draw::height(3)));
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
    let history = history();
    let timeline = lay_out(&history, t(-60), t(55));
    let svg = draw::svg("web", &timeline, "1h", None);
    let with_text = super::png::render_with(&svg, fonts).expect("a PNG");
    assert_eq!(with_text.warning, None);
    let without_text = super::png::render_with(&svg, resvg::usvg::fontdb::Database::new())
        .expect("a PNG without text");
    assert_ne!(with_text.png, without_text.png, "the labels were drawn");
}

#[test]
fn every_run_keeps_a_label_on_a_bar_however_crowded() {
    // Three runs a second apart, then one an hour later: the first three share a few pixels.
    let history: Vec<RunRecord> = (1..=4)
        .map(|index| {
            let start = if index == 4 { 60 } else { 0 };
            let mut record = run(
                index,
                start,
                RunOutcome::Superseded,
                vec![stage("dev", start)],
            );
            record.started_at += Duration::seconds(index as i64);
            record.stages[0].applied_at = record.started_at;
            record.ended_at = Some(record.started_at + Duration::seconds(1));
            record
        })
        .collect();
    let timeline = lay_out(&history, t(-60), t(61));
    let svg = draw::svg("web", &timeline, "2h", None);
    let doc = parse(&svg);
    let mut labelled: Vec<&str> = doc
        .descendants()
        .filter(|n| has_class(n, "bar-label"))
        .filter_map(|n| n.attribute("data-snapshot"))
        .collect();
    labelled.sort_unstable();
    assert_eq!(labelled, ["1", "2", "3", "4"]);
}

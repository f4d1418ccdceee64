//! End to end: every view states what the engine says each stage does (issue #30). One rollout
//! through the controller on the embedded management cluster, from a real git repository: a
//! waved stage of seven clusters (a canary, then waves of two), a blackout holding its second
//! wave, the stage completed with a failure tolerated; then a new snapshot whose second wave
//! provisions with that failure, until the canary's cluster fails too and the run is rolled back. At each moment, every view of the promotion (`status NAME`, `status NAME
//! -o json`, the live view's frame) must state, per stage, the activity, the counts and the
//! snapshot of the engine's `pipeline()` of the status. To add a view, add a [`View`] and its
//! reader.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use serde::Deserialize;
use serde_json::Value;
use support::web_page::{page_body, serve_in_process};
use support::{TestRepo, World, tollgate_binary};
use tollgate_emulator::Fleet;
use tollgate_engine::PromotionStatus;
use tollgate_engine::activity::{StageActivity, WaveOf};
use tollgate_engine::pipeline::StageView;
use tollgate_fixtures::{FleetBuilder, cluster, fleet, promotion, stage};

const WEB: &str = "web";
const FLAKY: &str = "values: flaky is not a valid key";
const CANARY_BREAKS: &str = "values: replicas must be an integer";

/// dev-1; prod-1 … prod-7 ordered by `order`: prod-1 is the canary, prod-3 (second wave) is
/// flaky.
fn seven_in_prod() -> FleetBuilder {
    let mut fleet = fleet()
        .default_latency("50ms")
        .cluster(cluster("dev-1").ns("fleet").label("env", "dev"));
    for i in 1..=7 {
        let mut prod = cluster(&format!("prod-{i}"))
            .ns("fleet")
            .label("env", "prod")
            .label("order", &i.to_string());
        if i == 1 {
            prod = prod.label("canary", "yes");
        }
        if i == 3 {
            prod = prod.label("flaky", "yes");
        }
        fleet = fleet.cluster(prod);
    }
    fleet
}

fn web(chart: &str) -> String {
    promotion(WEB)
        .chart("web", chart)
        .stage(stage("dev").selector("env", "dev").auto())
        .stage(stage("prod").selector("env", "prod").auto())
        .to_yaml()
}

/// One failure tolerated, rollback on more; prod in waves: a canary of one, then waves of two.
fn policy(pause: &str, blackout: Option<&str>) -> String {
    let mut text = format!(
        "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: waves\nspec:\n  \
         selector: {{}}\n  maxFailures: 1\n  onFailure: Rollback\n  stages:\n    prod:\n      \
         waves:\n        sortingLabelKey: order\n        size: 2\n        canary: 1\n        \
         pause: {pause}\n"
    );
    if let Some(reason) = blackout {
        let now = Utc::now();
        let at = |t: chrono::DateTime<Utc>| t.format("%Y-%m-%dT%H:%M:%S").to_string();
        text.push_str(&format!(
            "  blackouts:\n  - from: \"{}\"\n    to: \"{}\"\n    reason: \"{reason}\"\n",
            at(now - chrono::Duration::hours(1)),
            at(now + chrono::Duration::hours(1)),
        ));
    }
    text
}

/// What one view states about one stage.
#[derive(Clone, Debug, PartialEq)]
struct Stated {
    snapshot: Option<u64>,
    /// (provisioned, members, failed + timed out), where the view shows counts.
    counts: Option<(u32, u32, u32)>,
    /// The activity as the view words it.
    activity: String,
}

/// The views compared; each reads back what it states per stage.
#[derive(Clone, Copy, Debug)]
enum View {
    /// `tollgate status NAME`: the stage table, piped (80 columns).
    StatusName,
    /// `tollgate status NAME -o json`: the status itself, one object.
    StatusJson,
    /// The live view of `status --watch`: its pure frame of the statuses, 120 columns.
    LiveFrame,
    /// The controller's metric `tollgate_stage_activity{promotion,stage,activity}`: the kind only.
    Metrics,
}

const VIEWS: [View; 4] = [
    View::StatusName,
    View::StatusJson,
    View::LiveFrame,
    View::Metrics,
];

impl View {
    async fn read(self, world: &World, status: &PromotionStatus) -> BTreeMap<String, Stated> {
        match self {
            View::StatusName => {
                let text = cli(world, &["status", WEB]).await;
                stage_table(&text)
            }
            View::StatusJson => {
                let text = cli(world, &["status", WEB, "-o", "json"]).await;
                let object: Value = serde_json::from_str(&text).expect("JSON");
                assert_eq!(object["name"], WEB, "one object, not a list: {text}");
                let status = PromotionStatus::deserialize(&object["status"]).expect("a status");
                status
                    .pipeline()
                    .iter()
                    .map(|view| (view.name.to_string(), from_json(view)))
                    .collect()
            }
            View::LiveFrame => live_frame(status),
            View::Metrics => metric_activities(&world.metrics.encode()),
        }
    }
}

/// Each stage's `activity` label of `tollgate_stage_activity` for this promotion.
fn metric_activities(text: &str) -> BTreeMap<String, Stated> {
    let prefix = format!("tollgate_stage_activity{{promotion=\"{WEB}\",stage=\"");
    text.lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .filter_map(|rest| {
            let (stage, rest) = rest.split_once("\",activity=\"")?;
            let (activity, _) = rest.split_once('"')?;
            let stated = Stated {
                snapshot: None,
                counts: None,
                activity: activity.to_string(),
            };
            Some((stage.to_string(), stated))
        })
        .collect()
}

async fn cli(world: &World, args: &[&str]) -> String {
    let mut command = tollgate_binary();
    command
        .args(args)
        .arg("--kubeconfig")
        .arg(world.kubeconfig());
    let output = tokio::task::spawn_blocking(move || command.output().expect("tollgate runs"))
        .await
        .expect("join");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "{args:?}: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The rows of the first table of `status NAME`: cells wrapped over lines joined again, by
/// column name (a column no stage has a value in is not shown: its cells read empty).
fn stage_table(text: &str) -> BTreeMap<String, Stated> {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header: Vec<String> = Vec::new();
    let mut in_body = false;
    for line in text.lines() {
        if line.starts_with('╞') {
            in_body = true;
            continue;
        }
        if !in_body {
            if line.starts_with('│') && header.is_empty() {
                header = line
                    .trim_matches('│')
                    .split('┆')
                    .map(|c| c.trim().to_string())
                    .collect();
            }
            continue;
        }
        if line.starts_with('└') {
            break;
        }
        assert!(
            line.chars().count() <= 80,
            "wider than 80: {line:?}\n{text}"
        );
        let cells: Vec<String> = line
            .trim_matches('│')
            .split('┆')
            .map(|c| c.trim().to_string())
            .collect();
        match rows.last_mut() {
            Some(row) if cells[0].is_empty() => {
                for (cell, more) in row.iter_mut().zip(&cells) {
                    if !more.is_empty() {
                        cell.push(' ');
                        cell.push_str(more);
                    }
                }
            }
            _ => rows.push(cells),
        }
    }
    let column = |row: &[String], name: &str| -> String {
        header
            .iter()
            .position(|h| h == name)
            .map(|i| row[i].clone())
            .unwrap_or_default()
    };
    rows.into_iter()
        .map(|row| {
            let cells = column(&row, "CLUSTERS");
            let counts = (!cells.is_empty()).then(|| clusters(&cells));
            let stated = Stated {
                snapshot: snapshot(&column(&row, "SNAPSHOT")),
                counts,
                activity: column(&row, "ACTIVITY"),
            };
            (column(&row, "STAGE"), stated)
        })
        .collect()
}

/// (provisioned, members, failed + timed out) from "6/7 provisioned, 1 failed, 1 timed out".
fn clusters(cell: &str) -> (u32, u32, u32) {
    let mut parts = cell.split(", ");
    let provisioned = parts.next().unwrap_or_default();
    let (provisioned, members) = provisioned
        .trim_end_matches(" provisioned")
        .split_once('/')
        .unwrap_or_else(|| panic!("counts {cell:?}"));
    let failures = parts
        .map(|part| {
            let (n, what) = part.split_once(' ').unwrap_or_else(|| panic!("{cell:?}"));
            assert!(["failed", "timed out"].contains(&what), "{cell:?}");
            number(n)
        })
        .sum();
    (number(provisioned), number(members), failures)
}

fn from_json(view: &StageView<'_>) -> Stated {
    let counts = match view.activity {
        // The JSON has every count; the views leave out a restored stage's (the rejected
        // snapshot's), and so does the comparison.
        StageActivity::RollingBack { .. } | StageActivity::Restored { .. } => None,
        _ => view
            .counts
            .map(|c| (c.provisioned, c.members, c.failed + c.timed_out)),
    };
    Stated {
        snapshot: view.snapshot,
        counts,
        activity: serde_json::to_string(view.activity).expect("JSON"),
    }
}

/// The stage lines of the live frame: the columns are fixed (name, bar, counts, ✗failures,
/// snapshot, activity).
fn live_frame(status: &PromotionStatus) -> BTreeMap<String, Stated> {
    let (lines, stages) = support::live_frame::of(WEB, status, Utc::now(), 120);
    let names = status.pipeline().len();
    let stated: BTreeMap<String, Stated> = stages
        .into_iter()
        .map(|(name, stage)| {
            let view = Stated {
                snapshot: snapshot(&stage.snapshot),
                counts: stage.counts,
                activity: stage.activity,
            };
            (name, view)
        })
        .collect();
    assert_eq!(stated.len(), names, "a line per stage:\n{lines:#?}");
    stated
}

fn number(text: &str) -> u32 {
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("a number: {text:?}"))
}

fn snapshot(text: &str) -> Option<u64> {
    text.strip_prefix('#')
        .map(|n| n.parse().unwrap_or_else(|_| panic!("a snapshot: {text:?}")))
}

/// What the words of an activity must say (hand-written: not the views' own wording code).
fn says(activity: &StageActivity, failures: u32, view: View) -> Vec<String> {
    let rfc = |t: chrono::DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    let wave_of = |w: &WaveOf| format!("wave {}/{}", w.wave, w.of);
    let table = matches!(view, View::StatusName);
    let mut words: Vec<String> = match activity {
        StageActivity::Pending => vec!["pending".into()],
        StageActivity::Provisioning { wave } => {
            let mut words = vec!["provisioning".to_string()];
            words.extend(wave.as_ref().map(wave_of));
            words
        }
        StageActivity::WavePause { wave, until } => {
            let mut words = vec![
                format!("{} done", wave_of(wave)),
                format!("wave {} starts", wave.wave + 1),
            ];
            words.extend(table.then(|| rfc(*until)));
            words
        }
        StageActivity::Soaking { until } => {
            let mut words = vec!["soaking, ends".to_string()];
            words.extend(table.then(|| rfc(*until)));
            words
        }
        StageActivity::HealthChecks => vec!["health checks".into()],
        StageActivity::AwaitingWindow { .. } => vec!["promotion window, opens".into()],
        StageActivity::AwaitingApproval => vec!["awaiting approval".into()],
        StageActivity::Analyzing { until } => {
            let mut words = vec!["analyzing".to_string()];
            words.extend(table.then(|| until.map(rfc)).flatten());
            words
        }
        StageActivity::AnalysisInconclusive { .. } => {
            vec!["analysis inconclusive, awaiting approval".into()]
        }
        StageActivity::Blackout {
            until,
            reason,
            wave,
        } => {
            // A live view too narrow for the end's clock time words it as a countdown ("wave
            // 2/4: blackout, 59m58s left"): between 23:00 and midnight UTC this test's blackout
            // ends the next day, and the date does not fit.
            let mut words = vec![if table { "blackout until" } else { "blackout" }.to_string()];
            words.extend(reason.as_ref().map(|r| format!("({r})")));
            words.extend(wave.as_ref().map(|w| match table {
                true => format!("{} held", wave_of(w)),
                false => wave_of(w),
            }));
            words.push(if table { rfc(*until) } else { "left".into() });
            words
        }
        StageActivity::AwaitingDependency { dependency } => vec![format!("waits for {dependency}")],
        StageActivity::Paused => vec!["paused".into()],
        StageActivity::Completed => {
            let mut words = vec!["completed".to_string()];
            match failures {
                0 => {}
                1 => words.push("1 failure tolerated".into()),
                n => words.push(format!("{n} failures tolerated")),
            }
            words
        }
        StageActivity::Skipped => vec!["skipped: no matching clusters".into()],
        StageActivity::Failed { .. } => vec!["failed:".into()],
        StageActivity::RollingBack { .. } => vec!["rolling back".into()],
        StageActivity::Restored { snapshot } => match snapshot {
            Some(to) => vec![format!("restored to #{to}")],
            None => vec!["withdrawn".into()],
        },
    };
    words.retain(|w| !w.is_empty());
    words
}

/// Every view states, per stage, the activity, counts and snapshot of `status.pipeline()`.
async fn views_agree(world: &World, moment: &str) -> PromotionStatus {
    // A moment is a stable state; read again if the status moved while the views were read.
    for _ in 0..5 {
        let before = status_of(world).await;
        let mut readings = Vec::new();
        for view in VIEWS {
            readings.push((view, view.read(world, &before).await));
        }
        if status_of(world).await != before {
            continue;
        }
        for (view, reading) in readings {
            agree(view, &reading, &before, moment);
        }
        return before;
    }
    panic!("{moment}: the status kept changing while the views were read");
}

fn agree(view: View, reading: &BTreeMap<String, Stated>, status: &PromotionStatus, moment: &str) {
    let pipeline = status.pipeline();
    let names: Vec<&str> = pipeline.iter().map(|v| v.name).collect();
    let read: Vec<&str> = reading.keys().map(String::as_str).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(read, sorted, "{moment}: {view:?} shows every stage");
    for expected in &pipeline {
        let stated = &reading[expected.name];
        let json = from_json(expected);
        let context = format!("{moment}: {view:?}, stage {}: {stated:?}", expected.name);
        if let View::Metrics = view {
            // A metric names the kind of the activity, no snapshot or counts.
            assert_eq!(stated.activity, expected.activity.kind(), "{context}");
            continue;
        }
        assert_eq!(stated.snapshot, json.snapshot, "{context}: snapshot");
        assert_eq!(stated.counts, json.counts, "{context}: counts");
        if let View::StatusJson = view {
            assert_eq!(stated.activity, json.activity, "{context}");
            continue;
        }
        let failures = json.counts.map_or(0, |c| c.2);
        for words in says(expected.activity, failures, view) {
            assert!(stated.activity.contains(&words), "{context}: {words:?}");
        }
        for never in ["Successfully provisioned", "tolerated"] {
            let tolerated = failures > 0 && *expected.activity == StageActivity::Completed;
            if never == "tolerated" && tolerated {
                continue;
            }
            assert!(!stated.activity.contains(never), "{context}: {never:?}");
        }
    }
}

async fn status_of(world: &World) -> PromotionStatus {
    written_status(world).await.expect("a status")
}

/// The status, once the controller has written one.
async fn written_status(world: &World) -> Option<PromotionStatus> {
    let value = world.status(WEB).await?;
    Some(PromotionStatus::deserialize(&value).expect("a status the engine wrote"))
}

/// Waits until `stage`'s activity satisfies `check`.
async fn activity_where(world: &World, what: &str, stage: &str, check: fn(&StageActivity) -> bool) {
    world
        .eventually(what, || async {
            let status = written_status(world).await?;
            let pipeline = status.pipeline();
            pipeline
                .iter()
                .find(|v| v.name == stage)
                .filter(|v| check(v.activity))
                .map(|_| ())
        })
        .await;
}

fn stage_of<'s>(pipeline: &'s [StageView<'s>], name: &str) -> &'s StageView<'s> {
    pipeline
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no stage {name}"))
}

/// (provisioned, members, failed + timed out, later waves) of `stage`.
fn counts_of(status: &PromotionStatus, stage: &str) -> (u32, u32, u32, u32) {
    let counts = &status.stage(stage).expect("started").counts;
    (
        counts.provisioned,
        counts.members,
        counts.failed + counts.timed_out,
        counts.later_waves,
    )
}

fn wave(wave: u32) -> WaveOf {
    WaveOf { wave, of: 4 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_view_states_what_the_engine_says_each_stage_does() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    repo.write("policy.yaml", &policy("1h", None));
    repo.commit("web 1.0.0, prod in waves");
    let world = World::start(
        repo,
        &seven_in_prod()
            .failure("*", &[("flaky", "yes")], "Helm", FLAKY)
            .to_yaml(),
    )
    .await;

    // 1. The canary is provisioned; the next wave waits an hour. One of seven, not one of one.
    activity_where(
        &world,
        "a pause after the canary",
        "prod",
        |a| matches!(a, StageActivity::WavePause { wave: w, .. } if w.wave == 1),
    )
    .await;
    let status = views_agree(&world, "after the canary").await;
    assert_eq!(counts_of(&status, "prod"), (1, 7, 0, 6));
    assert_eq!(
        *stage_of(&status.pipeline(), "dev").activity,
        StageActivity::Completed
    );

    // 2. A blackout holds the second wave.
    world
        .repo
        .write("policy.yaml", &policy("1s", Some("year-end freeze")));
    world.repo.commit("a freeze");
    world.poke();
    activity_where(
        &world,
        "the second wave held by the blackout",
        "prod",
        |a| matches!(a, StageActivity::Blackout { wave: Some(w), .. } if *w == wave(2)),
    )
    .await;
    let status = views_agree(&world, "a blackout holds wave 2").await;
    assert_eq!(counts_of(&status, "prod"), (1, 7, 0, 6));
    let events = world.events_of(WEB).await;
    assert!(
        events
            .iter()
            .any(|(r, n)| r == "Blackout" && n.contains("wave 2/4")),
        "{events:?}"
    );

    // 3. The freeze is lifted: the waves run; prod-3 fails within the budget; prod completes.
    world.repo.write("policy.yaml", &policy("1s", None));
    world.repo.commit("the freeze is over");
    world.poke();
    world.wait_phase(WEB, "Completed").await;
    let status = views_agree(&world, "completed, one failure tolerated").await;
    assert_eq!(counts_of(&status, "prod"), (6, 7, 1, 0));

    // 4. Snapshot #2: past the canary, the second wave provisions with prod-3 failed (within
    // the budget) and prod-2 slow.
    world
        .emulator
        .set_latency("fleet/prod-2", Duration::from_secs(3600))
        .expect("prod-2");
    world.repo.write("web.yaml", &web("2.0.0"));
    world.repo.commit("web 2.0.0");
    world.poke();
    world
        .eventually(
            "#2's second wave provisioning with prod-3 failed",
            || async {
                let status = written_status(&world).await?;
                let prod = status.stage("prod").filter(|p| p.snapshot_index == 2)?;
                let provisioning = prod.activity
                    == StageActivity::Provisioning {
                        wave: Some(wave(2)),
                    };
                (provisioning && prod.counts.failed == 1).then_some(())
            },
        )
        .await;
    let status = views_agree(&world, "wave 2 provisioning, one failure tolerated").await;
    assert_eq!(counts_of(&status, "prod"), (1, 7, 1, 4));

    // 5. The canary's cluster breaks too: over the budget, the run is rolled back; dev and prod
    // run #1 again.
    world
        .emulator
        .set_latency("fleet/prod-2", Duration::from_millis(50))
        .expect("prod-2");
    let rules = Fleet::parse(
        &fleet()
            .failure("2.0.0", &[("canary", "yes")], "Helm", CANARY_BREAKS)
            .failure("2.0.0", &[("flaky", "yes")], "Helm", FLAKY)
            .to_yaml(),
        Path::new("failures.yaml"),
    )
    .expect("fleet")
    .failures;
    world.emulator.set_failure_rules(rules);
    world.wait_phase(WEB, "RolledBack").await;
    let status = views_agree(&world, "rolled back").await;
    let shown: Vec<(&str, StageActivity, Option<u64>)> = status
        .pipeline()
        .iter()
        .map(|v| (v.name, v.activity.clone(), v.snapshot))
        .collect();
    let restored = StageActivity::Restored { snapshot: Some(1) };
    assert_eq!(
        shown,
        [
            ("dev", restored.clone(), Some(1)),
            ("prod", restored, Some(1))
        ]
    );
    // The web page lists the failed run's clusters with their failures, and no cluster of the
    // rejected run as still provisioning (the CLI hid them; the page listed them).
    let addr = serve_in_process(&world, None).await.to_string();
    let page = page_body(&addr, &format!("/ui/promotions/{WEB}"))
        .await
        .expect("the promotion page");
    let clusters = page
        .split("id=\"clusters\"")
        .nth(1)
        .and_then(|rest| rest.split("</section>").next())
        .expect("the clusters section");
    assert!(
        !clusters.contains("data-state=\"Provisioning\""),
        "a restored stage lists the rejected run's clusters as provisioning: {clusters}"
    );
    assert!(clusters.contains("data-state=\"Failed\""), "{clusters}");
}

//! Property (issue #47, "one projection"): random rollouts on a fake clock (waves, blackouts on
//! starts and waves, failures, rollbacks fast and staged, retries, paused clusters and a paused
//! promotion, a dependency) and, after every step, every view states per stage what the engine's
//! projection (`PromotionStatus::pipeline()`) says: the activity, the snapshot, the counts and the
//! wave; the overview names the projection's current stage; and the timeline has a bar of the
//! stage's activity over the instant shown.
//!
//! The views read: `status` (overview table), `status NAME` (stage table), `status NAME -o json`
//! (its `pipeline`), the live view's frame, the metric `tollgate_stage_activity`, the web view's
//! pipeline fragment (`data-stage`/`data-activity`) and the timeline's SVG bars. The engine runs
//! in `tollgate_engine::testing::World`, which plays Sveltos.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use serde_json::{Value, json};
use tollgate::cli::status::{self, Output};
use tollgate::metrics::Metrics;
use tollgate::views::timeline::{Period, svg_of};
use tollgate_engine::activity::{StageActivity, WaveOf};
use tollgate_engine::pipeline::StageView;
use tollgate_engine::testing::{self, World};
use tollgate_engine::{Desired, PromotionStatus};
use tollgate_manifest::model::ClusterPromotion;
use tollgate_manifest::snapshot::{ApprovalEvent, ApprovalKind, Snapshot};

const P: &str = "demo";

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-12-06T10:00:00Z")
        .expect("a time")
        .with_timezone(&Utc)
}

/// The random pipeline and policy of one case.
#[derive(Clone, Debug)]
struct Setup {
    dev_delay: bool,
    staging_manual: bool,
    policy: Option<PolicySetup>,
}

#[derive(Clone, Debug)]
struct PolicySetup {
    max_failures: u32,
    rollback: bool,
    staged: bool,
    /// prod in waves of this size, with a canary and a pause between waves.
    waves: Option<(u32, bool, bool)>,
    /// A blackout from `t0 + .0` minutes for `.1` minutes.
    blackout: Option<(i64, i64)>,
    skip_paused: bool,
}

#[derive(Clone, Debug)]
enum Event {
    Sveltos,
    Clock(u32),
    Step,
    Commit,
    Revert,
    Fail(usize),
    PauseCluster(usize),
    Approve,
    Retry,
    PausePromotion,
    Depend,
}

fn setup() -> impl Strategy<Value = Setup> {
    let waves = prop::option::of((1u32..=2, any::<bool>(), any::<bool>()));
    let blackout = prop::option::of((0i64..60, 5i64..40));
    let policy = (
        0u32..2,
        any::<bool>(),
        any::<bool>(),
        waves,
        blackout,
        any::<bool>(),
    )
        .prop_map(
            |(max_failures, rollback, staged, waves, blackout, skip_paused)| PolicySetup {
                max_failures,
                rollback,
                staged,
                waves,
                blackout,
                skip_paused,
            },
        );
    (
        any::<bool>(),
        any::<bool>(),
        prop::option::weighted(0.85, policy),
    )
        .prop_map(|(dev_delay, staging_manual, policy)| Setup {
            dev_delay,
            staging_manual,
            policy,
        })
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        8 => Just(Event::Sveltos),
        4 => (0u32..900).prop_map(Event::Clock),
        10 => Just(Event::Step),
        1 => Just(Event::Commit),
        1 => Just(Event::Revert),
        2 => (0usize..8).prop_map(Event::Fail),
        1 => (0usize..8).prop_map(Event::PauseCluster),
        2 => Just(Event::Approve),
        1 => Just(Event::Retry),
        1 => Just(Event::PausePromotion),
        1 => Just(Event::Depend),
    ]
}

fn policy(setup: &PolicySetup) -> tollgate_model::policy::RolloutPolicy {
    let mut spec = json!({
        "maxFailures": setup.max_failures,
        "onFailure": if setup.rollback { "Rollback" } else { "Halt" },
        "rollback": {"strategy": if setup.staged { "Staged" } else { "Fast" }},
    });
    let mut prod = json!({});
    if let Some((size, canary, pause)) = setup.waves {
        let mut waves = json!({"sortingLabelKey": "order", "size": size});
        if canary {
            waves["canary"] = json!(1);
        }
        if pause {
            waves["pause"] = json!("2m");
        }
        prod["waves"] = waves;
    }
    if setup.skip_paused {
        prod["pausedClusters"] = json!("Skip");
    }
    spec["stages"] = json!({ "prod": prod });
    if let Some((from, minutes)) = setup.blackout {
        let at = |t: DateTime<Utc>| t.format("%Y-%m-%dT%H:%M:%S").to_string();
        let from = t0() + Duration::minutes(from);
        spec["blackouts"] = json!([{
            "from": at(from), "to": at(from + Duration::minutes(minutes)), "reason": "freeze"
        }]);
    }
    serde_json::from_value(json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
        "metadata": {"name": "p"}, "spec": spec,
    }))
    .expect("a valid policy")
}

fn promotion(setup: &Setup, version: u32) -> ClusterPromotion {
    let stage = |name: &str, trigger: Value| json!({"name": name, "clusterSelector": {"matchLabels": {"env": name}}, "trigger": trigger});
    let dev = match setup.dev_delay {
        true => json!({"auto": {"delay": "5m"}}),
        false => json!({"auto": {}}),
    };
    let staging = match setup.staging_manual {
        true => json!({"manual": {}}),
        false => json!({"auto": {}}),
    };
    testing::promotion(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": P},
        "spec": {
            "profileSpec": {
                "syncMode": "Continuous",
                "helmCharts": [{
                    "repositoryURL": "https://charts.example/", "repositoryName": "web",
                    "chartName": "web/web", "chartVersion": format!("1.{version}.0"),
                    "releaseName": "web", "releaseNamespace": "web", "helmChartAction": "Install"
                }]
            },
            "stages": [stage("dev", dev), stage("staging", staging), stage("prod", json!({"auto": {}}))]
        }
    }))
}

/// The world, the snapshot git shows, approvals, and what the case toggled.
struct Rollout {
    world: World,
    setup: Setup,
    snapshot: Snapshot,
    approvals: Vec<ApprovalEvent>,
    seq: u64,
    version: u32,
    paused: bool,
    retries: u64,
}

impl Rollout {
    fn new(setup: Setup) -> Self {
        let mut world = World::new(t0());
        for env in ["dev", "staging"] {
            for i in 1..=2 {
                world.add_cluster(&format!("{env}-{i}"), &[("env", env)]);
            }
        }
        for i in 1..=4 {
            let order = i.to_string();
            world.add_cluster(&format!("prod-{i}"), &[("env", "prod"), ("order", &order)]);
        }
        world.policy = setup.policy.as_ref().map(policy);
        let snapshot = testing::snapshot(promotion(&setup, 0), 1, testing::commit(10));
        world.history.push(snapshot.clone());
        Rollout {
            world,
            setup,
            snapshot,
            approvals: Vec::new(),
            seq: 10,
            version: 0,
            paused: false,
            retries: 0,
        }
    }

    fn step(&mut self) -> PromotionStatus {
        let desired = Desired::Snapshot {
            current: &self.snapshot,
            invalid: None,
        };
        self.world.step(desired, &self.approvals).status
    }

    /// New content (`version`) committed: content equal to an earlier snapshot's names it.
    fn commit(&mut self, version: u32) {
        self.seq += 1;
        let index = self.snapshot.index + 1;
        let mut snapshot = testing::snapshot(
            promotion(&self.setup, version),
            index,
            testing::commit(self.seq),
        );
        snapshot.same_content_as = self
            .world
            .history
            .iter()
            .find(|s| s.hashes == snapshot.hashes)
            .map(|s| s.index);
        self.snapshot = snapshot;
        self.world.history.push(self.snapshot.clone());
        if self.paused {
            self.annotate("tollgate.dev/paused", Some("true".into()));
        }
    }

    fn annotate(&mut self, key: &str, value: Option<String>) {
        let mut promotion = (*self.snapshot.promotion).clone();
        match value {
            Some(value) => promotion.metadata.annotations.insert(key.into(), value),
            None => promotion.metadata.annotations.remove(key),
        };
        self.snapshot.promotion = Arc::new(promotion);
    }

    fn snapshot_id(&self) -> String {
        self.snapshot.hashes.short().to_string()
    }

    /// Approves the stage awaiting approval (or staging) for the snapshot git shows.
    fn approve(&mut self) {
        let stage = self
            .world
            .status
            .as_ref()
            .and_then(|s| {
                s.pipeline()
                    .iter()
                    .find(|v| matches!(v.activity, StageActivity::AwaitingApproval))
                    .map(|v| v.name.to_string())
            })
            .unwrap_or_else(|| "staging".to_string());
        self.seq += 1;
        let id = self.snapshot_id();
        self.annotate(&format!("approve.tollgate.dev/{stage}"), Some(id.clone()));
        let kind = ApprovalKind::Annotation { value: id };
        let commit = testing::commit(self.seq);
        self.approvals.push(testing::approval(&stage, kind, commit));
    }

    /// Retries the failed stage with the next counter.
    fn retry(&mut self) {
        let failed = self
            .world
            .status
            .as_ref()
            .and_then(|s| s.failure.as_deref())
            .map(|f| f.stage.clone());
        let Some(stage) = failed else {
            return;
        };
        self.retries += 1;
        let value = format!("{}/{}", self.snapshot_id(), self.retries);
        self.annotate(&format!("retry.tollgate.dev/{stage}"), Some(value));
    }

    fn cluster_name(&self, i: usize) -> String {
        let clusters = &self.world.observed.clusters;
        clusters[i % clusters.len()].name.clone()
    }

    fn apply(&mut self, event: Event) -> Option<PromotionStatus> {
        match event {
            Event::Sveltos => self.world.sveltos(),
            Event::Clock(seconds) => self.world.advance(Duration::seconds(i64::from(seconds))),
            Event::Step => return Some(self.step()),
            Event::Commit => {
                self.version += 1;
                self.commit(self.version);
            }
            Event::Revert => {
                let back = self.version.saturating_sub(1);
                self.version = back;
                self.commit(back);
            }
            Event::Fail(i) => {
                let cluster = self.cluster_name(i);
                if !self.world.failing_clusters.remove(&cluster) {
                    self.world.failing_clusters.insert(cluster);
                }
            }
            Event::PauseCluster(i) => {
                let clusters = Arc::make_mut(&mut self.world.observed.clusters);
                let len = clusters.len();
                let cluster = &mut clusters[i % len];
                cluster.paused = !cluster.paused;
            }
            Event::Approve => self.approve(),
            Event::Retry => self.retry(),
            Event::PausePromotion => {
                self.paused = !self.paused;
                let value = self.paused.then(|| "true".to_string());
                self.annotate("tollgate.dev/paused", value);
            }
            Event::Depend => {
                // Depends on a promotion whose stages stand where this one's stood now.
                self.world.dependencies = match self.world.dependencies.is_empty() {
                    true => vec![(
                        "infra".to_string(),
                        vec!["dev".into(), "staging".into(), "prod".into()],
                        self.world.status.clone(),
                    )],
                    false => Vec::new(),
                };
            }
        }
        None
    }
}

/// What one view states about one stage: `None` where the view does not show it.
#[derive(Clone, Debug, Default, PartialEq)]
struct Stated {
    kind: Option<String>,
    snapshot: Option<Option<u64>>,
    /// (provisioned, members, failed + timed out).
    counts: Option<Option<(u32, u32, u32)>>,
    wave: Option<Option<(u32, u32)>>,
    /// The snapshot a rollback restores the stage to, or restored it to (`None`: withdrawn).
    target: Option<Option<u64>>,
}

/// What the projection says of a stage, in the terms a view can state.
fn projected(view: &StageView<'_>) -> Stated {
    Stated {
        kind: Some(view.activity.kind().to_string()),
        snapshot: Some(view.snapshot),
        counts: Some(view.shown_counts().map(|c| {
            (
                c.provisioned,
                tollgate::views::stage_words::members(c),
                c.failed + c.timed_out,
            )
        })),
        wave: Some(view.activity.wave().map(|w| (w.wave, w.of))),
        target: Some(rollback_target(view.activity)),
    }
}

/// Where a rollback takes the stage, for a stage rolling back or restored.
fn rollback_target(activity: &StageActivity) -> Option<u64> {
    match activity {
        StageActivity::RollingBack { snapshot } | StageActivity::Restored { snapshot } => *snapshot,
        _ => None,
    }
}

/// Whether `read` agrees with `expected` where the view states something.
fn agrees(read: &Stated, expected: &Stated) -> bool {
    fn same<T: PartialEq>(read: &Option<T>, expected: &Option<T>) -> bool {
        read.as_ref()
            .is_none_or(|r| expected.as_ref().is_some_and(|e| e == r))
    }
    same(&read.kind, &expected.kind)
        && same(&read.snapshot, &expected.snapshot)
        && same(&read.counts, &expected.counts)
        && same(&read.wave, &expected.wave)
        && same(&read.target, &expected.target)
}

/// The kind an activity's words name (hand-written from the words users read, not the views'
/// wording code), with the wave they name.
fn kind_of_words(words: &str) -> (String, Option<(u32, u32)>) {
    let wave = wave_in(words);
    let kind = [
        ("pending", "Pending"),
        ("skipped", "Skipped"),
        ("failed:", "Failed"),
        ("rolling back", "RollingBack"),
        ("restored", "Restored"),
        ("completed", "Completed"),
        ("soaking", "Soaking"),
        ("waiting for health checks", "HealthChecks"),
        ("awaiting window", "AwaitingWindow"),
        ("awaiting the promotion window", "AwaitingWindow"),
        ("analysis inconclusive", "AnalysisInconclusive"),
        ("awaiting approval", "AwaitingApproval"),
        ("analyzing", "Analyzing"),
        ("waits for", "AwaitingDependency"),
        ("paused", "Paused"),
    ]
    .iter()
    .find(|(prefix, _)| words.starts_with(prefix))
    .map(|(_, kind)| kind.to_string());
    let kind = kind.unwrap_or_else(|| {
        if words.contains("blackout") {
            "Blackout".into()
        } else if words.contains(" done, ") {
            "WavePause".into()
        } else if words.contains("provisioning") {
            "Provisioning".into()
        } else {
            format!("unknown words {words:?}")
        }
    });
    (kind, wave)
}

/// The rollback target the words name: `rolling back to #2`, `restored to #2`, or a withdrawal.
fn target_in(words: &str) -> Option<Option<u64>> {
    if !(words.starts_with("rolling back") || words.starts_with("restored")) {
        return None;
    }
    let number = words.split_once(" to #").and_then(|(_, rest)| {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    });
    Some(number)
}

/// `wave 2/4` at the start of the words.
fn wave_in(words: &str) -> Option<(u32, u32)> {
    let rest = words.strip_prefix("wave ")?;
    let end = rest.find([':', ',', ' '])?;
    let (n, of) = rest[..end].split_once('/')?;
    Some((n.parse().ok()?, of.parse().ok()?))
}

fn object(status: &PromotionStatus) -> kube::api::DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "GitPromotion",
        "metadata": {"name": P}, "status": status,
    }))
    .expect("a GitPromotion")
}

/// The body rows of the first box table in `text`, by column name (a column no row fills is
/// left out of the table), cells wrapped over lines joined again.
fn first_table(text: &str) -> Vec<BTreeMap<String, String>> {
    let cells_of = |line: &str| -> Vec<String> {
        line.trim_matches('│')
            .split('┆')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let mut header: Vec<String> = Vec::new();
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut in_body = false;
    for line in text.lines() {
        if line.starts_with('╞') {
            in_body = true;
            continue;
        }
        if !in_body {
            if line.starts_with('│') && header.is_empty() {
                header = cells_of(line);
            }
            continue;
        }
        if line.starts_with('└') {
            break;
        }
        let cells = cells_of(line);
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
    rows.into_iter()
        .map(|row| header.iter().cloned().zip(row).collect())
        .collect()
}

fn snapshot_cell(cell: &str) -> Option<u64> {
    cell.strip_prefix('#').and_then(|n| n.parse().ok())
}

/// "6/7 provisioned, 1 failed, 1 timed out".
fn counts_cell(cell: &str) -> Option<(u32, u32, u32)> {
    if cell.is_empty() {
        return None;
    }
    let mut parts = cell.split(", ");
    let (provisioned, members) = parts
        .next()?
        .trim_end_matches(" provisioned")
        .split_once('/')?;
    let failures = parts
        .filter_map(|p| p.split_once(' ')?.0.parse::<u32>().ok())
        .sum();
    Some((provisioned.parse().ok()?, members.parse().ok()?, failures))
}

/// `status NAME`: the stage table, wide enough not to wrap.
fn status_name(status: &PromotionStatus) -> BTreeMap<String, Stated> {
    let text = status::render(&[object(status)], true, Output::Table, 400).expect("renders");
    let cell =
        |row: &BTreeMap<String, String>, name: &str| row.get(name).cloned().unwrap_or_default();
    first_table(&text)
        .into_iter()
        .filter(|row| row.contains_key("STAGE") && row.contains_key("ACTIVITY"))
        .map(|row| {
            let activity = cell(&row, "ACTIVITY");
            let (kind, wave) = kind_of_words(&activity);
            let stated = Stated {
                kind: Some(kind),
                snapshot: Some(snapshot_cell(&cell(&row, "SNAPSHOT"))),
                counts: Some(counts_cell(&cell(&row, "CLUSTERS"))),
                wave: Some(wave),
                target: target_in(&activity),
            };
            (cell(&row, "STAGE"), stated)
        })
        .collect()
}

/// `status NAME -o json`: the projection it carries, `pipeline[]`.
fn status_json(status: &PromotionStatus) -> BTreeMap<String, Stated> {
    let text = status::render(&[object(status)], true, Output::Json, 100).expect("renders");
    let document: Value = serde_json::from_str(&text).expect("JSON");
    let stages = document["pipeline"].as_array().cloned().unwrap_or_default();
    stages
        .iter()
        .map(|stage| {
            let activity: StageActivity =
                serde_json::from_value(stage["activity"].clone()).expect("an activity");
            let counts = stage.get("counts").filter(|c| !c.is_null()).map(|c| {
                let n = |key: &str| u32::try_from(c[key].as_u64().unwrap_or(0)).unwrap_or(0);
                let members = match n("members") {
                    0 => n("matchingClusters"),
                    m => m,
                };
                (n("provisioned"), members, n("failed") + n("timedOut"))
            });
            let stated = Stated {
                kind: Some(activity.kind().to_string()),
                snapshot: Some(stage["snapshot"].as_u64()),
                counts: Some(counts),
                wave: Some(activity.wave().map(|w: WaveOf| (w.wave, w.of))),
                target: Some(rollback_target(&activity)),
            };
            (
                stage["stage"].as_str().unwrap_or_default().to_string(),
                stated,
            )
        })
        .collect()
}

/// The live view's stage lines (fixed columns: name, bar, counts, ✗failures, snapshot, words).
fn live_frame(status: &PromotionStatus, now: DateTime<Utc>) -> BTreeMap<String, Stated> {
    let (_, stages) = crate::support::live_frame::of(P, status, now, 200);
    stages
        .into_iter()
        .map(|(name, stage)| {
            let (kind, wave) = kind_of_words(&stage.activity);
            let view = Stated {
                kind: Some(kind),
                snapshot: Some(snapshot_cell(&stage.snapshot)),
                counts: Some(stage.counts),
                wave: Some(wave),
                target: target_in(&stage.activity),
            };
            (name, view)
        })
        .collect()
}

/// `tollgate_stage_activity{promotion,stage,activity}`: the kind only.
fn metric(status: &PromotionStatus, now: DateTime<Utc>) -> BTreeMap<String, Stated> {
    let metrics = Metrics::new();
    metrics.observe_promotion(P, status, now);
    let text = metrics.encode_at(now);
    let prefix = format!("tollgate_stage_activity{{promotion=\"{P}\",stage=\"");
    text.lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .filter_map(|rest| {
            let (stage, rest) = rest.split_once("\",activity=\"")?;
            let (activity, _) = rest.split_once('"')?;
            let stated = Stated {
                kind: Some(activity.to_string()),
                ..Stated::default()
            };
            Some((stage.to_string(), stated))
        })
        .collect()
}

/// The web view's pipeline fragment: `data-stage`, `data-activity`, "runs snapshot #N".
fn web(status: &PromotionStatus, now: DateTime<Utc>) -> BTreeMap<String, Stated> {
    let html = tollgate::web::pipeline_of(status, now).into_string();
    html.split("data-stage=\"")
        .skip(1)
        .filter_map(|column| {
            let (stage, rest) = column.split_once('"')?;
            let activity = rest.split_once("data-activity=\"")?.1.split_once('"')?.0;
            let snapshot = rest
                .split_once("runs snapshot #")
                .and_then(|(_, n)| n.split_once('<')?.0.parse().ok());
            let stated = Stated {
                kind: Some(activity.to_string()),
                snapshot: Some(snapshot),
                ..Stated::default()
            };
            Some((stage.to_string(), stated))
        })
        .collect()
}

/// The bar class the timeline draws for an activity (its legend), `None`: no bar.
fn bar_class(activity: &StageActivity) -> Option<&'static str> {
    Some(match activity {
        StageActivity::Provisioning { .. } => "provisioning",
        StageActivity::WavePause { .. } => "wave-pause",
        StageActivity::Soaking { .. } => "soak",
        StageActivity::HealthChecks => "health-checks",
        StageActivity::Analyzing { .. } => "analysis",
        StageActivity::AwaitingWindow { .. } => "window",
        StageActivity::AwaitingApproval | StageActivity::AnalysisInconclusive { .. } => "approval",
        StageActivity::Blackout { .. } => "blackout",
        StageActivity::Paused => "paused",
        StageActivity::Failed { .. } => "failed",
        StageActivity::RollingBack { .. } => "rollback",
        _ => return None,
    })
}

/// The timeline, a second after the step (the status unchanged): every stage doing something
/// the legend draws has a bar of that kind over that instant, of the wave it is about.
fn timeline_covers(status: &PromotionStatus, now: DateTime<Utc>) -> Result<(), String> {
    let at = now + Duration::seconds(1);
    let period = Period {
        text: "1d".into(),
        length: std::time::Duration::from_secs(86_400),
    };
    let svg = svg_of(P, Some(status), &period, at);
    let document = roxmltree::Document::parse(&svg).map_err(|e| e.to_string())?;
    let stamp = |t: &str| {
        DateTime::parse_from_rfc3339(t)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    };
    for view in status.pipeline() {
        let Some(class) = bar_class(view.activity) else {
            continue;
        };
        let wave = view.activity.wave().map(|w| format!("{}/{}", w.wave, w.of));
        let target = match view.activity {
            StageActivity::RollingBack { snapshot } => snapshot.map(|s| s.to_string()),
            _ => None,
        };
        let covered = document.descendants().any(|node| {
            let classes: Vec<&str> = node.attribute("class").unwrap_or("").split(' ').collect();
            classes.first() == Some(&"bar")
                && classes.contains(&class)
                && node.attribute("data-stage") == Some(view.name)
                && node.attribute("data-wave").map(str::to_string) == wave
                && (target.is_none() || node.attribute("data-restored-to") == target.as_deref())
                && node
                    .attribute("data-start")
                    .and_then(stamp)
                    .is_some_and(|s| s <= at)
                && node
                    .attribute("data-end")
                    .and_then(stamp)
                    .is_some_and(|e| e >= at)
        });
        if !covered {
            return Err(format!(
                "timeline: no {class} bar (wave {wave:?}) of {} over {at}",
                view.name
            ));
        }
    }
    Ok(())
}

/// The overview's STAGE column names the projection's current stage.
fn overview_stage(status: &PromotionStatus) -> Result<(), String> {
    let text = status::render(&[object(status)], false, Output::Table, 400).expect("renders");
    let rows = first_table(&text);
    let shown = rows
        .first()
        .and_then(|r| r.get("STAGE"))
        .cloned()
        .unwrap_or_default();
    let expected = status.current_stage().unwrap_or_default();
    match shown == expected {
        true => Ok(()),
        false => Err(format!("overview STAGE {shown:?}, projection {expected:?}")),
    }
}

/// Every view agrees with the projection of `status` at `now`.
fn views_agree(status: &PromotionStatus, now: DateTime<Utc>) -> Result<(), String> {
    let pipeline = status.pipeline();
    let expected: BTreeMap<String, Stated> = pipeline
        .iter()
        .map(|v| (v.name.to_string(), projected(v)))
        .collect();
    let readings = [
        ("status NAME", status_name(status)),
        ("status -o json", status_json(status)),
        ("live view", live_frame(status, now)),
        ("tollgate_stage_activity", metric(status, now)),
        ("web pipeline", web(status, now)),
    ];
    for (view, read) in &readings {
        if read.keys().collect::<Vec<_>>() != expected.keys().collect::<Vec<_>>() {
            return Err(format!(
                "{view}: stages {:?}, projection {:?}",
                read.keys(),
                expected.keys()
            ));
        }
        for (stage, stated) in read {
            if !agrees(stated, &expected[stage]) {
                return Err(format!(
                    "{view}: stage {stage} states {stated:?}, projection {:?}",
                    expected[stage]
                ));
            }
        }
    }
    overview_stage(status)?;
    timeline_covers(status, now)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn every_view_states_the_projection_after_every_step(
        setup in setup(),
        events in prop::collection::vec(event(), 1..120),
    ) {
        let mut rollout = Rollout::new(setup);
        for event in events {
            if let Some(status) = rollout.apply(event) {
                let now = rollout.world.now;
                if let Err(why) = views_agree(&status, now) {
                    let json = serde_json::to_string(&status).unwrap_or_default();
                    prop_assert!(false, "{why}\nat {now}, status {json}");
                }
            }
        }
    }
}

//! End to end (issue #45): at-least-once notification delivery past the bound of the record of
//! notices owed. A receiver down for a whole rollout of 17 clusters (16 in waves of 1: more
//! notices than the record keeps one by one) gets, once it is back, every notice the record still
//! holds and each stage's latest state, each once, never an older state after a newer one; what
//! was folded away is counted in `tollgate_notifications_dropped_total`, exactly.

use crate::support;

use std::collections::BTreeSet;

use support::receiver::{Answer, Receiver};
use support::{TestRepo, World};
use tempfile::TempDir;
use tollgate_fixtures::{cluster, fleet, policy, promotion, stage};

const WEB: &str = "web";
/// What the record keeps one by one (`docs/notifications.md`, delivery).
const FOLD_ABOVE: usize = 32;

/// One notice a receiver accepted: (id, event, stage).
type Told = (String, String, String);

/// What `receiver` accepted, in order.
fn told(receiver: &Receiver) -> Vec<Told> {
    receiver
        .got()
        .iter()
        .filter(|r| r.answered.is_some_and(|code| code.is_success()))
        .map(|r| {
            let body = r.json();
            let field = |name: &str| body[name].as_str().unwrap_or_default().to_string();
            (field("id"), field("event"), field("stage"))
        })
        .collect()
}

const EVENTS: &[&str] = &[
    "StageStarted",
    "StageCompleted",
    "StageFailed",
    "WaveStarted",
    "WaveCompleted",
    "Completed",
];

fn secret(dir: &TempDir, name: &str, url: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, format!("{url}\nhmac-key\n")).expect("secret");
    path.to_str().expect("utf-8").to_string()
}

/// `tollgate_notifications_dropped_total{endpoint="<endpoint>"}`, 0 when absent.
fn dropped(world: &World, endpoint: &str) -> usize {
    let series = format!("tollgate_notifications_dropped_total{{endpoint=\"{endpoint}\"}} ");
    world
        .metrics
        .encode()
        .lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .map_or(0, |v| v.trim().parse().expect("a count"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_down_for_a_whole_waved_rollout_gets_each_stages_latest_state_once() {
    // Two generic webhook receivers: one accepts everything, one answers 503 until it is up.
    let (up_receiver, down_receiver) = (
        Receiver::start(Answer::Ok).await,
        Receiver::start(Answer::WhileUp).await,
    );
    let secrets = tempfile::tempdir().expect("secrets dir");
    let down = secret(&secrets, "down", &down_receiver.url("/down"));
    let up = secret(&secrets, "up", &up_receiver.url("/up"));
    let yaml = policy("fleet-defaults")
        .notify("down", "webhook", &down, EVENTS)
        .notify("up", "webhook", &up, EVENTS)
        .to_yaml()
        .replace(
            "spec:\n",
            "spec:\n  stages:\n    prod:\n      waves:\n        size: 1\n",
        );
    let repo = TestRepo::new();
    let web = promotion(WEB)
        .chart("web", "1.0.0")
        .stage(stage("dev").selector("env", "dev").auto())
        .stage(stage("prod").selector("env", "prod").auto());
    repo.write("web.yaml", &web.to_yaml());
    repo.write("policy.yaml", &yaml);
    repo.commit("web 1.0.0, prod in 16 waves of 1");
    let mut clusters = fleet().default_latency("20ms");
    clusters = clusters.cluster(cluster("dev-1").ns("fleet").label("env", "dev"));
    for i in 1..=16 {
        let name = format!("prod-{i}");
        clusters = clusters.cluster(cluster(&name).ns("fleet").label("env", "prod"));
    }
    let world = World::start(repo, &clusters.to_yaml()).await;
    world.wait_phase(WEB, "Completed").await;
    let all = world
        .eventually("every notice told to the receiver that is up", || async {
            let told = told(&up_receiver);
            told.iter().any(|t| t.1 == "Completed").then_some(told)
        })
        .await;
    assert!(
        all.len() > FOLD_ABOVE,
        "more notices than the record keeps one by one: {all:?}"
    );
    assert!(told(&down_receiver).is_empty(), "the receiver was down");

    down_receiver.set_up(true);
    let got = world
        .eventually(
            "the rollout's last notice, once the receiver is back",
            || async {
                let told = told(&down_receiver);
                told.iter().any(|t| t.1 == "Completed").then_some(told)
            },
        )
        .await;

    let ids: Vec<&String> = got.iter().map(|t| &t.0).collect();
    let unique: BTreeSet<&String> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "each notice once: {got:#?}");
    // Only notices that happened (the up receiver's), and per stage (what a webhook holds one
    // state of) in the order they happened: never an older state after a newer one.
    let order = |told: &Told| all.iter().position(|a| a.0 == told.0);
    let positions: Vec<Option<usize>> = got.iter().map(order).collect();
    assert!(
        positions.iter().all(Option::is_some),
        "only notices that happened: {got:#?} at {positions:?} of {all:#?}"
    );
    for stage in ["dev", "prod"] {
        let of_stage: Vec<Option<usize>> = got
            .iter()
            .zip(&positions)
            .filter(|(told, _)| told.2 == stage)
            .map(|(_, position)| *position)
            .collect();
        assert!(
            of_stage.is_sorted(),
            "stage {stage}'s states in their order: {got:#?} at {positions:?} of {all:#?}"
        );
    }
    for stage in ["dev", "prod"] {
        let latest = all.iter().rev().find(|a| a.2 == stage).expect("a notice");
        assert!(
            got.contains(latest),
            "stage {stage}'s latest state: {got:#?}"
        );
    }
    assert_eq!(
        got.len(),
        FOLD_ABOVE,
        "every notice the record kept: {got:#?}"
    );
    assert_eq!(
        got.len() + dropped(&world, "down"),
        all.len(),
        "each notice not told is counted dropped, once"
    );
    assert_eq!(dropped(&world, "up"), 0);
}

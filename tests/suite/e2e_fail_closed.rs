//! End to end, fail closed (issue #29): a rollback is only back to content that ran and was good,
//! and a RolloutPolicy that cannot be resolved holds new snapshots instead of rolling them out
//! with no policy. Through the controller loop, against the emulator over HTTP, with real git
//! repositories.

use crate::support;

use serde_json::Value;
use support::{TestRepo, World};
use tollgate_fixtures::{FleetBuilder, fleet_of_envs, policy, promotion, stage};

const WEB: &str = "web";
const HELM_ERROR: &str = "chart web 2.x: image pull backoff";

fn web(chart: &str) -> String {
    web_with(chart, None)
}

fn web_with(chart: &str, policy_name: Option<&str>) -> String {
    let mut p = promotion(WEB).chart("web", chart);
    if let Some(name) = policy_name {
        p = p.annotation("tollgate.dev/policy", name);
    }
    for env in ["dev", "staging", "prod"] {
        p = p.stage(stage(env).selector("env", env).auto());
    }
    p.to_yaml()
}

/// Three environments; chart 2.x fails in prod.
fn prod_rejects_2x() -> FleetBuilder {
    fleet_of_envs(&["dev", "staging", "prod"], 1, "50ms").failure(
        "2.*",
        &[("env", "prod")],
        "Helm",
        HELM_ERROR,
    )
}

async fn chart(world: &World, stage: &str) -> Option<String> {
    let profile = world.profile(&format!("{WEB}-{stage}")).await?;
    profile
        .data
        .pointer("/spec/helmCharts/0/chartVersion")
        .and_then(Value::as_str)
        .map(String::from)
}

async fn status_where(world: &World, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    world
        .eventually(what, || async {
            world.status(WEB).await.filter(|s| check(s))
        })
        .await
}

fn message(status: &Value) -> &str {
    status["message"].as_str().unwrap_or_default()
}

/// A blackout that started an hour ago and lasts a day, in the policy's own words.
fn freeze(name: &str) -> String {
    let now = chrono::Utc::now();
    let from = (now - chrono::Duration::hours(1)).format("%Y-%m-%dT%H:%M:%S");
    let to = (now + chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%S");
    policy(name)
        .on_failure("Rollback")
        .max_failures("0")
        .blackout(
            &from.to_string(),
            &to.to_string(),
            Some("UTC"),
            Some("freeze"),
        )
        .to_yaml()
}

fn rolling_back(name: &str) -> String {
    policy(name)
        .on_failure("Rollback")
        .max_failures("0")
        .to_yaml()
}

/// `web` at 1.0.0 rolled out under the rolling-back policy `name` (in `path`), then 2.0.0, which
/// prod rejects, rolled back: the promotion is `RolledBack`, running #1.
async fn rolled_back_2(path: &str, name: &str) -> World {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    repo.write(path, &rolling_back(name));
    repo.commit("web 1.0.0");
    let world = World::start(repo, &prod_rejects_2x().to_yaml()).await;
    world.wait_phase(WEB, "Completed").await;
    world.repo.write("web.yaml", &web("2.0.0"));
    world.repo.commit("web 2.0.0, which prod rejects");
    world.poke();
    world.wait_phase(WEB, "RolledBack").await;
    world
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recommitted_rejected_content_during_a_blackout_is_held_and_warned() {
    // #2 fails in prod and is rolled back; the revert (#3 = #1's content) acknowledges it.
    let world = rolled_back_2("policy.yaml", "fleet").await;
    world.repo.write("web.yaml", &web("1.0.0"));
    world
        .repo
        .commit("Revert \"web 2.0.0, which prod rejects\"");
    world.poke();
    let reverted = status_where(&world, "the revert completes", |s| {
        s["snapshotIndex"] == 3 && s["phase"] == "Completed"
    })
    .await;
    assert_eq!(reverted["rollbackOf"], 1, "{reverted}");

    // A freeze begins, and a revert of the revert brings #2's rejected content back.
    world.repo.write("policy.yaml", &freeze("fleet"));
    world.repo.write("web.yaml", &web("2.0.0"));
    world
        .repo
        .commit("Revert \"Revert \\\"web 2.0.0, which prod rejects\\\"\"");
    world.poke();
    let held = status_where(&world, "#4 held by the blackout", |s| {
        s["queuedSnapshot"] == 4 || message(s).contains("snapshot #4 waits to start")
    })
    .await;
    assert_eq!(held["snapshotIndex"], 3, "{held}");
    assert!(
        held.get("rollbackOf").is_none() || held["rollbackOf"] == 1,
        "{held}"
    );
    let text = message(&held);
    assert!(text.contains("blackout"), "{text}");
    assert!(
        text.contains("has the content of snapshot #2, rejected at"),
        "{text}"
    );
    let warned = world
        .eventually("a RejectedContentRecommitted warning", || async {
            let events = world.events_of(WEB).await;
            let warned: Vec<String> = events
                .into_iter()
                .filter(|(reason, _)| reason == "RejectedContentRecommitted")
                .map(|(_, note)| note)
                .collect();
            (!warned.is_empty()).then_some(warned)
        })
        .await;
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].contains(HELM_ERROR), "{:?}", warned[0]);
    let events = world.events_of(WEB).await;
    for env in ["dev", "staging", "prod"] {
        assert_eq!(chart(&world, env).await.as_deref(), Some("1.0.0"), "{env}");
    }
    assert!(
        !events
            .iter()
            .any(|(reason, note)| reason == "Rollback" && note.contains("#4")),
        "{events:?}"
    );
    // `history` with the cluster: #2 rejected and why, #3 a rollback that completed.
    let history = world.history_json(WEB);
    let snapshots = history["snapshots"].as_array().expect("snapshots");
    let run = |i: usize| snapshots[i]["run"].as_str().unwrap_or_default().to_string();
    assert!(
        run(1).starts_with("rejected") && run(1).contains(HELM_ERROR),
        "{}",
        run(1)
    );
    assert_eq!(snapshots[2]["rollbackOf"], 1);
    assert!(run(2).starts_with("completed"), "{}", run(2));
    assert_eq!(run(3), "waiting");
    assert_eq!(snapshots[3]["sameContentAs"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pr_whose_intermediate_commit_equals_the_final_content_is_not_a_rollback() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    repo.write("policy.yaml", &rolling_back("fleet"));
    repo.commit("web 1.0.0");
    let world = World::start(
        repo,
        &fleet_of_envs(&["dev", "staging", "prod"], 1, "50ms").to_yaml(),
    )
    .await;
    world.wait_phase(WEB, "Completed").await;
    // A pull request of three commits, fast-forwarded at once during a freeze: its last commit
    // has the content of its first, which never ran here.
    world.repo.write("policy.yaml", &freeze("fleet"));
    world.repo.write("web.yaml", &web("1.1.0"));
    world.repo.commit("web 1.1.0");
    world.repo.write("web.yaml", &web("1.2.0"));
    world.repo.commit("web 1.2.0");
    world.repo.write("web.yaml", &web("1.1.0"));
    world.repo.commit("back to 1.1.0");
    world.poke();
    let held = status_where(&world, "#4 held by the blackout", |s| {
        message(s).contains("snapshot #4 waits to start")
    })
    .await;
    assert_eq!(held["snapshotIndex"], 1, "{held}");
    assert_eq!(chart(&world, "dev").await.as_deref(), Some("1.0.0"));
    let events = world.events_of(WEB).await;
    assert!(
        !events.iter().any(|(reason, _)| reason == "Rollback"),
        "{events:?}"
    );
    // The freeze lifted, #4 rolls out; `history` marks the two commits that never ran.
    world.repo.write("policy.yaml", &rolling_back("fleet"));
    world.repo.commit("lift the freeze");
    world.poke();
    status_where(&world, "#4 completes", |s| {
        s["snapshotIndex"] == 4 && s["phase"] == "Completed"
    })
    .await;
    let history = world.history_json(WEB);
    let runs: Vec<&str> = history["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| s["run"].as_str().unwrap_or_default())
        .collect();
    assert!(runs[0].starts_with("completed"), "{runs:?}");
    assert_eq!(runs[1..3], ["never ran", "never ran"], "{runs:?}");
    assert!(runs[3].starts_with("completed"), "{runs:?}");
    assert_eq!(history["snapshots"][3]["sameContentAs"], 2);
    assert_eq!(history["snapshots"][3]["rollbackOf"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_rollout_equal_to_an_earlier_commit_is_no_rollback() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    repo.commit("web 1.0.0");
    repo.write("web.yaml", &web("2.0.0"));
    repo.commit("web 2.0.0");
    repo.write("web.yaml", &web("1.0.0"));
    repo.commit("back to 1.0.0");
    let world = World::start(
        repo,
        &fleet_of_envs(&["dev", "staging", "prod"], 1, "50ms").to_yaml(),
    )
    .await;
    let done = world.wait_phase(WEB, "Completed").await;
    assert_eq!(done["snapshotIndex"], 3);
    assert!(done.get("rollbackOf").is_none(), "{done}");
    let events = world.events_of(WEB).await;
    assert!(
        !events.iter().any(|(reason, _)| reason == "Rollback"),
        "{events:?}"
    );
}

/// web 1.0.0 completed under policy `a` (its own file); then `change` is committed with 2.0.0.
async fn completed_then(change: impl FnOnce(&TestRepo)) -> World {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    repo.write("policies/a.yaml", &rolling_back("a"));
    repo.commit("web 1.0.0 under policy a");
    let world = World::start(
        repo,
        &fleet_of_envs(&["dev", "staging", "prod"], 1, "50ms").to_yaml(),
    )
    .await;
    let done = world.wait_phase(WEB, "Completed").await;
    assert_eq!(done["policy"]["name"], "a");
    change(&world.repo);
    world.repo.commit("web 2.0.0 and a policy problem");
    world.poke();
    world
}

/// The new snapshot is held with `expected` in its message; nothing of it is applied; a
/// `PolicyInvalid` Warning and a `PolicyValid=False` condition say why.
async fn assert_held(world: &World, expected: &str) -> Value {
    let held = world.wait_phase(WEB, "Held").await;
    assert_eq!(held["snapshotIndex"], 1, "{held}");
    assert_eq!(held["queuedSnapshot"], 2, "{held}");
    let text = message(&held);
    assert!(text.contains("snapshot #2 is held"), "{text}");
    assert!(text.contains(expected), "{text}");
    let condition = held["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "PolicyValid"))
        .unwrap_or_else(|| panic!("PolicyValid condition: {held}"));
    assert_eq!(condition["status"], "False");
    assert_eq!(condition["reason"], "PolicyInvalid");
    world
        .eventually("a PolicyInvalid warning", || async {
            let events = world.events_of(WEB).await;
            events
                .iter()
                .any(|(reason, note)| reason == "PolicyInvalid" && note.contains(expected))
                .then_some(())
        })
        .await;
    for env in ["dev", "staging", "prod"] {
        assert_eq!(chart(world, env).await.as_deref(), Some("1.0.0"), "{env}");
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_conflict_holds_new_snapshots_until_it_is_resolved() {
    let world = completed_then(|repo| {
        repo.write("policies/b.yaml", &rolling_back("b"));
        repo.write("web.yaml", &web("2.0.0"));
    })
    .await;
    assert_held(
        &world,
        "\"a\" (policies/a.yaml:6) and \"b\" (policies/b.yaml:6)",
    )
    .await;
    // `tollgate status NAME` shows it.
    let output = support::tollgate_binary()
        .args(["status", WEB, "--kubeconfig"])
        .arg(world.kubeconfig())
        .output()
        .expect("tollgate status");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("Phase:        Held"), "{text}");
    assert!(text.contains("Policy error:"), "{text}");
    // Resolved: the held snapshot rolls out.
    world.repo.remove("policies/b.yaml");
    world.repo.commit("one policy again");
    world.poke();
    status_where(&world, "#2 completes", |s| {
        s["snapshotIndex"] == 2 && s["phase"] == "Completed"
    })
    .await;
    assert_eq!(chart(&world, "prod").await.as_deref(), Some("2.0.0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_policy_holds_new_snapshots() {
    let world = completed_then(|repo| {
        repo.write("web.yaml", &web_with("2.0.0", Some("nope")));
    })
    .await;
    assert_held(
        &world,
        "web.yaml:6:5: annotation tollgate.dev/policy names RolloutPolicy \"nope\", which no file defines",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_policy_file_holds_new_snapshots() {
    let world = completed_then(|repo| {
        repo.write(
            "policies/a.yaml",
            "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: a\nspec: [\n",
        );
        repo.write("web.yaml", &web("2.0.0"));
    })
    .await;
    let held = assert_held(
        &world,
        "RolloutPolicy \"a\" has an error at policies/a.yaml:",
    )
    .await;
    assert_eq!(held["policy"]["name"], "a", "the last valid version stays");
    let text = message(&held);
    assert!(
        !text.contains("(: "),
        "a syntax error names no empty field: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promotion_that_never_had_a_valid_policy_does_not_start() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web_with("1.0.0", Some("nope")));
    repo.commit("web names a policy that does not exist");
    let world = World::start(
        repo,
        &fleet_of_envs(&["dev", "staging", "prod"], 1, "50ms").to_yaml(),
    )
    .await;
    let held = world.wait_phase(WEB, "Held").await;
    assert!(held.get("snapshotIndex").is_none(), "{held}");
    assert!(world.profile("web-dev").await.is_none(), "nothing starts");
    world
        .repo
        .write("policies/nope.yaml", &rolling_back("nope"));
    world.repo.commit("add the policy");
    world.poke();
    world.wait_phase(WEB, "Completed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revert_held_by_a_broken_policy_after_a_rollback_is_held() {
    let world = rolled_back_2("policies/a.yaml", "a").await;

    // The revert lands together with a broken policy file: it is held, and says so.
    world.repo.write(
        "policies/a.yaml",
        "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: a\nspec: [\n",
    );
    world.repo.write("web.yaml", &web("1.0.0"));
    world.repo.commit("revert to 1.0.0, and a broken policy");
    world.poke();
    let held = world.wait_phase(WEB, "Held").await;
    assert!(
        message(&held).contains("snapshot #3 is held until the RolloutPolicy is fixed"),
        "{held:#}"
    );
    let output = support::tollgate_binary()
        .args(["status", WEB, "--kubeconfig"])
        .arg(world.kubeconfig())
        .output()
        .expect("tollgate status");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("Phase:        Held"), "{text}");
    assert!(
        !text.contains("starts when this run finishes"),
        "a held snapshot is not queued: {text}"
    );
}

/// The writes of `RolledBack` Events about `web` (a create, and a patch per repeat of its series).
fn rolled_back_event_writes(world: &World) -> Vec<String> {
    world
        .emulator
        .write_log()
        .iter()
        .filter(|w| w.resource == "events.events.k8s.io")
        .filter(|w| w.object["reason"] == "RolledBack" && w.object["regarding"]["name"] == WEB)
        .map(|w| format!("{} {}", w.verb, w.object["note"]))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_is_told_once_while_the_fixes_after_it_are_held_by_a_broken_policy() {
    let world = rolled_back_2("policies/a.yaml", "a").await;
    world.settled().await;
    assert_eq!(rolled_back_event_writes(&world).len(), 1);

    // Two fixes land after a broken policy file: each is held, and each step of the hold is
    // another look at the rolled-back run, which tells nothing new.
    world.repo.write(
        "policies/a.yaml",
        "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: a\nspec: [\n",
    );
    world.repo.write("web.yaml", &web("1.0.1"));
    world.repo.commit("web 1.0.1, and a broken policy");
    world.poke();
    status_where(&world, "#3 held", |s| {
        s["phase"] == "Held" && s["queuedSnapshot"] == 3
    })
    .await;
    world.repo.write("web.yaml", &web("1.0.2"));
    world.repo.commit("web 1.0.2");
    world.poke();
    status_where(&world, "#4 held", |s| {
        s["phase"] == "Held" && s["queuedSnapshot"] == 4
    })
    .await;
    world.settled().await;
    assert_eq!(
        rolled_back_event_writes(&world),
        ["create \"Snapshot #2 rolled back after stage prod failed; running #1\""],
        "one RolledBack Event, never repeated by the steps of the hold"
    );
}

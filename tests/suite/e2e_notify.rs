//! End to end (issue #19): notifications and commit statuses through the controller loop, against
//! the emulator over HTTP, with real git repositories and real HTTP receivers on loopback that
//! record what they get, emulating each provider's documented request format.

use crate::support;

use support::child_emulator::ChildEmulator;
use support::receiver::{Answer, Receiver};

use std::collections::BTreeSet;

use axum::http::StatusCode;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::Value;
use std::process::Stdio;

use support::{KillOnDrop, TestRepo, World, tollgate_binary};
use tempfile::TempDir;
use tollgate::cluster::leader::LeaderGate;
use tollgate::cluster::resources;
use tollgate_fixtures::{FleetBuilder, PolicyBuilder, fleet_of_envs, policy, promotion, stage};

const WEB: &str = "web";
const HMAC_KEY: &str = "notify-hmac-key";
const TOKEN: &str = "notify-api-token";

/// Secret files in a temp dir: `(url, credential)` → path.
struct Secrets(TempDir);

impl Secrets {
    fn new() -> Secrets {
        Secrets(tempfile::tempdir().expect("secrets dir"))
    }

    fn file(&self, name: &str, url: &str, credential: Option<&str>) -> String {
        let path = self.0.path().join(name);
        let text = match credential {
            Some(c) => format!("{url}\n{c}\n"),
            None => format!("{url}\n"),
        };
        std::fs::write(&path, text).expect("write secret");
        path.to_str().expect("utf-8 path").to_string()
    }
}

fn three_envs() -> FleetBuilder {
    fleet_of_envs(&["dev", "staging", "prod"], 1, "50ms")
}

fn web(chart: &str) -> String {
    let mut p = promotion(WEB).chart("web", chart);
    for env in ["dev", "staging", "prod"] {
        p = p.stage(stage(env).selector("env", env).auto());
    }
    p.to_yaml()
}

const ALL_EVENTS: &[&str] = &[
    "StageStarted",
    "StageCompleted",
    "StageFailed",
    "RolledBack",
    "ApprovalNeeded",
    "Completed",
];

/// A policy with one generic webhook endpoint `hook` to `receiver` at `/hook`.
fn webhook_policy(receiver: &Receiver, secrets: &Secrets) -> PolicyBuilder {
    let file = secrets.file("hook", &receiver.url("/hook"), Some(HMAC_KEY));
    policy("fleet-defaults").notify("hook", "webhook", &file, ALL_EVENTS)
}

/// A repository with web 1.0.0 and a policy telling every event to `receiver`'s generic webhook.
fn web_with_hook(receiver: &Receiver, secrets: &Secrets) -> TestRepo {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    repo.write("policy.yaml", &webhook_policy(receiver, secrets).to_yaml());
    repo.commit("web 1.0.0");
    repo
}

/// (event, stage) of every generic webhook payload received, in order.
fn told(receiver: &Receiver) -> Vec<(String, String)> {
    receiver
        .under("/hook")
        .iter()
        .map(|r| {
            let body = r.json();
            (
                body["event"].as_str().unwrap_or_default().to_string(),
                body["stage"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

const FULL_ROLLOUT: &[(&str, &str)] = &[
    ("StageStarted", "dev"),
    ("StageCompleted", "dev"),
    ("StageStarted", "staging"),
    ("StageCompleted", "staging"),
    ("StageStarted", "prod"),
    ("StageCompleted", "prod"),
    ("Completed", "prod"),
];

/// Waits until the receiver got `count` generic webhook payloads.
async fn wait_told(world: &World, receiver: &Receiver, count: usize) -> Vec<(String, String)> {
    world
        .eventually(&format!("{count} notifications"), || async {
            let told = told(receiver);
            (told.len() >= count).then_some(told)
        })
        .await
}

fn assert_each_delivered_once(receiver: &Receiver) {
    let ids: Vec<String> = receiver
        .under("/hook")
        .iter()
        .map(|r| r.json()["id"].as_str().unwrap_or_default().to_string())
        .collect();
    let unique: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(
        unique.len(),
        ids.len(),
        "delivered twice: {:?}",
        told(receiver)
    );
}

fn schema() -> jsonschema::Validator {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/notification.schema.json"
    );
    let text = std::fs::read_to_string(path).expect("the payload schema");
    let schema: Value = serde_json::from_str(&text).expect("schema JSON");
    jsonschema::validator_for(&schema).expect("a valid JSON schema")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_type_hears_a_full_rollout_in_its_documented_format() {
    let receiver = Receiver::start(Answer::Ok).await;
    let secrets = Secrets::new();
    let slack = secrets.file("slack", &receiver.url("/slack/T0/B0/x"), None);
    let hook = secrets.file("hook", &receiver.url("/hook"), Some(HMAC_KEY));
    let github = secrets.file("gh", &receiver.url("/github/repos/o/r"), Some(TOKEN));
    let gitlab = secrets.file(
        "gl",
        &receiver.url("/gitlab/api/v4/projects/42"),
        Some(TOKEN),
    );
    let gitea = secrets.file("gt", &receiver.url("/gitea/api/v1/repos/o/r"), Some(TOKEN));
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    repo.write(
        "policy.yaml",
        &policy("fleet-defaults")
            .notify("chat", "slack", &slack, ALL_EVENTS)
            .notify("hook", "webhook", &hook, ALL_EVENTS)
            .notify("gh", "github", &github, ALL_EVENTS)
            .notify_target_url("https://dash.example.com/web")
            .notify("gl", "gitlab", &gitlab, ALL_EVENTS)
            .notify("gt", "gitea", &gitea, ALL_EVENTS)
            .to_yaml(),
    );
    let sha = repo.commit("web 1.0.0, told everywhere");
    let world = World::start(repo, &three_envs().to_yaml()).await;
    world.wait_phase(WEB, "Completed").await;

    // Generic webhook: every event in order, valid against the schema, signed.
    assert_eq!(wait_told(&world, &receiver, 7).await, pairs(FULL_ROLLOUT));
    let validator = schema();
    for request in receiver.under("/hook") {
        let body = request.json();
        let errors: Vec<String> = validator
            .iter_errors(&body)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{body}: {errors:?}");
        assert_eq!(body["snapshot"]["commit"], sha.as_str());
        assert_eq!(body["snapshot"]["index"], 1);
        let signature = request.header("X-Tollgate-Signature").expect("signed");
        let hex = signature.strip_prefix("sha256=").expect("sha256= prefix");
        assert!(tollgate::outbound::signature::hmac_sha256_matches(
            HMAC_KEY.as_bytes(),
            &request.body,
            hex
        ));
    }
    let completed = receiver.under("/hook")[1].json();
    assert_eq!(completed["clusters"]["provisioned"], 1, "{completed}");
    assert!(completed["snapshot"]["author"].is_string(), "{completed}");

    // Slack: one incoming-webhook message per event, JSON with `text`.
    let messages = world
        .eventually("7 slack messages", || async {
            let got = receiver.under("/slack/T0/B0/x");
            (got.len() >= 7).then_some(got)
        })
        .await;
    assert!(messages.iter().all(|m| m.json()["text"].is_string()));
    assert!(
        messages[6].json()["text"]
            .as_str()
            .unwrap_or_default()
            .contains("web: rollout completed")
    );

    // Commit statuses: per stage pending/running then success, on the snapshot's full SHA.
    let path_of = |prefix: &str| format!("{prefix}/statuses/{sha}");
    for (prefix, context_field, started, auth) in [
        (
            "/github/repos/o/r",
            "context",
            "pending",
            ("authorization", format!("Bearer {TOKEN}")),
        ),
        (
            "/gitlab/api/v4/projects/42",
            "name",
            "running",
            ("private-token", TOKEN.to_string()),
        ),
        (
            "/gitea/api/v1/repos/o/r",
            "context",
            "pending",
            ("authorization", format!("token {TOKEN}")),
        ),
    ] {
        let statuses = world
            .eventually(&format!("6 statuses under {prefix}"), || async {
                let got = receiver.under(prefix);
                (got.len() >= 6).then_some(got)
            })
            .await;
        let seen: Vec<(String, String)> = statuses
            .iter()
            .map(|s| {
                assert_eq!(s.path, path_of(prefix));
                assert_eq!(s.header(auth.0), Some(auth.1.as_str()), "{prefix}");
                let body = s.json();
                (
                    body[context_field].as_str().unwrap_or_default().to_string(),
                    body["state"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let mut expected = Vec::new();
        for env in ["dev", "staging", "prod"] {
            expected.push((format!("tollgate/{env}"), started.to_string()));
            expected.push((format!("tollgate/{env}"), "success".to_string()));
        }
        assert_eq!(seen, expected, "{prefix}");
    }
    let github = receiver.under("/github/repos/o/r");
    assert_eq!(
        github[0].json()["target_url"],
        "https://dash.example.com/web"
    );
    assert!(
        github[0].header("user-agent").is_some(),
        "GitHub requires a User-Agent"
    );

    let metrics = world.metrics.encode();
    assert!(
        metrics.contains("tollgate_notifications_sent_total{endpoint=\"gh\"} 6"),
        "{metrics}"
    );
    assert!(metrics.contains("tollgate_notification_latency_seconds_count{endpoint=\"hook\"} 7"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_is_told_as_stage_failed_then_rolled_back() {
    let receiver = Receiver::start(Answer::Ok).await;
    let secrets = Secrets::new();
    let gitea = secrets.file("gt", &receiver.url("/gitea/repos/o/r"), Some(TOKEN));
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("9.9.1"));
    repo.write(
        "policy.yaml",
        &webhook_policy(&receiver, &secrets)
            .max_failures("0")
            .on_failure("Rollback")
            .notify("gt", "gitea", &gitea, ALL_EVENTS)
            .to_yaml(),
    );
    let sha = repo.commit("web 9.9.1, which staging rejects");
    let fleet = three_envs().failure("9.9.*", &[("env", "staging")], "Helm", "values: bad");
    let world = World::start(repo, &fleet.to_yaml()).await;
    world.wait_phase(WEB, "RolledBack").await;
    let told = wait_told(&world, &receiver, 5).await;
    assert_eq!(
        told,
        pairs(&[
            ("StageStarted", "dev"),
            ("StageCompleted", "dev"),
            ("StageStarted", "staging"),
            ("StageFailed", "staging"),
            ("RolledBack", "staging"),
        ])
    );
    let failed = receiver.under("/hook")[3].json();
    assert!(
        failed["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{failed}"
    );
    assert_eq!(failed["clusters"]["failed"], 1, "{failed}");
    let statuses: Vec<String> = world
        .eventually("gitea: the failure and the rollback", || async {
            let got = receiver.under("/gitea/repos/o/r");
            (got.len() >= 5).then_some(got)
        })
        .await
        .iter()
        .map(|s| {
            assert_eq!(s.path, format!("/gitea/repos/o/r/statuses/{sha}"));
            let body = s.json();
            format!(
                "{} {}",
                body["context"].as_str().unwrap_or_default(),
                body["state"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            "tollgate/dev pending",
            "tollgate/dev success",
            "tollgate/staging pending",
            "tollgate/staging failure",
            "tollgate/staging error"
        ]
    );
}

/// Edits a field tollgate set on a generated profile: the next step re-applies it, which takes a
/// Completed promotion through Progressing and back to Completed (the same run).
async fn drift(world: &World, profile: &str) {
    let api: Api<DynamicObject> =
        Api::all_with(world.client.clone(), &resources::cluster_profile());
    let patch = serde_json::json!({"spec": {"tier": 42}});
    api.patch(profile, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("edit the profile");
}

async fn wait_drift_corrected(world: &World) {
    world
        .eventually("the drift corrected", || async {
            world
                .events_of(WEB)
                .await
                .iter()
                .any(|(reason, _)| reason == "DriftCorrected")
                .then_some(())
        })
        .await;
    world.wait_phase(WEB, "Completed").await;
}

/// A new commit: its first notice comes after anything an earlier step queued (one FIFO worker
/// per endpoint), so once it is received nothing earlier is still on its way.
async fn sentinel(world: &World, receiver: &Receiver, told_before: usize) {
    world.repo.write("web.yaml", &web("2.0.0"));
    world.repo.commit("web 2.0.0");
    world.poke();
    world
        .eventually("the sentinel run's first notice", || async {
            let got = receiver.under("/hook");
            got.iter()
                .skip(told_before)
                .any(|r| r.json()["snapshot"]["index"] == 2)
                .then_some(())
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_rollout_and_a_drift_after_it_tell_nothing_twice() {
    let receiver = Receiver::start(Answer::Ok).await;
    let secrets = Secrets::new();
    let repo = TestRepo::new();
    let mut p = promotion(WEB).chart("web", "1.0.0");
    for env in ["dev", "staging", "prod"] {
        p = p.stage(stage(env).selector("env", env).delay("2s"));
    }
    repo.write("web.yaml", &p.to_yaml());
    repo.write(
        "policy.yaml",
        &webhook_policy(&receiver, &secrets).to_yaml(),
    );
    repo.commit("web 1.0.0, 2s per stage");
    let mut world = World::start(repo, &three_envs().to_yaml()).await;

    // Stop mid-rollout (dev done, its delay running), start again.
    wait_told(&world, &receiver, 2).await;
    world.stop_controller().await;
    world.start_controller().await;
    world.wait_phase(WEB, "Completed").await;
    assert_eq!(wait_told(&world, &receiver, 7).await, pairs(FULL_ROLLOUT));

    // A new process corrects a drift: Completed again, for the same run, is not told again.
    world.stop_controller().await;
    drift(&world, "web-dev").await;
    world.start_controller().await;
    wait_drift_corrected(&world).await;
    sentinel(&world, &receiver, 7).await;
    assert_eq!(told(&receiver)[..7], pairs(FULL_ROLLOUT)[..]);
    assert_each_delivered_once(&receiver);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_does_not_repeat_what_the_old_one_told() {
    let receiver = Receiver::start(Answer::Ok).await;
    let secrets = Secrets::new();
    let repo = web_with_hook(&receiver, &secrets);
    let world = World::without_controller(repo, &three_envs().to_yaml()).await;
    let first = LeaderGate::always();
    let second = LeaderGate::always();
    second.set(false);
    let (a, a_task) = world.spawn_replica(first.clone()).await;
    let (b, b_task) = world.spawn_replica(second.clone()).await;
    world.wait_phase(WEB, "Completed").await;
    assert_eq!(wait_told(&world, &receiver, 7).await, pairs(FULL_ROLLOUT));
    // A notice is delivered, then recorded by the leader: moved before the record lands, the
    // new leader would rightly tell it again (at least once). Moved once all seven are recorded.
    world
        .eventually("the old leader records its deliveries", || async {
            let object = world.git_promotion(WEB).await?;
            let recorded = object
                .metadata
                .annotations?
                .get(tollgate::notify::dedup::NOTIFIED_ANNOTATION)?
                .split(',')
                .count();
            (recorded >= FULL_ROLLOUT.len()).then_some(())
        })
        .await;

    // Leadership moves while a profile drifts: the new leader corrects it and completes the
    // same run again, without telling it again.
    first.set(false);
    second.set(true);
    drift(&world, "web-staging").await;
    wait_drift_corrected(&world).await;
    world.poke();
    b.poker.poke();
    sentinel(&world, &receiver, 7).await;
    assert_each_delivered_once(&receiver);
    for (handle, task) in [(a, a_task), (b, b_task)] {
        handle.shutdown();
        task.await.expect("replica stops");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_answering_500_then_200_gets_the_notice_again() {
    let receiver = Receiver::start(Answer::FailFirst).await;
    let secrets = Secrets::new();
    let repo = web_with_hook(&receiver, &secrets);
    let world = World::start(repo, &three_envs().to_yaml()).await;
    world.wait_phase(WEB, "Completed").await;
    let told = wait_told(&world, &receiver, 8).await;
    assert_eq!(told[0], told[1], "the first notice, retried after the 500");
    assert_eq!(told[1..], pairs(FULL_ROLLOUT)[..]);
    let metrics = world.metrics.encode();
    assert!(
        metrics.contains("tollgate_notifications_sent_total{endpoint=\"hook\"} 7"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("tollgate_notifications_failed_total{endpoint=\"hook\"}"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_4xx_answer_is_not_retried_and_counts_as_failed() {
    let receiver = Receiver::start(Answer::Refuse).await;
    let secrets = Secrets::new();
    let repo = web_with_hook(&receiver, &secrets);
    let world = World::start(repo, &three_envs().to_yaml()).await;
    world.wait_phase(WEB, "Completed").await;
    // Each notice is given up on only after its last attempt: once all 7 failed, every attempt
    // has been made.
    world
        .eventually("7 failed notifications", || async {
            world
                .metrics
                .encode()
                .contains("tollgate_notifications_failed_total{endpoint=\"hook\"} 7")
                .then_some(())
        })
        .await;
    assert_eq!(receiver.got().len(), 7, "one attempt per notice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_receiver_does_not_slow_the_rollout() {
    let receiver = Receiver::start(Answer::Hang).await;
    let secrets = Secrets::new();
    let file = secrets.file("hook", &receiver.url("/hook"), Some(HMAC_KEY));
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    // An hour per request: were the rollout waiting on a delivery, it would not finish.
    let yaml = policy("fleet-defaults")
        .notify("hook", "webhook", &file, ALL_EVENTS)
        .to_yaml()
        .replace("    events:", "    timeout: 1h\n    events:");
    repo.write("policy.yaml", &yaml);
    repo.commit("web 1.0.0, told to a receiver that never answers");
    let world = World::start(repo, &three_envs().to_yaml()).await;
    let status = world.wait_phase(WEB, "Completed").await;
    assert_eq!(status["stages"].as_array().map(Vec::len), Some(3));
    assert_eq!(receiver.got().len(), 1, "the one request still hangs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_secret_file_is_a_visible_refusal_and_the_rollout_goes_on() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    repo.write(
        "policy.yaml",
        &policy("fleet-defaults")
            .notify(
                "chat",
                "slack",
                "/nonexistent/tollgate/slack-url",
                &["Completed"],
            )
            .to_yaml(),
    );
    repo.commit("web 1.0.0, told to a chat whose secret is missing");
    let world = World::start(repo, &three_envs().to_yaml()).await;
    world.wait_phase(WEB, "Completed").await;
    let note = world
        .eventually("a NotificationFailed event", || async {
            world
                .events_of(WEB)
                .await
                .into_iter()
                .find(|(reason, _)| reason == "NotificationFailed")
                .map(|(_, note)| note)
        })
        .await;
    assert!(note.contains("/nonexistent/tollgate/slack-url"), "{note}");
    assert!(note.contains("chat"), "{note}");
    let metrics = world.metrics.encode();
    assert!(
        metrics.contains("tollgate_notifications_failed_total{endpoint=\"chat\"} 1"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_tells() {
    let receiver = Receiver::start(Answer::Ok).await;
    let secrets = Secrets::new();
    let repo = web_with_hook(&receiver, &secrets);
    let world = World::without_controller(repo, &three_envs().to_yaml()).await;
    let leader = LeaderGate::always();
    let follower = LeaderGate::always();
    follower.set(false);
    let (a, a_task) = world.spawn_replica(leader).await;
    let (b, b_task) = world.spawn_replica(follower).await;
    world.wait_phase(WEB, "Completed").await;
    assert_eq!(wait_told(&world, &receiver, 7).await, pairs(FULL_ROLLOUT));
    sentinel(&world, &receiver, 7).await;
    assert_each_delivered_once(&receiver);
    for (handle, task) in [(a, a_task), (b, b_task)] {
        handle.shutdown();
        task.await.expect("replica stops");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_gate_is_told_as_approval_needed_once() {
    let receiver = Receiver::start(Answer::Ok).await;
    let secrets = Secrets::new();
    let repo = TestRepo::new();
    let web_manual = promotion(WEB)
        .chart("web", "1.0.0")
        .stage(stage("dev").selector("env", "dev").auto())
        .stage(stage("prod").selector("env", "prod").manual())
        .to_yaml();
    repo.write("web.yaml", &web_manual);
    repo.write(
        "policy.yaml",
        &webhook_policy(&receiver, &secrets).to_yaml(),
    );
    repo.commit("web 1.0.0, prod behind an approval");
    let world = World::start(repo, &three_envs().to_yaml()).await;
    world.wait_phase(WEB, "Waiting").await;
    let told = wait_told(&world, &receiver, 4).await;
    assert_eq!(
        told,
        pairs(&[
            ("StageStarted", "dev"),
            ("StageCompleted", "dev"),
            ("StageStarted", "prod"),
            ("ApprovalNeeded", "prod"),
        ])
    );
    let waiting = receiver.under("/hook")[3].json();
    assert_eq!(waiting["phase"], "Waiting", "{waiting}");
    assert!(
        waiting["reason"].is_string(),
        "what it waits for: {waiting}"
    );
}

/// (event, stage, id) of every generic webhook payload the receiver accepted (2xx), in order.
fn delivered(receiver: &Receiver) -> Vec<(String, String, String)> {
    receiver
        .under("/hook")
        .iter()
        .filter(|r| r.answered.is_some_and(|c| c.is_success()))
        .map(|r| {
            let body = r.json();
            let field = |name: &str| body[name].as_str().unwrap_or_default().to_string();
            (field("event"), field("stage"), field("id"))
        })
        .collect()
}

fn delivered_pairs(receiver: &Receiver) -> Vec<(String, String)> {
    delivered(receiver)
        .into_iter()
        .map(|(event, stage, _)| (event, stage))
        .collect()
}

/// Each accepted id once: nothing told twice.
fn assert_each_accepted_once(receiver: &Receiver) {
    let ids: Vec<String> = delivered(receiver).into_iter().map(|d| d.2).collect();
    let unique: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(
        unique.len(),
        ids.len(),
        "delivered twice: {:?}",
        delivered_pairs(receiver)
    );
}

/// Whether the receiver accepted a notice of snapshot #2 (the sentinel commit's run): the
/// notices of a promotion go out oldest first, so anything owed before it has gone out.
fn sentinel_accepted(receiver: &Receiver) -> bool {
    receiver
        .under("/hook")
        .iter()
        .any(|r| r.answered.is_some_and(|c| c.is_success()) && r.json()["snapshot"]["index"] == 2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_down_for_60_s_gets_every_notice_afterwards() {
    let receiver = Receiver::start(Answer::WhileUp).await;
    let down_since = tokio::time::Instant::now();
    let secrets = Secrets::new();
    let repo = web_with_hook(&receiver, &secrets);
    let world = World::start(repo, &three_envs().to_yaml()).await;
    world.wait_phase(WEB, "Completed").await;
    world
        .eventually(
            "the first notice retried while the receiver is down",
            || async { (receiver.under("/hook").len() >= 3).then_some(()) },
        )
        .await;
    tokio::time::sleep_until(down_since + std::time::Duration::from_secs(60)).await;
    assert!(delivered(&receiver).is_empty(), "the receiver was down");
    receiver.set_up(true);
    let got = world
        .eventually("every notice, once the receiver is back", || async {
            let got = delivered_pairs(&receiver);
            (got.len() >= 7).then_some(got)
        })
        .await;
    assert_eq!(got, pairs(FULL_ROLLOUT));
    world.repo.write("web.yaml", &web("2.0.0"));
    world.repo.commit("web 2.0.0");
    world.poke();
    world
        .eventually("the sentinel run's first notice", || async {
            sentinel_accepted(&receiver).then_some(())
        })
        .await;
    assert_eq!(delivered_pairs(&receiver)[..7], pairs(FULL_ROLLOUT)[..]);
    assert_each_accepted_once(&receiver);
    let metrics = world.metrics.encode();
    assert!(
        !metrics.contains("tollgate_notifications_failed_total{endpoint=\"hook\"}"),
        "nothing given up within retryFor (1h by default): {metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_failing_for_longer_than_retry_for_is_given_up_visibly() {
    let receiver = Receiver::start(Answer::WhileUp).await;
    let secrets = Secrets::new();
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    repo.write(
        "policy.yaml",
        &webhook_policy(&receiver, &secrets)
            .notify_retry_for("3s")
            .to_yaml(),
    );
    repo.commit("web 1.0.0, told to a receiver that stays down");
    let world = World::start(repo, &three_envs().to_yaml()).await;
    world.wait_phase(WEB, "Completed").await;
    world
        .eventually("all 7 notices given up", || async {
            world
                .metrics
                .encode()
                .contains("tollgate_notifications_failed_total{endpoint=\"hook\"} 7")
                .then_some(())
        })
        .await;
    let note = world
        .eventually("a NotificationFailed event", || async {
            world
                .events_of(WEB)
                .await
                .into_iter()
                .find(|(reason, _)| reason == "NotificationFailed")
                .map(|(_, note)| note)
        })
        .await;
    assert!(note.contains("retryFor") && note.contains("3s"), "{note}");
    assert!(note.contains("endpoint hook"), "{note}");
    let first_id = receiver.under("/hook")[0].json()["id"].clone();
    let attempts = receiver
        .under("/hook")
        .iter()
        .filter(|r| r.json()["id"] == first_id)
        .count();
    assert!(attempts >= 3, "retried with backoff, not once: {attempts}");
    assert!(
        !world
            .metrics
            .encode()
            .contains("tollgate_notifications_sent_total{endpoint=\"hook\"}"),
        "nothing was delivered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waves_and_a_blackout_are_told_and_are_no_commit_status_of_their_own() {
    let receiver = Receiver::start(Answer::Ok).await;
    let secrets = Secrets::new();
    let hook = secrets.file("hook", &receiver.url("/hook"), Some(HMAC_KEY));
    let github = secrets.file("gh", &receiver.url("/github/repos/o/r"), Some(TOKEN));
    let now = chrono::Utc::now();
    let format = "%Y-%m-%dT%H:%M:%S";
    let from = (now - chrono::Duration::hours(1))
        .format(format)
        .to_string();
    let to = (now + chrono::Duration::seconds(4))
        .format(format)
        .to_string();
    let wave_events = ["BlackoutHeld", "WaveStarted", "WaveCompleted", "Completed"];
    let status_events = [
        "BlackoutHeld",
        "WaveStarted",
        "WaveCompleted",
        "StageStarted",
        "StageCompleted",
    ];
    let yaml = policy("fleet-defaults")
        .blackout(&from, &to, Some("UTC"), Some("freeze"))
        .notify("hook", "webhook", &hook, &wave_events)
        .notify("gh", "github", &github, &status_events)
        .to_yaml()
        .replace(
            "spec:\n",
            "spec:\n  stages:\n    prod:\n      waves:\n        size: 1\n",
        );
    let repo = TestRepo::new();
    let two_stages = promotion(WEB)
        .chart("web", "1.0.0")
        .stage(stage("dev").selector("env", "dev").auto())
        .stage(stage("prod").selector("env", "prod").auto());
    repo.write("web.yaml", &two_stages.to_yaml());
    repo.write("policy.yaml", &yaml);
    let sha = repo.commit("web 1.0.0 during a freeze, prod in waves");
    let fleet = fleet_of_envs(&["dev", "prod"], 2, "50ms");
    let world = World::start(repo, &fleet.to_yaml()).await;
    world.wait_phase(WEB, "Completed").await;
    let told = wait_told(&world, &receiver, 6).await;
    assert_eq!(
        told,
        pairs(&[
            ("BlackoutHeld", "dev"),
            ("WaveStarted", "prod"),
            ("WaveCompleted", "prod"),
            ("WaveStarted", "prod"),
            ("WaveCompleted", "prod"),
            ("Completed", "prod"),
        ])
    );
    let hooks = receiver.under("/hook");
    let validator = schema();
    for request in &hooks {
        let body = request.json();
        let errors: Vec<String> = validator
            .iter_errors(&body)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{body}: {errors:?}");
    }
    let held = hooks[0].json();
    assert_eq!(held["snapshot"]["index"], 1, "{held}");
    assert!(
        held["reason"]
            .as_str()
            .is_some_and(|r| r.contains("freeze") && r.contains("waits to start")),
        "{held}"
    );
    let second_wave = hooks[3].json();
    assert!(
        second_wave["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("wave 2/2 started: ")),
        "{second_wave}"
    );
    // Commit statuses: the waves update the stage's pending status; a blackout posts none.
    let statuses: Vec<String> = world
        .eventually("the statuses of both stages", || async {
            let got = receiver.under("/github/repos/o/r");
            (got.len() >= 8).then_some(got)
        })
        .await
        .iter()
        .map(|s| {
            assert_eq!(s.path, format!("/github/repos/o/r/statuses/{sha}"));
            let body = s.json();
            let description = body["description"].as_str().unwrap_or_default();
            let wave = if description.contains("wave") {
                " (wave)"
            } else {
                ""
            };
            format!(
                "{} {}{wave}",
                body["context"].as_str().unwrap_or_default(),
                body["state"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            "tollgate/dev pending",
            "tollgate/dev success",
            "tollgate/prod pending",
            "tollgate/prod pending (wave)",
            "tollgate/prod pending (wave)",
            "tollgate/prod pending (wave)",
            "tollgate/prod pending (wave)",
            "tollgate/prod success",
        ]
    );
}

/// The emulator as its own process (it outlives the controllers killed below).
fn emulator_process(dir: &std::path::Path, fleet: &str) -> (ChildEmulator, std::path::PathBuf) {
    let (emulator, _) = tokio::task::block_in_place(|| ChildEmulator::start_plain(dir, fleet));
    let kubeconfig = emulator.kubeconfig.clone();
    (emulator, kubeconfig)
}

/// `tollgate run` as a real process; its log goes to `<dir>/<name>.log`.
fn controller_process(
    dir: &std::path::Path,
    repo: &TestRepo,
    kubeconfig: &std::path::Path,
    name: &str,
) -> KillOnDrop {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("log file");
    let child = tollgate_binary()
        .args(["--log", "info", "run", "--repo"])
        .arg(repo.path())
        .args(["--branch", "main", "--interval", "1s", "--kubeconfig"])
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join(format!("cache-{name}")))
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("tollgate run starts");
    KillOnDrop(child)
}

/// Polls `check` until it yields, or fails the test after [`support::PATIENCE`].
async fn until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + support::PATIENCE;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_a_retry_then_restart_delivers_the_notice_once() {
    let receiver = Receiver::start(Answer::WhileUp).await;
    receiver.set_up(true);
    let secrets = Secrets::new();
    let repo = TestRepo::new();
    let mut p = promotion(WEB).chart("web", "1.0.0");
    for env in ["dev", "staging", "prod"] {
        p = p.stage(stage(env).selector("env", env).delay("2s"));
    }
    repo.write("web.yaml", &p.to_yaml());
    repo.write(
        "policy.yaml",
        &webhook_policy(&receiver, &secrets).to_yaml(),
    );
    repo.commit("web 1.0.0, 2s per stage");
    let dir = tempfile::tempdir().expect("temp dir");
    let (_emulator, kubeconfig) = emulator_process(dir.path(), &three_envs().to_yaml());
    let mut first = controller_process(dir.path(), &repo, &kubeconfig, "first");

    // dev's start is delivered; then the receiver goes down during dev's 2 s soak, and the next
    // notice (dev completed) is being retried when the controller is killed.
    until("dev's start delivered", || {
        (!delivered(&receiver).is_empty()).then_some(())
    })
    .await;
    receiver.set_up(false);
    until("a notice retried while the receiver is down", || {
        let refused = receiver
            .under("/hook")
            .iter()
            .filter(|r| r.answered == Some(StatusCode::SERVICE_UNAVAILABLE))
            .count();
        (refused >= 3).then_some(())
    })
    .await;
    first.0.kill().expect("SIGKILL");
    first.0.wait().expect("killed");
    let delivered_before = delivered(&receiver).len();
    assert_eq!(
        delivered_pairs(&receiver),
        pairs(&FULL_ROLLOUT[..1]),
        "nothing else went out while the receiver was down"
    );

    receiver.set_up(true);
    let _second = controller_process(dir.path(), &repo, &kubeconfig, "second");
    let got = until("every notice, after the restart", || {
        let got = delivered_pairs(&receiver);
        (got.len() >= 7).then_some(got)
    })
    .await;
    assert_eq!(
        got,
        pairs(FULL_ROLLOUT),
        "first delivered: {delivered_before}"
    );
    repo.write("web.yaml", &web("2.0.0"));
    repo.commit("web 2.0.0");
    until("the sentinel run's first notice", || {
        sentinel_accepted(&receiver).then_some(())
    })
    .await;
    assert_eq!(delivered_pairs(&receiver)[..7], pairs(FULL_ROLLOUT)[..]);
    assert_each_accepted_once(&receiver);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_commit_status_is_never_sent_after_the_stages_success() {
    let receiver = Receiver::start(Answer::WhileUp).await;
    let secrets = Secrets::new();
    let github = secrets.file("gh", &receiver.url("/github/repos/o/r"), Some(TOKEN));
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    repo.write(
        "policy.yaml",
        &policy("fleet-defaults")
            .notify("gh", "github", &github, &["StageStarted", "StageCompleted"])
            .to_yaml(),
    );
    let sha = repo.commit("web 1.0.0, statuses to a forge that is down");
    let mut world = World::start(repo, &three_envs().to_yaml()).await;
    let status = world.wait_phase(WEB, "Completed").await;
    world
        .eventually("an attempt while the forge is down", || async {
            (!receiver.got().is_empty()).then_some(())
        })
        .await;
    world.stop_controller().await;
    // As if the stopped process had got dev's `success` through and not its `pending`.
    let pending = status["pendingNotices"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let dev_success = pending
        .iter()
        .find(|n| n["kind"] == "StageCompleted" && n["stage"] == "dev")
        .and_then(|n| n["id"].as_str())
        .expect("dev's success is pending");
    let api: Api<DynamicObject> = Api::all_with(world.client.clone(), &resources::git_promotion());
    let patch = serde_json::json!({"metadata": {"annotations": {
        "tollgate.dev/notified": format!("gh:{dev_success}"),
    }}});
    api.patch(WEB, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("annotate");
    receiver.set_up(true);
    world.start_controller().await;
    let accepted = |receiver: &Receiver| -> Vec<String> {
        receiver
            .under("/github/repos/o/r")
            .iter()
            .filter(|r| r.answered.is_some_and(|c| c.is_success()))
            .filter(|r| r.path.ends_with(sha.as_str()))
            .map(|r| {
                let body = r.json();
                format!(
                    "{} {}",
                    body["context"].as_str().unwrap_or_default(),
                    body["state"].as_str().unwrap_or_default()
                )
            })
            .collect()
    };
    let statuses = world
        .eventually("staging's and prod's statuses", || async {
            let got = accepted(&receiver);
            (got.len() >= 4).then_some(got)
        })
        .await;
    assert_eq!(
        statuses,
        [
            "tollgate/staging pending",
            "tollgate/staging success",
            "tollgate/prod pending",
            "tollgate/prod success"
        ],
        "dev's late pending would have overwritten its success"
    );
    world
        .eventually("the older state counted as dropped", || async {
            world
                .metrics
                .encode()
                .contains("tollgate_notifications_dropped_total{endpoint=\"gh\"} 1")
                .then_some(())
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_rewound_under_the_running_snapshot_is_told_and_followed() {
    let receiver = Receiver::start(Answer::Ok).await;
    let secrets = Secrets::new();
    let file = secrets.file("hook", &receiver.url("/hook"), Some(HMAC_KEY));
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    repo.write(
        "policy.yaml",
        &policy("fleet-defaults")
            .notify("hook", "webhook", &file, &["BranchRewound"])
            .to_yaml(),
    );
    let first = repo.commit("web 1.0.0");
    repo.write("web.yaml", &web("2.0.0"));
    let second = repo.commit("web 2.0.0");
    let world = World::start(repo, &three_envs().to_yaml()).await;
    world.wait_phase(WEB, "Completed").await;

    // A force-push takes 2.0.0 out of the branch's history.
    world.repo.git(&["reset", "-q", "--hard", &first]);
    world.poke();
    let told = wait_told(&world, &receiver, 1).await;
    // Told from the step that follows the branch: the new run is at its first stage.
    assert_eq!(told, pairs(&[("BranchRewound", "dev")]));
    let body = receiver.under("/hook")[0].json();
    let reason = body["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&second[..7]) && reason.contains("onRewind: Follow"),
        "{body}"
    );
    let schema = schema();
    assert!(schema.is_valid(&body), "{body}");
    world
        .eventually("a BranchRewound event", || async {
            let events = world.events_of(WEB).await;
            events
                .iter()
                .any(|(reason, _)| reason == "BranchRewound")
                .then_some(())
        })
        .await;
    // Follow: what the branch now says rolls out.
    world
        .eventually("1.0.0 rolls out again", || async {
            let profile = world.profile("web-prod").await?;
            let version = support::str_at(&profile.data, "/spec/helmCharts/0/chartVersion")?;
            (version == "1.0.0").then_some(())
        })
        .await;
    assert_each_delivered_once(&receiver);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_rewind_hold_starts_nothing_until_the_branch_moves_on() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    repo.write(
        "policy.yaml",
        "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: hold\nspec:\n  onRewind: Hold\n",
    );
    let first = repo.commit("web 1.0.0");
    repo.write("web.yaml", &web("2.0.0"));
    repo.commit("web 2.0.0");
    let world = World::start(repo, &three_envs().to_yaml()).await;
    world.wait_phase(WEB, "Completed").await;

    world.repo.git(&["reset", "-q", "--hard", &first]);
    world.poke();
    let status = world.wait_phase(WEB, "Held").await;
    let message = status["message"].as_str().unwrap_or_default();
    assert!(message.contains("onRewind: Hold"), "{status:#}");
    for env in ["dev", "staging", "prod"] {
        let profile = world.profile(&format!("web-{env}")).await.expect("profile");
        let version = support::str_at(&profile.data, "/spec/helmCharts/0/chartVersion");
        assert_eq!(version, Some("2.0.0"), "{env} keeps what ran");
    }
    // A new commit on top of the rewritten branch: the branch moved on, and it rolls out.
    world.repo.write("web.yaml", &web("3.0.0"));
    let third = world.repo.commit("web 3.0.0");
    world.poke();
    world
        .eventually("3.0.0 completes", || async {
            let status = world.status(WEB).await?;
            (status["snapshotCommit"] == third.as_str() && status["phase"] == "Completed")
                .then_some(())
        })
        .await;
}

//! End to end: gates. A manual gate waits for an approval commit; an approval serves one run only;
//! a snapshot-bound annotation approves; a failing stage stops the pipeline until a fix; an
//! invalid commit keeps the last good snapshot running without touching other promotions.

use crate::support;

use serde_json::Value;
use support::{TestRepo, World, fleet_yaml, seed, str_at};
use tollgate_emulator::Feature;

const MANUAL: &str = "kyverno-prog-rollout-man";

fn stage<'a>(status: &'a Value, name: &str) -> Option<&'a Value> {
    status["stages"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
}

fn waits_for_approval(status: &Value) -> bool {
    status["currentStageName"] == "staging"
        && status["phase"] == "Waiting"
        && stage(status, "staging")
            .and_then(|s| s["currentStatusDescription"].as_str())
            .is_some_and(|d| d.starts_with("Paused: Awaiting Manual Approval"))
}

async fn wait_for_gate(world: &World, snapshot: u64) -> Value {
    world
        .eventually(&format!("staging gate of snapshot {snapshot}"), || async {
            world
                .status(MANUAL)
                .await
                .filter(|s| s["snapshotIndex"] == snapshot && waits_for_approval(s))
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_gate_waits_passes_on_approval_commit_and_is_not_reused() {
    let repo = TestRepo::new();
    let manifest = seed("08-kyverno-rollout-manual.yaml", "1s");
    repo.write("manual.yaml", &manifest);
    repo.commit("Kyverno with a manual gate");
    let world = World::start(repo, &fleet_yaml(1, "100ms")).await;

    let status = wait_for_gate(&world, 1).await;
    assert!(
        stage(&status, "staging").expect("staging")["awaitingApprovalSince"].is_string(),
        "a typed waiting-since, for metrics and the CLI: {status:#}"
    );
    assert!(
        world
            .profile(&format!("{MANUAL}-production"))
            .await
            .is_none(),
        "nothing past the gate before approval"
    );

    // Approve in git: the field flips to true in a commit made after the run started.
    let approved = manifest.replacen("approved: false", "approved: true", 1);
    world.repo.write("manual.yaml", &approved);
    let approval_sha = world.repo.commit("Approve staging → production");
    world.poke();
    let status = world.wait_phase(MANUAL, "Completed").await;
    assert!(stage(&status, "staging").expect("staging")["awaitingApprovalSince"].is_null());
    let approver = &stage(&status, "staging").expect("staging status")["approver"];
    assert_eq!(approver["sha"], approval_sha.as_str());
    assert_eq!(
        approver["author"]
            .as_str()
            .map(|a| a.contains("Test Author")),
        Some(true)
    );

    // A new version starts a new run. `approved: true` is still in the file, but the approval was
    // given before this run started: it is not reused (docs/architecture.md#d2-approvals-are-consumed-never-lost).
    let v2 = approved.replace("chartVersion:     3.6.2", "chartVersion:     3.7.0");
    assert_ne!(v2, approved, "the seed's chart version line changed shape");
    world.repo.write("manual.yaml", &v2);
    world.repo.commit("Kyverno 3.7.0");
    world.poke();
    wait_for_gate(&world, 2).await;
    let production = world
        .profile(&format!("{MANUAL}-production"))
        .await
        .expect("production");
    assert_eq!(
        production.data.pointer("/spec/helmCharts/0/chartVersion"),
        Some(&Value::from("3.6.2")),
        "production keeps the approved version until the new one is approved"
    );

    // A snapshot-bound annotation approves exactly the current snapshot.
    let status = world.status(MANUAL).await.expect("status");
    let snapshot_id = str_at(&status, "/snapshotId")
        .expect("snapshot id")
        .to_string();
    let annotated = v2.replacen(
        "metadata:\n  name: kyverno-prog-rollout-man\n",
        &format!(
            "metadata:\n  name: kyverno-prog-rollout-man\n  annotations:\n    approve.tollgate.dev/staging: \"{}\"\n",
            &snapshot_id[..12]
        ),
        1,
    );
    assert_ne!(annotated, v2);
    world.repo.write("manual.yaml", &annotated);
    world.repo.commit("Approve snapshot 2 for production");
    world.poke();
    let status = world
        .eventually("run 2 completes", || async {
            world
                .status(MANUAL)
                .await
                .filter(|s| s["snapshotIndex"] == 2 && s["phase"] == "Completed")
        })
        .await;
    assert_eq!(
        stage(&status, "staging").expect("staging")["approver"]["kind"],
        "Annotation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_release_stops_in_first_stage_and_next_commit_recovers() {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "1s"),
    );
    repo.commit("Kyverno 3.5.2");
    let world = World::start(repo, &fleet_yaml(1, "100ms")).await;
    world.wait_phase("kyverno-rollout-auto", "Completed").await;

    // Seed 07's values make Helm fail (`replicas: true`). The emulator cannot run Helm, so the
    // test makes dev's Helm installs fail the way Sveltos would report it.
    let helm_error = "values don't meet the specifications of the schema: replicas: Invalid type. Expected: integer, given: boolean";
    world
        .emulator
        .set_feature_failure("dev-1", Feature::Helm, Some(helm_error))
        .expect("inject failure");
    world.repo.write(
        "kyverno.yaml",
        &seed("07-kyverno-rollout-auto-broken.yaml", "1s"),
    );
    world.repo.commit("Kyverno 3.6.2 (broken values)");
    world.poke();
    let status = world
        .eventually("dev reports the Helm failure", || async {
            world.status("kyverno-rollout-auto").await.filter(|s| {
                s["snapshotIndex"] == 2
                    && stage(s, "dev").is_some_and(|d| d["counts"]["failed"] == 1)
            })
        })
        .await;
    assert_eq!(str_at(&status, "/currentStageName"), Some("dev"));
    let staging = world
        .profile("kyverno-rollout-auto-staging")
        .await
        .expect("staging");
    assert_eq!(
        staging.data.pointer("/spec/helmCharts/0/chartVersion"),
        Some(&Value::from("3.5.2")),
        "the broken release never leaves dev"
    );

    // The fix: Helm installs again, and the next commit carries correct values.
    world
        .emulator
        .set_feature_failure("dev-1", Feature::Helm, None)
        .expect("clear failure");
    world.repo.write(
        "kyverno.yaml",
        &seed("06-kyverno-rollout-auto-v2.yaml", "1s"),
    );
    world.repo.commit("Kyverno 3.6.2 (fixed values)");
    world.poke();
    let status = world
        .eventually("snapshot 3 completes", || async {
            world
                .status("kyverno-rollout-auto")
                .await
                .filter(|s| s["snapshotIndex"] == 3 && s["phase"] == "Completed")
        })
        .await;
    assert_eq!(str_at(&status, "/currentStageName"), Some("production"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_commit_keeps_last_good_snapshot_and_spares_other_promotions() {
    let repo = TestRepo::new();
    repo.write("a.yaml", &seed("05-kyverno-rollout-auto-v1.yaml", "1s"));
    repo.write("b.yaml", &seed("01-core-payment-processor-ci.yaml", "1s"));
    repo.commit("Two promotions");
    let world = World::start(repo, &fleet_yaml(1, "100ms")).await;
    world.wait_phase("kyverno-rollout-auto", "Completed").await;
    world
        .wait_phase("core-payment-processor-ci", "Completed")
        .await;

    // Break one file (a delay that is not a Go duration) and bump the other in the same commit.
    let broken = seed("06-kyverno-rollout-auto-v2.yaml", "5 minutes");
    world.repo.write("a.yaml", &broken);
    let bumped = seed("01-core-payment-processor-ci.yaml", "1s").replace("5.2.0", "5.3.0");
    world.repo.write("b.yaml", &bumped);
    world.repo.commit("Break a, bump b");
    world.poke();

    let status = world
        .eventually("a reports its invalid spec", || async {
            world
                .status("kyverno-rollout-auto")
                .await
                .filter(|s| s["invalidSpec"].is_string())
        })
        .await;
    let error = str_at(&status, "/invalidSpec").expect("error text");
    assert!(error.contains("a.yaml"), "names the file: {error}");
    assert!(error.contains("delay"), "names the field: {error}");
    assert_eq!(
        status["snapshotIndex"], 1,
        "the last good snapshot keeps running"
    );
    world
        .eventually("an InvalidSpec Warning event", || async {
            world
                .emulator
                .write_log()
                .iter()
                .any(|w| {
                    w.resource == "events.events.k8s.io"
                        && w.verb == "create"
                        && w.object["reason"] == "InvalidSpec"
                        && w.object["type"] == "Warning"
                        && w.object["regarding"]["name"] == "kyverno-rollout-auto"
                        && w.object["note"].as_str() == Some(error)
                })
                .then_some(())
        })
        .await;
    let dev = world
        .profile("kyverno-rollout-auto-dev")
        .await
        .expect("dev");
    assert_eq!(
        dev.data.pointer("/spec/helmCharts/0/chartVersion"),
        Some(&Value::from("3.5.2"))
    );
    // The other promotion rolled on.
    let other = world
        .eventually("b runs snapshot 2", || async {
            world
                .status("core-payment-processor-ci")
                .await
                .filter(|s| s["snapshotIndex"] == 2 && s["phase"] == "Completed")
        })
        .await;
    assert_eq!(str_at(&other, "/currentStageName"), Some("production"));

    // Fixing the file resumes from the fixed content.
    world
        .repo
        .write("a.yaml", &seed("06-kyverno-rollout-auto-v2.yaml", "1s"));
    world.repo.commit("Fix a");
    world.poke();
    let status = world
        .eventually("a recovers", || async {
            world
                .status("kyverno-rollout-auto")
                .await
                .filter(|s| s["snapshotIndex"] == 2 && s["phase"] == "Completed")
        })
        .await;
    assert!(status.get("invalidSpec").is_none());
}

/// A promotion that has never been valid still gets a status saying why (and nothing is applied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_valid_promotion_reports_its_error_in_status() {
    let repo = TestRepo::new();
    repo.write(
        "broken.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "5 minutes"),
    );
    repo.commit("A broken promotion");
    let world = World::start(repo, &fleet_yaml(1, "100ms")).await;
    let status = world.wait_phase("kyverno-rollout-auto", "Invalid").await;
    let error = str_at(&status, "/invalidSpec").expect("error text");
    assert!(
        error.contains("broken.yaml") && error.contains("delay"),
        "{error}"
    );
    assert!(world.profiles_of("kyverno-rollout-auto").await.is_empty());
}

/// `tollgate plan` and the controller read one approval rule: a range that bumps the chart and
/// then approves the gate is planned as passing it, and the controller passes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_and_controller_agree_on_an_approval_inside_the_range() {
    let repo = TestRepo::new();
    let manifest = seed("08-kyverno-rollout-manual.yaml", "1s");
    repo.write("manual.yaml", &manifest);
    let base = repo.commit("Kyverno with a manual gate");
    let bumped = manifest.replace("chartVersion:     3.6.2", "chartVersion:     3.7.0");
    assert_ne!(bumped, manifest);
    repo.write("manual.yaml", &bumped);
    repo.commit("Kyverno 3.7.0");
    repo.write(
        "manual.yaml",
        &bumped.replacen("approved: false", "approved: true", 1),
    );
    let approval_sha = repo.commit("Approve staging → production");

    let output = assert_cmd::Command::cargo_bin("tollgate")
        .expect("binary")
        .args([
            "plan", "--from", &base, "--to", "HEAD", "-o", "json", "--repo",
        ])
        .arg(repo.path())
        .output()
        .expect("plan runs");
    let plan: Value = serde_json::from_slice(&output.stdout).expect("plan json");
    let gate = &plan["promotions"][0]["approvals"][0];
    assert_eq!(gate["stage"], "staging", "{plan:#}");
    assert_eq!(gate["need"], "approved", "{plan:#}");
    assert_eq!(gate["approvedBy"], approval_sha.as_str());

    let world = World::start(repo, &fleet_yaml(1, "50ms")).await;
    let status = world.wait_phase(MANUAL, "Completed").await;
    assert_eq!(
        stage(&status, "staging").expect("staging")["approver"]["sha"],
        approval_sha.as_str()
    );
}

//! End to end: trust (issue #33). With `--verify-commits`, only commits signed by a trusted key
//! (made in the test with `ssh-keygen` and `gpg`) roll out; an unverified tip keeps the last
//! verified snapshot running and the GitPromotion says which commit failed and why. Under an
//! approval policy, a manual gate opens at `minApprovals` distinct, signed approvers, and status
//! says why each other approval does not count.

use crate::support;

use std::path::Path;

use serde_json::Value;
use support::{TestRepo, World, fleet_yaml, str_at};
use tollgate_fixtures::signing::{GpgSigner, Signer, SshSigner, have_tool};
use tollgate_fixtures::{promotion, stage};
use tollgate_source::{TrustConfig, VerifyCommits};

pub(crate) fn tools() -> bool {
    have_tool("ssh-keygen", "openssh-client") && have_tool("gpg", "gnupg")
}

/// `web`: staging then production, both automatic.
pub(crate) fn web(version: &str) -> String {
    promotion("web")
        .chart("web", version)
        .stage(stage("staging").selector("env", "staging").auto())
        .stage(stage("production").selector("env", "production").auto())
        .to_yaml()
}

pub(crate) fn verifying(mode: VerifyCommits, keys: &Path) -> TrustConfig {
    TrustConfig {
        verify_commits: Some(mode),
        trusted_keys: Some(keys.to_path_buf()),
    }
}

async fn start(repo: TestRepo, trust: TrustConfig) -> World {
    let mut world = World::without_controller(repo, &fleet_yaml(1, "50ms")).await;
    world.trust = trust;
    world.start_controller().await;
    world
}

fn condition<'s>(status: &'s Value, type_: &str) -> Option<&'s Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Waits until the `CommitVerified` condition is False and names `sha` (and `also`); returns
/// the status.
pub(crate) async fn wait_refused(world: &World, promotion: &str, sha: &str, also: &str) -> Value {
    world
        .eventually(
            &format!("{promotion} reports {sha} not verified"),
            || async {
                let status = world.status(promotion).await?;
                let refused = condition(&status, "CommitVerified").is_some_and(|c| {
                    c["status"] == "False"
                        && c["message"]
                            .as_str()
                            .is_some_and(|m| m.contains(&sha[..7]) && m.contains(also))
                });
                refused.then_some(status)
            },
        )
        .await
}

pub(crate) async fn wait_run_of(world: &World, promotion: &str, sha: &str) -> Value {
    world
        .eventually(
            &format!("{promotion} completes the run of {sha}"),
            || async {
                let status = world.status(promotion).await?;
                (status["snapshotCommit"] == sha && status["phase"] == "Completed")
                    .then_some(status)
            },
        )
        .await
}

pub(crate) async fn chart_version(world: &World, profile: &str) -> Option<String> {
    let profile = world.profile(profile).await?;
    str_at(&profile.data, "/spec/helmCharts/0/chartVersion").map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_head_is_not_rolled_out_and_says_why() {
    if !tools() {
        return;
    }
    let alice = SshSigner::new("alice");
    let keys = tempfile::tempdir().expect("temp dir");
    alice.trust_in(keys.path());
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    let signed = repo.commit_signed(&alice, "web 1.0.0, signed");
    let world = start(repo, verifying(VerifyCommits::Head, keys.path())).await;
    wait_run_of(&world, "web", &signed).await;

    world.repo.write("web.yaml", &web("2.0.0"));
    let unsigned = world.repo.commit("web 2.0.0, unsigned");
    world.poke();
    let status = wait_refused(&world, "web", &unsigned, "unsigned").await;
    let refused = condition(&status, "CommitVerified").expect("condition");
    let message = refused["message"].as_str().unwrap_or_default();
    assert_eq!(refused["reason"], "CommitNotVerified");
    assert!(
        message.contains("unsigned")
            && message.contains(&format!(
                "the last verified commit {} keeps running",
                &signed[..7]
            )),
        "{message}"
    );
    assert_eq!(status["snapshotCommit"], signed.as_str(), "{status:#}");
    assert_eq!(
        chart_version(&world, "web-production").await.as_deref(),
        Some("1.0.0"),
        "the unsigned version reaches no profile"
    );
    // Events are published after the status write that carries the refusal.
    world
        .eventually("a CommitNotVerified event names the commit", || async {
            let events = world.events_of("web").await;
            events
                .iter()
                .any(|(reason, note)| {
                    reason == "CommitNotVerified" && note.contains(&unsigned[..7])
                })
                .then_some(())
        })
        .await;
    let (handle, _) = world.controller.as_ref().expect("controller");
    assert!(
        *handle.ready.borrow(),
        "an unverified commit is no readiness failure"
    );
    // What the shipped alert (TollgateCommitRefused) reads.
    assert!(
        world
            .metrics
            .encode()
            .contains("\ntollgate_git_tip_refused 1\n"),
        "the refusal is not on /metrics"
    );

    // A signed commit on top rolls out (the unsigned change folds into it), and the condition
    // says so.
    world.repo.write("web.yaml", &web("3.0.0"));
    let signed_again = world.repo.commit_signed(&alice, "web 3.0.0, signed");
    world.poke();
    let status = wait_run_of(&world, "web", &signed_again).await;
    assert_eq!(
        condition(&status, "CommitVerified").map(|c| &c["status"]),
        Some(&Value::from("True"))
    );
    assert_eq!(
        chart_version(&world, "web-production").await.as_deref(),
        Some("3.0.0")
    );
    assert!(
        world
            .metrics
            .encode()
            .contains("\ntollgate_git_tip_refused 0\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_refuses_an_unsigned_commit_in_the_middle_and_accepts_it_after_a_seal() {
    if !tools() {
        return;
    }
    let gerda = GpgSigner::new("gerda");
    let keys = tempfile::tempdir().expect("temp dir");
    gerda.trust_in(keys.path());
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    let start_sha = repo.commit_signed(&gerda, "web 1.0.0");
    let world = start(repo, verifying(VerifyCommits::Strict, keys.path())).await;
    wait_run_of(&world, "web", &start_sha).await;

    world.repo.write("web.yaml", &web("1.1.0"));
    let middle = world.repo.commit("web 1.1.0, unsigned");
    world.repo.write("web.yaml", &web("1.2.0"));
    let signed_tip = world.repo.commit_signed(&gerda, "web 1.2.0, signed");
    world.poke();
    // The refusal names the unsigned commit, also once the signed tip is on top of it.
    let status = wait_refused(&world, "web", &middle, &signed_tip[..7]).await;
    let message = condition(&status, "CommitVerified").expect("condition")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.contains("Strict") && message.contains("Tollgate-Seal"),
        "{message}"
    );
    assert_eq!(status["snapshotCommit"], start_sha.as_str());
    assert_eq!(
        chart_version(&world, "web-production").await.as_deref(),
        Some("1.0.0")
    );

    let seal = world.repo.commit_empty_signed(
        &gerda,
        "Vouch for 1.1.0\n\nTollgate-Seal: 1.1.0 was reviewed in the release meeting",
    );
    world.poke();
    world
        .eventually("the sealed history rolls out", || async {
            let status = world.status("web").await?;
            let verified =
                condition(&status, "CommitVerified").is_some_and(|c| c["status"] == "True");
            (verified
                && status["phase"] == "Completed"
                && status["snapshotCommit"] != start_sha.as_str())
            .then_some(())
        })
        .await;
    assert_eq!(
        chart_version(&world, "web-production").await.as_deref(),
        Some("1.2.0"),
        "after the seal {seal}"
    );
}

/// `gated`: staging waits for approval before production.
fn gated(version: &str) -> String {
    promotion("gated")
        .chart("web", version)
        .stage(stage("staging").selector("env", "staging").manual())
        .stage(stage("production").selector("env", "production").auto())
        .to_yaml()
}

const TWO_APPROVERS: &str = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: gates\nspec:\n  approvals:\n    staging:\n      approvers: [alice@example.com, bob@example.com, carol@example.com]\n      minApprovals: 2\n      forbidSelfApproval: true\n      requireSignature: true\n";

fn reviews(status: &Value) -> Vec<(String, bool, String)> {
    let staging = status["stages"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "staging"))
        .cloned()
        .unwrap_or_default();
    staging["approvals"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|r| {
                    (
                        r["approver"].as_str().unwrap_or_default().to_string(),
                        r["counts"] == true,
                        r["reason"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn approve(repo: &TestRepo, signer: &dyn Signer, snapshot: &str) -> String {
    repo.commit_empty_signed(
        signer,
        &format!("Approve staging\n\nTollgate-Approve: gated/staging@{snapshot}"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_distinct_signed_approvals_open_a_gate_and_the_others_say_why_not() {
    if !tools() {
        return;
    }
    let (alice, bob, carol, dave) = (
        SshSigner::new("alice"),
        SshSigner::new("bob"),
        GpgSigner::new("carol"),
        SshSigner::new("dave"),
    );
    let keys = tempfile::tempdir().expect("temp dir");
    for signer in [&alice as &dyn Signer, &bob, &carol, &dave] {
        signer.trust_in(keys.path());
    }
    let repo = TestRepo::new();
    repo.write("gated.yaml", &gated("1.0.0"));
    repo.write("policy.yaml", TWO_APPROVERS);
    // Bob brings the content: his approval is a self-approval.
    repo.commit_signed(&bob, "gated 1.0.0");
    let trust = TrustConfig {
        verify_commits: None,
        trusted_keys: Some(keys.path().to_path_buf()),
    };
    let world = start(repo, trust).await;
    let status = world
        .eventually("the staging gate waits", || async {
            let status = world.status("gated").await?;
            (status["phase"] == "Waiting").then_some(status)
        })
        .await;
    let snapshot = status["snapshotId"].as_str().expect("snapshot id")[..12].to_string();

    approve(&world.repo, &dave, &snapshot);
    approve(&world.repo, &bob, &snapshot);
    approve(&world.repo, &alice, &snapshot);
    approve(&world.repo, &alice, &snapshot);
    let unsigned = format!("Unsigned approval\n\nTollgate-Approve: gated/staging@{snapshot}");
    world
        .repo
        .git(&["commit", "-q", "--allow-empty", "-m", &unsigned]);
    approve(&world.repo, &carol, "0123456789ab");
    world.poke();
    let status = world
        .eventually("six approvals reviewed", || async {
            let status = world.status("gated").await?;
            (reviews(&status).len() == 6).then_some(status)
        })
        .await;
    let got = reviews(&status);
    let reason = |i: usize| got[i].2.as_str();
    assert!(reason(0).starts_with("not an approver"), "{got:?}");
    assert!(reason(1).starts_with("self-approval"), "{got:?}");
    assert!(got[2].1 && got[2].0 == "alice@example.com", "{got:?}");
    assert!(reason(3).starts_with("duplicate approver"), "{got:?}");
    assert_eq!(reason(4), "unsigned", "{got:?}");
    assert!(reason(5).starts_with("for another snapshot"), "{got:?}");
    assert_eq!(status["phase"], "Waiting", "one approver is not two");
    assert!(world.profile("gated-production").await.is_none());

    approve(&world.repo, &carol, &snapshot);
    world.poke();
    let status = world.wait_phase("gated", "Completed").await;
    let got = reviews(&status);
    let counted: Vec<&str> = got.iter().filter(|r| r.1).map(|r| r.0.as_str()).collect();
    assert_eq!(
        counted,
        ["alice@example.com", "carol@example.com"],
        "{got:?}"
    );
}

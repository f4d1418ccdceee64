//! End to end: trust against insiders (issue #44). Each test is one attack by someone with push
//! access and no trusted key (Mallory), or a trusted developer who is not an approver (Carol),
//! against a production gate that wants signed approvals from Alice and Bob. Keys are real
//! (`ssh-keygen`); the controller runs against the embedded cluster.

use crate::support;

use std::path::Path;

use serde_json::Value;
use support::{TestRepo, World, fleet_yaml, str_at, tollgate_binary};
use tollgate_fixtures::signing::{Signer, SshSigner, have_tool};
use tollgate_fixtures::{promotion, stage};
use tollgate_source::{TrustConfig, VerifyCommits};

/// Alice and Bob approve production; Carol develops (trusted, not an approver); Mallory has no
/// key at all. `keys` trusts the first three.
struct Cast {
    alice: SshSigner,
    bob: SshSigner,
    carol: SshSigner,
    keys: tempfile::TempDir,
}

fn cast() -> Option<Cast> {
    if !have_tool("ssh-keygen", "openssh-client") {
        return None;
    }
    let cast = Cast {
        alice: SshSigner::new("alice"),
        bob: SshSigner::new("bob"),
        carol: SshSigner::new("carol"),
        keys: tempfile::tempdir().expect("temp dir"),
    };
    for signer in [&cast.alice, &cast.bob, &cast.carol] {
        signer.trust_in(cast.keys.path());
    }
    Some(cast)
}

/// `web`: staging, whose manual gate (or `auto` when asked) holds the way to production.
fn web(version: &str, gated: bool) -> String {
    let staging = stage("staging").selector("env", "staging");
    let staging = match gated {
        true => staging.manual(),
        false => staging.auto(),
    };
    promotion("web")
        .chart("web", version)
        .stage(staging)
        .stage(stage("production").selector("env", "production").auto())
        .to_yaml()
}

/// `web` with an approval annotation for staging's gate.
fn web_annotated(version: &str, value: &str) -> String {
    promotion("web")
        .annotation("approve.tollgate.dev/staging", value)
        .chart("web", version)
        .stage(stage("staging").selector("env", "staging").manual())
        .stage(stage("production").selector("env", "production").auto())
        .to_yaml()
}

/// The gate policy: `min` signed approvals from the listed approvers to leave staging.
fn gates(min: u32, approvers: &[&str]) -> String {
    format!(
        "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: gates\nspec:\n  approvals:\n    staging:\n      approvers: [{}]\n      minApprovals: {min}\n      requireSignature: true\n",
        approvers.join(", ")
    )
}

/// web 1.0.0, gated at staging under `policy`, committed signed by Carol.
fn gated_repo(cast: &Cast, policy: &str) -> TestRepo {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0", true));
    repo.write("policy.yaml", policy);
    repo.commit_signed(&cast.carol, "web 1.0.0");
    repo
}

fn trust(mode: Option<VerifyCommits>, keys: &Path) -> TrustConfig {
    TrustConfig {
        verify_commits: mode,
        trusted_keys: Some(keys.to_path_buf()),
    }
}

async fn start(repo: TestRepo, trust: TrustConfig) -> World {
    let mut world = World::without_controller(repo, &fleet_yaml(1, "50ms")).await;
    world.trust = trust;
    world.start_controller().await;
    world
}

fn staging(status: &Value) -> Value {
    status["stages"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "staging"))
        .cloned()
        .unwrap_or_default()
}

/// Each review of the staging gate: (commit, counts, reason).
fn reviews(status: &Value) -> Vec<(String, bool, String)> {
    staging(status)["approvals"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|r| {
                    (
                        r["sha"].as_str().unwrap_or_default().to_string(),
                        r["counts"] == true,
                        r["reason"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until run `index` waits at the staging gate; returns its snapshot id (12 chars).
async fn gate_waits(world: &World, index: u64) -> String {
    let status = world
        .eventually(
            &format!("run #{index} waits at the staging gate"),
            || async {
                let status = world.status("web").await?;
                let waiting = status["snapshotIndex"] == index
                    && status["phase"] == "Waiting"
                    && staging(&status)["activity"]["kind"] == "AwaitingApproval";
                waiting.then_some(status)
            },
        )
        .await;
    status["snapshotId"].as_str().expect("snapshot id")[..12].to_string()
}

/// A signed statement commit approving the staging gate of snapshot `id`.
fn approve(repo: &TestRepo, signer: &dyn Signer, id: &str) -> String {
    repo.commit_empty_signed(
        signer,
        &format!("Approve staging\n\nTollgate-Approve: web/staging@{id}"),
    )
}

/// Runs git as Mallory (her name and e-mail as tagger or committer, no key).
fn as_mallory(repo: &TestRepo, args: &[&str]) {
    let mut all = vec![
        "-c",
        "user.name=Mallory",
        "-c",
        "user.email=mallory@example.com",
    ];
    all.extend_from_slice(args);
    repo.git(&all);
}

/// An unsigned commit whose author line says `author` (anyone can write it).
fn commit_as(repo: &TestRepo, author: &str, message: &str) -> String {
    repo.git(&["add", "-A"]);
    repo.git(&[
        "-c",
        "commit.gpgsign=false",
        "commit",
        "-q",
        "--author",
        author,
        "-m",
        message,
    ]);
    repo.git(&["rev-parse", "HEAD"])
}

async fn chart_version(world: &World, profile: &str) -> Option<String> {
    let profile = world.profile(profile).await?;
    str_at(&profile.data, "/spec/helmCharts/0/chartVersion").map(str::to_string)
}

/// Waits until the staging gate has reviewed `count` approvals; fails at once if production
/// got a profile meanwhile (the gate opened).
async fn reviewed(world: &World, count: usize) -> Value {
    world
        .eventually(&format!("{count} approvals reviewed"), || async {
            let status = world.status("web").await?;
            assert!(
                world.profile("web-production").await.is_none(),
                "the gate opened: {status:#}"
            );
            (reviews(&status).len() == count).then_some(status)
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_approval_folded_into_a_signed_commit_is_not_the_signers_approval() {
    let Some(cast) = cast() else { return };
    let repo = gated_repo(&cast, &gates(2, &["alice@example.com", "bob@example.com"]));
    let world = start(repo, trust(Some(VerifyCommits::Head), cast.keys.path())).await;
    let id = gate_waits(&world, 1).await;
    approve(&world.repo, &cast.alice, &id);
    world.poke();
    reviewed(&world, 1).await;

    // Mallory annotates the approval (unsigned, as Bob); Bob then signs an unrelated commit,
    // which under Head folds Mallory's in.
    world.repo.write("web.yaml", &web_annotated("1.0.0", &id));
    let mallory = commit_as(&world.repo, "Bob <bob@example.com>", "tidy web.yaml");
    world.repo.write("README.md", "typo fixed\n");
    world.repo.commit_signed(&cast.bob, "docs: typo");
    world.poke();
    let status = reviewed(&world, 2).await;
    let got = reviews(&status);
    assert_eq!(
        got[1].0, mallory,
        "the approval is Mallory's commit's: {got:?}"
    );
    assert!(!got[1].1 && got[1].2 == "unsigned", "{got:?}");
    assert_eq!(status["phase"], "Waiting");
    // Every view shows the quorum and who did not count.
    let detail = status_cli(&world, &["status", "web"]);
    assert!(detail.contains("staging 1 of 2 approvals"), "{detail}");
    assert!(
        detail.contains(&format!(
            "{} bob@example.com does not count: unsigned",
            &mallory[..7]
        )),
        "{detail}"
    );
    let list = status_cli(&world, &["status"]);
    assert!(list.contains("1 of 2 distinct approvers"), "{list}");
}

/// `tollgate status …` against the world's cluster, its words on one line (the table wraps
/// cells at 80 columns when piped).
fn status_cli(world: &World, args: &[&str]) -> String {
    let output = tollgate_binary()
        .args(args)
        .arg("--kubeconfig")
        .arg(world.kubeconfig())
        .output()
        .expect("tollgate status");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout)
        .replace(['│', '┆'], " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seal_copied_from_a_tag_into_a_signed_merge_vouches_for_nothing() {
    let Some(cast) = cast() else { return };
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0", false));
    let start_sha = repo.commit_signed(&cast.alice, "web 1.0.0");
    let world = start(repo, trust(Some(VerifyCommits::Strict), cast.keys.path())).await;
    world.wait_phase("web", "Completed").await;

    // Mallory's unsigned 6.6.6 on a side branch, with a tag whose message ends in a seal.
    world.repo.git(&["checkout", "-q", "-b", "release"]);
    world.repo.write("web.yaml", &web("6.6.6", false));
    let evil = commit_as(&world.repo, "Mallory <mallory@example.com>", "web 6.6.6");
    as_mallory(
        &world.repo,
        &[
            "tag",
            "-a",
            "v6.6.6",
            "-m",
            "Release 6.6.6\n\nTollgate-Seal: reviewed",
        ],
    );
    world.repo.git(&["checkout", "-q", "main"]);
    world.repo.write("NOTES.md", "notes\n");
    world.repo.commit_signed(&cast.alice, "notes");
    // Alice merges the tag as git proposes: the tag's message lands in her signed merge.
    cast.alice.configure(&world.repo);
    world
        .repo
        .git(&["merge", "-q", "-S", "--no-edit", "v6.6.6"]);
    world.repo.unsign();
    let message = world.repo.git(&["log", "-1", "--format=%B"]);
    assert!(message.contains("Tollgate-Seal: reviewed"), "{message}");
    world.poke();
    let status = world
        .eventually("the unsigned 6.6.6 is refused", || async {
            let status = world.status("web").await?;
            let refused = status["conditions"].as_array()?.iter().any(|c| {
                c["type"] == "CommitVerified"
                    && c["status"] == "False"
                    && c["message"]
                        .as_str()
                        .is_some_and(|m| m.contains(&evil[..7]))
            });
            refused.then_some(status)
        })
        .await;
    assert_ne!(status["snapshotCommit"], Value::Null);
    assert_eq!(
        chart_version(&world, "web-production").await.as_deref(),
        Some("1.0.0"),
        "started at {start_sha}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_copied_from_a_tag_into_a_signed_merge_is_nobodys_approval() {
    let Some(cast) = cast() else { return };
    let repo = gated_repo(&cast, &gates(1, &["alice@example.com", "bob@example.com"]));
    let world = start(repo, trust(None, cast.keys.path())).await;
    let id = gate_waits(&world, 1).await;

    world.repo.git(&["checkout", "-q", "-b", "side"]);
    world.repo.write("NOTES.md", "side notes\n");
    commit_as(&world.repo, "Mallory <mallory@example.com>", "notes");
    let message = format!("Notes\n\nTollgate-Approve: web/staging@{id}");
    as_mallory(&world.repo, &["tag", "-a", "notes-1", "-m", &message]);
    world.repo.git(&["checkout", "-q", "main"]);
    world.repo.write("README.md", "readme\n");
    world.repo.commit_signed(&cast.carol, "readme");
    cast.alice.configure(&world.repo);
    world
        .repo
        .git(&["merge", "-q", "-S", "--no-edit", "notes-1"]);
    world.repo.unsign();
    let merge = world.repo.git(&["rev-parse", "HEAD"]);
    // Bob's real approval afterwards: the gate opens on it, not on the merge.
    let bob = approve(&world.repo, &cast.bob, &id);
    world.poke();
    let status = world.wait_phase("web", "Completed").await;
    let got = reviews(&status);
    assert!(
        got.iter().all(|(sha, _, _)| *sha != merge),
        "the merge is no approval: {got:?}"
    );
    let counted: Vec<&str> = got.iter().filter(|r| r.1).map(|r| r.0.as_str()).collect();
    assert_eq!(counted, [bob.as_str()], "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_binds_whatever_the_stage_trigger_says() {
    let Some(cast) = cast() else { return };
    let repo = gated_repo(&cast, &gates(1, &["alice@example.com"]));
    let world = start(repo, trust(Some(VerifyCommits::Head), cast.keys.path())).await;
    let id = gate_waits(&world, 1).await;

    // Mallory turns the gate into `auto` (unsigned); Carol signs an unrelated commit on top.
    world.repo.write("web.yaml", &web("1.0.0", false));
    commit_as(
        &world.repo,
        "Mallory <mallory@example.com>",
        "staging: auto",
    );
    world.repo.write("README.md", "readme\n");
    world.repo.commit_signed(&cast.carol, "readme");
    world.poke();
    world
        .eventually("the edit is seen and the gate still waits", || async {
            let status = world.status("web").await?;
            assert!(
                world.profile("web-production").await.is_none(),
                "the gate was removed: {status:#}"
            );
            let message = status["message"].as_str()?.to_string();
            message.contains("whatever its trigger says").then_some(())
        })
        .await;
    approve(&world.repo, &cast.alice, &id);
    world.poke();
    world.wait_phase("web", "Completed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_made_before_the_run_started_is_not_fresh_when_merged_later() {
    let Some(cast) = cast() else { return };
    let repo = gated_repo(&cast, &gates(1, &["alice@example.com"]));
    let world = start(repo, trust(None, cast.keys.path())).await;
    let id = gate_waits(&world, 1).await;

    // During run 1, Alice approves on a branch nobody merges (an hour ago by her clock).
    world.repo.git(&["checkout", "-q", "-b", "stale"]);
    cast.alice.configure(&world.repo);
    let past = chrono::Utc::now() - chrono::Duration::hours(1);
    let date = past.format("%Y-%m-%dT%H:%M:%S+0000").to_string();
    let env: Vec<(String, std::path::PathBuf)> = [
        ("GIT_COMMITTER_DATE".to_string(), date.clone().into()),
        ("GIT_AUTHOR_DATE".to_string(), date.into()),
    ]
    .into_iter()
    .chain(cast.alice.env())
    .collect();
    world.repo.git_env(
        &[
            "commit",
            "-q",
            "-S",
            "--allow-empty",
            "-m",
            &format!("Approve staging\n\nTollgate-Approve: web/staging@{id}"),
        ],
        &env,
    );
    world.repo.unsign();
    let stale = world.repo.git(&["rev-parse", "HEAD"]);
    world.repo.git(&["checkout", "-q", "main"]);

    // Run 2 (2.0.0), then a revert: run 3 is the same content as run 1, the same snapshot id.
    world.repo.write("web.yaml", &web("2.0.0", true));
    world.repo.commit_signed(&cast.carol, "web 2.0.0");
    world.poke();
    gate_waits(&world, 2).await;
    world.repo.write("web.yaml", &web("1.0.0", true));
    world.repo.commit_signed(&cast.carol, "back to 1.0.0");
    world.poke();
    assert_eq!(gate_waits(&world, 3).await, id, "the same content");

    // Mallory merges the stale branch (unsigned merge).
    as_mallory(
        &world.repo,
        &["merge", "-q", "--no-ff", "--no-edit", "stale"],
    );
    world.poke();
    let status = reviewed(&world, 1).await;
    let got = reviews(&status);
    assert_eq!(got[0].0, stale);
    assert!(
        !got[0].1 && got[0].2.contains("before this run started"),
        "{got:?}"
    );
}

/// `tollgate approve` as an approver runs it: `KUBECONFIG` set (they read status), their own
/// signing key configured in the clone.
fn approve_cli(world: &World, signer: &dyn Signer, extra: &[&str]) -> std::process::Output {
    signer.configure(&world.repo);
    let mut command = tollgate_binary();
    command
        .args(["approve", "web", "staging", "--repo"])
        .arg(world.repo.path())
        .args(extra)
        .env("KUBECONFIG", world.kubeconfig());
    for (key, value) in signer.env() {
        command.env(key, value);
    }
    let output = command.output().expect("tollgate approve");
    world.repo.unsign();
    output
}

fn branch_count(repo: &TestRepo) -> usize {
    repo.git(&["for-each-ref", "--format=%(refname)", "refs/heads"])
        .lines()
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_refuses_a_tip_carrying_commits_that_would_not_verify() {
    let Some(cast) = cast() else { return };
    let repo = gated_repo(&cast, &gates(2, &["alice@example.com", "bob@example.com"]));
    let world = start(repo, trust(Some(VerifyCommits::Head), cast.keys.path())).await;
    gate_waits(&world, 1).await;

    world.repo.write("web.yaml", &web("6.6.6", true));
    let evil = commit_as(&world.repo, "Mallory <mallory@example.com>", "web 6.6.6");
    world.poke();
    world
        .eventually("the controller refuses 6.6.6", || async {
            let status = world.status("web").await?;
            let text = status["conditions"].to_string();
            text.contains(&evil[..7]).then_some(())
        })
        .await;
    let branches = branch_count(&world.repo);
    let list = status_cli(&world, &["status"]);
    assert!(
        list.contains("refused: commit") && list.contains(&evil[..7]),
        "{list}"
    );
    let detail = status_cli(&world, &["status", "web"]);
    assert!(
        detail.contains("Refused:") && detail.contains("unsigned"),
        "{detail}"
    );

    // As status told her (the cluster knows what is verified).
    let output = approve_cli(&world, &cast.alice, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&evil[..7]), "{stderr}");
    // With the controller's verification given on the command line, and no cluster.
    let keys = cast.keys.path().display().to_string();
    let mut command = tollgate_binary();
    command
        .args(["approve", "web", "staging", "--repo"])
        .arg(world.repo.path())
        .args(["--verify-commits", "Head", "--trusted-keys", &keys])
        .env_remove("KUBECONFIG");
    cast.bob.configure(&world.repo);
    let output = command.output().expect("tollgate approve");
    world.repo.unsign();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unsigned"), "{stderr}");
    assert_eq!(branch_count(&world.repo), branches, "nothing committed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_names_the_run_that_waits_not_the_tip() {
    let Some(cast) = cast() else { return };
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0", true));
    let policy = gates(1, &["alice@example.com"]) + "  onNewSnapshot: FinishCurrent\n";
    repo.write("policy.yaml", &policy);
    repo.commit_signed(&cast.carol, "web 1.0.0");
    let world = start(repo, trust(None, cast.keys.path())).await;
    let id = gate_waits(&world, 1).await;
    // 2.0.0 lands while run #1 waits: it is queued behind it.
    world.repo.write("web.yaml", &web("2.0.0", true));
    world.repo.commit_signed(&cast.carol, "web 2.0.0");
    world.poke();
    world
        .eventually("#2 is queued behind #1", || async {
            let status = world.status("web").await?;
            (status["queuedSnapshot"] == 2 && status["snapshotIndex"] == 1).then_some(())
        })
        .await;
    let output = approve_cli(&world, &cast.alice, &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains(&format!("snapshot #1 ({id}")),
        "approves the run that waits: {stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_key_never_rolls_running_content_back() {
    let Some(cast) = cast() else { return };
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0", false));
    repo.commit_signed(&cast.alice, "web 1.0.0");
    repo.write("web.yaml", &web("2.0.0", false));
    let bobs = repo.commit_signed(&cast.bob, "web 2.0.0");
    let world = start(repo, trust(Some(VerifyCommits::Head), cast.keys.path())).await;
    world.wait_phase("web", "Completed").await;
    assert_eq!(
        chart_version(&world, "web-production").await.as_deref(),
        Some("2.0.0")
    );

    // Bob's key goes: his commit, which runs, no longer verifies.
    std::fs::remove_file(cast.keys.path().join("bob.sshpub")).expect("remove bob's key");
    world.poke();
    let status = world
        .eventually("the change of keys is reported", || async {
            let status = world.status("web").await?;
            let kept = status["conditions"].as_array()?.iter().any(|c| {
                c["type"] == "CommitVerified"
                    && c["status"] == "False"
                    && c["message"]
                        .as_str()
                        .is_some_and(|m| m.contains(&bobs[..7]) && m.contains("keeps running"))
            });
            kept.then_some(status)
        })
        .await;
    assert_eq!(status["snapshotCommit"], bobs.as_str(), "{status:#}");
    assert_eq!(status["phase"], "Completed", "{status:#}");
    for profile in ["web-staging", "web-production"] {
        assert_eq!(
            chart_version(&world, profile).await.as_deref(),
            Some("2.0.0"),
            "{profile} keeps what runs"
        );
    }
    // Events are published after the status write that carries the transition.
    world
        .eventually(
            "a CommitNotVerified event says it keeps running",
            || async {
                let events = world.events_of("web").await;
                events
                    .iter()
                    .any(|(reason, note)| {
                        reason == "CommitNotVerified" && note.contains("keeps running")
                    })
                    .then_some(())
            },
        )
        .await;

    // A newer commit Bob signs is held; Alice's verified one replaces what runs.
    world.repo.write("web.yaml", &web("3.0.0", false));
    let held = world.repo.commit_signed(&cast.bob, "web 3.0.0");
    world.poke();
    world
        .eventually("Bob's new commit is refused", || async {
            let status = world.status("web").await?;
            status["conditions"]
                .to_string()
                .contains(&held[..7])
                .then_some(())
        })
        .await;
    assert_eq!(
        chart_version(&world, "web-production").await.as_deref(),
        Some("2.0.0")
    );
    world.repo.write("web.yaml", &web("4.0.0", false));
    let alices = world.repo.commit_signed(&cast.alice, "web 4.0.0");
    world.poke();
    world
        .eventually("Alice's commit rolls out", || async {
            let status = world.status("web").await?;
            (status["snapshotCommit"] == alices.as_str() && status["phase"] == "Completed")
                .then_some(())
        })
        .await;
}

/// `tollgate ARGS --repo REPO` with the given signer's git configuration; (exit code, stdout,
/// stderr).
fn cli(repo: &TestRepo, signer: Option<&dyn Signer>, args: &[&str]) -> (i32, String, String) {
    if let Some(signer) = signer {
        signer.configure(repo);
    }
    let mut command = tollgate_binary();
    command.args(args).arg("--repo").arg(repo.path());
    for (key, value) in signer.map(|s| s.env()).unwrap_or_default() {
        command.env(key, value);
    }
    let output = command.env_remove("KUBECONFIG").output().expect("tollgate");
    repo.unsign();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The chart version of each snapshot `tollgate history -o json` lists, by index.
fn history_versions(repo: &TestRepo, extra: &[&str]) -> Vec<(u64, String)> {
    let mut args = vec!["history", "web", "-o", "json"];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = cli(repo, None, &args);
    assert_eq!(code, 0, "{stderr}");
    let document: Value = serde_json::from_str(&stdout).expect("json");
    document["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| {
            let subject = s["commit"]["subject"].as_str().unwrap_or_default();
            (
                s["index"].as_u64().unwrap_or_default(),
                subject.trim_start_matches("web ").to_string(),
            )
        })
        .collect()
}

#[test]
fn history_and_rollback_number_snapshots_as_the_controller_does() {
    let Some(cast) = cast() else { return };
    let repo = TestRepo::new();
    for (version, signer) in [
        ("1.0.0", Some(&cast.alice)),
        ("6.6.6", None),
        ("2.0.0", Some(&cast.alice)),
        ("3.0.0", Some(&cast.alice)),
    ] {
        repo.write("web.yaml", &web(version, false));
        match signer {
            Some(signer) => repo.commit_signed(signer, &format!("web {version}")),
            None => commit_as(
                &repo,
                "Mallory <mallory@example.com>",
                &format!("web {version}"),
            ),
        };
    }
    let keys = cast.keys.path().display().to_string();
    let head = ["--verify-commits", "Head", "--trusted-keys", keys.as_str()];
    let versions = |v: &[(u64, &str)]| -> Vec<(u64, String)> {
        v.iter().map(|(i, s)| (*i, s.to_string())).collect()
    };
    assert_eq!(
        history_versions(&repo, &head),
        versions(&[(1, "1.0.0"), (2, "2.0.0"), (3, "3.0.0")]),
        "the unsigned 6.6.6 is no snapshot"
    );
    let mut args = vec!["rollback", "web", "--to", "2"];
    args.extend_from_slice(&head);
    let (code, stdout, stderr) = cli(&repo, Some(&cast.alice), &args);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let branch = repo.git(&[
        "for-each-ref",
        "--format=%(refname:short)",
        "refs/heads/tollgate",
    ]);
    let restored = repo.git(&["show", &format!("{branch}:web.yaml")]);
    assert!(
        restored.contains("2.0.0") && !restored.contains("6.6.6"),
        "{restored}"
    );
}

#[test]
fn a_seal_vouches_for_unsigned_history_and_copied_trailers_are_noted_in_history() {
    let Some(cast) = cast() else { return };
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0", true));
    repo.commit_signed(&cast.alice, "web 1.0.0");
    repo.write("web.yaml", &web("2.0.0", true));
    commit_as(&repo, "Mallory <mallory@example.com>", "web 2.0.0");
    // A content commit whose message ends in an approval trailer: text, not a statement.
    repo.write("web.yaml", &web("3.0.0", true));
    let copied = repo.commit_signed(
        &cast.alice,
        "web 3.0.0\n\nTollgate-Approve: web/staging@0123456789ab",
    );
    let keys = cast.keys.path().display().to_string();
    let strict = [
        "--verify-commits",
        "Strict",
        "--trusted-keys",
        keys.as_str(),
    ];
    assert_eq!(
        history_versions(&repo, &strict).len(),
        1,
        "2.0.0 is unsigned"
    );

    repo.git(&["config", "--unset", "user.signingKey"]);
    let (code, stdout, stderr) = cli(&repo, None, &["seal", "2.0.0 reviewed in #12"]);
    assert_eq!(
        code, 2,
        "a seal git would not sign is refused: {stdout}{stderr}"
    );
    let (code, stdout, stderr) = cli(&repo, Some(&cast.alice), &["seal", "2.0.0 reviewed in #12"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let branch = repo.git(&[
        "for-each-ref",
        "--format=%(refname:short)",
        "refs/heads/tollgate",
    ]);
    repo.git(&["merge", "-q", "--ff-only", &branch]);
    let sealed = history_versions(&repo, &strict);
    assert_eq!(sealed.last().map(|(i, _)| *i), Some(2), "{sealed:?}");

    let mut args = vec!["history", "web"];
    args.extend_from_slice(&strict);
    let (code, stdout, stderr) = cli(&repo, None, &args);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("Ignored approval trailers") && stdout.contains(&copied[..7]),
        "{stdout}"
    );
}

/// `gates` with Bob as its admin, gating staging (approver Alice) unless `gating` is false.
fn governed(gating: bool) -> String {
    let approvals = match gating {
        true => {
            "  approvals:\n    staging:\n      approvers: [alice@example.com]\n      requireSignature: true\n"
        }
        false => "",
    };
    format!(
        "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: gates\nspec:\n  admins: [bob@example.com]\n{approvals}"
    )
}

fn policy_condition(status: &Value) -> Option<(String, String)> {
    let condition = status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "PolicyValid")?;
    Some((
        condition["reason"].as_str()?.to_string(),
        condition["message"].as_str()?.to_string(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_change_takes_effect_only_once_an_admin_approves_it() {
    let Some(cast) = cast() else { return };
    let repo = TestRepo::new();
    // Staging's trigger is `auto`: only the policy gates it.
    repo.write("web.yaml", &web("1.0.0", false));
    repo.write("policy.yaml", &governed(true));
    repo.commit_signed(&cast.carol, "web 1.0.0");
    let world = start(repo, trust(None, cast.keys.path())).await;
    gate_waits(&world, 1).await;

    // Carol (trusted, no admin) lifts the gate in the policy itself.
    world.repo.write("policy.yaml", &governed(false));
    let lift = world.repo.commit_signed(&cast.carol, "gates: no approvals");
    world.poke();
    let status = world
        .eventually("the change waits for an admin", || async {
            let status = world.status("web").await?;
            let (reason, message) = policy_condition(&status)?;
            (reason == "PolicyChangeUnapproved" && message.contains(&lift[..7])).then_some(status)
        })
        .await;
    assert_eq!(status["phase"], "Held", "{status:#}");
    let (_, message) = policy_condition(&status).expect("condition");
    assert!(
        message.contains("tollgate approve --policy gates"),
        "{message}"
    );
    assert!(world.profile("web-production").await.is_none());
    // Events are published after the status write that carries the transition.
    world
        .eventually("a PolicyChangeUnapproved event", || async {
            let events = world.events_of("web").await;
            events
                .iter()
                .any(|(reason, _)| reason == "PolicyChangeUnapproved")
                .then_some(())
        })
        .await;

    // Neither Mallory's unsigned statement nor Alice's (no admin) approves it.
    let statement = format!(
        "Approve gates\n\nTollgate-Approve-Policy: gates@{}",
        &lift[..12]
    );
    world
        .repo
        .git(&["commit", "-q", "--allow-empty", "-m", &statement]);
    world.repo.commit_empty_signed(&cast.alice, &statement);
    let (code, stdout, stderr) = cli(
        &world.repo,
        Some(&cast.bob),
        &["approve", "--policy", "gates"],
    );
    assert_eq!(code, 0, "the change still waits: {stdout}{stderr}");
    let branch = world.repo.git(&[
        "for-each-ref",
        "--format=%(refname:short)",
        "refs/heads/tollgate",
    ]);
    world.repo.git(&["merge", "-q", "--ff-only", &branch]);
    world.poke();
    world.wait_phase("web", "Completed").await;
    assert_eq!(
        chart_version(&world, "web-production").await.as_deref(),
        Some("1.0.0")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moving_a_promotion_out_of_a_governed_policy_waits_for_an_admin() {
    let Some(cast) = cast() else { return };
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0", false));
    repo.write("policy.yaml", &governed(true));
    repo.write(
        "lax.yaml",
        "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: lax\nspec:\n  selector:\n    matchLabels:\n      never: selected\n",
    );
    repo.commit_signed(&cast.carol, "web 1.0.0");
    let world = start(repo, trust(None, cast.keys.path())).await;
    gate_waits(&world, 1).await;

    // Carol points web at the lax policy, with new content.
    let moved = promotion("web")
        .annotation("tollgate.dev/policy", "lax")
        .chart("web", "2.0.0")
        .stage(stage("staging").selector("env", "staging").auto())
        .stage(stage("production").selector("env", "production").auto())
        .to_yaml();
    world.repo.write("web.yaml", &moved);
    let change = world
        .repo
        .commit_signed(&cast.carol, "web: lax policy, 2.0.0");
    world.poke();
    let status = world
        .eventually("the move waits for an admin", || async {
            let status = world.status("web").await?;
            let (reason, message) = policy_condition(&status)?;
            (reason == "PolicyChangeUnapproved" && message.contains(&change[..7])).then_some(status)
        })
        .await;
    assert_eq!(status["phase"], "Held", "{status:#}");
    assert!(world.profile("web-production").await.is_none());
}

#[test]
fn plan_numbers_the_base_as_the_controller_does() {
    let Some(cast) = cast() else { return };
    let repo = TestRepo::new();
    for (version, signed) in [
        ("1.0.0", true),
        ("6.6.6", false),
        ("2.0.0", true),
        ("3.0.0", true),
    ] {
        repo.write("web.yaml", &web(version, false));
        match signed {
            true => repo.commit_signed(&cast.alice, &format!("web {version}")),
            false => commit_as(&repo, "Mallory <mallory@example.com>", "web 6.6.6"),
        };
    }
    // A pull request back to 2.0.0: the controller's snapshot #2 (#3 were 6.6.6 counted).
    repo.git(&["checkout", "-q", "-b", "back"]);
    repo.write("web.yaml", &web("2.0.0", false));
    repo.commit("back to 2.0.0");
    let keys = cast.keys.path().display().to_string();
    let (code, stdout, stderr) = cli(
        &repo,
        None,
        &[
            "plan",
            "--from",
            "main",
            "--to",
            "back",
            "-o",
            "json",
            "--verify-commits",
            "Head",
            "--trusted-keys",
            &keys,
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let plan: Value = serde_json::from_str(&stdout).expect("json");
    let web = &plan["promotions"][0];
    assert_eq!(web["sameContentAs"], 2, "{web:#}");
}

//! Chaos for trust (issue #44): a seeded schedule of insiders trying the routine ways in while two
//! approvers approve honestly. Mallory has push access and no key; Carol has a trusted key and is
//! no approver; Alice and Bob are the approvers of a 2-of-2 `requireSignature` gate on staging.
//! The controller runs `--verify-commits Head`. Mallory bumps content unsigned, forges statements
//! in Alice's name, annotates approvals that Carol's unrelated signed commits fold in, turns the
//! gate's trigger into `auto`, replays a stale signed approval through an unsigned merge, and has
//! Alice merge a tag whose message ends in an approval; Carol bumps content signed. Alice and Bob
//! approve the run that waits with `tollgate approve` (which refuses an unverified tip).
//!
//! Invariants, on the emulator's write log: no profile carries content that no verified commit
//! had, and the stage after the gate never gets content fewer than two approvers approved
//! honestly. Seeded: `CHAOS_SEED=<n>` replays a schedule.

use crate::chaos_support;
use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use chaos_support::SeededRng;
use chaos_support::trust_invariants::{check_quorum, check_verified_content};
use serde_json::Value;
use support::{TestRepo, World, fleet_yaml, tollgate_binary};
use tollgate_fixtures::signing::{Signer, SshSigner, have_tool};
use tollgate_fixtures::{promotion, stage};
use tollgate_source::{TrustConfig, VerifyCommits};

const STEPS: u64 = 40;
const DEFAULT_SEED: u64 = 44_2026;

fn seed() -> u64 {
    chaos_support::seed_or(DEFAULT_SEED)
}

fn web(version: &str, gated: bool, annotation: Option<&str>) -> String {
    let staging = stage("staging").selector("env", "staging");
    let staging = match gated {
        true => staging.manual(),
        false => staging.auto(),
    };
    let mut web = promotion("web");
    if let Some(value) = annotation {
        web = web.annotation("approve.tollgate.dev/staging", value);
    }
    web.chart("web", version)
        .stage(staging)
        .stage(stage("production").selector("env", "production").auto())
        .to_yaml()
}

const POLICY: &str = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: gates\nspec:\n  approvals:\n    staging:\n      approvers: [alice@example.com, bob@example.com]\n      minApprovals: 2\n      requireSignature: true\n";

/// The world, the cast and what the checker needs to know of git.
struct Trial {
    world: World,
    alice: SshSigner,
    bob: SshSigner,
    carol: SshSigner,
    keys: tempfile::TempDir,
    /// Versions of the trees of the commits a trusted key signed.
    verified: BTreeSet<String>,
    /// Version → the approvers who approved its run honestly.
    approved: BTreeMap<String, BTreeSet<String>>,
    /// The content on main now (version, gated, annotation).
    content: (String, bool, Option<String>),
    next_version: u64,
    /// The move being made: names its side branches and tags.
    step: u64,
}

impl Trial {
    fn write(&self) {
        let (version, gated, annotation) = &self.content;
        self.world
            .repo
            .write("web.yaml", &web(version, *gated, annotation.as_deref()));
    }

    /// Carol signs the working tree.
    fn carol_signs(&mut self, message: &str) {
        self.signs(0, message);
    }

    /// Carol (0), Alice (1) or Bob (2) signs the working tree: an unrelated commit by an
    /// approver folds Mallory's unsigned commits in as well as Carol's does.
    fn signs(&mut self, who: u64, message: &str) {
        let signer = match who {
            1 => &self.alice,
            2 => &self.bob,
            _ => &self.carol,
        };
        self.world.repo.commit_signed(signer, message);
        self.verified.insert(self.content.0.clone());
    }

    fn unsigned(&self, message: &str) {
        let repo = &self.world.repo;
        repo.git(&["add", "-A"]);
        repo.git(&[
            "-c",
            "commit.gpgsign=false",
            "commit",
            "-q",
            "--allow-empty",
            "--author",
            "Alice <alice@example.com>",
            "-m",
            message,
        ]);
    }

    fn bump(&mut self) -> String {
        self.next_version += 1;
        self.content.0 = format!("1.0.{}", self.next_version);
        self.content.2 = None;
        self.write();
        self.content.0.clone()
    }

    /// The waiting run's snapshot id and the version staging runs, when the gate waits.
    async fn waiting(&self) -> Option<(String, String)> {
        let status = self.world.status("web").await?;
        let staging = status["stages"]
            .as_array()?
            .iter()
            .find(|s| s["name"] == "staging")?
            .clone();
        if staging["activity"]["kind"] != "AwaitingApproval" {
            return None;
        }
        // The id and the version from one object (the profile the gate's stage runs), and only
        // when the status waits for that snapshot: two reads could see two runs.
        let profile = self.world.profile("web-staging").await?;
        let version = support::str_at(&profile.data, "/spec/helmCharts/0/chartVersion")?;
        let annotations = profile.metadata.annotations.as_ref()?;
        let id = annotations.get("tollgate.dev/snapshot-id")?;
        if status["snapshotId"].as_str() != Some(id.as_str()) {
            return None;
        }
        Some((id[..12].to_string(), version.to_string()))
    }
}

/// One honest approval through `tollgate approve`, as an approver runs it; merged when committed.
/// `Err` with the command's output when nothing was committed.
/// `(id, version)`: the waiting run's snapshot id and the version its stage runs (from
/// [`Trial::waiting`]); the approval names that snapshot, so what it approves is known exactly.
async fn approve_honestly(
    trial: &mut Trial,
    alice: bool,
    (id, version): (String, String),
) -> Result<(), String> {
    let (signer, name) = match alice {
        true => (&trial.alice, "alice@example.com"),
        false => (&trial.bob, "bob@example.com"),
    };
    signer.configure(&trial.world.repo);
    let keys = trial.keys.path().display().to_string();
    let output = tollgate_binary()
        .args(["approve", "web", "staging", "--repo"])
        .arg(trial.world.repo.path())
        .args(["--verify-commits", "Head", "--trusted-keys", &keys])
        .args(["--snapshot", &id])
        .env("KUBECONFIG", trial.world.kubeconfig())
        .output()
        .expect("tollgate approve");
    trial.world.repo.unsign();
    if !output.status.success() {
        // A tip that would not verify, a run that moved on: nothing committed.
        return Err(format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let branch = stdout
        .split_whitespace()
        .skip_while(|w| *w != "branch")
        .nth(1)
        .expect("the branch")
        .to_string();
    trial.world.repo.git(&["merge", "-q", "--ff-only", &branch]);
    trial.world.repo.git(&["branch", "-q", "-D", &branch]);
    trial.verified.insert(trial.content.0.clone());
    trial
        .approved
        .entry(version)
        .or_default()
        .insert(name.to_string());
    Ok(())
}

/// Alice's signature on an approval made an hour ago on a branch, merged now unsigned.
fn stale_replay(trial: &Trial, id: &str) {
    let repo = &trial.world.repo;
    let branch = format!("stale-{}", trial.step);
    repo.git(&["checkout", "-q", "-b", &branch]);
    trial.alice.configure(repo);
    let date = (chrono::Utc::now() - chrono::Duration::hours(1))
        .format("%Y-%m-%dT%H:%M:%S+0000")
        .to_string();
    let env: Vec<(String, PathBuf)> = [
        ("GIT_COMMITTER_DATE".to_string(), PathBuf::from(&date)),
        ("GIT_AUTHOR_DATE".to_string(), PathBuf::from(&date)),
    ]
    .into_iter()
    .chain(trial.alice.env())
    .collect();
    let message = format!("Approve\n\nTollgate-Approve: web/staging@{id}");
    repo.git_env(
        &["commit", "-q", "-S", "--allow-empty", "-m", &message],
        &env,
    );
    repo.unsign();
    repo.git(&["checkout", "-q", "main"]);
    repo.git(&[
        "-c",
        "commit.gpgsign=false",
        "merge",
        "-q",
        "--no-ff",
        "--no-edit",
        &branch,
    ]);
}

/// Alice merges a tag (as git proposes) whose message ends in an approval trailer.
fn tag_copy(trial: &mut Trial, id: &str) {
    let repo = &trial.world.repo;
    let branch = format!("tagged-{}", trial.step);
    repo.git(&["checkout", "-q", "-b", &branch]);
    repo.write(&format!("notes-{}.md", trial.step), "notes\n");
    trial.unsigned("notes");
    let tag = format!("t-{}", trial.step);
    let message = format!("Notes\n\nTollgate-Approve: web/staging@{id}");
    repo.git(&[
        "-c",
        "user.name=M",
        "-c",
        "user.email=m@example.com",
        "tag",
        "-a",
        &tag,
        "-m",
        &message,
    ]);
    repo.git(&["checkout", "-q", "main"]);
    trial.alice.configure(repo);
    repo.git(&["merge", "-q", "-S", "--no-ff", "--no-edit", &tag]);
    repo.unsign();
    trial.verified.insert(trial.content.0.clone());
}

async fn one_move(trial: &mut Trial, rng: &mut SeededRng) -> &'static str {
    trial.step += 1;
    let waiting = trial.waiting().await;
    let id = waiting.as_ref().map(|(id, _)| id.clone());
    match (rng.between(0, 11), id) {
        (0, _) => {
            trial.bump();
            trial.unsigned("unsigned bump");
            "mallory bumps unsigned"
        }
        (1, _) => {
            trial.bump();
            trial.carol_signs("signed bump");
            "carol bumps signed"
        }
        (2, Some(id)) => {
            trial.unsigned(&format!("Approve\n\nTollgate-Approve: web/staging@{id}"));
            "mallory forges a statement as alice"
        }
        (3, Some(id)) => {
            trial.content.2 = Some(id);
            trial.write();
            trial.unsigned("tidy");
            trial
                .world
                .repo
                .write("README.md", &format!("{}\n", rng.next_u64()));
            let folder = rng.between(0, 2);
            trial.signs(folder, "docs");
            // The other approver approves honestly: with the folded annotation credited to the
            // signer, that would make two.
            if let Some(waiting) = trial.waiting().await {
                let _ = approve_honestly(trial, folder != 1, waiting).await;
            }
            "mallory annotates, a signed unrelated commit folds it in, the other approver approves"
        }
        (4, _) => {
            trial.content.1 = !trial.content.1;
            trial.write();
            trial.unsigned("flip the trigger");
            "mallory flips the gate's trigger"
        }
        (5, Some(id)) => {
            stale_replay(trial, &id);
            "mallory merges alice's stale approval"
        }
        (6, Some(id)) => {
            tag_copy(trial, &id);
            "alice merges a tag carrying an approval"
        }
        (7, _) => {
            trial
                .world
                .repo
                .write("README.md", &format!("{}\n", rng.next_u64()));
            trial.carol_signs("docs");
            "carol signs an unrelated commit"
        }
        (_, _) => {
            let alice = rng.between(0, 1) == 0;
            let Some(waiting) = waiting else {
                return "no run waits for an approval";
            };
            match approve_honestly(trial, alice, waiting).await {
                Ok(()) => "an approver approves the waiting run",
                Err(why) => {
                    eprintln!("  refused: {}", why.lines().last().unwrap_or_default());
                    "an approver finds nothing to approve"
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_insiders_never_get_unverified_content_out_or_a_gate_open() {
    run_trial(seed()).await;
}

/// A new schedule every day (the seed is printed; `CHAOS_SEED=<n>` replays it through the test
/// above, and skips this one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_insiders_on_the_seed_of_the_day() {
    if chaos_support::replaying() {
        return;
    }
    let day = chaos_support::day();
    run_trial(day).await;
}

async fn run_trial(seed: u64) {
    if !have_tool("ssh-keygen", "openssh-client") {
        return;
    }
    eprintln!("chaos_trust seed {seed} (CHAOS_SEED={seed} replays it)");
    let mut rng = SeededRng::new(seed);
    let (alice, bob, carol) = (
        SshSigner::new("alice"),
        SshSigner::new("bob"),
        SshSigner::new("carol"),
    );
    let keys = tempfile::tempdir().expect("temp dir");
    for signer in [&alice, &bob, &carol] {
        signer.trust_in(keys.path());
    }
    let repo = TestRepo::new();
    repo.write("policy.yaml", POLICY);
    let mut world = World::without_controller(repo, &fleet_yaml(1, "30ms")).await;
    world.trust = TrustConfig {
        verify_commits: Some(VerifyCommits::Head),
        trusted_keys: Some(keys.path().to_path_buf()),
    };
    let mut trial = Trial {
        world,
        alice,
        bob,
        carol,
        keys,
        verified: BTreeSet::new(),
        approved: BTreeMap::new(),
        content: ("1.0.0".to_string(), true, None),
        next_version: 0,
        step: 0,
    };
    trial.write();
    trial.carol_signs("web 1.0.0");
    trial.world.start_controller().await;

    for step in 0..STEPS {
        let what = one_move(&mut trial, &mut rng).await;
        eprintln!("step {step}: {what}");
        trial.world.poke();
        tokio::time::sleep(rng.millis(50, 400)).await;
    }
    finish_honestly(&mut trial).await;

    let log = trial.world.emulator.write_log();
    let mut violations: Vec<String> = check_verified_content(&log, "web", &trial.verified)
        .into_iter()
        .map(|v| format!("{v:?}"))
        .collect();
    violations.extend(
        check_quorum(&log, ("web", "web-production"), &trial.approved, 2)
            .into_iter()
            .map(|v| format!("{v:?}")),
    );
    assert!(
        violations.is_empty(),
        "seed {seed}: {violations:#?}\nverified {:?}\napproved {:?}",
        trial.verified,
        trial.approved
    );
}

/// Carol signs a final version and both approvers approve it: it must reach production (the
/// invariants hold on a schedule that did open gates).
async fn finish_honestly(trial: &mut Trial) {
    trial.content.1 = true;
    let version = trial.bump();
    trial.carol_signs("final version");
    trial.world.poke();
    for alice in [true, false] {
        let waiting = trial
            .world
            .eventually("the final version waits at the gate", || async {
                trial.waiting().await.filter(|(_, v)| *v == version)
            })
            .await;
        assert_eq!(waiting.1, version);
        if let Err(output) = approve_honestly(trial, alice, waiting.clone()).await {
            panic!("the final approval was refused: {output}");
        }
        trial.world.poke();
        if alice {
            trial
                .world
                .eventually("alice's approval is reviewed", || async {
                    let status: Value = trial.world.status("web").await?;
                    status.to_string().contains("1 of 2").then_some(())
                })
                .await;
        }
    }
    trial
        .world
        .eventually("the final version reaches production", || async {
            let profile = trial.world.profile("web-production").await?;
            let got = support::str_at(&profile.data, "/spec/helmCharts/0/chartVersion")?;
            (got == version).then_some(())
        })
        .await;
}

//! Chaos for recovery (issue #45): what the main chaos run never does. Promotions under three
//! policies (halt; roll back, fast; roll back, staged) whose production stage is gated by a
//! Prometheus analysis roll out a release, then a chart a staging cluster fails; a seeded
//! schedule meanwhile runs `tollgate retry` on halted and rolled-back runs, switches the
//! Prometheus stand-in between answering, erroring and stalling, pauses and unpauses a production
//! cluster, and moves leadership between two replicas while analyses measure. The notification
//! receiver is down for minutes. At the end a `git revert` of the failing chart rolls back (fast
//! or staged, by policy).
//!
//! Invariants: nothing is written without a lease; no notice is lost or regressed; no measurement
//! is closer than `interval` to the previous one; a retry never re-applies a rejected snapshot;
//! a fast rollback only restores content that completed in that stage; a rejected snapshot is
//! never applied again. Seeded: `CHAOS_SEED=<n>` replays a schedule.

use crate::chaos_support;
use crate::support;

use std::time::Duration;

use chaos_support::SeededRng;
use chaos_support::failure_invariants::check_failures;
use chaos_support::invariants::check_leased;
use chaos_support::recovery_chaos_invariants::{
    FinalRun, Got, check_measurement_spacing, check_notices,
};
use chaos_support::recovery_invariants::check_recovery;
use chaos_support::stand_ins::{PromMode, PromStandIn};
use support::elected::{Elected, election};
use support::receiver::{Answer, Receiver};
use support::{PATIENCE, TestRepo, World, tollgate_binary};
use tollgate::controller::ControllerHandle;
use tollgate_fixtures::{cluster, fleet, promotion, stage};

const DEFAULT_SEED: u64 = 45_2026;
const PROMOTIONS: usize = 6;
const STAGES: [&str; 3] = ["dev", "staging", "prod"];
/// How long the schedule injects faults after the failing chart lands.
const WINDOW: Duration = Duration::from_secs(35);
/// How long the notification receiver is down, at least (and until every rollout completed).
const RECEIVER_DOWN: Duration = Duration::from_secs(100);
/// The analyses' `interval`.
const INTERVAL: Duration = Duration::from_secs(1);
const FAILING_CHART: &str = "9.9.0";
const PAUSED: &str = "fleet/prod-p";

fn seed() -> u64 {
    chaos_support::seed_or(DEFAULT_SEED)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_survives_retries_reverts_pauses_stalls_and_a_leader_change() {
    run(seed()).await;
}

/// A new schedule every day (the main chaos test's rule); a failure prints its seed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_survives_chaos_on_the_seed_of_the_day() {
    if chaos_support::replaying() {
        return;
    }
    run(chaos_support::day() * 10 + 5).await;
}

/// The policy tier of promotion `i`.
fn tier(i: usize) -> &'static str {
    ["halt", "fast", "staged"][i % 3]
}

fn name(i: usize) -> String {
    format!("rc-{i}")
}

fn manifest(i: usize, chart: &str) -> String {
    let mut p = promotion(&name(i))
        .chart("app", chart)
        .label("tier", tier(i));
    for env in STAGES {
        p = p.stage(stage(env).selector("env", env).auto());
    }
    p.to_yaml()
}

/// The three policies; each gates prod with the stand-in's analysis and tells the receiver.
fn policies(prometheus: &str, hook_secret: &str) -> String {
    let mut out = Vec::new();
    for (tier, on_failure, strategy) in [
        ("halt", "Halt", "Fast"),
        ("fast", "Rollback", "Fast"),
        ("staged", "Rollback", "Staged"),
    ] {
        out.push(format!(
            "apiVersion: tollgate.dev/v1alpha1
kind: RolloutPolicy
metadata:
  name: {tier}
spec:
  selector:
    matchLabels: {{tier: {tier}}}
  maxFailures: 0
  onFailure: {on_failure}
  rollback:
    strategy: {strategy}
  analyses:
  - name: error-rate
    prometheus:
      address: {prometheus:?}
      query: app_error_ratio
    interval: {}s
    count: 3
    successCondition: result < 0.5
    consecutiveErrorLimit: 30
  stages:
    prod:
      analyses: [error-rate]
  notify:
  - name: hook
    type: webhook
    addressSecretFile: {hook_secret:?}
    events: [StageStarted, StageCompleted, StageFailed, RolledBack, Completed]
",
            INTERVAL.as_secs()
        ));
    }
    out.join("---\n")
}

/// Two clusters per environment; staging-2 fails the failing chart; prod-p is paused at times.
fn fleet_yaml() -> String {
    let mut fleet = fleet().default_latency("100ms").failure(
        FAILING_CHART,
        &[("fails", "yes")],
        "Helm",
        "chaos: the chart's values are broken",
    );
    for env in STAGES {
        for n in 1..=2 {
            let mut built = cluster(&format!("{env}-{n}")).ns("fleet").label("env", env);
            if env == "staging" && n == 2 {
                built = built.label("fails", "yes");
            }
            fleet = fleet.cluster(built);
        }
    }
    fleet
        .cluster(cluster("prod-p").ns("fleet").label("env", "prod"))
        .to_yaml()
}

/// One replica: its election and its controller.
struct Replica {
    elected: Elected,
    controller: (ControllerHandle, tokio::task::JoinHandle<()>),
}

impl Replica {
    async fn start(world: &World, identity: &str) -> Replica {
        let elected = Elected::start(world, election(identity));
        let controller = world.spawn_replica(elected.gate.clone()).await;
        Replica {
            elected,
            controller,
        }
    }

    /// A crash: the process dies without releasing its lease.
    async fn crash(self) {
        self.elected.crash();
        self.controller.0.shutdown();
        let _ = self.controller.1.await;
    }

    async fn stop(self) {
        self.controller.0.shutdown();
        let _ = self.controller.1.await;
        self.elected.shut_down().await;
    }
}

/// What the schedule did, for the summary.
#[derive(Debug, Default)]
struct Done {
    retries: u32,
    retries_of_rolled_back: u32,
    prom_switches: u32,
    pauses: u32,
    leader_changes: u32,
}

struct Trial {
    world: World,
    prom: PromStandIn,
    receiver: Receiver,
    replicas: [Option<Replica>; 2],
    _secrets: tempfile::TempDir,
}

async fn run(seed: u64) {
    println!("recovery chaos seed {seed} (replay with CHAOS_SEED={seed})");
    let mut rng = SeededRng::new(seed);
    let began = tokio::time::Instant::now();
    let mut trial = start().await;
    // The release rolls out (the stand-in healthy; leadership moves while prod is analysed),
    // then the failing chart lands.
    let mut done = Done::default();
    trial.change_leader_during_analysis(&mut done).await;
    trial.wait_final(1).await;
    let failing = tokio::task::block_in_place(|| {
        for i in 0..PROMOTIONS {
            trial
                .world
                .repo
                .write(&format!("{}.yaml", name(i)), &manifest(i, FAILING_CHART));
        }
        trial.world.repo.commit("a chart staging-2 fails")
    });
    trial.poke();
    trial.inject(&mut rng, &mut done).await;

    // Faults off; the failing chart reverted: every promotion ends on #3, #1's content.
    trial.prom.set(PromMode::Healthy);
    trial
        .world
        .emulator
        .set_cluster_paused(PAUSED, false)
        .expect("unpause");
    tokio::task::block_in_place(|| {
        trial.world.repo.git(&["revert", "--no-edit", &failing]);
    });
    trial.poke();
    // The staged rollbacks analyse prod again: leadership moves once more meanwhile.
    trial.change_leader_during_analysis(&mut done).await;
    trial.wait_final(3).await;
    tokio::time::sleep_until(began + RECEIVER_DOWN).await;
    assert!(
        !notices(&trial.receiver).iter().any(|g| g.accepted),
        "the receiver was down"
    );
    trial.receiver.set_up(true);
    let finals: Vec<(String, u64)> = (0..PROMOTIONS).map(|i| (name(i), 3)).collect();
    trial.wait_told(&finals).await;
    for replica in trial.replicas.iter_mut().filter_map(Option::take) {
        replica.stop().await;
    }
    check(&trial, &finals, seed, &done);
}

async fn start() -> Trial {
    let prom = PromStandIn::start().await;
    let receiver = Receiver::start(Answer::WhileUp).await;
    let secrets = tempfile::tempdir().expect("secrets dir");
    let hook = secrets.path().join("hook");
    std::fs::write(
        &hook,
        format!("{}\nchaos-hmac-key\n", receiver.url("/hook")),
    )
    .expect("hook secret");
    let repo = TestRepo::new();
    for i in 0..PROMOTIONS {
        repo.write(&format!("{}.yaml", name(i)), &manifest(i, "1.0.0"));
    }
    repo.write(
        "policies.yaml",
        &policies(&prom.address, hook.to_str().expect("utf-8 path")),
    );
    repo.commit("the release, under three policies");
    let world = World::without_controller(repo, &fleet_yaml()).await;
    let a = Replica::start(&world, "replica-a").await;
    let b = Replica::start(&world, "replica-b").await;
    Trial {
        world,
        prom,
        receiver,
        replicas: [Some(a), Some(b)],
        _secrets: secrets,
    }
}

impl Trial {
    fn poke(&self) {
        for replica in self.replicas.iter().flatten() {
            replica.controller.0.poker.poke();
        }
    }

    /// Waits until every promotion completed `snapshot`.
    async fn wait_final(&self, snapshot: u64) {
        let deadline = tokio::time::Instant::now() + PATIENCE * 2;
        loop {
            let mut pending = Vec::new();
            for i in 0..PROMOTIONS {
                let status = self.world.status(&name(i)).await;
                let done = status
                    .as_ref()
                    .is_some_and(|s| s["phase"] == "Completed" && s["snapshotIndex"] == snapshot);
                if !done {
                    pending.push(status.map(|s| {
                        format!(
                            "{} {} on #{}: {}",
                            name(i),
                            s["phase"],
                            s["snapshotIndex"],
                            s["message"]
                        )
                    }));
                }
            }
            if pending.is_empty() {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "not every promotion completed #{snapshot}: {pending:#?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits until the receiver accepted each final run's `Completed`.
    async fn wait_told(&self, finals: &[(String, u64)]) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let got = notices(&self.receiver);
            let missing: Vec<&(String, u64)> = finals
                .iter()
                .filter(|(promotion, snapshot)| {
                    !got.iter().any(|g| {
                        g.accepted
                            && g.body["event"] == "Completed"
                            && g.body["promotion"] == promotion.as_str()
                            && g.body["snapshot"]["index"] == *snapshot
                    })
                })
                .collect();
            if missing.is_empty() {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "never told: {missing:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The schedule: every 0.3–1.5 s one of its moves, for [`WINDOW`].
    async fn inject(&mut self, rng: &mut SeededRng, done: &mut Done) {
        let started = tokio::time::Instant::now();
        while started.elapsed() < WINDOW {
            tokio::time::sleep(rng.millis(300, 1_500)).await;
            match rng.between(0, 9) {
                0..=2 => {
                    let mode = match rng.between(0, 2) {
                        0 => PromMode::Healthy,
                        1 => PromMode::Erroring,
                        _ => PromMode::Stalling,
                    };
                    self.prom.set(mode);
                    done.prom_switches += 1;
                }
                3 | 4 => {
                    let paused = rng.between(0, 1) == 0;
                    self.world
                        .emulator
                        .set_cluster_paused(PAUSED, paused)
                        .expect("pause");
                    done.pauses += 1;
                }
                5 => self.retry_one(rng, true, done).await,
                6 => self.retry_one(rng, false, done).await,
                _ => {
                    if self.analysis_running().await {
                        self.change_leader().await;
                        done.leader_changes += 1;
                    }
                }
            }
        }
        // Every schedule retries a halted run at least once.
        if done.retries == 0 {
            self.retry_one(rng, true, done).await;
        }
    }

    /// Moves leadership as soon as some analysis measures (within [`PATIENCE`]).
    async fn change_leader_during_analysis(&mut self, done: &mut Done) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while tokio::time::Instant::now() < deadline {
            if self.analysis_running().await {
                self.change_leader().await;
                done.leader_changes += 1;
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `tollgate retry NAME staging --commit` on a promotion whose run failed at staging,
    /// `halted` (re-driven, and failing again: the chart is still broken) or rolled back
    /// (refused by the controller).
    async fn retry_one(&self, rng: &mut SeededRng, halted: bool, done: &mut Done) {
        let mut failed = Vec::new();
        for i in (0..PROMOTIONS).filter(|i| (tier(*i) == "halt") == halted) {
            let status = self.world.status(&name(i)).await;
            if status.is_some_and(|s| s["failure"]["stage"] == "staging") {
                failed.push(i);
            }
        }
        if failed.is_empty() {
            return;
        }
        let i = failed[rng.between(0, failed.len() as u64 - 1) as usize];
        let output = tokio::task::block_in_place(|| {
            tollgate_binary()
                .args(["retry", &name(i), "staging", "--commit", "--repo"])
                .arg(self.world.repo.path())
                .env_remove("KUBECONFIG")
                .output()
                .expect("tollgate retry")
        });
        match output.status.success() {
            true if tier(i) == "halt" => done.retries += 1,
            true => done.retries_of_rolled_back += 1,
            false => {}
        }
        self.poke();
    }

    async fn analysis_running(&self) -> bool {
        for i in 0..PROMOTIONS {
            let Some(status) = self.world.status(&name(i)).await else {
                continue;
            };
            let running = status["stages"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|s| s["analyses"].as_array().into_iter().flatten())
                .any(|run| run["phase"] == "Running");
            if running {
                return true;
            }
        }
        false
    }

    /// The leader crashes (its lease lapses); the other replica takes over; the crashed one
    /// comes back as a follower.
    async fn change_leader(&mut self) {
        let Some(slot) = self
            .replicas
            .iter()
            .position(|r| r.as_ref().is_some_and(|r| r.elected.gate.is_leader()))
        else {
            return;
        };
        if let Some(leader) = self.replicas[slot].take() {
            leader.crash().await;
        }
        let identity = format!("replica-{}", ["a", "b"][slot]);
        self.replicas[slot] = Some(Replica::start(&self.world, &identity).await);
    }
}

/// What the receiver got, as the notice invariants read it.
fn notices(receiver: &Receiver) -> Vec<Got> {
    receiver
        .got()
        .iter()
        .map(|r| Got {
            body: r.json(),
            accepted: r.answered.is_some_and(|code| code.is_success()),
        })
        .collect()
}

fn check(trial: &Trial, finals: &[(String, u64)], seed: u64, done: &Done) {
    let log = trial.world.emulator.write_log();
    let runs: Vec<FinalRun<'_>> = finals
        .iter()
        .map(|(promotion, snapshot)| FinalRun {
            promotion,
            stages: &STAGES,
            snapshot: *snapshot,
        })
        .collect();
    let got = notices(&trial.receiver);
    let violations: Vec<String> = check_leased(&log)
        .into_iter()
        .map(|v| v.to_string())
        .chain(check_failures(&log).into_iter().map(|v| v.to_string()))
        .chain(check_recovery(&log).into_iter().map(|v| v.to_string()))
        .chain(
            check_measurement_spacing(&log, INTERVAL)
                .into_iter()
                .map(|v| v.to_string()),
        )
        .chain(
            check_notices(&got, &runs)
                .into_iter()
                .map(|v| v.to_string()),
        )
        .collect();
    assert!(
        violations.is_empty(),
        "seed {seed}: {} invariant violations:\n{}",
        violations.len(),
        violations
            .iter()
            .take(30)
            .map(|v| format!("- {v}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let fast = log
        .iter()
        .filter(|w| w.resource.starts_with("gitpromotions."))
        .any(|w| {
            w.object["status"]["stages"]
                .as_array()
                .is_some_and(|s| s.iter().any(|st| st["fastRollback"] == true))
        });
    assert!(fast, "seed {seed}: no stage rolled back on the fast path");
    assert!(
        done.leader_changes >= 2 && done.retries > 0,
        "seed {seed}: the schedule missed a leader change during analyses or a retry: {done:?}"
    );
    println!(
        "recovery chaos seed {seed}: {PROMOTIONS} promotions ended on #3 after a revert; {done:?}; \
         {} notices received ({} accepted) with the receiver down for at least {RECEIVER_DOWN:?}",
        got.len(),
        got.iter().filter(|g| g.accepted).count()
    );
}

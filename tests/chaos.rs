//! Chaos: 50 promotions roll out while the controller is stopped and restarted at random moments
//! and the API server fails writes, slows down, goes away for a few seconds and drops watches.
//! Once the faults stop, every rollout must complete, and the emulator's write log must show that
//! no stage order, delay, manual gate or approval was ever violated on the way.
//!
//! The controller runs under leader election (one replica, its Lease subject to the same faults),
//! and no controller write may reach the API server without a valid lease.
//!
//! Seeded: the seed is printed; `CHAOS_SEED=<n>` replays a schedule.

mod chaos_support;
mod support;

use std::time::Duration;

use chaos_support::failure_invariants::check_failures;
use chaos_support::invariants::{self, Violation};
use chaos_support::wave_invariants::check_waves;
use chaos_support::{PromotionPlan, SeededRng, fleet_yaml};
use chrono::Utc;
use support::{PATIENCE, TestRepo, World};
use tollgate::cluster::leader::{ElectionConfig, LeaderGate, run_election};
use tollgate_emulator::server::FLEET_MANAGER;
use tollgate_emulator::sveltos::FIELD_MANAGER as SVELTOS_MANAGER;

const PROMOTIONS: usize = 50;
const DEFAULT_SEED: u64 = 8_2026;
/// How long faults are injected.
const CHAOS_WINDOW: Duration = Duration::from_secs(30);
/// Share of PATCH (server-side apply included) and PUT requests answered with a 500.
const WRITE_ERROR_RATE: f64 = 0.2;
const OUTAGE: Duration = Duration::from_secs(3);
/// How long the server refuses every request with 403 after the outage, as a restarted
/// kube-apiserver does until its RBAC authorizer has loaded the roles.
const START_UP_403: Duration = Duration::from_secs(1);
/// How long the ClusterSummary CRD stays deleted.
const CRD_GONE: Duration = Duration::from_secs(2);
const SUMMARIES: &str = "clustersummaries.config.projectsveltos.io";
/// Must exceed the number of writes of one run, or the checker would see a truncated history.
const WRITE_LOG_CAPACITY: usize = 100_000;

fn seed() -> u64 {
    std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED)
}

/// What the schedule did, for the summary.
#[derive(Debug, Default)]
struct Injected {
    crd_removals: u32,
    restarts: u32,
    watch_drops: u32,
    outages: u32,
    bumps: u32,
    approvals: u32,
}

/// The outage (3 s) outlasts the lease's validity window (4 s - 2 s): the replica stops writing
/// by its own clock during it and renews after it.
fn election() -> ElectionConfig {
    ElectionConfig {
        lease_name: "tollgate-leader".into(),
        lease_namespace: "default".into(),
        identity: "chaos-replica".into(),
        duration: Duration::from_secs(4),
        grace: Duration::from_secs(2),
    }
}

/// (Re)starts the controller behind the elected gate.
async fn start_leased(world: &mut World, gate: &LeaderGate) {
    world.controller = Some(world.spawn_replica(gate.clone()).await);
}

/// Promotions not yet Completed on their final snapshot, with their current status.
async fn unfinished(world: &World, plans: &[PromotionPlan]) -> Vec<String> {
    let mut pending = Vec::new();
    for plan in plans {
        let status = world.status(&plan.name).await;
        let done = status.as_ref().is_some_and(|s| {
            s["phase"] == "Completed" && s["snapshotIndex"] == plan.final_snapshot
        });
        if !done {
            let phase = status.as_ref().map(|s| {
                format!(
                    "{} on #{} at {}: {}",
                    s["phase"], s["snapshotIndex"], s["currentStageName"], s["message"]
                )
            });
            pending.push(format!("{} ({phase:?})", plan.name));
        }
    }
    pending
}

/// Keeps the write log of a failed run for inspection (`jq` over one JSON object per line).
fn dump_log(log: &[tollgate_emulator::WriteRecord], seed: u64) {
    let path = std::env::temp_dir().join(format!("chaos-write-log-{seed}.jsonl"));
    let lines: Vec<String> = log
        .iter()
        .map(|w| {
            serde_json::json!({"time": w.time, "verb": w.verb, "resource": w.resource,
                "status": w.status_subresource, "namespace": w.namespace, "name": w.name,
                "manager": w.field_manager, "object": w.object})
            .to_string()
        })
        .collect();
    match std::fs::write(&path, lines.join("\n")) {
        Ok(()) => println!("write log: {}", path.display()),
        Err(error) => println!(
            "could not keep the write log at {}: {error}",
            path.display()
        ),
    }
}

/// Waits up to `patience` for every rollout to complete; the unfinished ones if not.
async fn wait_completed(
    world: &World,
    plans: &[PromotionPlan],
    patience: Duration,
) -> Option<Vec<String>> {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let pending = unfinished(world, plans).await;
        if pending.is_empty() {
            return None;
        }
        if tokio::time::Instant::now() >= deadline {
            return Some(pending);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The fix for the governed promotions: a chart every cluster deploys, a new snapshot.
fn fix_governed(world: &mut World, plans: &mut [PromotionPlan], governed: &[usize]) {
    for i in governed {
        let plan = &mut plans[*i];
        world.repo.write(
            &format!("{}.yaml", plan.name),
            &plan.manifest("1.2.0", false),
        );
        plan.final_snapshot = 3;
    }
    world.repo.commit("fix the chart");
    world.poke();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollouts_survive_restarts_errors_outages_and_dropped_watches() {
    let seed = seed();
    println!("chaos seed {seed} (replay with CHAOS_SEED={seed})");
    let mut rng = SeededRng::new(seed);
    let mut plans: Vec<PromotionPlan> = (0..PROMOTIONS)
        .map(|i| PromotionPlan::generate(i, &mut rng))
        .collect();
    let repo = TestRepo::new();
    for plan in &plans {
        repo.write(
            &format!("{}.yaml", plan.name),
            &plan.manifest("1.0.0", false),
        );
    }
    repo.write("policies.yaml", chaos_support::POLICIES);
    repo.commit("fifty promotions and their policies");
    let mut world = World::without_controller(repo, &fleet_yaml("150ms")).await;
    world.emulator.set_seed(seed);
    let gate = LeaderGate::follower();
    let elector = tokio::spawn(run_election(
        world.client.clone(),
        election(),
        gate.clone(),
        std::future::pending(),
    ));
    start_leased(&mut world, &gate).await;

    world.emulator.set_error_rate("patch", WRITE_ERROR_RATE);
    world.emulator.set_error_rate("update", WRITE_ERROR_RATE);
    world
        .emulator
        .set_request_latency(Duration::from_millis(10));

    // Version bumps (a second snapshot preempting the first run) for a fifth of the automatic
    // promotions; one approval commit per gated promotion.
    let bumped: Vec<usize> = (0..PROMOTIONS)
        .filter(|i| i % 5 == 1 && !plans[*i].is_manual())
        .collect();
    // (when, promotion), latest first so the next due one is at the end.
    let mut approvals: Vec<(Duration, usize)> = (0..PROMOTIONS)
        .filter(|i| plans[*i].is_manual())
        .map(|i| (rng.millis(3_000, 25_000), i))
        .collect();
    approvals.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    // Promotions under a RolloutPolicy get a chart the odd groups fail (halted or rolled back
    // under faults), then a fix.
    let governed: Vec<usize> = (0..PROMOTIONS)
        .filter(|i| plans[*i].tier.is_some())
        .collect();
    let outage_at = rng.millis(8_000, 15_000);
    let bump_at = rng.millis(2_000, 6_000);
    let broken_at = rng.millis(4_000, 10_000);
    let crd_gone_at = rng.millis(16_000, 24_000);
    let mut crd_gone_done = false;
    let fixed_at = broken_at + rng.millis(6_000, 12_000);
    let mut broken_done = false;
    let mut fixed_done = false;
    let mut injected = Injected::default();
    let started = tokio::time::Instant::now();
    let mut outage_done = false;
    let mut bump_done = false;
    while started.elapsed() < CHAOS_WINDOW {
        tokio::time::sleep(rng.millis(200, 1_500)).await;
        let elapsed = started.elapsed();
        if !bump_done && elapsed >= bump_at {
            for i in &bumped {
                let plan = &mut plans[*i];
                world.repo.write(
                    &format!("{}.yaml", plan.name),
                    &plan.manifest("1.1.0", false),
                );
                plan.final_snapshot = 2;
            }
            world.repo.commit("bump app to 1.1.0");
            world.poke();
            injected.bumps = bumped.len() as u32;
            bump_done = true;
            continue;
        }
        if !broken_done && elapsed >= broken_at {
            for i in &governed {
                let plan = &plans[*i];
                let manifest = plan.manifest(chaos_support::FAILING_CHART, false);
                world.repo.write(&format!("{}.yaml", plan.name), &manifest);
            }
            world.repo.commit("a chart the odd groups fail");
            world.poke();
            broken_done = true;
            continue;
        }
        if broken_done && !fixed_done && elapsed >= fixed_at {
            fix_governed(&mut world, &mut plans, &governed);
            fixed_done = true;
            continue;
        }
        if !crd_gone_done && elapsed >= crd_gone_at {
            // The ClusterSummary CRD deleted and restored: its requests answer 404 meanwhile.
            world.emulator.set_resource_failure(SUMMARIES, Some(404));
            world.emulator.drop_watches();
            tokio::time::sleep(CRD_GONE).await;
            world.emulator.set_resource_failure(SUMMARIES, None);
            injected.crd_removals += 1;
            crd_gone_done = true;
            continue;
        }
        if !outage_done && elapsed >= outage_at {
            world.emulator.outage_start();
            tokio::time::sleep(OUTAGE).await;
            // The lease invariant below is only exercised if the lease really lapsed: the
            // outage outlasts its validity, so the replica's own clock must have stopped it.
            assert!(
                !gate.is_leader(),
                "seed {seed}: still leading after an outage longer than the lease's validity"
            );
            // A restarted server has forgotten the watch history (every watch gets 410) and
            // answers 403 until its authorizer is ready.
            world.emulator.expire_watch_history();
            world.emulator.forbid_requests_for(START_UP_403);
            world.emulator.outage_end();
            injected.outages += 1;
            outage_done = true;
            continue;
        }
        // Approvals are commits at their own random moments, not instead of a fault.
        while let Some(i) = approvals.pop_if(|(at, _)| *at <= elapsed).map(|(_, i)| i) {
            let plan = &mut plans[i];
            plan.approved_at = Some(Utc::now());
            world.repo.write(
                &format!("{}.yaml", plan.name),
                &plan.manifest("1.0.0", true),
            );
            world.repo.commit(&format!("approve {}", plan.name));
            world.poke();
            injected.approvals += 1;
        }
        if rng.between(0, 4) < 3 {
            world.stop_controller().await;
            tokio::time::sleep(rng.millis(0, 800)).await;
            start_leased(&mut world, &gate).await;
            injected.restarts += 1;
        } else {
            world.emulator.drop_watches();
            injected.watch_drops += 1;
        }
    }
    // Whatever the schedule did not reach yet happens now, with faults still on.
    if !fixed_done {
        fix_governed(&mut world, &mut plans, &governed);
    }
    for (_, i) in approvals.drain(..) {
        let plan = &mut plans[i];
        plan.approved_at = Some(Utc::now());
        world.repo.write(
            &format!("{}.yaml", plan.name),
            &plan.manifest("1.0.0", true),
        );
        world.repo.commit(&format!("approve {}", plan.name));
        injected.approvals += 1;
    }
    world.poke();

    // Faults off: everything must converge.
    world.emulator.set_error_rate("patch", 0.0);
    world.emulator.set_error_rate("update", 0.0);
    world.emulator.set_request_latency(Duration::ZERO);
    if let Some(stalled) = wait_completed(&world, &plans, PATIENCE).await {
        // Tell a stalled controller from lost state: a fresh controller starts from what is
        // persisted and observed.
        let watch_errors = world
            .controller
            .as_ref()
            .map(|(handle, _)| handle.watch_health.errors())
            .unwrap_or_default();
        dump_log(&world.emulator.write_log(), seed);
        world.stop_controller().await;
        start_leased(&mut world, &gate).await;
        let after_restart = wait_completed(&world, &plans, PATIENCE).await;
        panic!(
            "seed {seed}: {} rollouts did not complete after the faults stopped (watch errors: \
             {watch_errors:?}); after one more restart {}: {stalled:#?}",
            stalled.len(),
            match after_restart {
                None =>
                    "every rollout completed, so the running controller had stalled".to_string(),
                Some(still) => format!("{} still did not: {still:#?}", still.len()),
            }
        );
    }
    world.stop_controller().await;

    let log = world.emulator.write_log();
    assert!(
        log.len() < WRITE_LOG_CAPACITY,
        "the write log reached its capacity ({}): the oldest writes are missing",
        log.len()
    );
    elector.abort();
    let violations: Vec<String> = invariants::check(&log, &plans)
        .into_iter()
        .chain(invariants::check_leased(&log))
        .map(|v: Violation| v.to_string())
        .chain(check_failures(&log).into_iter().map(|v| v.to_string()))
        .chain(check_waves(&log).into_iter().map(|v| v.to_string()))
        .collect();
    if !violations.is_empty() {
        dump_log(&log, seed);
    }
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

    // The failure model was exercised: runs failed under both policies.
    let failed_runs = |on_failure: &str| {
        log.iter()
            .filter(|w| w.resource.starts_with("gitpromotions."))
            .filter_map(|w| w.object["status"].get("failure"))
            .filter(|f| f["onFailure"] == on_failure)
            .filter_map(|f| f["snapshotIndex"].as_u64())
            .count()
    };
    let (rolled_back, halted) = (failed_runs("Rollback"), failed_runs("Halt"));
    // Waves were exercised: profiles named the clusters of their reached waves.
    let wave_applies = log
        .iter()
        .filter(|w| w.resource.starts_with("clusterprofiles.") && w.verb != "delete")
        .filter(|w| w.object["spec"].get("clusterRefs").is_some())
        .count();
    assert!(wave_applies > 0, "seed {seed}: no stage went out in waves");
    assert!(
        rolled_back > 0 && halted > 0,
        "seed {seed}: no run failed under a policy (rollback {rolled_back}, halt {halted})"
    );
    let counts = world.emulator.request_counts();
    // Writes that went through HTTP and succeeded; the rest of the write requests were refused
    // (injected 500s, 503s of the outage, conflicts).
    let http_writes = log
        .iter()
        .filter(|w| w.field_manager != SVELTOS_MANAGER && w.field_manager != FLEET_MANAGER)
        .count() as u64;
    println!(
        "chaos seed {seed}: {} promotions ({} stages, {} bumped, {} approved) completed; failure \
         statuses written: {rolled_back} rolled back, {halted} halted; {wave_applies} wave applies; {} writes logged \
         ({http_writes} by clients); {} controller restarts, {} watch drops, {} outage(s) of {OUTAGE:?} (410 and {START_UP_403:?} of 403s after), {} CRD \
         removal(s) of {CRD_GONE:?}; \
         {} write requests refused of {}",
        plans.len(),
        plans.iter().map(|p| p.stages.len()).sum::<usize>(),
        injected.bumps,
        injected.approvals,
        log.len(),
        injected.restarts,
        injected.watch_drops,
        injected.outages,
        injected.crd_removals,
        counts.writes().saturating_sub(http_writes),
        counts.writes(),
    );
}

//! Chaos: 50 promotions roll out while the controller is stopped and restarted at random moments
//! and the API server fails writes, slows down, goes away for a few seconds, comes back refusing
//! everything with 403, loses a CRD, answers 429 or fails its lists for a while and drops
//! watches. A replica is (re)started inside every one of those windows and must wait it out.
//! Once the faults stop, every rollout must complete, and the emulator's write log must show that
//! no stage order, delay, manual gate or approval was ever violated on the way.
//!
//! The controller runs under leader election (one replica, its Lease subject to the same faults),
//! and no controller write may reach the API server without a valid lease.
//!
//! Seeded: the seed is printed; `CHAOS_SEED=<n>` replays a schedule.

use crate::chaos_support;
use crate::support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use chaos_support::blackout_invariants::{BlackoutWindow, check_blackouts};
use chaos_support::coordination_invariants::{check_dependencies, check_paused};
use chaos_support::failure_invariants::check_failures;
use chaos_support::invariants::{self, Violation};
use chaos_support::recovery_invariants::check_recovery;
use chaos_support::wave_invariants::check_waves;
use chaos_support::{PromotionPlan, SeededRng, fleet_yaml};
use chrono::{Timelike, Utc};
use support::{PATIENCE, TestRepo, World};
use tollgate::cluster::leader::{ElectionConfig, LeaderGate, run_election};
use tollgate::cluster::resources;
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
/// How long every request but the watches gets 429 (an overloaded server).
const THROTTLED: Duration = Duration::from_millis(1_500);
/// How long every list gets a 500.
const LISTS_FAIL: Duration = Duration::from_millis(1_500);
const SUMMARIES: &str = "clustersummaries.config.projectsveltos.io";
/// Must exceed the number of writes of one run, or the checker would see a truncated history.
const WRITE_LOG_CAPACITY: usize = 100_000;

fn seed() -> u64 {
    chaos_support::seed_or(DEFAULT_SEED)
}

/// What the schedule did, for the summary.
#[derive(Debug, Default)]
struct Injected {
    crd_removals: u32,
    restarts: u32,
    watch_drops: u32,
    outages: u32,
    throttled: u32,
    list_failures: u32,
    bumps: u32,
    approvals: u32,
    /// Blackouts committed during the schedule, for the blackout invariant.
    blackouts: Vec<BlackoutWindow>,
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

/// Promotions not yet Completed on their final snapshot, with their current status. A read the
/// API server refuses (a fault window may outlast the schedule: the 403s after the outage)
/// leaves the promotion pending, named with the error.
async fn unfinished(world: &World, plans: &[PromotionPlan]) -> Vec<String> {
    let promotions: kube::Api<kube::api::DynamicObject> =
        kube::Api::all_with(world.client.clone(), &resources::git_promotion());
    let mut pending = Vec::new();
    for plan in plans {
        let status = match promotions.get_opt(&plan.name).await {
            Ok(object) => object.and_then(|o| o.data.get("status").cloned()),
            Err(error) => {
                pending.push(format!("{} (not read: {error})", plan.name));
                continue;
            }
        };
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
    // git runs as a child process: not on a worker the controller and the API server share.
    tokio::task::block_in_place(|| {
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
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollouts_survive_restarts_errors_outages_and_dropped_watches() {
    run_chaos(seed()).await;
}

/// CI explores new schedules every day: two seeds derived from the date, run side by side (the
/// runs mostly wait on the clock), besides the fixed one above. A failure prints its seed;
/// `CHAOS_SEED=<n>` replays it through the test above (and skips this one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollouts_survive_chaos_on_the_seeds_of_the_day() {
    if chaos_support::replaying() {
        return;
    }
    let day = chaos_support::day();
    tokio::join!(
        run_chaos(day * SEEDS_PER_DAY),
        run_chaos(day * SEEDS_PER_DAY + 1)
    );
}

/// Seeds of one day are `day * SEEDS_PER_DAY + i`: days never share a seed.
const SEEDS_PER_DAY: u64 = 10;

/// The generated promotions at their first version, committed, and the world around them with
/// the controller running under leader election.
async fn chaos_world(
    rng: &mut SeededRng,
    seed: u64,
) -> (
    World,
    Vec<PromotionPlan>,
    LeaderGate,
    tokio::task::JoinHandle<()>,
) {
    let plans: Vec<PromotionPlan> = (0..PROMOTIONS)
        .map(|i| PromotionPlan::generate(i, rng))
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
    (world, plans, gate, elector)
}

async fn run_chaos(seed: u64) {
    println!("chaos seed {seed} (replay with CHAOS_SEED={seed})");
    let mut rng = SeededRng::new(seed);
    let (mut world, mut plans, gate, elector) = chaos_world(&mut rng, seed).await;
    world.emulator.set_error_rate("patch", WRITE_ERROR_RATE);
    world.emulator.set_error_rate("update", WRITE_ERROR_RATE);
    world
        .emulator
        .set_request_latency(Duration::from_millis(10));
    let injected = inject_faults(&mut world, &gate, &mut plans, &mut rng, seed).await;

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
        let startup = world
            .controller
            .as_ref()
            .map(|(handle, _)| handle.startup.borrow().clone());
        dump_log(&world.emulator.write_log(), seed);
        world.stop_controller().await;
        start_leased(&mut world, &gate).await;
        let after_restart = wait_completed(&world, &plans, PATIENCE).await;
        panic!(
            "seed {seed}: {} rollouts did not complete after the faults stopped (watch errors: \
             {watch_errors:?}, start-up: {startup:?}); after one more restart {}: {stalled:#?}",
            stalled.len(),
            match after_restart {
                None =>
                    "every rollout completed, so the running controller had stalled".to_string(),
                Some(still) => format!("{} still did not: {still:#?}", still.len()),
            }
        );
    }
    world.stop_controller().await;
    elector.abort();
    check_history(&world, &plans, &injected, seed);
}

/// The moments of the schedule's one-off events, drawn from the seed.
struct Schedule {
    bump_at: Duration,
    broken_at: Duration,
    fixed_at: Duration,
    outage_at: Duration,
    crd_gone_at: Duration,
    throttled_at: Duration,
    lists_fail_at: Duration,
    /// (when, promotion), latest first so the next due one is at the end.
    approvals: Vec<(Duration, usize)>,
}

impl Schedule {
    fn draw(rng: &mut SeededRng, plans: &[PromotionPlan]) -> Schedule {
        let mut approvals: Vec<(Duration, usize)> = (0..PROMOTIONS)
            .filter(|i| plans[*i].is_manual())
            .map(|i| (rng.millis(3_000, 25_000), i))
            .collect();
        approvals.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        let outage_at = rng.millis(8_000, 15_000);
        let bump_at = rng.millis(2_000, 6_000);
        let broken_at = rng.millis(4_000, 10_000);
        let crd_gone_at = rng.millis(16_000, 24_000);
        let fixed_at = broken_at + rng.millis(6_000, 12_000);
        Schedule {
            bump_at,
            broken_at,
            fixed_at,
            outage_at,
            crd_gone_at,
            throttled_at: rng.millis(1_000, 27_000),
            lists_fail_at: rng.millis(1_000, 27_000),
            approvals,
        }
    }
}

/// Stops the controller and starts it again after `pause`: a replica starting inside whatever
/// fault window is open must wait it out, not give up.
async fn restart(world: &mut World, gate: &LeaderGate, pause: Duration, injected: &mut Injected) {
    world.stop_controller().await;
    tokio::time::sleep(pause).await;
    start_leased(world, gate).await;
    injected.restarts += 1;
}

/// The API server away for [`OUTAGE`] with a replica started inside, then back as a restarted
/// server (watch history gone, 403s until its authorizer is ready) with one started inside that.
async fn outage(
    world: &mut World,
    gate: &LeaderGate,
    rng: &mut SeededRng,
    injected: &mut Injected,
    seed: u64,
) {
    let began = tokio::time::Instant::now();
    world.emulator.outage_start();
    restart(world, gate, rng.millis(0, 1_000), injected).await;
    tokio::time::sleep(OUTAGE.saturating_sub(began.elapsed())).await;
    // The lease invariant is only exercised if the lease really lapsed: the outage outlasts its
    // validity, so the replica's own clock must have stopped it.
    assert!(
        !gate.is_leader(),
        "seed {seed}: still leading after an outage longer than the lease's validity"
    );
    world.stop_controller().await;
    world.emulator.expire_watch_history();
    world.emulator.forbid_requests_for(START_UP_403);
    world.emulator.outage_end();
    start_leased(world, gate).await;
    injected.restarts += 1;
    injected.outages += 1;
}

/// Runs the schedule for [`CHAOS_WINDOW`]: commits, approvals, fault windows (each with a
/// replica started inside), random restarts and watch drops. Whatever the schedule did not
/// reach happens at the end, with faults still on.
async fn inject_faults(
    world: &mut World,
    gate: &LeaderGate,
    plans: &mut [PromotionPlan],
    rng: &mut SeededRng,
    seed: u64,
) -> Injected {
    // Version bumps (a second snapshot preempting the first run) for a fifth of the automatic
    // promotions; one approval commit per gated promotion.
    let bumped: Vec<usize> = (0..PROMOTIONS)
        .filter(|i| i % 5 == 1 && !plans[*i].is_manual())
        .collect();
    // Promotions under a RolloutPolicy get a chart the odd groups fail (halted or rolled back
    // under faults), then a fix.
    let governed: Vec<usize> = (0..PROMOTIONS)
        .filter(|i| plans[*i].tier.is_some())
        .collect();
    let mut schedule = Schedule::draw(rng, plans);
    let mut done = Done::default();
    let mut injected = Injected::default();
    let started = tokio::time::Instant::now();
    while started.elapsed() < CHAOS_WINDOW {
        tokio::time::sleep(rng.millis(200, 1_500)).await;
        let elapsed = started.elapsed();
        if !done.bump && elapsed >= schedule.bump_at {
            bump(world, plans, &bumped);
            injected.bumps = bumped.len() as u32;
            done.bump = true;
            continue;
        }
        if !done.broken && elapsed >= schedule.broken_at {
            let freeze = break_governed(world, plans, &governed);
            injected.blackouts.push(freeze);
            done.broken = true;
            continue;
        }
        // Fixed only once runs failed under both policies: on a loaded machine the rollouts may
        // not have reached a failing stage at the drawn moment.
        if done.broken
            && !done.fixed
            && elapsed >= schedule.fixed_at
            && time_to_fix(world, &injected.blackouts)
        {
            fix_governed(world, plans, &governed);
            done.fixed = true;
            continue;
        }
        if !done.crd_gone && elapsed >= schedule.crd_gone_at {
            // The ClusterSummary CRD deleted and restored: its requests answer 404 meanwhile.
            world.emulator.set_resource_failure(SUMMARIES, Some(404));
            world.emulator.drop_watches();
            restart(world, gate, rng.millis(0, 500), &mut injected).await;
            tokio::time::sleep(CRD_GONE).await;
            world.emulator.set_resource_failure(SUMMARIES, None);
            injected.crd_removals += 1;
            done.crd_gone = true;
            continue;
        }
        if !done.outage && elapsed >= schedule.outage_at {
            outage(world, gate, rng, &mut injected, seed).await;
            done.outage = true;
            continue;
        }
        if !done.throttled && elapsed >= schedule.throttled_at {
            // An overloaded server: every request but the watches gets 429 with Retry-After.
            world.emulator.set_max_inflight(Some(0), Some(0));
            restart(world, gate, rng.millis(0, 300), &mut injected).await;
            tokio::time::sleep(THROTTLED).await;
            world.emulator.set_max_inflight(None, None);
            injected.throttled += 1;
            done.throttled = true;
            continue;
        }
        if !done.lists_fail && elapsed >= schedule.lists_fail_at {
            // Every list (start-up checks, watch relists) answered with a 500.
            world.emulator.set_error_rate("list", 1.0);
            world.emulator.drop_watches();
            restart(world, gate, rng.millis(0, 300), &mut injected).await;
            tokio::time::sleep(LISTS_FAIL).await;
            world.emulator.set_error_rate("list", 0.0);
            injected.list_failures += 1;
            done.lists_fail = true;
            continue;
        }
        // Approvals are commits at their own random moments, not instead of a fault.
        while let Some(i) = schedule
            .approvals
            .pop_if(|(at, _)| *at <= elapsed)
            .map(|(_, i)| i)
        {
            approve(world, &mut plans[i]);
            world.poke();
            injected.approvals += 1;
        }
        if rng.between(0, 4) < 3 {
            restart(world, gate, rng.millis(0, 800), &mut injected).await;
        } else {
            world.emulator.drop_watches();
            injected.watch_drops += 1;
        }
    }
    if !done.fixed {
        if !done.broken {
            let freeze = break_governed(world, plans, &governed);
            injected.blackouts.push(freeze);
        }
        // Faults still on; the checks after convergence say so if no run ever failed.
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while !time_to_fix(world, &injected.blackouts) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        fix_governed(world, plans, &governed);
    }
    for (_, i) in schedule.approvals.drain(..) {
        approve(world, &mut plans[i]);
        injected.approvals += 1;
    }
    unpause(world, chaos_support::PAUSED_CLUSTER).await;
    world.poke();
    injected
}

/// The paused cluster's maintenance window opens (as Sveltos's window would unpause it).
async fn unpause(world: &World, cluster: &str) {
    let (namespace, name) = cluster.split_once('/').unwrap_or_default();
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        world.client.clone(),
        namespace,
        &resources::sveltos_cluster(),
    );
    let patch = serde_json::json!({"spec": {"paused": false}});
    // Writes still meet injected faults: try again, as an operator would.
    for attempt in 1.. {
        let result = api
            .patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await;
        match result {
            Ok(_) => return,
            Err(error) if attempt >= 50 => panic!("unpause the SveltosCluster: {error}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Which one-off events of the schedule happened.
#[derive(Default)]
struct Done {
    bump: bool,
    broken: bool,
    fixed: bool,
    crd_gone: bool,
    outage: bool,
    throttled: bool,
    lists_fail: bool,
}

fn bump(world: &mut World, plans: &mut [PromotionPlan], bumped: &[usize]) {
    // git runs as a child process: not on a worker the controller and the API server share.
    tokio::task::block_in_place(|| {
        for i in bumped {
            let plan = &mut plans[*i];
            world.repo.write(
                &format!("{}.yaml", plan.name),
                &plan.manifest("1.1.0", false),
            );
            plan.final_snapshot = 2;
        }
        world.repo.commit("bump app to 1.1.0");
        world.poke();
    })
}

/// The failing chart for the governed promotions, in the same commit as a blackout of the `halt`
/// tier that began a second ago and lasts [`FREEZE`]: their new runs must wait for its end.
fn break_governed(
    world: &mut World,
    plans: &[PromotionPlan],
    governed: &[usize],
) -> BlackoutWindow {
    let from =
        Utc::now().with_nanosecond(0).unwrap_or_else(Utc::now) - chrono::Duration::seconds(1);
    let to = from + chrono::Duration::from_std(FREEZE).unwrap_or_default();
    let stamp = |t: chrono::DateTime<Utc>| t.format("%Y-%m-%dT%H:%M:%S").to_string();
    // git runs as a child process: not on a worker the controller and the API server share.
    tokio::task::block_in_place(|| {
        for i in governed {
            let plan = &plans[*i];
            let manifest = plan.manifest(chaos_support::FAILING_CHART, false);
            world.repo.write(&format!("{}.yaml", plan.name), &manifest);
        }
        let policies = chaos_support::policies_with_halt_blackout(&stamp(from), &stamp(to));
        world.repo.write("policies.yaml", &policies);
        world
            .repo
            .commit("a chart the odd groups fail, during a freeze of the halt tier");
        world.poke();
    });
    BlackoutWindow {
        promotions: governed
            .iter()
            .map(|i| &plans[*i])
            .filter(|p| p.tier == Some("halt"))
            .map(|p| p.name.clone())
            .collect(),
        from,
        to,
    }
}

/// How long the blackout committed with the failing chart lasts.
const FREEZE: Duration = Duration::from_secs(8);

fn approve(world: &mut World, plan: &mut PromotionPlan) {
    // git runs as a child process: not on a worker the controller and the API server share.
    tokio::task::block_in_place(|| {
        plan.approved_at = Some(Utc::now());
        world.repo.write(
            &format!("{}.yaml", plan.name),
            &plan.manifest("1.0.0", true),
        );
        world.repo.commit(&format!("approve {}", plan.name));
    })
}

/// Failure statuses written for runs under the policy whose `onFailure` is `on_failure`.
fn failed_runs(log: &[tollgate_emulator::WriteRecord], on_failure: &str) -> usize {
    log.iter()
        .filter(|w| w.resource.starts_with("gitpromotions."))
        .filter_map(|w| w.object["status"].get("failure"))
        .filter(|f| f["onFailure"] == on_failure)
        .filter_map(|f| f["snapshotIndex"].as_u64())
        .count()
}

/// Whether runs have failed under both policies so far, the last failure at least
/// [`FIX_AFTER_FAILURE`] ago, and the freeze of the halt tier over as long: Sveltos stamps
/// `lastAppliedTime` in whole seconds, so a failure of the broken chart stamped in the second the
/// fix is applied reads as the fix's own (a known limit) — a fix lands later, as a person's would.
/// Off the runtime's workers: copying the log takes a while, and the controller and the API
/// server share those workers.
fn time_to_fix(world: &World, freezes: &[BlackoutWindow]) -> bool {
    let settle = chrono::Duration::from_std(FIX_AFTER_FAILURE).unwrap_or_default();
    let now = Utc::now();
    if freezes.iter().any(|f| now < f.to + settle) {
        return false;
    }
    tokio::task::block_in_place(|| {
        let log = world.emulator.write_log();
        let last_failure = log
            .iter()
            .filter(|w| w.resource.starts_with("gitpromotions."))
            .filter(|w| {
                w.object["status"]
                    .get("failure")
                    .is_some_and(|f| f.is_object())
            })
            .map(|w| w.time)
            .max();
        failed_runs(&log, "Rollback") > 0
            && failed_runs(&log, "Halt") > 0
            && last_failure.is_some_and(|at| now - at >= settle)
    })
}

/// How long after the last failure (and the freeze) the fix is committed.
const FIX_AFTER_FAILURE: Duration = Duration::from_millis(2_500);

/// Issue #34: dependants never start a stage before their dependency completed it, and the
/// paused cluster is never counted failed or timed out.
fn coordination_violations(
    log: &[tollgate_emulator::WriteRecord],
    plans: &[PromotionPlan],
) -> Vec<String> {
    let dependencies: BTreeMap<String, String> = plans
        .iter()
        .filter_map(|p| Some((p.name.clone(), p.depends_on.clone()?)))
        .collect();
    assert!(!dependencies.is_empty(), "no promotion depends on another");
    let stages: HashMap<String, Vec<String>> = plans
        .iter()
        .map(|p| {
            (
                p.name.clone(),
                p.stages.iter().map(|s| s.name.clone()).collect(),
            )
        })
        .collect();
    let paused = BTreeSet::from([chaos_support::PAUSED_CLUSTER.to_string()]);
    check_dependencies(log, &dependencies, &stages)
        .into_iter()
        .chain(check_paused(log, &paused))
        .map(|v| v.to_string())
        .collect()
}

/// The write log against the invariants, and proof that the schedule exercised the failure
/// model and the waves.
fn check_history(world: &World, plans: &[PromotionPlan], injected: &Injected, seed: u64) {
    let log = world.emulator.write_log();
    assert!(
        log.len() < WRITE_LOG_CAPACITY,
        "the write log reached its capacity ({}): the oldest writes are missing",
        log.len()
    );
    let violations: Vec<String> = invariants::check(&log, plans)
        .into_iter()
        .chain(invariants::check_leased(&log))
        .map(|v: Violation| v.to_string())
        .chain(check_failures(&log).into_iter().map(|v| v.to_string()))
        .chain(check_waves(&log).into_iter().map(|v| v.to_string()))
        .chain(check_recovery(&log).into_iter().map(|v| v.to_string()))
        .chain(
            check_blackouts(&log, &injected.blackouts)
                .into_iter()
                .map(|v| v.to_string()),
        )
        .chain(coordination_violations(&log, plans))
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
    let (rolled_back, halted) = (failed_runs(&log, "Rollback"), failed_runs(&log, "Halt"));
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
         removal(s) of {CRD_GONE:?}, {} throttled window(s) of {THROTTLED:?}, {} failing-list window(s) of {LISTS_FAIL:?}; \
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
        injected.throttled,
        injected.list_failures,
        counts.writes().saturating_sub(http_writes),
        counts.writes(),
    );
}

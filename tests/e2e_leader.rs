//! Two replicas with leader election against the emulator: only the leader writes; when the leader
//! dies mid-rollout the other replica takes the lease and finishes, applying no stage twice and
//! skipping no delay.

mod support;

use std::time::Duration;

use support::{TestRepo, World, fleet_yaml, seed};
use tollgate::cluster::leader::{ElectionConfig, LeaderGate, run_election};

fn election(identity: &str) -> ElectionConfig {
    ElectionConfig {
        lease_name: "tollgate-leader".into(),
        lease_namespace: "default".into(),
        identity: identity.into(),
        duration: Duration::from_secs(3),
        grace: Duration::from_secs(1),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_writes_and_a_successor_finishes_the_rollout() {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "3s"),
    );
    repo.commit("Kyverno, 3s soak per stage");
    let world = World::without_controller(repo, &fleet_yaml(1, "100ms")).await;

    let gates = [LeaderGate::follower(), LeaderGate::follower()];
    let elections: Vec<_> = gates
        .iter()
        .enumerate()
        .map(|(i, gate)| {
            tokio::spawn(run_election(
                world.client.clone(),
                election(&format!("replica-{i}")),
                gate.clone(),
            ))
        })
        .collect();
    let mut replicas = Vec::new();
    for gate in &gates {
        replicas.push(world.spawn_replica(gate.clone()).await);
    }

    let leader = world
        .eventually("a leader is elected", || async {
            gates.iter().position(LeaderGate::is_leader)
        })
        .await;
    world
        .eventually("dev provisioned under the first leader", || async {
            world
                .status("kyverno-rollout-auto")
                .await
                .filter(|s| s["stages"][0]["lastSuccessfulAppliedTime"].is_string())
        })
        .await;
    assert_eq!(
        gates.iter().filter(|g| g.is_leader()).count(),
        1,
        "exactly one leader at a time"
    );

    // Kill the leader: its controller and its election task, without releasing the lease.
    elections[leader].abort();
    gates[leader].set(false);
    let (handle, task) = replicas.remove(leader);
    handle.shutdown();
    task.await.expect("leader stops");
    let successor = 1 - leader;
    world
        .eventually("the other replica takes the lease", || async {
            gates[successor].is_leader().then_some(())
        })
        .await;

    let status = world.wait_phase("kyverno-rollout-auto", "Completed").await;
    assert_eq!(status["currentStageName"], "production");

    // No stage applied twice: each profile was written by tollgate exactly once, although two
    // replicas stepped the same promotion.
    let log = world.emulator.write_log();
    for stage in ["dev", "staging", "production"] {
        let name = format!("kyverno-rollout-auto-{stage}");
        let applies = log
            .iter()
            .filter(|w| w.name == name && w.field_manager == "tollgate" && !w.status_subresource)
            .count();
        assert_eq!(applies, 1, "{name} applied {applies} times");
    }
    // No delay skipped: each stage started at least 3s after the previous one was provisioned
    // (`lastSuccessfulAppliedTime` is overwritten on advance, as upstream; `provisionedAt` is not).
    let stages = status["stages"].as_array().expect("stages");
    for pair in stages.windows(2) {
        let done = chrono::DateTime::parse_from_rfc3339(
            pair[0]["provisionedAt"].as_str().expect("provisioned"),
        )
        .expect("time");
        let next = chrono::DateTime::parse_from_rfc3339(
            pair[1]["lastUpdateReconciledTime"]
                .as_str()
                .expect("started"),
        )
        .expect("time");
        assert!(
            next - done >= chrono::Duration::seconds(3),
            "delay skipped: {pair:?}"
        );
    }
    for (handle, _) in &replicas {
        handle.shutdown();
    }
}

//! Leader election against the emulator: only the leader writes; when the leader dies mid-rollout
//! the other replica takes the lease and finishes, applying no stage twice and skipping no delay;
//! a leader cut off from its Lease stops writing by its own clock; a leader that shuts down hands
//! the lease over at once; a webhook delivered to the standby makes the leader fetch.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use support::elected::{Elected, election};
use support::{TestRepo, World, fleet_yaml, seed};
use tokio::task::JoinHandle;
use tollgate::cluster::leader::{ElectionConfig, LeaderGate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_writes_and_a_successor_finishes_the_rollout() {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "3s"),
    );
    repo.commit("Kyverno, 3s soak per stage");
    let world = World::without_controller(repo, &fleet_yaml(1, "100ms")).await;

    let elections: Vec<Elected> = (0..2)
        .map(|i| Elected::start(&world, election(&format!("replica-{i}"))))
        .collect();
    let gates: Vec<LeaderGate> = elections.iter().map(|e| e.gate.clone()).collect();
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
    elections[leader].crash();
    gates[leader].step_down();
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

const LEASE_RESOURCE: &str = "leases.coordination.k8s.io";

/// The `ok` count of `tollgate_git_syncs_total` in an OpenMetrics scrape.
fn git_syncs_ok(metrics: &tollgate::metrics::Metrics) -> u64 {
    metrics
        .encode()
        .lines()
        .find(|l| l.starts_with("tollgate_git_syncs_total{") && l.contains("\"ok\""))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// Writes that only a leader may send: profiles and promotion state.
fn writer_writes(world: &World) -> Vec<tollgate_emulator::write_log::WriteRecord> {
    world
        .emulator
        .write_log()
        .into_iter()
        .filter(|w| {
            w.resource.starts_with("clusterprofiles.") || w.resource.starts_with("gitpromotions.")
        })
        .collect()
}

/// A leader whose Lease requests fail (a partition: the rest of the API still answers) must stop
/// writing when its lease expires by its own clock, although nothing told it that it lost the
/// lease, and resume only after a successful renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_write_without_a_valid_lease() {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "100ms"),
    );
    repo.commit("Kyverno 3.5.2");
    let world = World::without_controller(repo, &fleet_yaml(1, "100ms")).await;
    let config = election("replica-0");
    let valid_for = config.valid_for();
    let elected = Elected::start(&world, config.clone());
    let controller_config = world.controller_config();
    let metrics = controller_config.metrics.clone();
    let (handle, task) = tollgate::controller::start(
        world.client.clone(),
        controller_config,
        elected.gate.clone(),
    )
    .await
    .expect("controller starts");
    world.wait_phase("kyverno-rollout-auto", "Completed").await;
    assert!(elected.gate.is_leader());

    world
        .emulator
        .set_resource_failure(LEASE_RESOURCE, Some(500));
    let cut = chrono::Utc::now();
    let deadline = cut + chrono::Duration::from_std(valid_for).expect("duration");
    world
        .eventually("the local deadline passes", || async {
            (chrono::Utc::now() > deadline).then_some(())
        })
        .await;

    // A commit that asks for applies while the lease cannot be renewed.
    let syncs_before = git_syncs_ok(&metrics);
    world.repo.write(
        "kyverno.yaml",
        &seed("06-kyverno-rollout-auto-v2.yaml", "100ms"),
    );
    world.repo.commit("Kyverno 3.6.2");
    handle.poker.poke();
    world
        .eventually("the replica synced the new commit", || async {
            (git_syncs_ok(&metrics) > syncs_before).then_some(())
        })
        .await;
    // Leave a replica that wrongly believes it leads a whole lease duration to write.
    tokio::time::sleep(config.duration).await;
    let leading_during_cut = elected.gate.is_leader();
    let healed = chrono::Utc::now();
    world.emulator.set_resource_failure(LEASE_RESOURCE, None);

    world
        .eventually("snapshot 2 rolls out once the lease is renewed", || async {
            world
                .status("kyverno-rollout-auto")
                .await
                .filter(|s| s["snapshotIndex"] == 2 && s["phase"] == "Completed")
        })
        .await;
    let unleased: Vec<_> = writer_writes(&world)
        .into_iter()
        .filter(|w| w.time > deadline && w.time < healed)
        .map(|w| {
            format!(
                "{} {} {}/{} at {}",
                w.verb, w.resource, w.namespace, w.name, w.time
            )
        })
        .collect();
    assert!(
        unleased.is_empty(),
        "writes sent after the lease expired by the local clock: {unleased:#?}"
    );
    assert!(
        !leading_during_cut,
        "the gate still says leader a lease duration after the lease expired locally"
    );
    handle.shutdown();
    task.await.expect("controller stops");
    elected.shut_down().await;
}

/// On shutdown the leader clears the Lease's holder, so the standby takes over at once instead
/// of after a lease duration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_releases_its_lease_on_shutdown() {
    let world = World::without_controller(TestRepo::new(), &fleet_yaml(1, "100ms")).await;
    let long = |identity: &str| ElectionConfig {
        duration: Duration::from_secs(20),
        grace: Duration::from_secs(4),
        ..election(identity)
    };
    let first = Elected::start(&world, long("replica-0"));
    world
        .eventually("replica-0 leads", || async {
            first.gate.is_leader().then_some(())
        })
        .await;
    let second = Elected::start(&world, long("replica-1"));
    let standby = second.gate.clone();
    first.shut_down().await;

    let leases: Api<Lease> = Api::namespaced(world.client.clone(), "default");
    let lease = leases.get("tollgate-leader").await.expect("lease");
    let holder = lease.spec.and_then(|s| s.holder_identity);
    assert_ne!(
        holder.as_deref(),
        Some("replica-0"),
        "the released lease still names the old leader"
    );
    world
        .eventually("replica-1 takes the lease", || async {
            standby.is_leader().then_some(())
        })
        .await;

    // Measured on the API server's write log: from the old leader's last renewal to the new
    // leader's acquisition, well under a lease duration (without a release: at least one).
    let lease_writes: Vec<_> = world
        .emulator
        .write_log()
        .into_iter()
        .filter(|w| w.resource == LEASE_RESOURCE)
        .collect();
    let holder_of = |w: &tollgate_emulator::write_log::WriteRecord| {
        w.object["spec"]["holderIdentity"]
            .as_str()
            .map(str::to_string)
    };
    let last_renewal = lease_writes
        .iter()
        .rfind(|w| holder_of(w).as_deref() == Some("replica-0"))
        .expect("replica-0 renewed")
        .time;
    let taken = lease_writes
        .iter()
        .find(|w| holder_of(w).as_deref() == Some("replica-1"))
        .expect("replica-1 acquired")
        .time;
    assert!(
        taken - last_renewal < chrono::Duration::seconds(10),
        "the successor waited {} for a released lease",
        taken - last_renewal
    );
    second.shut_down().await;
}

/// One replica as `tollgate run --leader-elect` wires it: election, controller on a remote
/// (file://) clone polled hourly, the Lease watch that pokes git, and the webhook relay.
struct Replica {
    elected: Elected,
    controller: (tollgate::controller::ControllerHandle, JoinHandle<()>),
    relay: tollgate::cluster::fetch_request::FetchRelay,
    _cache: tempfile::TempDir,
}

impl Replica {
    async fn start(world: &World, identity: &str) -> Replica {
        Replica::start_with(world, election(identity)).await
    }

    async fn start_with(world: &World, election: ElectionConfig) -> Replica {
        use tollgate::cluster::fetch_request::{start_relay, watch_fetch_requests};
        let elected = Elected::start(world, election);
        let cache = tempfile::tempdir().expect("cache dir");
        let mut config = world.controller_config();
        let url = format!("file://{}", world.repo.path().display());
        config.source = tollgate_source::SourceConfig::new(url, "main", "", cache.path());
        // libgit2's timeouts are process-wide: this binary's sources all use the same.
        config.source.timeouts = support::NETWORK_TIMEOUTS;
        config.poll_interval = Duration::from_secs(3600);
        let (handle, task) =
            tollgate::controller::start(world.client.clone(), config, elected.gate.clone())
                .await
                .expect("replica starts");
        tokio::spawn(watch_fetch_requests(
            world.client.clone(),
            "default".into(),
            "tollgate-leader".into(),
            handle.poker.clone(),
        ));
        let (relay, _) = start_relay(
            world.client.clone(),
            "default",
            "tollgate-leader",
            elected.gate.clone(),
        );
        Replica {
            elected,
            controller: (handle, task),
            relay,
            _cache: cache,
        }
    }

    /// Serves webhooks (generic provider, `secret`) the way `run --listen` does.
    async fn serve_webhooks(&self, secret: &str) -> String {
        use tollgate::server::{self, ServerConfig, ServerState, WebhookSecrets};
        let mut config = ServerConfig::new(([127, 0, 0, 1], 0).into());
        config.webhooks = WebhookSecrets::default().with(
            tollgate::server::Provider::Generic,
            tollgate_source::Secret::new(secret),
        );
        let handle = &self.controller.0;
        let state = ServerState {
            metrics: std::sync::Arc::new(tollgate::metrics::Metrics::new()),
            ready: handle.ready.clone(),
            startup: handle.startup.clone(),
            poker: handle.poker.clone(),
            statuses: server::status_api::status_source(handle.statuses.clone()),
            leader: self.elected.gate.clone(),
            fetch_relay: Some(self.relay.clone()),
            branch: "main".into(),
            watch_health: Default::default(),
        };
        let bound = server::bind(&config, state).await.expect("server binds");
        let addr = bound.local_addr().to_string();
        tokio::spawn(bound.run(std::future::pending()));
        addr
    }
}

async fn post_webhook(addr: &str, signature: &str, body: &'static [u8]) -> u16 {
    let (addr, signature) = (addr.to_string(), signature.to_string());
    tokio::task::spawn_blocking(move || {
        support::http(
            &addr,
            "POST",
            "/webhooks/generic",
            &[("X-Tollgate-Signature", &signature)],
            body,
        )
    })
    .await
    .expect("request thread")
    .expect("webhook answers")
    .0
}

async fn fetch_stamp(world: &World) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(world.client.clone(), "default");
    let lease = leases.get("tollgate-leader").await.expect("lease");
    lease.metadata.annotations.and_then(|a| {
        a.get(tollgate::cluster::fetch_request::FETCH_REQUESTED_ANNOTATION)
            .cloned()
    })
}

/// Behind one Service half the webhooks land on the standby. A verified one there must make the
/// leader fetch at once (its poll is an hour away); an unverified one changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_on_the_standby_makes_the_leader_fetch() {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "100ms"),
    );
    repo.commit("Kyverno 3.5.2");
    let world = World::without_controller(repo, &fleet_yaml(1, "100ms")).await;
    let replicas = [
        Replica::start(&world, "replica-0").await,
        Replica::start(&world, "replica-1").await,
    ];
    let leader = world
        .eventually("a leader is elected", || async {
            replicas.iter().position(|r| r.elected.gate.is_leader())
        })
        .await;
    let standby = &replicas[1 - leader];
    let addr = standby.serve_webhooks("relay-secret").await;
    world.wait_phase("kyverno-rollout-auto", "Completed").await;

    world.repo.write(
        "kyverno.yaml",
        &seed("06-kyverno-rollout-auto-v2.yaml", "100ms"),
    );
    world.repo.commit("Kyverno 3.6.2");
    let body: &'static [u8] = br#"{"ref": "refs/heads/main"}"#;
    assert_eq!(post_webhook(&addr, "sha256=00", body).await, 401);
    assert_eq!(
        fetch_stamp(&world).await,
        None,
        "an unverified webhook asked the leader for a fetch"
    );

    let signature = format!(
        "sha256={}",
        tollgate::outbound::signature::hmac_sha256_hex(b"relay-secret", body)
    );
    assert_eq!(post_webhook(&addr, &signature, body).await, 202);
    world
        .eventually("the leader rolls out the pushed commit", || async {
            world
                .status("kyverno-rollout-auto")
                .await
                .filter(|s| s["snapshotIndex"] == 2)
        })
        .await;
    assert!(
        fetch_stamp(&world).await.is_some(),
        "the standby stamped the Lease"
    );
    for replica in replicas {
        replica.controller.0.shutdown();
        replica.elected.shut_down().await;
    }
}

fn signed(body: &[u8], secret: &[u8]) -> String {
    format!(
        "sha256={}",
        tollgate::outbound::signature::hmac_sha256_hex(secret, body)
    )
}

/// Issue #29: a push webhook reaches the standby while the API server is down. It is answered
/// 202, so it must not be dropped: once the server is back the leader fetches and rolls the
/// commit out. Its poll is an hour away and its 30 s lease outlasts the outage (it stays the
/// leader, and nothing else pokes its git), so only the relayed request can explain the fetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_on_the_standby_during_an_outage_rolls_out_once_the_server_is_back() {
    const LEASES: &str = "leases.coordination.k8s.io";
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "100ms"),
    );
    repo.commit("Kyverno 3.5.2");
    let world = World::without_controller(repo, &fleet_yaml(1, "100ms")).await;
    let long_lease = |identity: &str| ElectionConfig {
        duration: Duration::from_secs(30),
        grace: Duration::from_secs(5),
        ..election(identity)
    };
    let replicas = [
        Replica::start_with(&world, long_lease("replica-0")).await,
        Replica::start_with(&world, long_lease("replica-1")).await,
    ];
    let leader = world
        .eventually("a leader is elected", || async {
            replicas.iter().position(|r| r.elected.gate.is_leader())
        })
        .await;
    let standby = &replicas[1 - leader];
    let addr = standby.serve_webhooks("relay-secret").await;
    world.wait_phase("kyverno-rollout-auto", "Completed").await;
    world.repo.write(
        "kyverno.yaml",
        &seed("06-kyverno-rollout-auto-v2.yaml", "100ms"),
    );
    world.repo.commit("Kyverno 3.6.2");

    let stamps_before = world.emulator.request_counts().get("patch", LEASES);
    world.emulator.outage_start();
    let body: &'static [u8] = br#"{"ref": "refs/heads/main"}"#;
    assert_eq!(
        post_webhook(&addr, &signed(body, b"relay-secret"), body).await,
        202
    );
    world
        .eventually(
            "the standby's request reaches the (unavailable) API server",
            || async {
                (world.emulator.request_counts().get("patch", LEASES) > stamps_before).then_some(())
            },
        )
        .await;
    // The server stays away a while longer: the request must survive more than one refusal.
    tokio::time::sleep(Duration::from_secs(1)).await;
    world.emulator.outage_end();

    world
        .eventually("the leader rolls out the pushed commit", || async {
            world
                .status("kyverno-rollout-auto")
                .await
                .filter(|s| s["snapshotIndex"] == 2)
        })
        .await;
    assert!(
        replicas[leader].elected.gate.is_leader(),
        "the leader kept its lease, so no new term explains the fetch"
    );
    assert!(
        fetch_stamp(&world).await.is_some(),
        "the standby stamped the Lease once the server was back"
    );
    for replica in replicas {
        replica.controller.0.shutdown();
        replica.elected.shut_down().await;
    }
}

/// kube's client retries a 503 on its own. A write whose gate check passed must not be retried
/// past the lease's local deadline: here the API answers 503 for ClusterProfiles until after
/// the deadline, then accepts them; the pending apply must have been dropped by then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_write_without_a_valid_lease_even_on_a_retried_request() {
    const PROFILES: &str = "clusterprofiles.config.projectsveltos.io";
    let world = World::without_controller(TestRepo::new(), &fleet_yaml(1, "100ms")).await;
    world.emulator.set_resource_failure(PROFILES, Some(503));
    let gate = LeaderGate::follower();
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    gate.renewed(deadline);
    // The controller's own client does not retry in-request (see `controller_client`); a client
    // that does (kube's default) must still be cut off at the lease's deadline.
    let retrying = kube::Client::try_from(kube::Config::new(
        world.emulator.url().parse().expect("emulator URL"),
    ))
    .expect("client");
    let writer = tollgate::cluster::writer::ClusterWriter::new(retrying, gate, false);
    let profile = serde_json::json!({
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterProfile",
        "metadata": {"name": "retried"},
        "spec": {"clusterSelector": {"matchLabels": {"env": "dev"}}},
    });
    let apply = tokio::spawn(async move { writer.apply_profile("retried", &profile).await });
    world
        .eventually("the apply was refused at least once", || async {
            (world.emulator.request_counts().get("patch", PROFILES) > 0).then_some(())
        })
        .await;
    world
        .eventually("the local deadline passes", || async {
            (std::time::Instant::now() > deadline).then_some(())
        })
        .await;
    world.emulator.set_resource_failure(PROFILES, None);
    let result = apply.await.expect("apply task");
    assert!(
        matches!(
            result,
            Err(tollgate::cluster::errors::ClusterError::NotLeader)
        ),
        "the apply outlived the lease: {:?}",
        result.map(|_| "applied")
    );
    let landed = world
        .emulator
        .write_log()
        .into_iter()
        .filter(|w| w.resource == PROFILES)
        .count();
    assert_eq!(
        landed, 0,
        "a retried apply reached the server after the deadline"
    );
}

//! The shipped topology through the real binary: a standalone emulator and two
//! `tollgate run --leader-elect` processes on one remote repository, polled hourly. A signed
//! webhook delivered to the standby makes the leader roll out the pushed commit; SIGTERM on the
//! leader releases its lease at once, and the standby takes over.

use crate::support;

use support::child_emulator::{ChildEmulator, free_addr};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use support::{
    KillOnDrop as Process, TestRepo, eventually, fleet_yaml, http, seed,
    tollgate_binary as tollgate,
};

const LEASE_PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases/tollgate-leader";
const SECRET: &str = "relay-webhook-secret";

fn start_emulator(dir: &Path) -> (ChildEmulator, PathBuf, String) {
    // The lease is read with plain HTTP requests.
    let (emulator, addr) = ChildEmulator::start_plain(dir, &fleet_yaml(1, "100ms"));
    let kubeconfig = emulator.kubeconfig.clone();
    (emulator, kubeconfig, addr)
}

/// One replica as the Deployment runs it; its log goes to `<dir>/<identity>.log`.
fn start_replica(
    dir: &Path,
    repo: &TestRepo,
    kubeconfig: &Path,
    identity: &str,
) -> (Process, String) {
    let listen = free_addr();
    let secret_file = dir.join("webhook-secret");
    std::fs::write(&secret_file, SECRET).expect("secret");
    let log = std::fs::File::create(dir.join(format!("{identity}.log"))).expect("log file");
    let child = tollgate()
        .args(["--log", "info", "run", "--repo"])
        .arg(format!("file://{}", repo.path().display()))
        .args(["--interval", "1h", "--kubeconfig"])
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join(format!("cache-{identity}")))
        .args(["--leader-elect", "--lease-namespace", "default"])
        .args(["--lease-duration", "20s", "--lease-grace", "4s"])
        .args(["--identity", identity, "--listen", &listen])
        .arg("--webhook-generic-secret-file")
        .arg(&secret_file)
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("tollgate run starts");
    (Process(child), listen)
}

fn lease_holder(emulator: &str) -> Option<String> {
    let (code, body) = http(emulator, "GET", LEASE_PATH, &[], b"")?;
    let lease: Value = serde_json::from_str(&body).ok().filter(|_| code == 200)?;
    Some(
        lease["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    )
}

fn snapshot_index(kubeconfig: &Path) -> Option<u64> {
    let output = tollgate()
        .args(["status", "-o", "json", "--kubeconfig"])
        .arg(kubeconfig)
        .output()
        .ok()?;
    let statuses: Value = serde_json::from_slice(&output.stdout).ok()?;
    let status = &statuses[0]["status"];
    (status["phase"] == "Completed")
        .then(|| status["snapshotIndex"].as_u64())
        .flatten()
}

fn terminate(process: &mut Process) -> std::process::ExitStatus {
    let pid = process.0.id().to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status();
    assert!(sent.is_ok_and(|s| s.success()), "SIGTERM sent");
    process.0.wait().expect("the replica exits")
}

#[test]
fn a_webhook_on_the_standby_reaches_the_leader_and_sigterm_hands_the_lease_over() {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "100ms"),
    );
    repo.commit("Kyverno 3.5.2");
    let dir = tempfile::tempdir().expect("temp dir");
    let (_emulator, kubeconfig, emulator) = start_emulator(dir.path());
    let mut replicas = vec![
        (
            "replica-a",
            start_replica(dir.path(), &repo, &kubeconfig, "replica-a"),
        ),
        (
            "replica-b",
            start_replica(dir.path(), &repo, &kubeconfig, "replica-b"),
        ),
    ];
    let leader = eventually("a leader holds the lease", || {
        let holder = lease_holder(&emulator)?;
        replicas
            .iter()
            .position(|(identity, _)| *identity == holder)
    });
    let standby = 1 - leader;
    eventually("snapshot 1 rolled out", || {
        (snapshot_index(&kubeconfig)? == 1).then_some(())
    });
    for (_, (_, listen)) in &replicas {
        eventually("replica ready", || {
            http(listen, "GET", "/readyz", &[], b"").filter(|(code, _)| *code == 200)
        });
    }

    repo.write(
        "kyverno.yaml",
        &seed("06-kyverno-rollout-auto-v2.yaml", "100ms"),
    );
    repo.commit("Kyverno 3.6.2");
    let body = br#"{"ref": "refs/heads/main"}"#;
    let signature = format!(
        "sha256={}",
        tollgate::outbound::signature::hmac_sha256_hex(SECRET.as_bytes(), body)
    );
    let standby_listen = replicas[standby].1.1.clone();
    let (code, _) = http(
        &standby_listen,
        "POST",
        "/webhooks/generic",
        &[("X-Tollgate-Signature", &signature)],
        body,
    )
    .expect("webhook answers");
    assert_eq!(code, 202);
    eventually(
        "the leader rolls out the commit pushed to the standby",
        || (snapshot_index(&kubeconfig)? == 2).then_some(()),
    );

    let (leader_identity, (leader_process, _)) = &mut replicas[leader];
    let status = terminate(leader_process);
    assert!(
        status.success(),
        "a terminated replica exits cleanly: {status}"
    );
    let holder = lease_holder(&emulator).expect("the lease");
    assert_ne!(
        holder, *leader_identity,
        "the leader exited without releasing its lease (a successor would wait 20 s)"
    );
    let log = std::fs::read_to_string(dir.path().join(format!("{leader_identity}.log")))
        .expect("leader log");
    assert!(log.contains("released the leader lease"), "{log}");
    let standby_identity = replicas[standby].0;
    eventually("the standby takes the lease", || {
        (lease_holder(&emulator)? == standby_identity).then_some(())
    });
}

/// A grace period as long as the lease would leave the leader no time to write: refused at start,
/// before anything connects.
#[test]
fn a_lease_grace_not_shorter_than_the_lease_is_refused() {
    let repo = TestRepo::new();
    let output = tollgate()
        .args(["run", "--repo"])
        .arg(repo.path())
        .args(["--kubeconfig", "/nonexistent/kubeconfig", "--leader-elect"])
        .args(["--lease-duration", "5s", "--lease-grace", "5s"])
        .output()
        .expect("tollgate run");
    assert_eq!(output.status.code(), Some(2), "a configuration error");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--lease-grace (5s) must be shorter than --lease-duration (5s)"),
        "{stderr}"
    );
}

/// Every request of a replica names it: `tollgate/<version> (<identity>)`. The API server records
/// its writes under that User-Agent; status and Lease writes, which name no field manager, are
/// managed by `tollgate` (not `unknown`), and server-side apply keeps the manager `tollgate`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_of_a_replica_carries_its_versioned_user_agent() {
    use tollgate_emulator::{Emulator, EmulatorConfig, Fleet};

    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "100ms"),
    );
    repo.commit("Kyverno 3.5.2");
    let dir = tempfile::tempdir().expect("temp dir");
    let fleet = Fleet::parse(&fleet_yaml(1, "100ms"), Path::new("fleet.yaml")).expect("fleet");
    let emulator = Emulator::start(EmulatorConfig {
        fleet,
        ..support::emulator_config()
    })
    .await
    .expect("emulator starts");
    let kubeconfig = dir.path().join("kubeconfig");
    emulator.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let blocking = {
        let dir = dir.path().to_path_buf();
        tokio::task::spawn_blocking(move || {
            let (mut replica, _) = start_replica(&dir, &repo, &kubeconfig, "replica-a");
            eventually("snapshot 1 rolled out", || {
                (snapshot_index(&kubeconfig)? == 1).then_some(())
            });
            terminate(&mut replica);
        })
    };
    blocking.await.expect("the replica ran");

    let agent = format!("tollgate/{} (replica-a)", env!("CARGO_PKG_VERSION"));
    let writes = emulator.write_log();
    let by = |resource: &str| {
        writes
            .iter()
            .filter(|w| w.resource == resource)
            .collect::<Vec<_>>()
    };
    let leases = by("leases.coordination.k8s.io");
    let statuses: Vec<_> = by("gitpromotions.tollgate.dev")
        .into_iter()
        .filter(|w| w.status_subresource)
        .collect();
    let applies: Vec<_> = by("clusterprofiles.config.projectsveltos.io")
        .into_iter()
        .filter(|w| w.verb == "apply")
        .collect();
    for (what, written) in [
        ("Lease", &leases),
        ("GitPromotion status", &statuses),
        ("ClusterProfile apply", &applies),
    ] {
        assert!(!written.is_empty(), "the replica wrote no {what}");
        for write in written {
            assert_eq!(
                (write.user_agent.as_str(), write.field_manager.as_str()),
                (agent.as_str(), "tollgate"),
                "{what} {} {}",
                write.verb,
                write.name
            );
        }
    }
    let anonymous: Vec<String> = writes
        .iter()
        .filter(|w| w.field_manager == "unknown")
        .map(|w| format!("{} {} {}", w.verb, w.resource, w.name))
        .collect();
    assert!(
        anonymous.is_empty(),
        "writes without a manager: {anonymous:?}"
    );
    emulator.shutdown().await;
}

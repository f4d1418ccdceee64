//! API-server economy (issue #20): the writes a small rollout costs, pinned per verb and resource
//! so churn cannot creep back. A three-stage rollout whose clusters provision quickly: one apply
//! per stage, one status write per transition (progress-only writes are held back and replaced by
//! the next transition's), Events only on phase changes, and the state object created once.

use crate::support;

use std::collections::BTreeMap;

use support::{TestRepo, World};
use tollgate_fixtures::{cluster, fleet, policy, promotion, stage};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_stage_rollout_costs_at_most_three_writes_per_transition() {
    let repo = TestRepo::new();
    let mut web = promotion("web").chart("web", "1.0.0");
    let mut fleet = fleet().default_latency("10ms");
    for env in ["dev", "staging", "prod"] {
        web = web.stage(stage(env).selector("env", env).auto());
        for i in 1..=2 {
            fleet = fleet.cluster(cluster(&format!("{env}-{i}")).ns("fleet").label("env", env));
        }
    }
    repo.write("web.yaml", &web.to_yaml());
    repo.commit("web");
    let world = World::start(repo, &fleet.to_yaml()).await;
    world.wait_phase("web", "Completed").await;
    // Until nothing is held back or due: no write is left to come.
    world.settled().await;
    let counts = world.controller_writes();
    let expected: BTreeMap<String, u32> = [
        ("apply clusterprofiles.config.projectsveltos.io", 3),
        ("apply gitpromotions.tollgate.dev", 1),
        // Status: dev starts; dev→staging; staging→prod; prod done (Completed). Events: the run
        // starts (Progressing) and completes; the handoffs in between change no phase.
        ("update gitpromotions.tollgate.dev/status", 4),
        ("create events.events.k8s.io", 2),
    ]
    .into_iter()
    .map(|(what, n)| (what.to_string(), n))
    .collect();
    assert_eq!(counts, expected);
    // 10 writes for 4 transitions (3 stage starts and the completion): 2.5 each. A run of S
    // stages costs 2S + 4 writes: at most 3 per stage start from S = 4 on.
    let total: u32 = counts.values().sum();
    assert_eq!(total, 10);
}

/// With a notify endpoint (issue #29): the notices ride on the transitions' status writes, so
/// the only writes added are the patches recording what was delivered: at most one per
/// transition, fewer when deliveries settle together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notices_cost_no_status_write_and_one_patch_per_transition_at_most() {
    let receiver = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = receiver.local_addr().expect("address");
    let delivered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = delivered.clone();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut stream, _)) = receiver.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 8192];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                if stream.write_all(answer).await.is_ok() {
                    count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            });
        }
    });
    let secrets = tempfile::tempdir().expect("temp dir");
    let secret = secrets.path().join("hook");
    std::fs::write(&secret, format!("http://{addr}/hook\nkey\n")).expect("secret");
    let repo = TestRepo::new();
    let mut web = promotion("web").chart("web", "1.0.0");
    let mut fleet = fleet().default_latency("10ms");
    for env in ["dev", "staging", "prod"] {
        web = web.stage(stage(env).selector("env", env).auto());
        for i in 1..=2 {
            fleet = fleet.cluster(cluster(&format!("{env}-{i}")).ns("fleet").label("env", env));
        }
    }
    repo.write("web.yaml", &web.to_yaml());
    let events = ["StageStarted", "StageCompleted", "Completed"];
    let secret = secret.to_str().expect("utf-8 path");
    repo.write(
        "policy.yaml",
        &policy("told")
            .notify("hook", "webhook", secret, &events)
            .to_yaml(),
    );
    repo.commit("web, told to a webhook");
    let world = World::start(repo, &fleet.to_yaml()).await;
    world.wait_phase("web", "Completed").await;
    world
        .eventually("7 notices delivered", || async {
            (delivered.load(std::sync::atomic::Ordering::SeqCst) >= 7).then_some(())
        })
        .await;
    // Every delivery recorded, nothing held back or due: no write is left to come.
    world.settled().await;
    let mut counts = world.controller_writes();
    let patches = counts
        .remove("patch gitpromotions.tollgate.dev")
        .unwrap_or(0);
    // The notices go with the status writes: no more of those than without notices. (A patch
    // landing between a step's read and its status write makes that write conflict; the step is
    // retried and may then write two transitions at once, with one Event more: the same total.)
    let of = |what: &str| counts.get(what).copied().unwrap_or(0);
    assert_eq!(of("apply clusterprofiles.config.projectsveltos.io"), 3);
    assert_eq!(of("apply gitpromotions.tollgate.dev"), 1);
    assert!(
        of("update gitpromotions.tollgate.dev/status") <= 4,
        "{counts:?}"
    );
    let total: u32 = counts.values().sum();
    assert!(total <= 10, "as without notices: {counts:?}");
    // 4 transitions told (dev starts; dev done + staging starts; staging done + prod starts;
    // prod done + Completed): one patch each at most.
    assert!((1..=4).contains(&patches), "{patches} annotation patches");
    eprintln!("annotation patches recording 7 deliveries: {patches}");
}

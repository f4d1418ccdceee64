//! Watch fan-out (10,000 changes to one watcher, first write to last event received) and a list
//! of 10,000 objects, through kube::Client over loopback HTTP.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use tollgate_emulator::{Emulator, EmulatorConfig, EmulatorHandle};

const OBJECTS: usize = 10_000;

fn lease(name: String) -> Lease {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"holderIdentity": "bench"}}))
        .expect("lease")
}

async fn start() -> (EmulatorHandle, kube::Client) {
    let config = EmulatorConfig {
        write_log_capacity: Some(1_000),
        watch_history: 20_000,
        ..EmulatorConfig::default()
    };
    let handle = Emulator::start(config).await.expect("emulator");
    let mut client_config = kube::Config::new(handle.url().parse().expect("url"));
    client_config.default_retry = false;
    let client = kube::Client::try_from(client_config).expect("client");
    (handle, client)
}

/// Creates OBJECTS leases with 32 concurrent writers; returns when the watcher saw them all.
async fn fan_out(client: &kube::Client, namespace: &str) -> Duration {
    let namespaced: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let version = namespaced
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .unwrap_or_default();
    let params = WatchParams::default().timeout(290);
    let mut events = Box::pin(namespaced.watch(&params, &version).await.expect("watch"));
    let started = Instant::now();
    let writer = {
        let api = namespaced.clone();
        tokio::spawn(async move {
            futures::stream::iter(0..OBJECTS)
                .for_each_concurrent(32, |i| {
                    let api = api.clone();
                    async move {
                        api.create(&PostParams::default(), &lease(format!("l{i:05}")))
                            .await
                            .expect("create");
                    }
                })
                .await;
        })
    };
    let mut seen = 0;
    while seen < OBJECTS {
        match events.next().await {
            Some(Ok(WatchEvent::Added(_))) => seen += 1,
            Some(Ok(_)) => {}
            other => panic!("watch ended early: {other:?}"),
        }
    }
    let elapsed = started.elapsed();
    writer.await.expect("writer");
    elapsed
}

fn benches(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (handle, client) = runtime.block_on(start());
    let mut group = c.benchmark_group("emulator");
    group.sample_size(10);
    let mut round = 0;
    group.bench_function("watch_fan_out_10k_changes", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                round += 1;
                total += runtime.block_on(fan_out(&client, &format!("ns{round}")));
            }
            total
        })
    });
    let listed: Api<Lease> = Api::namespaced(client.clone(), "ns1");
    group.bench_function("list_10k_objects", |b| {
        b.iter(|| {
            let list = runtime
                .block_on(listed.list(&ListParams::default()))
                .expect("list");
            assert_eq!(list.items.len(), OBJECTS);
        })
    });
    group.finish();
    runtime.block_on(handle.shutdown());
}

criterion_group!(emulator, benches);
criterion_main!(emulator);

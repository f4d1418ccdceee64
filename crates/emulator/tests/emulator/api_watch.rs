//! Watches and reflectors through kube-runtime: staying in sync, bookmarks, 410 relists.

use crate::common;

use std::pin::pin;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;
use tollgate_emulator::Fleet;

fn lease(name: &str, holder: &str) -> Lease {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"set": "a"}}, "spec": {"holderIdentity": holder}})).unwrap()
}

/// Names and holders, sorted: what "in sync" compares.
fn summary(leases: impl IntoIterator<Item = Lease>) -> Vec<(String, Option<String>)> {
    let mut rows: Vec<_> = leases
        .into_iter()
        .map(|l| {
            (
                l.metadata.name.unwrap_or_default(),
                l.spec.and_then(|s| s.holder_identity),
            )
        })
        .collect();
    rows.sort();
    rows
}

#[tokio::test]
async fn reflector_stays_in_sync_across_1000_changes_and_a_compaction() {
    let (handle, client) = start(Fleet::default()).await;
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    let (reader, writer) = reflector::store();
    let stream = reflector(writer, watcher(api.clone(), watcher::Config::default()));
    let driver = tokio::spawn(async move {
        let mut stream = pin!(stream.applied_objects());
        while stream.next().await.is_some() {}
    });
    reader.wait_until_ready().await.unwrap();

    // 1,000 changes: creates, updates and deletes mixed.
    for i in 0..1000u32 {
        let name = format!("l{}", i % 120);
        match i % 5 {
            0 | 1 => {
                let _ = api
                    .create(&PostParams::default(), &lease(&name, &format!("h{i}")))
                    .await;
            }
            2 | 3 => {
                let patch = json!({"spec": {"holderIdentity": format!("h{i}")}});
                let _ = api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await;
            }
            _ => {
                let _ = api.delete(&name, &DeleteParams::default()).await;
            }
        }
        if i == 500 {
            // Force a 410: forget history and break the stream; the watcher must relist.
            handle.compact();
            handle.drop_watches();
        }
    }
    let expected = summary(api.list(&ListParams::default()).await.unwrap().items);
    let lists_before = handle
        .request_counts()
        .get("list", "leases.coordination.k8s.io");
    eventually("reflector store equals the server's list", || {
        let reader = reader.clone();
        let expected = expected.clone();
        async move { (summary(reader.state().iter().map(|l| (**l).clone())) == expected).then_some(()) }
    })
    .await;
    assert!(!expected.is_empty());
    assert!(
        lists_before >= 2,
        "the 410 after compact() made the watcher relist ({lists_before} lists)"
    );
    driver.abort();
    handle.shutdown().await;
}

#[tokio::test]
async fn raw_watch_reports_410_for_compacted_versions_and_streams_events() {
    let (handle, client) = start(Fleet::default()).await;
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &lease("a", "x"))
        .await
        .unwrap();
    let version = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    handle.compact();
    let mut stream = pin!(
        api.watch(&kube::api::WatchParams::default(), &version)
            .await
            .unwrap()
    );
    match stream.next().await {
        Some(Ok(kube::api::WatchEvent::Error(status))) => {
            assert_eq!(status.code, 410);
            assert!(
                status
                    .message
                    .starts_with(&format!("too old resource version: {version} (")),
                "{}",
                status.message
            );
        }
        other => panic!("expected a 410 error event, got {other:?}"),
    }

    let fresh = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let params = kube::api::WatchParams::default()
        .labels("set=a")
        .timeout(30);
    let mut live = pin!(api.watch(&params, &fresh).await.unwrap());
    api.create(&PostParams::default(), &lease("b", "y"))
        .await
        .unwrap();
    api.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"set": "other"}}})),
    )
    .await
    .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match live.next().await {
            Some(Ok(kube::api::WatchEvent::Added(l))) => seen.push(("ADDED", l.metadata.name)),
            Some(Ok(kube::api::WatchEvent::Deleted(l))) => seen.push(("DELETED", l.metadata.name)),
            Some(Ok(kube::api::WatchEvent::Bookmark(_))) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    // Leaving the selector is seen as a deletion, like on the real server.
    assert_eq!(
        seen,
        [
            ("ADDED", Some("b".to_string())),
            ("DELETED", Some("b".to_string()))
        ]
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_events_and_bookmark() {
    let (handle, client) = start(Fleet::default()).await;
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    for name in ["a", "b", "c"] {
        api.create(&PostParams::default(), &lease(name, "x"))
            .await
            .unwrap();
    }
    let config = watcher::Config::default().streaming_lists();
    let mut events = pin!(watcher(api.clone(), config));
    let mut initial = Vec::new();
    loop {
        match events.next().await {
            Some(Ok(watcher::Event::InitApply(l))) => {
                initial.push(l.metadata.name.unwrap_or_default())
            }
            Some(Ok(watcher::Event::InitDone)) => break,
            Some(Ok(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    initial.sort();
    assert_eq!(initial, ["a", "b", "c"]);
    handle.shutdown().await;
}

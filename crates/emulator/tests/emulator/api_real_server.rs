//! Where the emulator answers like a real kube-apiserver and not like a friendlier stand-in:
//! 410 Gone for watches older than the retained history or a restart, start-up 403s, and the
//! plain-text 404 of paths outside every served group.

use crate::common;
use crate::raw_http;

use std::pin::pin;
use std::time::Duration;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;
use tollgate_emulator::{EmulatorConfig, Fleet};

fn lease(name: &str) -> Lease {
    serde_json::from_value(json!({"metadata": {"name": name}})).expect("lease")
}

async fn list_version(api: &Api<Lease>) -> String {
    api.list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("list resourceVersion")
}

/// The first event of a watch from `version`, which must be a 410 `Expired` ERROR.
async fn expect_expired(api: &Api<Lease>, version: &str) {
    let mut stream = pin!(
        api.watch(&WatchParams::default().timeout(5), version)
            .await
            .expect("a too-old watch is answered 200 with an ERROR event, like the real server")
    );
    match stream.next().await {
        Some(Ok(WatchEvent::Error(status))) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
        }
        other => panic!("expected a 410 ERROR event for {version}, got {other:?}"),
    }
}

#[tokio::test]
async fn a_watch_older_than_the_retained_history_of_its_type_gets_410_expired() {
    let (handle, client) = start_with(EmulatorConfig {
        watch_history: 3,
        ..common::config()
    })
    .await;
    let api: Api<Lease> = Api::namespaced(client, "default");
    let before = list_version(&api).await;
    for i in 0..5 {
        api.create(&PostParams::default(), &lease(&format!("l{i}")))
            .await
            .unwrap();
    }
    expect_expired(&api, &before).await;
    // Within the window the changes are replayed.
    let recent = api
        .get("l2")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = pin!(
        api.watch(&WatchParams::default().timeout(5), &recent)
            .await
            .unwrap()
    );
    match stream.next().await {
        Some(Ok(WatchEvent::Added(l))) => assert_eq!(l.metadata.name.as_deref(), Some("l3")),
        other => panic!("expected l3 ADDED, got {other:?}"),
    }
    handle.shutdown().await;
}

#[tokio::test]
async fn expiring_the_history_sends_410_to_open_watches_and_watchers_relist() {
    let (handle, client) = start(Fleet::default()).await;
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &lease("before"))
        .await
        .unwrap();
    let version = list_version(&api).await;
    let mut open = pin!(
        api.watch(&WatchParams::default().timeout(60), &version)
            .await
            .unwrap()
    );
    let (reader, writer) = reflector::store();
    let reflected = reflector(writer, watcher(api.clone(), watcher::Config::default()));
    let driver = tokio::spawn(async move {
        let mut stream = pin!(reflected.applied_objects());
        while stream.next().await.is_some() {}
    });
    reader.wait_until_ready().await.unwrap();
    eventually("both watches open", || async {
        (handle.open_watches() == 2).then_some(())
    })
    .await;
    let lists_before = handle
        .request_counts()
        .get("list", "leases.coordination.k8s.io");

    handle.expire_watch_history();

    match open.next().await {
        Some(Ok(WatchEvent::Error(status))) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(
                status
                    .message
                    .starts_with(&format!("too old resource version: {version} (")),
                "{}",
                status.message
            );
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    assert!(open.next().await.is_none(), "the expired watch ends");
    expect_expired(&api, &version).await;
    // The watcher relists at once and stays current.
    api.create(&PostParams::default(), &lease("after"))
        .await
        .unwrap();
    eventually("the reflector relisted and sees the new lease", || async {
        let relisted = handle
            .request_counts()
            .get("list", "leases.coordination.k8s.io")
            > lists_before;
        let current = reader
            .state()
            .iter()
            .any(|l| l.metadata.name.as_deref() == Some("after"));
        (relisted && current).then_some(())
    })
    .await;
    driver.abort();
    handle.shutdown().await;
}

async fn restart(continuous: bool) {
    let (handle, client) = start(Fleet::default()).await;
    let api: Api<Lease> = Api::namespaced(client, "default");
    api.create(&PostParams::default(), &lease("kept"))
        .await
        .unwrap();
    let seen = list_version(&api).await;
    let saved = handle.state_json();
    handle.shutdown().await;

    let (restarted, client) = start_with(EmulatorConfig {
        initial_state: Some(saved),
        continuous_resource_versions: continuous,
        ..common::config()
    })
    .await;
    let api: Api<Lease> = Api::namespaced(client, "default");
    assert!(api.get_opt("kept").await.unwrap().is_some());
    let now: u64 = list_version(&api).await.parse().unwrap();
    let seen_number: u64 = seen.parse().unwrap();
    if continuous {
        assert_eq!(now, seen_number, "continuous on request");
        let mut stream = pin!(
            api.watch(&WatchParams::default().timeout(1), &seen)
                .await
                .unwrap()
        );
        assert!(
            stream.next().await.is_none(),
            "no error and nothing missed: the watch just times out"
        );
    } else {
        assert!(now > seen_number + 1000, "versions jump: {seen} → {now}");
        expect_expired(&api, &seen).await;
    }
    restarted.shutdown().await;
}

#[tokio::test]
async fn a_restart_from_a_state_file_makes_earlier_versions_410_unless_continuity_is_asked() {
    restart(false).await;
    restart(true).await;
}

#[tokio::test]
async fn a_starting_server_answers_403_forbidden_until_its_window_ends() {
    let (handle, client) = start(Fleet::default()).await;
    let api: Api<Lease> = Api::namespaced(client, "default");
    handle.forbid_requests_for(Duration::from_secs(3600));
    for error in [
        api.list(&ListParams::default()).await.unwrap_err(),
        api.create(&PostParams::default(), &lease("x"))
            .await
            .unwrap_err(),
    ] {
        match &error {
            kube::Error::Api(status) => {
                assert!(status.is_forbidden(), "{status:?}");
                assert_eq!(status.reason, "Forbidden");
                assert!(
                    status.message.starts_with(
                        "leases.coordination.k8s.io is forbidden: User \"system:anonymous\" cannot"
                    ),
                    "{}",
                    status.message
                );
            }
            other => panic!("expected a 403 Status, got {other:?}"),
        }
    }
    let raw = raw_http::request(handle.addr(), "GET", "/api/v1/namespaces", &[], None).await;
    assert_eq!(raw.status, 403);
    assert_eq!(raw.json()["code"], 403);
    handle.forbid_requests_for(Duration::ZERO);
    api.create(&PostParams::default(), &lease("x"))
        .await
        .unwrap();
    handle.shutdown().await;
}

#[tokio::test]
async fn unknown_groups_and_versions_get_the_plain_text_404_page() {
    let (handle, _client) = start(Fleet::default()).await;
    for path in [
        "/apis/nope.example.com",
        "/apis/nope.example.com/v1",
        "/apis/nope.example.com/v1/things",
        "/apis/tollgate.dev/v9/gitpromotions",
        "/api/v2/namespaces",
        "/healthz/nothing/here",
    ] {
        let raw = raw_http::request(handle.addr(), "GET", path, &[], None).await;
        assert_eq!(raw.status, 404, "{path}");
        assert_eq!(raw.body, "404 page not found\n", "{path}");
        assert_eq!(
            raw.header("content-type"),
            Some("text/plain; charset=utf-8"),
            "{path}"
        );
    }
    // An unknown resource in a served group/version keeps the JSON NotFound Status.
    let raw = raw_http::request(
        handle.addr(),
        "GET",
        "/apis/tollgate.dev/v1alpha1/nothings",
        &[],
        None,
    )
    .await;
    assert_eq!(raw.status, 404);
    assert_eq!(raw.header("content-type"), Some("application/json"));
    assert_eq!(raw.json()["reason"], "NotFound");
    handle.shutdown().await;
}

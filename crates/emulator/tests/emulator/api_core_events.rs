//! core/v1 Events and events.k8s.io/v1 Events are one storage under two APIs, as on the real
//! server: `kubectl get events` (core/v1) lists what tollgate writes through events.k8s.io/v1.

use crate::common;
use crate::raw_http;

use std::path::Path;
use std::pin::pin;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use tollgate_emulator::Fleet;

/// An Event as tollgate's publisher creates it.
fn tollgate_event(name: &str) -> Event {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "type": "Normal", "reason": "StageProvisioned",
        "note": "stage dev provisioned", "action": "Rollout",
        "regarding": {"apiVersion": "tollgate.dev/v1alpha1", "kind": "GitPromotion", "name": "web"},
        "reportingController": "tollgate", "reportingInstance": "tollgate-0"}))
    .expect("event")
}

#[tokio::test]
async fn core_v1_events_show_what_events_k8s_io_writers_wrote() {
    let (handle, client) = start(Fleet::default()).await;
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let version = core
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watch = pin!(
        core.watch(&WatchParams::default().timeout(10), &version)
            .await
            .unwrap()
    );
    events
        .create(&PostParams::default(), &tollgate_event("web.1"))
        .await
        .unwrap();

    let listed = core.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(listed.len(), 1);
    let seen = &listed[0];
    assert_eq!(seen.message.as_deref(), Some("stage dev provisioned"));
    assert_eq!(seen.involved_object.name.as_deref(), Some("web"));
    assert_eq!(seen.involved_object.kind.as_deref(), Some("GitPromotion"));
    assert_eq!(
        seen.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("tollgate")
    );
    assert_eq!(seen.reporting_component.as_deref(), Some("tollgate"));
    match watch.next().await {
        Some(Ok(WatchEvent::Added(e))) => {
            assert_eq!(e.message.as_deref(), Some("stage dev provisioned"))
        }
        other => panic!("expected ADDED through core/v1, got {other:?}"),
    }

    // A repeat extends the series through events.k8s.io; core/v1 shows it as the count.
    let series = json!({"series": {"count": 4, "lastObservedTime": "2026-01-01T00:05:00.000000Z"}});
    events
        .patch("web.1", &PatchParams::default(), &Patch::Merge(&series))
        .await
        .unwrap();
    assert_eq!(core.get("web.1").await.unwrap().count, Some(4));
    match watch.next().await {
        Some(Ok(WatchEvent::Modified(e))) => assert_eq!(e.count, Some(4)),
        other => panic!("expected MODIFIED through core/v1, got {other:?}"),
    }

    // And the other way: a core/v1 writer's Event is an events.k8s.io/v1 Event with a note.
    let written: CoreEvent = serde_json::from_value(json!({"metadata": {"name": "kubelet.1"},
        "message": "pulled", "reason": "Pulled", "type": "Normal",
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "source": {"component": "kubelet", "host": "node-1"}, "count": 2}))
    .unwrap();
    core.create(&PostParams::default(), &written).await.unwrap();
    let stored = events.get("kubelet.1").await.unwrap();
    assert_eq!(stored.note.as_deref(), Some("pulled"));
    assert_eq!(stored.regarding.and_then(|r| r.name).as_deref(), Some("p"));
    assert_eq!(stored.reporting_controller.as_deref(), Some("kubelet"));
    assert_eq!(stored.deprecated_count, Some(2));
    core.patch(
        "kubelet.1",
        &PatchParams::default(),
        &Patch::Merge(json!({"count": 3})),
    )
    .await
    .unwrap();
    assert_eq!(
        events.get("kubelet.1").await.unwrap().deprecated_count,
        Some(3)
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn discovery_lists_both_event_apis_and_kubectl_get_events_shows_the_note() {
    let (handle, client) = start(Fleet::default()).await;
    for (path, group_version) in [
        ("/api/v1", "v1"),
        ("/apis/events.k8s.io/v1", "events.k8s.io/v1"),
    ] {
        let doc = raw_http::request(handle.addr(), "GET", path, &[], None)
            .await
            .json();
        assert_eq!(doc["groupVersion"], group_version);
        assert!(
            doc["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == "events" && r["kind"] == "Event"),
            "{path}: {doc}"
        );
    }
    let events: Api<Event> = Api::namespaced(client, "default");
    events
        .create(&PostParams::default(), &tollgate_event("web.1"))
        .await
        .unwrap();
    let table = raw_http::request(
        handle.addr(),
        "GET",
        "/api/v1/namespaces/default/events?limit=500",
        &[
            ("Accept", raw_http::KUBECTL_TABLE_ACCEPT),
            ("User-Agent", raw_http::KUBECTL_USER_AGENT),
        ],
        None,
    )
    .await
    .json();
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["priority"] == 0)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        columns,
        ["Last Seen", "Type", "Reason", "Object", "Message"]
    );
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[1], "Normal");
    assert_eq!(cells[2], "StageProvisioned");
    assert_eq!(cells[3], "gitpromotion/web");
    assert_eq!(cells[5], "tollgate, tollgate-0");
    assert_eq!(cells[6], "stage dev provisioned");
    assert_eq!(cells[8], 1);

    if Path::new("/usr/bin/kubectl").exists() {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        handle.write_kubeconfig(&kubeconfig).unwrap();
        let output = tokio::process::Command::new("/usr/bin/kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--cache-dir")
            .arg(dir.path())
            .args(["get", "events"])
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("stage dev provisioned"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    } else {
        println!("SKIP: kubectl not installed; checked with raw HTTP only");
    }
    handle.shutdown().await;
}

/// An Event with its own type, reason and object.
fn event_about(name: &str, object: &str, kind: &str, reason: &str) -> Event {
    let mut event = tollgate_event(name);
    event.type_ = Some(kind.into());
    event.reason = Some(reason.into());
    event.regarding.as_mut().expect("regarding").name = Some(object.into());
    event
}

fn names<T: kube::Resource>(items: &[T]) -> Vec<String> {
    let mut names: Vec<String> = items
        .iter()
        .map(|e| e.meta().name.clone().unwrap())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn events_are_selected_by_the_fields_kubectl_users_type() {
    let (handle, client) = start(Fleet::default()).await;
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    for event in [
        event_about("web.1", "web", "Warning", "StageFailed"),
        event_about("web.2", "web", "Normal", "StageProvisioned"),
        event_about("api.1", "api", "Warning", "Blackout"),
    ] {
        events.create(&PostParams::default(), &event).await.unwrap();
    }
    let core_list = |fields: &'static str| {
        let core = core.clone();
        async move {
            names(
                &core
                    .list(&ListParams::default().fields(fields))
                    .await
                    .unwrap()
                    .items,
            )
        }
    };
    assert_eq!(core_list("type=Warning").await, ["api.1", "web.1"]);
    assert_eq!(core_list("reason=Blackout").await, ["api.1"]);
    assert_eq!(
        core_list("involvedObject.name=web").await,
        ["web.1", "web.2"]
    );
    assert_eq!(
        core_list("involvedObject.name=web,type!=Warning").await,
        ["web.2"]
    );
    assert_eq!(
        core_list("involvedObject.kind=GitPromotion,reason==StageFailed").await,
        ["web.1"]
    );
    let by_regarding = events
        .list(&ListParams::default().fields("regarding.name=api,type=Warning"))
        .await
        .unwrap();
    assert_eq!(names(&by_regarding.items), ["api.1"]);

    // A field the kind cannot be selected by is refused, naming it, as the real server does.
    let refused = core
        .list(&ListParams::default().fields("note=x"))
        .await
        .unwrap_err();
    match refused {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 400);
            assert!(
                status.message.contains("field label not supported: note"),
                "{}",
                status.message
            );
        }
        other => panic!("expected a 400, got {other:?}"),
    }

    // A watch selects the same way: only the warnings about `web` arrive.
    let version = core
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let params = WatchParams::default()
        .fields("involvedObject.name=web,type=Warning")
        .timeout(10);
    let mut watch = pin!(core.watch(&params, &version).await.unwrap());
    events
        .create(
            &PostParams::default(),
            &event_about("api.2", "api", "Warning", "Blackout"),
        )
        .await
        .unwrap();
    events
        .create(
            &PostParams::default(),
            &event_about("web.3", "web", "Normal", "StageProvisioned"),
        )
        .await
        .unwrap();
    events
        .create(
            &PostParams::default(),
            &event_about("web.4", "web", "Warning", "StageFailed"),
        )
        .await
        .unwrap();
    match watch.next().await {
        Some(Ok(WatchEvent::Added(e))) => assert_eq!(e.metadata.name.as_deref(), Some("web.4")),
        other => panic!("expected only web.4 ADDED, got {other:?}"),
    }
    handle.shutdown().await;
}

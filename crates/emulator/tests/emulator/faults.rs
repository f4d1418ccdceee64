//! Fault injection as a kube client sees it.

use crate::common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tollgate_emulator::Fleet;

#[tokio::test]
async fn error_rate_by_verb_is_visible_and_seeded() {
    let (handle, client) = start(Fleet::default()).await;
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "l"}})).unwrap(),
    )
    .await
    .unwrap();
    handle.set_seed(42);
    handle.set_error_rate("patch", 0.3);
    let mut failures = 0;
    for i in 0..200 {
        let patch = Patch::Merge(json!({"spec": {"holderIdentity": format!("h{i}")}}));
        match api.patch("l", &PatchParams::default(), &patch).await {
            Ok(_) => {}
            Err(error) => {
                assert_eq!(error_code(&error), Some(500));
                failures += 1;
            }
        }
    }
    assert!(
        (30..100).contains(&failures),
        "about 30% of 200 patches fail, got {failures}"
    );
    // Other verbs are unaffected.
    for _ in 0..20 {
        api.get("l").await.unwrap();
    }
    handle.set_error_rate("patch", 0.0);
    api.patch(
        "l",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {}})),
    )
    .await
    .unwrap();
    assert_eq!(
        handle
            .request_counts()
            .get("patch", "leases.coordination.k8s.io"),
        201
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn outage_then_recovery() {
    let (handle, client) = start(Fleet::default()).await;
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    let params = kube::api::WatchParams::default().timeout(60);
    let mut watch = Box::pin(api.watch(&params, "0").await.unwrap());
    eventually("watch registered", || async {
        (handle.open_watches() == 1).then_some(())
    })
    .await;
    handle.outage_start();
    let error = api.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(error_code(&error), Some(503));
    use futures::StreamExt;
    assert!(
        watch.next().await.is_none(),
        "open watches are closed by an outage"
    );
    handle.outage_end();
    api.list(&ListParams::default()).await.unwrap();
    handle.set_request_latency(Duration::from_millis(5));
    api.list(&ListParams::default()).await.unwrap();
    handle.shutdown().await;
}

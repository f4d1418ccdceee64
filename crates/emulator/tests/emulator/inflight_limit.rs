//! The real server's max-in-flight limits (`--max-requests-inflight`,
//! `--max-mutating-requests-inflight`): 429 `TooManyRequests` with `Retry-After` over the limit,
//! watches not counted, and a slot given back when its client goes away.

use crate::common;
use crate::raw_http;

use std::pin::pin;
use std::time::Duration;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use tollgate_emulator::Fleet;

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases";

/// Long enough that a request sleeping through it is in flight for the whole test.
const HOLD: Duration = Duration::from_secs(3600);

fn lease(name: &str) -> Lease {
    serde_json::from_value(json!({"metadata": {"name": name}})).expect("lease")
}

/// Asserts `raw` is the real server's 429, with `seconds` in the header and the body.
fn assert_too_many_requests(raw: &raw_http::RawResponse, seconds: u64) {
    assert_eq!(raw.status, 429, "{raw:?}");
    assert_eq!(
        raw.header("retry-after"),
        Some(seconds.to_string().as_str()),
        "{raw:?}"
    );
    let body = raw.json();
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["status"], "Failure");
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(body["code"], 429);
    assert_eq!(
        body["message"],
        "Too many requests, please try again later."
    );
    assert_eq!(body["details"]["retryAfterSeconds"], seconds);
}

#[tokio::test]
async fn over_the_inflight_limit_a_request_gets_429_with_retry_after_until_a_slot_frees() {
    let (handle, _client) = start(Fleet::default()).await;
    handle.set_max_inflight(Some(1), Some(1));
    handle.set_request_latency(HOLD);
    let addr = handle.addr();
    let held = tokio::spawn(async move {
        raw_http::request(addr, "GET", LEASES, &[], None).await;
    });
    eventually("the first list holds the only read slot", || async {
        (handle.requests_in_flight() == (1, 0)).then_some(())
    })
    .await;
    let refused = raw_http::request(addr, "GET", LEASES, &[], None).await;
    assert_too_many_requests(&refused, 1);
    assert_eq!(handle.throttled(), 1);
    assert_eq!(
        handle
            .request_counts()
            .get("list", "leases.coordination.k8s.io"),
        1,
        "a refused request is counted as throttled, not as served"
    );

    // The client of the held request goes away: its slot is given back.
    held.abort();
    eventually("the cancelled list frees its slot", || async {
        (handle.requests_in_flight() == (0, 0)).then_some(())
    })
    .await;
    handle.set_request_latency(Duration::ZERO);
    let served = raw_http::request(addr, "GET", LEASES, &[], None).await;
    assert_eq!(served.status, 200, "{served:?}");
    assert_eq!(handle.throttled(), 1);
    handle.shutdown().await;
}

#[tokio::test]
async fn watches_are_not_counted_against_the_inflight_limit() {
    let (handle, client) = start(Fleet::default()).await;
    let api: Api<Lease> = Api::namespaced(client, "default");
    handle.set_max_inflight(Some(0), Some(0));
    let mut watches = Vec::new();
    for _ in 0..3 {
        let watch = api
            .watch(&WatchParams::default().timeout(60), "0")
            .await
            .expect("a watch is let through a full server");
        watches.push(Box::pin(watch));
    }
    eventually("watches open", || async {
        (handle.open_watches() == 3).then_some(())
    })
    .await;
    assert_eq!(handle.requests_in_flight(), (0, 0));
    let list = api.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(error_code(&list), Some(429), "{list:?}");
    let create = api
        .create(&PostParams::default(), &lease("l"))
        .await
        .unwrap_err();
    assert_eq!(error_code(&create), Some(429), "{create:?}");
    assert_eq!(handle.throttled(), 2);

    handle.set_max_inflight(Some(0), None);
    api.create(&PostParams::default(), &lease("l"))
        .await
        .expect("writes have their own limit");
    let mut first = pin!(watches.remove(0));
    match first.next().await {
        Some(Ok(WatchEvent::Added(added))) => {
            assert_eq!(added.metadata.name.as_deref(), Some("l"))
        }
        other => panic!("expected ADDED, got {other:?}"),
    }
    handle.shutdown().await;
}

#[tokio::test]
async fn without_a_limit_concurrent_requests_never_get_429() {
    let (handle, client) = start(Fleet::default()).await;
    let api: Api<Lease> = Api::namespaced(client, "default");
    handle.set_request_latency(Duration::from_millis(20));
    let requests = (0..40).map(|i| {
        let api = api.clone();
        async move {
            api.create(&PostParams::default(), &lease(&format!("l{i}")))
                .await
                .map(|_| ())?;
            api.list(&ListParams::default()).await.map(|_| ())
        }
    });
    for outcome in futures::future::join_all(requests).await {
        outcome.expect("no request is refused without a limit");
    }
    assert_eq!(handle.throttled(), 0);
    assert_eq!(handle.requests_in_flight(), (0, 0));
    handle.shutdown().await;
}

#[tokio::test]
async fn injected_429s_carry_retry_after_with_the_configured_seconds() {
    let (handle, _client) = start(Fleet::default()).await;
    handle.set_error_code(429);
    handle.set_error_rate("list", 1.0);
    let default = raw_http::request(handle.addr(), "GET", LEASES, &[], None).await;
    assert_too_many_requests(&default, 1);
    handle.set_retry_after_seconds(7);
    let configured = raw_http::request(handle.addr(), "GET", LEASES, &[], None).await;
    assert_too_many_requests(&configured, 7);
    assert_eq!(handle.throttled(), 0, "injected 429s are not the limit's");

    handle.set_error_rate("list", 0.0);
    handle.set_max_inflight(Some(0), None);
    let limited = raw_http::request(handle.addr(), "GET", LEASES, &[], None).await;
    assert_too_many_requests(&limited, 7);
    handle.shutdown().await;
}

//! Webhooks reach the leader. Replicas sit behind one Service, so a push webhook may land on a
//! standby, which cannot write. A standby that VERIFIED a webhook stamps the leader Lease with
//! the annotation [`FETCH_REQUESTED_ANNOTATION`] (the time of the request); every replica watches
//! the Lease and pokes its own git task when the stamp changes, so the leader fetches within a
//! watch round-trip instead of waiting for its next poll. A stamp the API server refuses (an
//! outage, a restart) is kept and retried until it lands, so an acknowledged webhook is never
//! dropped; if the relay cannot keep it at all, the webhook is answered 503 for the git host to
//! send again.
//!
//! The Lease is used because every replica already reads it and RBAC already scopes tollgate to
//! it; the stamp carries no content, so the worst a stale or repeated one causes is a fetch.

use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tokio::sync::mpsc;
use tollgate_source::Poker;
use tracing::{debug, info, warn};

use super::leader::LeaderGate;
use super::watch::WatchBackoff;

pub const FETCH_REQUESTED_ANNOTATION: &str = "tollgate.dev/fetch-requested";

/// Field manager of the stamp, distinct from the Lease holder's writes.
const FIELD_MANAGER: &str = "tollgate-fetch-request";

/// A single stamp write must not hold up the next one forever.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Retries of a stamp the API server refused: soon at first (a blip), then at most this far
/// apart, so the leader hears of the push within seconds of the server answering again.
const FIRST_RETRY: Duration = Duration::from_millis(200);
const MAX_RETRY: Duration = Duration::from_secs(2);

/// Where verified webhooks on a standby ask the leader for a fetch. Cheap to clone; requests made
/// while one is pending coalesce into it.
#[derive(Clone, Debug)]
pub struct FetchRelay {
    requests: mpsc::Sender<()>,
}

/// The relay's task has ended: a request cannot be kept.
#[derive(Debug, thiserror::Error)]
#[error("the fetch relay has stopped")]
pub struct RelayStopped;

impl FetchRelay {
    /// Hands a request to the relay, which keeps it until the stamp is on the Lease (retrying
    /// through outages) or this replica leads. Does not wait for the stamp.
    pub fn request(&self) -> Result<(), RelayStopped> {
        match self.requests.try_send(()) {
            // Full: a request is already pending; its stamp, written later, covers this one.
            Ok(()) | Err(mpsc::error::TrySendError::Full(())) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(())) => Err(RelayStopped),
        }
    }
}

/// Starts the task writing stamps on the Lease `namespace/lease_name` for this replica, whose
/// leadership `gate` tells (a leader fetches on its own poke, it needs no stamp).
pub fn start_relay(
    client: kube::Client,
    namespace: &str,
    lease_name: &str,
    gate: LeaderGate,
) -> (FetchRelay, tokio::task::JoinHandle<()>) {
    let (requests, mut pending) = mpsc::channel(1);
    let api: Api<Lease> = Api::namespaced(client, namespace);
    let lease_name = lease_name.to_string();
    let task = tokio::spawn(async move {
        while pending.recv().await.is_some() {
            deliver(&api, &lease_name, &gate, &mut pending).await;
        }
    });
    (FetchRelay { requests }, task)
}

/// Writes one stamp, retrying until it lands: a webhook acknowledged with 202 is never dropped
/// because the API server was away (the leader's next poll may be many minutes off). Logs the
/// first failure and the recovery, not every retry.
async fn deliver(
    api: &Api<Lease>,
    lease_name: &str,
    gate: &LeaderGate,
    pending: &mut mpsc::Receiver<()>,
) {
    let mut delay = FIRST_RETRY;
    let mut failures = 0u32;
    loop {
        if gate.is_leader() {
            // The webhook poked this replica's own git task, and it now writes.
            debug!("leading now: this replica's own fetch covers the webhook");
            return;
        }
        // Requests that arrived meanwhile are covered by the stamp about to be written.
        while pending.try_recv().is_ok() {}
        let error = match tokio::time::timeout(WRITE_TIMEOUT, stamp(api, lease_name)).await {
            Ok(Ok(stamp)) => {
                match failures {
                    0 => info!(%stamp, "asked the leader to fetch (webhook on a standby)"),
                    _ => {
                        info!(%stamp, failures, "asked the leader to fetch, now that the API server answers")
                    }
                }
                return;
            }
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("the request timed out after {WRITE_TIMEOUT:?}"),
        };
        if failures == 0 {
            warn!(%error, lease = %lease_name, "could not ask the leader to fetch yet; the webhook is kept and the request retried until the API server answers");
        }
        failures += 1;
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_RETRY);
    }
}

async fn stamp(api: &Api<Lease>, lease_name: &str) -> Result<String, kube::Error> {
    // Nanoseconds: two pushes within one second still change the value, so both are seen.
    let now = Utc::now().to_rfc3339_opts(SecondsFormat::Nanos, true);
    let patch = json!({"metadata": {"annotations": {FETCH_REQUESTED_ANNOTATION: now}}});
    api.patch(
        lease_name,
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        },
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(now)
}

/// Watches the Lease and pokes `poker` whenever its stamp changes. Runs until the process ends;
/// watch errors are retried every second at most (as the cluster watches are: kube's default
/// back-off grows to 30 s and would delay a relayed fetch that long after an outage), and
/// logged once per failing spell.
pub async fn watch_fetch_requests(
    client: kube::Client,
    namespace: String,
    lease_name: String,
    poker: Poker,
) {
    let api: Api<Lease> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={lease_name}"));
    let mut stream = kube::runtime::WatchStreamExt::backoff(
        watcher::watcher(api, config),
        WatchBackoff::default(),
    )
    .boxed();
    let mut last_seen: Option<String> = None;
    let mut failing = false;
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => {
                if std::mem::take(&mut failing) {
                    info!(lease = %lease_name, "watching the Lease for fetch requests works again");
                }
                if let Event::Apply(lease) | Event::InitApply(lease) = event {
                    let stamp = lease
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(FETCH_REQUESTED_ANNOTATION))
                        .cloned();
                    if stamp.is_some() && stamp != last_seen {
                        debug!(stamp = ?stamp, "fetch requested through the Lease: poking git");
                        poker.poke();
                        last_seen = stamp;
                    }
                }
            }
            Err(error) => {
                if !std::mem::replace(&mut failing, true) {
                    warn!(%error, lease = %lease_name, "watching the Lease for fetch requests failed; retrying every second at most");
                }
            }
        }
    }
}

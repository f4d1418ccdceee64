//! Webhooks reach the leader. Replicas sit behind one Service, so a push webhook may land on a
//! standby, which cannot write. A standby that VERIFIED a webhook stamps the leader Lease with
//! the annotation [`FETCH_REQUESTED_ANNOTATION`] (the time of the request); every replica watches
//! the Lease and pokes its own git task when the stamp changes, so the leader fetches within a
//! watch round-trip instead of waiting for its next poll.
//!
//! The Lease is used because every replica already reads it and RBAC already scopes tollgate to
//! it; the stamp carries no content, so the worst a stale or repeated one causes is a fetch.

use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tokio::sync::mpsc;
use tollgate_source::Poker;
use tracing::{debug, info, warn};

pub const FETCH_REQUESTED_ANNOTATION: &str = "tollgate.dev/fetch-requested";

/// Field manager of the stamp, distinct from the Lease holder's writes.
const FIELD_MANAGER: &str = "tollgate-fetch-request";

/// A single stamp write must not hold up the next one forever.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where verified webhooks on a standby ask the leader for a fetch. Cheap to clone; requests made
/// while one is being written coalesce into it.
#[derive(Clone, Debug)]
pub struct FetchRelay {
    requests: mpsc::Sender<()>,
}

impl FetchRelay {
    /// Asks for a stamp on the Lease without waiting for it.
    pub fn request(&self) {
        // Full: a stamp is already pending and will cover this request too.
        let _ = self.requests.try_send(());
    }
}

/// Starts the task writing stamps on the Lease `namespace/lease_name`.
pub fn start_relay(
    client: kube::Client,
    namespace: &str,
    lease_name: &str,
) -> (FetchRelay, tokio::task::JoinHandle<()>) {
    let (requests, mut pending) = mpsc::channel(1);
    let api: Api<Lease> = Api::namespaced(client, namespace);
    let lease_name = lease_name.to_string();
    let task = tokio::spawn(async move {
        while pending.recv().await.is_some() {
            let stamped = tokio::time::timeout(WRITE_TIMEOUT, stamp(&api, &lease_name)).await;
            match stamped {
                Ok(Ok(stamp)) => info!(%stamp, "asked the leader to fetch (webhook on a standby)"),
                Ok(Err(error)) => {
                    warn!(%error, lease = %lease_name, "could not ask the leader to fetch; it fetches at its next poll")
                }
                Err(_) => {
                    warn!(lease = %lease_name, "asking the leader to fetch timed out; it fetches at its next poll")
                }
            }
        }
    });
    (FetchRelay { requests }, task)
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
/// watch errors are retried with backoff (the poll still fetches meanwhile).
pub async fn watch_fetch_requests(
    client: kube::Client,
    namespace: String,
    lease_name: String,
    poker: Poker,
) {
    let api: Api<Lease> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={lease_name}"));
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut last_seen: Option<String> = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(Event::Apply(lease) | Event::InitApply(lease)) => {
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
            Ok(_) => {}
            Err(error) => {
                warn!(%error, lease = %lease_name, "watching the Lease for fetch requests failed; retrying")
            }
        }
    }
}

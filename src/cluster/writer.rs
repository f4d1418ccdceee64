//! The only place tollgate writes to the management cluster.
//!
//! Every write is gated on leadership (a replica that is not the leader writes nothing) and honours
//! `--dry-run` (the write is logged, not sent). Profiles are written by server-side apply with field
//! manager `tollgate` and `force` (tollgate owns every field it sets on its own profiles; the engine
//! refuses to touch a profile it does not own). Status is written with optimistic concurrency.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde_json::Value;
use tracing::{debug, info, warn};

use super::crd::{GitPromotion, GitPromotionSpec};
use super::errors::{ClusterError, classify};
use super::leader::LeaderGate;
use super::lean::LeanObject;
use super::resources::{self, FIELD_MANAGER};

/// How many times one write refused with 429 is sent again (after the server's Retry-After).
pub const THROTTLED_RETRIES: u32 = 3;

/// The longest wait for one throttled write: a server asking for more fails the step instead,
/// and the controller retries the step no sooner than the Retry-After (the throttle remembers it).
const MAX_THROTTLED_WAIT: Duration = Duration::from_secs(5);

/// What a 429 asks to wait: `details.retryAfterSeconds`, else 1 s (kube-apiserver's
/// `Retry-After` for its in-flight limit, sent as a header that kube's client does not keep).
fn throttled_wait(status: &kube::core::Status) -> Duration {
    let seconds = status
        .details
        .as_ref()
        .map(|d| d.retry_after_seconds)
        .filter(|s| *s > 0)
        .unwrap_or(1);
    Duration::from_secs(u64::from(seconds)).min(MAX_THROTTLED_WAIT)
}

#[derive(Clone)]
pub struct ClusterWriter {
    // Responses are read lean: tollgate never reads managed fields (see `lean`).
    profiles: Api<LeanObject>,
    state: Api<LeanObject>,
    leader: LeaderGate,
    dry_run: bool,
}

impl ClusterWriter {
    pub fn new(client: Client, leader: LeaderGate, dry_run: bool) -> Self {
        ClusterWriter {
            profiles: Api::all_with(client.clone(), &resources::cluster_profile()),
            state: Api::all_with(client, &resources::git_promotion()),
            leader,
            dry_run,
        }
    }

    pub fn dry_run(&self) -> bool {
        self.dry_run
    }

    /// Called as the last thing before each request, not once per step: the lease's local
    /// deadline (see [`LeaderGate::is_leader`]) may pass between two writes of one step.
    fn gate(&self) -> Result<(), ClusterError> {
        if self.leader.is_leader() {
            Ok(())
        } else {
            Err(ClusterError::NotLeader)
        }
    }

    /// Sends the request made by `request` only within the lease: kube's client retries
    /// 429/503/504 on its own when configured to, and such a retry must not leave after the
    /// deadline the gate was checked against, so the request (and any retry still pending) is
    /// dropped when the lease expires locally.
    ///
    /// A 429 (the server's in-flight limit or its priority-and-fairness queues) is sent again
    /// after the server's `retryAfterSeconds` (1 s when it does not say, as kube-apiserver
    /// answers), at most [`THROTTLED_RETRIES`] times, each time through the gate again: the step
    /// goes on instead of failing whole and waiting for the next batch. Nothing else is retried
    /// here (the controller retries failed steps).
    async fn leased<T, F>(
        &self,
        request: impl Fn() -> F,
    ) -> Result<Result<T, kube::Error>, ClusterError>
    where
        F: Future<Output = Result<T, kube::Error>>,
    {
        let mut retries = 0;
        loop {
            let result = self.leased_once(request()).await?;
            let wait = match &result {
                Err(kube::Error::Api(status)) if status.code == 429 => throttled_wait(status),
                _ => return Ok(result),
            };
            let within_lease = self
                .leader
                .remaining()
                .is_none_or(|remaining| wait < remaining);
            if retries >= THROTTLED_RETRIES || !within_lease {
                return Ok(result);
            }
            retries += 1;
            debug!(
                wait_ms = wait.as_millis() as u64,
                retries, "API server throttled a write; sending it again after its Retry-After"
            );
            tokio::time::sleep(wait).await;
        }
    }

    async fn leased_once<T>(
        &self,
        request: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<Result<T, kube::Error>, ClusterError> {
        self.gate()?;
        let Some(remaining) = self.leader.remaining() else {
            return Ok(request.await);
        };
        match tokio::time::timeout(remaining, request).await {
            Ok(result) => Ok(result),
            Err(_) => {
                warn!("the lease expired while a write was pending or being retried: dropped it");
                Err(ClusterError::NotLeader)
            }
        }
    }

    /// Server-side applies a whole profile and returns the object as stored (in dry-run: as it
    /// would be sent), so the caller can update its cache before the watch catches up.
    pub async fn apply_profile(
        &self,
        name: &str,
        object: &Value,
    ) -> Result<LeanObject, ClusterError> {
        self.gate()?;
        if self.dry_run {
            info!(
                profile = name,
                "dry-run: would server-side apply ClusterProfile"
            );
            return serde_json::from_value(object.clone()).map_err(|e| ClusterError::Decode {
                what: format!("clusterprofile {name}"),
                message: e.to_string(),
            });
        }
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let patch = Patch::Apply(object);
        let applied = self
            .leased(|| self.profiles.patch(name, &params, &patch))
            .await?
            .map_err(|e| classify(e, "apply", "clusterprofiles", name))?;
        debug!(profile = name, "applied ClusterProfile");
        Ok(applied)
    }

    /// Deletes a profile; one that is already gone counts as deleted. Returns the object when it
    /// still exists (finalizers pending: Sveltos is withdrawing its add-ons).
    pub async fn delete_profile(&self, name: &str) -> Result<Option<LeanObject>, ClusterError> {
        self.gate()?;
        if self.dry_run {
            info!(profile = name, "dry-run: would delete ClusterProfile");
            return Ok(None);
        }
        let params = DeleteParams::background();
        match self.leased(|| self.profiles.delete(name, &params)).await? {
            Ok(either) => Ok(either.left()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            Err(e) => Err(classify(e, "delete", "clusterprofiles", name)),
        }
    }

    /// Creates or updates the GitPromotion's spec (where the promotion comes from) by server-side
    /// apply, and returns the object (with its resourceVersion) for the status write that follows.
    pub async fn ensure_state_object(
        &self,
        name: &str,
        spec: GitPromotionSpec,
    ) -> Result<LeanObject, ClusterError> {
        self.gate()?;
        let mut object = GitPromotion::new(name, spec);
        object.metadata.labels = Some(BTreeMap::from([(
            "app.kubernetes.io/managed-by".to_string(),
            "tollgate".to_string(),
        )]));
        if self.dry_run {
            return serde_json::to_value(&object)
                .and_then(serde_json::from_value)
                .map_err(|e| ClusterError::Decode {
                    what: format!("gitpromotion {name}"),
                    message: e.to_string(),
                });
        }
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let patch = Patch::Apply(&object);
        self.leased(|| self.state.patch(name, &params, &patch))
            .await?
            .map_err(|e| classify(e, "apply", "gitpromotions", name))
    }

    /// Replaces the status, conditional on `resource_version` (409 → [`ClusterError::Conflict`]:
    /// someone else wrote since we read; the caller re-reads and recomputes). Returns the new
    /// resourceVersion.
    ///
    /// The status is serialized once, straight into the request body (a `Value` tree built
    /// first cost as much as the write's own serialization).
    pub async fn write_status<S: Serialize + Sync>(
        &self,
        name: &str,
        resource_version: Option<String>,
        status: &S,
    ) -> Result<Option<String>, ClusterError> {
        self.gate()?;
        if self.dry_run {
            debug!(promotion = name, "dry-run: status not persisted");
            return Ok(resource_version);
        }
        let data = StatusWrite {
            api_version: GitPromotion::api_version(&()),
            kind: GitPromotion::kind(&()),
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                resource_version,
                ..ObjectMeta::default()
            },
            status,
        };
        let params = PostParams::default();
        let written = self
            .leased(|| {
                self.state
                    .replace_subresource("status", name, &params, &data)
            })
            .await?
            .map_err(|e| classify(e, "update status of", "gitpromotions", name))?;
        Ok(written.resource_version())
    }

    /// Sets one annotation on a GitPromotion by merge patch, conditional on `resource_version`
    /// (409 → [`ClusterError::Conflict`]), and returns the new resourceVersion. Used to record
    /// which notifications were delivered (`crate::notify::dedup`).
    pub async fn annotate_state_object(
        &self,
        name: &str,
        resource_version: Option<String>,
        key: &str,
        value: &str,
    ) -> Result<Option<String>, ClusterError> {
        self.gate()?;
        if self.dry_run {
            return Ok(resource_version);
        }
        let patch = Patch::Merge(serde_json::json!({
            "metadata": {"resourceVersion": resource_version, "annotations": {key: value}}
        }));
        let params = PatchParams::default();
        let written = self
            .leased(|| self.state.patch(name, &params, &patch))
            .await?
            .map_err(|e| classify(e, "annotate", "gitpromotions", name))?;
        Ok(written.resource_version())
    }

    pub async fn delete_state_object(&self, name: &str) -> Result<(), ClusterError> {
        self.gate()?;
        if self.dry_run {
            info!(promotion = name, "dry-run: would delete GitPromotion");
            return Ok(());
        }
        let params = DeleteParams::background();
        match self.leased(|| self.state.delete(name, &params)).await? {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(e) => Err(classify(e, "delete", "gitpromotions", name)),
        }
    }
}

/// The body of a status replace: the object's identity and the status, borrowed.
#[derive(Serialize)]
struct StatusWrite<'a, S> {
    #[serde(rename = "apiVersion")]
    api_version: std::borrow::Cow<'static, str>,
    kind: std::borrow::Cow<'static, str>,
    metadata: ObjectMeta,
    status: &'a S,
}

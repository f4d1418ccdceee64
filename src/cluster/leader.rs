//! Leadership as seen by the writer, and the Lease loop that grants it.
//!
//! Without leader election the process always leads. With it, the gate holds a deadline on this
//! process's monotonic clock: each observed successful write of the Lease with our identity moves
//! it to `instant the request was sent + lease duration - grace`. Other replicas only count the
//! lease as expired a full duration after THEY saw that write (which happened after we sent it),
//! so a replica that cannot renew (API outage, partition, a hung request) stops writing before
//! anyone else can start, whatever it believes about the Lease object.
//!
//! The Lease is driven here rather than through `kube-lease-manager`: that crate renews inside
//! its own task and never tells when a renewal was sent or that one failed (its flag stays true
//! while the API server is unreachable), which is exactly what the deadline needs.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use tracing::{debug, info, warn};

#[derive(Clone, Debug)]
pub struct LeaderGate(Arc<GateState>);

#[derive(Debug)]
struct GateState {
    /// False without leader election: the process leads and nothing expires.
    elected: bool,
    held: AtomicBool,
    /// When writes must stop, in nanoseconds after `epoch` (0: no valid lease).
    valid_until_nanos: AtomicU64,
    epoch: Instant,
    /// The expiry is logged once per term, by whoever notices it first.
    expiry_reported: AtomicBool,
}

impl LeaderGate {
    pub fn always() -> Self {
        Self::new(false, true)
    }

    pub fn follower() -> Self {
        Self::new(true, false)
    }

    fn new(elected: bool, held: bool) -> Self {
        LeaderGate(Arc::new(GateState {
            elected,
            held: AtomicBool::new(held),
            valid_until_nanos: AtomicU64::new(0),
            epoch: Instant::now(),
            expiry_reported: AtomicBool::new(false),
        }))
    }

    /// Whether this replica may write now: it holds the lease and, by its own monotonic clock,
    /// the lease has not expired. Logs the expiry the first time it is noticed.
    pub fn is_leader(&self) -> bool {
        let state = &self.0;
        if !state.held.load(Ordering::SeqCst) {
            return false;
        }
        if !state.elected {
            return true;
        }
        if self
            .valid_until()
            .is_some_and(|until| Instant::now() < until)
        {
            return true;
        }
        if !state.expiry_reported.swap(true, Ordering::SeqCst) {
            warn!("lease expired by the local clock before it could be renewed: writes stopped");
        }
        false
    }

    /// How long writes stay allowed from now: `None` without election (unbounded), zero once
    /// the lease is not valid.
    pub fn remaining(&self) -> Option<Duration> {
        if !self.0.elected {
            return None;
        }
        match self.is_leader() {
            true => Some(self.valid_until().map_or(Duration::ZERO, |until| {
                until.saturating_duration_since(Instant::now())
            })),
            false => Some(Duration::ZERO),
        }
    }

    /// The local deadline of the current term, if any.
    pub fn valid_until(&self) -> Option<Instant> {
        match self.0.valid_until_nanos.load(Ordering::SeqCst) {
            0 => None,
            nanos => Some(self.0.epoch + Duration::from_nanos(nanos)),
        }
    }

    /// Records a successful acquire or renew valid until `valid_until`; true when this starts a
    /// term (the replica was not leading the moment before).
    pub fn renewed(&self, valid_until: Instant) -> bool {
        let was_leading = self.is_leader();
        let nanos = valid_until
            .saturating_duration_since(self.0.epoch)
            .as_nanos();
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX).max(1);
        self.0.valid_until_nanos.store(nanos, Ordering::SeqCst);
        self.0.expiry_reported.store(false, Ordering::SeqCst);
        self.0.held.store(true, Ordering::SeqCst);
        !was_leading
    }

    /// Stops writing at once (lost the lease, or shutting down).
    pub fn step_down(&self) {
        self.0.held.store(false, Ordering::SeqCst);
        self.0.valid_until_nanos.store(0, Ordering::SeqCst);
    }

    /// Flips the flag of a gate without election (tests of what a follower serves). On an
    /// elected gate `set(true)` grants nothing: only [`Self::renewed`] sets a deadline.
    pub fn set(&self, leader: bool) {
        if leader {
            self.0.held.store(true, Ordering::SeqCst);
        } else {
            self.step_down();
        }
    }

    /// Whether the replica believes it holds the lease, expired or not.
    fn holds(&self) -> bool {
        self.0.held.load(Ordering::SeqCst)
    }
}

/// Leader election settings (`tollgate run --leader-elect`).
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    pub lease_name: String,
    pub lease_namespace: String,
    /// Unique per replica: the pod name in a cluster.
    pub identity: String,
    /// How long a lease stays valid after its last renewal.
    pub duration: std::time::Duration,
    /// The safety margin: the holder stops writing this long before others may take the lease
    /// (covers request latency and clock-rate differences between replicas).
    pub grace: std::time::Duration,
}

impl ElectionConfig {
    /// How long the holder's writes stay allowed after a renewal request was sent.
    pub fn valid_for(&self) -> Duration {
        self.duration.saturating_sub(self.grace)
    }

    /// How often the holder renews and a candidate retries: several attempts fit in one
    /// validity window, so one failed request does not stop the writes.
    pub fn retry_period(&self) -> Duration {
        (self.valid_for() / 4).max(Duration::from_millis(100))
    }
}

/// Runs leader election until `stop` completes, then steps down and releases the lease (holder
/// cleared), so a successor takes over at once instead of after a lease duration. API errors
/// never end the loop: the deadline stops the writes while they last.
pub async fn run_election(
    client: kube::Client,
    config: ElectionConfig,
    gate: LeaderGate,
    stop: impl Future<Output = ()>,
) {
    let mut elector = Elector::new(client, config, gate);
    tokio::pin!(stop);
    loop {
        let wait = elector.step().await;
        tokio::select! {
            _ = &mut stop => break,
            _ = tokio::time::sleep(wait) => {}
        }
        // Reports a locally expired lease even when no write asks the gate.
        elector.gate.is_leader();
    }
    elector.release().await;
}

/// What one attempt on the Lease found.
enum Attempt {
    /// We wrote the Lease with our identity; the request left at `sent`.
    Held { sent: Instant },
    /// Another replica holds a lease that has not expired by our observation.
    HeldBy(String),
    /// Someone wrote the Lease between our read and our write (409): retry.
    Contended,
}

/// What a candidate last saw of someone else's lease, and when (by its own clock).
struct Observed {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    at: Instant,
}

struct Elector {
    api: Api<Lease>,
    config: ElectionConfig,
    gate: LeaderGate,
    observed: Option<Observed>,
    failing: bool,
}

impl Elector {
    fn new(client: kube::Client, config: ElectionConfig, gate: LeaderGate) -> Self {
        Elector {
            api: Api::namespaced(client, &config.lease_namespace),
            config,
            gate,
            observed: None,
            failing: false,
        }
    }

    /// One bounded attempt; returns how long to wait before the next one.
    async fn step(&mut self) -> Duration {
        let period = self.config.retry_period();
        let attempt = tokio::time::timeout(period, self.try_acquire_or_renew()).await;
        match attempt {
            Ok(Ok(Attempt::Held { sent })) => {
                self.failing = false;
                if self.gate.renewed(sent + self.config.valid_for()) {
                    info!(identity = %self.config.identity, "acquired the leader lease: writing");
                }
            }
            Ok(Ok(Attempt::HeldBy(holder))) => {
                self.failing = false;
                if self.gate.holds() {
                    self.gate.step_down();
                    warn!(identity = %self.config.identity, %holder, "lost the leader lease: writes stopped");
                }
            }
            Ok(Ok(Attempt::Contended)) => {
                // Often a fetch-request stamp landing between our read and write: retry soon,
                // not a period later, so a holder's renewal is not delayed by it.
                debug!(identity = %self.config.identity, "lease changed under us; retrying");
                return period / 10;
            }
            Ok(Err(error)) => self.report_failure(&error.to_string()),
            Err(_elapsed) => self.report_failure("the request timed out"),
        }
        period
    }

    fn report_failure(&mut self, error: &str) {
        let lease = format!("{}/{}", self.config.lease_namespace, self.config.lease_name);
        if std::mem::replace(&mut self.failing, true) {
            debug!(%lease, %error, "leader lease still unreachable");
        } else {
            warn!(%lease, %error, "cannot read or renew the leader lease; retrying (writes stop when it expires by the local clock)");
        }
    }

    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        let Some(lease) = self.api.get_opt(&self.config.lease_name).await? else {
            return self.create().await;
        };
        if let Some(holder) = holder_of(&lease).filter(|h| *h != self.config.identity) {
            let holder = holder.to_string();
            if !self.expired_by_observation(&lease) {
                return Ok(Attempt::HeldBy(holder));
            }
        }
        self.take(lease).await
    }

    /// Whether someone else's lease has gone unrenewed for its full duration since we first saw
    /// its current renewal — measured on our clock, never by comparing wall clocks.
    fn expired_by_observation(&mut self, lease: &Lease) -> bool {
        let spec = lease.spec.clone().unwrap_or_default();
        let changed = self.observed.as_ref().is_none_or(|seen| {
            seen.holder != spec.holder_identity || seen.renew_time != spec.renew_time
        });
        if changed {
            self.observed = Some(Observed {
                holder: spec.holder_identity.clone(),
                renew_time: spec.renew_time.clone(),
                at: Instant::now(),
            });
        }
        let duration = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.config.duration, Duration::from_secs);
        self.observed
            .as_ref()
            .is_some_and(|seen| seen.at.elapsed() >= duration)
    }

    /// Writes the Lease with our identity, conditional on the resourceVersion we read.
    async fn take(&mut self, mut lease: Lease) -> Result<Attempt, kube::Error> {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let identity = &self.config.identity;
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(identity.as_str()) {
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
            spec.holder_identity = Some(identity.clone());
        }
        spec.lease_duration_seconds = Some(self.duration_seconds());
        spec.renew_time = Some(now);
        let sent = Instant::now();
        match self
            .api
            .replace(&self.config.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(Attempt::Held { sent }),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::Contended),
            Err(error) => Err(error),
        }
    }

    async fn create(&mut self) -> Result<Attempt, kube::Error> {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.config.lease_name.clone()),
                namespace: Some(self.config.lease_namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.config.identity.clone()),
                lease_duration_seconds: Some(self.duration_seconds()),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        let sent = Instant::now();
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(Attempt::Held { sent }),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::Contended),
            Err(error) => Err(error),
        }
    }

    fn duration_seconds(&self) -> i32 {
        i32::try_from(self.config.duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    /// Steps down, then clears the holder if it is still us. Bounded: a shutdown during an
    /// outage must not hang; the lease then simply expires.
    async fn release(&mut self) {
        self.gate.step_down();
        let bound = self.config.grace.max(Duration::from_secs(1));
        match tokio::time::timeout(bound, self.clear_holder()).await {
            Ok(Ok(true)) => info!(identity = %self.config.identity, "released the leader lease"),
            Ok(Ok(false)) => {}
            Ok(Err(error)) => {
                warn!(%error, "could not release the leader lease; it expires on its own")
            }
            Err(_) => warn!("releasing the leader lease timed out; it expires on its own"),
        }
    }

    async fn clear_holder(&self) -> Result<bool, kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.config.lease_name).await? else {
            return Ok(false);
        };
        if holder_of(&lease) != Some(self.config.identity.as_str()) {
            return Ok(false);
        }
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
        }
        self.api
            .replace(&self.config.lease_name, &PostParams::default(), &lease)
            .await?;
        Ok(true)
    }
}

/// The current holder; an empty identity counts as none.
fn holder_of(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_past_its_local_deadline_stops_writes_whatever_the_flag_says() {
        let gate = LeaderGate::follower();
        assert!(!gate.is_leader());
        assert!(gate.renewed(Instant::now() + Duration::from_secs(60)));
        assert!(gate.is_leader());
        assert!(!gate.renewed(Instant::now() + Duration::from_secs(60)));
        gate.renewed(Instant::now() - Duration::from_millis(1));
        assert!(gate.holds(), "the flag still says leader");
        assert!(!gate.is_leader(), "but the deadline has passed");
        gate.step_down();
        assert!(!gate.is_leader());
        assert!(LeaderGate::always().is_leader());
    }

    #[test]
    fn the_validity_window_leaves_room_for_several_renewals() {
        let config = ElectionConfig {
            lease_name: "l".into(),
            lease_namespace: "n".into(),
            identity: "i".into(),
            duration: Duration::from_secs(15),
            grace: Duration::from_secs(5),
        };
        assert_eq!(config.valid_for(), Duration::from_secs(10));
        assert!(config.retry_period() * 3 < config.valid_for());
    }
}

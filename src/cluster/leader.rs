//! Leadership as seen by the writer: a cheap, clonable flag. Without leader election the process is
//! always the leader; with it, the lease task flips the flag and writes stop at once on loss.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Clone, Debug)]
pub struct LeaderGate(Arc<AtomicBool>);

impl LeaderGate {
    pub fn always() -> Self {
        LeaderGate(Arc::new(AtomicBool::new(true)))
    }

    pub fn follower() -> Self {
        LeaderGate(Arc::new(AtomicBool::new(false)))
    }

    pub fn is_leader(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    pub fn set(&self, leader: bool) {
        self.0.store(leader, Ordering::SeqCst);
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
    /// How long before expiry the holder renews; also the clock skew tolerated between replicas.
    pub grace: std::time::Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ElectionError {
    #[error("starting leader election on Lease {namespace}/{name}: {message}")]
    Start {
        namespace: String,
        name: String,
        message: String,
    },
    #[error("the leader-election task stopped: {0}")]
    Died(String),
}

/// Runs leader election: flips `gate` as the lease is won or lost (writes stop at once on loss),
/// and returns only if the election task dies — the caller must then exit, because a replica
/// that can no longer tell whether it leads must not keep running.
pub async fn run_election(
    client: kube::Client,
    config: ElectionConfig,
    gate: LeaderGate,
) -> ElectionError {
    let manager = match kube_lease_manager::LeaseManagerBuilder::new(client, &config.lease_name)
        .with_namespace(&config.lease_namespace)
        .with_identity(&config.identity)
        .with_duration(config.duration.as_secs().max(1))
        .with_grace(config.grace.as_secs().max(1))
        // One field manager per replica: the lease manager detects a contended lock through
        // server-side-apply conflicts between managers, which one shared manager would hide.
        .with_field_manager(format!("tollgate-leader-{}", config.identity))
        .build()
        .await
    {
        Ok(manager) => manager,
        Err(error) => {
            return ElectionError::Start {
                namespace: config.lease_namespace,
                name: config.lease_name,
                message: error.to_string(),
            };
        }
    };
    let (mut leading, task) = manager.watch().await;
    loop {
        let is_leader = *leading.borrow_and_update();
        if is_leader != gate.is_leader() {
            gate.set(is_leader);
            if is_leader {
                tracing::info!(identity = %config.identity, "acquired the leader lease: writing");
            } else {
                tracing::warn!(identity = %config.identity, "lost the leader lease: writes stopped");
            }
        }
        if leading.changed().await.is_err() {
            break;
        }
    }
    gate.set(false);
    let reason = match task.await {
        Ok(Ok(_)) => "the lease manager returned".to_string(),
        Ok(Err(error)) => error.to_string(),
        Err(join) => join.to_string(),
    };
    ElectionError::Died(reason)
}

//! A replica's leader election in tests: the election task, its gate, and the switch that stops
//! it (releasing the lease).

use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tollgate::cluster::leader::{ElectionConfig, LeaderGate, run_election};

use super::World;

/// A 3 s lease named `tollgate-leader` in `default`, held by `identity`.
pub fn election(identity: &str) -> ElectionConfig {
    ElectionConfig {
        lease_name: "tollgate-leader".into(),
        lease_namespace: "default".into(),
        identity: identity.into(),
        duration: Duration::from_secs(3),
        grace: Duration::from_secs(1),
    }
}

/// One replica's election task and the switch that stops it (releasing the lease).
pub struct Elected {
    pub gate: LeaderGate,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Elected {
    pub fn start(world: &World, config: ElectionConfig) -> Elected {
        let gate = LeaderGate::follower();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(run_election(
            world.client.clone(),
            config,
            gate.clone(),
            async move {
                let _ = stopped.await;
            },
        ));
        Elected {
            gate,
            stop: Some(stop),
            task,
        }
    }

    /// A crash: the election task dies without releasing the lease.
    pub fn crash(&self) {
        self.task.abort();
    }

    /// A graceful shutdown: steps down and releases the lease.
    pub async fn shut_down(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.await.expect("election task ends");
    }
}

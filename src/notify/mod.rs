//! Notifications and commit statuses (issue #19): telling people where they work that a stage
//! started, completed or failed, that a run rolled back, that a stage waits for an approval, and
//! that a rollout completed.
//!
//! What to tell comes from the engine (`tollgate_engine::notices`, from the statuses before and
//! after a persisted step); this module only delivers it:
//! - `secret`: reading an endpoint's `addressSecretFile`;
//! - `payload`: the request per endpoint type (Slack, generic webhook, GitHub, GitLab, Gitea);
//! - `worker`: the bounded queue and worker per endpoint (never blocks the rollout);
//! - `dedup`: what was delivered, recorded on the GitPromotion so nothing is told twice.
//!
//! Only the leader tells: the hook runs after a status write (which is lease-gated), and each
//! worker checks the lease again before every attempt.

pub mod dedup;
pub mod payload;
pub mod secret;
pub mod worker;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tollgate_engine::PromotionStatus;
use tollgate_engine::notices::notices;
use tollgate_model::policy::{NotifyEndpoint, RolloutPolicy};
use tollgate_model::snapshot::Snapshot;
use tracing::warn;

use crate::cluster::events::EventPublisher;
use crate::cluster::leader::LeaderGate;
use crate::cluster::statuses::StatusCache;
use crate::cluster::writer::ClusterWriter;
use crate::metrics::Metrics;
use dedup::DeliveredLog;
use worker::{Delivery, QUEUE_PER_ENDPOINT, Shared};

/// Hands notices to the endpoints' workers. Cheap to clone; disabled in dry-run.
#[derive(Clone)]
pub struct Notifier {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    shared: Shared,
    capacity: usize,
    /// By `<policy>/<endpoint>`: the endpoint's configuration and its queue. A changed
    /// configuration gets a new worker (the old one ends once its queue is empty).
    workers: Mutex<HashMap<String, (NotifyEndpoint, mpsc::Sender<Delivery>)>>,
    /// Every worker started, for [`Notifier::drain`].
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

/// What the controller knows when it persisted a step.
pub struct Step<'a> {
    pub promotion: &'a str,
    pub uid: Option<&'a str>,
    pub policy: Option<&'a RolloutPolicy>,
    pub previous: Option<&'a PromotionStatus>,
    pub next: &'a PromotionStatus,
    /// The promotion's snapshots in git: the author of the run's commit is read from them, only
    /// when something is told.
    pub history: &'a [Snapshot],
}

/// The author of `commit`, from the promotion's snapshots.
fn author_of<'h>(history: &'h [Snapshot], commit: Option<&str>) -> Option<&'h str> {
    let commit = commit?;
    history
        .iter()
        .find(|s| s.commit.sha == commit)
        .map(|s| s.commit.author.as_str())
}

impl Notifier {
    pub fn new(
        writer: ClusterWriter,
        statuses: Arc<StatusCache>,
        events: EventPublisher,
        metrics: Arc<Metrics>,
        leader: LeaderGate,
    ) -> Self {
        Notifier::with_capacity(
            writer,
            statuses,
            events,
            metrics,
            leader,
            QUEUE_PER_ENDPOINT,
        )
    }

    /// With `capacity` deliveries queued per endpoint at most.
    pub fn with_capacity(
        writer: ClusterWriter,
        statuses: Arc<StatusCache>,
        events: EventPublisher,
        metrics: Arc<Metrics>,
        leader: LeaderGate,
        capacity: usize,
    ) -> Self {
        if writer.dry_run() {
            return Notifier::disabled();
        }
        let client = worker::https_client().map_err(|e| {
            warn!(error = %e, "no system TLS roots: notifications cannot be sent");
            Arc::from(format!("no system TLS roots could be loaded ({e})"))
        });
        let shared = Shared {
            client,
            log: Arc::new(DeliveredLog::new(writer, statuses)),
            metrics,
            events,
            leader,
        };
        Notifier {
            inner: Some(Arc::new(Inner {
                shared,
                capacity: capacity.max(1),
                workers: Mutex::new(HashMap::new()),
                tasks: Mutex::new(Vec::new()),
            })),
        }
    }

    /// On a graceful stop: closes every queue and waits, at most `within`, for the workers to
    /// deliver what is queued (a stop between a persisted step and its delivery would otherwise
    /// lose the notice: the next process does not tell a persisted transition again).
    pub async fn drain(&self, within: Duration) {
        let Some(inner) = &self.inner else {
            return;
        };
        inner
            .workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        let tasks = std::mem::take(&mut *inner.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        let waiting = tasks.iter().filter(|task| !task.is_finished()).count();
        if waiting == 0 {
            return;
        }
        let all = futures::future::join_all(tasks);
        if tokio::time::timeout(within, all).await.is_err() {
            warn!(
                endpoints = waiting,
                waited_s = within.as_secs(),
                "stopping with notifications still queued; they are not sent"
            );
        }
    }

    /// Tells nothing (dry-run).
    pub fn disabled() -> Self {
        Notifier { inner: None }
    }

    /// The hook after a persisted step: queues each notice of the transition for every endpoint
    /// of the governing policy that listens to its kind. Never waits.
    pub fn after_step(&self, step: &Step<'_>) {
        let (Some(inner), Some(policy)) = (&self.inner, step.policy) else {
            return;
        };
        if policy.spec.notify.is_empty() {
            return;
        }
        let told = notices(step.promotion, step.previous, step.next);
        let author = match told.is_empty() {
            true => None,
            false => author_of(step.history, step.next.snapshot_commit.as_deref()),
        };
        for notice in told {
            for endpoint in &policy.spec.notify {
                if !endpoint.events.contains(&notice.kind)
                    || !payload::applies(endpoint.kind, &notice)
                {
                    continue;
                }
                let delivery = Delivery {
                    notice: notice.clone(),
                    context: payload::Context {
                        author: author.map(str::to_string),
                        target_url: endpoint.target_url.clone(),
                    },
                    uid: step.uid.map(str::to_string),
                };
                inner.queue(policy.name(), endpoint, delivery);
            }
        }
    }
}

impl Inner {
    fn queue(&self, policy: &str, endpoint: &NotifyEndpoint, delivery: Delivery) {
        let queue = {
            let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
            let slot = format!("{policy}/{}", endpoint.name);
            let current = workers
                .get(&slot)
                .filter(|(config, queue)| config == endpoint && !queue.is_closed());
            match current {
                Some((_, queue)) => queue.clone(),
                None => {
                    let (queue, task) =
                        worker::spawn(endpoint.clone(), self.shared.clone(), self.capacity);
                    workers.insert(slot, (endpoint.clone(), queue.clone()));
                    let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
                    tasks.retain(|task| !task.is_finished());
                    tasks.push(task);
                    queue
                }
            }
        };
        if let Err(error) = queue.try_send(delivery) {
            let why = match error {
                mpsc::error::TrySendError::Full(_) => "the endpoint's queue is full",
                mpsc::error::TrySendError::Closed(_) => "the endpoint's worker stopped",
            };
            self.shared.metrics.notification_dropped(&endpoint.name);
            warn!(endpoint = %endpoint.name, why, "notification dropped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tollgate_engine::Notice;
    use tollgate_model::policy::{NotifyEvent, NotifyType};

    /// A loopback server that accepts connections and never answers.
    async fn hanging_receiver() -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        addr
    }

    fn notice(id: &str) -> Notice {
        Notice {
            id: id.to_string(),
            kind: NotifyEvent::StageStarted,
            promotion: "web".into(),
            stage: "dev".into(),
            snapshot_index: 1,
            snapshot_commit: None,
            phase: "Progressing",
            reason: None,
            counts: Default::default(),
            time: Utc::now(),
        }
    }

    /// A loopback receiver that answers 200 to each request after `delay`, counting them.
    async fn slow_receiver(delay: Duration) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let answered = Arc::new(AtomicUsize::new(0));
        let count = answered.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let count = count.clone();
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buffer = [0u8; 4096];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buffer[..n]),
                        }
                    }
                    tokio::time::sleep(delay).await;
                    let answer =
                        b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                    if stream.write_all(answer).await.is_ok() {
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        (addr, answered)
    }

    fn notifier_for_tests(capacity: usize) -> (Notifier, Arc<Metrics>) {
        // The cluster is never reached: recording a delivery fails, which costs nothing here.
        let client = kube::Client::try_from(kube::Config::new(
            "http://127.0.0.1:9".parse().expect("uri"),
        ))
        .expect("client");
        let leader = LeaderGate::always();
        let metrics = Arc::new(Metrics::new());
        let notifier = Notifier::with_capacity(
            ClusterWriter::new(client.clone(), leader.clone(), false),
            Arc::new(StatusCache::default()),
            EventPublisher::new(client, None, true),
            metrics.clone(),
            leader,
            capacity,
        );
        (notifier, metrics)
    }

    fn webhook(dir: &tempfile::TempDir, addr: std::net::SocketAddr) -> NotifyEndpoint {
        let secret = dir.path().join("hook");
        std::fs::write(&secret, format!("http://{addr}/hook\nkey\n")).expect("secret");
        NotifyEndpoint {
            name: "hook".into(),
            kind: NotifyType::Webhook,
            address_secret_file: secret.to_string_lossy().into_owned(),
            events: vec![NotifyEvent::StageStarted],
            target_url: None,
            timeout: None,
        }
    }

    #[tokio::test]
    async fn a_graceful_stop_delivers_what_is_queued() {
        let (addr, answered) = slow_receiver(Duration::from_millis(200)).await;
        let dir = tempfile::tempdir().expect("temp dir");
        let endpoint = webhook(&dir, addr);
        let (notifier, _) = notifier_for_tests(16);
        let inner = notifier.inner.as_ref().expect("enabled");
        for id in ["a", "b", "c"] {
            let delivery = Delivery {
                notice: notice(id),
                context: payload::Context::default(),
                uid: None,
            };
            inner.queue("p", &endpoint, delivery);
        }
        notifier.drain(Duration::from_secs(30)).await;
        assert_eq!(
            answered.load(Ordering::SeqCst),
            3,
            "all three sent before drain returned"
        );
    }

    #[tokio::test]
    async fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let addr = hanging_receiver().await;
        let dir = tempfile::tempdir().expect("temp dir");
        let endpoint = webhook(&dir, addr);
        let (notifier, metrics) = notifier_for_tests(1);
        let inner = notifier.inner.as_ref().expect("enabled");
        for id in ["a", "b", "c", "d"] {
            let delivery = Delivery {
                notice: notice(id),
                context: payload::Context::default(),
                uid: None,
            };
            inner.queue("p", &endpoint, delivery);
        }
        // One in flight (hanging) at most, one queued: at least two of four dropped, at once.
        let text = metrics.encode();
        let dropped: u64 = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("tollgate_notifications_dropped_total{endpoint=\"hook\"} ")
            })
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        assert!((2..=3).contains(&dropped), "{text}");
    }
}

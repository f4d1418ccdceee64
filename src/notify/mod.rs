//! Notifications and commit statuses (issues #19, #29): telling people where they work that a
//! stage started, completed or failed, that a wave started or completed, that a blackout holds a
//! stage, that a run rolled back, that a stage waits for an approval, and that a rollout
//! completed. At least once, really: a notice is recorded before it is sent, and resent by the next
//! process or leader until it is delivered or `retryFor` has passed.
//!
//! What to tell comes from the engine (`tollgate_engine::notices`, from the statuses before and
//! after a step); this module only records and delivers it:
//! - `pending`: the record of notices owed, carried in the status written with their transition;
//! - `dedup`: what each endpoint is done with, recorded on the GitPromotion;
//! - `worker`: one worker per endpoint, sending what the persisted statuses owe it, in order;
//! - `send`, `payload`, `secret`: one request per endpoint type (Slack, generic webhook, GitHub,
//!   GitLab, Gitea), its address read from the endpoint's `addressSecretFile`.
//!
//! Only the leader tells: statuses are written under the lease, and each worker checks the lease
//! again before every attempt. A new leader steps every promotion, which queues what they owe.

pub mod dedup;
pub mod payload;
pub mod pending;
pub mod send;
pub mod worker;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tollgate_engine::notices::notices;
use tollgate_engine::{EngineEvent, Notice, PromotionStatus};
use tollgate_model::policy::{NotifyEndpoint, RolloutPolicy};
use tollgate_model::snapshot::Snapshot;
use tracing::{info, warn};

use crate::cluster::events::EventPublisher;
use crate::cluster::leader::LeaderGate;
use crate::cluster::statuses::StatusCache;
use crate::cluster::writer::ClusterWriter;
use crate::metrics::Metrics;
use dedup::SettledLog;
use pending::listens;
use worker::{Mode, Shared, Worker};

/// Records and delivers notices. Cheap to clone; disabled in dry-run.
#[derive(Clone)]
pub struct Notifier {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    shared: Shared,
    /// By `<policy>/<endpoint>`: the endpoint's worker. A changed configuration gets a new worker
    /// (the old one is retired and hands its queue over).
    workers: Mutex<HashMap<String, Worker>>,
    /// By `<policy>/<endpoint>`: one attempt at a time, across the workers a slot ever has.
    turns: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// What the controller knows of a step whose status it is about to write.
pub struct Transition<'a> {
    pub promotion: &'a str,
    pub policy: Option<&'a RolloutPolicy>,
    /// The persisted status before the step (`None`: nothing persisted yet).
    pub previous: Option<&'a PromotionStatus>,
    /// The promotion's snapshots in git: the author of the run's commit is read from them, only
    /// when something is told.
    pub history: &'a [Snapshot],
    /// The GitPromotion's uid, for the events a refusal publishes (`None`: not created yet).
    pub uid: Option<&'a str>,
    pub now: DateTime<Utc>,
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
        if writer.dry_run() {
            return Notifier::disabled();
        }
        let client = crate::outbound::https::https_client().map_err(|e| {
            warn!(error = %e, "no system TLS roots: notifications cannot be sent");
            Arc::from(format!("no system TLS roots could be loaded ({e})"))
        });
        let shared = Shared {
            client,
            log: Arc::new(SettledLog::new(writer, statuses.clone())),
            statuses,
            metrics,
            events,
            leader,
        };
        Notifier {
            inner: Some(Arc::new(Inner {
                shared,
                workers: Mutex::new(HashMap::new()),
                turns: Mutex::new(HashMap::new()),
            })),
        }
    }

    /// Tells nothing (dry-run).
    pub fn disabled() -> Self {
        Notifier { inner: None }
    }

    /// Before a step's status is written: sets the notices it owes (`pendingNotices`) to those
    /// still owed from before plus the transition's own, so they are durable before anything is
    /// sent. Costs no write: they go with the transition's status write.
    pub fn record(&self, step: &Transition<'_>, next: &mut PromotionStatus) {
        let Some(inner) = &self.inner else {
            return;
        };
        let carried = step.previous.map_or(&[][..], |p| p.pending_notices());
        let endpoints = step.policy.map_or(&[][..], |p| p.spec.notify.as_slice());
        let mut new = match endpoints.is_empty() {
            true => Vec::new(),
            false => notices(step.promotion, step.previous, next, step.now),
        };
        if carried.is_empty() && new.is_empty() {
            next.set_pending_notices(Vec::new());
            return;
        }
        let author = author_of(step.history, next.snapshot_commit.as_deref());
        for notice in &mut new {
            notice.author = author.map(str::to_string);
        }
        let settled = inner.shared.log.view(step.promotion);
        let owed = pending::owed(carried, new, endpoints, |e, id| settled.contains(e, id));
        inner.account_left(step, &owed);
        next.set_pending_notices(owed.notices);
    }

    /// After a step (its status persisted, or unchanged): queues the promotion for every endpoint
    /// its persisted status still owes a notice. Never waits. Every step calls it, so a new process
    /// or a new leader, which steps every promotion, resends what is pending.
    pub fn after_step(
        &self,
        promotion: &str,
        policy: Option<&RolloutPolicy>,
        status: &PromotionStatus,
    ) {
        let (Some(inner), Some(policy)) = (&self.inner, policy) else {
            return;
        };
        let pending = status.pending_notices();
        if pending.is_empty() {
            return;
        }
        let settled = inner.shared.log.view(promotion);
        for endpoint in &policy.spec.notify {
            let owed = pending.iter().any(|notice| {
                listens(endpoint, notice) && !settled.contains(&endpoint.name, &notice.id)
            });
            if owed {
                inner.enqueue(policy.name(), endpoint, promotion);
            }
        }
    }

    /// Whether every worker is done with what it was given: nothing queued, being sent or
    /// retried, or waiting to be recorded on its GitPromotion.
    pub fn is_idle(&self) -> bool {
        let Some(inner) = &self.inner else {
            return true;
        };
        let workers = inner.workers.lock().unwrap_or_else(|e| e.into_inner());
        workers.values().all(Worker::is_idle)
    }

    /// On a graceful stop: each worker makes one attempt at what is queued (no retry) and ends;
    /// waits for that at most `within`. Whatever is not delivered stays pending in the statuses
    /// for the next process.
    pub async fn drain(&self, within: Duration) {
        let Some(inner) = &self.inner else {
            return;
        };
        let workers: Vec<Worker> = inner
            .workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, worker)| worker)
            .collect();
        for worker in &workers {
            worker.set_mode(Mode::Closing);
        }
        let tasks: Vec<_> = workers.into_iter().map(|w| w.task).collect();
        let aborts: Vec<_> = tasks.iter().map(|t| t.abort_handle()).collect();
        let waiting = tasks.iter().filter(|task| !task.is_finished()).count();
        if waiting == 0 {
            return;
        }
        let all = futures::future::join_all(tasks);
        if tokio::time::timeout(within, all).await.is_err() {
            aborts.iter().for_each(tokio::task::AbortHandle::abort);
            warn!(
                endpoints = waiting,
                waited_s = within.as_secs(),
                "stopping with notifications still being sent; they stay pending for the next process"
            );
        }
    }
}

impl Inner {
    /// The notices that left the record still owed: folded ones are dropped, the ones cut at
    /// its limit given up.
    fn account_left(&self, step: &Transition<'_>, owed: &pending::Owed) {
        for (notice, owed_to) in &owed.folded {
            let owed_to = self.settle(notice, owed_to);
            for endpoint in &owed_to {
                self.shared.metrics.notification_dropped(endpoint);
            }
            info!(promotion = step.promotion, event = notice.kind.as_str(), stage = %notice.stage, endpoints = ?owed_to, "notification folded: a newer state of its stage is pending for these endpoints");
        }
        for (notice, owed_to) in &owed.evicted {
            let owed_to = self.settle(notice, owed_to);
            self.given_up(step, notice, &owed_to);
        }
    }

    /// Records a notice that left the record as settled (dropped) for the endpoints that owed
    /// it, and returns those not settled before: a step computed again (its write refused, then
    /// retried) folds the same notice again, and it is counted once.
    fn settle(&self, notice: &Notice, owed_to: &[String]) -> Vec<String> {
        owed_to
            .iter()
            .filter(|endpoint| {
                let key = dedup::key(endpoint, &notice.id);
                let new = !self.shared.log.contains(&notice.promotion, &key);
                self.shared.log.remember(&notice.promotion, &key);
                new
            })
            .cloned()
            .collect()
    }

    /// A notice cut at the record's limit: given up, as visibly as one that failed for too long.
    fn given_up(&self, step: &Transition<'_>, notice: &Notice, owed_to: &[String]) {
        let limit = pending::PENDING_LIMIT;
        warn!(promotion = step.promotion, event = notice.kind.as_str(), stage = %notice.stage, endpoints = ?owed_to, limit, "notification given up: too many notices pending for this promotion");
        for endpoint in owed_to {
            self.shared.metrics.notification_dropped(endpoint);
            let note = format!(
                "{} notification of stage {} to endpoint {endpoint} not delivered: more than {limit} notices pending for this promotion (the receiver has been unreachable for long)",
                notice.kind.as_str(),
                notice.stage
            );
            let event = EngineEvent::warning(worker::NOTIFICATION_FAILED, note);
            self.shared.events.publish(step.promotion, step.uid, &event);
        }
    }

    fn enqueue(&self, policy: &str, endpoint: &NotifyEndpoint, promotion: &str) {
        let slot = format!("{policy}/{}", endpoint.name);
        let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        let current = workers
            .get(&slot)
            .filter(|w| w.endpoint == *endpoint && !w.task.is_finished());
        if let Some(worker) = current {
            worker.enqueue(promotion);
            return;
        }
        let turn = self
            .turns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(slot.clone())
            .or_default()
            .clone();
        let worker = Worker::spawn(endpoint.clone(), self.shared.clone(), turn);
        if let Some(old) = workers.remove(&slot) {
            old.set_mode(Mode::Retired);
            for queued in old.take_queued() {
                worker.enqueue(&queued);
            }
        }
        worker.enqueue(promotion);
        workers.insert(slot, worker);
    }
}

#[cfg(test)]
mod tests;

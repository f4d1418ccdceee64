//! One worker task per endpoint. Its queue holds promotion names, not notices: the notices owed
//! are read from the promotion's persisted status (`pendingNotices`) when the worker gets to it,
//! so the queue is bounded by the number of promotions and loses nothing when it is long. A
//! promotion's notices go out in the order they happened, each retried with backoff on 5xx, 429,
//! timeouts and connection errors (never on other 4xx: the request itself is wrong) until the
//! endpoint's `retryFor` after its transition has passed, then given up (`NotificationFailed`).

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Mutex as TurnLock, watch};
use tollgate_engine::{EngineEvent, Notice, PromotionStatus};
use tollgate_model::policy::NotifyEndpoint;
use tracing::{debug, info, warn};

use super::dedup::{SettledLog, key};
use super::pending::{listens, superseded};
use super::send::{Failure, attempt_once};
use crate::cluster::events::EventPublisher;
use crate::cluster::leader::LeaderGate;
use crate::cluster::statuses::StatusCache;
use crate::metrics::Metrics;
use crate::outbound::https::HttpsClient;

/// First retry delay; doubles up to [`MAX_BACKOFF`]: a receiver back from an outage is reached
/// within that long.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// The Event reason of a notice given up on (secret file unreadable, request rejected, still
/// failing `retryFor` after its transition).
pub const NOTIFICATION_FAILED: tollgate_engine::EventReason =
    tollgate_engine::EventReason::NotificationFailed;

/// What a worker shares with the notifier.
#[derive(Clone)]
pub struct Shared {
    /// `Err`: no TLS roots could be loaded; every delivery fails saying so.
    pub client: Result<HttpsClient, Arc<str>>,
    pub log: Arc<SettledLog>,
    pub statuses: Arc<StatusCache>,
    pub metrics: Arc<Metrics>,
    pub events: EventPublisher,
    pub leader: LeaderGate,
}

/// How a worker goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Delivers, retrying until `retryFor`.
    Running,
    /// A graceful stop: one attempt per notice still queued, no retry (what fails stays pending
    /// for the next process), then the worker ends.
    Closing,
    /// Replaced (the endpoint's configuration changed): ends at the next attempt or backoff.
    Retired,
}

/// The handle the notifier keeps of one worker.
pub struct Worker {
    pub endpoint: NotifyEndpoint,
    queue: Arc<Queue>,
    mode: watch::Sender<Mode>,
    pub task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct Queue {
    names: Mutex<Names>,
    wake: tokio::sync::Notify,
}

#[derive(Default)]
struct Names {
    order: VecDeque<String>,
    queued: HashSet<String>,
    /// The worker holds a promotion it popped (sending, retrying or recording): it is not done
    /// with it, though nothing is queued. Set and cleared under the lock with the queue, so an
    /// observer never sees the worker between the two.
    working: bool,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Names> {
        self.names.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, promotion: &str) {
        let mut names = self.lock();
        if names.queued.insert(promotion.to_string()) {
            names.order.push_back(promotion.to_string());
            self.wake.notify_one();
        }
    }

    /// The next promotion to look at; the worker is working until [`Queue::done`].
    fn pop(&self) -> Option<String> {
        let mut names = self.lock();
        let name = names.order.pop_front()?;
        names.queued.remove(&name);
        names.working = true;
        Some(name)
    }

    fn done(&self) {
        self.lock().working = false;
    }

    /// Nothing queued and nothing in hand.
    fn is_idle(&self) -> bool {
        let names = self.lock();
        names.order.is_empty() && !names.working
    }

    fn take_all(&self) -> Vec<String> {
        let mut names = self.lock();
        names.queued.clear();
        names.order.drain(..).collect()
    }
}

impl Worker {
    /// Starts the worker of `endpoint`. `turn` is shared by every worker the endpoint's slot ever
    /// has: one attempt at a time per endpoint, so a replaced worker's last attempt cannot pass a
    /// newer state its successor sent.
    pub fn spawn(endpoint: NotifyEndpoint, shared: Shared, turn: Arc<TurnLock<()>>) -> Worker {
        let queue = Arc::new(Queue::default());
        let (mode, watched) = watch::channel(Mode::Running);
        let run = Run {
            endpoint: endpoint.clone(),
            shared,
            turn,
            mode: watched,
        };
        let task = tokio::spawn(run.serve(queue.clone()));
        Worker {
            endpoint,
            queue,
            mode,
            task,
        }
    }

    /// The promotion has notices this endpoint may owe (it is looked at once, however often it is
    /// queued before the worker gets to it).
    pub fn enqueue(&self, promotion: &str) {
        self.queue.push(promotion);
    }

    pub fn set_mode(&self, mode: Mode) {
        let _ = self.mode.send(mode);
        self.queue.wake.notify_one();
    }

    /// Nothing queued and nothing being sent (or retried) or recorded; a finished worker is
    /// idle.
    pub fn is_idle(&self) -> bool {
        self.task.is_finished() || self.queue.is_idle()
    }

    /// The promotions queued and not yet looked at (handed to a successor).
    pub fn take_queued(&self) -> Vec<String> {
        self.queue.take_all()
    }
}

struct Run {
    endpoint: NotifyEndpoint,
    shared: Shared,
    turn: Arc<TurnLock<()>>,
    mode: watch::Receiver<Mode>,
}

/// What became of one notice.
enum Outcome {
    /// Delivered, given up on, or dropped as stale: settled.
    Settled,
    /// Left pending (not leading, closing, retired): the next leader or process sends it.
    Left,
    /// No longer in the record: folded into a newer state of its subject, or evicted (counted
    /// then). Never sent after that, or the receiver would get it after the newer one.
    Gone,
}

impl Run {
    fn mode(&self) -> Mode {
        *self.mode.borrow()
    }

    async fn serve(mut self, queue: Arc<Queue>) {
        loop {
            if self.mode() == Mode::Retired {
                return;
            }
            let Some(promotion) = queue.pop() else {
                if self.mode() == Mode::Closing {
                    return;
                }
                tokio::select! {
                    _ = queue.wake.notified() => {}
                    _ = self.mode.changed() => {}
                }
                continue;
            };
            self.promotion(&promotion).await;
            queue.done();
        }
    }

    /// Sends what the promotion's persisted status owes this endpoint, oldest first. The record
    /// is read again for each notice: it changes while a notice is retried.
    async fn promotion(&self, promotion: &str) {
        // Seen gone from the record: never looked at again in this pass, whatever copy of the
        // status is read next.
        let mut gone: HashSet<String> = HashSet::new();
        while let Some((status, uid)) = self.record(promotion) {
            let pending = status.pending_notices();
            let owed = pending
                .iter()
                .find(|n| listens(&self.endpoint, n) && !self.settled(n) && !gone.contains(&n.id));
            let Some(notice) = owed else {
                break;
            };
            match self.deliver(notice, uid.as_deref()).await {
                Outcome::Settled => {}
                Outcome::Gone => {
                    gone.insert(notice.id.clone());
                }
                Outcome::Left => break,
            }
        }
        self.flush(promotion).await;
    }

    /// The promotion's persisted status (its `pendingNotices`), and its uid.
    fn record(&self, promotion: &str) -> Option<(Arc<PromotionStatus>, Option<String>)> {
        let state = self.shared.statuses.get(promotion)?;
        Some((state.status?, state.uid))
    }

    /// The record as it is now, and where `notice` is in it; `None` once it left it.
    fn recorded(&self, notice: &Notice) -> Option<(Arc<PromotionStatus>, usize)> {
        let (status, _) = self.record(&notice.promotion)?;
        let index = status
            .pending_notices()
            .iter()
            .position(|n| n.id == notice.id)?;
        Some((status, index))
    }

    fn settled(&self, notice: &Notice) -> bool {
        let key = key(&self.endpoint.name, &notice.id);
        self.shared.log.contains(&notice.promotion, &key)
    }

    /// In memory at once (nothing is sent twice); on the GitPromotion when the pass over the
    /// promotion ends or waits ([`Run::flush`]).
    fn settle(&self, notice: &Notice) {
        let key = key(&self.endpoint.name, &notice.id);
        self.shared.log.remember(&notice.promotion, &key);
    }

    async fn flush(&self, promotion: &str) {
        self.shared.log.flush(promotion).await;
    }

    /// One notice, until it is settled, left or gone: an attempt, then retries with backoff
    /// until `retryFor` after its transition, each against the record as it is then.
    async fn deliver(&self, notice: &Notice, uid: Option<&str>) -> Outcome {
        let name = self.endpoint.name.as_str();
        let retry_for =
            chrono::Duration::from_std(self.endpoint.retry_for()).unwrap_or(chrono::Duration::MAX);
        let deadline = notice.time.checked_add_signed(retry_for);
        let mut backoff = FIRST_BACKOFF;
        loop {
            if !self.shared.leader.is_leader() {
                debug!(
                    endpoint = name,
                    "not leading: notification left to the leader"
                );
                return Outcome::Left;
            }
            if self.mode() == Mode::Retired {
                return Outcome::Left;
            }
            let Some((status, index)) = self.recorded(notice) else {
                debug!(endpoint = name, event = notice.kind.as_str(), stage = %notice.stage, "notification no longer pending: a newer state of its subject replaced it");
                return Outcome::Gone;
            };
            let why = match self.attempt(status.pending_notices(), index, uid).await {
                Ok(outcome) => return outcome,
                Err(why) => why,
            };
            let now = chrono::Utc::now();
            let left = deadline.map_or(Duration::MAX, |d| (d - now).to_std().unwrap_or_default());
            if left.is_zero() {
                let retry_for = humantime(self.endpoint.retry_for());
                let why =
                    format!("{why}; still failing {retry_for} after the transition (retryFor)");
                return self.give_up(notice, uid, why);
            }
            if self.mode() == Mode::Closing {
                debug!(endpoint = name, %why, "stopping: notification left pending for the next process");
                return Outcome::Left;
            }
            let wait = backoff.min(left);
            debug!(endpoint = name, %why, retry_in_ms = wait.as_millis() as u64, "notification failed; retrying");
            // What this pass settled is recorded before a wait that may be long.
            self.flush(&notice.promotion).await;
            self.pause(wait).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// One attempt, in the endpoint's turn, unless the notice is settled or stale by now.
    /// `Err`: why it failed, and another attempt may succeed.
    async fn attempt(
        &self,
        pending: &[Notice],
        index: usize,
        uid: Option<&str>,
    ) -> Result<Outcome, String> {
        let notice = &pending[index];
        let name = self.endpoint.name.as_str();
        let turn = self.turn.lock().await;
        if self.settled(notice) {
            return Ok(Outcome::Settled);
        }
        let settled = self.shared.log.view(&notice.promotion);
        if superseded(pending, index, &self.endpoint, |e, id| {
            settled.contains(e, id)
        }) {
            return Ok(self.drop_stale(notice));
        }
        let started = std::time::Instant::now();
        let result = attempt_once(&self.endpoint, notice, &self.shared.client).await;
        drop(turn);
        match result {
            Ok(()) => {
                let took = started.elapsed();
                self.shared.metrics.notification_sent(name, took);
                info!(endpoint = name, promotion = %notice.promotion, event = notice.kind.as_str(), stage = %notice.stage, "notification delivered");
                self.settle(notice);
                Ok(Outcome::Settled)
            }
            Err(Failure::GiveUp(why)) => Ok(self.give_up(notice, uid, why)),
            Err(Failure::Retry(why)) => Err(why),
        }
    }

    /// Sleeps, or less when the worker is told to stop.
    async fn pause(&self, wait: Duration) {
        let mut mode = self.mode.clone();
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = mode.wait_for(|m| *m != Mode::Running) => {}
        }
    }

    fn drop_stale(&self, notice: &Notice) -> Outcome {
        let name = self.endpoint.name.as_str();
        self.shared.metrics.notification_dropped(name);
        info!(endpoint = name, promotion = %notice.promotion, event = notice.kind.as_str(), stage = %notice.stage, "notification dropped: a newer state of the stage was delivered");
        self.settle(notice);
        Outcome::Settled
    }

    fn give_up(&self, notice: &Notice, uid: Option<&str>, why: String) -> Outcome {
        let name = self.endpoint.name.as_str();
        self.shared.metrics.notification_failed(name);
        warn!(endpoint = name, promotion = %notice.promotion, event = notice.kind.as_str(), %why, "notification not delivered");
        self.shared.events.publish(
            &notice.promotion,
            uid,
            &EngineEvent::warning(
                NOTIFICATION_FAILED,
                format!(
                    "{} notification to endpoint {name} not delivered: {why}",
                    notice.kind.as_str()
                ),
            ),
        );
        self.settle(notice);
        Outcome::Settled
    }
}

/// `1h`, `90s`: a duration as a person reads it.
fn humantime(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s if s > 0 => format!("{s}s"),
        _ => format!("{}ms", duration.as_millis()),
    }
}

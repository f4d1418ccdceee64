//! The controller loop: git source → engine → cluster.
//!
//! One task owns all scheduling state (which promotions are dirty, their wake-ups and retries), so
//! there is never more than one engine step in flight per promotion: a batch steps each dirty
//! promotion once, several promotions concurrently. It reacts to new commits (local filesystem
//! watch, poll interval, webhook pokes), to watch events on profiles, summaries, clusters and its
//! own state objects, and to the engine's wake-ups (delay ends, window openings) at their instant.

pub mod error;
pub mod git_task;
pub mod guard;
pub mod progress_writes;
pub mod reconcile;
pub mod startup;
pub mod timers;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::StreamExt;
use kube::Client;
use kube::api::Api;
use kube::runtime::watcher;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tollgate_source::{Poker, SourceConfig};
use tracing::{debug, info, warn};

use crate::cluster::errors::ClusterError;
use crate::cluster::events::EventPublisher;
use crate::cluster::leader::LeaderGate;
use crate::cluster::lean::LeanObject;
use crate::cluster::observe::{
    ObservedCaches, SummaryObject, convert_capi_cluster, convert_profile, convert_summary_object,
    convert_sveltos_cluster,
};
use crate::cluster::resources;
use crate::cluster::statuses::{self, StatusCache};
use crate::cluster::throttle::Throttle;
use crate::cluster::watch::{IndexedBy, Touch, WatchHealth, WatchSpec, spawn_watch};
use crate::cluster::writer::ClusterWriter;
use crate::metrics::{Metrics, ReconcileResult};
pub use error::{ControllerError, ReconcileError};
use git_task::{GitThread, GitUpdate, PromotionGit};
pub use guard::PruneGuard;
use reconcile::{Context, GitPresence, Origin, Outcome};
pub use startup::{Served, Startup};
use timers::Timers;

#[derive(Debug, Clone)]
pub struct ControllerConfig {
    pub source: SourceConfig,
    /// How often to fetch/poll git when nothing pokes it.
    pub poll_interval: Duration,
    pub dry_run: bool,
    pub guard: PruneGuard,
    /// How many promotions step concurrently in one batch. With adaptive concurrency this is the
    /// ceiling, so the steps never bound the requests the throttle would allow.
    pub concurrency: usize,
    /// The client's throttle: a failed step is retried no sooner than the server asked.
    pub throttle: Arc<Throttle>,
    /// Reported as the event source instance (e.g. the pod name).
    pub instance: Option<String>,
    pub metrics: Arc<Metrics>,
}

/// What the outside world (CLI, HTTP server, tests) can see of and do to a running controller.
#[derive(Clone)]
pub struct ControllerHandle {
    /// Ask for a git sync now (webhooks).
    pub poker: Poker,
    /// True once git synced and every watch listed once.
    pub ready: watch::Receiver<bool>,
    /// Whether the controller still waits for the management cluster, and why.
    pub startup: watch::Receiver<Startup>,
    /// Last watch error per resource.
    pub watch_health: WatchHealth,
    /// The persisted status of every promotion (for the status API).
    pub statuses: Arc<StatusCache>,
    shutdown: watch::Sender<bool>,
}

impl ControllerHandle {
    pub fn shutdown(&self) {
        let _ = self.shutdown.send(true);
    }
}

/// Starts the git thread at once, then, in the returned task, waits for the management cluster
/// (see [`startup`]) before it starts the watches and the loop. Fails only on a usage error (the
/// repository cannot be opened): nothing the cluster answers stops it. The task ends on
/// [`ControllerHandle::shutdown`], waiting or running.
pub async fn start(
    client: Client,
    config: ControllerConfig,
    leader: LeaderGate,
) -> Result<(ControllerHandle, JoinHandle<()>), ControllerError> {
    let (git_tx, git_rx) = mpsc::channel(64);
    let git = GitThread::start(config.source.clone(), config.poll_interval, git_tx)?;
    let statuses = Arc::new(StatusCache::default());
    let health = WatchHealth::default();
    let (ready_tx, ready_rx) = watch::channel(false);
    let (startup_tx, startup_rx) = watch::channel(Startup::Connecting);
    let (shutdown_tx, mut shutdown_rx) = watch::channel(false);
    let handle = ControllerHandle {
        poker: git.poker.clone(),
        ready: ready_rx,
        startup: startup_rx,
        watch_health: health.clone(),
        statuses: statuses.clone(),
        shutdown: shutdown_tx,
    };
    let task = tokio::spawn(async move {
        let Some(served) = startup::wait_for_cluster(&client, &startup_tx, &mut shutdown_rx).await
        else {
            // The git thread may be blocked sending to the loop that never ran: close first.
            drop(git_rx);
            stop_git(git).await;
            return;
        };
        let caches = Arc::new(ObservedCaches::default());
        let (touch_tx, touch_rx) = mpsc::unbounded_channel();
        let watches = spawn_watches(&client, &caches, &statuses, &health, served, touch_tx);
        let origin = Origin {
            repository: tollgate_source::redact_url(&config.source.repo),
            branch: config.source.branch.clone(),
            path: config.source.path.clone(),
        };
        let writer = ClusterWriter::new(client.clone(), leader.clone(), config.dry_run);
        let events = EventPublisher::new(client, config.instance.clone(), config.dry_run);
        let notifier = crate::notify::Notifier::new(
            writer.clone(),
            statuses.clone(),
            events.clone(),
            config.metrics.clone(),
            leader.clone(),
        );
        let ctx = Arc::new(Context {
            caches,
            statuses,
            writer,
            events,
            notifier: notifier.clone(),
            origin,
            metrics: config.metrics.clone(),
            watch_health: health,
            progress_writes: Default::default(),
        });
        let mut state = LoopState::new(config, leader);
        state
            .run(ctx, git_rx, touch_rx, ready_tx, shutdown_rx)
            .await;
        notifier.drain(NOTIFY_DRAIN_TIMEOUT).await;
        stop_git(git).await;
        for watch in watches {
            watch.abort();
        }
    });
    Ok((handle, task))
}

/// Stops the git thread without blocking the runtime: stopping joins the thread, which first
/// finishes the sync it is in (seconds on a large repository or a slow remote). Joined on a
/// worker, that stalled every task queued behind it, an embedded API server and the lease
/// deadlines included.
async fn stop_git(git: GitThread) {
    if let Err(error) = tokio::task::spawn_blocking(move || drop(git)).await {
        warn!(%error, "stopping the git thread failed");
    }
}

/// The watches feeding the caches: Sveltos' types, tollgate's own state objects, and Cluster
/// API's clusters when served.
fn spawn_watches(
    client: &Client,
    caches: &Arc<ObservedCaches>,
    statuses: &Arc<StatusCache>,
    health: &WatchHealth,
    served: Served,
    touch_tx: mpsc::UnboundedSender<Touch>,
) -> Vec<JoinHandle<()>> {
    // Decoded lean: nothing tollgate reads needs managed fields (see `cluster::lean`).
    let all = |ar| Api::<LeanObject>::all_with(client.clone(), &ar);
    let mut watches = vec![
        spawn_watch(
            WatchSpec {
                resource: "clusterprofiles",
                api: all(resources::cluster_profile()),
                config: watcher::Config::default(),
                cache: caches.profiles.clone(),
                convert: Box::new(convert_profile),
                indexed_by: IndexedBy::Promotion,
            },
            touch_tx.clone(),
            health.clone(),
        ),
        spawn_watch(
            WatchSpec {
                resource: "clustersummaries",
                // Decoded lean: the most numerous objects, and the engine reads few of their fields.
                api: Api::<SummaryObject>::all_with(client.clone(), &resources::cluster_summary()),
                config: watcher::Config::default(),
                cache: caches.summaries.clone(),
                convert: Box::new(convert_summary_object),
                indexed_by: IndexedBy::Profile,
            },
            touch_tx.clone(),
            health.clone(),
        ),
        spawn_watch(
            WatchSpec {
                resource: "sveltosclusters",
                api: all(resources::sveltos_cluster()),
                config: watcher::Config::default(),
                cache: caches.clusters.clone(),
                convert: Box::new(convert_sveltos_cluster),
                indexed_by: IndexedBy::Nothing,
            },
            touch_tx.clone(),
            health.clone(),
        ),
        spawn_watch(
            WatchSpec {
                resource: "gitpromotions",
                api: all(resources::git_promotion()),
                config: watcher::Config::default(),
                cache: statuses.watched.clone(),
                convert: {
                    let statuses = statuses.clone();
                    Box::new(move |object| statuses.convert_watched(object))
                },
                indexed_by: IndexedBy::Promotion,
            },
            touch_tx.clone(),
            health.clone(),
        ),
    ];
    if served.capi_clusters {
        info!("Cluster API is served: CAPI clusters are matched too");
        watches.push(spawn_watch(
            WatchSpec {
                resource: "clusters.cluster.x-k8s.io",
                api: all(resources::capi_cluster()),
                config: watcher::Config::default(),
                cache: caches.clusters.clone(),
                convert: Box::new(convert_capi_cluster),
                indexed_by: IndexedBy::Nothing,
            },
            touch_tx,
            health.clone(),
        ));
    }
    watches
}

/// How long a graceful stop waits for queued notifications.
const NOTIFY_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest one promotion's step may take (a few API requests, normally milliseconds).
const STEP_TIMEOUT: Duration = Duration::from_secs(20);

struct LoopState {
    config: ControllerConfig,
    leader: LeaderGate,
    git: HashMap<String, Arc<PromotionGit>>,
    /// Removals waiting for confirmation: name → why.
    held: BTreeMap<String, String>,
    /// Removals past the guard, with the last good snapshot.
    removed: HashMap<String, Option<Arc<tollgate_manifest::Snapshot>>>,
    dirty: BTreeSet<String>,
    all_dirty: bool,
    timers: Timers,
    failures: HashMap<String, u32>,
    /// Promotions whose step failed while the server asked clients to hold off (a 429's
    /// Retry-After): not stepped before then, whatever touches them meanwhile.
    retry_not_before: HashMap<String, chrono::DateTime<Utc>>,
    git_synced: bool,
    was_leader: bool,
}

impl LoopState {
    fn new(config: ControllerConfig, leader: LeaderGate) -> Self {
        LoopState {
            config,
            leader,
            git: HashMap::new(),
            held: BTreeMap::new(),
            removed: HashMap::new(),
            dirty: BTreeSet::new(),
            all_dirty: false,
            timers: Timers::default(),
            failures: HashMap::new(),
            retry_not_before: HashMap::new(),
            git_synced: false,
            was_leader: false,
        }
    }

    async fn run(
        &mut self,
        ctx: Arc<Context>,
        mut git_rx: mpsc::Receiver<GitUpdate>,
        mut touch_rx: mpsc::UnboundedReceiver<Touch>,
        ready_tx: watch::Sender<bool>,
        mut shutdown_rx: watch::Receiver<bool>,
    ) {
        // Leadership is polled between batches: cheap, and a new leader starts with a full pass.
        let mut leader_tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            let sleep = self.sleep_until_next_wake();
            tokio::select! {
                _ = shutdown_rx.changed() => break,
                update = git_rx.recv() => match update {
                    Some(update) => self.on_git(update, &ctx),
                    None => break,
                },
                touch = touch_rx.recv() => match touch {
                    Some(touch) => self.on_touch(touch, &ctx),
                    None => break,
                },
                _ = sleep => {
                    let due = self.timers.take_due(Utc::now());
                    self.dirty.extend(due);
                }
                _ = leader_tick.tick() => {}
            }
            // Coalesce whatever else is already queued before stepping.
            while let Ok(update) = git_rx.try_recv() {
                self.on_git(update, &ctx);
            }
            while let Ok(touch) = touch_rx.try_recv() {
                self.on_touch(touch, &ctx);
            }
            let ready = self.git_synced && ctx.caches.is_ready() && ctx.statuses.watched.is_ready();
            if ready && !*ready_tx.borrow() {
                info!(
                    promotions = self.git.len(),
                    "initial sync complete: git and every watch"
                );
                let _ = ready_tx.send(true);
                self.all_dirty = true;
            }
            let leader = self.leader.is_leader();
            if leader && !self.was_leader {
                info!("leading: stepping every promotion");
                ctx.statuses.clear_own();
                self.all_dirty = true;
            }
            self.was_leader = leader;
            ctx.statuses.forget_caught_up();
            if ready && leader {
                self.step_dirty(&ctx).await;
            }
        }
        info!("controller loop stopped");
    }

    fn sleep_until_next_wake(&self) -> tokio::time::Sleep {
        let wait = match self.timers.next() {
            Some(at) => (at - Utc::now()).to_std().unwrap_or(Duration::ZERO),
            None => Duration::from_secs(3600),
        };
        tokio::time::sleep(wait)
    }

    fn on_git(&mut self, update: GitUpdate, ctx: &Context) {
        ctx.metrics
            .git_sync(update.duration, update.error.is_none());
        if let Some(error) = &update.error {
            // Logged once where it happened (the source); here it only feeds the sync metrics.
            debug!(%error, "git source error");
            return;
        }
        // Only a complete listing or a removal needs every known name: building the set on every
        // poll was O(promotions) per idle poll (15 % of the controller's CPU at 10,000).
        let removals_possible = update.complete || update.promotions.values().any(Option::is_none);
        let known_before: BTreeSet<String> = if removals_possible {
            self.git
                .keys()
                .cloned()
                .chain(ctx.statuses.names())
                .collect()
        } else {
            BTreeSet::new()
        };
        let mut gone: Vec<String> = Vec::new();
        for (name, state) in &update.promotions {
            match state {
                Some(git) => {
                    self.git.insert(name.clone(), git.clone());
                    self.held.remove(name);
                    self.removed.remove(name);
                    self.dirty.insert(name.clone());
                }
                None => gone.push(name.clone()),
            }
        }
        if update.complete {
            // Anything we knew (in memory or as a GitPromotion) that the full listing lacks is gone.
            for name in &known_before {
                if !update.promotions.contains_key(name) && !gone.contains(name) {
                    gone.push(name.clone());
                }
            }
        }
        self.git_synced = true;
        if gone.is_empty() {
            return;
        }
        // Only removals that could withdraw something are counted and held (see `guard`).
        let exposed =
            |name: &String| guard::has_blast_radius(name, self.git.get(name).map(|g| &**g), ctx);
        let gone: Vec<(String, bool)> = gone
            .into_iter()
            .map(|name| {
                let exposed = exposed(&name);
                (name, exposed)
            })
            .collect();
        let hold = self.config.guard.hold_reason(
            gone.iter().filter(|(_, exposed)| *exposed).count(),
            known_before.iter().filter(|name| exposed(name)).count(),
            update.path_missing,
        );
        for (name, exposed) in gone {
            let last = self
                .git
                .get(&name)
                .and_then(|g| g.view.effective_snapshot().cloned());
            self.dirty.insert(name.clone());
            match &hold {
                Some(reason) if exposed && !confirmed(ctx, &name) => {
                    warn!(promotion = %name, reason, "removal held by the blast-radius guard");
                    self.held.insert(name, reason.clone());
                }
                _ => {
                    self.git.remove(&name);
                    self.held.remove(&name);
                    self.removed.insert(name, last);
                }
            }
        }
    }

    fn on_touch(&mut self, touch: Touch, ctx: &Context) {
        match touch {
            Touch::Clusters => self.all_dirty = true,
            Touch::Profiles(profiles) => {
                for profile in profiles {
                    if let Some(promotion) = ctx.caches.promotion_of_profile(&profile) {
                        self.dirty.insert(promotion);
                    }
                }
            }
            Touch::Promotions(names) => {
                for name in names {
                    // A held removal confirmed by annotation is released here.
                    if self.held.contains_key(&name) && confirmed(ctx, &name) {
                        info!(promotion = %name, "held removal confirmed by annotation");
                        self.held.remove(&name);
                        let last = self
                            .git
                            .remove(&name)
                            .and_then(|g| g.view.effective_snapshot().cloned());
                        self.removed.insert(name.clone(), last);
                    }
                    self.dirty.insert(name);
                }
            }
        }
    }

    async fn step_dirty(&mut self, ctx: &Arc<Context>) {
        let names: Vec<String> = if std::mem::take(&mut self.all_dirty) {
            self.dirty.clear();
            let mut all: BTreeSet<String> = self.git.keys().cloned().collect();
            all.extend(self.removed.keys().cloned());
            all.into_iter().collect()
        } else {
            std::mem::take(&mut self.dirty).into_iter().collect()
        };
        let now = Utc::now();
        // Their timers are set for when the server allowed them.
        let names: Vec<String> = names
            .into_iter()
            .filter(|name| self.retry_not_before.get(name).is_none_or(|at| *at <= now))
            .collect();
        if names.is_empty() {
            return;
        }
        let jobs: Vec<(String, GitPresence)> = names
            .into_iter()
            .filter_map(|name| {
                let presence = match (self.git.get(&name), self.removed.get(&name)) {
                    (Some(git), _) => match self.held.get(&name) {
                        Some(reason) => GitPresence::RemovalHeld {
                            git: git.clone(),
                            reason: format!(
                                "{reason}; confirm with --confirm-prune or annotate the GitPromotion {}=true",
                                statuses::CONFIRM_PRUNE_ANNOTATION
                            ),
                        },
                        None => GitPresence::Present(git.clone()),
                    },
                    (None, Some(last)) => GitPresence::Removed { last: last.clone() },
                    (None, None) => return None,
                };
                Some((name, presence))
            })
            .collect();
        let batch_started = std::time::Instant::now();
        let results: Vec<(String, Result<Outcome, ReconcileError>)> = futures::stream::iter(jobs)
            .map(|(name, presence)| {
                let ctx = ctx.clone();
                async move {
                    // One hung request must not stall every promotion behind this batch. Cancelling
                    // is safe: nothing is persisted unless the whole step completed.
                    let step = reconcile::reconcile(&ctx, &name, &presence, now);
                    let result = tokio::time::timeout(STEP_TIMEOUT, step)
                        .await
                        .unwrap_or(Err(ReconcileError::TimedOut(STEP_TIMEOUT)));
                    (name, result)
                }
            })
            .buffer_unordered(self.config.concurrency.max(1))
            .collect()
            .await;
        debug!(
            batch = results.len(),
            took_ms = batch_started.elapsed().as_millis() as u64,
            "stepped a batch"
        );
        for (name, result) in results {
            match result {
                Ok(Outcome::Stepped {
                    wake_at,
                    actions,
                    status_written,
                }) => {
                    ctx.metrics.reconcile(ReconcileResult::Ok);
                    if let Some(status) = ctx.statuses.get(&name).and_then(|p| p.status) {
                        ctx.metrics.observe_promotion(&name, &status, Utc::now());
                    }
                    self.failures.remove(&name);
                    self.retry_not_before.remove(&name);
                    if actions > 0 || status_written {
                        debug!(promotion = %name, actions, status_written, "stepped");
                    }
                    self.timers.set(&name, wake_at);
                }
                Ok(Outcome::Forgotten) => {
                    ctx.metrics.reconcile(ReconcileResult::Ok);
                    ctx.metrics.forget_promotion(&name);
                    self.failures.remove(&name);
                    self.retry_not_before.remove(&name);
                    self.removed.remove(&name);
                    self.timers.set(&name, None);
                }
                Err(error) => {
                    ctx.metrics.reconcile(ReconcileResult::Error);
                    if matches!(
                        error,
                        ReconcileError::Apply { .. } | ReconcileError::Delete { .. }
                    ) {
                        ctx.metrics.apply_error(&name);
                    }
                    let attempts = self.failures.entry(name.clone()).or_insert(0);
                    *attempts += 1;
                    // A 429's Retry-After; kube drops headers, so the throttle remembers it.
                    let hold_off = self.config.throttle.hold_off(std::time::Instant::now());
                    let backoff = retry_backoff(*attempts, error.is_transient()).max(hold_off);
                    if matches!(error.cluster_error(), Some(ClusterError::NotLeader)) {
                        debug!(promotion = %name, "lost leadership mid-step");
                    } else {
                        warn!(promotion = %name, %error, attempt = *attempts, retry_in_ms = backoff.as_millis() as u64, "step failed; nothing persisted, will retry");
                    }
                    let at = Utc::now()
                        + chrono::Duration::from_std(backoff).unwrap_or(chrono::Duration::zero());
                    self.timers.set(&name, Some(at));
                    if !hold_off.is_zero() {
                        self.retry_not_before.insert(name, at);
                    }
                }
            }
        }
    }
}

fn confirmed(ctx: &Context, name: &str) -> bool {
    ctx.statuses.get(name).is_some_and(|s| s.confirms_prune())
}

/// Exponential backoff from 200 ms capped at 2 s for errors that may pass on their own (5xx,
/// 429, connection refused, a starting server's 403, conflicts), so a step is retried within
/// seconds of the server answering again rather than at the next unrelated event; from 2 s capped
/// at one minute for errors a human must fix.
fn retry_backoff(attempts: u32, transient: bool) -> Duration {
    let (base_ms, cap_ms): (u64, u64) = if transient {
        (200, 2_000)
    } else {
        (2_000, 60_000)
    };
    let factor = 1u64 << attempts.saturating_sub(1).min(10);
    Duration::from_millis((base_ms * factor).min(cap_ms))
}

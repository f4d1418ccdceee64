//! The controller loop: git source → engine → cluster.
//!
//! The decisions (which promotions to step and when, the removal guard, wake-ups, retries, lease
//! changes) are a synchronous state machine, [`scheduler::Scheduler`], fed with events and the
//! time; [`run_loop`] is its async shell: it reacts to new commits (local filesystem watch, poll
//! interval, webhook pokes), to watch events on profiles, summaries, clusters and its own state
//! objects, and to the scheduler's wake-ups at their instant, and runs the steps it hands out
//! ([`reconcile`]), never more than one in flight per promotion.

pub mod apply;
pub mod cluster_view;
pub mod dependencies;
pub mod desired;
pub mod error;
pub mod git_labels;
pub mod git_task;
pub mod guard;
pub mod in_flight;
pub mod measurement_holds;
pub mod persist;
pub mod progress_writes;
pub mod quiescence;
pub mod reconcile;
pub mod retry;
pub mod run_loop;
pub mod scheduler;
pub mod startup;
pub mod timers;
pub mod watches;

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tollgate_source::{Poker, SourceConfig};
use tracing::warn;

use crate::cluster::events::EventPublisher;
use crate::cluster::leader::LeaderGate;
use crate::cluster::observe::ObservedCaches;
use crate::cluster::statuses::StatusCache;
use crate::cluster::throttle::Throttle;
use crate::cluster::watch::WatchHealth;
use crate::cluster::writer::ClusterWriter;
use crate::metrics::Metrics;
pub use error::{ControllerError, ReconcileError};
use git_task::GitThread;
pub use guard::PruneGuard;
pub use quiescence::Quiescence;
use quiescence::TurnReport;
use reconcile::{Context, Origin};
use run_loop::{Inputs, Shell};
use scheduler::Scheduler;
pub use startup::{Served, Startup};

#[derive(Debug, Clone)]
pub struct ControllerConfig {
    pub source: SourceConfig,
    /// How often to fetch/poll git when nothing pokes it.
    pub poll_interval: Duration,
    pub dry_run: bool,
    pub guard: PruneGuard,
    /// How many promotions step at once at most. With adaptive concurrency this is the ceiling,
    /// and the loop runs four steps per slot of the throttle's current limit within it (see
    /// [`crate::cluster::throttle::Throttle::steps`]), so the steps never bound the requests the
    /// throttle would allow, nor wait at it in hundreds.
    pub concurrency: usize,
    /// The client's throttle: a failed step is retried no sooner than the server asked.
    pub throttle: Arc<Throttle>,
    /// Reported as the event source instance (e.g. the pod name).
    pub instance: Option<String>,
    pub metrics: Arc<Metrics>,
    /// How the analysis runner measures (issue #32).
    pub analysis: crate::analysis::AnalysisConfig,
    /// Where each run's trace goes (issue #49); disabled by default.
    pub traces: crate::traces::Traces,
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
    /// Each promotion's labels in git, as the last sync read them (for the web view's filter).
    pub git_labels: Arc<git_labels::GitLabels>,
    shutdown: watch::Sender<bool>,
    /// What the loop said of itself after each turn.
    turns: watch::Receiver<TurnReport>,
}

impl ControllerHandle {
    pub fn shutdown(&self) {
        let _ = self.shutdown.send(true);
    }

    /// Waits until the loop is quiescent, in a turn that started after this call: nothing to
    /// step, no wake-up due, nothing unread or unsynced, no measurement in flight, no notification
    /// or Event queued. Returns when it next wakes by itself; `None` if it stopped first. For tests that
    /// show that nothing happens; a commit must be poked to count (see [`quiescence`]).
    pub async fn quiescent(&self) -> Option<Quiescence> {
        quiescence::wait_quiescent(&self.turns).await
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
    let git_labels = Arc::new(git_labels::GitLabels::default());
    let health = WatchHealth::default();
    let (ready_tx, ready_rx) = watch::channel(false);
    let (startup_tx, startup_rx) = watch::channel(Startup::Connecting);
    let (shutdown_tx, mut shutdown_rx) = watch::channel(false);
    let (turns_tx, turns_rx) = watch::channel(TurnReport::default());
    let handle = ControllerHandle {
        poker: git.poker.clone(),
        ready: ready_rx,
        startup: startup_rx,
        watch_health: health.clone(),
        statuses: statuses.clone(),
        git_labels: git_labels.clone(),
        shutdown: shutdown_tx,
        turns: turns_rx,
    };
    let git_pokes = git.pokes.clone();
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
        // Results of analyses poke their promotion through the watches' channel.
        let analysis =
            crate::analysis::AnalysisRunner::new(config.analysis, leader.clone(), touch_tx.clone());
        let watches =
            watches::spawn_watches(&client, &caches, &statuses, &health, served, touch_tx);
        let ctx = Arc::new(Context {
            git_labels,
            ..context(
                client,
                &config,
                &leader,
                caches,
                statuses,
                health,
                analysis.clone(),
            )
        });
        let notifier = ctx.notifier.clone();
        let shell = Shell {
            scheduler: Scheduler::new(config.guard),
            ctx,
            leader,
            concurrency: config.concurrency,
            throttle: config.throttle.clone(),
            ready: ready_tx,
            turns: turns_tx,
            git_pokes,
        };
        let inputs = Inputs {
            git: git_rx,
            touches: touch_rx,
            shutdown: shutdown_rx,
        };
        shell.run(inputs).await;
        notifier.drain(NOTIFY_DRAIN_TIMEOUT).await;
        analysis.close();
        stop_git(git).await;
        for watch in watches {
            watch.abort();
        }
    });
    Ok((handle, task))
}

/// What every step works with: the caches, the writers, where the promotions come from.
fn context(
    client: Client,
    config: &ControllerConfig,
    leader: &LeaderGate,
    caches: Arc<ObservedCaches>,
    statuses: Arc<StatusCache>,
    watch_health: WatchHealth,
    analysis: crate::analysis::AnalysisRunner,
) -> Context {
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
    Context {
        caches,
        statuses,
        writer,
        events,
        notifier,
        origin,
        metrics: config.metrics.clone(),
        traces: config.traces.clone(),
        watch_health,
        progress_writes: Default::default(),
        measurement_holds: Default::default(),
        analysis,
        dependencies: Default::default(),
        git_labels: Default::default(),
    }
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

/// How long a graceful stop waits for queued notifications.
const NOTIFY_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

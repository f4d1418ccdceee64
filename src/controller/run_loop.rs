//! The async shell around the [`Scheduler`]: it turns what happens (git syncs, watch touches, the
//! lease, the clock) into the scheduler's events, carries out its commands, and runs the steps it
//! hands out, several promotions at once. Every decision is the scheduler's; this only waits,
//! reads the clock, and does I/O.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::{FutureExt, StreamExt};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use super::cluster_view::Cached;
use super::error::ReconcileError;
use super::git_task::GitUpdate;
use super::in_flight::{InFlight, Running};
use super::quiescence::{GitPokes, TurnReport};
use super::reconcile::{self, Context, Outcome};
use super::scheduler::{Command, Scheduler, Step, StepDone};
use crate::cluster::errors::ClusterError;
use crate::cluster::leader::LeaderGate;
use crate::cluster::throttle::Throttle;
use crate::cluster::watch::Touch;
use crate::metrics::ReconcileResult;

/// The longest one promotion's step may take (a few API requests, normally milliseconds).
const STEP_TIMEOUT: Duration = Duration::from_secs(20);

/// How often leadership is read between events: cheap, and a new leader starts with a full pass.
const LEADER_POLL: Duration = Duration::from_millis(250);

/// How long touches gather before the promotions they mark are handed out again, once a hand-out
/// happened: a stage's summaries change one by one within a millisecond or two, and stepping its
/// promotion on each one tripled the steps of a rollout (and their CPU) for nothing. The first
/// touch after a quiet spell is handed out at once.
const GATHER: Duration = Duration::from_millis(10);

/// With no wake-up pending, the loop still wakes this often (it has nothing to do then).
const IDLE_WAKE: Duration = Duration::from_secs(3600);

pub struct Shell {
    pub scheduler: Scheduler,
    pub ctx: Arc<Context>,
    pub leader: LeaderGate,
    /// The most promotions that step at once; fewer while the throttle's limit is low (see
    /// [`Throttle::steps`]).
    pub concurrency: usize,
    /// The client's throttle: a failed step is retried no sooner than the server asked.
    pub throttle: Arc<Throttle>,
    pub ready: watch::Sender<bool>,
    /// Whether each turn ended with nothing left to do (see [`super::quiescence`]).
    pub turns: watch::Sender<TurnReport>,
    /// Whether the git thread has answered every poke.
    pub git_pokes: GitPokes,
}

/// Where the shell's events come from.
pub struct Inputs {
    pub git: mpsc::Receiver<GitUpdate>,
    pub touches: mpsc::UnboundedReceiver<Touch>,
    pub shutdown: watch::Receiver<bool>,
}

/// How a step ended.
type StepResult = Result<Outcome, ReconcileError>;

impl Shell {
    pub async fn run(mut self, mut inputs: Inputs) {
        let mut leader_tick = tokio::time::interval(LEADER_POLL);
        let mut steps: InFlight<StepResult> = InFlight::default();
        let mut handed_out = tokio::time::Instant::now() - GATHER;
        let mut gathering = false;
        loop {
            let wake = sleep_until(self.scheduler.next_wake());
            let running = steps.is_running();
            tokio::select! {
                _ = inputs.shutdown.changed() => break,
                update = inputs.git.recv() => match update {
                    Some(update) => self.on_git(update),
                    None => break,
                },
                touch = inputs.touches.recv() => match touch {
                    Some(touch) => self.on_touch(touch),
                    None => break,
                },
                Some((name, result)) = steps.running().next(), if running => {
                    self.step_ended(&mut steps, &name, result);
                }
                _ = wake => {}
                _ = tokio::time::sleep_until(handed_out + GATHER), if gathering => {}
                _ = leader_tick.tick() => {}
            }
            // Coalesce whatever else is already queued or ended before handing out steps.
            while let Some(Some((name, result))) = steps.running().next().now_or_never() {
                self.step_ended(&mut steps, &name, result);
            }
            while let Ok(update) = inputs.git.try_recv() {
                self.on_git(update);
            }
            while let Ok(touch) = inputs.touches.try_recv() {
                self.on_touch(touch);
            }
            if self.ctx.caches.is_ready() && self.ctx.statuses.watched.is_ready() {
                let commands = self.scheduler.on_watches_listed();
                self.execute(commands);
            }
            let commands = self.scheduler.on_lease(self.leader.is_leader());
            self.execute(commands);
            self.ctx.statuses.forget_caught_up();
            let cluster = Cached::of(&self.ctx);
            self.scheduler.on_turn(&cluster);
            gathering = handed_out.elapsed() < GATHER;
            if !gathering {
                let due = self.scheduler.due(Utc::now());
                if !due.is_empty() {
                    handed_out = tokio::time::Instant::now();
                    steps.hand(due);
                }
            }
            let (ctx, slots) = (&self.ctx, self.throttle.steps(self.concurrency));
            steps.fill(slots, |step| start_step(ctx.clone(), step));
            self.report_turn(&inputs, &steps);
        }
        // Steps already running end as they would have (each is bounded by its timeout);
        // those still waiting never start.
        while let Some((name, result)) = steps.running().next().await {
            self.finish(&name, result);
        }
        info!("controller loop stopped");
    }

    /// Says whether the turn left anything to do: the scheduler's work, an update or touch not
    /// read yet, a poke not synced yet, a measurement in flight, a notification or an Event
    /// queued.
    fn report_turn(&self, inputs: &Inputs, steps: &InFlight<StepResult>) {
        let quiescent = self.scheduler.quiescence(Utc::now()).filter(|_| {
            steps.is_empty()
                && inputs.git.is_empty()
                && inputs.touches.is_empty()
                && self.git_pokes.all_answered()
                && self.ctx.analysis.is_idle()
                && self.ctx.notifier.is_idle()
                && self.ctx.events.is_idle()
        });
        self.turns.send_modify(|report| {
            report.turn += 1;
            report.quiescent = quiescent;
        });
    }

    fn on_git(&mut self, update: GitUpdate) {
        self.ctx
            .metrics
            .git_sync(update.duration, update.error.is_none());
        self.ctx.metrics.git_tip_refused(update.refused);
        if let Some(error) = &update.error {
            // Logged once where it happened (the source); here it only feeds the sync metrics.
            debug!(%error, "git source error");
        }
        let cluster = Cached::of(&self.ctx);
        self.ctx.dependencies.absorb(&update);
        self.ctx.git_labels.absorb(&update);
        let commands = self.scheduler.on_git(&update, &cluster);
        self.execute(commands);
    }

    fn on_touch(&mut self, touch: Touch) {
        let cluster = Cached::of(&self.ctx);
        // A promotion's status changed: those that depend on it look again (issue #34).
        let dependants: Vec<String> = match &touch {
            Touch::Promotions(names) => names
                .iter()
                .flat_map(|name| self.ctx.dependencies.dependants_of(name))
                .collect(),
            _ => Vec::new(),
        };
        self.scheduler.on_touch(touch, &cluster);
        if !dependants.is_empty() {
            self.scheduler
                .on_touch(Touch::Promotions(dependants), &cluster);
        }
    }

    fn execute(&self, commands: Vec<Command>) {
        for command in commands {
            match command {
                Command::AnnounceReady { promotions } => {
                    info!(promotions, "initial sync complete: git and every watch");
                    let _ = self.ready.send(true);
                }
                Command::TrustWatchedStatuses => self.ctx.statuses.clear_own(),
            }
        }
    }

    /// A step ended: the scheduler learns how, and a promotion handed out again while it ran
    /// is marked to step once more.
    fn step_ended(&mut self, steps: &mut InFlight<StepResult>, name: &str, result: StepResult) {
        self.finish(name, result);
        if steps.ended(name) {
            let cluster = Cached::of(&self.ctx);
            self.scheduler
                .on_touch(Touch::Promotions(vec![name.to_string()]), &cluster);
        }
    }

    /// Metrics and logs of one ended step; the scheduler learns when to come back.
    fn finish(&mut self, name: &str, result: StepResult) {
        let metrics = &self.ctx.metrics;
        let done = match result {
            Ok(Outcome::Stepped {
                wake_at,
                actions,
                status_written,
                status,
            }) => {
                metrics.reconcile(ReconcileResult::Ok);
                if let Some(status) = status {
                    metrics.observe_promotion(name, &status, Utc::now());
                }
                if actions > 0 || status_written {
                    debug!(promotion = %name, actions, status_written, "stepped");
                }
                if status_written {
                    self.step_dependants(name);
                }
                StepDone::Stepped { wake_at }
            }
            Ok(Outcome::Forgotten) => {
                metrics.reconcile(ReconcileResult::Ok);
                metrics.forget_promotion(name);
                StepDone::Forgotten
            }
            Err(error) => return self.failed(name, &error),
        };
        self.scheduler.on_step_done(name, done, Utc::now());
    }

    /// `name`'s status changed: the promotions that depend on it look again at once, without
    /// waiting for the watch to echo the write (issue #34).
    fn step_dependants(&mut self, name: &str) {
        let dependants = self.ctx.dependencies.dependants_of(name);
        if dependants.is_empty() {
            return;
        }
        let cluster = Cached::of(&self.ctx);
        self.scheduler
            .on_touch(Touch::Promotions(dependants), &cluster);
    }

    fn failed(&mut self, name: &str, error: &ReconcileError) {
        let metrics = &self.ctx.metrics;
        metrics.reconcile(ReconcileResult::Error);
        metrics.reconcile_error(error.kind());
        if matches!(
            error,
            ReconcileError::Apply { .. } | ReconcileError::Delete { .. }
        ) {
            metrics.apply_error(name);
        }
        // A 429's Retry-After; kube drops headers, so the throttle remembers it.
        let hold_off = self.throttle.hold_off(std::time::Instant::now());
        let done = StepDone::Failed {
            transient: error.is_transient(),
            hold_off,
        };
        let Some(retry) = self.scheduler.on_step_done(name, done, Utc::now()) else {
            return;
        };
        if matches!(error.cluster_error(), Some(ClusterError::NotLeader)) {
            debug!(promotion = %name, "lost leadership mid-step");
        } else {
            warn!(promotion = %name, %error, attempt = retry.attempt, retry_in_ms = retry.after.as_millis() as u64, "step failed; nothing persisted, will retry");
        }
    }
}

/// One promotion's step, from now. One hung request must not stall the promotions behind it:
/// a step is cut off after [`STEP_TIMEOUT`] (safe: nothing is persisted unless the whole step
/// completed).
fn start_step(ctx: Arc<reconcile::Context>, step: Step) -> Running<StepResult> {
    Box::pin(async move {
        let Step { name, presence } = step;
        let now = Utc::now();
        let step = reconcile::reconcile(&ctx, &name, &presence, now);
        let result = tokio::time::timeout(STEP_TIMEOUT, step)
            .await
            .unwrap_or(Err(ReconcileError::TimedOut(STEP_TIMEOUT)));
        (name, result)
    })
}

fn sleep_until(wake: Option<DateTime<Utc>>) -> tokio::time::Sleep {
    let wait = match wake {
        Some(at) => (at - Utc::now()).to_std().unwrap_or(Duration::ZERO),
        None => IDLE_WAKE,
    };
    tokio::time::sleep(wait)
}

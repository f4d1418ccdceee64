//! The controller's scheduling as a synchronous state machine, without I/O or clock reads: fed
//! with what happens (a git sync, a watch touch, a lease change, a finished step) and the time, it
//! answers which promotions to step (with their presence in git), when to wake up, and what else
//! the loop must do. The async shell (`run_loop`) only feeds it events and carries out its
//! answers; its tests drive it on a fake clock.
//!
//! Rules that live here: a promotion is handed out once per hand-out however often it was touched
//! (the loop's `in_flight` keeps it to one step at a time); a new leader and a ready
//! controller step every promotion; a removal passes the blast-radius guard (`guard`) or is held
//! until confirmed; a failed step is retried with backoff, never before the server allowed it;
//! the engine's wake-ups step a promotion at their instant.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tollgate_manifest::Snapshot;
use tracing::{info, warn};

use super::cluster_view::ClusterView;
use super::desired::GitPresence;
use super::git_task::{GitUpdate, PromotionGit};
use super::guard::{self, PruneGuard};
use super::quiescence::Quiescence;
use super::retry::{Retries, Retry};
use super::timers::Timers;
use crate::cluster::statuses::CONFIRM_PRUNE_ANNOTATION;
use crate::cluster::watch::Touch;

/// What the loop must do besides stepping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// git synced and every watch listed once: the controller is ready (said once).
    AnnounceReady { promotions: usize },
    /// This replica just started leading: another one may have written since its own last
    /// write, so the watched statuses are authoritative again.
    TrustWatchedStatuses,
}

/// One promotion to step, as git shows it.
#[derive(Debug, Clone)]
pub struct Step {
    pub name: String,
    pub presence: GitPresence,
}

/// How a step ended, as far as scheduling cares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepDone {
    /// Come back at `wake_at` (or on the next change).
    Stepped { wake_at: Option<DateTime<Utc>> },
    /// Removed and cleaned up: forget it.
    Forgotten,
    /// Nothing persisted. `transient`: it may pass on its own; `hold_off`: how long the server
    /// asked clients to wait (zero if it did not).
    Failed { transient: bool, hold_off: Duration },
}

/// The promotions one git sync removed, and what the guard weighs them against.
struct Removal<'a> {
    gone: Vec<String>,
    /// Every promotion known before the sync.
    known: &'a BTreeSet<String>,
    path_missing: bool,
    retired: &'a BTreeMap<String, Arc<Vec<Snapshot>>>,
}

/// A removal waiting for confirmation.
struct Held {
    reason: String,
    last: Option<Arc<Snapshot>>,
}

pub struct Scheduler {
    guard: PruneGuard,
    git: HashMap<String, Arc<PromotionGit>>,
    /// Removals waiting for confirmation, by name.
    held: BTreeMap<String, Held>,
    /// Removals past the guard, with the last good snapshot.
    removed: HashMap<String, Option<Arc<Snapshot>>>,
    dirty: BTreeSet<String>,
    all_dirty: bool,
    timers: Timers,
    retries: Retries,
    git_synced: bool,
    watches_listed: bool,
    announced: bool,
    leading: bool,
}

impl Scheduler {
    pub fn new(guard: PruneGuard) -> Self {
        Scheduler {
            guard,
            git: HashMap::new(),
            held: BTreeMap::new(),
            removed: HashMap::new(),
            dirty: BTreeSet::new(),
            all_dirty: false,
            timers: Timers::default(),
            retries: Retries::default(),
            git_synced: false,
            watches_listed: false,
            announced: false,
            leading: false,
        }
    }

    /// A git sync. A failed one changes nothing (the source logged it; the last good state runs).
    pub fn on_git(&mut self, update: &GitUpdate, cluster: &dyn ClusterView) -> Vec<Command> {
        if update.error.is_some() {
            return Vec::new();
        }
        // Only a complete listing or a removal needs every known name: building the set on every
        // poll was O(promotions) per idle poll (15 % of the controller's CPU at 10,000).
        let removals_possible = update.complete || update.promotions.values().any(Option::is_none);
        let known_before: BTreeSet<String> = if removals_possible {
            let mut known: BTreeSet<String> = self.git.keys().cloned().collect();
            known.extend(cluster.state_objects());
            known
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
            let absent = known_before
                .iter()
                .filter(|name| !update.promotions.contains_key(*name) && !gone.contains(name));
            gone.extend(absent.cloned().collect::<Vec<_>>());
        }
        self.git_synced = true;
        if !gone.is_empty() {
            let removal = Removal {
                gone,
                known: &known_before,
                path_missing: update.path_missing,
                retired: &update.retired,
            };
            self.remove(removal, cluster);
        }
        self.announce_when_ready()
    }

    /// Promotions gone from git: removed, or held by the blast-radius guard. Only removals that
    /// could withdraw something are counted and held (see `guard`).
    fn remove(&mut self, removal: Removal<'_>, cluster: &dyn ClusterView) {
        let exposed = |name: &String| {
            guard::has_blast_radius(name, self.git.get(name).map(|g| &**g), cluster)
        };
        let gone: Vec<(String, bool)> = removal
            .gone
            .into_iter()
            .map(|name| {
                let exposed = exposed(&name);
                (name, exposed)
            })
            .collect();
        let hold = self.guard.hold_reason(
            gone.iter().filter(|(_, exposed)| *exposed).count(),
            removal.known.iter().filter(|name| exposed(name)).count(),
            removal.path_missing,
        );
        for (name, exposed) in gone {
            let last = self.last_snapshot(&name, removal.retired);
            self.dirty.insert(name.clone());
            match &hold {
                Some(reason) if exposed && !cluster.confirms_prune(&name) => {
                    warn!(promotion = %name, reason, "removal held by the blast-radius guard");
                    let reason = reason.clone();
                    self.held.insert(name, Held { reason, last });
                }
                _ => self.pass_removal(name, last),
            }
        }
    }

    /// The last good snapshot of a promotion gone from git: as this process saw it (also when
    /// it is gone again, as a complete listing says), or from its history when it was removed
    /// before this process saw it (a restart).
    fn last_snapshot(
        &self,
        name: &str,
        retired: &BTreeMap<String, Arc<Vec<Snapshot>>>,
    ) -> Option<Arc<Snapshot>> {
        let seen = match (
            self.git.get(name),
            self.held.get(name),
            self.removed.get(name),
        ) {
            (Some(git), _, _) => git.view.effective_snapshot().cloned(),
            (None, Some(held), _) => held.last.clone(),
            (None, None, Some(last)) => last.clone(),
            (None, None, None) => None,
        };
        seen.or_else(|| {
            let history = retired.get(name)?;
            history.last().map(|snapshot| Arc::new(snapshot.clone()))
        })
    }

    /// A removal past the guard: from now on it is stepped as removed, with its last good
    /// snapshot (which says whether its profiles are kept).
    fn pass_removal(&mut self, name: String, last: Option<Arc<Snapshot>>) {
        self.held.remove(&name);
        self.git.remove(&name);
        self.removed.insert(name, last);
    }

    /// A watch saw a change.
    pub fn on_touch(&mut self, touch: Touch, cluster: &dyn ClusterView) {
        match touch {
            Touch::Clusters => self.all_dirty = true,
            Touch::Profiles(profiles) => {
                let promotions = profiles
                    .iter()
                    .filter_map(|profile| cluster.promotion_of_profile(profile));
                self.dirty.extend(promotions.collect::<Vec<_>>());
            }
            Touch::Promotions(names) => {
                for name in names {
                    self.release_if_confirmed(&name, cluster);
                    self.dirty.insert(name);
                }
            }
        }
    }

    /// Every turn of the loop: held removals whose GitPromotion now carries the confirm-prune
    /// annotation are released, also when no touch told us (the status cache may have shown it
    /// only after the touch was handled). Held removals are few; usually there are none.
    pub fn on_turn(&mut self, cluster: &dyn ClusterView) {
        if self.held.is_empty() {
            return;
        }
        let held: Vec<String> = self.held.keys().cloned().collect();
        for name in held {
            if self.release_if_confirmed(&name, cluster) {
                self.dirty.insert(name);
            }
        }
    }

    /// A held removal confirmed by annotation passes the guard. Whether it was released.
    fn release_if_confirmed(&mut self, name: &str, cluster: &dyn ClusterView) -> bool {
        let Some(held) = self.held.get(name) else {
            return false;
        };
        if !cluster.confirms_prune(name) {
            return false;
        }
        info!(promotion = %name, "held removal confirmed by annotation");
        let last = held.last.clone();
        self.pass_removal(name.to_string(), last);
        true
    }

    /// Every watch has listed once.
    pub fn on_watches_listed(&mut self) -> Vec<Command> {
        self.watches_listed = true;
        self.announce_when_ready()
    }

    fn announce_when_ready(&mut self) -> Vec<Command> {
        if self.announced || !self.is_ready() {
            return Vec::new();
        }
        self.announced = true;
        self.all_dirty = true;
        vec![Command::AnnounceReady {
            promotions: self.git.len(),
        }]
    }

    /// Whether this replica may write now. A new leader steps every promotion.
    pub fn on_lease(&mut self, leading: bool) -> Vec<Command> {
        let started = leading && !self.leading;
        self.leading = leading;
        if !started {
            return Vec::new();
        }
        info!("leading: stepping every promotion");
        self.all_dirty = true;
        vec![Command::TrustWatchedStatuses]
    }

    /// The promotions to step at `now`, each once, when ready and leading. Wake-ups that are due
    /// count even when not (they are stepped once the controller is).
    pub fn due(&mut self, now: DateTime<Utc>) -> Vec<Step> {
        let woken = self.timers.take_due(now);
        self.dirty.extend(woken);
        if !(self.is_ready() && self.leading) {
            return Vec::new();
        }
        let names: Vec<String> = if std::mem::take(&mut self.all_dirty) {
            self.dirty.clear();
            let mut all: BTreeSet<String> = self.git.keys().cloned().collect();
            all.extend(self.held.keys().cloned());
            all.extend(self.removed.keys().cloned());
            all.into_iter().collect()
        } else {
            std::mem::take(&mut self.dirty).into_iter().collect()
        };
        // Those the server asked to hold off have their wake-up set for when it allows them.
        names
            .into_iter()
            .filter(|name| self.retries.allows(name, now))
            .filter_map(|name| {
                let presence = self.presence(&name)?;
                Some(Step { name, presence })
            })
            .collect()
    }

    fn presence(&self, name: &str) -> Option<GitPresence> {
        if let Some(held) = self.held.get(name) {
            // Also when git never showed it to this process (removed while it was down).
            return Some(GitPresence::RemovalHeld {
                last: held.last.clone(),
                reason: format!(
                    "{}; confirm with --confirm-prune or annotate the GitPromotion {CONFIRM_PRUNE_ANNOTATION}=true",
                    held.reason
                ),
            });
        }
        match (self.git.get(name), self.removed.get(name)) {
            (Some(git), _) => Some(GitPresence::Present(git.clone())),
            (None, Some(last)) => Some(GitPresence::Removed { last: last.clone() }),
            (None, None) => None,
        }
    }

    /// A step handed out by [`Self::due`] ended at `now`. For a failure, when it is retried.
    pub fn on_step_done(
        &mut self,
        name: &str,
        done: StepDone,
        now: DateTime<Utc>,
    ) -> Option<Retry> {
        match done {
            StepDone::Stepped { wake_at } => {
                self.retries.succeeded(name);
                self.timers.set(name, wake_at);
                None
            }
            StepDone::Forgotten => {
                self.retries.succeeded(name);
                self.removed.remove(name);
                self.timers.set(name, None);
                None
            }
            StepDone::Failed {
                transient,
                hold_off,
            } => {
                let retry = self.retries.failed(name, transient, hold_off);
                let at = now + chrono::Duration::from_std(retry.after).unwrap_or_default();
                self.timers.set(name, Some(at));
                if !hold_off.is_zero() {
                    self.retries.hold_off(name, at);
                }
                Some(retry)
            }
        }
    }

    /// The earliest wake-up (an engine's, or a retry's).
    pub fn next_wake(&self) -> Option<DateTime<Utc>> {
        self.timers.next()
    }

    /// git synced and every watch listed once.
    pub fn is_ready(&self) -> bool {
        self.git_synced && self.watches_listed
    }

    /// Whether it is ready, nothing is marked to step and no wake-up is due at `now`; then,
    /// when it next wakes by itself. Not while promotions wait for it to lead.
    pub fn quiescence(&self, now: DateTime<Utc>) -> Option<Quiescence> {
        let next_wake_at = self.next_wake();
        let due = next_wake_at.is_some_and(|at| at <= now);
        let marked = self.all_dirty || !self.dirty.is_empty();
        (self.is_ready() && !marked && !due).then_some(Quiescence { next_wake_at })
    }

    /// Whether nothing is left to step, now or later, until something happens: no promotion
    /// marked to step, no wake-up or retry pending.
    pub fn is_idle(&self) -> bool {
        !self.all_dirty && self.dirty.is_empty() && self.timers.is_empty()
    }
}

#[cfg(test)]
mod tests;

//! The git side of the loop: a dedicated thread owns the [`GitSource`] (git2 is blocking) and
//! sends what changed to the controller. It syncs on start, on every poke (webhooks, the
//! filesystem watches of a local repository and of the trusted keys) and on the poll interval;
//! after an error it waits the source's backoff.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use tollgate_model::policy::POLICY_ANNOTATION;

use tokio::sync::mpsc;
use tollgate_manifest::snapshot::short_sha;
use tollgate_manifest::{ApprovalEvent, CommitInfo, Snapshot};
use tollgate_model::RolloutPolicy;
use tollgate_source::{
    Change, GitSource, Poker, PolicyProblem, PolicySet, PromotionView, SourceConfig, SyncReport,
};
use tracing::{debug, info, warn};

use super::error::ControllerError;
use super::quiescence::GitPokes;

/// One promotion as git shows it at the tracked head.
#[derive(Debug, Clone, PartialEq)]
pub struct PromotionGit {
    pub view: PromotionView,
    /// Shared with the source's index, like `history`.
    pub approvals: Arc<Vec<ApprovalEvent>>,
    /// Every snapshot of the promotion, oldest first: a rollback restores earlier ones. Shared
    /// with the source's index: a sync that hands it over copies nothing.
    pub history: Arc<Vec<Snapshot>>,
    /// The RolloutPolicy governing it (`policies.choose` on its effective snapshot), or why
    /// it cannot be resolved (two policies select it, its annotation names none, its policy's
    /// file is broken): the controller then fails closed.
    pub policy: Result<Option<Arc<RolloutPolicy>>, PolicyProblem>,
    /// Why the branch tip does not run (`--verify-commits`): which commit failed verification
    /// and why. Every promotion carries it: they all track that tip.
    pub unverified: Option<Arc<str>>,
    /// The branch was rewritten and this promotion's newest snapshot is no longer in its
    /// history (issue #44): what happened, in words.
    pub rewound: Option<Arc<str>>,
}

/// The outcome of one sync, as far as the controller cares.
#[derive(Debug)]
pub struct GitUpdate {
    pub head: Option<CommitInfo>,
    pub path_missing: bool,
    /// Changed promotions: `Some` = current state, `None` = gone from git.
    pub promotions: BTreeMap<String, Option<Arc<PromotionGit>>>,
    /// True for the first successful sync (and after a history rebuild): `promotions` then lists
    /// every promotion, and the controller treats any it knew but that is absent as removed.
    pub complete: bool,
    /// With a complete listing: the histories of promotions git defined before but no longer
    /// does. A controller that learns of a removal only now (it was down when it happened) reads
    /// their last good snapshot here (does the removal keep the profiles?).
    pub retired: BTreeMap<String, Arc<Vec<Snapshot>>>,
    pub error: Option<String>,
    pub duration: Duration,
    /// The branch tip carries a commit that does not verify (nothing new runs).
    pub refused: bool,
}

pub struct GitThread {
    pub poker: Poker,
    /// Whether every poke has been answered by a sync (for [`super::quiescence`]).
    pub pokes: GitPokes,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl GitThread {
    /// Opens the source (cloning a remote into the cache if needed) and starts the sync thread.
    pub fn start(
        config: SourceConfig,
        interval: Duration,
        updates: mpsc::Sender<GitUpdate>,
    ) -> Result<Self, ControllerError> {
        let watch_path = (!config.is_remote()).then(|| PathBuf::from(&config.repo));
        let keys_dir = config.trust.trusted_keys.clone();
        let source = GitSource::open(config)?;
        let poker = source.poker();
        let pokes = GitPokes::default();
        let counted = pokes.clone();
        poker.on_poke(move || counted.poked());
        let watches = start_watches(watch_path, keys_dir, &poker);
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let thread_poker = poker.clone();
        let thread_pokes = pokes.clone();
        let handle = std::thread::Builder::new()
            .name("tollgate-git".into())
            .spawn(move || {
                let _watches = watches;
                sync_loop(
                    source,
                    interval,
                    updates,
                    thread_stop,
                    thread_poker,
                    thread_pokes,
                );
            })
            .map_err(ControllerError::GitThread)?;
        Ok(GitThread {
            poker,
            pokes,
            stop,
            handle: Some(handle),
        })
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.poker.poke();
        if let Some(handle) = self.handle.take() {
            // The thread finishes its current sync first; a panic there is already logged.
            let _ = handle.join();
        }
    }
}

impl Drop for GitThread {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The filesystem watches that poke a sync: the local repository's refs (a new commit) and the
/// trusted-keys directory (a key added, changed or removed: the sync re-verifies the history).
/// A watch that cannot be set up leaves that change to the poll interval.
fn start_watches(
    repo: Option<PathBuf>,
    keys_dir: Option<PathBuf>,
    poker: &Poker,
) -> Vec<tollgate_source::LocalWatch> {
    let mut watches = Vec::new();
    if let Some(path) = repo {
        let poker = poker.clone();
        match tollgate_source::watch_local(&path, move || poker.poke()) {
            Ok(watch) => watches.push(watch),
            Err(error) => {
                warn!(%error, "cannot watch the local repository; relying on the poll interval")
            }
        }
    }
    if let Some(dir) = keys_dir {
        let poker = poker.clone();
        match tollgate_source::watch_keys(&dir, move || poker.poke()) {
            Ok(watch) => watches.push(watch),
            Err(error) => {
                warn!(%error, "cannot watch the trusted keys; key changes wait for the poll interval")
            }
        }
    }
    watches
}

fn sync_loop(
    mut source: GitSource,
    interval: Duration,
    updates: mpsc::Sender<GitUpdate>,
    stop: Arc<AtomicBool>,
    poker: Poker,
    pokes: GitPokes,
) {
    let mut complete_next = true;
    let mut refusal = None;
    let mut rewind = None;
    while !stop.load(Ordering::SeqCst) {
        // Clear a pending poke before syncing: a poke that arrives during the sync re-triggers.
        poker.take();
        let answering = pokes.before_sync();
        let (update, wait) = match source.sync() {
            Ok(report) => {
                // A new (or lifted) refusal is news for every promotion, not only changed ones.
                let relist = complete_next
                    || report.rebuilt
                    || source.refusal() != refusal.as_ref()
                    || source.rewind() != rewind.as_ref();
                refusal = source.refusal().cloned();
                rewind = source.rewind().cloned();
                let complete = complete_next || report.rebuilt;
                complete_next = false;
                (update_of(&source, &report, complete, relist), interval)
            }
            // Logged once, by the source (it knows what keeps running).
            Err(error) => (
                GitUpdate {
                    head: source.head().cloned(),
                    path_missing: source.path_missing(),
                    promotions: BTreeMap::new(),
                    complete: false,
                    retired: BTreeMap::new(),
                    error: Some(error.to_string()),
                    duration: Duration::ZERO,
                    refused: source.refusal().is_some(),
                },
                source.retry_after().unwrap_or(interval),
            ),
        };
        // Idle syncs are sent too (cheap, one per interval): they feed the sync metrics.
        if updates.blocking_send(update).is_err() {
            return;
        }
        pokes.answered(answering);
        poker.wait(wait);
    }
}

/// What a successful sync changed, for the controller (everything, when `complete`).
fn update_of(source: &GitSource, report: &SyncReport, complete: bool, relist: bool) -> GitUpdate {
    let policies = source.policies();
    if report.policies_changed {
        report_policy_errors(&policies);
    }
    let mut promotions = BTreeMap::new();
    // A policy change re-chooses every promotion's policy.
    if relist || report.policies_changed {
        for (name, view) in source.promotions() {
            let git = snapshot_of(source, &policies, name, view);
            promotions.insert(name.to_string(), Some(git));
        }
    }
    for (name, change) in &report.changes {
        match change {
            Change::Unchanged => {}
            Change::Removed => {
                promotions.insert(name.clone(), None);
            }
            _ => {
                if let Some(view) = source.promotion(name) {
                    let git = snapshot_of(source, &policies, name, view);
                    promotions.insert(name.clone(), Some(git));
                }
            }
        }
    }
    if report.head_moved || complete {
        info!(
            head = report.head.as_ref().map(|c| short_sha(&c.sha)),
            changed = promotions.len(),
            took_ms = report.duration.as_millis() as u64,
            "git synced"
        );
    } else {
        debug!(
            took_us = report.duration.as_micros() as u64,
            "git idle sync"
        );
    }
    let retired = match complete {
        true => source
            .retired()
            .map(|(name, history)| (name.to_string(), history))
            .collect(),
        false => BTreeMap::new(),
    };
    GitUpdate {
        head: report.head.clone(),
        path_missing: report.path_missing,
        promotions,
        complete,
        retired,
        error: None,
        duration: report.duration,
        refused: source.refusal().is_some(),
    }
}

fn snapshot_of(
    source: &GitSource,
    policies: &PolicySet,
    name: &str,
    view: &PromotionView,
) -> Arc<PromotionGit> {
    let policy = match view.effective_snapshot() {
        Some(snapshot) => match policies.choose(&snapshot.promotion, &snapshot.file) {
            // A problem names the promotion's annotation by file, line and column, as
            // `tollgate validate` does.
            Err(_)
                if snapshot
                    .promotion
                    .metadata
                    .annotations
                    .contains_key(POLICY_ANNOTATION) =>
            {
                let keys = ["metadata", "annotations", POLICY_ANNOTATION];
                let at = source.place_at_head(&snapshot.file, name, &keys);
                policies.choose_at(&snapshot.promotion, &snapshot.file, at)
            }
            chosen => chosen,
        },
        None => Ok(None),
    };
    Arc::new(PromotionGit {
        view: view.clone(),
        approvals: source.shared_approvals(name),
        history: source.shared_history(name),
        policy,
        unverified: source.refusal().map(|refusal| Arc::from(refusal.message())),
        rewound: source
            .rewind()
            .and_then(|rewind| rewind.note(name))
            .map(Arc::from),
    })
}

/// Errors in policy files, once per change: a broken policy keeps its last valid version, so
/// nothing stops, but the file needs fixing (`tollgate validate` shows the same).
fn report_policy_errors(policies: &PolicySet) {
    for error in policies.errors() {
        warn!(%error, "RolloutPolicy file error; the policy's last valid version stays in force");
    }
}

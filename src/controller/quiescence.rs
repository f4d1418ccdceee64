//! When the loop has nothing left to do by itself, for tests that must show that nothing happens
//! (rather than sleep and look). The loop reports after every turn whether it is quiescent: the
//! scheduler has nothing marked to step and no wake-up due ([`Scheduler::quiescence`]), no git
//! sync is asked for or unread, no watch touch is unread, no measurement is in flight, and no
//! notification or Event is queued or being sent. Then nothing happens until `next_wake_at`, or until
//! something outside (a commit poked, a watch event, a webhook) tells the controller.
//!
//! Reporting costs a few atomic reads and a `watch` send per turn; nothing the loop decides reads
//! it.
//!
//! [`Scheduler::quiescence`]: super::scheduler::Scheduler::quiescence

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use tokio::sync::watch;

/// The loop is idle: nothing to do until `next_wake_at` (the earliest engine wake-up or retry;
/// `None`: none pending), or until something outside tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quiescence {
    pub next_wake_at: Option<DateTime<Utc>>,
}

/// What the loop said of itself at the end of its latest turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnReport {
    /// Turns ended since the loop started.
    pub turn: u64,
    /// `None`: work was left (or came in) at the end of the turn.
    pub quiescent: Option<Quiescence>,
}

/// Whether every git sync asked for has been sent to the loop: pokes counted as they are made
/// (a listener on the poker) and as the git thread answers them. A sync answers every poke made
/// before it started.
#[derive(Debug, Clone, Default)]
pub struct GitPokes {
    made: Arc<AtomicU64>,
    answered: Arc<AtomicU64>,
}

impl GitPokes {
    pub fn poked(&self) {
        self.made.fetch_add(1, Ordering::SeqCst);
    }

    /// Before a sync: the pokes it answers, to pass to [`GitPokes::answered`] once its update
    /// is sent.
    pub fn before_sync(&self) -> u64 {
        self.made.load(Ordering::SeqCst)
    }

    pub fn answered(&self, pokes: u64) {
        self.answered.store(pokes, Ordering::SeqCst);
    }

    /// No poke waits for a sync (the updates of those answered are in the loop's channel).
    pub fn all_answered(&self) -> bool {
        self.answered.load(Ordering::SeqCst) >= self.made.load(Ordering::SeqCst)
    }
}

/// Waits for a turn that started after this call and ended quiescent; `None` if the loop
/// stopped first (or never started).
pub async fn wait_quiescent(turns: &watch::Receiver<TurnReport>) -> Option<Quiescence> {
    let mut turns = turns.clone();
    // The turn after the one that may be running now started after this call.
    let after = turns.borrow_and_update().turn + 2;
    let report = turns
        .wait_for(|report| report.turn >= after && report.quiescent.is_some())
        .await
        .ok()?;
    report.quiescent
}

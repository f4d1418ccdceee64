//! A cheap, clonable handle that asks the owner of a [`crate::GitSource`] to sync now. Webhook
//! handlers hold one; the controller waits on it (or registers a listener to bridge into async).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

type Listener = Box<dyn Fn() + Send + Sync>;

#[derive(Clone, Default)]
pub struct Poker {
    inner: Arc<PokerInner>,
}

#[derive(Default)]
struct PokerInner {
    pending: Mutex<bool>,
    wake: Condvar,
    listeners: Mutex<Vec<Listener>>,
}

// A panic while holding one of these locks cannot leave the flag or the list half-written, so a
// poisoned lock is still safe to use.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl std::fmt::Debug for Poker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poker")
            .field("pending", &*lock(&self.inner.pending))
            .finish()
    }
}

impl Poker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Ask for a sync. Pokes coalesce: many pokes before the owner looks count as one.
    pub fn poke(&self) {
        *lock(&self.inner.pending) = true;
        self.inner.wake.notify_all();
        for listener in lock(&self.inner.listeners).iter() {
            listener();
        }
    }

    /// Call `listener` on every poke (e.g. to notify an async task).
    pub fn on_poke(&self, listener: impl Fn() + Send + Sync + 'static) {
        lock(&self.inner.listeners).push(Box::new(listener));
    }

    /// Whether a poke arrived since the last `take`/`wait`; clears it.
    pub fn take(&self) -> bool {
        std::mem::take(&mut *lock(&self.inner.pending))
    }

    /// Block until poked or until `timeout` passes; true when poked (and clears the poke).
    pub fn wait(&self, timeout: Duration) -> bool {
        let pending = lock(&self.inner.pending);
        let (mut pending, _) = self
            .inner
            .wake
            .wait_timeout_while(pending, timeout, |poked| !*poked)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        std::mem::take(&mut *pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn poke_is_seen_by_clones_and_listeners_and_coalesces() {
        let poker = Poker::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&calls);
        poker.on_poke(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        assert!(!poker.take());
        let webhook = poker.clone();
        webhook.poke();
        webhook.poke();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert!(poker.take());
        assert!(!poker.take());
    }

    #[test]
    fn wait_wakes_on_poke_from_another_thread() {
        let poker = Poker::new();
        let remote = poker.clone();
        let thread = std::thread::spawn(move || remote.poke());
        assert!(poker.wait(Duration::from_secs(30)));
        thread.join().expect("poking thread");
        assert!(!poker.wait(Duration::from_millis(1)));
    }
}

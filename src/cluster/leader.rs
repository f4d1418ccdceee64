//! Leadership as seen by the writer: a cheap, clonable flag. Without leader election the process is
//! always the leader; with it, the lease task flips the flag and writes stop at once on loss.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Clone, Debug)]
pub struct LeaderGate(Arc<AtomicBool>);

impl LeaderGate {
    pub fn always() -> Self {
        LeaderGate(Arc::new(AtomicBool::new(true)))
    }

    pub fn follower() -> Self {
        LeaderGate(Arc::new(AtomicBool::new(false)))
    }

    pub fn is_leader(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    pub fn set(&self, leader: bool) {
        self.0.store(leader, Ordering::SeqCst);
    }
}

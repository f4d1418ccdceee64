//! State shared by the HTTP handlers, the Sveltos stand-in and the handle.

use std::sync::{Mutex, MutexGuard};

use crate::faults::InflightCounters;
use crate::fleet::FleetBehaviour;
use crate::state::ApiState;

pub struct Shared {
    pub state: Mutex<ApiState>,
    /// Per-cluster latency and injected failures, read by the Sveltos stand-in.
    pub fleet: Mutex<FleetBehaviour>,
    /// `host:port` the server listens on.
    pub server_address: String,
    /// Requests being served, outside the state lock: a request holds its slot while it waits
    /// for the lock and through its injected latency.
    pub inflight: InflightCounters,
}

/// Locks a mutex; a poisoned lock still holds consistent data here because every write to the
/// state completes before anything can panic, so the guard is recovered.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

//! Fault injection switches: error rates by verb, added latency, outages, and a max-in-flight
//! limit like the real server's.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// `Retry-After` of every 429 unless set otherwise: the real server's value.
pub const DEFAULT_RETRY_AFTER_SECONDS: u64 = 1;

/// Current fault settings, changed at runtime through the handle.
#[derive(Debug, Clone)]
pub struct Faults {
    /// Verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`) → probability in [0, 1].
    pub error_rates: BTreeMap<String, f64>,
    /// HTTP code of injected errors. 500 by default, because kube's client retries 503/504/429
    /// transparently and the point is that the client sees the failure.
    pub error_code: u16,
    pub request_latency: Duration,
    pub outage: bool,
    /// `plural.group` (`plural` for the core group) → HTTP code every request on it gets: a
    /// partition that cuts one kind of request off while the rest still flows.
    pub failing_resources: BTreeMap<String, u16>,
    /// Until then every request is refused with 403, as by a starting server whose RBAC
    /// authorizer has not loaded its roles yet.
    pub forbidden_until: Option<Instant>,
    /// Requests served at once before the rest get 429 (off by default).
    pub max_inflight: InflightLimits,
    /// `Retry-After` (and `details.retryAfterSeconds`) of every 429, injected or by the limit.
    pub retry_after_seconds: u64,
    rng: fastrand::Rng,
}

/// kube-apiserver's `--max-requests-inflight` (`read_only`) and `--max-mutating-requests-inflight`
/// (`mutating`). `None` is no limit; `Some(0)` refuses every request of the class (where the real
/// server reads 0 as no limit: here that is `None`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InflightLimits {
    pub read_only: Option<usize>,
    pub mutating: Option<usize>,
}

/// The verbs that write: the mutating class of the in-flight limit, and what
/// [`crate::RequestCounts::writes`] adds up.
pub const MUTATING_VERBS: [&str; 4] = ["create", "update", "patch", "delete"];

/// The real server's classes of requests for its in-flight limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestClass {
    ReadOnly,
    Mutating,
    /// Watches: the real server does not count them, they would hold a slot for hours.
    LongRunning,
}

impl RequestClass {
    pub fn of(verb: &str) -> Self {
        match verb {
            "watch" => Self::LongRunning,
            _ if MUTATING_VERBS.contains(&verb) => Self::Mutating,
            _ => Self::ReadOnly,
        }
    }
}

/// Requests being served now, by class. Counted whether a limit is set or not, so a limit set
/// while requests run sees them.
#[derive(Debug, Default)]
pub struct InflightCounters {
    read_only: AtomicUsize,
    mutating: AtomicUsize,
}

/// A request's place among those in flight, given back when dropped: on the response, or when
/// the client goes away and the request's future is dropped half way.
#[derive(Debug)]
pub struct InflightSlot<'a> {
    counter: Option<&'a AtomicUsize>,
}

impl Drop for InflightSlot<'_> {
    fn drop(&mut self) {
        if let Some(counter) = self.counter {
            counter.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl InflightCounters {
    /// A slot for a request of `class`, or `None` when `limits` allow no more of them now.
    pub fn try_acquire(
        &self,
        class: RequestClass,
        limits: InflightLimits,
    ) -> Option<InflightSlot<'_>> {
        let (counter, limit) = match class {
            RequestClass::LongRunning => return Some(InflightSlot { counter: None }),
            RequestClass::ReadOnly => (&self.read_only, limits.read_only),
            RequestClass::Mutating => (&self.mutating, limits.mutating),
        };
        let limit = limit.unwrap_or(usize::MAX);
        counter
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                (now < limit).then_some(now + 1)
            })
            .ok()
            .map(|_| InflightSlot {
                counter: Some(counter),
            })
    }

    /// (read-only, mutating) requests in flight now.
    pub fn current(&self) -> (usize, usize) {
        (
            self.read_only.load(Ordering::Acquire),
            self.mutating.load(Ordering::Acquire),
        )
    }
}

/// What the fault layer decided for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultDecision {
    Proceed,
    /// Answer with this HTTP code and a Status body.
    Fail(u16),
}

impl Faults {
    pub fn new(seed: u64) -> Self {
        Self {
            error_rates: BTreeMap::new(),
            error_code: 500,
            request_latency: Duration::ZERO,
            outage: false,
            failing_resources: BTreeMap::new(),
            forbidden_until: None,
            max_inflight: InflightLimits::default(),
            retry_after_seconds: DEFAULT_RETRY_AFTER_SECONDS,
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    pub fn reseed(&mut self, seed: u64) {
        self.rng = fastrand::Rng::with_seed(seed);
    }

    pub fn decide(&mut self, verb: &str, resource: &str) -> FaultDecision {
        if self.outage {
            return FaultDecision::Fail(503);
        }
        match self.forbidden_until {
            Some(until) if Instant::now() < until => return FaultDecision::Fail(403),
            Some(_) => self.forbidden_until = None,
            None => {}
        }
        if let Some(code) = self.failing_resources.get(resource) {
            return FaultDecision::Fail(*code);
        }
        match self.error_rates.get(verb) {
            Some(rate) if *rate > 0.0 && self.rng.f64() < *rate => {
                FaultDecision::Fail(self.error_code)
            }
            _ => FaultDecision::Proceed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_error_rate_is_deterministic_and_roughly_right() {
        let run = |seed| {
            let mut faults = Faults::new(seed);
            faults.error_rates.insert("patch".into(), 0.3);
            (0..1000)
                .map(|_| faults.decide("patch", "things"))
                .filter(|d| *d != FaultDecision::Proceed)
                .count()
        };
        assert_eq!(run(7), run(7));
        let failures = run(7);
        assert!((200..400).contains(&failures), "{failures}");
        let mut faults = Faults::new(1);
        assert_eq!(faults.decide("get", "things"), FaultDecision::Proceed);
        faults
            .failing_resources
            .insert("leases.coordination.k8s.io".into(), 500);
        assert_eq!(
            faults.decide("get", "leases.coordination.k8s.io"),
            FaultDecision::Fail(500)
        );
        assert_eq!(faults.decide("get", "things"), FaultDecision::Proceed);
        faults.outage = true;
        assert_eq!(faults.decide("get", "things"), FaultDecision::Fail(503));
    }

    #[test]
    fn the_inflight_limit_counts_each_class_apart_and_frees_a_slot_on_drop() {
        let counters = InflightCounters::default();
        let limits = InflightLimits {
            read_only: Some(1),
            mutating: Some(2),
        };
        let read = counters.try_acquire(RequestClass::ReadOnly, limits);
        assert!(read.is_some());
        assert!(
            counters
                .try_acquire(RequestClass::ReadOnly, limits)
                .is_none()
        );
        let writes: Vec<_> = (0..2)
            .filter_map(|_| counters.try_acquire(RequestClass::Mutating, limits))
            .collect();
        assert_eq!(writes.len(), 2);
        assert!(
            counters
                .try_acquire(RequestClass::Mutating, limits)
                .is_none()
        );
        let watches: Vec<_> = (0..10)
            .filter_map(|_| counters.try_acquire(RequestClass::LongRunning, limits))
            .collect();
        assert_eq!(watches.len(), 10, "watches are never refused");
        assert_eq!(counters.current(), (1, 2), "nor counted");
        drop(read);
        assert_eq!(counters.current(), (0, 2));
        assert!(
            counters
                .try_acquire(RequestClass::ReadOnly, limits)
                .is_some()
        );
        let unlimited = InflightLimits::default();
        let many: Vec<_> = (0..1000)
            .filter_map(|_| counters.try_acquire(RequestClass::ReadOnly, unlimited))
            .collect();
        assert_eq!(many.len(), 1000);
    }

    #[test]
    fn a_starting_server_forbids_everything_until_the_window_ends() {
        let mut faults = Faults::new(1);
        faults.forbidden_until = Some(Instant::now() + Duration::from_secs(3600));
        assert_eq!(faults.decide("get", "things"), FaultDecision::Fail(403));
        assert_eq!(faults.decide("watch", "leases"), FaultDecision::Fail(403));
        faults.forbidden_until = Some(Instant::now());
        assert_eq!(faults.decide("get", "things"), FaultDecision::Proceed);
        assert_eq!(faults.forbidden_until, None, "an ended window is forgotten");
    }
}

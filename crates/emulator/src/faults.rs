//! Fault injection switches: error rates by verb, added latency, outages.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

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
    rng: fastrand::Rng,
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

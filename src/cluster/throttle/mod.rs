//! How many API requests tollgate keeps in flight, and what the server said about its load.
//!
//! A [`Throttle`] is shared by the controller's client (through [`layer::ThrottleLayer`]) and
//! the controller loop: the layer takes a slot before each request and reports how it went; the
//! loop asks it how long the server asked clients to wait (`Retry-After`) before retrying a failed
//! step. Adaptive by default ([`algorithm`]); with a fixed `--concurrency` it never queues (the
//! number of steps bounds the requests) but still counts and remembers the server's hints.

pub mod algorithm;
pub mod layer;
pub mod retry_after;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;
use tracing::debug;

use algorithm::{AdaptiveLimit, LimitSettings, Sample};

/// The default ceiling of adaptive concurrency. On a real kube-apiserver (2 cores, etcd beside it)
/// cold-start throughput still grew from 64 (265 profiles/s) to 256 (336/s); beyond, the server's
/// default --max-requests-inflight (400) and --max-mutating-requests-inflight (200) answer 429s
/// that the limit backs off from anyway.
pub const DEFAULT_MAX_CONCURRENCY: usize = 256;

/// Steps run per request slot under adaptive concurrency: a step sends its requests one after
/// another with planning in between, so several per slot keep every slot busy and let the limit
/// grow (it grows once half of it was used). The limit starts at 64: four per slot runs 256
/// steps from the start, as before this bound (with two per slot, 128, every stage-1 profile came
/// 5.5 s after start against 5.1 s in two interleaved pairs, within this machine's noise).
const STEPS_PER_SLOT: usize = 4;

/// Never fewer steps than this under adaptive concurrency: a step may wait without holding a slot
/// (up to 20 ms for an analysis's first measurements), and a low limit must not idle the loop.
const MIN_STEPS: usize = 32;

/// How many API requests the controller keeps in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    /// Grows while latency stays flat, shrinks on rising latency, 429s and 5xx; at most `ceiling`.
    Adaptive { ceiling: usize },
    /// This many promotions step at once, each with its requests one after another.
    Fixed(usize),
}

impl Concurrency {
    /// `--concurrency` when given, else adaptive up to `--max-concurrency`.
    pub fn from_flags(fixed: Option<usize>, ceiling: usize) -> Concurrency {
        match fixed {
            Some(steps) => Concurrency::Fixed(steps.max(1)),
            None => Concurrency::Adaptive {
                ceiling: ceiling.max(1),
            },
        }
    }

    pub fn throttle(self, metrics: ThrottleMetrics) -> Arc<Throttle> {
        match self {
            Concurrency::Adaptive { ceiling } => {
                Throttle::adaptive(LimitSettings::with_ceiling(ceiling), metrics)
            }
            Concurrency::Fixed(_) => Throttle::unbounded(metrics),
        }
    }

    /// How many promotions may step at once: with adaptive concurrency the ceiling, so that the
    /// throttle, not the batch, decides how many requests are in flight.
    pub fn steps(self) -> usize {
        match self {
            Concurrency::Adaptive { ceiling } => ceiling,
            Concurrency::Fixed(steps) => steps,
        }
    }
}

/// The throttle's series, registered by [`crate::metrics::Metrics`].
#[derive(Debug, Clone, Default)]
pub struct ThrottleMetrics {
    pub limit: Gauge,
    pub in_flight: Gauge,
    pub throttled: Counter,
}

#[derive(Debug)]
enum Policy {
    Adaptive(AdaptiveLimit),
    /// `--concurrency N`: the steps bound the requests, as before adaptive concurrency.
    Unbounded,
}

#[derive(Debug)]
struct State {
    policy: Policy,
    in_flight: usize,
    /// Until when the server asked clients to hold off (the latest `Retry-After` seen).
    hold_off_until: Option<Instant>,
}

#[derive(Debug)]
pub struct Throttle {
    state: Mutex<State>,
    slot_freed: Notify,
    metrics: ThrottleMetrics,
}

impl Throttle {
    /// Adaptive: at most `settings.ceiling` requests in flight, fewer while the server shows load.
    pub fn adaptive(settings: LimitSettings, metrics: ThrottleMetrics) -> Arc<Throttle> {
        let limit = AdaptiveLimit::new(settings);
        metrics.limit.set(limit.limit() as i64);
        Throttle::with_policy(Policy::Adaptive(limit), metrics)
    }

    /// No limit of its own (a fixed `--concurrency` bounds the requests through the steps).
    pub fn unbounded(metrics: ThrottleMetrics) -> Arc<Throttle> {
        Throttle::with_policy(Policy::Unbounded, metrics)
    }

    fn with_policy(policy: Policy, metrics: ThrottleMetrics) -> Arc<Throttle> {
        Arc::new(Throttle {
            state: Mutex::new(State {
                policy,
                in_flight: 0,
                hold_off_until: None,
            }),
            slot_freed: Notify::new(),
            metrics,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent between statements; a panic elsewhere must not wedge it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The current limit, `None` when unbounded.
    pub fn limit(&self) -> Option<usize> {
        match &self.lock().policy {
            Policy::Adaptive(limit) => Some(limit.limit()),
            Policy::Unbounded => None,
        }
    }

    pub fn in_flight(&self) -> usize {
        self.lock().in_flight
    }

    /// How many promotions may step at once, at most `ceiling`: under adaptive concurrency
    /// [`STEPS_PER_SLOT`] per slot of the current limit (at least [`MIN_STEPS`]); unbounded (a
    /// fixed `--concurrency`), `ceiling`. A step started beyond what the limit lets through
    /// waits at the throttle holding its read status, its next status and its rendered profiles
    /// (~50 KB): when 1,000 stages completed at once under a limit shrunk to 7, 256 steps held
    /// 15 MiB that a place in the loop's queue does not (issue #49).
    pub fn steps(&self, ceiling: usize) -> usize {
        let ceiling = ceiling.max(1);
        match &self.lock().policy {
            Policy::Adaptive(limit) => (limit.limit() * STEPS_PER_SLOT).max(MIN_STEPS).min(ceiling),
            Policy::Unbounded => ceiling,
        }
    }

    /// How much longer the server asked clients to wait, as of `now` (zero when it did not).
    pub fn hold_off(&self, now: Instant) -> Duration {
        self.lock()
            .hold_off_until
            .map_or(Duration::ZERO, |until| until.saturating_duration_since(now))
    }

    /// Waits for a slot. Dropping the returned slot without [`Slot::finish`] releases it
    /// without teaching the limit anything (the request was cancelled).
    pub async fn acquire(self: &Arc<Self>) -> Slot {
        loop {
            // Registered before the check, so a slot freed in between still wakes this task.
            let freed = self.slot_freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Some(epoch) = self.try_take() {
                return Slot {
                    throttle: self.clone(),
                    epoch,
                    started: Instant::now(),
                    finished: false,
                };
            }
            freed.await;
        }
    }

    fn try_take(&self) -> Option<u64> {
        let mut state = self.lock();
        let in_flight = state.in_flight + 1;
        let epoch = match &mut state.policy {
            Policy::Adaptive(limit) if in_flight > limit.limit() => return None,
            Policy::Adaptive(limit) => {
                limit.on_start(in_flight);
                limit.epoch()
            }
            Policy::Unbounded => 0,
        };
        state.in_flight = in_flight;
        self.metrics.in_flight.set(in_flight as i64);
        Some(epoch)
    }

    fn release(&self, sample: Sample, epoch: u64) {
        let mut state = self.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        self.metrics.in_flight.set(state.in_flight as i64);
        let mut wake = 1;
        if let Policy::Adaptive(limit) = &mut state.policy
            && let Some(change) = limit.on_sample(sample, epoch)
        {
            self.metrics.limit.set(change.to as i64);
            if change.to.abs_diff(change.from) >= change.from / 4 {
                debug!(
                    from = change.from,
                    to = change.to,
                    "API concurrency limit changed"
                );
            }
            wake += change.to.saturating_sub(change.from);
        }
        drop(state);
        for _ in 0..wake {
            self.slot_freed.notify_one();
        }
    }

    /// The server answered 429, asking to wait `retry_after` (if it said).
    fn throttled(&self, retry_after: Option<Duration>, now: Instant) {
        self.metrics.throttled.inc();
        if let Some(wait) = retry_after {
            let until = now + wait;
            let mut state = self.lock();
            state.hold_off_until = Some(state.hold_off_until.map_or(until, |u| u.max(until)));
        }
    }
}

/// One request's claim on the throttle.
#[derive(Debug)]
pub struct Slot {
    throttle: Arc<Throttle>,
    epoch: u64,
    started: Instant,
    finished: bool,
}

impl Slot {
    /// Reports the response head's status and `Retry-After`, and frees the slot.
    pub fn finish(mut self, status: u16, retry_after: Option<Duration>) {
        let now = Instant::now();
        let sample = match status {
            429 => {
                self.throttle.throttled(retry_after, now);
                Sample::Overloaded
            }
            500..=599 => Sample::Overloaded,
            _ => Sample::Answered(now.saturating_duration_since(self.started)),
        };
        self.finished = true;
        self.throttle.release(sample, self.epoch);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if !self.finished {
            self.throttle.release(Sample::Dropped, self.epoch);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn throttle(ceiling: usize) -> Arc<Throttle> {
        Throttle::adaptive(
            LimitSettings {
                initial: 2,
                floor: 1,
                ceiling,
            },
            ThrottleMetrics::default(),
        )
    }

    #[tokio::test]
    async fn requests_over_the_limit_wait_for_a_freed_slot() {
        let throttle = throttle(2);
        let first = throttle.acquire().await;
        let _second = throttle.acquire().await;
        let waiting = tokio::spawn({
            let throttle = throttle.clone();
            async move { throttle.acquire().await }
        });
        tokio::task::yield_now().await;
        assert!(
            !waiting.is_finished(),
            "a third request got a slot over a limit of 2"
        );
        first.finish(200, None);
        let _third = waiting.await.expect("third request gets the freed slot");
        assert_eq!(throttle.in_flight(), 2);
    }

    #[tokio::test]
    async fn a_cancelled_request_frees_its_slot() {
        let throttle = throttle(2);
        let slot = throttle.acquire().await;
        drop(slot);
        assert_eq!(throttle.in_flight(), 0);
        assert_eq!(throttle.limit(), Some(2));
    }

    #[tokio::test]
    async fn a_429_remembers_how_long_the_server_asked_to_wait() {
        let throttle = throttle(8);
        let before = Instant::now();
        let slot = throttle.acquire().await;
        slot.finish(429, Some(Duration::from_secs(3)));
        let left = throttle.hold_off(before);
        assert!(left >= Duration::from_secs(3), "hold-off {left:?}");
        assert_eq!(
            throttle.hold_off(before + Duration::from_secs(10)),
            Duration::ZERO
        );
        assert_eq!(throttle.metrics.throttled.get(), 1);
    }

    #[test]
    fn steps_follow_the_limit_between_a_floor_and_the_ceiling() {
        let throttle = throttle(256);
        assert_eq!(throttle.limit(), Some(2));
        assert_eq!(throttle.steps(256), MIN_STEPS, "a low limit: the floor");
        assert_eq!(throttle.steps(8), 8, "never over the ceiling");
        let mut grown =
            Throttle::adaptive(LimitSettings::with_ceiling(256), ThrottleMetrics::default());
        assert_eq!(grown.limit(), Some(64));
        assert_eq!(
            grown.steps(256),
            256,
            "four steps per slot, within the ceiling"
        );
        assert_eq!(grown.steps(1024), 256);
        grown = Throttle::adaptive(
            LimitSettings {
                initial: 12,
                floor: 4,
                ceiling: 256,
            },
            ThrottleMetrics::default(),
        );
        assert_eq!(grown.steps(256), 48, "four steps per slot");
    }

    #[test]
    fn a_fixed_concurrency_steps_as_many_as_it_says() {
        let throttle = Throttle::unbounded(ThrottleMetrics::default());
        assert_eq!(throttle.steps(3), 3);
        assert_eq!(throttle.steps(0), 1);
    }

    #[tokio::test]
    async fn unbounded_never_waits() {
        let throttle = Throttle::unbounded(ThrottleMetrics::default());
        let mut slots = Vec::new();
        for _ in 0..1000 {
            slots.push(throttle.acquire().await);
        }
        assert_eq!(throttle.in_flight(), 1000);
        assert_eq!(throttle.limit(), None);
    }
}

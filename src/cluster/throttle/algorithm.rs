//! The adaptive concurrency limit, pure: it is told what happened (a request started, a request
//! was answered in some time, the server said it is overloaded) and answers with a limit. No
//! clock, no I/O, so every rule below is checked against a simulated server in microseconds.
//!
//! The shape is TCP's: a *slow start* doubles the limit every window, then *congestion
//! avoidance* adds one per window (a window is `limit` answered requests, about one round trip),
//! so probing a server's ceiling costs at most a request or two over it per probe. Overload (429,
//! 5xx) shrinks it, and so does queueing: latency above [`LATENCY_TOLERANCE`] times the lowest
//! seen *while* throughput fell below [`THROUGHPUT_DROP`] of the best seen. Rising latency alone
//! is not enough: on the emulator and on a real kube-apiserver latency grows with concurrency long
//! before throughput stops growing (kube-apiserver: 16 in flight 177 profiles/s, 256 in flight
//! 336/s at several times the latency). Throughput comes from Little's law (mean concurrency over
//! mean latency), so no clock is needed. Shrinking halves when leaving slow start (the last
//! doubling overshot) and takes 10 % after.

use std::time::Duration;

/// A window whose mean latency exceeds the baseline by this factor may be queueing in the server.
pub const LATENCY_TOLERANCE: f64 = 2.0;
/// Below this absolute rise, latency changes are noise (scheduling, a GC pause), not queueing.
pub const MIN_LATENCY_RISE: Duration = Duration::from_millis(1);
/// Queueing that costs throughput: a window's below this share of the best.
pub const THROUGHPUT_DROP: f64 = 0.7;
/// Weight of a window in the smoothed throughput: one window's noise (a GC pause, the client's own
/// CPU) must not read as a drop, nor one lucky window as the best.
const RATE_SMOOTHING: f64 = 0.25;
/// Multiplicative decrease in congestion avoidance.
const BACKOFF: f64 = 0.9;

/// Bounds and start of the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitSettings {
    pub initial: usize,
    pub floor: usize,
    pub ceiling: usize,
}

impl LimitSettings {
    /// Starts at a quarter of the ceiling (64 under the default 256), at least 16 (the old fixed
    /// default) and never above `ceiling`; never below 4, so a slow server still makes progress.
    /// Starting at 16 cost four doublings of slow start; one early shrink then left the limit to
    /// grow by one per window, which at 20-50 ms per request never reached the server's capacity
    /// during a cold start (the default ran at 70 % of fixed 256). A real kube-apiserver gives
    /// a workload flow about 245 seats by default, so a quarter of 256 is well inside it.
    pub fn with_ceiling(ceiling: usize) -> LimitSettings {
        let ceiling = ceiling.max(1);
        LimitSettings {
            initial: (ceiling / 4).max(16).min(ceiling),
            floor: 4.min(ceiling),
            ceiling,
        }
    }
}

/// What became of one request that held a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sample {
    /// The server answered (any status but overload) after this long.
    Answered(Duration),
    /// The server said it is overloaded (429, 5xx).
    Overloaded,
    /// No answer to learn from: a transport error, or the caller gave up.
    Dropped,
}

/// How the limit changed on a sample, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitChange {
    pub from: usize,
    pub to: usize,
}

#[derive(Debug, Default, Clone)]
struct Window {
    answered: usize,
    latency_sum: Duration,
    started: usize,
    /// Sum over the window's starts of the requests in flight then.
    in_flight_sum: usize,
    peak_in_flight: usize,
}

#[derive(Debug, Clone)]
pub struct AdaptiveLimit {
    settings: LimitSettings,
    limit: usize,
    slow_start: bool,
    /// The lowest window mean latency seen: the server's latency without queueing (reset when
    /// even the floor queues, see `close_window`).
    baseline: Option<Duration>,
    /// The best throughput seen, in requests per second (reset when even the floor queues).
    best_rate: f64,
    /// Throughput, smoothed over windows (see [`RATE_SMOOTHING`]).
    smoothed_rate: Option<f64>,
    window: Window,
    /// Bumped at every decrease. A request remembers the epoch it started in, so the burst of
    /// overload answers from one overshoot shrinks the limit once, not once per answer.
    epoch: u64,
}

impl AdaptiveLimit {
    pub fn new(settings: LimitSettings) -> AdaptiveLimit {
        let floor = settings.floor.max(1);
        let ceiling = settings.ceiling.max(floor);
        let settings = LimitSettings {
            initial: settings.initial.clamp(floor, ceiling),
            floor,
            ceiling,
        };
        AdaptiveLimit {
            settings,
            limit: settings.initial,
            slow_start: true,
            baseline: None,
            best_rate: 0.0,
            smoothed_rate: None,
            window: Window::default(),
            epoch: 0,
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    /// A request took a slot; `in_flight` counts it. Growth needs the limit to have been used.
    pub fn on_start(&mut self, in_flight: usize) {
        self.window.peak_in_flight = self.window.peak_in_flight.max(in_flight);
        self.window.started += 1;
        self.window.in_flight_sum += in_flight;
    }

    /// A request that started in `started_epoch` ended with `sample`.
    pub fn on_sample(&mut self, sample: Sample, started_epoch: u64) -> Option<LimitChange> {
        let from = self.limit;
        match sample {
            Sample::Dropped => {}
            Sample::Overloaded => {
                if started_epoch == self.epoch {
                    self.decrease();
                }
            }
            Sample::Answered(latency) => {
                self.window.answered += 1;
                self.window.latency_sum += latency;
                if self.window.answered >= self.limit {
                    self.close_window();
                }
            }
        }
        (self.limit != from).then_some(LimitChange {
            from,
            to: self.limit,
        })
    }

    fn close_window(&mut self) {
        let window = std::mem::take(&mut self.window);
        let answered = u32::try_from(window.answered).unwrap_or(u32::MAX).max(1);
        let mean = window.latency_sum / answered;
        let baseline = *self.baseline.get_or_insert(mean);
        self.baseline = Some(baseline.min(mean));
        let concurrency = window.in_flight_sum as f64 / window.started.max(1) as f64;
        let window_rate = concurrency / mean.as_secs_f64().max(1e-6);
        // In slow start each window runs at twice the last one's concurrency: nothing to smooth.
        let rate = match self.smoothed_rate {
            Some(smoothed) if !self.slow_start => {
                smoothed + RATE_SMOOTHING * (window_rate - smoothed)
            }
            _ => window_rate,
        };
        self.smoothed_rate = Some(rate);
        // Not decayed: a best that forgets lets the limit creep up as throughput sinks with it.
        self.best_rate = self.best_rate.max(rate);
        let queueing = mean.as_secs_f64() > baseline.as_secs_f64() * LATENCY_TOLERANCE
            && mean.saturating_sub(baseline) > MIN_LATENCY_RISE
            && rate < self.best_rate * THROUGHPUT_DROP;
        if queueing && self.limit == self.settings.floor {
            // Still queueing at the floor: the server got slower, not busier because of us.
            // References that kept the old server would pin the limit here for good.
            self.baseline = Some(mean);
            self.best_rate = rate;
        } else if queueing {
            self.decrease();
        } else if window.peak_in_flight * 2 >= self.limit {
            let grown = match self.slow_start {
                true => self.limit * 2,
                false => self.limit + 1,
            };
            self.limit = grown.min(self.settings.ceiling);
        }
    }

    fn decrease(&mut self) {
        let shrunk = match self.slow_start {
            true => self.limit / 2,
            false => (self.limit as f64 * BACKOFF) as usize,
        };
        self.slow_start = false;
        self.limit = shrunk.max(self.settings.floor);
        self.epoch += 1;
        self.window = Window::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LATENCY: Duration = Duration::from_millis(20);

    fn settings(ceiling: usize) -> LimitSettings {
        LimitSettings {
            initial: 16,
            floor: 4,
            ceiling,
        }
    }

    /// A server answering `n` requests in flight in `latency_at(n)`; the client keeps its limit
    /// full, round after round.
    fn run_server(
        limit: &mut AdaptiveLimit,
        rounds: usize,
        latency_at: impl Fn(usize) -> Duration,
    ) {
        for _ in 0..rounds {
            let in_flight = limit.limit();
            let epoch = limit.epoch();
            let latency = latency_at(in_flight);
            for _ in 0..in_flight {
                limit.on_start(in_flight);
            }
            for _ in 0..in_flight {
                limit.on_sample(Sample::Answered(latency), epoch);
            }
        }
    }

    /// Flat latency up to `capacity` in flight; beyond, latency grows with the square of the
    /// excess, so throughput falls (an overdriven server thrashes).
    fn overdriven(capacity: usize) -> impl Fn(usize) -> Duration {
        move |n| LATENCY.mul_f64((n as f64 / capacity as f64).max(1.0).powi(2))
    }

    fn run_queueing_server(limit: &mut AdaptiveLimit, capacity: usize, rounds: usize) {
        run_server(limit, rounds, overdriven(capacity));
    }

    /// A server that answers 429 at once to every request over `max_in_flight` (like
    /// kube-apiserver's --max-requests-inflight). Returns (answered, rejected).
    fn run_rejecting_server(
        limit: &mut AdaptiveLimit,
        max_in_flight: usize,
        rounds: usize,
    ) -> (usize, usize) {
        let (mut answered, mut rejected) = (0, 0);
        for _ in 0..rounds {
            let in_flight = limit.limit();
            let epoch = limit.epoch();
            for started in 1..=in_flight {
                limit.on_start(started);
            }
            for n in 1..=in_flight {
                if n > max_in_flight {
                    rejected += 1;
                    limit.on_sample(Sample::Overloaded, epoch);
                } else {
                    answered += 1;
                    limit.on_sample(Sample::Answered(LATENCY), epoch);
                }
            }
        }
        (answered, rejected)
    }

    #[test]
    fn flat_latency_grows_to_the_ceiling() {
        let mut limit = AdaptiveLimit::new(settings(256));
        run_queueing_server(&mut limit, 10_000, 40);
        assert_eq!(limit.limit(), 256);
    }

    #[test]
    fn slow_start_doubles_per_window_not_per_request() {
        let mut limit = AdaptiveLimit::new(settings(256));
        run_queueing_server(&mut limit, 10_000, 1);
        assert_eq!(
            limit.limit(),
            32,
            "one window of 16 answers doubles 16 once"
        );
    }

    #[test]
    fn rising_latency_with_rising_throughput_keeps_growing() {
        // Latency grows with concurrency, throughput too (as on the emulator at 5 ms, and on
        // kube-apiserver up to 256 in flight).
        let mut limit = AdaptiveLimit::new(settings(256));
        run_server(&mut limit, 200, |n| LATENCY.mul_f64(1.0 + n as f64 / 32.0));
        assert_eq!(limit.limit(), 256);
    }

    #[test]
    fn a_throughput_plateau_does_not_shrink() {
        let mut limit = AdaptiveLimit::new(settings(256));
        run_server(&mut limit, 200, |n| {
            LATENCY.mul_f64((n as f64 / 32.0).max(1.0))
        });
        assert_eq!(limit.limit(), 256);
    }

    #[test]
    fn rising_latency_converges_near_capacity() {
        let mut limit = AdaptiveLimit::new(settings(1024));
        run_queueing_server(&mut limit, 100, 500);
        let settled = limit.limit();
        assert!(
            (80..=200).contains(&settled),
            "limit {settled} should settle near the capacity of 100"
        );
        assert!(!limit.in_slow_start());
    }

    #[test]
    fn overload_answers_back_off_and_the_reject_rate_stays_low() {
        let mut limit = AdaptiveLimit::new(settings(256));
        let (answered, rejected) = run_rejecting_server(&mut limit, 64, 300);
        let settled = limit.limit();
        assert!(
            (40..=66).contains(&settled),
            "limit {settled} should settle just under the server's 64"
        );
        let rate = rejected as f64 / (answered + rejected) as f64;
        assert!(rate < 0.03, "reject rate {rate:.3} over {answered} answers");
    }

    #[test]
    fn a_burst_of_overload_from_one_window_shrinks_once() {
        let mut limit = AdaptiveLimit::new(settings(256));
        let epoch = limit.epoch();
        for _ in 0..10 {
            limit.on_sample(Sample::Overloaded, epoch);
        }
        assert_eq!(limit.limit(), 8, "halved once on leaving slow start");
        limit.on_sample(Sample::Overloaded, limit.epoch());
        assert_eq!(limit.limit(), 7, "then 10 % per new overload");
    }

    #[test]
    fn never_below_the_floor() {
        let mut limit = AdaptiveLimit::new(settings(256));
        for _ in 0..100 {
            limit.on_sample(Sample::Overloaded, limit.epoch());
        }
        assert_eq!(limit.limit(), 4);
    }

    #[test]
    fn never_above_the_ceiling() {
        let mut limit = AdaptiveLimit::new(settings(50));
        run_queueing_server(&mut limit, 10_000, 100);
        assert_eq!(limit.limit(), 50);
    }

    #[test]
    fn an_unused_limit_does_not_grow() {
        let mut limit = AdaptiveLimit::new(settings(256));
        for _ in 0..100 {
            limit.on_start(1);
            limit.on_sample(Sample::Answered(LATENCY), limit.epoch());
        }
        assert_eq!(limit.limit(), 16);
    }

    #[test]
    fn dropped_requests_teach_nothing() {
        let mut limit = AdaptiveLimit::new(settings(256));
        for _ in 0..100 {
            limit.on_start(16);
            limit.on_sample(Sample::Dropped, limit.epoch());
        }
        assert_eq!(limit.limit(), 16);
    }

    #[test]
    fn a_permanently_slower_server_lets_the_limit_recover() {
        let mut limit = AdaptiveLimit::new(settings(256));
        run_queueing_server(&mut limit, 10_000, 20);
        // The server becomes 10x slower for good, at any concurrency.
        for _ in 0..400 {
            let in_flight = limit.limit();
            let epoch = limit.epoch();
            for started in 1..=in_flight {
                limit.on_start(started);
            }
            for _ in 0..in_flight {
                limit.on_sample(Sample::Answered(LATENCY * 10), epoch);
            }
        }
        assert!(limit.limit() > 64, "limit {} stayed low", limit.limit());
    }

    #[test]
    fn settings_are_clamped_into_a_usable_range() {
        let limit = AdaptiveLimit::new(LimitSettings {
            initial: 0,
            floor: 0,
            ceiling: 0,
        });
        assert_eq!(limit.limit(), 1);
        assert_eq!(LimitSettings::with_ceiling(8).initial, 8);
    }

    #[test]
    fn the_default_starts_at_a_quarter_of_its_ceiling() {
        assert_eq!(LimitSettings::with_ceiling(256).initial, 64);
        assert_eq!(LimitSettings::with_ceiling(64).initial, 16);
        assert_eq!(LimitSettings::with_ceiling(1024).initial, 256);
    }
}

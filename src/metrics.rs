//! The controller's Prometheus metrics. The controller calls the recording methods; `/metrics`
//! calls [`Metrics::encode`]. Per-promotion series are removed when a promotion is forgotten, so
//! a deleted promotion does not linger on dashboards.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry, Unit};
use std::sync::atomic::AtomicU64;
use tollgate_engine::activity::StageActivity;
use tollgate_engine::transitions::{Transition, TransitionKind};
use tollgate_engine::{Phase, PromotionStatus};

use crate::cluster::throttle::ThrottleMetrics;
use activities::StageActivities;
use phases::PhaseGauges;
use promotion_series::{PromotionSeries, Series, count_transition, shared_name};
use tracing::error;

pub use exposition::Exposition;

mod activities;
mod analyses;
mod delivery;
mod exposition;
mod phases;
mod promotion_series;
mod shared_names;

/// Every phase, so the phase gauge always has one series per phase (1 for the current one).
pub const ALL_PHASES: [Phase; 12] = [
    Phase::Progressing,
    Phase::Waiting,
    Phase::Paused,
    Phase::Completed,
    Phase::Failed,
    Phase::RollingBack,
    Phase::RolledBack,
    Phase::Invalid,
    Phase::Held,
    Phase::RemovalHeld,
    Phase::Removing,
    Phase::Removed,
];

/// The label value of a phase (the same spelling as in the status).
pub fn phase_name(phase: &Phase) -> &'static str {
    phase.as_str()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReconcileResult {
    Ok,
    Error,
}

impl ReconcileResult {
    fn label(self) -> &'static str {
        match self {
            ReconcileResult::Ok => "ok",
            ReconcileResult::Error => "error",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

// A promotion has a dozen series; its name is shared by all of them (see `Metrics::promotions`)
// rather than copied into each, which at 10,000 promotions was most of what metrics weighed.

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PromotionLabels {
    promotion: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    promotion: Arc<str>,
    stage: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    promotion: Arc<str>,
    phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabels {
    provider: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    endpoint: String,
}

type SecondsGauge = Gauge<f64, AtomicU64>;
type LatencyFamily = Family<EndpointLabels, Histogram, fn() -> Histogram>;

fn register_throttle(registry: &mut Registry) -> ThrottleMetrics {
    let metrics = ThrottleMetrics::default();
    registry.register(
        "api_concurrency_limit",
        "How many API requests (watches and Leases aside) may be in flight: the adaptive limit, 0 with a fixed --concurrency",
        metrics.limit.clone(),
    );
    registry.register(
        "api_requests_in_flight",
        "API requests in flight through the throttle (watches and Leases aside)",
        metrics.in_flight.clone(),
    );
    registry.register(
        "api_throttled",
        "API responses 429 Too Many Requests",
        metrics.throttled.clone(),
    );
    metrics
}

/// `metric`, registered under `name` (after the `tollgate_` prefix).
fn registered<M: Metric + Clone + Default>(registry: &mut Registry, name: &str, help: &str) -> M {
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

/// `metric`, registered under `name` with the unit seconds (`_seconds` is appended).
fn registered_in_seconds<M: Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) -> M {
    registry.register_with_unit(name, help, Unit::Seconds, metric.clone());
    metric
}

/// A collector (series computed at scrape time), registered.
fn collected<C: Collector + Clone>(registry: &mut Registry, collector: C) -> C {
    registry.register_collector(Box::new(collector.clone()));
    collector
}

fn notification_latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

pub struct Metrics {
    registry: Registry,
    reconciles: Family<ResultLabels, Counter>,
    reconcile_errors: Family<KindLabels, Counter>,
    git_syncs: Family<ResultLabels, Counter>,
    git_sync_duration: Histogram,
    apply_errors: Family<PromotionLabels, Counter>,
    drift_corrections: Family<PromotionLabels, Counter>,
    current_stage_index: Family<PromotionLabels, Gauge>,
    phase: PhaseGauges,
    stage_activity: StageActivities,
    delivery: delivery::DeliverySeries,
    time_in_stage: Family<PromotionLabels, SecondsGauge>,
    approval_wait: Family<PromotionLabels, SecondsGauge>,
    webhook_requests: Family<WebhookLabels, Counter>,
    leader: Gauge,
    git_tip_refused: Gauge,
    notifications_pending: Family<PromotionLabels, Gauge>,
    stage_failures: Family<PromotionLabels, Counter>,
    cluster_timeouts: Family<PromotionLabels, Counter>,
    rollbacks: Family<PromotionLabels, Counter>,
    watch_failing: Family<ResourceLabels, Gauge>,
    notifications_sent: Family<EndpointLabels, Counter>,
    notifications_failed: Family<EndpointLabels, Counter>,
    notifications_dropped: Family<EndpointLabels, Counter>,
    notification_latency: LatencyFamily,
    throttle: ThrottleMetrics,
    analyses: analyses::AnalysisSeries,
    /// Resources whose watch has failed at some point (their gauge reads 0 once recovered).
    watched: Mutex<Vec<String>>,
    /// Per promotion: since when its current stage runs and since when it waits for an
    /// approval. The two duration gauges are computed from these at scrape time, so they grow
    /// between steps instead of freezing at the last one.
    live_since: Mutex<HashMap<Arc<str>, LiveSince>>,
    /// Every promotion with series, by its name as the series share it, with its stage
    /// transition counts: a `Family` cannot list its label sets, and forgetting a promotion must
    /// remove all of them.
    promotions: PromotionSeries,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    // One table of registrations, in the order of the families on /metrics (a metric, its name
    // and its help side by side): it reads better whole than cut into arbitrary groups.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("tollgate");
        let reconciles = registered(
            &mut registry,
            "reconciles",
            "Promotion reconcile steps, by result (ok or error)",
        );
        let reconcile_errors = registered(
            &mut registry,
            "reconcile_errors",
            "Failed promotion reconcile steps, by kind (apply, delete, ensure_state, persist_status, delete_state, timed_out)",
        );
        let git_syncs = registered(
            &mut registry,
            "git_syncs",
            "Git fetch/sync attempts, by result (ok or error)",
        );
        // 50 ms to ~100 s: a local poll is fast, a fetch over a slow link is not.
        let git_sync_duration = registered_in_seconds(
            &mut registry,
            "git_sync_duration",
            "Duration of git fetch/sync attempts",
            Histogram::new(exponential_buckets(0.05, 2.0, 12)),
        );
        let promotions = PromotionSeries::default();
        registry.register_collector(Box::new(promotions.clone()));
        Metrics {
            reconciles,
            reconcile_errors,
            git_syncs,
            git_sync_duration,
            promotions,
            apply_errors: registered(
                &mut registry,
                "apply_errors",
                "Failed writes of generated objects to the cluster, by promotion",
            ),
            drift_corrections: registered(
                &mut registry,
                "drift_corrections",
                "Generated ClusterProfiles re-applied after a hand edit or delete, by promotion",
            ),
            current_stage_index: registered(
                &mut registry,
                "promotion_current_stage_index",
                "Zero-based index of the stage a promotion is currently running",
            ),
            phase: collected(&mut registry, PhaseGauges::default()),
            stage_activity: collected(&mut registry, StageActivities::default()),
            delivery: collected(&mut registry, delivery::DeliverySeries::default()),
            time_in_stage: registered_in_seconds(
                &mut registry,
                "promotion_time_in_stage",
                "Time since the current stage was started",
                Family::default(),
            ),
            approval_wait: registered_in_seconds(
                &mut registry,
                "promotion_approval_wait",
                "Time the current stage has been waiting for a manual approval",
                Family::default(),
            ),
            webhook_requests: registered(
                &mut registry,
                "webhook_requests",
                "Webhook requests, by provider and result",
            ),
            leader: registered(
                &mut registry,
                "leader",
                "1 while this replica holds the leader lease (writes), 0 otherwise",
            ),
            stage_failures: registered(
                &mut registry,
                "stage_failures",
                "Stages failed under their RolloutPolicy (failure budget spent), by promotion",
            ),
            cluster_timeouts: registered(
                &mut registry,
                "cluster_timeouts",
                "Clusters not Provisioned by their stage's progressDeadline, by promotion",
            ),
            rollbacks: registered(
                &mut registry,
                "rollbacks",
                "Runs rolled back after a stage failed (onFailure: Rollback), by promotion",
            ),
            watch_failing: registered(
                &mut registry,
                "watch_failing",
                "1 while the watch of a resource fails (errors since it started failing are logged), 0 once it works again",
            ),
            git_tip_refused: registered(
                &mut registry,
                "git_tip_refused",
                "1 while the tracked branch's tip carries a commit that does not verify (--verify-commits): nothing new rolls out until it is fixed",
            ),
            notifications_pending: registered(
                &mut registry,
                "notifications_pending",
                "Notices owed to receivers and not yet delivered, by promotion (the backlog kept in its status)",
            ),
            notifications_sent: registered(
                &mut registry,
                "notifications_sent",
                "Notifications delivered, by endpoint (the notify entry's name)",
            ),
            notifications_failed: registered(
                &mut registry,
                "notifications_failed",
                "Notifications given up on (still failing retryFor after their transition, a 4xx answer, an unreadable addressSecretFile), by endpoint",
            ),
            notifications_dropped: registered(
                &mut registry,
                "notifications_dropped",
                "Notifications not sent on purpose, each once: an older state of a stage after a newer one was delivered, folded into a newer state while a receiver was down, or given up at the limit of the record of pending notices, by endpoint",
            ),
            notification_latency: registered_in_seconds(
                &mut registry,
                "notification_latency",
                "Time of the successful request of a delivered notification, by endpoint",
                Family::new_with_constructor(notification_latency_histogram),
            ),
            throttle: register_throttle(&mut registry),
            analyses: analyses::AnalysisSeries::register(&mut registry),
            watched: Mutex::new(Vec::new()),
            live_since: Mutex::new(HashMap::new()),
            registry,
        }
    }

    /// The series the API throttle updates (see `cluster::throttle`).
    pub fn throttle(&self) -> ThrottleMetrics {
        self.throttle.clone()
    }

    /// The OpenMetrics text exposition of every metric, durations as of now.
    pub fn encode(&self) -> String {
        self.encode_at(Utc::now())
    }

    /// The exposition with the duration gauges computed as of `now`.
    pub fn encode_at(&self, now: DateTime<Utc>) -> String {
        self.exposition_at(now).into_string()
    }

    /// The exposition in chunks, durations as of now: what `/metrics` sends (gzipped when
    /// the scraper accepts it).
    pub fn exposition(&self, gzip: bool) -> Exposition {
        let exposition = match gzip {
            true => Exposition::gzip(),
            false => Exposition::plain(),
        };
        self.write_exposition(Utc::now(), exposition)
    }

    fn exposition_at(&self, now: DateTime<Utc>) -> Exposition {
        self.write_exposition(now, Exposition::plain())
    }

    fn write_exposition(&self, now: DateTime<Utc>, mut exposition: Exposition) -> Exposition {
        self.refresh_durations(now);
        // Writing into memory cannot fail; log rather than panic should that ever change.
        if let Err(error) = encode(&mut exposition, &self.registry) {
            error!(%error, "cannot encode metrics");
        }
        exposition
    }

    pub fn reconcile(&self, result: ReconcileResult) {
        self.reconciles
            .get_or_create(&ResultLabels {
                result: result.label().to_string(),
            })
            .inc();
    }

    pub fn reconcile_error(&self, kind: &'static str) {
        self.reconcile_errors
            .get_or_create(&KindLabels { kind })
            .inc();
    }

    pub fn git_sync(&self, duration: Duration, ok: bool) {
        self.git_sync_duration.observe(duration.as_secs_f64());
        let result = if ok { "ok" } else { "error" };
        self.git_syncs
            .get_or_create(&ResultLabels {
                result: result.to_string(),
            })
            .inc();
    }

    pub fn stage_transition(&self, promotion: &str, stage: &str) {
        count_transition(&mut self.promotions(), promotion, stage);
    }

    pub fn apply_error(&self, promotion: &str) {
        let labels = self.promotion_labels(promotion);
        self.apply_errors.get_or_create(&labels).inc();
    }

    pub fn drift_corrected(&self, promotion: &str) {
        let labels = self.promotion_labels(promotion);
        self.drift_corrections.get_or_create(&labels).inc();
    }

    /// Sets the per-promotion gauges from a status, as of `now`.
    pub fn observe_promotion(&self, promotion: &str, status: &PromotionStatus, now: DateTime<Utc>) {
        let labels = self.promotion_labels(promotion);
        let current = status
            .current_stage_name
            .as_deref()
            .and_then(|name| status.stages.iter().position(|s| s.name == name));
        match current.and_then(|index| i64::try_from(index).ok()) {
            Some(index) => {
                self.current_stage_index.get_or_create(&labels).set(index);
            }
            None => {
                self.current_stage_index.remove(&labels);
            }
        }
        let pending = status.pending_notices.as_deref().map_or(0, Vec::len);
        self.notifications_pending
            .get_or_create(&labels)
            .set(i64::try_from(pending).unwrap_or(i64::MAX));
        self.phase.set(&labels.promotion, &status.phase);
        self.stage_activity.set(&labels.promotion, status);
        self.delivery.set(&labels.promotion, status);
        let live = LiveSince {
            stage_started: status.last_promotion_time,
            approval_since: approval_wait_start(status),
        };
        self.set_durations(&labels, &live, now);
        self.live_since().insert(labels.promotion.clone(), live);
    }

    /// Counts what a persisted step changed, from the engine's `transitions(before, after)`
    /// (`told`): stages started, a stage failing under its policy, a rollback started; and
    /// clusters newly timed out. Typed status fields only; no event text is read.
    pub fn observe_step(
        &self,
        promotion: &str,
        before: Option<&PromotionStatus>,
        after: &PromotionStatus,
        told: &[Transition],
    ) {
        let labels = self.promotion_labels(promotion);
        for transition in told {
            match transition.kind {
                TransitionKind::Started => self.stage_transition(promotion, &transition.stage),
                TransitionKind::Failed => {
                    self.stage_failures.get_or_create(&labels).inc();
                    if after
                        .failure
                        .as_ref()
                        .is_some_and(|f| !f.rollback.is_empty())
                    {
                        self.rollbacks.get_or_create(&labels).inc();
                    }
                }
                _ => {}
            }
        }
        let same_run = before.is_some_and(|b| b.snapshot_index == after.snapshot_index);
        let timed_out_before = |stage: &str| {
            before
                .filter(|_| same_run)
                .and_then(|b| b.stage(stage))
                .map_or(0, |s| s.counts.timed_out)
        };
        let newly: u64 = after
            .stages
            .iter()
            .map(|s| u64::from(s.counts.timed_out.saturating_sub(timed_out_before(&s.name))))
            .sum();
        if newly > 0 {
            self.cluster_timeouts.get_or_create(&labels).inc_by(newly);
        }
        self.analyses.observe(promotion, before, after);
    }

    fn set_durations(&self, labels: &PromotionLabels, live: &LiveSince, now: DateTime<Utc>) {
        match live.stage_started {
            Some(started) => {
                self.time_in_stage
                    .get_or_create(labels)
                    .set(seconds_since(started, now));
            }
            None => {
                self.time_in_stage.remove(labels);
            }
        }
        match live.approval_since {
            Some(since) => {
                self.approval_wait
                    .get_or_create(labels)
                    .set(seconds_since(since, now));
            }
            None => {
                self.approval_wait.remove(labels);
            }
        }
    }

    fn refresh_durations(&self, now: DateTime<Utc>) {
        let live = self.live_since().clone();
        for (promotion, since) in &live {
            let labels = PromotionLabels {
                promotion: promotion.clone(),
            };
            self.set_durations(&labels, since, now);
        }
    }

    fn live_since(&self) -> MutexGuard<'_, HashMap<Arc<str>, LiveSince>> {
        // Plain values: a panic cannot leave the map half-updated in a way that matters.
        self.live_since
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Removes every series of a promotion (it is gone from git and from the cluster).
    /// Whether the branch tip is refused by commit verification now.
    pub fn git_tip_refused(&self, refused: bool) {
        self.git_tip_refused.set(i64::from(refused));
    }

    pub fn forget_promotion(&self, promotion: &str) {
        self.analyses.forget(promotion);
        let Some((promotion, _)) = self.promotions().remove_entry(promotion) else {
            return;
        };
        let labels = PromotionLabels {
            promotion: promotion.clone(),
        };
        self.live_since().remove(&promotion);
        self.apply_errors.remove(&labels);
        self.drift_corrections.remove(&labels);
        self.stage_failures.remove(&labels);
        self.cluster_timeouts.remove(&labels);
        self.rollbacks.remove(&labels);
        self.current_stage_index.remove(&labels);
        self.time_in_stage.remove(&labels);
        self.approval_wait.remove(&labels);
        self.notifications_pending.remove(&labels);
        self.phase.remove(&promotion);
        self.stage_activity.remove(&promotion);
        self.delivery.remove(&promotion);
    }

    /// `result`: accepted, bad_signature, missing_signature, too_large, ignored, not_configured,
    /// bad_payload, timeout.
    pub fn webhook(&self, provider: &str, result: &str) {
        self.webhook_requests
            .get_or_create(&WebhookLabels {
                provider: provider.to_string(),
                result: result.to_string(),
            })
            .inc();
    }

    /// The watches failing now, as `(resource, errors)`; any other watch that failed before reads 0.
    pub fn set_failing_watches(&self, failing: &[(String, u64)]) {
        let mut watched = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        for (resource, _) in failing {
            if !watched.contains(resource) {
                watched.push(resource.clone());
            }
        }
        for resource in watched.iter() {
            let value = i64::from(failing.iter().any(|(r, _)| r == resource));
            self.watch_failing
                .get_or_create(&ResourceLabels {
                    resource: resource.clone(),
                })
                .set(value);
        }
    }

    /// A notification delivered to `endpoint` by a request that took `latency`.
    pub fn notification_sent(&self, endpoint: &str, latency: Duration) {
        let labels = EndpointLabels {
            endpoint: endpoint.to_string(),
        };
        self.notifications_sent.get_or_create(&labels).inc();
        self.notification_latency
            .get_or_create(&labels)
            .observe(latency.as_secs_f64());
    }

    pub fn notification_failed(&self, endpoint: &str) {
        self.notifications_failed
            .get_or_create(&EndpointLabels {
                endpoint: endpoint.to_string(),
            })
            .inc();
    }

    pub fn notification_dropped(&self, endpoint: &str) {
        self.notifications_dropped
            .get_or_create(&EndpointLabels {
                endpoint: endpoint.to_string(),
            })
            .inc();
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    fn promotions(&self) -> MutexGuard<'_, Series> {
        self.promotions.lock()
    }

    fn promotion_labels(&self, promotion: &str) -> PromotionLabels {
        PromotionLabels {
            promotion: shared_name(&mut self.promotions(), promotion),
        }
    }
}

/// The instants the duration gauges count from.
#[derive(Clone, Copy, Debug, Default)]
struct LiveSince {
    stage_started: Option<DateTime<Utc>>,
    approval_since: Option<DateTime<Utc>>,
}

fn seconds_since(start: DateTime<Utc>, now: DateTime<Utc>) -> f64 {
    let millis = (now - start).num_milliseconds().max(0);
    millis as f64 / 1000.0
}

/// When the current stage started waiting for approval, if it is waiting for one: the activity
/// the engine names (no status text is parsed, no field re-interpreted here).
fn approval_wait_start(status: &PromotionStatus) -> Option<DateTime<Utc>> {
    let stage = status.stage(status.current_stage_name.as_deref()?)?;
    (stage.activity == StageActivity::AwaitingApproval).then_some(stage.activity_since)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn phase_labels_are_spelled_as_the_status_spells_them() {
        for phase in &ALL_PHASES {
            assert_eq!(
                serde_json::to_value(phase).expect("phase"),
                serde_json::json!(phase_name(phase))
            );
        }
    }

    #[test]
    fn forgetting_a_promotion_removes_every_series_it_has() {
        let metrics = Metrics::new();
        let now = Utc::now();
        let mut status: PromotionStatus =
            serde_json::from_value(serde_json::json!({"hashScheme": 1, "phase": "Progressing"}))
                .expect("a status");
        status.last_promotion_time = Some(now);
        for promotion in ["gone", "kept"] {
            metrics.stage_transition(promotion, "dev");
            metrics.stage_transition(promotion, "prod");
            metrics.stage_transition(promotion, "dev");
            metrics.apply_error(promotion);
            metrics.observe_promotion(promotion, &status, now);
        }
        let before = metrics.encode();
        assert!(
            before.contains(r#"tollgate_stage_transitions_total{promotion="gone",stage="dev"} 2"#)
        );
        assert!(
            before.contains(r#"tollgate_promotion_phase{promotion="gone",phase="Progressing"} 1"#)
        );
        metrics.forget_promotion("gone");
        let after = metrics.encode();
        assert!(!after.contains(r#""gone""#), "{after}");
        assert!(
            after.contains(r#"tollgate_stage_transitions_total{promotion="kept",stage="prod"} 1"#)
        );
        assert!(after.contains(r#"tollgate_promotion_time_in_stage_seconds{promotion="kept"}"#));
    }

    #[test]
    fn each_stage_has_one_series_naming_the_activity_the_engine_gives_it() {
        let metrics = Metrics::new();
        let now = Utc::now();
        let status = |prod: serde_json::Value| -> PromotionStatus {
            serde_json::from_value(serde_json::json!({"hashScheme": 1, "phase": "Waiting",
                "stagesAhead": [{"name": "dev", "activity": {"kind": "Pending"}},
                                {"name": "prod", "activity": prod,
                                 "activitySince": "2026-11-24T17:00:00Z"}]}))
            .expect("a status")
        };
        let held = serde_json::json!({"kind": "Blackout", "until": "2026-11-25T00:03:00Z"});
        metrics.observe_promotion("web", &status(held), now);
        metrics.observe_promotion("web", &status(serde_json::json!({"kind": "Pending"})), now);
        let text = metrics.encode();
        let series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("tollgate_stage_activity{"))
            .collect();
        assert_eq!(
            series,
            [
                r#"tollgate_stage_activity{promotion="web",stage="dev",activity="Pending"} 1"#,
                r#"tollgate_stage_activity{promotion="web",stage="prod",activity="Pending"} 1"#,
            ],
            "the blackout's series is gone once the stage moved on"
        );
        metrics.forget_promotion("web");
        assert!(!metrics.encode().contains("tollgate_stage_activity{"));
    }

    #[test]
    fn every_phase_has_a_series_and_only_the_current_one_reads_1() {
        let metrics = Metrics::new();
        let now = Utc::now();
        let status = |phase: &str| -> PromotionStatus {
            serde_json::from_value(serde_json::json!({"hashScheme": 1, "phase": phase}))
                .expect("a status")
        };
        metrics.observe_promotion("web", &status("Progressing"), now);
        metrics.observe_promotion("web", &status("Completed"), now);
        let text = metrics.encode();
        let series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("tollgate_promotion_phase{"))
            .collect();
        assert_eq!(series.len(), ALL_PHASES.len(), "{text}");
        for phase in &ALL_PHASES {
            let value = if phase_name(phase) == "Completed" {
                1
            } else {
                0
            };
            let line = format!(
                r#"tollgate_promotion_phase{{promotion="web",phase="{}"}} {value}"#,
                phase_name(phase)
            );
            assert!(series.contains(&line.as_str()), "{line} in {text}");
        }
        assert_eq!(
            text.matches("# TYPE tollgate_promotion_phase gauge")
                .count(),
            1
        );
    }

    #[test]
    fn phase_names_match_the_status_spelling() {
        for phase in &ALL_PHASES {
            let serialized = serde_json::to_value(phase).expect("phase serializes");
            assert_eq!(serialized.as_str(), Some(phase_name(phase)));
        }
        let distinct: BTreeSet<&str> = ALL_PHASES.iter().map(phase_name).collect();
        assert_eq!(distinct.len(), ALL_PHASES.len());
    }

    #[test]
    fn durations_are_live_at_scrape_time_not_frozen_at_the_last_step() {
        let metrics = Metrics::new();
        let stepped = Utc::now();
        let mut status: PromotionStatus =
            serde_json::from_value(serde_json::json!({"hashScheme": 1, "phase": "Progressing"}))
                .expect("a status");
        status.last_promotion_time = Some(stepped - chrono::Duration::seconds(10));
        metrics.observe_promotion("web", &status, stepped);
        let later = metrics.encode_at(stepped + chrono::Duration::seconds(50));
        assert!(
            later.contains(r#"tollgate_promotion_time_in_stage_seconds{promotion="web"} 60.0"#),
            "{later}"
        );
    }

    #[test]
    fn a_failed_stage_and_timed_out_clusters_are_counted_once() {
        let metrics = Metrics::new();
        let status = |value: serde_json::Value| -> PromotionStatus {
            serde_json::from_value(value).expect("a status")
        };
        let stage = |timed_out: u32| {
            serde_json::json!({"name": "prod", "snapshotIndex": 2, "appliedAt": "2026-01-01T00:00:00Z",
                "lastUpdateReconciledTime": "2026-01-01T00:00:00Z",
                "appliedSpecHash": "h", "counts": {"matchingClusters": 3, "summaries": 3,
                "provisioned": 1, "failed": 0, "timedOut": timed_out}})
        };
        let before = status(serde_json::json!({"hashScheme": 1, "phase": "Progressing",
            "snapshotIndex": 2, "stages": [stage(1)]}));
        let after = status(serde_json::json!({"hashScheme": 1, "phase": "RollingBack",
            "snapshotIndex": 2, "stages": [stage(2)],
            "failure": {"stage": "prod", "snapshotIndex": 2, "reason": "r",
                "at": "2026-01-01T00:10:00Z", "onFailure": "Rollback",
                "rollback": [{"name": "prod"}]}}));
        let told = |b: &PromotionStatus, a: &PromotionStatus| {
            tollgate_engine::transitions::transitions(Some(b), a)
        };
        metrics.observe_step("web", Some(&before), &after, &told(&before, &after));
        metrics.observe_step("web", Some(&after), &after, &told(&after, &after));
        let text = metrics.encode();
        assert!(
            text.contains(r#"tollgate_stage_failures_total{promotion="web"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"tollgate_rollbacks_total{promotion="web"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"tollgate_cluster_timeouts_total{promotion="web"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn seconds_since_never_goes_negative() {
        let now = Utc::now();
        assert_eq!(seconds_since(now + chrono::Duration::seconds(5), now), 0.0);
        assert_eq!(
            seconds_since(now - chrono::Duration::milliseconds(1500), now),
            1.5
        );
    }
}

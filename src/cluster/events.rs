//! Kubernetes Events about a promotion, attached to its GitPromotion object. Best effort: a lost
//! event is logged, never retried at the expense of the rollout.
//!
//! Publishing is queued: a step hands its events over and moves on, so an event's round trip is
//! never on the path from a commit to the next apply (at cold start every promotion publishes one).
//! Each shard has one worker, so a promotion's events reach the API in the order it produced them.
//!
//! Repeats become a series (`series.count`), as kube's `Recorder` does, with two differences that
//! matter at fleet scale and for readers:
//! - the note is part of what makes an event a repeat: kube's key leaves it out, so "stage dev
//!   provisioned" followed by "stage prod provisioned" within six minutes showed as the first event
//!   seen twice;
//! - the cache keeps what a repeat needs (name, count), not whole Event objects, and expires in
//!   order instead of scanning every entry on every publish (quadratic at 10,000 promotions; the
//!   Event objects were about 50 MB).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tollgate_engine::{EngineEvent, EventType};
use tracing::{info, warn};

use super::crd::GitPromotion;

/// Workers sending events, each with its own series cache. A promotion always goes to the same
/// one, so its repeats are recognised and its events stay in order.
const SHARDS: usize = 16;

/// Events waiting per shard. A burst beyond this (the API server unreachable while thousands of
/// promotions step) drops events with a warning rather than holding memory or the rollout.
const QUEUE_PER_SHARD: usize = 1024;

/// How long a sent event counts as the start of a series for its repeats (kube's value).
const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);

/// GitPromotions are cluster-scoped: their events go to the `default` namespace.
const EVENT_NAMESPACE: &str = "default";

const ACTION: &str = "Rollout";

struct Queued {
    promotion: String,
    uid: Option<String>,
    event: EngineEvent,
}

#[derive(Clone)]
pub struct EventPublisher {
    queues: Vec<mpsc::Sender<Queued>>,
    dry_run: bool,
    /// Events queued and not yet sent (or failed): see [`EventPublisher::is_idle`].
    unsent: Arc<AtomicUsize>,
}

impl EventPublisher {
    /// Starts one worker task per shard (none in dry-run); they stop when the publisher is dropped.
    pub fn new(client: Client, instance: Option<String>, dry_run: bool) -> Self {
        let shards = if dry_run { 0 } else { SHARDS };
        let unsent = Arc::new(AtomicUsize::new(0));
        let queues = (0..shards)
            .map(|_| {
                let (queue, received) = mpsc::channel(QUEUE_PER_SHARD);
                let sender = SeriesSender {
                    events: Api::namespaced(client.clone(), EVENT_NAMESPACE),
                    instance: instance.clone().unwrap_or_else(|| "tollgate".into()),
                    cache: SeriesCache::default(),
                    unsent: unsent.clone(),
                };
                tokio::spawn(sender.run(received));
                queue
            })
            .collect();
        EventPublisher {
            queues,
            dry_run,
            unsent,
        }
    }

    /// Every event queued has been sent (or failed): none is left to reach the API server.
    pub fn is_idle(&self) -> bool {
        self.unsent.load(Ordering::SeqCst) == 0
    }

    /// Logs the event and queues it for the API server.
    pub fn publish(&self, promotion: &str, uid: Option<&str>, event: &EngineEvent) {
        if self.dry_run {
            info!(promotion, reason = event.reason.as_str(), note = %event.note, "dry-run: event (not published)");
            return;
        }
        info!(promotion, reason = event.reason.as_str(), note = %event.note, "event");
        let Some(queue) =
            shard_of(promotion, self.queues.len()).and_then(|shard| self.queues.get(shard))
        else {
            return;
        };
        let queued = Queued {
            promotion: promotion.to_string(),
            uid: uid.map(str::to_string),
            event: event.clone(),
        };
        self.unsent.fetch_add(1, Ordering::SeqCst);
        if let Err(error) = queue.try_send(queued) {
            self.unsent.fetch_sub(1, Ordering::SeqCst);
            let why = match error {
                mpsc::error::TrySendError::Full(_) => "the event queue is full",
                mpsc::error::TrySendError::Closed(_) => "the event publisher stopped",
            };
            warn!(
                promotion,
                reason = event.reason.as_str(),
                why,
                "event dropped"
            );
        }
    }
}

/// What makes an event a repeat of an earlier one.
struct SeriesKey {
    promotion: String,
    warning: bool,
    reason: &'static str,
    note: String,
}

impl SeriesKey {
    /// The key as the cache holds it: a digest instead of the strings (at 10,000 promotions the
    /// cached keys, held twice for expiry, weighed about 30 MB). 128 bits of SHA-256 make a
    /// collision, which would merge two events into one series, practically impossible.
    fn id(&self) -> SeriesId {
        let mut hasher = Sha256::new();
        for part in [
            self.promotion.as_bytes(),
            self.reason.as_bytes(),
            self.note.as_bytes(),
        ] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part);
        }
        hasher.update([u8::from(self.warning)]);
        let digest = hasher.finalize();
        let mut id = [0; 16];
        id.copy_from_slice(&digest[..16]);
        SeriesId(id)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct SeriesId([u8; 16]);

/// A sent event that repeats may extend. Its name is derived (see [`event_name`]), not kept.
struct Sent {
    created: Timestamp,
    count: i32,
    last_observed: Timestamp,
}

/// The name of the Event object a series of `promotion` started at `created` has.
fn event_name(promotion: &str, created: Timestamp) -> String {
    format!("{promotion}.{:x}", created.as_nanosecond())
}

/// Sent events that repeats may still extend, expiring in the order they were last seen.
#[derive(Default)]
struct SeriesCache {
    series: HashMap<SeriesId, Sent>,
    /// Series in the order they were last extended or started (a series may appear more than
    /// once; only its newest entry expires it).
    expiry: VecDeque<(Timestamp, SeriesId)>,
}

impl SeriesCache {
    fn expire(&mut self, now: Timestamp) {
        while let Some((at, _)) = self.expiry.front() {
            if *at + SERIES_WINDOW > now {
                break;
            }
            let Some((at, key)) = self.expiry.pop_front() else {
                break;
            };
            if self.series.get(&key).is_some_and(|s| s.last_observed == at) {
                self.series.remove(&key);
            }
        }
    }

    fn get(&self, id: SeriesId) -> Option<&Sent> {
        self.series.get(&id)
    }

    fn remember(&mut self, id: SeriesId, created: Timestamp, count: i32, now: Timestamp) {
        self.expiry.push_back((now, id));
        self.series.insert(
            id,
            Sent {
                created,
                count,
                last_observed: now,
            },
        );
    }
}

struct SeriesSender {
    events: Api<Event>,
    instance: String,
    cache: SeriesCache,
    unsent: Arc<AtomicUsize>,
}

impl SeriesSender {
    async fn run(mut self, mut received: mpsc::Receiver<Queued>) {
        while let Some(queued) = received.recv().await {
            let promotion = queued.promotion.clone();
            let reason = queued.event.reason.as_str();
            if let Err(error) = self.send(queued).await {
                warn!(promotion, reason, %error, "could not publish event");
            }
            self.unsent.fetch_sub(1, Ordering::SeqCst);
        }
    }

    async fn send(&mut self, queued: Queued) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        self.cache.expire(now);
        let key = SeriesKey {
            promotion: queued.promotion,
            warning: queued.event.event_type == EventType::Warning,
            reason: queued.event.reason.as_str(),
            note: queued.event.note,
        };
        let id = key.id();
        if let Some(sent) = self.cache.get(id) {
            let count = sent.count + 1;
            let (name, created) = (event_name(&key.promotion, sent.created), sent.created);
            let series = EventSeries {
                count,
                last_observed_time: MicroTime(now),
            };
            let patch = json!({"series": series});
            match self
                .events
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    self.cache.remember(id, created, count, now);
                    return Ok(());
                }
                // The API server expired it (events live an hour by default): start anew.
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
        let event = self.new_event(&key, queued.uid, now);
        self.events.create(&PostParams::default(), &event).await?;
        self.cache.remember(id, now, 1, now);
        Ok(())
    }

    fn new_event(&self, key: &SeriesKey, uid: Option<String>, now: Timestamp) -> Event {
        Event {
            metadata: ObjectMeta {
                namespace: Some(EVENT_NAMESPACE.into()),
                name: Some(event_name(&key.promotion, now)),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(if key.warning { "Warning" } else { "Normal" }.into()),
            reason: Some(key.reason.into()),
            note: Some(key.note.clone()),
            action: Some(ACTION.into()),
            regarding: Some(ObjectReference {
                api_version: Some(GitPromotion::api_version(&()).into_owned()),
                kind: Some(GitPromotion::kind(&()).into_owned()),
                name: Some(key.promotion.clone()),
                uid,
                ..ObjectReference::default()
            }),
            reporting_controller: Some("tollgate".into()),
            reporting_instance: Some(self.instance.clone()),
            ..Event::default()
        }
    }
}

/// A stable shard for `promotion` among `shards` (none when there are none).
fn shard_of(promotion: &str, shards: usize) -> Option<usize> {
    use std::hash::{Hash, Hasher};
    if shards == 0 {
        return None;
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    promotion.hash(&mut hasher);
    usize::try_from(hasher.finish() % shards as u64).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(note: &str) -> SeriesId {
        SeriesKey {
            promotion: "p".into(),
            warning: false,
            reason: "StageProvisioned",
            note: note.into(),
        }
        .id()
    }

    #[test]
    fn a_repeat_is_recognised_by_its_note_until_the_window_passes() {
        let start = Timestamp::from_second(1_700_000_000).expect("valid time");
        let mut cache = SeriesCache::default();
        cache.remember(key("stage dev provisioned"), start, 1, start);
        assert!(cache.get(key("stage dev provisioned")).is_some());
        assert!(
            cache.get(key("stage prod provisioned")).is_none(),
            "another note is another event"
        );
        // Extended at +5 min: the series lives until +11 min.
        let extended = start + SignedDuration::from_mins(5);
        cache.remember(key("stage dev provisioned"), start, 2, extended);
        cache.expire(start + SignedDuration::from_mins(7));
        assert_eq!(
            cache.get(key("stage dev provisioned")).map(|s| s.count),
            Some(2)
        );
        cache.expire(start + SignedDuration::from_mins(11));
        assert!(cache.get(key("stage dev provisioned")).is_none());
        assert!(cache.expiry.is_empty(), "nothing left to expire");
    }

    #[test]
    fn every_part_of_the_key_tells_series_apart() {
        let id = |promotion: &str, warning, reason, note: &str| {
            SeriesKey {
                promotion: promotion.into(),
                warning,
                reason,
                note: note.into(),
            }
            .id()
        };
        let base = id("ab", false, "StageProvisioned", "c");
        assert_eq!(base, id("ab", false, "StageProvisioned", "c"));
        assert_ne!(
            id("a", false, "StageProvisioned", "bc"),
            base,
            "field boundaries count"
        );
        assert_ne!(id("ab", true, "StageProvisioned", "c"), base);
        assert_ne!(id("ab", false, "StageSucceeded", "c"), base);
        let created = Timestamp::from_second(1_700_000_000).expect("valid time");
        assert_eq!(event_name("ab", created), "ab.17979cfe362a0000");
    }

    #[test]
    fn a_promotion_always_lands_on_the_same_shard_and_names_spread() {
        assert_eq!(shard_of("p", 0), None);
        assert_eq!(shard_of("app", 64), shard_of("app", 64));
        let used: std::collections::HashSet<usize> = (0..1_000)
            .filter_map(|i| shard_of(&format!("promotion-{i}"), 64))
            .collect();
        assert!(used.len() > 32, "{} shards used", used.len());
    }
}

//! Kubernetes Events about a promotion, attached to its GitPromotion object. Best effort: a lost
//! event is logged, never retried at the expense of the rollout.
//!
//! Publishing is queued: a step hands its events over and moves on, so an event's round trip is
//! never on the path from a commit to the next apply (at cold start every promotion publishes one).
//! Each shard has one worker, so a promotion's events still reach the API in the order it produced
//! them.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;
use tollgate_engine::EngineEvent;
use tracing::{info, warn};

use super::resources::{GITPROMOTION_GROUP, GITPROMOTION_KIND, GITPROMOTION_VERSION};

/// kube's `Recorder` keeps a six-minute cache of sent events (to count repeats as a series) and
/// scans all of it, under a write lock, on every publish: with thousands of promotions that is
/// quadratic. A promotion always goes to the same one of these recorders, so series still form,
/// while each cache (and lock) holds a fraction of the events.
const RECORDER_SHARDS: usize = 64;

/// Events waiting per shard. A burst beyond this (the API server unreachable while thousands of
/// promotions step) drops events with a warning rather than holding memory or the rollout.
const QUEUE_PER_SHARD: usize = 256;

struct Queued {
    promotion: String,
    uid: Option<String>,
    event: EngineEvent,
}

#[derive(Clone)]
pub struct EventPublisher {
    queues: Vec<mpsc::Sender<Queued>>,
}

impl EventPublisher {
    /// Starts one worker task per shard (none in dry-run); they stop when the publisher is dropped.
    pub fn new(client: Client, instance: Option<String>, dry_run: bool) -> Self {
        let reporter = Reporter {
            controller: "tollgate".into(),
            instance,
        };
        let shards = if dry_run { 0 } else { RECORDER_SHARDS };
        let queues = (0..shards)
            .map(|_| {
                let (queue, received) = mpsc::channel(QUEUE_PER_SHARD);
                let recorder = Recorder::new(client.clone(), reporter.clone());
                tokio::spawn(send_queued(recorder, received));
                queue
            })
            .collect();
        EventPublisher { queues }
    }

    /// Logs the event and queues it for the API server.
    pub fn publish(&self, promotion: &str, uid: Option<&str>, event: &EngineEvent) {
        info!(promotion, reason = event.reason, note = %event.note, "event");
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
        if let Err(error) = queue.try_send(queued) {
            let why = match error {
                mpsc::error::TrySendError::Full(_) => "the event queue is full",
                mpsc::error::TrySendError::Closed(_) => "the event publisher stopped",
            };
            warn!(promotion, reason = event.reason, why, "event dropped");
        }
    }
}

async fn send_queued(recorder: Recorder, mut received: mpsc::Receiver<Queued>) {
    while let Some(Queued {
        promotion,
        uid,
        event,
    }) = received.recv().await
    {
        let reference = ObjectReference {
            api_version: Some(format!("{GITPROMOTION_GROUP}/{GITPROMOTION_VERSION}")),
            kind: Some(GITPROMOTION_KIND.into()),
            name: Some(promotion.clone()),
            uid,
            ..ObjectReference::default()
        };
        let kube_event = Event {
            type_: match event.event_type {
                tollgate_engine::EventType::Normal => EventType::Normal,
                tollgate_engine::EventType::Warning => EventType::Warning,
            },
            reason: event.reason.to_string(),
            note: Some(event.note),
            action: "Rollout".into(),
            secondary: None,
        };
        if let Err(error) = recorder.publish(&kube_event, &reference).await {
            warn!(promotion, %error, "could not publish event");
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
    use super::shard_of;

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

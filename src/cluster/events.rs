//! Kubernetes Events about a promotion, attached to its GitPromotion object. Best effort: a lost
//! event is logged, never retried at the expense of the rollout.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tollgate_engine::EngineEvent;
use tracing::{info, warn};

use super::resources::{GITPROMOTION_GROUP, GITPROMOTION_KIND, GITPROMOTION_VERSION};

/// kube's `Recorder` keeps a six-minute cache of sent events (to count repeats as a series) and
/// scans all of it, under a write lock, on every publish: with thousands of promotions that is
/// quadratic. A promotion always goes to the same one of these recorders, so series still form,
/// while each cache (and lock) holds a fraction of the events.
const RECORDER_SHARDS: usize = 64;

#[derive(Clone)]
pub struct EventPublisher {
    recorders: Vec<Recorder>,
}

impl EventPublisher {
    pub fn new(client: Client, instance: Option<String>, dry_run: bool) -> Self {
        let reporter = Reporter {
            controller: "tollgate".into(),
            instance,
        };
        let shards = if dry_run { 0 } else { RECORDER_SHARDS };
        EventPublisher {
            recorders: (0..shards)
                .map(|_| Recorder::new(client.clone(), reporter.clone()))
                .collect(),
        }
    }

    pub async fn publish(&self, promotion: &str, uid: Option<&str>, event: &EngineEvent) {
        info!(promotion, reason = event.reason, note = %event.note, "event");
        let Some(recorder) =
            shard_of(promotion, self.recorders.len()).and_then(|shard| self.recorders.get(shard))
        else {
            return;
        };
        let reference = ObjectReference {
            api_version: Some(format!("{GITPROMOTION_GROUP}/{GITPROMOTION_VERSION}")),
            kind: Some(GITPROMOTION_KIND.into()),
            name: Some(promotion.into()),
            uid: uid.map(str::to_string),
            ..ObjectReference::default()
        };
        let kube_event = Event {
            type_: match event.event_type {
                tollgate_engine::EventType::Normal => EventType::Normal,
                tollgate_engine::EventType::Warning => EventType::Warning,
            },
            reason: event.reason.to_string(),
            note: Some(event.note.clone()),
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

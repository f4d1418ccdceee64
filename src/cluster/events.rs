//! Kubernetes Events about a promotion, attached to its GitPromotion object. Best effort: a lost
//! event is logged, never retried at the expense of the rollout.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tollgate_engine::EngineEvent;
use tracing::{info, warn};

use super::resources::{GITPROMOTION_GROUP, GITPROMOTION_KIND, GITPROMOTION_VERSION};

#[derive(Clone)]
pub struct EventPublisher {
    recorder: Option<Recorder>,
}

impl EventPublisher {
    pub fn new(client: Client, instance: Option<String>, dry_run: bool) -> Self {
        let reporter = Reporter {
            controller: "tollgate".into(),
            instance,
        };
        EventPublisher {
            recorder: (!dry_run).then(|| Recorder::new(client, reporter)),
        }
    }

    pub async fn publish(&self, promotion: &str, uid: Option<&str>, event: &EngineEvent) {
        info!(promotion, reason = event.reason, note = %event.note, "event");
        let Some(recorder) = &self.recorder else {
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

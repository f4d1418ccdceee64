//! The engine's output: what to do, what to persist, what to tell, when to come back.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::status::PromotionStatus;

#[derive(Clone, Debug, PartialEq)]
pub struct StepOutput {
    /// To be executed in order. Only if all succeed may `status` be persisted and `events` emitted.
    pub actions: Vec<Action>,
    pub status: PromotionStatus,
    pub events: Vec<EngineEvent>,
    /// The next instant at which a time-based condition changes; `None` = only input changes matter.
    pub wake_at: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Server-side apply (field manager `tollgate`) of a whole ClusterProfile object.
    ApplyProfile {
        name: String,
        object: Value,
    },
    DeleteProfile {
        name: String,
    },
}

impl Action {
    pub fn profile_name(&self) -> &str {
        match self {
            Action::ApplyProfile { name, .. } | Action::DeleteProfile { name } => name,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// A Kubernetes event about the promotion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineEvent {
    pub event_type: EventType,
    pub reason: &'static str,
    pub note: String,
}

impl EngineEvent {
    pub fn normal(reason: &'static str, note: String) -> Self {
        EngineEvent {
            event_type: EventType::Normal,
            reason,
            note,
        }
    }
    pub fn warning(reason: &'static str, note: String) -> Self {
        EngineEvent {
            event_type: EventType::Warning,
            reason,
            note,
        }
    }
}

//! A GitPromotion as every view reads it: the one status parser (the CLI's tables, the live view,
//! `timeline`, `plan`'s targets, `history`, `approve`, `retry`, the web view, and the controller's
//! status cache).

use kube::api::DynamicObject;
use serde::Deserialize;
use serde_json::Value;
use tollgate_engine::PromotionStatus;

/// A GitPromotion as the views show it: its name and the engine's typed status.
#[derive(Debug, PartialEq)]
pub struct Shown {
    pub name: String,
    pub status: Result<Option<PromotionStatus>, String>,
}

/// The engine's typed status of a GitPromotion's `status` member: `None` when it has none yet
/// (absent or null).
pub fn status_of(status: Option<&Value>) -> Result<Option<PromotionStatus>, serde_json::Error> {
    match status {
        None | Some(Value::Null) => Ok(None),
        Some(value) => PromotionStatus::deserialize(value).map(Some),
    }
}

impl Shown {
    pub fn of(object: &DynamicObject) -> Self {
        let status = status_of(object.data.get("status"))
            .map_err(|error| format!("unreadable status: {error}"));
        Shown {
            name: object.metadata.name.clone().unwrap_or_default(),
            status,
        }
    }
}

//! A GitPromotion as every view reads it: the one status parser (the CLI's tables, the live view,
//! `timeline`, `plan`'s targets and the web view).

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

impl Shown {
    pub fn of(object: &DynamicObject) -> Self {
        let status = match object.data.get("status") {
            None | Some(Value::Null) => Ok(None),
            Some(value) => PromotionStatus::deserialize(value)
                .map(Some)
                .map_err(|error| format!("unreadable status: {error}")),
        };
        Shown {
            name: object.metadata.name.clone().unwrap_or_default(),
            status,
        }
    }
}

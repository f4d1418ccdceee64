//! The read-only JSON status API: what `tollgate status` shows, for dashboards and scripts.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tollgate_engine::PromotionStatus;

use super::{AppState, StatusSource};
use crate::cluster::statuses::StatusCache;

/// The server's view of the controller's [`StatusCache`]: every promotion with a status.
pub fn status_source(cache: Arc<StatusCache>) -> StatusSource {
    Arc::new(move |only: Option<&str>| {
        let names = match only {
            Some(name) => vec![name.to_string()],
            None => cache.names(),
        };
        names
            .into_iter()
            .filter_map(|name| {
                let status = cache.get(&name)?.status?;
                Some((name, Arc::unwrap_or_clone(status)))
            })
            .collect()
    })
}

/// `GET /api/v1/promotions`: one summary per promotion, sorted by name.
pub(super) async fn list(State(app): State<AppState>) -> Json<Vec<Value>> {
    let mut statuses = (app.state.statuses)(None);
    statuses.sort_by(|a, b| a.0.cmp(&b.0));
    Json(
        statuses
            .iter()
            .map(|(name, status)| summary(name, status))
            .collect(),
    )
}

/// `GET /api/v1/promotions/{name}`: the full status, 404 when there is no such promotion.
pub(super) async fn get(State(app): State<AppState>, Path(name): Path<String>) -> Response {
    let statuses = (app.state.statuses)(Some(&name));
    match statuses.into_iter().find(|(known, _)| *known == name) {
        Some((_, status)) => Json(status).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({ "error": "promotion not found", "name": name })),
        )
            .into_response(),
    }
}

fn summary(name: &str, status: &PromotionStatus) -> Value {
    json!({
        "name": name,
        "phase": status.phase.as_str(),
        "currentStage": status.current_stage_name,
        "snapshotIndex": status.snapshot_index,
        "message": status.message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::statuses::PersistedState;
    use std::collections::BTreeMap;

    fn persisted(status: Option<PromotionStatus>) -> PersistedState {
        PersistedState {
            resource_version: Some("7".to_string()),
            uid: None,
            annotations: BTreeMap::new(),
            status: status.map(Arc::new),
        }
    }

    #[test]
    fn status_source_lists_promotions_that_have_a_status() {
        let status: PromotionStatus = serde_json::from_value(json!({
            "hashScheme": 1,
            "phase": "Completed",
            "currentStageName": "prod",
            "stages": [],
        }))
        .expect("status");
        let cache = Arc::new(StatusCache::default());
        cache.record_own("web", persisted(Some(status.clone())));
        cache.record_own("fresh", persisted(None));
        let source = status_source(cache.clone());
        let listed = source(None);
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].0, "web");
        assert_eq!(listed[0].1, status);
        // One promotion, named: only it is read back; an unknown name reads nothing.
        assert_eq!(source(Some("web")), listed);
        assert!(source(Some("fresh")).is_empty());
        assert!(source(Some("unknown")).is_empty());
        // The source reads the cache live, not a copy taken when it was built.
        cache.forget_own("web");
        assert!(source(None).is_empty());
    }

    #[test]
    fn summary_picks_the_status_fields_and_nulls_missing_ones() {
        let status: PromotionStatus = serde_json::from_value(json!({
            "hashScheme": 1,
            "phase": "Waiting",
            "currentStageName": "prod",
            "snapshotIndex": 3,
            "stages": [],
        }))
        .expect("status");
        assert_eq!(
            summary("web", &status),
            json!({
                "name": "web",
                "phase": "Waiting",
                "currentStage": "prod",
                "snapshotIndex": 3,
                "message": null,
            })
        );
    }
}

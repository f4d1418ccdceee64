//! core/v1 Events served from the events.k8s.io/v1 storage, as the real server serves one storage
//! under both APIs: `kubectl get events` lists what tollgate writes through events.k8s.io/v1.
//! Objects are stored in the events.k8s.io/v1 shape and converted at the core/v1 edge, with the
//! field mapping of the real conversion (note ↔ message, regarding ↔ involvedObject,
//! reportingController ↔ reportingComponent, deprecated* ↔ source/firstTimestamp/lastTimestamp/count).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::parse_object_body;
use super::table;
use crate::api_error::ApiError;
use crate::patch;
use crate::registry::{Registry, ResourceType};
use crate::request::{
    Reply, ResourceRequest, field_manager, list_options, parse_body, patch_kind, watch, watch_query,
};
use crate::state::{ApiState, PatchKind, Target};

/// The type core/v1 Events are stored as, when `resource` is core/v1 Events and events.k8s.io/v1
/// is served (otherwise core/v1 Events are a type of their own).
pub fn storage(resource: &ResourceType, registry: &Registry) -> Option<ResourceType> {
    if !(resource.group.is_empty() && resource.plural == "events") {
        return None;
    }
    registry.find("events.k8s.io", "v1", "events").cloned()
}

/// A core/v1 Events request, carried out on the events.k8s.io/v1 storage.
pub(crate) fn request(
    state: &mut ApiState,
    request: &ResourceRequest<'_>,
    storage: &ResourceType,
    namespace: &str,
) -> Result<Reply, ApiError> {
    let target = Target {
        resource: storage,
        namespace,
        status: false,
    };
    let manager = field_manager(request);
    let name = || {
        request.path.name.clone().ok_or_else(|| {
            ApiError::BadRequest(format!("{} needs a name in the path", request.verb))
        })
    };
    let wants_table = table::wants_table(request.accept);
    match request.verb {
        "get" => {
            let object = to_core(&*state.get(target, &name()?)?);
            if wants_table {
                let metadata = json!({"resourceVersion": object["metadata"]["resourceVersion"]});
                return Ok(Reply::Json(200, table::event_table(&[object], &metadata)));
            }
            Ok(Reply::Json(200, object))
        }
        "list" => {
            let query = storage_query(request.query.clone());
            let list = state.list(target, &list_options(&query, storage)?)?;
            let items: Vec<Value> = list.objects().iter().map(to_core).collect();
            if wants_table {
                return Ok(Reply::Json(200, table::event_table(&items, &list.metadata)));
            }
            let list = json!({"kind": "EventList", "apiVersion": "v1", "metadata": list.metadata, "items": items});
            Ok(Reply::Json(200, list))
        }
        "watch" => {
            let query = storage_query(watch_query(request));
            let namespace = request.path.namespace.clone();
            watch::open(state, storage, namespace, &query, Some(to_core)).map(Reply::Watch)
        }
        "create" => {
            let body = to_events(&parse_object_body(&request.body, request.content_type)?);
            let created = state.create(target, body, &manager)?;
            Ok(Reply::Json(201, to_core(&created)))
        }
        "update" => {
            let body = to_events(&parse_object_body(&request.body, request.content_type)?);
            let replaced = state.replace(target, &name()?, body, &manager)?;
            Ok(Reply::Json(200, to_core(&replaced)))
        }
        "patch" => patch_event(state, target, request, name()?, &manager),
        "delete" => {
            let deleted = state.delete(target, &name()?, &manager)?;
            Ok(Reply::Json(200, to_core(&deleted)))
        }
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// A merge or JSON patch of a core/v1 Event, applied to its core/v1 shape (as a client wrote it).
fn patch_event(
    state: &mut ApiState,
    target: Target<'_>,
    request: &ResourceRequest<'_>,
    name: String,
    manager: &str,
) -> Result<Reply, ApiError> {
    let kind = patch_kind(request)?;
    let body = parse_body(&request.body, false)?;
    let mut patched = to_core(&*state.get(target, &name)?);
    match kind {
        PatchKind::Merge => patch::merge_patch(&mut patched, &body),
        PatchKind::Json => {
            patch::json_patch(&mut patched, &body).map_err(|e| ApiError::Invalid {
                qualified_plural: "events".into(),
                name: name.clone(),
                detail: e.to_string(),
            })?
        }
        PatchKind::Apply { .. } => {
            return Err(ApiError::BadRequest(
                "server-side apply of core/v1 Events is not supported by the tollgate emulator; apply events.k8s.io/v1 Events".into(),
            ));
        }
    }
    let replaced = state.replace(target, &name, to_events(&patched), manager)?;
    Ok(Reply::Json(200, to_core(&replaced)))
}

/// A core/v1 query with its field selector's names those of the events.k8s.io/v1 storage, as the
/// real server converts them: `involvedObject.name=x` selects what `regarding.name=x` does.
fn storage_query(mut query: HashMap<String, String>) -> HashMap<String, String> {
    if let Some(text) = query.get_mut("fieldSelector") {
        *text = text
            .split(',')
            .map(|term| {
                let (field, rest) = term.split_at(term.find(['=', '!']).unwrap_or(term.len()));
                format!("{}{rest}", storage_field(field.trim()))
            })
            .collect::<Vec<_>>()
            .join(",");
    }
    query
}

fn storage_field(core: &str) -> String {
    match core.strip_prefix("involvedObject.") {
        Some(rest) => format!("regarding.{rest}"),
        None if core == "reportingComponent" || core == "source" => "reportingController".into(),
        None => core.to_string(),
    }
}

/// events.k8s.io/v1 field → core/v1 field, for fields that only change name.
const RENAMED: &[(&str, &str)] = &[
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("related", "related"),
    ("reason", "reason"),
    ("type", "type"),
    ("action", "action"),
    ("eventTime", "eventTime"),
    ("series", "series"),
    ("reportingController", "reportingComponent"),
    ("reportingInstance", "reportingInstance"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// What core/v1 readers see for fields events.k8s.io writers leave out: the source is the
/// reporting controller, the count the series' count.
fn derived_source(events: &Value) -> Option<Value> {
    events["reportingController"]
        .as_str()
        .map(|controller| json!({"component": controller}))
}

fn derived_count(events: &Value) -> Option<Value> {
    events["series"].get("count").cloned()
}

/// The core/v1 view of a stored events.k8s.io/v1 Event.
pub fn to_core(events: &Value) -> Value {
    let mut core = Map::new();
    core.insert("apiVersion".into(), json!("v1"));
    core.insert("kind".into(), json!("Event"));
    core.insert("metadata".into(), events["metadata"].clone());
    for (from, to) in RENAMED {
        if let Some(value) = events.get(*from) {
            core.insert((*to).into(), value.clone());
        }
    }
    if !core.contains_key("source")
        && let Some(source) = derived_source(events)
    {
        core.insert("source".into(), source);
    }
    if !core.contains_key("count")
        && let Some(count) = derived_count(events)
    {
        core.insert("count".into(), count);
    }
    Value::Object(core)
}

/// The events.k8s.io/v1 object to store for a core/v1 Event body. Values a core reader only
/// sees because [`to_core`] derived them are not stored, so a read-modify-write through core/v1
/// does not freeze them (a later series update would otherwise leave `count` behind).
pub fn to_events(core: &Value) -> Value {
    let mut events = Map::new();
    events.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    events.insert("kind".into(), json!("Event"));
    events.insert("metadata".into(), core["metadata"].clone());
    for (to, from) in RENAMED {
        if let Some(value) = core.get(*from) {
            events.insert((*to).into(), value.clone());
        }
    }
    if !events.contains_key("reportingController")
        && let Some(component) = core["source"]["component"].as_str()
    {
        events.insert("reportingController".into(), json!(component));
    }
    let stored = Value::Object(events.clone());
    if events.get("deprecatedSource") == derived_source(&stored).as_ref() {
        events.remove("deprecatedSource");
    }
    if events.get("deprecatedCount") == derived_count(&stored).as_ref() {
        events.remove("deprecatedCount");
    }
    Value::Object(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tollgate_event() -> Value {
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "web.1", "namespace": "default", "resourceVersion": "7"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "type": "Normal", "reason": "StageProvisioned",
            "note": "stage dev provisioned", "action": "Rollout",
            "regarding": {"apiVersion": "tollgate.dev/v1alpha1", "kind": "GitPromotion", "name": "web"},
            "reportingController": "tollgate", "reportingInstance": "tollgate-0",
            "series": {"count": 3, "lastObservedTime": "2026-01-01T00:05:00.000000Z"}})
    }

    #[test]
    fn core_readers_see_message_involved_object_source_and_count() {
        let core = to_core(&tollgate_event());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["message"], "stage dev provisioned");
        assert_eq!(core["involvedObject"]["name"], "web");
        assert_eq!(core["source"], json!({"component": "tollgate"}));
        assert_eq!(core["reportingComponent"], "tollgate");
        assert_eq!(core["count"], 3);
        assert_eq!(core["metadata"]["resourceVersion"], "7");
        assert!(core.get("note").is_none());
    }

    #[test]
    fn a_core_round_trip_stores_what_was_stored() {
        let stored = tollgate_event();
        assert_eq!(to_events(&to_core(&stored)), stored);
    }

    #[test]
    fn core_writers_fields_are_kept() {
        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
            "message": "m", "involvedObject": {"kind": "Pod", "name": "p"},
            "source": {"component": "kubelet", "host": "node-1"}, "count": 2,
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:01:00Z"});
        let events = to_events(&core);
        assert_eq!(events["note"], "m");
        assert_eq!(events["regarding"]["name"], "p");
        assert_eq!(events["reportingController"], "kubelet");
        assert_eq!(events["deprecatedSource"]["host"], "node-1");
        assert_eq!(events["deprecatedCount"], 2);
        assert_eq!(to_core(&events)["lastTimestamp"], "2026-01-01T00:01:00Z");
    }
}

//! A request on a resource, below the HTTP front (`api`) and kubectl fidelity (`kubectl`), which
//! both serve them: what the request is, the reply, and the parsing of its body and query.

pub mod route;
pub(crate) mod watch;

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use serde_json::Value;

use crate::api_error::ApiError;
use crate::registry::ResourceType;
use crate::selector::{FieldSelector, LabelSelector, selectable_fields};
use crate::state::{ListOptions, ObjectList, PatchKind};
use route::ResourcePath;

/// A request on a resource path, as the HTTP front parsed it.
pub(crate) struct ResourceRequest<'a> {
    pub(crate) path: ResourcePath,
    pub(crate) verb: &'static str,
    pub(crate) query: HashMap<String, String>,
    pub(crate) accept: &'a str,
    pub(crate) content_type: &'a str,
    pub(crate) user_agent: &'a str,
    pub(crate) body: Bytes,
}

/// The answer to a resource request, serialised by the HTTP front.
pub(crate) enum Reply {
    Json(u16, Value),
    /// A stored version, serialised outside the state lock without being copied.
    Object(u16, Arc<Value>),
    /// A stored version's JSON, serialised once at commit.
    Stored(u16, Bytes),
    List(ObjectList),
    Watch(watch::WatchStream),
}

pub(crate) fn parse_body(body: &Bytes, allow_yaml: bool) -> Result<Value, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => Ok(value),
        Err(json_error) if allow_yaml => {
            let text = std::str::from_utf8(body)
                .map_err(|e| ApiError::BadRequest(format!("body is not UTF-8: {e}")))?;
            // YAML 1.2 booleans only, as Kubernetes reads YAML: `name: y` is a string.
            let options = serde_saphyr::options! { strict_booleans: true };
            serde_saphyr::from_str_with_options::<Value>(text, options).map_err(|e| {
                ApiError::BadRequest(format!("error decoding YAML: {e} (as JSON: {json_error})"))
            })
        }
        Err(error) => Err(ApiError::BadRequest(format!(
            "error decoding JSON: {error}"
        ))),
    }
}

/// The list options of a request on `resource`'s objects.
pub(crate) fn list_options(
    query: &HashMap<String, String>,
    resource: &ResourceType,
) -> Result<ListOptions, ApiError> {
    let labels = LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let fields = field_selector(query, resource)?;
    let limit = match query.get("limit") {
        Some(l) => Some(
            l.parse::<usize>()
                .map_err(|_| ApiError::BadRequest(format!("invalid limit {l:?}")))?,
        ),
        None => None,
    }
    .filter(|l| *l > 0);
    let continue_token = query.get("continue").filter(|c| !c.is_empty()).cloned();
    Ok(ListOptions {
        labels,
        fields,
        limit,
        continue_token,
    })
}

/// The request's field selector, on the fields `resource`'s kind can be selected by.
pub(crate) fn field_selector(
    query: &HashMap<String, String>,
    resource: &ResourceType,
) -> Result<FieldSelector, ApiError> {
    let text = query.get("fieldSelector").map_or("", String::as_str);
    FieldSelector::parse(text, selectable_fields(&resource.kind))
        .map_err(|e| ApiError::BadRequest(e.to_string()))
}

/// The field manager of a write: the `fieldManager` parameter, or like the real server the
/// client's user agent up to the first `/`.
pub(crate) fn field_manager(request: &ResourceRequest<'_>) -> String {
    match request.query.get("fieldManager") {
        Some(manager) if !manager.is_empty() => manager.clone(),
        _ => request
            .user_agent
            .split('/')
            .next()
            .filter(|s| !s.is_empty())
            .unwrap_or("unknown")
            .to_string(),
    }
}

/// The query of a watch; watching one object by path is a watch with a name field selector.
pub(crate) fn watch_query(request: &ResourceRequest<'_>) -> HashMap<String, String> {
    let mut query = request.query.clone();
    if let Some(name) = &request.path.name {
        let by_name = format!("metadata.name={name}");
        let combined = match query.remove("fieldSelector").filter(|f| !f.is_empty()) {
            Some(existing) => format!("{existing},{by_name}"),
            None => by_name,
        };
        query.insert("fieldSelector".into(), combined);
    }
    query
}

/// The PATCH kind a Content-Type names.
pub(crate) fn patch_kind(request: &ResourceRequest<'_>) -> Result<PatchKind, ApiError> {
    let media_type = request
        .content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim();
    match media_type {
        "application/apply-patch+yaml" => {
            if !request.query.contains_key("fieldManager") {
                return Err(ApiError::BadRequest(
                    "PATCH request failed: fieldManager is required for apply requests".into(),
                ));
            }
            Ok(PatchKind::Apply {
                force: request.query.get("force").is_some_and(|f| f == "true"),
            })
        }
        "application/json-patch+json" => Ok(PatchKind::Json),
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
            Ok(PatchKind::Merge)
        }
        other => Err(ApiError::BadRequest(format!(
            "the body of the request was in an unknown format: {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_bodies_may_be_yaml() {
        let yaml = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: y\nspec:\n  tier: 5\n";
        let value = parse_body(&Bytes::from(yaml), true).unwrap();
        assert_eq!(value["metadata"]["name"], "y", "{value}");
        assert_eq!(value["spec"]["tier"], 5);
        assert!(parse_body(&Bytes::from(yaml), false).is_err());
    }
}

//! The HTTP front: one handler that parses the path, applies faults, counts the request and
//! dispatches to discovery, reads, watches or writes.

pub mod discovery;
pub mod route;
pub(crate) mod watch;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::Response;
use serde_json::Value;

use crate::api_error::ApiError;
use crate::faults::{FaultDecision, InflightSlot, RequestClass};
use crate::kubectl;
use crate::registry::ResourceType;
use crate::schema_validation::{self, FieldValidation};
use crate::selector::{FieldSelector, LabelSelector, selectable_fields};
use crate::shared::{Shared, lock};
use crate::state::{ApiState, ListOptions, ObjectList, PatchKind, Target};
use route::{ResourcePath, Route};

/// The verb under which [`crate::RequestCounts`] counts requests refused by the in-flight limit
/// (instead of their own verb).
pub const THROTTLED: &str = "throttled";

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

fn json_response(code: u16, body: &Value) -> Response {
    bytes_response(code, serde_json::to_vec(body).unwrap_or_default())
}

/// A JSON response from already serialised bytes.
fn bytes_response(code: u16, body: impl Into<Body>) -> Response {
    let mut response = Response::new(body.into());
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Adds the `Retry-After` header of the errors that carry one (429).
fn with_retry_after(mut response: Response, error: &ApiError) -> Response {
    if let Some(seconds) = error.retry_after_seconds() {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

fn error_response(error: &ApiError) -> Response {
    if *error == ApiError::NoSuchPage {
        let mut response = Response::new(Body::from(ApiError::PAGE_NOT_FOUND));
        *response.status_mut() = StatusCode::NOT_FOUND;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        response.headers_mut().insert(
            "x-content-type-options",
            HeaderValue::from_static("nosniff"),
        );
        return response;
    }
    with_retry_after(json_response(error.code(), &error.status_body()), error)
}

/// The Kubernetes verb of a request.
fn verb_of(method: &Method, path: &Route, query: &HashMap<String, String>) -> &'static str {
    let has_name = matches!(path, Route::Resource(ResourcePath { name: Some(_), .. }));
    match *method {
        Method::GET if !matches!(path, Route::Resource(_)) => "get",
        Method::GET if query.get("watch").is_some_and(|w| w == "true" || w == "1") => "watch",
        Method::GET if has_name => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "other",
    }
}

/// A request let through the in-flight limit and the injected faults.
struct Admitted<'a> {
    slot: InflightSlot<'a>,
    latency: Duration,
    /// The injected fault's answer, sent after the latency.
    injected: Option<Response>,
}

/// Counts the request, then lets it through or answers it: 429 over the in-flight limit (at once,
/// as the real server does), or the injected fault after the injected latency.
fn admit<'a>(shared: &'a Shared, verb: &str, resource: &str) -> Result<Admitted<'a>, ApiError> {
    let mut state = lock(&shared.state);
    let limits = state.faults.max_inflight;
    let Some(slot) = shared.inflight.try_acquire(RequestClass::of(verb), limits) else {
        // Counted apart, so `writes()` and friends count only requests that were served.
        state.count_request(THROTTLED, resource);
        let retry_after_seconds = state.faults.retry_after_seconds;
        return Err(ApiError::TooManyRequests {
            retry_after_seconds,
        });
    };
    state.count_request(verb, resource);
    let latency = state.faults.request_latency;
    let injected = match state.faults.decide(verb, resource) {
        FaultDecision::Proceed => None,
        FaultDecision::Fail(code) => Some(injected_response(
            code,
            verb,
            resource,
            state.faults.retry_after_seconds,
        )),
    };
    Ok(Admitted {
        slot,
        latency,
        injected,
    })
}

/// The answer to a request failed by fault injection.
fn injected_response(code: u16, verb: &str, resource: &str, retry_after_seconds: u64) -> Response {
    let error = match code {
        503 => ApiError::Unavailable,
        403 => ApiError::Forbidden {
            verb: verb.to_string(),
            resource: resource.to_string(),
        },
        429 => ApiError::TooManyRequests {
            retry_after_seconds,
        },
        _ => ApiError::Internal(format!("injected fault for {verb} {resource}")),
    };
    // Clients act on the Status body's code, not the HTTP status line: both carry the
    // injected code (a 403 must read as Forbidden, not as a 500).
    let mut body = error.status_body();
    body["code"] = Value::from(code);
    with_retry_after(json_response(code, &body), &error)
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let route = route::parse(uri.path());
    let verb = verb_of(&method, &route, &query);
    let counted_resource = match &route {
        Route::Resource(r) if r.group.is_empty() => r.plural.clone(),
        Route::Resource(r) => format!("{}.{}", r.plural, r.group),
        _ => uri.path().to_string(),
    };
    // Held until the response is built, or dropped with this future if the client goes away.
    let _slot = match admit(&shared, verb, &counted_resource) {
        Ok(Admitted {
            slot,
            latency,
            injected,
        }) => {
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            if let Some(response) = injected {
                return response;
            }
            slot
        }
        Err(refusal) => return error_response(&refusal),
    };
    match route {
        Route::Version => json_response(200, &discovery::version()),
        Route::CoreVersions => {
            json_response(200, &discovery::core_versions(&shared.server_address))
        }
        Route::Groups => json_response(200, &discovery::groups(&lock(&shared.state).registry)),
        Route::Group(group) => match discovery::group(&lock(&shared.state).registry, &group) {
            Some(doc) => json_response(200, &doc),
            None => error_response(&ApiError::NoSuchPage),
        },
        Route::GroupVersion { group, version } => {
            match discovery::resources(&lock(&shared.state).registry, &group, &version) {
                Some(doc) => json_response(200, &doc),
                None => error_response(&ApiError::NoSuchPage),
            }
        }
        Route::Resource(path) => {
            let accept = headers
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let content_type = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let user_agent = headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let request = ResourceRequest {
                path,
                verb,
                query,
                accept,
                content_type,
                user_agent,
                body,
            };
            let (reply, warnings) = resource_request(&shared, request);
            let mut response = match reply {
                Ok(Reply::Json(code, value)) => json_response(code, &value),
                Ok(Reply::Object(code, object)) => json_response(code, &object),
                Ok(Reply::Stored(code, json)) => bytes_response(code, json),
                Ok(Reply::List(list)) => bytes_response(200, list.to_bytes()),
                Ok(Reply::Watch(stream)) => watch::response(stream),
                Err(error) => error_response(&error),
            };
            for warning in warnings {
                if let Ok(value) =
                    HeaderValue::from_str(&schema_validation::warning_header(&warning))
                {
                    response.headers_mut().append(header::WARNING, value);
                }
            }
            response
        }
        Route::OpenApiRoot => json_response(
            200,
            &discovery::openapi_v3_root(&lock(&shared.state).registry),
        ),
        Route::OpenApiGroupVersion { group, version } => {
            match discovery::openapi_v3_group_version(
                &lock(&shared.state).registry,
                &group,
                &version,
            ) {
                Some(doc) => json_response(200, &doc),
                None => error_response(&ApiError::UnknownPath),
            }
        }
        Route::Unknown => error_response(&ApiError::NoSuchPage),
    }
}

pub(crate) struct ResourceRequest<'a> {
    pub(crate) path: ResourcePath,
    pub(crate) verb: &'static str,
    pub(crate) query: HashMap<String, String>,
    pub(crate) accept: &'a str,
    pub(crate) content_type: &'a str,
    pub(crate) user_agent: &'a str,
    pub(crate) body: Bytes,
}

pub(crate) enum Reply {
    Json(u16, Value),
    /// A stored version, serialised outside the state lock without being copied.
    Object(u16, Arc<Value>),
    /// A stored version's JSON, serialised once at commit.
    Stored(u16, Bytes),
    List(ObjectList),
    Watch(watch::WatchStream),
}

/// The object of a create or update body: JSON, YAML where allowed, or kubectl's protobuf.
pub(crate) fn parse_object_body(body: &Bytes, content_type: &str) -> Result<Value, ApiError> {
    let media_type = content_type.split(';').next().unwrap_or_default().trim();
    if media_type == kubectl::PROTOBUF_MEDIA_TYPE {
        return kubectl::decode_protobuf(body);
    }
    parse_body(body, true)
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

/// Serves a resource request with its `fieldValidation` directive in force for the writes it
/// makes; returns the warnings those writes raised, for `Warning` headers. The directive (and the
/// User-Agent the write log records) live in the state only while the lock is held, so writes by
/// the Sveltos stand-in never see them.
fn resource_request(
    shared: &Shared,
    request: ResourceRequest<'_>,
) -> (Result<Reply, ApiError>, Vec<String>) {
    let directive = if matches!(request.verb, "create" | "update" | "patch") {
        match FieldValidation::from_query(request.query.get("fieldValidation").map(String::as_str))
        {
            Ok(directive) => directive,
            Err(error) => return (Err(error), Vec::new()),
        }
    } else {
        // Reads write nothing; the directive only matters to writes.
        FieldValidation::Strict
    };
    let mut state = lock(&shared.state);
    state.schema_admission.begin_request(directive);
    state.request_user_agent = Some(Arc::from(request.user_agent));
    let reply = serve_resource(&mut state, request);
    state.request_user_agent = None;
    let warnings = state.schema_admission.end_request();
    (reply, warnings)
}

/// The answer carrying `object`: the JSON serialised at its commit when it is the stored version
/// (a get, or a write's result), else serialised now (a deleted object).
fn stored_reply(state: &ApiState, target: Target<'_>, code: u16, object: Arc<Value>) -> Reply {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match state.store.get_stored(&target.key(name)) {
        Some(stored)
            if stored
                .parsed()
                .is_some_and(|kept| Arc::ptr_eq(&kept, &object)) =>
        {
            Reply::Stored(code, stored.json.to_bytes())
        }
        _ => Reply::Object(code, object),
    }
}

fn serve_resource(state: &mut ApiState, request: ResourceRequest<'_>) -> Result<Reply, ApiError> {
    if !state
        .registry
        .serves(&request.path.group, &request.path.version)
    {
        return Err(ApiError::NoSuchPage);
    }
    let resource = state
        .registry
        .find(
            &request.path.group,
            &request.path.version,
            &request.path.plural,
        )
        .cloned()
        .ok_or(ApiError::UnknownPath)?;
    if request.path.namespace.is_some() && !resource.namespaced {
        return Err(ApiError::UnknownPath);
    }
    if request.path.status && !resource.status_subresource {
        return Err(ApiError::UnknownPath);
    }
    let needs_namespace = request.verb == "create" || request.path.name.is_some();
    if resource.namespaced && request.path.namespace.is_none() && needs_namespace {
        return Err(ApiError::UnknownPath);
    }
    if request.query.contains_key("dryRun") && !matches!(request.verb, "get" | "list" | "watch") {
        // Refuse rather than silently performing the write.
        return Err(ApiError::BadRequest(
            "dryRun is not supported by the tollgate emulator".into(),
        ));
    }
    let namespace = request.path.namespace.clone().unwrap_or_default();
    if let Some(reply) = kubectl::serve_core_events(state, &request, &resource, &namespace) {
        return reply;
    }
    let target = Target {
        resource: &resource,
        namespace: &namespace,
        status: request.path.status,
    };
    let named = |verb: &str| {
        request
            .path
            .name
            .clone()
            .ok_or_else(|| ApiError::BadRequest(format!("{verb} needs a name in the path")))
    };
    let manager = field_manager(&request);
    match request.verb {
        "get" => {
            let object = state.get(target, &named("get")?)?;
            let table = kubectl::table_for(request.accept, &resource, || {
                let metadata =
                    serde_json::json!({"resourceVersion": object["metadata"]["resourceVersion"]});
                (vec![Value::clone(&object)], metadata)
            });
            if let Some(table) = table {
                return Ok(Reply::Json(200, table));
            }
            Ok(stored_reply(state, target, 200, object))
        }
        "list" => {
            let list = state.list(target, &list_options(&request.query, &resource)?)?;
            let table = kubectl::table_for(request.accept, &resource, || {
                (list.objects(), list.metadata.clone())
            });
            if let Some(table) = table {
                return Ok(Reply::Json(200, table));
            }
            Ok(Reply::List(list))
        }
        "watch" => {
            let stream = watch::open(
                state,
                &resource,
                request.path.namespace.clone(),
                &watch_query(&request),
                None,
            )?;
            Ok(Reply::Watch(stream))
        }
        "create" => {
            let body = parse_object_body(&request.body, request.content_type)?;
            let object = state.create(target, body, &manager)?;
            Ok(stored_reply(state, target, 201, object))
        }
        "update" => {
            let body = parse_object_body(&request.body, request.content_type)?;
            let object = state.replace(target, &named("update")?, body, &manager)?;
            Ok(stored_reply(state, target, 200, object))
        }
        "patch" => {
            let name = named("patch")?;
            let kind = patch_kind(&request)?;
            let body = parse_body(&request.body, matches!(kind, PatchKind::Apply { .. }))?;
            let created_before = state
                .store
                .get(&crate::store::ObjectKey {
                    resource: resource.qualified_plural(),
                    namespace: if resource.namespaced {
                        namespace.clone()
                    } else {
                        String::new()
                    },
                    name: name.clone(),
                })
                .is_none();
            let object = state.patch(target, &name, kind, body, &manager)?;
            let code = if created_before { 201 } else { 200 };
            Ok(stored_reply(state, target, code, object))
        }
        "delete" => {
            let object = state.delete(target, &named("delete")?, &manager)?;
            Ok(stored_reply(state, target, 200, object))
        }
        _ => Err(ApiError::MethodNotAllowed),
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

//! The HTTP front: one handler that parses the path, applies faults, counts the request and
//! dispatches to discovery, reads, watches or writes.

pub mod discovery;
/// Path parsing, kept public here where it was.
pub use crate::request::route;

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
use crate::kubectl::{self, parse_object_body};
use crate::registry::ResourceType;
use crate::request::{
    Reply, ResourceRequest, field_manager, list_options, parse_body, patch_kind, watch, watch_query,
};
use crate::schema_validation::{self, FieldValidation};
use crate::shared::{Shared, lock};
use crate::state::{ApiState, PatchKind, Target};
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
        Route::Resource(path) => resource_response(&shared, path, verb, query, &headers, body),
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

/// The answer to a request for a resource, with a `Warning` header per warning its writes raised.
fn resource_response(
    shared: &Shared,
    path: ResourcePath,
    verb: &'static str,
    query: HashMap<String, String>,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
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
    let (reply, warnings) = resource_request(shared, request);
    let mut response = match reply {
        Ok(Reply::Json(code, value)) => json_response(code, &value),
        Ok(Reply::Object(code, object)) => json_response(code, &object),
        Ok(Reply::Stored(code, json)) => bytes_response(code, json),
        Ok(Reply::List(list)) => bytes_response(200, list.to_bytes()),
        Ok(Reply::Watch(stream)) => watch::response(stream),
        Err(error) => error_response(&error),
    };
    for warning in warnings {
        if let Ok(value) = HeaderValue::from_str(&schema_validation::warning_header(&warning)) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
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
    let resource = served_resource(state, &request)?;
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
        "get" => serve_get(state, target, &request, &named("get")?),
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
        "patch" => serve_patch(state, target, &request, named("patch")?, &manager),
        "delete" => {
            let object = state.delete(target, &named("delete")?, &manager)?;
            Ok(stored_reply(state, target, 200, object))
        }
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// The resource type the request's path names, when this server serves it at that path (a
/// namespace only for namespaced types, `/status` only where the type has it).
fn served_resource(
    state: &ApiState,
    request: &ResourceRequest<'_>,
) -> Result<ResourceType, ApiError> {
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
    Ok(resource)
}

/// A get: the stored object, or the table kubectl asks for.
fn serve_get(
    state: &ApiState,
    target: Target<'_>,
    request: &ResourceRequest<'_>,
    name: &str,
) -> Result<Reply, ApiError> {
    let object = state.get(target, name)?;
    let table = kubectl::table_for(request.accept, target.resource, || {
        let metadata =
            serde_json::json!({"resourceVersion": object["metadata"]["resourceVersion"]});
        (vec![Value::clone(&object)], metadata)
    });
    if let Some(table) = table {
        return Ok(Reply::Json(200, table));
    }
    Ok(stored_reply(state, target, 200, object))
}

/// A patch: 201 when it created the object (a server-side apply of a new one), else 200.
fn serve_patch(
    state: &mut ApiState,
    target: Target<'_>,
    request: &ResourceRequest<'_>,
    name: String,
    manager: &str,
) -> Result<Reply, ApiError> {
    let kind = patch_kind(request)?;
    let body = parse_body(&request.body, matches!(kind, PatchKind::Apply { .. }))?;
    let resource = target.resource;
    let created_before = state
        .store
        .get(&crate::store::ObjectKey {
            resource: resource.qualified_plural(),
            namespace: if resource.namespaced {
                target.namespace.to_string()
            } else {
                String::new()
            },
            name: name.clone(),
        })
        .is_none();
    let object = state.patch(target, &name, kind, body, manager)?;
    let code = if created_before { 201 } else { 200 };
    Ok(stored_reply(state, target, code, object))
}

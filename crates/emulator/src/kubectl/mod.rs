//! kubectl fidelity: what a person's kubectl needs from the emulator beyond the REST subset
//! tollgate itself uses. Behind the emulator's `kubectl` cargo feature (on by default, for
//! pointing kubectl at a demo or a test cluster); without it the API core serves JSON only:
//!
//! - `protobuf`: the protobuf bodies kubectl's typed clients send (`kubectl create namespace`);
//!   without the feature they are refused with 415, naming the feature.
//! - `table`, `json_path`: `meta.k8s.io/v1` Table answers with the CRDs' printer columns
//!   (`kubectl get`); without the feature, lists and objects are answered as JSON, which kubectl
//!   prints with its default columns.
//! - `core_events`: core/v1 Events served from the events.k8s.io/v1 storage, as the real server
//!   does (`kubectl get events` shows what tollgate writes); without the feature, core/v1 Events
//!   are a type of their own.
//!
//! The API core (`crate::api`) calls the functions below, whichever the build.

use serde_json::Value;

use axum::body::Bytes;

use crate::api_error::ApiError;
use crate::registry::ResourceType;
use crate::request::{Reply, ResourceRequest, parse_body};
use crate::state::ApiState;

#[cfg(feature = "kubectl")]
pub mod core_events;
#[cfg(feature = "kubectl")]
pub mod json_path;
#[cfg(feature = "kubectl")]
pub mod protobuf;
#[cfg(feature = "kubectl")]
pub mod table;

/// Media type of protobuf bodies, without parameters.
pub const PROTOBUF_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The object of a create or update body: JSON, YAML where allowed, or kubectl's protobuf.
pub(crate) fn parse_object_body(body: &Bytes, content_type: &str) -> Result<Value, ApiError> {
    let media_type = content_type.split(';').next().unwrap_or_default().trim();
    if media_type == PROTOBUF_MEDIA_TYPE {
        return decode_protobuf(body);
    }
    parse_body(body, true)
}

/// The object of a protobuf request body.
#[cfg(feature = "kubectl")]
pub fn decode_protobuf(body: &[u8]) -> Result<Value, ApiError> {
    protobuf::decode(body).map_err(|error| match error {
        protobuf::ProtobufError::UnsupportedKind { .. } => {
            ApiError::UnsupportedMediaType(error.to_string())
        }
        other => ApiError::BadRequest(other.to_string()),
    })
}

#[cfg(not(feature = "kubectl"))]
pub fn decode_protobuf(_body: &[u8]) -> Result<Value, ApiError> {
    Err(ApiError::UnsupportedMediaType(
        "the tollgate emulator is built without its kubectl feature and does not decode protobuf bodies; send JSON".into(),
    ))
}

/// The Table answer (`kubectl get`) when the `Accept` header asks for one, of the objects and
/// list metadata `answer` gives.
#[cfg(feature = "kubectl")]
pub fn table_for(
    accept: &str,
    resource: &ResourceType,
    answer: impl FnOnce() -> (Vec<Value>, Value),
) -> Option<Value> {
    table::wants_table(accept).then(|| {
        let (objects, list_metadata) = answer();
        table::table(resource, &objects, &list_metadata)
    })
}

#[cfg(not(feature = "kubectl"))]
pub fn table_for(
    _accept: &str,
    _resource: &ResourceType,
    _answer: impl FnOnce() -> (Vec<Value>, Value),
) -> Option<Value> {
    None
}

/// A core/v1 Events request, served from the events.k8s.io/v1 storage when that is served;
/// `None` for other requests.
#[cfg(feature = "kubectl")]
pub(crate) fn serve_core_events(
    state: &mut ApiState,
    request: &ResourceRequest<'_>,
    resource: &ResourceType,
    namespace: &str,
) -> Option<Result<Reply, ApiError>> {
    let storage = core_events::storage(resource, &state.registry)?;
    Some(core_events::request(state, request, &storage, namespace))
}

#[cfg(not(feature = "kubectl"))]
pub(crate) fn serve_core_events(
    _state: &mut ApiState,
    _request: &ResourceRequest<'_>,
    _resource: &ResourceType,
    _namespace: &str,
) -> Option<Result<Reply, ApiError>> {
    None
}

/// Only in builds without the feature (`cargo test -p tollgate-emulator --no-default-features`).
#[cfg(all(test, not(feature = "kubectl")))]
mod without_the_feature {
    use super::*;

    #[test]
    fn protobuf_is_refused_by_name_and_tables_are_not_served() {
        let Err(ApiError::UnsupportedMediaType(message)) = decode_protobuf(b"k8s\0") else {
            panic!("a protobuf body is decoded without the kubectl feature");
        };
        assert!(message.contains("kubectl feature"), "{message}");
        let resource = crate::registry::Registry::builtin().types()[0].clone();
        let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
        let answer = || (Vec::new(), Value::Null);
        assert!(table_for(accept, &resource, answer).is_none());
    }
}

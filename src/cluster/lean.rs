//! Objects as tollgate reads them: metadata without `managedFields`, and `spec` and `status` as
//! plain JSON.
//!
//! kube's `DynamicObject` decodes every field, including `metadata.managedFields` (each entry's
//! `fieldsV1` a whole JSON tree), and its `#[serde(flatten)]` buffers the rest of the object in
//! serde's generic `Content` before building the JSON value. At 10,000 promotions, decoding watch
//! events and write responses that way was about 40 % of the controller's CPU, and a quarter of
//! that was managed fields, which nothing in tollgate reads.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LeanObject {
    #[serde(
        rename = "apiVersion",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, deserialize_with = "lean_metadata")]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

/// The metadata fields tollgate reads; everything else (managedFields, ownerReferences, …) is
/// skipped by the parser without being built.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeanMetadata {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
}

/// Decodes `metadata` keeping only the fields tollgate reads (for `deserialize_with`).
pub(crate) fn lean_metadata<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<ObjectMeta, D::Error> {
    let lean = LeanMetadata::deserialize(deserializer)?;
    Ok(ObjectMeta {
        name: lean.name,
        namespace: lean.namespace,
        uid: lean.uid,
        resource_version: lean.resource_version,
        generation: lean.generation,
        labels: lean.labels,
        annotations: lean.annotations,
        creation_timestamp: lean.creation_timestamp,
        deletion_timestamp: lean.deletion_timestamp,
        finalizers: lean.finalizers,
        ..ObjectMeta::default()
    })
}

/// Implements kube's `Resource` for an object type whose API resource is given at run time
/// (`Api::all_with`), as `DynamicObject` does. The type needs a `metadata: ObjectMeta` field.
macro_rules! runtime_typed_resource {
    ($object:ty) => {
        impl kube::Resource for $object {
            type DynamicType = kube::api::ApiResource;
            type Scope = kube::core::DynamicResourceScope;

            fn group(dt: &kube::api::ApiResource) -> std::borrow::Cow<'_, str> {
                dt.group.as_str().into()
            }

            fn version(dt: &kube::api::ApiResource) -> std::borrow::Cow<'_, str> {
                dt.version.as_str().into()
            }

            fn kind(dt: &kube::api::ApiResource) -> std::borrow::Cow<'_, str> {
                dt.kind.as_str().into()
            }

            fn api_version(dt: &kube::api::ApiResource) -> std::borrow::Cow<'_, str> {
                dt.api_version.as_str().into()
            }

            fn plural(dt: &kube::api::ApiResource) -> std::borrow::Cow<'_, str> {
                dt.plural.as_str().into()
            }

            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }

            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
pub(crate) use runtime_typed_resource;

runtime_typed_resource!(LeanObject);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use kube::ResourceExt;

    use super::*;

    #[test]
    fn reads_what_tollgate_needs_and_skips_managed_fields() {
        let text = json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
            "metadata": {
                "name": "p-dev", "uid": "u1", "resourceVersion": "42", "generation": 3,
                "labels": {"tollgate.dev/promotion": "p"},
                "annotations": {"a": "b"},
                "deletionTimestamp": "2025-10-07T10:00:00Z",
                "finalizers": ["f"],
                "managedFields": [{"manager": "tollgate", "operation": "Apply",
                                   "fieldsV1": {"f:spec": {"f:tier": {}}}}],
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "ou"}]
            },
            "spec": {"tier": 100},
            "status": {"matchingClusters": []}
        })
        .to_string();
        let lean: LeanObject = serde_json::from_str(&text).expect("decodes");
        assert_eq!(lean.metadata.name.as_deref(), Some("p-dev"));
        assert_eq!(lean.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(lean.metadata.generation, Some(3));
        assert_eq!(
            lean.labels()
                .get("tollgate.dev/promotion")
                .map(String::as_str),
            Some("p")
        );
        assert!(lean.metadata.deletion_timestamp.is_some());
        assert!(lean.metadata.managed_fields.is_none());
        assert_eq!(lean.spec, Some(json!({"tier": 100})));
        assert_eq!(lean.status, Some(json!({"matchingClusters": []})));
        assert_eq!(lean.kind, "ClusterProfile");
    }

    #[test]
    fn a_status_write_serialises_only_what_is_set() {
        let object = LeanObject {
            api_version: "tollgate.dev/v1alpha1".into(),
            kind: "GitPromotion".into(),
            metadata: ObjectMeta {
                name: Some("p".into()),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(json!({"phase": "Progressing"})),
        };
        assert_eq!(
            serde_json::to_value(&object).expect("serialises"),
            json!({"apiVersion": "tollgate.dev/v1alpha1", "kind": "GitPromotion",
                   "metadata": {"name": "p", "resourceVersion": "7"},
                   "status": {"phase": "Progressing"}})
        );
    }
}

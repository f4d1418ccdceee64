//! The `GitPromotion` custom resource: tollgate's durable per-promotion state.
//!
//! The spec only records where the promotion comes from (git is the source of truth for the
//! promotion itself); the status is the engine's own type ([`PromotionStatus`]), so the CRD that
//! kube's derive makes from these types has a structural status schema the API server validates
//! what the engine writes against, and the typed status is the one contract between the engine,
//! the CLI, the status API and metrics. The printer columns give `kubectl get gp` a useful view.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tollgate_engine::PromotionStatus;

/// Where the promotion is read from. Written by tollgate; git is the source of truth.
// Each `printcolumn(…)` repeats `type_ = …` and `priority = …`; clippy takes those for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "tollgate.dev",
    version = "v1alpha1",
    kind = "GitPromotion",
    plural = "gitpromotions",
    shortname = "gp",
    category = "tollgate",
    status = "PromotionStatus",
    doc = "GitPromotion holds tollgate's run state for one ClusterPromotion kept in git.",
    label("app.kubernetes.io/name", "tollgate"),
    label("app.kubernetes.io/component", "crd"),
    printcolumn(
        name = "Stage",
        type_ = "string",
        json_path = ".status.currentStageName"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Snapshot",
        type_ = "integer",
        json_path = ".status.snapshotIndex"
    ),
    printcolumn(
        name = "Commit",
        type_ = "string",
        json_path = ".status.snapshotCommit",
        priority = 1
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        json_path = ".status.message",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct GitPromotionSpec {
    /// Repository URL or path, without credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Sub-path of the repository that holds promotions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// File the promotion was last read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// The CRD `tollgate crd` prints and `deploy/crd.yaml` holds.
pub fn git_promotion_crd() -> CustomResourceDefinition {
    GitPromotion::crd()
}

/// [`git_promotion_crd`] as the JSON object a cluster stores (how the embedded management
/// cluster takes the CRDs it serves).
pub fn git_promotion_crd_json() -> serde_json::Value {
    // A k8s-openapi object has string keys only: it always serializes.
    serde_json::to_value(git_promotion_crd()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn crd_json() -> Value {
        serde_json::to_value(git_promotion_crd()).expect("a CRD serializes")
    }

    fn open_api_schema(crd: &Value) -> &Value {
        &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    }

    #[test]
    fn the_crd_names_a_cluster_scoped_type_with_a_status_subresource() {
        let crd = git_promotion_crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("gitpromotions.tollgate.dev")
        );
        let labels = crd.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels
                .get("app.kubernetes.io/component")
                .map(String::as_str),
            Some("crd")
        );
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.short_names, Some(vec!["gp".to_string()]));
        assert_eq!(
            crd.spec.names.categories,
            Some(vec!["tollgate".to_string()])
        );
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        assert!(version.served && version.storage);
        assert!(
            version
                .subresources
                .as_ref()
                .is_some_and(|s| s.status.is_some())
        );
    }

    #[test]
    fn the_status_schema_is_structural_and_derived_from_the_engine_type() {
        let crd = crd_json();
        let status = &open_api_schema(&crd)["properties"]["status"];
        let text = status.to_string();
        assert!(!text.contains("$ref") && !text.contains("x-kubernetes-preserve-unknown-fields"));
        assert!(!text.contains("additionalProperties"), "{status:#}");
        assert_eq!(status["type"], "object");
        for field in [
            "phase",
            "currentStageName",
            "stages",
            "consumedApprovals",
            "snapshotIndex",
        ] {
            assert!(
                status["properties"][field].is_object(),
                "{field}: {status:#}"
            );
        }
        let stage = &status["properties"]["stages"]["items"];
        for field in [
            "awaitingApprovalSince",
            "approver",
            "counts",
            "appliedSpecHash",
        ] {
            assert!(stage["properties"][field].is_object(), "{field}: {stage:#}");
        }
        assert!(
            status["properties"]["phase"]["enum"]
                .as_array()
                .is_some_and(|phases| phases.contains(&json!("RemovalHeld")))
        );
    }

    /// A column whose path names no field shows `<none>` forever in `kubectl get gp`: every
    /// `.status.*` column must name a property of the derived status schema, with its type.
    #[test]
    fn printer_columns_name_fields_of_the_status_schema() {
        let crd = crd_json();
        let status = &open_api_schema(&crd)["properties"]["status"]["properties"];
        let columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let names: Vec<&str> = columns.iter().filter_map(|c| c["name"].as_str()).collect();
        assert_eq!(
            names,
            ["Stage", "Phase", "Snapshot", "Commit", "Message", "Age"]
        );
        for column in &columns {
            let path = column["jsonPath"].as_str().unwrap_or_default();
            let Some(field) = path.strip_prefix(".status.") else {
                assert_eq!(path, ".metadata.creationTimestamp", "{column}");
                continue;
            };
            assert_eq!(
                status[field]["type"], column["type"],
                "column {column} names no status field of that type"
            );
        }
    }

    /// The spec tollgate applies serializes into exactly the fields the schema declares.
    #[test]
    fn the_spec_schema_declares_every_field_the_controller_writes() {
        let crd = crd_json();
        let declared = &open_api_schema(&crd)["properties"]["spec"]["properties"];
        let spec = GitPromotionSpec {
            repository: Some("https://git.example/fleet.git".into()),
            branch: Some("main".into()),
            path: Some("promotions".into()),
            file: Some("promotions/kyverno.yaml".into()),
        };
        let written = serde_json::to_value(GitPromotion::new("kyverno", spec)).expect("serializes");
        assert_eq!(written["apiVersion"], "tollgate.dev/v1alpha1");
        assert_eq!(written["kind"], "GitPromotion");
        assert!(written.get("status").is_none(), "{written}");
        let fields = written["spec"].as_object().cloned().unwrap_or_default();
        assert_eq!(fields.len(), 4, "{written}");
        for (field, value) in &fields {
            assert_eq!(declared[field]["type"], "string", "{field}: {declared:#}");
            assert!(value.is_string(), "{field}");
        }
    }
}

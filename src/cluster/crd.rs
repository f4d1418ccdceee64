//! The `GitPromotion` CustomResourceDefinition: tollgate's durable per-promotion state.
//!
//! The spec only records where the promotion comes from (git is the source of truth for the
//! promotion itself); the status holds the engine's run state and the user-facing status. The
//! status schema is derived from the engine's own type ([`PromotionStatus`]), so the API server
//! validates what the engine writes and the typed status is the one contract between the engine,
//! the CLI, the status API and metrics; the printer columns give `kubectl get gp` a useful view.

use serde_json::{Value, json};
use tollgate_engine::PromotionStatus;

use super::resources::{
    GITPROMOTION_GROUP, GITPROMOTION_KIND, GITPROMOTION_PLURAL, GITPROMOTION_VERSION,
};

pub fn git_promotion_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": format!("{GITPROMOTION_PLURAL}.{GITPROMOTION_GROUP}"),
            "labels": {"app.kubernetes.io/name": "tollgate", "app.kubernetes.io/component": "crd"}
        },
        "spec": {
            "group": GITPROMOTION_GROUP,
            "names": {
                "kind": GITPROMOTION_KIND,
                "listKind": format!("{GITPROMOTION_KIND}List"),
                "plural": GITPROMOTION_PLURAL,
                "singular": "gitpromotion",
                "shortNames": ["gp"],
                "categories": ["tollgate"]
            },
            "scope": "Cluster",
            "versions": [{
                "name": GITPROMOTION_VERSION,
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Stage", "type": "string", "jsonPath": ".status.currentStageName"},
                    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                    {"name": "Snapshot", "type": "integer", "jsonPath": ".status.snapshotIndex"},
                    {"name": "Commit", "type": "string", "jsonPath": ".status.snapshotCommit", "priority": 1},
                    {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "GitPromotion holds tollgate's run state for one ClusterPromotion kept in git.",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": {
                            "type": "object",
                            "description": "Where the promotion is read from. Written by tollgate; git is the source of truth.",
                            "properties": {
                                "repository": {"type": "string", "description": "Repository URL or path, without credentials."},
                                "branch": {"type": "string"},
                                "path": {"type": "string", "description": "Sub-path of the repository that holds promotions."},
                                "file": {"type": "string", "description": "File the promotion was last read from."}
                            }
                        },
                        "status": status_schema()
                    }
                }}
            }]
        }
    })
}

/// The structural OpenAPI v3 schema of [`PromotionStatus`], made the way kube's `CustomResource`
/// derive makes one: subschemas inlined, no `$schema`, nullable options, structural rewrites.
fn status_schema() -> Value {
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .with_transform(schemars::transform::AddNullable::default())
        .with_transform(kube::core::schema::StructuralSchemaRewriter)
        .with_transform(kube::core::schema::OptionalEnum)
        .into_generator();
    let mut schema = serde_json::to_value(generator.into_root_schema_for::<PromotionStatus>())
        .unwrap_or_else(|_| json!({"type": "object"}));
    if let Some(object) = schema.as_object_mut() {
        object.remove("title");
        object.insert(
            "description".to_string(),
            json!("Run state and status, owned by the tollgate engine."),
        );
    }
    schema
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

    use super::*;

    #[test]
    fn crd_parses_into_the_typed_kubernetes_object() {
        let crd: CustomResourceDefinition =
            serde_json::from_value(git_promotion_crd()).expect("valid CRD");
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("gitpromotions.tollgate.dev")
        );
        assert_eq!(crd.spec.scope, "Cluster");
        let version = &crd.spec.versions[0];
        assert!(
            version
                .subresources
                .as_ref()
                .is_some_and(|s| s.status.is_some())
        );
        assert!(version.schema.is_some());
    }

    #[test]
    fn the_status_schema_is_structural_and_derived_from_the_engine_type() {
        let crd = git_promotion_crd();
        let status =
            &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"];
        let text = status.to_string();
        assert!(!text.contains("$ref") && !text.contains("x-kubernetes-preserve-unknown-fields"));
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
}

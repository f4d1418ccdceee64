//! Rendering of the two kinds of generated ClusterProfile.

use serde_json::{Map, Value, json};
use tollgate_model::hash::hash_value;
use tollgate_model::model::{LabelSelector, Stage};
use tollgate_model::snapshot::Snapshot;

use crate::keys::*;
use crate::names::{preverification_profile_name, stage_profile_name};

/// The `spec` of a stage's main profile: the profileSpec verbatim (it already carries the CRD
/// defaults), the stage's selector, and `appended_checks` added to `validateHealths`.
///
/// Checks whose name is already present are skipped, as upstream: the name is a check's identity.
pub fn stage_profile_spec(snapshot: &Snapshot, stage: &Stage, appended_checks: &[Value]) -> Value {
    let mut spec = snapshot.promotion.spec.profile_spec.to_map();
    spec.insert(
        "clusterSelector".to_string(),
        selector_value(&stage.cluster_selector),
    );
    if !appended_checks.is_empty() {
        let healths = spec
            .entry("validateHealths")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !healths.is_array() {
            *healths = Value::Array(Vec::new());
        }
        if let Value::Array(list) = healths {
            for check in appended_checks {
                let name = check.get("name");
                let present = list.iter().any(|existing| existing.get("name") == name);
                if !present {
                    list.push(check.clone());
                }
            }
        }
    }
    Value::Object(spec)
}

/// A cluster named in a waved stage's `clusterRefs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterRef<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    /// A Cluster API `Cluster` rather than a `SveltosCluster`.
    pub capi: bool,
}

/// The main profile's spec when it targets exactly `clusters` (a waved stage between its first
/// and its last wave): `clusterRefs` instead of the selector, and `LeavePolicies`, so clusters of
/// later waves keep what they run until their wave reaches them (WithdrawPolicies would uninstall
/// the add-on from them the moment the first wave starts).
pub fn stage_profile_spec_for(
    snapshot: &Snapshot,
    stage: &Stage,
    appended_checks: &[Value],
    clusters: Option<&[ClusterRef<'_>]>,
) -> Value {
    let mut spec = stage_profile_spec(snapshot, stage, appended_checks);
    let (Some(clusters), Some(fields)) = (clusters, spec.as_object_mut()) else {
        return spec;
    };
    fields.remove("clusterSelector");
    let refs = clusters
        .iter()
        .map(|c| {
            let (api_version, kind) = match c.capi {
                true => ("cluster.x-k8s.io/v1beta1", "Cluster"),
                false => ("lib.projectsveltos.io/v1beta1", "SveltosCluster"),
            };
            json!({"apiVersion": api_version, "kind": kind, "namespace": c.namespace, "name": c.name})
        })
        .collect();
    fields.insert("clusterRefs".to_string(), Value::Array(refs));
    fields.insert("stopMatchingBehavior".to_string(), json!("LeavePolicies"));
    spec
}

/// [`render_stage_profile`] targeting exactly `clusters` when given (see [`stage_profile_spec_for`]).
pub fn render_stage_profile_for(
    snapshot: &Snapshot,
    stage: &Stage,
    appended_checks: &[Value],
    clusters: Option<&[ClusterRef<'_>]>,
) -> Value {
    let spec = stage_profile_spec_for(snapshot, stage, appended_checks, clusters);
    let promotion = snapshot.promotion.name();
    object(
        stage_profile_name(promotion, &stage.name),
        labels(promotion, &stage.name, false),
        snapshot,
        spec,
    )
}

/// The hash recorded in [`SPEC_HASH_ANNOTATION`] for a rendered spec.
pub fn spec_hash(spec: &Value) -> String {
    hash_value(spec)
}

/// The whole main ClusterProfile `<promotion>-<stage>`, ready for server-side apply.
pub fn render_stage_profile(
    snapshot: &Snapshot,
    stage: &Stage,
    appended_checks: &[Value],
) -> Value {
    render_stage_profile_for(snapshot, stage, appended_checks, None)
}

/// The pre-verification ClusterProfile `preverification-<promotion>-<stage>`: deploys the
/// stage's `preHealthCheckDeployment` to the stage's clusters, with nothing else from the
/// profileSpec but the fields that decide how it coexists with other profiles.
pub fn render_preverification_profile(snapshot: &Snapshot, stage: &Stage) -> Value {
    let spec = preverification_spec(snapshot, stage);
    let promotion = snapshot.promotion.name();
    object(
        preverification_profile_name(promotion, &stage.name),
        labels(promotion, &stage.name, true),
        snapshot,
        spec,
    )
}

/// The `spec` of the pre-verification profile (see [`render_preverification_profile`]).
pub fn preverification_spec(snapshot: &Snapshot, stage: &Stage) -> Value {
    let profile_spec = &snapshot.promotion.spec.profile_spec.to_map();
    let mut spec = Map::new();
    spec.insert("syncMode".to_string(), json!("Continuous"));
    for copied in ["tier", "continueOnConflict", "continueOnError"] {
        if let Some(value) = profile_spec.get(copied) {
            spec.insert(copied.to_string(), value.clone());
        }
    }
    spec.insert(
        "clusterSelector".to_string(),
        selector_value(&stage.cluster_selector),
    );
    let policy_refs = stage
        .trigger
        .as_ref()
        .map(|t| t.pre_health_check_deployment().to_vec())
        .unwrap_or_default();
    spec.insert("policyRefs".to_string(), Value::Array(policy_refs));
    Value::Object(spec)
}

fn selector_value(selector: &LabelSelector) -> Value {
    // A LabelSelector is plain strings and lists; serialization cannot fail.
    serde_json::to_value(selector).unwrap_or_else(|_| Value::Object(Map::new()))
}

fn labels(promotion: &str, stage: &str, verification: bool) -> Value {
    let mut labels = Map::new();
    labels.insert(MANAGED_BY_LABEL.to_string(), json!(MANAGED_BY_VALUE));
    labels.insert(PROMOTION_LABEL.to_string(), json!(promotion));
    labels.insert(STAGE_LABEL.to_string(), json!(stage));
    if verification {
        labels.insert(VERIFICATION_LABEL.to_string(), json!("true"));
    }
    Value::Object(labels)
}

fn object(name: String, labels: Value, snapshot: &Snapshot, spec: Value) -> Value {
    let annotations = json!({
        SNAPSHOT_INDEX_ANNOTATION: snapshot.index.to_string(),
        SNAPSHOT_COMMIT_ANNOTATION: snapshot.commit.sha,
        SNAPSHOT_ID_ANNOTATION: snapshot.hashes.snapshot_id,
        PROFILE_SPEC_HASH_ANNOTATION: snapshot.hashes.profile_spec,
        SPEC_HASH_ANNOTATION: spec_hash(&spec),
    });
    // No ownerReferences (docs/architecture.md#d7-deleting-state-never-withdraws-add-ons): deleting tollgate's state must never withdraw add-ons.
    json!({
        "apiVersion": CLUSTER_PROFILE_API_VERSION,
        "kind": CLUSTER_PROFILE_KIND,
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use tollgate_model::hash::SpecHashes;
    use tollgate_model::model::ClusterPromotion;
    use tollgate_model::snapshot::CommitInfo;

    use super::*;

    fn snapshot(profile_spec: Value) -> Snapshot {
        let promotion: ClusterPromotion = serde_json::from_value(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1",
            "kind": "ClusterPromotion",
            "metadata": {"name": "p"},
            "spec": {"profileSpec": profile_spec, "stages": [
                {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}},
                 "trigger": {"auto": {"preHealthCheckDeployment": [{"kind": "ConfigMap", "namespace": "default", "name": "job"}]}}}
            ]}
        }))
        .unwrap();
        Snapshot {
            index: 1,
            hashes: Arc::new(SpecHashes::of(&promotion)),
            commit: CommitInfo {
                sha: "a".repeat(40),
                seq: 0,
                author: String::new(),
                author_email: String::new(),
                committer: String::new(),
                committer_email: String::new(),
                time: chrono::DateTime::UNIX_EPOCH,
                committed: chrono::DateTime::UNIX_EPOCH,
                subject: String::new(),
                signature: None,
            }
            .into(),
            same_content_as: None,
            promotion: Arc::new(promotion),
            file: String::new(),
            contributors: std::sync::Arc::from([]),
        }
    }

    #[test]
    fn appended_checks_skip_names_already_present() {
        let snap = snapshot(json!({"validateHealths": [{"name": "a", "featureID": "Helm"}]}));
        let stage = &snap.promotion.spec.stages[0];
        let spec = stage_profile_spec(
            &snap,
            stage,
            &[
                json!({"name": "a", "featureID": "Resources"}),
                json!({"name": "b", "featureID": "Helm"}),
            ],
        );
        assert_eq!(
            spec["validateHealths"],
            json!([{"name": "a", "featureID": "Helm"}, {"name": "b", "featureID": "Helm"}])
        );
        let spec = stage_profile_spec(&snapshot(json!({})), stage, &[json!({"name": "x"})]);
        assert_eq!(spec["validateHealths"], json!([{"name": "x"}]));
    }

    #[test]
    fn spec_hash_annotation_is_the_hash_of_the_rendered_spec() {
        let snap = snapshot(json!({"tier": 100}));
        let object = render_stage_profile(&snap, &snap.promotion.spec.stages[0], &[]);
        assert_eq!(
            object["metadata"]["annotations"][SPEC_HASH_ANNOTATION],
            spec_hash(&object["spec"])
        );
        assert!(object["metadata"].get("ownerReferences").is_none());
    }

    #[test]
    fn preverification_profile_copies_only_what_upstream_copies() {
        let snap = snapshot(
            json!({"tier": 90, "continueOnError": true, "helmCharts": [{"chartName": "x"}]}),
        );
        let object = render_preverification_profile(&snap, &snap.promotion.spec.stages[0]);
        assert_eq!(object["metadata"]["name"], "preverification-p-dev");
        assert_eq!(object["metadata"]["labels"][VERIFICATION_LABEL], "true");
        assert_eq!(
            object["spec"],
            json!({"syncMode": "Continuous", "tier": 90, "continueOnError": true,
                   "clusterSelector": {"matchLabels": {"env": "dev"}},
                   "policyRefs": [{"kind": "ConfigMap", "namespace": "default", "name": "job"}]})
        );
    }
}

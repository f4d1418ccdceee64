//! Server-side apply through kube::Client: ownership, conflicts, force, field removal, status.

use crate::common;

use common::*;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use tollgate_emulator::Fleet;

fn profile(spec: Value) -> Value {
    json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
           "metadata": {"name": "shared"}, "spec": spec})
}

fn managers(object: &kube::api::DynamicObject) -> Vec<(String, String)> {
    object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| {
            (
                m.manager.clone().unwrap_or_default(),
                m.operation.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test]
async fn two_managers_conflict_force_and_removal() {
    let (handle, client) = start(Fleet::default()).await;
    let api = profiles(&client);
    let tollgate = PatchParams::apply("tollgate");
    let other = PatchParams::apply("someone-else");

    let created = api
        .patch(
            "shared",
            &tollgate,
            &Patch::Apply(profile(json!({"tier": 90, "syncMode": "Continuous"}))),
        )
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["tier"], 90);
    assert!(managers(&created).contains(&("tollgate".into(), "Apply".into())));

    // A second manager adds its own field: no conflict, both fields kept.
    let both = api
        .patch(
            "shared",
            &other,
            &Patch::Apply(profile(json!({"maxUpdate": "10%"}))),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            both.data["spec"]["tier"].clone(),
            both.data["spec"]["maxUpdate"].clone()
        ),
        (json!(90), json!("10%"))
    );

    // Changing a field tollgate owns conflicts, worded like the real server.
    let conflict = api
        .patch(
            "shared",
            &other,
            &Patch::Apply(profile(json!({"maxUpdate": "10%", "tier": 10}))),
        )
        .await
        .unwrap_err();
    assert_eq!(error_code(&conflict), Some(409));
    assert_eq!(
        error_message(&conflict),
        "Apply failed with 1 conflict: conflict with \"tollgate\" using config.projectsveltos.io/v1beta1: .spec.tier"
    );

    // With force, ownership of tier moves to the other manager.
    let forced = api
        .patch(
            "shared",
            &other.clone().force(),
            &Patch::Apply(profile(json!({"maxUpdate": "10%", "tier": 10}))),
        )
        .await
        .unwrap();
    assert_eq!(forced.data["spec"]["tier"], 10);
    // tollgate re-applying its old tier now conflicts the other way.
    let back = api
        .patch(
            "shared",
            &tollgate,
            &Patch::Apply(profile(json!({"tier": 90, "syncMode": "Continuous"}))),
        )
        .await
        .unwrap_err();
    assert!(
        error_message(&back).contains("conflict with \"someone-else\""),
        "{}",
        error_message(&back)
    );

    // tollgate stops sending syncMode: removed (it owned it alone). tier is not its any more: kept.
    let after = api
        .patch("shared", &tollgate, &Patch::Apply(profile(json!({}))))
        .await
        .unwrap();
    assert!(
        after.data["spec"].get("syncMode").is_none(),
        "{}",
        after.data
    );
    assert_eq!(after.data["spec"]["tier"], 10);
    assert_eq!(after.data["spec"]["maxUpdate"], "10%");

    // An identical re-apply is a no-op: same resourceVersion.
    let again = api
        .patch(
            "shared",
            &other,
            &Patch::Apply(profile(json!({"maxUpdate": "10%", "tier": 10}))),
        )
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        after.metadata.resource_version
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn apply_accepts_yaml_and_status_apply_only_touches_status() {
    let (handle, client) = start(Fleet::default()).await;
    let yaml = "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterProfile\nmetadata:\n  name: y\nspec:\n  tier: 5\n";
    let request = http::Request::patch(
        "/apis/config.projectsveltos.io/v1beta1/clusterprofiles/y?fieldManager=yaml-user",
    )
    .header("Content-Type", "application/apply-patch+yaml")
    .body(yaml.as_bytes().to_vec())
    .unwrap();
    let created: Value = client.request(request).await.unwrap();
    assert_eq!(created["spec"]["tier"], 5);

    let api = profiles(&client);
    // dependenciesHash is `format: byte`: the schema wants base64.
    let status = json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
        "metadata": {"name": "y"}, "spec": {"tier": 1}, "status": {"dependenciesHash": "aA=="}});
    let applied = api
        .patch_status(
            "y",
            &PatchParams::apply("status-writer"),
            &Patch::Apply(status),
        )
        .await
        .unwrap();
    assert_eq!(applied.data["status"]["dependenciesHash"], "aA==");
    assert_eq!(
        applied.data["spec"]["tier"], 5,
        "status apply must not change spec"
    );
    let entry = applied
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|m| m.manager.as_deref() == Some("status-writer"))
        .expect("status manager recorded");
    assert_eq!(entry.subresource.as_deref(), Some("status"));
    assert_eq!(entry.fields_type.as_deref(), Some("FieldsV1"));

    // Apply without fieldManager is rejected.
    let bad = http::Request::patch("/apis/config.projectsveltos.io/v1beta1/clusterprofiles/y")
        .header("Content-Type", "application/apply-patch+yaml")
        .body(yaml.as_bytes().to_vec())
        .unwrap();
    let error = client.request::<Value>(bad).await.unwrap_err();
    assert_eq!(error_code(&error), Some(400));
    handle.shutdown().await;
}

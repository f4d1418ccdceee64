//! CRUD, status subresource, selectors, paging, conflicts, finalizers, discovery and CRDs,
//! all through kube::Client over HTTP.

use crate::common;

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tollgate_emulator::{EmulatorConfig, Fleet};

fn profile(name: &str, labels: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
        "metadata": {"name": name, "labels": labels},
        "spec": {"clusterSelector": {"matchLabels": {"env": "none"}}, "tier": 100},
    }))
    .unwrap()
}

#[tokio::test]
async fn create_get_replace_delete_with_real_wording() {
    let (handle, client) = start(Fleet::default()).await;
    let api = profiles(&client);
    let created = api
        .create(&PostParams::default(), &profile("p1", json!({"a": "1"})))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.is_some() && meta.creation_timestamp.is_some());
    assert_eq!(meta.generation, Some(1));

    let duplicate = api
        .create(&PostParams::default(), &profile("p1", json!({})))
        .await
        .unwrap_err();
    assert_eq!(error_code(&duplicate), Some(409));
    assert_eq!(
        error_message(&duplicate),
        "clusterprofiles.config.projectsveltos.io \"p1\" already exists"
    );

    let missing = api.get("nope").await.unwrap_err();
    assert_eq!(error_code(&missing), Some(404));
    assert_eq!(
        error_message(&missing),
        "clusterprofiles.config.projectsveltos.io \"nope\" not found"
    );

    // Spec change bumps generation; a stale resourceVersion is a 409 with the real wording.
    let mut fetched = api.get("p1").await.unwrap();
    fetched.data["spec"]["tier"] = json!(50);
    let replaced = api
        .replace("p1", &PostParams::default(), &fetched)
        .await
        .unwrap();
    assert_eq!(replaced.metadata.generation, Some(2));
    fetched.data["spec"]["tier"] = json!(10);
    let stale = api
        .replace("p1", &PostParams::default(), &fetched)
        .await
        .unwrap_err();
    assert_eq!(error_code(&stale), Some(409));
    assert_eq!(
        error_message(&stale),
        "Operation cannot be fulfilled on clusterprofiles.config.projectsveltos.io \"p1\": the object has been modified; please apply your changes to the latest version and try again"
    );

    // Merge patch of labels only: no generation bump.
    let patched = api
        .patch(
            "p1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"b": "2"}}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.generation, Some(2));
    assert_eq!(
        patched
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("b"))
            .map(String::as_str),
        Some("2")
    );

    api.delete("p1", &DeleteParams::default()).await.unwrap();
    // The Sveltos stand-in adds its finalizer to profiles; remove it so the delete completes.
    let _ = api
        .patch(
            "p1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await;
    eventually("p1 gone", || async {
        api.get_opt("p1").await.unwrap().is_none().then_some(())
    })
    .await;
    assert!(
        handle
            .write_log()
            .iter()
            .any(|w| w.verb == "delete" && w.name == "p1")
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn status_subresource_is_separate_from_main_endpoint() {
    let (handle, client) = start(Fleet::default()).await;
    let api = profiles(&client);
    let mut with_status = profile("p", json!({}));
    with_status.data["status"] = json!({"matchingClusters": [{"name": "ignored"}]});
    let created = api
        .create(&PostParams::default(), &with_status)
        .await
        .unwrap();
    assert!(
        created.data.get("status").is_none(),
        "create drops status for types with the subresource"
    );

    // clusterRef is required by the CRD schema, which the emulator enforces like the real server.
    let status = json!({"status": {"failedClusters": [{"failureMessage": "x",
        "clusterRef": {"kind": "SveltosCluster", "namespace": "a", "name": "b"}}]}});
    let after = api
        .patch_status("p", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    assert_eq!(
        after.data["status"]["failedClusters"][0]["failureMessage"],
        "x"
    );
    assert_eq!(
        after.metadata.generation,
        Some(1),
        "status writes do not bump generation"
    );

    // The main endpoint ignores status; the status endpoint ignores spec.
    let mut edit = after.clone();
    edit.data["status"] = json!({"failedClusters": []});
    edit.data["spec"]["tier"] = json!(7);
    let main = api
        .replace("p", &PostParams::default(), &edit)
        .await
        .unwrap();
    assert_eq!(
        main.data["status"]["failedClusters"][0]["failureMessage"],
        "x"
    );
    assert_eq!(main.data["spec"]["tier"], 7);
    let mut status_edit = main.clone();
    status_edit.data["spec"]["tier"] = json!(99);
    // dependenciesHash is `format: byte` (base64) in the CRD schema.
    status_edit.data["status"] = json!({"dependenciesHash": "YWJj"});
    let via_status = api
        .replace_status("p", &PostParams::default(), &status_edit)
        .await
        .unwrap();
    assert_eq!(via_status.data["spec"]["tier"], 7);
    assert_eq!(
        via_status.data["status"],
        json!({"dependenciesHash": "YWJj"})
    );
    let fetched = api.get_status("p").await.unwrap();
    assert_eq!(fetched.data["status"]["dependenciesHash"], "YWJj");
    handle.shutdown().await;
}

#[tokio::test]
async fn label_and_field_selectors_and_paging() {
    let (handle, client) = start(Fleet::default()).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    for i in 0..25 {
        let env = ["dev", "prod", "staging"][i % 3];
        let lease: Lease = serde_json::from_value(json!({"metadata": {"name": format!("l{i:02}"),
            "labels": {"env": env, "index": i.to_string()}}}))
        .unwrap();
        leases.create(&PostParams::default(), &lease).await.unwrap();
    }
    let count = |selector: &'static str| {
        let leases = leases.clone();
        async move {
            leases
                .list(&ListParams::default().labels(selector))
                .await
                .unwrap()
                .items
                .len()
        }
    };
    assert_eq!(count("env=dev").await, 9);
    assert_eq!(count("env==prod").await, 8);
    assert_eq!(count("env!=dev").await, 16);
    assert_eq!(count("env in (dev,prod)").await, 17);
    assert_eq!(count("env notin (dev,prod)").await, 8);
    assert_eq!(count("index").await, 25);
    assert_eq!(count("!index").await, 0);
    let by_name = leases
        .list(&ListParams::default().fields("metadata.name=l03"))
        .await
        .unwrap();
    assert_eq!(by_name.items.len(), 1);

    // Paging: 10 + 10 + 5 with continue tokens, and a resourceVersion on the list.
    let first = leases.list(&ListParams::default().limit(10)).await.unwrap();
    assert_eq!(first.items.len(), 10);
    assert!(first.metadata.resource_version.is_some());
    let token = first.metadata.continue_.clone().expect("continue token");
    let second = leases
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await
        .unwrap();
    let third = leases
        .list(
            &ListParams::default()
                .limit(10)
                .continue_token(second.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!((second.items.len(), third.items.len()), (10, 5));
    assert!(
        third
            .metadata
            .continue_
            .as_deref()
            .unwrap_or_default()
            .is_empty()
    );

    // All-namespaces list.
    let other: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    other
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap(),
        )
        .await
        .unwrap();
    let everywhere: Api<Lease> = Api::all(client.clone());
    assert_eq!(
        everywhere
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        26
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn delete_waits_for_finalizers() {
    let (handle, client) = start(Fleet::default()).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let lease: Lease = serde_json::from_value(
        json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
    )
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    leases
        .delete("held", &DeleteParams::background())
        .await
        .unwrap();
    let pending = leases.get("held").await.unwrap();
    assert!(
        pending.metadata.deletion_timestamp.is_some(),
        "still there, marked for deletion"
    );
    let unchanged = leases.get("held").await.unwrap();
    assert!(unchanged.metadata.deletion_timestamp.is_some());
    leases
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    assert!(leases.get_opt("held").await.unwrap().is_none());
    handle.shutdown().await;
}

#[tokio::test]
async fn generate_name_namespaces_and_discovery() {
    let (handle, client) = start(Fleet::default()).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let generated: Lease =
        serde_json::from_value(json!({"metadata": {"generateName": "lease-"}})).unwrap();
    let created = leases
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let name = created.metadata.name.unwrap();
    assert!(
        name.starts_with("lease-") && name.len() == "lease-".len() + 5,
        "{name}"
    );

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.contains(&"default".to_string()));

    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    let (resource, caps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(r, _)| r.plural == "gitpromotions")
        .expect("gitpromotions discovered");
    assert_eq!(
        (resource.group.as_str(), resource.version.as_str()),
        ("tollgate.dev", "v1alpha1")
    );
    assert_eq!(caps.scope, kube::discovery::Scope::Cluster);
    assert!(
        caps.subresources
            .iter()
            .any(|(s, _)| s.plural == "gitpromotions/status" || s.plural == "status")
    );
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.major, "1");
    handle.shutdown().await;
}

#[tokio::test]
async fn creating_a_crd_serves_a_new_type() {
    let (handle, client) = start(Fleet::default()).await;
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
    );
    let crd: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}}]},
    }))
    .unwrap();
    crds.patch(
        "widgets.example.com",
        &PatchParams::apply("test").force(),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap();
    let widgets: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &resource("example.com", "v1", "Widget", "widgets"),
    );
    let widget: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"size": 3}}))
        .unwrap();
    widgets
        .create(&PostParams::default(), &widget)
        .await
        .unwrap();
    assert_eq!(widgets.get("w").await.unwrap().data["spec"]["size"], 3);
    handle.shutdown().await;
}

#[tokio::test]
async fn a_type_can_be_left_out() {
    let config = EmulatorConfig {
        without_types: vec!["clustersummaries".into()],
        ..common::config()
    };
    let (handle, client) = start_with(config).await;
    let error = summaries(&client)
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert_eq!(error_code(&error), Some(404));
    assert!(profiles(&client).list(&ListParams::default()).await.is_ok());
    handle.shutdown().await;
}

/// The emulator serves the CRDs its caller passes in, and no type of tollgate's of its own; a CRD
/// it cannot serve stops it at start.
#[tokio::test]
async fn crds_passed_in_are_served_with_their_schemas_and_only_they() {
    let git_promotions = || resource("tollgate.dev", "v1alpha1", "GitPromotion", "gitpromotions");
    let (bare, client) = start_with(EmulatorConfig::default()).await;
    let api: Api<DynamicObject> = Api::all_with(client, &git_promotions());
    let error = api.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(error_code(&error), Some(404));
    bare.shutdown().await;

    let (handle, client) = start(Fleet::default()).await;
    let api: Api<DynamicObject> = Api::all_with(client, &git_promotions());
    let without_spec: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "GitPromotion", "metadata": {"name": "web"}}))
    .unwrap();
    let refused = api
        .create(&PostParams::default(), &without_spec)
        .await
        .unwrap_err();
    assert_eq!(
        error_code(&refused),
        Some(422),
        "the CRD's schema requires spec"
    );
    handle.shutdown().await;

    let mut nameless = common::git_promotion_crd();
    nameless["spec"]["names"] = json!({});
    let config = EmulatorConfig {
        crds: vec![nameless],
        ..EmulatorConfig::default()
    };
    let Err(error) = tollgate_emulator::Emulator::start(config).await else {
        panic!("a CRD without names is served");
    };
    assert!(
        error
            .to_string()
            .contains("gitpromotions.tollgate.dev: spec.group, spec.names.kind"),
        "{error}"
    );
}

#[tokio::test]
async fn request_shapes_the_emulator_refuses() {
    let (handle, client) = start(Fleet::default()).await;
    // A namespaced type addressed without a namespace cannot be created.
    let post = http::Request::post("/apis/coordination.k8s.io/v1/leases")
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&json!({"metadata": {"name": "x"}})).unwrap())
        .unwrap();
    let error = client.request::<serde_json::Value>(post).await.unwrap_err();
    assert_eq!(error_code(&error), Some(404));
    // dryRun writes are refused rather than performed.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": "dry"}})).unwrap();
    let error = leases
        .create(
            &PostParams {
                dry_run: true,
                field_manager: None,
            },
            &lease,
        )
        .await
        .unwrap_err();
    assert_eq!(error_code(&error), Some(400));
    assert!(leases.get_opt("dry").await.unwrap().is_none());
    let counts = handle.request_counts();
    assert_eq!(counts.get("create", "leases.coordination.k8s.io"), 2);
    assert_eq!(counts.writes(), 2);
    assert!(
        handle
            .write_log()
            .iter()
            .all(|w| w.resource != "leases.coordination.k8s.io")
    );
    handle.shutdown().await;
}

//! kubectl's requests for namespaces, events and printer columns: raw HTTP with kubectl's headers
//! (always), and the kubectl binary itself when it is installed.

use crate::common;
use crate::raw_http;

use std::path::Path;

use common::*;
use tollgate_emulator::Fleet;

const KUBECTL: &str = "/usr/bin/kubectl";

async fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> (bool, String, String) {
    let output = tokio::process::Command::new(KUBECTL)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .output()
        .await
        .expect("kubectl starts");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn kubectl_binary_creates_a_namespace() {
    if !Path::new(KUBECTL).exists() {
        println!("SKIP: {KUBECTL} not installed");
        return;
    }
    let (handle, _client) = start(Fleet::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    handle.write_kubeconfig(&kubeconfig).unwrap();
    let (ok, stdout, stderr) =
        kubectl(&kubeconfig, dir.path(), &["create", "namespace", "x"]).await;
    assert!(ok, "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), "namespace/x created");
    let (ok, stdout, stderr) = kubectl(&kubeconfig, dir.path(), &["get", "namespace", "x"]).await;
    assert!(ok && stdout.contains("x "), "{stdout}\n{stderr}");
    handle.shutdown().await;
}

/// What `kubectl create namespace x` (v1.33) posts, from `kubectl -v=9`: a protobuf body.
const KUBECTL_CREATE_NAMESPACE_X: &[u8] = &[
    0x6b, 0x38, 0x73, 0x00, 0x0a, 0x0f, 0x0a, 0x02, 0x76, 0x31, 0x12, 0x09, 0x4e, 0x61, 0x6d, 0x65,
    0x73, 0x70, 0x61, 0x63, 0x65, 0x12, 0x19, 0x0a, 0x11, 0x0a, 0x01, 0x78, 0x12, 0x00, 0x1a, 0x00,
    0x22, 0x00, 0x2a, 0x00, 0x32, 0x00, 0x38, 0x00, 0x42, 0x00, 0x12, 0x00, 0x1a, 0x02, 0x0a, 0x00,
    0x1a, 0x00, 0x22, 0x00,
];

#[tokio::test]
async fn namespaces_are_creatable_with_kubectls_protobuf_request() {
    let (handle, client) = start(Fleet::default()).await;
    let created = raw_http::request(
        handle.addr(),
        "POST",
        "/api/v1/namespaces?fieldManager=kubectl-create&fieldValidation=Strict",
        &[
            (
                "Accept",
                "application/vnd.kubernetes.protobuf,application/json",
            ),
            ("Content-Type", "application/vnd.kubernetes.protobuf"),
            ("User-Agent", raw_http::KUBECTL_USER_AGENT),
        ],
        Some(KUBECTL_CREATE_NAMESPACE_X),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.header("content-type"), Some("application/json"));
    assert_eq!(created.json()["metadata"]["name"], "x");
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
    assert!(namespaces.get_opt("x").await.unwrap().is_some());

    // Another kind in protobuf is refused by name, not misread.
    let mut configmap = b"k8s\0\x0a\x0f\x0a\x02v1\x12\x09ConfigMap".to_vec();
    configmap.extend_from_slice(&[0x12, 0x00]);
    let refused = raw_http::request(
        handle.addr(),
        "POST",
        "/api/v1/namespaces",
        &[("Content-Type", "application/vnd.kubernetes.protobuf")],
        Some(&configmap),
    )
    .await;
    assert_eq!(refused.status, 415, "{}", refused.body);
    assert!(
        refused.json()["message"]
            .as_str()
            .is_some_and(|m| m.contains("not v1 ConfigMap")),
        "{}",
        refused.body
    );
    handle.shutdown().await;
}

fn git_promotions(client: &kube::Client) -> kube::Api<kube::api::DynamicObject> {
    kube::Api::all_with(
        client.clone(),
        &resource("tollgate.dev", "v1alpha1", "GitPromotion", "gitpromotions"),
    )
}

/// A GitPromotion with a status, as tollgate writes it.
async fn git_promotion_with_status(client: &kube::Client) {
    use kube::api::{Patch, PatchParams};
    let api = git_promotions(client);
    let object = serde_json::json!({"apiVersion": "tollgate.dev/v1alpha1", "kind": "GitPromotion",
        "metadata": {"name": "web"}, "spec": {}});
    api.patch(
        "web",
        &PatchParams::apply("tollgate"),
        &Patch::Apply(object),
    )
    .await
    .unwrap();
    // hashScheme and phase are required by the CRD's status schema, which the emulator enforces.
    let status = serde_json::json!({"status": {"hashScheme": 1, "currentStageName": "prod", "phase": "Progressing",
        "snapshotIndex": 3, "snapshotCommit": "abc123", "message": "waiting"}});
    api.patch_status("web", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

#[tokio::test]
async fn kubectl_get_gp_gets_the_crds_printer_columns() {
    let (handle, client) = start(Fleet::default()).await;
    git_promotion_with_status(&client).await;
    let table = raw_http::request(
        handle.addr(),
        "GET",
        "/apis/tollgate.dev/v1alpha1/gitpromotions?limit=500",
        &[
            ("Accept", raw_http::KUBECTL_TABLE_ACCEPT),
            ("User-Agent", raw_http::KUBECTL_USER_AGENT),
        ],
        None,
    )
    .await
    .json();
    assert_eq!(table["kind"], "Table");
    let columns: Vec<(&str, i64)> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["priority"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        columns,
        [
            ("Name", 0),
            ("Stage", 0),
            ("Phase", 0),
            ("Snapshot", 0),
            ("Commit", 1),
            ("Message", 1),
            ("Age", 0)
        ]
    );
    let cells = table["rows"][0]["cells"].as_array().unwrap();
    assert_eq!(
        cells[0..6],
        serde_json::json!(["web", "prod", "Progressing", 3, "abc123", "waiting"])
            .as_array()
            .unwrap()[..]
    );
    assert!(
        cells[6].as_str().is_some_and(|age| age.ends_with('s')),
        "{cells:?}"
    );

    // A CRD created at runtime brings its own columns, filters included.
    let crds: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        client.clone(),
        &resource(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
    );
    let crd = serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "additionalPrinterColumns": [
                    {"name": "Helm", "type": "string", "jsonPath": ".spec.features[?(@.id==\"Helm\")].state"},
                    {"name": "Ready", "type": "boolean", "jsonPath": ".spec.ready"}]}]}});
    crds.create(&Default::default(), &serde_json::from_value(crd).unwrap())
        .await
        .unwrap();
    let widgets: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        client.clone(),
        &resource("example.com", "v1", "Widget", "widgets"),
    );
    let widget = serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"ready": true, "features": [{"id": "Raw", "state": "x"}, {"id": "Helm", "state": "Provisioned"}]}});
    widgets
        .create(
            &Default::default(),
            &serde_json::from_value(widget).unwrap(),
        )
        .await
        .unwrap();
    let table = raw_http::request(
        handle.addr(),
        "GET",
        "/apis/example.com/v1/widgets/w",
        &[("Accept", raw_http::KUBECTL_TABLE_ACCEPT)],
        None,
    )
    .await
    .json();
    assert_eq!(
        table["rows"][0]["cells"],
        serde_json::json!(["w", "Provisioned", true])
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn kubectl_binary_shows_gp_printer_columns() {
    if !Path::new(KUBECTL).exists() {
        println!("SKIP: {KUBECTL} not installed");
        return;
    }
    let (handle, client) = start(Fleet::default()).await;
    git_promotion_with_status(&client).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    handle.write_kubeconfig(&kubeconfig).unwrap();
    let (ok, stdout, stderr) = kubectl(&kubeconfig, dir.path(), &["get", "gp", "-o", "wide"]).await;
    assert!(ok, "{stdout}\n{stderr}");
    let header: Vec<&str> = stdout
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME", "STAGE", "PHASE", "SNAPSHOT", "COMMIT", "MESSAGE", "AGE"
        ],
        "{stdout}"
    );
    assert!(stdout.contains("Progressing"), "{stdout}");
    handle.shutdown().await;
}

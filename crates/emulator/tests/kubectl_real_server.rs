//! kubectl's requests for namespaces, events and printer columns: raw HTTP with kubectl's headers
//! (always), and the kubectl binary itself when it is installed.

mod common;
mod raw_http;

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

//! `kubectl` against a running emulator, when the binary is installed (otherwise a skip notice).

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::*;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tollgate_emulator::{Fleet, FleetCluster};

const KUBECTL: &str = "/usr/bin/kubectl";

async fn kubectl(
    kubeconfig: &Path,
    cache: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> (bool, String, String) {
    use tokio::io::AsyncWriteExt as _;
    let mut command = tokio::process::Command::new(KUBECTL);
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("kubectl starts");
    if let Some(mut pipe) = child.stdin.take() {
        if let Some(input) = stdin {
            pipe.write_all(input.as_bytes()).await.unwrap();
        }
        drop(pipe);
    }
    let output = child.wait_with_output().await.unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn kubectl_get_clusterprofiles_and_clustersummaries() {
    if !Path::new(KUBECTL).exists() {
        println!("SKIP: {KUBECTL} not installed; kubectl compatibility not checked");
        return;
    }
    let mut fleet = Fleet {
        clusters: vec![FleetCluster::new("fleet", "dev-1", &[("env", "dev")])],
        ..Fleet::default()
    };
    fleet.defaults.latency = Duration::from_millis(10);
    let (handle, client) = start(fleet).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    handle.write_kubeconfig(&kubeconfig).unwrap();
    let profile = json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
        "metadata": {"name": "kyverno-dev"},
        "spec": {"clusterSelector": {"matchLabels": {"env": "dev"}}, "helmCharts": [{"releaseName": "k", "releaseNamespace": "k", "repositoryURL": "x"}]}});
    profiles(&client)
        .patch(
            "kyverno-dev",
            &PatchParams::apply("tollgate"),
            &Patch::Apply(profile),
        )
        .await
        .unwrap();
    eventually("summary exists", || async {
        let list = summaries(&client).list(&Default::default()).await.ok()?;
        (!list.items.is_empty()).then_some(())
    })
    .await;

    let (ok, stdout, stderr) = kubectl(
        &kubeconfig,
        dir.path(),
        &["get", "clusterprofiles,clustersummaries", "-A"],
        None,
    )
    .await;
    assert!(ok, "kubectl failed: {stderr}");
    assert!(
        stdout.contains("clusterprofile.config.projectsveltos.io/kyverno-dev"),
        "{stdout}"
    );
    assert!(
        stdout.contains("kyverno-dev-sveltos-dev-1") && stdout.contains("fleet"),
        "{stdout}"
    );
    assert!(
        stdout.contains("NAMESPACE") && stdout.contains("AGE"),
        "{stdout}"
    );

    // `tollgate crd | kubectl apply -f -` style: a CRD applied by kubectl, then the new type used.
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  scope: Cluster\n  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n";
    let (ok, stdout, stderr) = kubectl(
        &kubeconfig,
        dir.path(),
        &["apply", "--server-side", "-f", "-"],
        Some(crd),
    )
    .await;
    assert!(ok, "kubectl apply failed: {stdout} {stderr}");
    // Client-side apply too, twice (create, then patch).
    let gadgets = crd.replace("widget", "gadget").replace("Widget", "Gadget");
    for _ in 0..2 {
        let (ok, stdout, stderr) = kubectl(
            &kubeconfig,
            dir.path(),
            &["apply", "-f", "-"],
            Some(&gadgets),
        )
        .await;
        assert!(ok, "client-side kubectl apply failed: {stdout} {stderr}");
    }
    let (ok, stdout, stderr) = kubectl(
        &kubeconfig,
        dir.path(),
        &["get", "widgets", "-o", "json"],
        None,
    )
    .await;
    assert!(ok, "kubectl get widgets failed: {stderr}");
    assert!(stdout.contains("\"items\""), "{stdout}");
    let (ok, _, stderr) = kubectl(&kubeconfig, dir.path(), &["get", "gp"], None).await;
    assert!(ok, "short name gp: {stderr}");
    let (_, version, _) = kubectl(&kubeconfig, dir.path(), &["version", "--client"], None).await;
    println!(
        "checked with {}",
        version.lines().next().unwrap_or_default()
    );
    handle.shutdown().await;
}

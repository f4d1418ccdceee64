//! Every manifest in `deploy/` parses into its typed Kubernetes object, the kustomization lists
//! them all, and `deploy/crd.yaml` is exactly what `tollgate crd` prints.

use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

fn read(file: &str) -> String {
    std::fs::read_to_string(deploy_dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn typed<T: serde::de::DeserializeOwned>(file: &str) -> T {
    let value: Value =
        serde_saphyr::from_str(&read(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    serde_json::from_value(value).unwrap_or_else(|e| panic!("{file} is not a valid object: {e}"))
}

#[test]
fn every_manifest_parses_into_its_typed_object() {
    let kustomization: Value = serde_saphyr::from_str(&read("kustomization.yaml")).expect("yaml");
    let listed: Vec<String> = kustomization["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r.as_str().map(str::to_string))
        .collect();
    let mut on_disk: Vec<String> = std::fs::read_dir(deploy_dir())
        .expect("deploy/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    on_disk.sort();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(
        sorted, on_disk,
        "kustomization.yaml lists exactly the manifests in deploy/"
    );

    for file in &listed {
        let value: Value = serde_saphyr::from_str(&read(file)).expect("yaml");
        match value["kind"].as_str().expect("kind") {
            "Namespace" => drop(typed::<Namespace>(file)),
            "ServiceAccount" => drop(typed::<ServiceAccount>(file)),
            "ClusterRole" => drop(typed::<ClusterRole>(file)),
            "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(file)),
            "Role" => drop(typed::<Role>(file)),
            "RoleBinding" => drop(typed::<RoleBinding>(file)),
            "Deployment" => drop(typed::<Deployment>(file)),
            "Service" => drop(typed::<Service>(file)),
            "CustomResourceDefinition" => drop(typed::<CustomResourceDefinition>(file)),
            other => panic!("{file}: unexpected kind {other}"),
        }
    }
}

#[test]
fn every_rbac_rule_says_why() {
    for file in ["clusterrole.yaml", "role.yaml"] {
        let text = read(file);
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim_start().starts_with("- apiGroups:") {
                assert!(
                    i > 0 && lines[i - 1].trim_start().starts_with('#'),
                    "{file}:{}: rule without a comment saying why",
                    i + 1
                );
            }
        }
    }
}

#[test]
fn deployment_runs_non_root_with_probes_and_leader_election() {
    let deployment: Deployment = typed("deployment.yaml");
    let pod = deployment
        .spec
        .expect("spec")
        .template
        .spec
        .expect("pod spec");
    assert_eq!(
        pod.security_context.and_then(|s| s.run_as_non_root),
        Some(true)
    );
    let container = &pod.containers[0];
    assert!(container.liveness_probe.is_some() && container.readiness_probe.is_some());
    let env = container.env.clone().unwrap_or_default();
    assert!(
        env.iter()
            .any(|e| e.name == "TOLLGATE_LEADER_ELECT" && e.value.as_deref() == Some("true"))
    );
    assert!(container.resources.is_some());
}

#[test]
fn crd_manifest_matches_tollgate_crd() {
    let on_disk: Value = serde_saphyr::from_str(&read("crd.yaml")).expect("yaml");
    assert_eq!(
        on_disk,
        tollgate::cluster::crd::git_promotion_crd(),
        "regenerate with: cargo run -q -- crd > deploy/crd.yaml"
    );
}

/// A missing git-token or webhook Secret must not keep the pod from starting (`tollgate run`
/// then runs without that feature): every Secret volume is optional, and every secret file the
/// container is pointed at lives in one of them.
#[test]
fn secret_volumes_are_optional() {
    let deployment: Deployment = typed("deployment.yaml");
    let pod = deployment
        .spec
        .expect("spec")
        .template
        .spec
        .expect("pod spec");
    let volumes = pod.volumes.unwrap_or_default();
    let secret_volumes: Vec<_> = volumes.iter().filter(|v| v.secret.is_some()).collect();
    assert!(
        !secret_volumes.is_empty(),
        "the Deployment mounts its Secrets"
    );
    for volume in &secret_volumes {
        let optional = volume.secret.as_ref().and_then(|s| s.optional);
        assert_eq!(
            optional,
            Some(true),
            "volume {} is not optional",
            volume.name
        );
    }
    let container = &pod.containers[0];
    let mounts = container.volume_mounts.clone().unwrap_or_default();
    let secret_dirs: Vec<&str> = mounts
        .iter()
        .filter(|m| secret_volumes.iter().any(|v| v.name == m.name))
        .map(|m| m.mount_path.as_str())
        .collect();
    for env in container.env.clone().unwrap_or_default() {
        if env.name.ends_with("_FILE") {
            let path = env.value.unwrap_or_default();
            assert!(
                secret_dirs
                    .iter()
                    .any(|dir| path.starts_with(&format!("{dir}/"))),
                "{} = {path} is not in an optional Secret volume",
                env.name
            );
        }
    }
}

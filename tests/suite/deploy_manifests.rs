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
        serde_json::to_value(tollgate::cluster::crd::git_promotion_crd()).expect("CRD as JSON"),
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

/// `deploy/crd.yaml` installs in a management cluster that does not serve GitPromotions yet, the
/// typed `GitPromotion` is written through it (spec by apply, status through the subresource), and
/// `tollgate status` reads back what was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crd_manifest_installs_and_serves_typed_git_promotions() {
    use kube::api::{Api, Patch, PatchParams, PostParams};
    use tollgate::cluster::crd::{GitPromotion, GitPromotionSpec};
    use tollgate_emulator::{Emulator, EmulatorConfig};

    let emulator = Emulator::start(EmulatorConfig {
        without_types: vec!["gitpromotions".to_string()],
        ..EmulatorConfig::default()
    })
    .await
    .expect("emulator starts");
    let uri = emulator.url().parse().expect("emulator URL");
    let client = kube::Client::try_from(kube::Config::new(uri)).expect("client");
    let promotions: Api<GitPromotion> = Api::all(client.clone());
    assert!(
        promotions.list(&Default::default()).await.is_err(),
        "gitpromotions are served before the CRD is installed"
    );

    let crds: Api<CustomResourceDefinition> = Api::all(client);
    crds.create(&PostParams::default(), &typed("crd.yaml"))
        .await
        .expect("deploy/crd.yaml installs");
    let spec = GitPromotionSpec {
        repository: Some("https://git.example/fleet.git".into()),
        file: Some("kyverno.yaml".into()),
        ..GitPromotionSpec::default()
    };
    let applied = promotions
        .patch(
            "kyverno-rollout-auto",
            &PatchParams::apply("tollgate").force(),
            &Patch::Apply(GitPromotion::new("kyverno-rollout-auto", spec.clone())),
        )
        .await
        .expect("a GitPromotion applies");
    assert_eq!(applied.spec, spec);

    let mut with_status = applied;
    with_status.status = Some(
        serde_json::from_value(serde_json::json!({
            "hashScheme": 1,
            "phase": "Waiting",
            "currentStageName": "staging",
            "snapshotIndex": 2,
            "message": "Waiting for the delay to pass",
        }))
        .expect("a PromotionStatus"),
    );
    let written = promotions
        .replace_status("kyverno-rollout-auto", &PostParams::default(), &with_status)
        .await
        .expect("the status subresource takes the engine's status");
    assert_eq!(written.status, with_status.status);

    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    emulator.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("tollgate"))
            .env_remove("KUBECONFIG")
            .args(["status", "kyverno-rollout-auto", "--kubeconfig"])
            .arg(&kubeconfig)
            .output()
            .expect("tollgate runs")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("Waiting") && stdout.contains("staging"),
        "{stdout}"
    );
}

/// The container image ships a stripped binary as a non-root user, and the build context leaves
/// out build output and git metadata.
#[test]
fn the_image_is_stripped_non_root_and_built_from_the_source_only() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).expect("Dockerfile");
    assert!(
        dockerfile.contains("strip target/release/tollgate"),
        "{dockerfile}"
    );
    let runtime = dockerfile.rsplit("FROM ").next().expect("a final stage");
    assert!(runtime.contains("USER 65532:65532"), "{runtime}");
    assert!(
        !runtime.contains("cargo"),
        "no toolchain in the final stage: {runtime}"
    );
    let ignore = std::fs::read_to_string(root.join(".dockerignore")).expect(".dockerignore");
    for excluded in ["target/", ".git/"] {
        assert!(
            ignore.lines().any(|l| l.trim() == excluded),
            "{excluded} in {ignore}"
        );
    }
}

/// The feature flags of the image's `cargo build` (`--no-default-features`, `--features …`).
fn image_build_features(dockerfile: &str) -> Vec<String> {
    let build = dockerfile
        .lines()
        .find(|line| line.contains("cargo build"))
        .expect("the Dockerfile builds with cargo");
    let mut flags = Vec::new();
    let mut words = build.split_whitespace();
    while let Some(word) = words.next() {
        match word {
            "--no-default-features" | "--all-features" => flags.push(word.to_string()),
            "--features" | "-F" => {
                flags.push(word.to_string());
                flags.extend(words.next().map(str::to_string));
            }
            _ if word.starts_with("--features=") => flags.push(word.to_string()),
            _ => {}
        }
    }
    flags
}

/// The packages `cargo tree` lists for the binary's normal dependencies with these flags: from
/// the lock file and the local registry cache (which building the tests filled), or, should the
/// cache lack a package, with the network.
fn normal_dependencies(flags: &[String]) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tree = |network: &[&str]| {
        std::process::Command::new(env!("CARGO"))
            .current_dir(root)
            .args(["tree", "--locked", "-p", "tollgate", "-e", "normal"])
            .args(["--prefix", "none", "--format", "{p}"])
            .args(network)
            .args(flags)
            .output()
            .expect("cargo runs")
    };
    let mut output = tree(&["--offline"]);
    if !output.status.success() {
        output = tree(&[]);
    }
    assert!(
        output.status.success(),
        "cargo tree {flags:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The image carries no emulated cluster: built with the Dockerfile's flags, the binary does not
/// depend on tollgate-emulator (which a default build does, for `run --embedded`).
#[test]
fn the_image_is_built_without_the_emulator() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).expect("Dockerfile");
    let flags = image_build_features(&dockerfile);
    let has_emulator = |tree: &str| {
        tree.lines()
            .any(|line| line.starts_with("tollgate-emulator "))
    };
    assert!(
        has_emulator(&normal_dependencies(&[])),
        "a default build has the embedded cluster"
    );
    let image = normal_dependencies(&flags);
    assert!(
        !has_emulator(&image),
        "the image's build ({flags:?}) depends on tollgate-emulator:\n{image}"
    );
    assert!(
        image
            .lines()
            .any(|line| line.starts_with("tollgate-manifest ")),
        "{image}"
    );
}

//! The demo fleet file, and the state file surviving a restart.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::*;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use tollgate_emulator::{EmulatorConfig, Fleet};

/// The commented `failures:` example in the demo fleet file parses once uncommented.
#[test]
fn example_fleet_documents_a_valid_failures_rule() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fleet.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let example: String = text
        .lines()
        .skip_while(|line| *line != "# failures:")
        .map_while(|line| line.strip_prefix("# "))
        .map(|line| format!("{line}\n"))
        .collect();
    assert!(!example.is_empty(), "the example is in the file");
    let fleet = Fleet::parse(&format!("{text}{example}"), &path).unwrap();
    assert_eq!(fleet.failures.len(), 1);
    assert_eq!(fleet.failures[0].chart_version.as_str(), "9.9.*");
}

#[tokio::test]
async fn example_fleet_covers_the_seed_environments() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fleet.yaml");
    let fleet = Fleet::load(&path).unwrap();
    for env in ["dev", "staging", "prod", "production", "development", "uat"] {
        let ready = fleet
            .clusters
            .iter()
            .filter(|c| c.ready && c.labels.get("env").map(String::as_str) == Some(env))
            .count();
        assert!(ready >= 2, "env {env} has {ready} ready clusters");
    }
    let (handle, client) = start(fleet.clone()).await;
    let clusters =
        kube::Api::<kube::api::DynamicObject>::all_with(client.clone(), &sveltos_cluster_type());
    let listed = clusters.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), fleet.clusters.len());
    let offline = listed
        .items
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some("prod-canary-offline"))
        .unwrap();
    assert_eq!(offline.data["status"]["ready"], false);
    handle.shutdown().await;
}

#[tokio::test]
async fn state_json_restores_objects_and_types() {
    let mut fleet = Fleet {
        clusters: vec![tollgate_emulator::FleetCluster::new(
            "fleet",
            "dev-1",
            &[("env", "dev")],
        )],
        ..Fleet::default()
    };
    fleet.defaults.latency = Duration::from_millis(10);
    let (handle, client) = start(fleet.clone()).await;
    let profile = json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
        "metadata": {"name": "kept"}, "spec": {"clusterSelector": {"matchLabels": {"env": "dev"}}, "policyRefs": [{"kind": "ConfigMap", "namespace": "a", "name": "b"}]}});
    profiles(&client)
        .patch(
            "kept",
            &PatchParams::apply("tollgate"),
            &Patch::Apply(profile),
        )
        .await
        .unwrap();
    eventually("provisioned", || async {
        let items = summaries(&client)
            .list(&ListParams::default())
            .await
            .ok()?
            .items;
        (items.len() == 1
            && items[0].data["status"]["featureSummaries"][0]["status"] == "Provisioned")
            .then_some(())
    })
    .await;
    let saved = handle.state_json();
    let version = handle.resource_version();
    handle.shutdown().await;

    let config = EmulatorConfig {
        fleet,
        initial_state: Some(saved),
        ..common::config()
    };
    let (restarted, client) = start_with(config).await;
    let kept = profiles(&client).get("kept").await.unwrap();
    assert!(
        kept.metadata
            .resource_version
            .unwrap()
            .parse::<u64>()
            .unwrap()
            <= version
    );
    let items = summaries(&client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(items.len(), 1);
    assert_eq!(
        items[0].data["status"]["featureSummaries"][0]["status"],
        "Provisioned"
    );
    assert!(
        restarted.resource_version() >= version,
        "resourceVersions keep increasing across restarts"
    );
    restarted.shutdown().await;
}

#[tokio::test]
async fn standalone_writes_kubeconfig_and_state_file_across_restart() {
    let dir = tempfile::tempdir().unwrap();
    let fleet_path = dir.path().join("fleet.yaml");
    std::fs::write(
        &fleet_path,
        "defaults: {latency: 10ms}\nclusters:\n- name: dev-1\n  labels: {env: dev}\n",
    )
    .unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let state = dir.path().join("state.json");

    for round in 0..2 {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let standalone = tollgate_emulator::StandaloneConfig {
            fleet: fleet_path.clone(),
            crds: vec![common::git_promotion_crd()],
            listen: None,
            kubeconfig: kubeconfig.clone(),
            state_file: Some(state.clone()),
            transport: tollgate_emulator::Transport::Tls,
            serving: Default::default(),
        };
        let server = tokio::spawn(tollgate_emulator::run_standalone_until(
            standalone,
            async move {
                let _ = stopped.await;
            },
        ));
        let config = config_from(&kubeconfig).await;
        let client = kube::Client::try_from(config).unwrap();
        let api = profiles(&client);
        if round == 0 {
            let profile = json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
                "metadata": {"name": "survivor"}, "spec": {}});
            eventually("server up", || async {
                api.list(&ListParams::default()).await.ok()
            })
            .await;
            api.patch(
                "survivor",
                &PatchParams::apply("tollgate"),
                &Patch::Apply(profile),
            )
            .await
            .unwrap();
        } else {
            assert!(
                api.get_opt("survivor").await.unwrap().is_some(),
                "restored from the state file"
            );
        }
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
        std::fs::remove_file(&kubeconfig).unwrap();
        assert!(state.exists());
    }
}

#[tokio::test]
async fn standalone_enforces_its_mutating_inflight_limit() {
    let dir = tempfile::tempdir().unwrap();
    let fleet_path = dir.path().join("fleet.yaml");
    std::fs::write(&fleet_path, "clusters: []\n").unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let standalone = tollgate_emulator::StandaloneConfig {
        fleet: fleet_path,
        crds: vec![common::git_promotion_crd()],
        listen: None,
        kubeconfig: kubeconfig.clone(),
        state_file: None,
        transport: tollgate_emulator::Transport::Tls,
        serving: tollgate_emulator::ServingFaults {
            max_requests_inflight: None,
            max_mutating_requests_inflight: Some(0),
            request_latency: Duration::from_millis(1),
        },
    };
    let server = tokio::spawn(tollgate_emulator::run_standalone_until(
        standalone,
        async move {
            let _ = stopped.await;
        },
    ));
    let config = config_from(&kubeconfig).await;
    let mut config = config;
    config.default_retry = false;
    let api = profiles(&kube::Client::try_from(config).unwrap());
    eventually("server up", || async {
        api.list(&ListParams::default()).await.ok()
    })
    .await;
    let profile = json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
        "metadata": {"name": "refused"}, "spec": {}});
    let error = api
        .patch(
            "refused",
            &PatchParams::apply("tollgate"),
            &Patch::Apply(profile),
        )
        .await
        .unwrap_err();
    assert_eq!(error_code(&error), Some(429), "{error:?}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

/// The client configuration in the kubeconfig the standalone emulator writes, once written.
async fn config_from(kubeconfig: &std::path::Path) -> kube::Config {
    eventually("kubeconfig written", || async {
        let text = std::fs::read_to_string(kubeconfig).ok()?;
        let parsed = kube::config::Kubeconfig::from_yaml(&text).ok()?;
        kube::Config::from_custom_kubeconfig(parsed, &Default::default())
            .await
            .ok()
    })
    .await
}

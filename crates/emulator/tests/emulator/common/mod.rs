//! Helpers shared by the integration tests: start an emulator, build a kube client, wait.

use std::future::Future;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use tollgate_emulator::{Emulator, EmulatorConfig, EmulatorHandle, Fleet};

/// tollgate's GitPromotion CRD, as deployed: the emulator serves what its caller passes in, and
/// these tests exercise it on the CRD tollgate passes.
pub fn git_promotion_crd() -> serde_json::Value {
    serde_saphyr::from_str(include_str!("../../../../../deploy/crd.yaml")).expect("deploy/crd.yaml")
}

/// The configuration tollgate starts its emulator with (the defaults, serving GitPromotions).
pub fn config() -> EmulatorConfig {
    EmulatorConfig {
        crds: vec![git_promotion_crd()],
        ..EmulatorConfig::default()
    }
}

pub async fn start_with(config: EmulatorConfig) -> (EmulatorHandle, Client) {
    let handle = Emulator::start(config).await.expect("emulator starts");
    let client = client_for(&handle);
    (handle, client)
}

pub async fn start(fleet: Fleet) -> (EmulatorHandle, Client) {
    start_with(EmulatorConfig { fleet, ..config() }).await
}

/// A client straight from the URL (no kubeconfig file), without kube's transparent retries so
/// injected failures are visible.
pub fn client_for(handle: &EmulatorHandle) -> Client {
    let mut config = kube::Config::new(handle.url().parse().expect("url"));
    config.default_retry = false;
    Client::try_from(config).expect("client")
}

pub fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

pub fn cluster_profile_type() -> ApiResource {
    resource(
        "config.projectsveltos.io",
        "v1beta1",
        "ClusterProfile",
        "clusterprofiles",
    )
}

pub fn cluster_summary_type() -> ApiResource {
    resource(
        "config.projectsveltos.io",
        "v1beta1",
        "ClusterSummary",
        "clustersummaries",
    )
}

pub fn sveltos_cluster_type() -> ApiResource {
    resource(
        "lib.projectsveltos.io",
        "v1beta1",
        "SveltosCluster",
        "sveltosclusters",
    )
}

pub fn profiles(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &cluster_profile_type())
}

pub fn summaries(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &cluster_summary_type())
}

/// Polls `probe` until it returns Some; panics with `what` after 60 s (a liveness bound, not a
/// speed assertion).
pub async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The API error code of a failed request.
pub fn error_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

pub fn error_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

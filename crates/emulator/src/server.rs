//! Starting and stopping the emulator, and the handle tests and the CLI drive it through.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::api_error::ApiError;
use crate::failure_rules::FailureRule;
use crate::fleet::{Feature, Fleet, FleetBehaviour, FleetCluster};
use crate::registry::{CRD_QUALIFIED_PLURAL, Registry};
use crate::schema_validation::SchemaAdmission;
use crate::shared::{Shared, lock};
use crate::state::{ApiState, PatchKind, Target};
use crate::tls::{Authenticator, TlsAuthority, TlsCredentials, TlsListener, TlsPeer};
use crate::write_log::WriteRecord;

/// Field manager of fleet changes made through the handle (cluster readiness and labels).
pub const FLEET_MANAGER: &str = "emulator-fleet";

/// How clients reach the emulator.
#[derive(Debug, Clone, Default)]
pub enum Transport {
    /// Plain HTTP, anyone may do anything: in-process tests and debugging.
    #[default]
    PlainHttp,
    /// HTTPS with a CA generated at start; every request but the public ones (`/version`,
    /// health) needs the bearer token or a client certificate signed by the CA, or gets 401.
    Tls,
    /// [`Transport::Tls`] with the CA and client credentials of an earlier run, so the
    /// kubeconfig its clients hold stays valid across a restart.
    TlsWith(TlsAuthority),
}

/// How to start an emulator.
#[derive(Debug, Clone)]
pub struct EmulatorConfig {
    /// Address to bind; default `127.0.0.1:0` (a free port).
    pub listen: SocketAddr,
    /// Default plain HTTP (fast tests); the CLI serves TLS.
    pub transport: Transport,
    pub fleet: Fleet,
    /// CustomResourceDefinitions served from the start besides the built-in types, as if
    /// installed before the first request (tollgate passes its GitPromotion CRD): their types
    /// are served, and their schemas enforced, without CRD objects in the store.
    pub crds: Vec<Value>,
    /// Types not to serve (plural, `plural.group`, kind or short name), e.g. `clustersummaries`
    /// to exercise "Sveltos CRD missing" paths.
    pub without_types: Vec<String>,
    /// Changes kept for watches to resume from; older versions get 410.
    pub watch_history: usize,
    /// Write log size; None keeps every write.
    pub write_log_capacity: Option<usize>,
    /// Seed of every random choice (fault injection, generated names, uids).
    pub seed: u64,
    /// Store content to start from (a state file's JSON).
    pub initial_state: Option<Value>,
    /// Whether resourceVersions continue from the state file's; by default they jump, so
    /// watches from versions seen before the restart get 410 as from a restarted real server.
    pub continuous_resource_versions: bool,
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            transport: Transport::PlainHttp,
            fleet: Fleet::default(),
            crds: Vec::new(),
            without_types: Vec::new(),
            watch_history: 100_000,
            write_log_capacity: Some(100_000),
            seed: 1,
            initial_state: None,
            continuous_resource_versions: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("only loopback addresses may be used, not {0}")]
    NotLoopback(SocketAddr),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Fleet(#[from] crate::fleet::FleetError),
    #[error("no SveltosCluster named {0:?}")]
    UnknownCluster(String),
    #[error("cluster name {0:?} exists in several namespaces; use namespace/name")]
    AmbiguousCluster(String),
    #[error("seeding the fleet: {0}")]
    Api(#[from] ApiError),
    #[error("state file {path}: {message}")]
    StateFile { path: PathBuf, message: String },
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    #[error("cannot serve the CRD passed in: {0}")]
    Crd(String),
}

/// Request counts by (verb, resource), e.g. `("patch", "clusterprofiles.config.projectsveltos.io")`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts(pub BTreeMap<(String, String), u64>);

impl RequestCounts {
    pub fn get(&self, verb: &str, resource: &str) -> u64 {
        self.0
            .get(&(verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// All requests with this verb.
    pub fn verb(&self, verb: &str) -> u64 {
        self.0
            .iter()
            .filter(|((v, _), _)| v == verb)
            .map(|(_, n)| n)
            .sum()
    }

    /// create + update + patch + delete.
    pub fn writes(&self) -> u64 {
        crate::faults::MUTATING_VERBS
            .iter()
            .map(|v| self.verb(v))
            .sum()
    }
}

/// Entry point.
pub struct Emulator;

impl Emulator {
    pub async fn start(config: EmulatorConfig) -> Result<EmulatorHandle, EmulatorError> {
        if !config.listen.ip().is_loopback() {
            return Err(EmulatorError::NotLoopback(config.listen));
        }
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| EmulatorError::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener
            .local_addr()
            .map_err(|source| EmulatorError::Bind {
                addr: config.listen,
                source,
            })?;
        let state = initial_state(&config)?;
        let changed = Arc::clone(&state.changed);
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            fleet: Mutex::new(FleetBehaviour::from_fleet(&config.fleet)),
            server_address: addr.to_string(),
            inflight: crate::faults::InflightCounters::default(),
        });
        seed_fleet(&shared, &config.fleet)?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let sveltos = tokio::spawn(crate::sveltos::run(
            Arc::clone(&shared),
            changed,
            shutdown_rx.clone(),
        ));
        let credentials = match &config.transport {
            Transport::PlainHttp => None,
            Transport::Tls => Some(Arc::new(TlsCredentials::generate(addr.ip())?)),
            Transport::TlsWith(authority) => Some(Arc::new(TlsCredentials::issue(
                authority.clone(),
                addr.ip(),
            )?)),
        };
        let router = crate::api::router(Arc::clone(&shared));
        let server = match &credentials {
            None => tokio::spawn(serve_plain_http(listener, router, shutdown_rx)),
            Some(credentials) => {
                let listener = TlsListener::new(listener, credentials.acceptor()?);
                let router = router.layer(axum::middleware::from_fn_with_state(
                    Authenticator::new(credentials),
                    crate::tls::authenticate,
                ));
                tokio::spawn(serve_tls(listener, router, shutdown_rx))
            }
        };
        tracing::info!(%addr, transport = ?config.transport, "emulator listening");
        Ok(EmulatorHandle {
            addr,
            credentials,
            shared,
            shutdown,
            server,
            sveltos,
        })
    }
}

/// The API's store and types at start: empty, or loaded from the state file (with the CRDs it
/// holds served).
fn initial_state(config: &EmulatorConfig) -> Result<ApiState, EmulatorError> {
    let mut state = ApiState::new(
        served_types(config)?,
        config.watch_history,
        config.write_log_capacity,
        config.seed,
    );
    state.schema_admission =
        SchemaAdmission::with_crds(&config.crds).map_err(EmulatorError::Crd)?;
    if let Some(initial) = &config.initial_state {
        state
            .store
            .load_json(initial, config.continuous_resource_versions)
            .map_err(|message| EmulatorError::StateFile {
                path: PathBuf::new(),
                message,
            })?;
        let crds: Vec<Value> = state
            .store
            .range(CRD_QUALIFIED_PLURAL, None, None)
            .map(|(_, v)| Value::clone(&v))
            .collect();
        for crd in &crds {
            state.registry.register_crd(crd);
        }
    }
    Ok(state)
}

/// The built-in types and those of the CRDs passed in, minus the types left out.
fn served_types(config: &EmulatorConfig) -> Result<Registry, EmulatorError> {
    let mut registry = Registry::builtin();
    for crd in &config.crds {
        if !registry.register_crd(crd) {
            let name = crd["metadata"]["name"].as_str().unwrap_or("without a name");
            return Err(EmulatorError::Crd(format!(
                "{name}: spec.group, spec.names.kind, spec.names.plural and spec.versions are required"
            )));
        }
    }
    Ok(registry.without(&config.without_types))
}

/// Completes when `shutdown` turns true (or its sender is gone).
async fn shutdown_requested(mut shutdown: watch::Receiver<bool>) {
    while !*shutdown.borrow() {
        if shutdown.changed().await.is_err() {
            break;
        }
    }
}

async fn serve_plain_http(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    shutdown: watch::Receiver<bool>,
) {
    if let Err(error) = axum::serve(listener, router)
        .with_graceful_shutdown(shutdown_requested(shutdown))
        .await
    {
        tracing::error!(%error, "emulator server stopped");
    }
}

/// Serves over TLS; each request knows its connection's [`TlsPeer`] (a verified client
/// certificate authenticates it).
async fn serve_tls(listener: TlsListener, router: axum::Router, shutdown: watch::Receiver<bool>) {
    let service = router.into_make_service_with_connect_info::<TlsPeer>();
    if let Err(error) = axum::serve(listener, service)
        .with_graceful_shutdown(shutdown_requested(shutdown))
        .await
    {
        tracing::error!(%error, "emulator server stopped");
    }
}

fn namespace_object(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// Creates namespaces and SveltosClusters for the fleet (skipping ones a state file restored).
fn seed_fleet(shared: &Shared, fleet: &Fleet) -> Result<(), EmulatorError> {
    let mut state = lock(&shared.state);
    let mut namespaces: Vec<&str> = vec!["default", "kube-system"];
    namespaces.extend(fleet.clusters.iter().map(|c| c.namespace.as_str()));
    if let Some(ns_type) = state.registry.find("", "v1", "namespaces").cloned() {
        for namespace in namespaces {
            let target = Target {
                resource: &ns_type,
                namespace: "",
                status: false,
            };
            match state.create(target, namespace_object(namespace), FLEET_MANAGER) {
                Ok(_) | Err(ApiError::AlreadyExists { .. }) => {}
                Err(other) => return Err(other.into()),
            }
        }
    }
    for cluster in &fleet.clusters {
        create_cluster(&mut state, cluster)?;
    }
    Ok(())
}

fn create_cluster(state: &mut ApiState, cluster: &FleetCluster) -> Result<(), EmulatorError> {
    let Some(cluster_type) = state
        .registry
        .find("lib.projectsveltos.io", "v1beta1", "sveltosclusters")
        .cloned()
    else {
        return Ok(());
    };
    let target = Target {
        resource: &cluster_type,
        namespace: &cluster.namespace,
        status: false,
    };
    let object = json!({
        "apiVersion": "lib.projectsveltos.io/v1beta1", "kind": "SveltosCluster",
        "metadata": {"name": cluster.name, "namespace": cluster.namespace, "labels": cluster.labels},
        "spec": {"paused": cluster.paused, "kubeconfigName": format!("{}-sveltos-kubeconfig", cluster.name)},
    });
    match state.create(target, object, FLEET_MANAGER) {
        Ok(_) => {}
        Err(ApiError::AlreadyExists { .. }) => return Ok(()),
        Err(other) => return Err(other.into()),
    }
    let status_target = Target {
        status: true,
        ..target
    };
    let status = json!({"status": cluster_status(cluster.ready)});
    state.patch(
        status_target,
        &cluster.name,
        PatchKind::Merge,
        status,
        FLEET_MANAGER,
    )?;
    Ok(())
}

fn cluster_status(ready: bool) -> Value {
    json!({"ready": ready, "connectionStatus": if ready { "Healthy" } else { "Down" }, "version": "v1.33.0"})
}

/// A running emulator.
pub struct EmulatorHandle {
    addr: SocketAddr,
    /// Present when serving TLS.
    credentials: Option<Arc<TlsCredentials>>,
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
    server: JoinHandle<()>,
    sveltos: JoinHandle<()>,
}

impl EmulatorHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`, or `https://…` with TLS. A kube client for plain HTTP without
    /// a kubeconfig file: `kube::Client::try_from(kube::Config::new(handle.url().parse()?))`;
    /// with TLS, read [`Self::kubeconfig_yaml`] instead (it carries the CA and credentials).
    pub fn url(&self) -> String {
        match self.credentials {
            None => format!("http://{}", self.addr),
            Some(_) => format!("https://{}", self.addr),
        }
    }

    /// The CA, token and client certificate, when serving TLS.
    pub fn tls_credentials(&self) -> Option<&TlsCredentials> {
        self.credentials.as_deref()
    }

    /// Kubeconfig YAML (parse with `kube::config::Kubeconfig::from_yaml`).
    pub fn kubeconfig_yaml(&self) -> String {
        crate::kubeconfig::render(&self.url(), self.tls_credentials())
    }

    /// Writes [`Self::kubeconfig_yaml`] readable by the owner only (it may hold credentials),
    /// all at once: a reader never sees half a file.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), EmulatorError> {
        crate::kubeconfig::write_private(path, &self.kubeconfig_yaml()).map_err(|source| {
            EmulatorError::Io {
                path: path.to_path_buf(),
                source,
            }
        })
    }

    pub fn request_counts(&self) -> RequestCounts {
        RequestCounts(lock(&self.shared.state).request_counts.clone())
    }

    pub fn reset_request_counts(&self) {
        lock(&self.shared.state).request_counts.clear();
    }

    /// Successful writes, oldest first (bounded by `EmulatorConfig::write_log_capacity`). The
    /// objects are copied after the server's lock is released: a test reading the log while
    /// clients write must not stall every request meanwhile (thousands of objects take a while).
    pub fn write_log(&self) -> Vec<WriteRecord> {
        let shared = lock(&self.shared.state).write_log.shared();
        shared
            .iter()
            .map(crate::write_log::LoggedWrite::to_record)
            .collect()
    }

    /// Visits the kept writes oldest first, under the server's lock and without copying them:
    /// for harnesses that scan a long log while clients wait (keep `visit` quick).
    pub fn scan_write_log(&self, visit: impl FnMut(&crate::write_log::LoggedWrite)) {
        lock(&self.shared.state).write_log.scan(visit);
    }

    /// The newest kept write `matches`, copied (the scan runs newest first under the lock).
    pub fn newest_write(
        &self,
        matches: impl FnMut(&&crate::write_log::LoggedWrite) -> bool,
    ) -> Option<WriteRecord> {
        lock(&self.shared.state)
            .write_log
            .newest(matches)
            .map(crate::write_log::LoggedWrite::to_record)
    }

    /// The newest successful write (copies one object, where `write_log` copies them all).
    pub fn last_write(&self) -> Option<WriteRecord> {
        lock(&self.shared.state).write_log.last()
    }

    /// The store as JSON (what a state file holds).
    pub fn state_json(&self) -> Value {
        lock(&self.shared.state).store.to_json()
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        lock(&self.shared.state).store.resource_version()
    }

    /// Resolves `name` or `namespace/name` to a SveltosCluster.
    fn find_cluster(&self, cluster: &str) -> Result<(String, String), EmulatorError> {
        if let Some((ns, name)) = cluster.split_once('/') {
            return Ok((ns.to_string(), name.to_string()));
        }
        let state = lock(&self.shared.state);
        let found: Vec<(String, String)> = state
            .store
            .range("sveltosclusters.lib.projectsveltos.io", None, None)
            .filter(|(k, _)| k.name == cluster)
            .map(|(k, _)| (k.namespace.clone(), k.name.clone()))
            .collect();
        match found.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(EmulatorError::UnknownCluster(cluster.to_string())),
            _ => Err(EmulatorError::AmbiguousCluster(cluster.to_string())),
        }
    }

    fn cluster_write(
        &self,
        cluster: &str,
        status: bool,
        edit: impl FnOnce(&mut Value),
    ) -> Result<(), EmulatorError> {
        let (namespace, name) = self.find_cluster(cluster)?;
        let mut state = lock(&self.shared.state);
        let cluster_type = state
            .registry
            .find("lib.projectsveltos.io", "v1beta1", "sveltosclusters")
            .cloned()
            .ok_or_else(|| EmulatorError::UnknownCluster(cluster.to_string()))?;
        let target = Target {
            resource: &cluster_type,
            namespace: &namespace,
            status,
        };
        let mut object = (*state.get(target, &name)?).clone();
        edit(&mut object);
        state.replace(target, &name, object, FLEET_MANAGER)?;
        Ok(())
    }

    /// Adds a cluster at runtime (as if it had been in the fleet file).
    pub fn add_cluster(&self, cluster: FleetCluster) -> Result<(), EmulatorError> {
        {
            let mut fleet = lock(&self.shared.fleet);
            let behaviour = fleet.cluster_mut(&cluster.namespace, &cluster.name);
            behaviour.latency = cluster.latency;
            behaviour.fail_features = cluster.fail_features.clone();
            behaviour.fail_health_checks = cluster.fail_health_checks.clone();
        }
        let fleet = Fleet {
            clusters: vec![cluster],
            ..Fleet::default()
        };
        seed_fleet(&self.shared, &fleet)
    }

    pub fn set_cluster_ready(&self, cluster: &str, ready: bool) -> Result<(), EmulatorError> {
        self.cluster_write(cluster, true, |object| {
            for (key, value) in cluster_status(ready).as_object().into_iter().flatten() {
                object["status"][key] = value.clone();
            }
        })
    }

    /// Replaces the cluster's labels.
    pub fn set_cluster_labels(
        &self,
        cluster: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), EmulatorError> {
        self.cluster_write(cluster, false, |object| {
            object["metadata"]["labels"] = json!(labels)
        })
    }

    pub fn set_cluster_paused(&self, cluster: &str, paused: bool) -> Result<(), EmulatorError> {
        self.cluster_write(cluster, false, |object| {
            object["spec"]["paused"] = json!(paused)
        })
    }

    fn edit_behaviour(
        &self,
        cluster: &str,
        edit: impl FnOnce(&mut crate::fleet::ClusterBehaviour),
    ) -> Result<(), EmulatorError> {
        let (namespace, name) = self.find_cluster(cluster)?;
        edit(lock(&self.shared.fleet).cluster_mut(&namespace, &name));
        self.behaviour_changed();
        Ok(())
    }

    /// Makes deploying `feature` on the cluster fail with `message` (None: succeed again).
    pub fn set_feature_failure(
        &self,
        cluster: &str,
        feature: Feature,
        message: Option<&str>,
    ) -> Result<(), EmulatorError> {
        self.edit_behaviour(cluster, |b| match message {
            Some(m) => {
                b.fail_features.insert(feature, m.to_string());
            }
            None => {
                b.fail_features.remove(&feature);
            }
        })
    }

    /// Makes the validateHealths check `check_name` fail on the cluster with `detail`.
    pub fn set_health_failure(
        &self,
        cluster: &str,
        check_name: &str,
        detail: Option<&str>,
    ) -> Result<(), EmulatorError> {
        self.edit_behaviour(cluster, |b| match detail {
            Some(d) => {
                b.fail_health_checks
                    .insert(check_name.to_string(), d.to_string());
            }
            None => {
                b.fail_health_checks.remove(check_name);
            }
        })
    }

    /// Provisioning → Provisioned delay of one cluster.
    pub fn set_latency(&self, cluster: &str, latency: Duration) -> Result<(), EmulatorError> {
        self.edit_behaviour(cluster, |b| b.latency = Some(latency))
    }

    /// Replaces the fleet file's `failures:` rules; every summary is looked at again, so a
    /// feature failed by a removed rule redeploys and one a new rule matches fails.
    pub fn set_failure_rules(&self, rules: Vec<FailureRule>) {
        lock(&self.shared.fleet).failure_rules = rules;
        self.behaviour_changed();
    }

    pub fn set_default_latency(&self, latency: Duration) {
        lock(&self.shared.fleet).default_latency = latency;
        self.behaviour_changed();
    }

    /// Every feature still provisioning turns Provisioned on the stand-in's next pass, whatever
    /// its cluster's latency (features armed afterwards take their latency again): many stages
    /// that complete in the same instant, for the scale harness's burst.
    pub fn finish_provisioning_now(&self) {
        let mut state = lock(&self.shared.state);
        state.stand_in_inbox.finish_provisioning = true;
        state.changed.notify_one();
    }

    /// Injected behaviour may change any summary's status: the stand-in looks at everything.
    fn behaviour_changed(&self) {
        let mut state = lock(&self.shared.state);
        state.stand_in_inbox.everything = true;
        state.changed.notify_one();
    }

    /// Fails this share (0.0–1.0) of requests with `verb` (`get`, `list`, `watch`, `create`,
    /// `update`, `patch`, `delete`).
    pub fn set_error_rate(&self, verb: &str, rate: f64) {
        lock(&self.shared.state)
            .faults
            .error_rates
            .insert(verb.to_string(), rate.clamp(0.0, 1.0));
    }

    /// HTTP code of injected errors (default 500; kube retries 503 on its own).
    pub fn set_error_code(&self, code: u16) {
        lock(&self.shared.state).faults.error_code = code;
    }

    /// Delay added to every request.
    pub fn set_request_latency(&self, latency: Duration) {
        lock(&self.shared.state).faults.request_latency = latency;
    }

    /// The real server's `--max-requests-inflight` (`read_only`: get, list, discovery) and
    /// `--max-mutating-requests-inflight` (`mutating`: create, update, patch, delete): over them a
    /// request gets 429 `TooManyRequests` with `Retry-After` at once. A request holds its slot
    /// through its injected latency, so latency × limit bounds the throughput as on a real
    /// server. Watches are not counted. `None` (the default) is no limit; `Some(0)` refuses all.
    /// Refused requests are counted under the verb [`crate::api::THROTTLED`], not their own.
    pub fn set_max_inflight(&self, read_only: Option<usize>, mutating: Option<usize>) {
        lock(&self.shared.state).faults.max_inflight = crate::faults::InflightLimits {
            read_only,
            mutating,
        };
    }

    /// `Retry-After` seconds of every 429, by the limit or injected (default 1).
    pub fn set_retry_after_seconds(&self, seconds: u64) {
        lock(&self.shared.state).faults.retry_after_seconds = seconds;
    }

    /// Requests refused by the in-flight limit so far (since the last
    /// [`Self::reset_request_counts`]).
    pub fn throttled(&self) -> u64 {
        self.request_counts().verb(crate::api::THROTTLED)
    }

    /// (read-only, mutating) requests being served now; watches are not counted.
    pub fn requests_in_flight(&self) -> (usize, usize) {
        self.shared.inflight.current()
    }

    pub fn set_seed(&self, seed: u64) {
        lock(&self.shared.state).faults.reseed(seed);
    }

    /// Every request on `resource` (`plural.group`, e.g. `leases.coordination.k8s.io`) fails
    /// with `code` while the rest of the API answers; `None` ends it. Open watches on it are
    /// left alone (a watch opened before a partition may outlive it, as on a real network).
    pub fn set_resource_failure(&self, resource: &str, code: Option<u16>) {
        let mut state = lock(&self.shared.state);
        match code {
            Some(code) => state
                .faults
                .failing_resources
                .insert(resource.to_string(), code),
            None => state.faults.failing_resources.remove(resource),
        };
    }

    /// Every request gets 503 and open watches are closed until [`Self::outage_end`].
    pub fn outage_start(&self) {
        let mut state = lock(&self.shared.state);
        state.faults.outage = true;
        state.store.drop_watches();
    }

    pub fn outage_end(&self) {
        lock(&self.shared.state).faults.outage = false;
    }

    /// Closes every open watch stream now.
    pub fn drop_watches(&self) {
        lock(&self.shared.state).store.drop_watches();
    }

    pub fn open_watches(&self) -> usize {
        lock(&self.shared.state).store.open_watches()
    }

    /// Forgets the watch history: watches from any earlier resourceVersion get 410.
    pub fn compact(&self) {
        lock(&self.shared.state).store.compact();
    }

    /// Expires the watch history now: every open watch gets a 410 `Expired` ERROR event and
    /// ends, and new watches from any earlier resourceVersion get 410; clients must relist.
    pub fn expire_watch_history(&self) {
        lock(&self.shared.state).store.expire_history();
    }

    /// Every request answers 403 Forbidden for `window`, as a starting server does before its
    /// RBAC authorizer has loaded the roles. Open watches are left alone.
    pub fn forbid_requests_for(&self, window: Duration) {
        lock(&self.shared.state).faults.forbidden_until = Some(std::time::Instant::now() + window);
    }

    /// Stops the server and the Sveltos stand-in; open watches are closed first so the graceful
    /// shutdown does not wait for them.
    pub async fn shutdown(self) {
        lock(&self.shared.state).store.drop_watches();
        // Receivers live in the tasks; if they are gone the tasks have ended already.
        let _ = self.shutdown.send(true);
        for task in [self.server, self.sveltos] {
            if let Err(error) = task.await {
                tracing::warn!(%error, "emulator task ended abnormally");
            }
        }
    }
}

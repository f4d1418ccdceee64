//! End-to-end test support: real git repositories in temp dirs, the emulator over HTTP, and the
//! controller loop in-process, observed only through the Kubernetes API.

pub mod browser;
pub mod child_emulator;
pub mod docs;
pub mod elected;
pub mod exposition;
pub mod live_frame;
pub mod prometheus;
pub mod receiver;
pub mod web_attack;
pub mod web_page;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, Config};
use serde_json::Value;
use tempfile::TempDir;
use tollgate::cluster::leader::LeaderGate;
use tollgate::cluster::resources;
use tollgate::cluster::throttle::{Concurrency, Throttle};
use tollgate::controller::{self, ControllerConfig, ControllerHandle, PruneGuard, Quiescence};
use tollgate_emulator::{Emulator, EmulatorConfig, EmulatorHandle, Fleet};
use tollgate_source::SourceConfig;
use tollgate_source::timeouts::NetworkTimeouts;

/// How long any single expectation may take before the test fails. Generous on purpose: this is
/// a correctness bound for a loaded 2-core CI machine, not a performance assertion.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A git repository in a temp dir, driven with the `git` CLI like a user would.
pub use tollgate_fixtures::TestRepo;

/// A seed manifest from the shared fixtures, with every delay shortened to `delay` for tests.
pub fn seed(file: &str, delay: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/seeds")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|line| match line.find("delay:") {
            Some(at) => format!("{}delay: {delay}", &line[..at]),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// A fleet with `per_env` ready clusters for each of the environments the seeds select.
pub fn fleet_yaml(per_env: usize, latency: &str) -> String {
    tollgate_fixtures::fleet_per_env(per_env, latency).to_yaml()
}

pub struct World {
    pub repo: TestRepo,
    pub emulator: EmulatorHandle,
    pub client: Client,
    pub controller: Option<(ControllerHandle, tokio::task::JoinHandle<()>)>,
    pub cache: TempDir,
    pub guard: PruneGuard,
    /// The tracked path inside the repository ("" = the whole tree).
    pub source_path: String,
    /// Shared by every controller the world starts.
    pub metrics: std::sync::Arc<tollgate::metrics::Metrics>,
    /// The throttle of `client` (adaptive, as by default).
    pub throttle: std::sync::Arc<Throttle>,
    /// `--verify-commits` and `--trusted-keys` of the controllers the world starts.
    pub trust: tollgate_source::TrustConfig,
    /// Where the controllers the world starts send their traces (none by default).
    pub traces: tollgate::traces::Traces,
}

/// The emulator as tollgate runs it: serving the GitPromotion CRD besides the built-in types.
pub fn emulator_config() -> EmulatorConfig {
    EmulatorConfig {
        crds: vec![tollgate::cluster::crd::git_promotion_crd_json()],
        ..EmulatorConfig::default()
    }
}

/// The connect and read/write timeouts of every source this test binary fetches with in-process.
/// libgit2 keeps them process-wide and the first remote fetch installs them
/// (`tollgate_source::timeouts`), so the modules must agree or the first test to fetch decides
/// for the others. Short: `e2e_lifecycle`'s hung fetch ends when they expire.
pub const NETWORK_TIMEOUTS: NetworkTimeouts = NetworkTimeouts {
    connect: Duration::from_secs(5),
    io: Duration::from_secs(5),
};

/// How many promotions the test controllers step at once (the adaptive ceiling too).
pub const STEP_CONCURRENCY: usize = 8;

impl World {
    pub async fn start(repo: TestRepo, fleet: &str) -> World {
        let mut world = World::without_controller(repo, fleet).await;
        world.start_controller().await;
        world
    }

    /// The cluster and repository, with no controller running yet.
    pub async fn without_controller(repo: TestRepo, fleet: &str) -> World {
        init_logs();
        let fleet = Fleet::parse(fleet, Path::new("test-fleet.yaml")).expect("valid fleet");
        let emulator = Emulator::start(EmulatorConfig {
            fleet,
            ..emulator_config()
        })
        .await
        .expect("emulator starts");
        let uri = emulator.url().parse().expect("emulator URL");
        let metrics = std::sync::Arc::new(tollgate::metrics::Metrics::new());
        let throttle = Concurrency::Adaptive {
            ceiling: STEP_CONCURRENCY,
        }
        .throttle(metrics.throttle());
        let client =
            tollgate::cli::run::controller_client(Config::new(uri), &throttle).expect("client");
        World {
            repo,
            emulator,
            client,
            controller: None,
            cache: tempfile::tempdir().expect("temp dir"),
            guard: PruneGuard::default(),
            source_path: String::new(),
            metrics,
            throttle,
            trust: Default::default(),
            traces: Default::default(),
        }
    }

    pub fn controller_config(&self) -> ControllerConfig {
        let mut source = SourceConfig::new(
            self.repo.path().to_string_lossy(),
            "main",
            &self.source_path,
            self.cache.path(),
        );
        source.trust = self.trust.clone();
        source.timeouts = NETWORK_TIMEOUTS;
        ControllerConfig {
            source,
            // Local repositories are watched; the poll is only a fallback.
            poll_interval: Duration::from_secs(5),
            dry_run: false,
            guard: self.guard,
            concurrency: STEP_CONCURRENCY,
            throttle: self.throttle.clone(),
            instance: None,
            metrics: self.metrics.clone(),
            analysis: Default::default(),
            traces: self.traces.clone(),
        }
    }

    pub async fn start_controller(&mut self) {
        let (handle, task) = controller::start(
            self.client.clone(),
            self.controller_config(),
            LeaderGate::always(),
        )
        .await
        .expect("controller starts");
        self.controller = Some((handle, task));
    }

    /// Another controller replica on the same repository and cluster, behind `gate`.
    pub async fn spawn_replica(
        &self,
        gate: LeaderGate,
    ) -> (ControllerHandle, tokio::task::JoinHandle<()>) {
        controller::start(self.client.clone(), self.controller_config(), gate)
            .await
            .expect("replica starts")
    }

    pub async fn stop_controller(&mut self) {
        if let Some((handle, task)) = self.controller.take() {
            handle.shutdown();
            task.await.expect("controller task ends cleanly");
        }
    }

    /// Pokes the git source (as a webhook would) so a fresh commit is seen without waiting for
    /// the filesystem watch.
    pub fn poke(&self) {
        if let Some((handle, _)) = &self.controller {
            handle.poker.poke();
        }
    }

    fn api(&self, resource: kube::core::ApiResource) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &resource)
    }

    pub async fn git_promotion(&self, name: &str) -> Option<DynamicObject> {
        self.api(resources::git_promotion())
            .get_opt(name)
            .await
            .expect("get gitpromotion")
    }

    pub async fn status(&self, name: &str) -> Option<Value> {
        self.git_promotion(name)
            .await
            .and_then(|o| o.data.get("status").cloned())
    }

    pub async fn profile(&self, name: &str) -> Option<DynamicObject> {
        self.api(resources::cluster_profile())
            .get_opt(name)
            .await
            .expect("get clusterprofile")
    }

    pub async fn profiles_of(&self, promotion: &str) -> Vec<DynamicObject> {
        self.api(resources::cluster_profile())
            .list(&ListParams::default().labels(&format!("tollgate.dev/promotion={promotion}")))
            .await
            .expect("list clusterprofiles")
            .items
    }

    /// Polls `check` until it returns `Some`, or fails the test after [`PATIENCE`] naming `what`.
    pub async fn eventually<T, F, Fut>(&self, what: &str, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(value) = check().await {
                return value;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("timed out waiting for: {what}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The metrics' exposition once `ready` holds of it. The metrics observe a step just after
    /// its status is written, so a scrape the instant a status reads Completed can precede that
    /// (it did, in loaded suite runs).
    pub async fn scrape_when(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        self.eventually(what, || {
            let scraped = self.metrics.encode();
            let ready = ready(&scraped);
            async move { ready.then_some(scraped) }
        })
        .await
    }

    /// Waits until the in-process controller is quiescent (see
    /// [`ControllerHandle::quiescent`]): a turn that started after this call ended with nothing to
    /// do. Returns when it next wakes by itself. Poke a fresh commit first: a filesystem watch's
    /// poke may come later.
    pub async fn quiescent(&self) -> Quiescence {
        let (handle, _) = self.controller.as_ref().expect("a controller runs");
        tokio::time::timeout(PATIENCE, handle.quiescent())
            .await
            .expect("the controller became quiescent within the patience")
            .expect("the controller runs")
    }

    /// Waits until the controller is quiescent with no wake-up pending, carrying out those that
    /// are (a held-back write, a retry, a measurement's interval): from then on it does nothing
    /// until something outside tells it. Instead of sleeping "long enough" before asserting that
    /// nothing (more) happened.
    pub async fn settled(&self) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let quiescence = self.quiescent().await;
            if quiescence.next_wake_at.is_none() {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the controller still had a wake-up pending after {PATIENCE:?}: {quiescence:?}"
            );
        }
    }

    /// Steps that failed (nothing persisted), as the controller's metrics count them.
    pub fn failed_steps(&self) -> u64 {
        self.metrics
            .encode()
            .lines()
            .filter(|line| line.starts_with("tollgate_reconciles_total{result=\"error\"}"))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    /// (reason, note) of every Event regarding `promotion`.
    pub async fn events_of(&self, promotion: &str) -> Vec<(String, String)> {
        let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(self.client.clone());
        events
            .list(&ListParams::default())
            .await
            .expect("events list")
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(promotion))
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect()
    }

    /// The controller's writes (not the Sveltos stand-in's or the fleet's), by verb and resource
    /// (`update gitpromotions.tollgate.dev/status`).
    pub fn controller_writes(&self) -> std::collections::BTreeMap<String, u32> {
        use tollgate_emulator::server::FLEET_MANAGER;
        use tollgate_emulator::sveltos::FIELD_MANAGER as SVELTOS_MANAGER;
        let mut counts = std::collections::BTreeMap::new();
        for write in self.emulator.write_log() {
            if write.field_manager == SVELTOS_MANAGER || write.field_manager == FLEET_MANAGER {
                continue;
            }
            let subresource = if write.status_subresource {
                "/status"
            } else {
                ""
            };
            let what = format!("{} {}{subresource}", write.verb, write.resource);
            *counts.entry(what).or_default() += 1;
        }
        counts
    }

    /// Writes a kubeconfig for the emulator into the world's temp dir, for CLI commands.
    pub fn kubeconfig(&self) -> PathBuf {
        let path = self.cache.path().join("emulator.kubeconfig");
        self.emulator
            .write_kubeconfig(&path)
            .expect("kubeconfig written");
        path
    }

    /// `tollgate history PROMOTION -o json` with the cluster's status.
    pub fn history_json(&self, promotion: &str) -> Value {
        let output = tollgate_binary()
            .args(["history", promotion, "-o", "json", "--repo"])
            .arg(self.repo.path())
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .output()
            .expect("tollgate history");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).expect("json")
    }

    pub async fn wait_phase(&self, promotion: &str, phase: &str) -> Value {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let status = self.status(promotion).await;
            if let Some(status) = &status
                && status.get("phase").and_then(Value::as_str) == Some(phase)
            {
                return status.clone();
            }
            if tokio::time::Instant::now() > deadline {
                let profiles: Vec<String> = self
                    .profiles_of(promotion)
                    .await
                    .iter()
                    .map(|p| p.metadata.name.clone().unwrap_or_default())
                    .collect();
                let summaries: Vec<Value> = self
                    .api(resources::cluster_summary())
                    .list(&ListParams::default())
                    .await
                    .expect("list clustersummaries")
                    .items
                    .into_iter()
                    .map(|s| serde_json::json!({"name": s.metadata.name, "status": s.data.get("status")}))
                    .collect();
                panic!(
                    "timed out waiting for {promotion} phase {phase}; profiles {profiles:?}; last status: {}\nsummaries: {}",
                    serde_json::to_string_pretty(&status).unwrap_or_default(),
                    serde_json::to_string_pretty(&summaries).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Controller logs in test output, filtered by `RUST_LOG` (default: warnings).
pub fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

impl Drop for World {
    fn drop(&mut self) {
        // Stop the loop before the repository's temp dir disappears under it.
        if let Some((handle, _)) = &self.controller {
            handle.shutdown();
        }
    }
}

pub fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

/// Polls `check` every 200 ms until it yields a value; fails the test after [`PATIENCE`].
#[cfg_attr(not(feature = "embedded"), allow(dead_code))] // used by the `embedded` tests only
pub fn eventually<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    eventually_within(what, PATIENCE, check)
}

/// [`eventually`] with its own patience, for a wait the scenario itself makes long.
#[cfg_attr(not(feature = "embedded"), allow(dead_code))] // used by the `embedded` tests only
pub fn eventually_within<T>(
    what: &str,
    patience: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = std::time::Instant::now() + patience;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A loopback port nothing listens on now (the OS's pick, released at once).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// One HTTP/1.1 request over a fresh connection; returns (status code, body).
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    stream.write_all(body).ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let text = String::from_utf8_lossy(&response).to_string();
    let code = text.split(' ').nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((code, body))
}

/// A child process (a `tollgate` binary under test) killed when the test ends, whatever happened.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `tollgate` binary this test run built.
pub fn tollgate_binary() -> Command {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("tollgate"));
    // Plain output is 80 columns when piped unless `COLUMNS` says otherwise: a shell that
    // exports it must not change what the tests read (a test sets it where it means to).
    command.env_remove("COLUMNS");
    command
}

/// `tollgate approve PROMOTION STAGE --repo`, then merges the branch it printed into main and
/// pokes the controller; returns the command's output.
pub fn approve_and_merge(world: &World, promotion: &str, stage: &str) -> std::process::Output {
    let output = tollgate_binary()
        .args(["approve", promotion, stage, "--repo"])
        .arg(world.repo.path())
        .output()
        .expect("tollgate approve");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let branch = stdout
        .split_whitespace()
        .skip_while(|word| *word != "branch")
        .nth(1)
        .expect("the new branch is printed");
    world.repo.git(&["merge", "-q", "--ff-only", branch]);
    world.poke();
    output
}

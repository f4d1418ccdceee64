//! `tollgate run` started while its management cluster is not usable yet, as when a cluster
//! restarts as a whole: nothing listening, an API server answering 503, one whose authorizer has
//! not loaded its roles (403 for everything), or the GitPromotion CRD not installed yet. The real
//! binary must not exit: `/healthz` answers, `/readyz` fails naming the cause and the fix, one
//! log line says so (not one per retry), and once the fault passes it comes up by itself and
//! rolls the repository out.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use kube::api::{Api, DynamicObject, PostParams};
use support::{KillOnDrop, PATIENCE, TestRepo, fleet_yaml, http, seed, tollgate_binary};
use tollgate::cluster::resources;
use tollgate_emulator::{Emulator, EmulatorConfig, EmulatorHandle, Fleet};

/// The one line a start-up wait logs per cause.
const WAITING_LINE: &str = "waiting for the management cluster before starting";
const STARTING_LINE: &str = "the management cluster serves everything tollgate needs: starting";

async fn emulator(listen_port: u16, without_types: &[&str]) -> EmulatorHandle {
    let fleet = Fleet::parse(&fleet_yaml(1, "100ms"), Path::new("fleet.yaml")).expect("fleet");
    Emulator::start(EmulatorConfig {
        listen: ([127, 0, 0, 1], listen_port).into(),
        fleet,
        without_types: without_types.iter().map(ToString::to_string).collect(),
        ..support::emulator_config()
    })
    .await
    .expect("emulator starts")
}

/// A kubeconfig for a plain-HTTP API server on `port`, whether or not anything listens there.
fn kubeconfig(dir: &Path, port: u16) -> PathBuf {
    kubeconfig_for(dir, &format!("http://127.0.0.1:{port}"))
}

/// A kubeconfig for the API server at `server`.
fn kubeconfig_for(dir: &Path, server: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    let yaml = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: test\n\
         clusters:\n- name: test\n  cluster: {{server: \"{server}\"}}\n\
         users:\n- name: test\n  user: {{}}\n\
         contexts:\n- name: test\n  context: {{cluster: test, user: test}}\n"
    );
    std::fs::write(&path, yaml).expect("kubeconfig");
    path
}

fn repo() -> TestRepo {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "100ms"),
    );
    repo.commit("Kyverno 3.5.2");
    repo
}

/// `tollgate run` as the Deployment runs it (poll an hour away), logging to `<dir>/run.log`.
struct Run {
    process: KillOnDrop,
    listen: String,
    log: PathBuf,
}

impl Run {
    fn start(dir: &Path, repo: &TestRepo, kubeconfig: &Path) -> Run {
        let listen = format!("127.0.0.1:{}", support::free_port());
        let log = dir.join("run.log");
        let child = tollgate_binary()
            .env_remove("KUBECONFIG")
            .args(["--log", "info", "run", "--repo"])
            .arg(repo.path())
            .args(["--interval", "1h", "--kubeconfig"])
            .arg(kubeconfig)
            .arg("--cache-dir")
            .arg(dir.join("cache"))
            .args(["--listen", &listen])
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log).expect("log file")))
            .spawn()
            .expect("tollgate run starts");
        Run {
            process: KillOnDrop(child),
            listen,
            log,
        }
    }

    async fn get(&self, path: &'static str) -> Option<(u16, String)> {
        let listen = self.listen.clone();
        tokio::task::spawn_blocking(move || http(&listen, "GET", path, &[], b""))
            .await
            .expect("request thread")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Fails the test if the process has exited: a start-up fault must not stop it.
    fn assert_running(&mut self, during: &str) {
        if let Ok(Some(status)) = self.process.0.try_wait() {
            panic!(
                "tollgate run exited ({status}) {during}; its log:\n{}",
                self.log()
            );
        }
    }

    /// Waits until `/readyz` fails with a text containing every one of `expected`; checks
    /// meanwhile that the process lives and `/healthz` answers (liveness must not restart a
    /// waiting pod).
    async fn wait_unready_saying(&mut self, expected: &[&str]) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            self.assert_running("while its management cluster was not usable");
            if let Some((503, text)) = self.get("/readyz").await
                && expected.iter().all(|e| text.contains(e))
            {
                let health = self.get("/healthz").await;
                assert_eq!(health.map(|(code, _)| code), Some(200), "/healthz");
                return text;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "/readyz never failed naming {expected:?}; last answer {:?}; log:\n{}",
                self.get("/readyz").await,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `/readyz` answers 200 and the promotion has completed on the cluster.
    async fn wait_rolled_out(&mut self, client: &kube::Client) {
        let promotions: Api<DynamicObject> =
            Api::all_with(client.clone(), &resources::git_promotion());
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            self.assert_running("after its management cluster became usable");
            let ready = self
                .get("/readyz")
                .await
                .is_some_and(|(code, _)| code == 200);
            let completed = match promotions.get_opt("kyverno-rollout-auto").await {
                Ok(Some(object)) => object.data["status"]["phase"] == "Completed",
                _ => false,
            };
            if ready && completed {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "not rolled out (ready {ready}); log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The start-up log's waiting lines: one per change of cause (whatever the number of
    /// retries), each naming its cause, in order.
    fn assert_logged_causes(&self, causes: &[&str]) {
        let log = self.log();
        let waiting: Vec<&str> = log.lines().filter(|l| l.contains(WAITING_LINE)).collect();
        assert_eq!(
            waiting.len(),
            causes.len(),
            "one line per change of cause, not per retry:\n{log}"
        );
        for (line, cause) in waiting.iter().zip(causes) {
            assert!(line.contains(cause), "{cause:?} in order:\n{log}");
        }
    }

    /// The start-up log: one waiting line (whatever the number of retries), naming `fix`, and
    /// the start.
    fn assert_logged_once(&self, fix: &str) {
        let log = self.log();
        let waiting: Vec<&str> = log.lines().filter(|l| l.contains(WAITING_LINE)).collect();
        assert_eq!(
            waiting.len(),
            1,
            "one line per cause, not per retry:\n{log}"
        );
        assert!(
            waiting[0].contains(fix),
            "the line names the fix: {}",
            waiting[0]
        );
        assert!(log.contains(STARTING_LINE), "{log}");
    }
}

fn client(emulator: &EmulatorHandle) -> kube::Client {
    let uri = emulator.url().parse().expect("emulator URL");
    kube::Client::try_from(kube::Config::new(uri)).expect("client")
}

/// Waits until the emulator has answered `at_least` lists of `resource`: the controller has
/// retried, so a single log line proves it does not log every retry.
async fn wait_lists(emulator: &EmulatorHandle, resource: &str, at_least: u64) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while emulator.request_counts().get("list", resource) < at_least {
        assert!(
            tokio::time::Instant::now() < deadline,
            "fewer than {at_least} lists of {resource}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_started_while_the_authorizer_loads_its_roles_comes_up_by_itself() {
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = repo();
    let port = support::free_port();
    let emulator = emulator(port, &[]).await;
    // A restarted kube-apiserver answers 403 to everything until RBAC has loaded its roles.
    emulator.forbid_requests_for(Duration::from_secs(3600));
    let mut run = Run::start(dir.path(), &repo, &kubeconfig(dir.path(), port));
    run.wait_unready_saying(&["RBAC forbids", "ClusterRole"])
        .await;
    wait_lists(&emulator, "clusterprofiles.config.projectsveltos.io", 3).await;
    run.assert_running("during the 403s");

    emulator.forbid_requests_for(Duration::ZERO);
    run.wait_rolled_out(&client(&emulator)).await;
    run.assert_logged_once("ClusterRoleBinding");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_started_before_its_api_server_listens_then_answers_503_comes_up_by_itself() {
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = repo();
    let port = support::free_port();
    // Nothing listens on the port yet: connection refused.
    let mut run = Run::start(dir.path(), &repo, &kubeconfig(dir.path(), port));
    run.wait_unready_saying(&["cannot reach the management cluster", "onnection refused"])
        .await;

    // The server comes up but is not serving yet (503), as behind a load balancer.
    let emulator = emulator(port, &[]).await;
    emulator.outage_start();
    run.wait_unready_saying(&["cannot reach the management cluster", "unable to handle"])
        .await;
    wait_lists(&emulator, "clusterprofiles.config.projectsveltos.io", 2).await;

    emulator.outage_end();
    run.wait_rolled_out(&client(&emulator)).await;
    // Refused, then 503: two causes, a line each (issue #45), however many retries each saw.
    run.assert_logged_causes(&["onnection refused", "unable to handle"]);
    assert!(run.log().contains(STARTING_LINE));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_cause_from_refused_to_a_tls_error_is_logged_once_each() {
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = repo();
    let port = support::free_port();
    // The kubeconfig says https; nothing listens yet (refused), then a plain-HTTP server answers
    // on the port (the TLS handshake fails), as when a proxy or the wrong port is configured.
    let kubeconfig = kubeconfig_for(dir.path(), &format!("https://127.0.0.1:{port}"));
    let mut run = Run::start(dir.path(), &repo, &kubeconfig);
    run.wait_unready_saying(&["cannot reach the management cluster", "onnection refused"])
        .await;
    let emulator = emulator(port, &[]).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let readyz = run.wait_unready_saying(&["cannot reach"]).await;
        if !readyz.contains("onnection refused") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{readyz}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The TLS failure is retried (backing off to every 5 s) without a line per retry.
    tokio::time::sleep(Duration::from_secs(6)).await;
    run.assert_running("while the TLS handshake failed");
    run.assert_logged_causes(&["onnection refused", "cannot reach"]);
    let log = run.log();
    let second = log.lines().filter(|l| l.contains(WAITING_LINE)).nth(1);
    assert!(
        second.is_some_and(|line| !line.contains("onnection refused")),
        "the second line names the TLS failure:\n{log}"
    );
    drop(emulator);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_started_before_its_crd_is_installed_comes_up_by_itself() {
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = repo();
    let port = support::free_port();
    let emulator = emulator(port, &["gitpromotions"]).await;
    let mut run = Run::start(dir.path(), &repo, &kubeconfig(dir.path(), port));
    run.wait_unready_saying(&["gitpromotions", "tollgate crd | kubectl apply -f -"])
        .await;
    wait_lists(&emulator, "gitpromotions.tollgate.dev", 3).await;
    run.assert_running("without its CRD");

    // Installed after the controller, as `kubectl apply -k deploy/` may well do.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client(&emulator));
    crds.create(
        &PostParams::default(),
        &tollgate::cluster::crd::git_promotion_crd(),
    )
    .await
    .expect("the CRD installs");
    run.wait_rolled_out(&client(&emulator)).await;
    run.assert_logged_once("tollgate crd | kubectl apply -f -");
}

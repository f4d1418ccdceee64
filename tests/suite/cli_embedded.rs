//! `tollgate run --embedded`: a kubeconfig per embedded cluster (never a shared file a second run
//! overwrites), the block that tells a newcomer how to reach it, and connection errors that name
//! the server and the kubeconfig.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use support::{
    KillOnDrop as Controller, TestRepo, eventually, eventually_within, fleet_yaml, seed,
    tollgate_binary as tollgate,
};

struct Run {
    controller: Controller,
    lines: mpsc::Receiver<String>,
}

fn start(repo: &TestRepo, dir: &Path, extra: &[&str]) -> Run {
    start_with_fleet(repo, dir, &fleet_yaml(1, "100ms"), extra)
}

fn start_with_fleet(repo: &TestRepo, dir: &Path, fleet_text: &str, extra: &[&str]) -> Run {
    let fleet = dir.join("fleet.yaml");
    std::fs::write(&fleet, fleet_text).expect("fleet");
    let mut child = tollgate()
        .args(["run", "--repo"])
        .arg(repo.path())
        .args(["--branch", "main", "--interval", "1s", "--embedded"])
        .arg(&fleet)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .args(extra)
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tollgate run starts");
    let stderr = child.stderr.take().expect("stderr piped");
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                return;
            }
        }
    });
    Run {
        controller: Controller(child),
        lines,
    }
}

impl Run {
    /// The stderr lines until one contains `needle` (or the run ends).
    fn lines_until(&self, needle: &str) -> Vec<String> {
        let mut seen = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(60)) {
            let done = line.contains(needle);
            seen.push(line);
            if done {
                return seen;
            }
        }
        panic!("no line with {needle:?} in:\n{}", seen.join("\n"));
    }

    /// The path after `export KUBECONFIG=` in the block the run prints.
    fn printed_kubeconfig(&self) -> PathBuf {
        let lines = self.lines_until("export KUBECONFIG=");
        let line = lines.last().expect("a line");
        PathBuf::from(line.trim().trim_start_matches("export KUBECONFIG="))
    }

    /// Waits for the run to end on its own; its exit status and everything it printed.
    fn exit_output(mut self) -> (std::process::ExitStatus, String) {
        let exit = self.controller.0.wait().expect("wait");
        let mut text = String::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(10)) {
            text.push_str(&line);
            text.push('\n');
        }
        (exit, text)
    }

    fn terminate(mut self) {
        let pid = self.controller.0.id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status();
        let _ = self.controller.0.wait();
    }
}

fn status(kubeconfig: &Path) -> std::process::Output {
    tollgate()
        .args(["status", "--kubeconfig"])
        .arg(kubeconfig)
        .output()
        .expect("status runs")
}

fn repo() -> TestRepo {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "1s"),
    );
    repo.commit("Kyverno");
    repo
}

#[test]
fn two_embedded_runs_never_share_a_kubeconfig() {
    let repo = repo();
    let dir = tempfile::tempdir().expect("temp dir");
    let first = start(&repo, dir.path(), &[]);
    let first_kubeconfig = first.printed_kubeconfig();
    let second = start(&repo, dir.path(), &[]);
    let second_kubeconfig = second.printed_kubeconfig();
    assert_ne!(
        first_kubeconfig, second_kubeconfig,
        "one file for two clusters"
    );
    assert!(first_kubeconfig.starts_with(dir.path().join("cache")));
    for kubeconfig in [&first_kubeconfig, &second_kubeconfig] {
        eventually("status through each run's own kubeconfig", || {
            status(kubeconfig).status.success().then_some(())
        });
    }
    // A run's own kubeconfig goes with it: later use says "no such file", not "refused".
    first.terminate();
    assert!(
        !first_kubeconfig.exists(),
        "the stopped run's kubeconfig stayed"
    );
    assert!(status(&second_kubeconfig).status.success());
    second.terminate();
}

#[test]
fn a_live_runs_kubeconfig_is_never_overwritten() {
    let repo = repo();
    let dir = tempfile::tempdir().expect("temp dir");
    let shared = dir.path().join("shared.kubeconfig");
    let shared_arg = shared.to_str().expect("utf-8 path");
    let first = start(&repo, dir.path(), &["--embedded-kubeconfig", shared_arg]);
    first.lines_until("export KUBECONFIG=");
    let before = std::fs::read_to_string(&shared).expect("kubeconfig written");
    let second = start(&repo, dir.path(), &["--embedded-kubeconfig", shared_arg]);
    let (exit, text) = second.exit_output();
    assert!(!exit.success(), "the second run started:\n{text}");
    assert!(
        text.contains("belongs to a running cluster") && text.contains(shared_arg),
        "the second run must refuse and name the file:\n{text}"
    );
    assert_eq!(
        std::fs::read_to_string(&shared).expect("still there"),
        before,
        "the live run's kubeconfig was overwritten"
    );
    first.terminate();
    // An explicit path is the user's: it stays after the run.
    assert!(shared.exists());
}

#[test]
fn an_unreachable_cluster_is_named_with_its_kubeconfig() {
    let repo = repo();
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kept.kubeconfig");
    let run = start(
        &repo,
        dir.path(),
        &["--embedded-kubeconfig", kubeconfig.to_str().expect("utf-8")],
    );
    let block = run.lines_until("Commit to").join("\n");
    let server = block
        .lines()
        .find_map(|l| l.strip_prefix("embedded management cluster at "))
        .expect("the block names the server")
        .trim()
        .to_string();
    run.terminate();
    let output = status(&kubeconfig);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    for needle in [
        server.as_str(),
        kubeconfig.to_str().expect("utf-8"),
        "Connection refused",
    ] {
        assert!(stderr.contains(needle), "{needle:?} missing in:\n{stderr}");
    }
    assert!(
        !stderr.contains("ERROR kube_client"),
        "kube's own duplicate error line:\n{stderr}"
    );
}

fn project_file(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).expect(path)
}

/// The demo's gate, as shipped: examples/fleet.yaml's health endpoint and the policy
/// examples/promotions/fleet-health-gate.yaml that measures it (each moved to a free port), on a
/// one-stage promotion. The gate passes on the shipped values; after production-2's errorRate is
/// edited to 0.2 in the fleet file (no restart), the next rollout fails its gate and rolls back.
#[test]
fn the_demo_fleet_serves_cluster_health_that_a_web_analysis_gates_on_and_an_edit_fails_it() {
    const SHIPPED: &str = "127.0.0.1:18090";
    let fleet = project_file("examples/fleet.yaml");
    let policy = project_file("examples/promotions/fleet-health-gate.yaml");
    assert!(
        fleet.contains(&format!("healthEndpoint: {SHIPPED}")) && policy.contains(SHIPPED),
        "the demo's policy measures another address than the fleet serves"
    );
    let (health_port, api_port) = (support::free_port(), support::free_port());
    let moved = format!("127.0.0.1:{health_port}");
    let repo = TestRepo::new();
    repo.write("gate.yaml", &policy.replace(SHIPPED, &moved));
    repo.write("web.yaml", &gated_promotion("1.0.0"));
    repo.commit("web 1.0.0, gated on fleet health");
    let dir = tempfile::tempdir().expect("temp dir");
    let api = format!("127.0.0.1:{api_port}");
    let run = start_with_fleet(
        &repo,
        dir.path(),
        &fleet.replace(SHIPPED, &moved),
        &["--embedded-listen", &api],
    );
    let block = run.lines_until("export KUBECONFIG=").join("\n");
    assert!(
        block.contains(&format!("embedded management cluster at https://{api}")),
        "{block}"
    );
    assert!(
        block.contains(&format!("fleet health: http://{moved}/clusters/")),
        "{block}"
    );
    let kubeconfig = run.printed_kubeconfig_in(&block);
    let health = format!("127.0.0.1:{health_port}");
    let answer = support::http(&health, "GET", "/clusters/fleet/production-2", &[], b"");
    let (status, body) = answer.expect("the health endpoint answers");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""errorRate":0.002"#), "{body}");
    let unknown = support::http(&health, "GET", "/clusters/fleet/nowhere", &[], b"");
    assert_eq!(unknown.map(|(status, _)| status), Some(404));

    let passed = eventually_within("the gate passes", Duration::from_secs(120), || {
        let text = status_json(&kubeconfig);
        (text["phase"] == "Completed").then_some(text)
    });
    assert_eq!(passed["snapshotIndex"], 1, "{passed:#}");

    let edited = fleet
        .replace(SHIPPED, &moved)
        .replace("health: {errorRate: 0.002}", "health: {errorRate: 0.2}");
    std::fs::write(dir.path().join("fleet.yaml"), edited).expect("fleet edited");
    let (_, body) = support::http(&health, "GET", "/clusters/fleet/production-2", &[], b"")
        .expect("the health endpoint answers");
    assert!(
        body.contains(r#""errorRate":0.2"#),
        "the edit was not served: {body}"
    );
    repo.write("web.yaml", &gated_promotion("1.1.0"));
    repo.commit("web 1.1.0");
    let failed = eventually_within(
        "the gate fails and rolls back",
        Duration::from_secs(120),
        || {
            let text = status_json(&kubeconfig);
            (text["phase"] == "RolledBack").then_some(text)
        },
    );
    let said = failed.to_string();
    assert!(
        said.contains("error-rate") && said.contains("production-2"),
        "{failed:#}"
    );
}

impl Run {
    fn printed_kubeconfig_in(&self, block: &str) -> PathBuf {
        let line = block
            .lines()
            .find(|l| l.contains("export KUBECONFIG="))
            .expect("the export line");
        PathBuf::from(line.trim().trim_start_matches("export KUBECONFIG="))
    }
}

fn status_json(kubeconfig: &Path) -> serde_json::Value {
    let out = tollgate()
        .args(["status", "web", "-o", "json", "--kubeconfig"])
        .arg(kubeconfig)
        .output()
        .expect("status runs");
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    shown["status"].clone()
}

fn gated_promotion(version: &str) -> String {
    format!(
        "apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata:
  name: web
  labels: {{gate: fleet-health}}
spec:
  profileSpec:
    helmCharts:
    - {{repositoryURL: https://charts.example.com, repositoryName: example, chartName: example/web, chartVersion: {version}, releaseName: web, releaseNamespace: web, helmChartAction: Install}}
  stages:
  - name: production
    clusterSelector: {{matchLabels: {{env: production}}}}
    trigger: {{auto: {{}}}}
"
    )
}

//! The main job through the CLI: `tollgate run --embedded FLEET` as a real process, observed with
//! `tollgate status` through the kubeconfig it writes; and `--dry-run`, which writes nothing.

use crate::support;

use std::path::Path;
use std::process::{Child, Stdio};

use serde_json::Value;
use support::{
    KillOnDrop as Controller, TestRepo, eventually, fleet_yaml, http, seed,
    tollgate_binary as tollgate,
};
use tollgate_manifest::snapshot::short_sha;

fn start_embedded(repo: &TestRepo, dir: &Path, extra: &[&str]) -> (Controller, std::path::PathBuf) {
    let fleet = dir.join("fleet.yaml");
    std::fs::write(&fleet, fleet_yaml(1, "100ms")).expect("fleet");
    let kubeconfig = dir.join("kubeconfig");
    let child = tollgate()
        .args(["run", "--repo"])
        .arg(repo.path())
        .args(["--branch", "main", "--interval", "1s", "--embedded"])
        .arg(&fleet)
        .arg("--embedded-kubeconfig")
        .arg(&kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .args(["--log", "info"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tollgate run starts");
    (Controller(child), kubeconfig)
}

fn status_json(kubeconfig: &Path) -> Option<Value> {
    let output = tollgate()
        .args(["status", "-o", "json", "--kubeconfig"])
        .arg(kubeconfig)
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| serde_json::from_slice(&output.stdout).ok())
        .flatten()
}

#[test]
fn run_embedded_rolls_out_and_status_reports_it() {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "1s"),
    );
    repo.commit("Kyverno");
    let dir = tempfile::tempdir().expect("temp dir");
    let (_controller, kubeconfig) = start_embedded(&repo, dir.path(), &[]);

    eventually("kubeconfig written", || kubeconfig.exists().then_some(()));
    let statuses = eventually("rollout completed", || {
        status_json(&kubeconfig).filter(|s| s[0]["status"]["phase"] == "Completed")
    });
    assert_eq!(statuses[0]["name"], "kyverno-rollout-auto");

    let output = tollgate()
        .args(["status", "kyverno-rollout-auto", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .expect("status runs");
    assert!(output.status.success());
    let table = String::from_utf8_lossy(&output.stdout);
    for expected in ["Completed", "production", "1/1 provisioned", "completed at"] {
        assert!(table.contains(expected), "{expected:?} missing in\n{table}");
    }

    let missing = tollgate()
        .args(["status", "no-such-promotion", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .expect("status runs");
    assert_eq!(missing.status.code(), Some(1));
}

/// The controller's log names commits the one way, `short_sha` (issue #14 item 7).
#[test]
fn the_git_synced_log_names_head_by_the_one_short_sha() {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "1s"),
    );
    let head = repo.commit("Kyverno");
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut controller, kubeconfig) = start_embedded(&repo, dir.path(), &[]);
    eventually("the commit is synced and rolled out", || {
        status_json(&kubeconfig).filter(|s| s[0]["status"]["phase"] == "Completed")
    });
    let _ = controller.0.kill();
    let log = controller.0.wait_with_output_stderr();
    let synced = log
        .lines()
        .find(|line| line.contains("git synced"))
        .unwrap_or_else(|| panic!("no git synced line in\n{log}"));
    let longer = &head[..=short_sha(&head).len()];
    assert!(
        synced.contains(short_sha(&head)) && !synced.contains(longer),
        "{synced}"
    );
}

#[test]
fn dry_run_logs_actions_and_writes_nothing() {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "1s"),
    );
    repo.commit("Kyverno");
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut controller, kubeconfig) = start_embedded(&repo, dir.path(), &["--dry-run"]);
    let log = StderrTail::of(&mut controller.0);
    eventually("kubeconfig written", || kubeconfig.exists().then_some(()));
    // Events are published once their step's status is persisted (or would be): after the
    // first, nothing the step wrote can be missing from the cluster.
    eventually("a step ended with its events", || {
        log.text()
            .contains("dry-run: event (not published)")
            .then_some(())
    });
    let statuses = status_json(&kubeconfig).expect("status answers");
    assert_eq!(statuses, Value::Array(vec![]), "dry-run persisted a status");
    let _ = controller.0.kill();
    let output = log.after_exit(&mut controller.0);
    assert!(
        output.contains("dry-run: would server-side apply ClusterProfile"),
        "the would-be apply is logged:\n{output}"
    );
    assert!(
        output.contains("dry-run: event (not published)"),
        "events are marked as not published:\n{output}"
    );
}

trait StderrOutput {
    fn wait_with_output_stderr(&mut self) -> String;
}

impl StderrOutput for Child {
    fn wait_with_output_stderr(&mut self) -> String {
        use std::io::Read;
        let _ = self.wait();
        let mut text = String::new();
        if let Some(mut stderr) = self.stderr.take() {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    }
}

/// A child's stderr read as it comes, so a test can wait for a line while the child runs.
struct StderrTail {
    text: std::sync::Arc<std::sync::Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
}

impl StderrTail {
    fn of(child: &mut Child) -> StderrTail {
        use std::io::BufRead;
        let stderr = child.stderr.take().expect("stderr piped");
        let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let read = text.clone();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut text = read.lock().unwrap_or_else(|e| e.into_inner());
                text.push_str(&line);
                text.push('\n');
            }
        });
        StderrTail { text, reader }
    }

    fn text(&self) -> String {
        self.text.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Everything the child wrote, once it has exited.
    fn after_exit(self, child: &mut Child) -> String {
        let _ = child.wait();
        let StderrTail { text, reader } = self;
        let _ = reader.join();
        let text = text.lock().unwrap_or_else(|e| e.into_inner());
        text.clone()
    }
}

/// A remote repository polled hourly: only a signed webhook makes the controller fetch the new
/// commit. Also /readyz and /metrics through the real process.
#[test]
fn signed_webhook_triggers_the_fetch_and_metrics_are_served() {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "1s"),
    );
    repo.commit("Kyverno 3.5.2");
    let dir = tempfile::tempdir().expect("temp dir");
    let secret_file = dir.path().join("webhook-secret");
    std::fs::write(&secret_file, "s3cr3t-webhook-value\n").expect("secret");
    let addr = format!("127.0.0.1:{}", support::free_port());
    let url = format!("file://{}", repo.path().display());
    let fleet = dir.path().join("fleet.yaml");
    std::fs::write(&fleet, fleet_yaml(1, "100ms")).expect("fleet");
    let kubeconfig = dir.path().join("kubeconfig");
    let child = tollgate()
        .args([
            "run",
            "--repo",
            &url,
            "--branch",
            "main",
            "--interval",
            "1h",
            "--embedded",
        ])
        .arg(&fleet)
        .arg("--embedded-kubeconfig")
        .arg(&kubeconfig)
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .args(["--listen", &addr, "--webhook-generic-secret-file"])
        .arg(&secret_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tollgate run starts");
    let _controller = Controller(child);

    eventually("ready", || {
        http(&addr, "GET", "/readyz", &[], b"").filter(|(code, _)| *code == 200)
    });
    eventually("v1 completed", || {
        status_json(&kubeconfig).filter(|s| s[0]["status"]["phase"] == "Completed")
    });

    repo.write(
        "kyverno.yaml",
        &seed("06-kyverno-rollout-auto-v2.yaml", "1s"),
    );
    repo.commit("Kyverno 3.6.2");
    let body = br#"{"ref": "refs/heads/main"}"#;
    let (code, _) = http(
        &addr,
        "POST",
        "/webhooks/generic",
        &[("X-Tollgate-Signature", "sha256=0000")],
        body,
    )
    .expect("webhook answers");
    assert_eq!(code, 401, "a wrong signature is refused");
    let signature = format!(
        "sha256={}",
        tollgate::outbound::signature::hmac_sha256_hex(b"s3cr3t-webhook-value", body)
    );
    let (code, _) = http(
        &addr,
        "POST",
        "/webhooks/generic",
        &[("X-Tollgate-Signature", &signature)],
        body,
    )
    .expect("webhook answers");
    assert_eq!(code, 202);
    eventually("the webhook-triggered fetch rolls out snapshot 2", || {
        status_json(&kubeconfig).filter(|s| s[0]["status"]["snapshotIndex"] == 2)
    });

    let (code, metrics) = http(&addr, "GET", "/metrics", &[], b"").expect("metrics");
    assert_eq!(code, 200);
    for family in [
        "tollgate_reconciles_total",
        "tollgate_git_syncs_total",
        "tollgate_stage_transitions_total",
        "tollgate_promotion_phase",
        "tollgate_webhook_requests_total",
    ] {
        assert!(metrics.contains(family), "{family} missing from /metrics");
    }
    assert!(
        !metrics.contains("s3cr3t"),
        "the secret leaks into /metrics"
    );
}

/// The shipped Deployment mounts the git token and webhook Secrets as optional: when one is
/// missing, `run` starts without that feature and says so, naming the flag and the path. A file
/// that exists but is empty is a misconfiguration and stops `run` with an error naming it.
#[test]
fn run_starts_without_a_missing_optional_secret_and_says_so() {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "1s"),
    );
    repo.commit("Kyverno");
    let dir = tempfile::tempdir().expect("temp dir");
    let missing_webhook = dir.path().join("webhook/github");
    let missing_token = dir.path().join("git/token");
    let addr = format!("127.0.0.1:{}", support::free_port());
    let webhook_flag = format!("--webhook-github-secret-file={}", missing_webhook.display());
    let token_flag = format!("--git-token-file={}", missing_token.display());
    let (mut controller, _) = start_embedded(
        &repo,
        dir.path(),
        &["--listen", &addr, &webhook_flag, &token_flag],
    );
    eventually("ready without the secrets", || {
        http(&addr, "GET", "/readyz", &[], b"").filter(|(code, _)| *code == 200)
    });
    let (code, _) = http(&addr, "POST", "/webhooks/github", &[], b"{}").expect("answers");
    assert_eq!(code, 404, "the webhook without a secret is disabled");
    let _ = controller.0.kill();
    let log = controller.0.wait_with_output_stderr();
    for expected in [
        format!(
            "--webhook-github-secret-file {}: the file does not exist; starting without the GitHub webhook",
            missing_webhook.display()
        ),
        format!(
            "--git-token-file {}: the file does not exist; starting without a git token",
            missing_token.display()
        ),
    ] {
        assert!(log.contains(&expected), "{expected:?} missing in\n{log}");
    }

    let empty = dir.path().join("empty-secret");
    std::fs::write(&empty, "\n").expect("empty secret file");
    let output = tollgate()
        .args(["run", "--repo"])
        .arg(repo.path())
        .arg("--webhook-github-secret-file")
        .arg(&empty)
        .args(["--kubeconfig", "/nonexistent/kubeconfig"])
        .output()
        .expect("tollgate run");
    assert_eq!(output.status.code(), Some(2), "a configuration error");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "--webhook-github-secret-file {}: the file is empty",
            empty.display()
        )),
        "{stderr}"
    );
}

#[test]
fn a_failed_fetch_is_one_log_line_and_claims_nothing_before_a_sync() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = format!("file://{}/no-such-repo", dir.path().display());
    let fleet = dir.path().join("fleet.yaml");
    std::fs::write(&fleet, fleet_yaml(1, "100ms")).expect("fleet");
    let mut controller = Controller(
        tollgate()
            .args(["run", "--repo", &missing, "--interval", "1s", "--embedded"])
            .arg(&fleet)
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .args(["--log", "info"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tollgate run starts"),
    );
    let tail = StderrTail::of(&mut controller.0);
    // Two failed fetches: the second one as the first must say nothing ran yet.
    eventually("two failed fetches logged", || {
        let failed = tail.text().matches("git sync failed").count();
        (failed >= 2).then_some(())
    });
    let _ = controller.0.kill();
    let log = tail.after_exit(&mut controller.0);
    let failures: Vec<&str> = log.lines().filter(|l| l.contains("WARN")).collect();
    assert!(!failures.is_empty(), "no failure logged:\n{log}");
    for line in &failures {
        assert!(
            line.contains("git sync failed; nothing synced yet"),
            "one line per failed fetch, and no claim that a last good state runs:\n{log}"
        );
    }
}

/// `tollgate run --otlp-endpoint` (issue #49 item 2): the real process sends the run's trace,
/// as OTLP/HTTP protobuf, with the usual `OTEL_BSP_SCHEDULE_DELAY` read; the trace id is the one
/// in the run history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_an_otlp_endpoint_sends_each_run_as_a_trace() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message as _;
    use support::receiver::{Answer, Receiver};

    let receiver = Receiver::start(Answer::Ok).await;
    let endpoint = receiver.url("");
    tokio::task::block_in_place(|| {
        let repo = TestRepo::new();
        repo.write(
            "kyverno.yaml",
            &seed("05-kyverno-rollout-auto-v1.yaml", "0s"),
        );
        repo.commit("Kyverno");
        let dir = tempfile::tempdir().expect("temp dir");
        let fleet = dir.path().join("fleet.yaml");
        std::fs::write(&fleet, fleet_yaml(1, "100ms")).expect("fleet");
        let kubeconfig = dir.path().join("kubeconfig");
        let _controller = Controller(
            tollgate()
                .args(["run", "--repo"])
                .arg(repo.path())
                .args(["--interval", "1s", "--embedded"])
                .arg(&fleet)
                .arg("--embedded-kubeconfig")
                .arg(&kubeconfig)
                .arg("--cache-dir")
                .arg(dir.path().join("cache"))
                .args(["--otlp-endpoint", &endpoint])
                .env("OTEL_BSP_SCHEDULE_DELAY", "100")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("tollgate run starts"),
        );
        let statuses = eventually("rollout completed", || {
            status_json(&kubeconfig).filter(|s| s[0]["status"]["phase"] == "Completed")
        });
        let trace = statuses[0]["status"]["runs"][0]["traceId"]
            .as_str()
            .expect("the run's trace id")
            .to_string();
        let root = eventually("the run's root span", || {
            receiver
                .under("/v1/traces")
                .iter()
                .flat_map(|got| {
                    ExportTraceServiceRequest::decode(got.body.clone())
                        .expect("OTLP protobuf")
                        .resource_spans
                })
                .flat_map(|r| r.scope_spans)
                .flat_map(|s| s.spans)
                .find(|span| span.name == "run")
        });
        let hex: String = root.trace_id.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, trace, "the root span is not the run history's trace");
    });
}

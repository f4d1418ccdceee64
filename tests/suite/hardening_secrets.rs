//! No secret ever leaves the process: the git token (right or wrong, from a file or embedded in the
//! repository URL) and the webhook secret never appear in logs (debug level, JSON), statuses,
//! events, generated objects, HTTP responses, metrics or error messages — including on the failure
//! paths (rejected credentials, an unreachable remote, forged webhooks), where leaks usually hide.
//!
//! Drives `tollgate run` as a real process against a smart-HTTP git server with basic auth.

use crate::git_http_server;
use crate::support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use git_http_server::GitHttpServer;
use serde_json::Value;
use support::{TestRepo, eventually, fleet_yaml, http, seed};

const TOKEN: &str = "tok-SECRET-9f3a1c77";
const WRONG_TOKEN: &str = "wrong-SECRET-77e2d4";
const URL_PASSWORD: &str = "url-SECRET-41b0aa";
const WEBHOOK_SECRET: &str = "whsec-SECRET-c0ffee";
const TOKEN_USER: &str = "x-access-token";
// Notification endpoints (issue #19): a Slack URL is its own credential, so its path is secret.
const NOTIFY_URL_PATH: &str = "hooks-SECRET-5ac4c7";
const NOTIFY_HMAC: &str = "hmac-SECRET-d15ea5";
const NOTIFY_TOKEN: &str = "ghp-SECRET-0b5e55";
// The web view's access token (issue #35): its pages must never show it, nor any other secret.
const UI_TOKEN: &str = "ui-SECRET-7e11a0";

/// Every form in which a secret could leak: itself and inside a basic-auth header.
fn forbidden() -> Vec<String> {
    let mut all = Vec::new();
    for secret in [
        TOKEN,
        WRONG_TOKEN,
        URL_PASSWORD,
        WEBHOOK_SECRET,
        NOTIFY_URL_PATH,
        NOTIFY_HMAC,
        NOTIFY_TOKEN,
        UI_TOKEN,
    ] {
        all.push(secret.to_string());
        all.push(
            base64::engine::general_purpose::STANDARD.encode(format!("{TOKEN_USER}:{secret}")),
        );
    }
    all
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in forbidden() {
        assert!(
            !text.contains(&secret),
            "{what} leaks a secret ({secret}):\n{}",
            excerpt(text, &secret)
        );
    }
}

fn excerpt(text: &str, needle: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| line.contains(needle))
        .take(3)
        .collect();
    lines.join("\n")
}

/// `tollgate run` with its stderr collected line by line.
struct Controller {
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Controller {
    fn start(args: &[&str]) -> Controller {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("tollgate"))
            .args(["--log", "debug", "--log-format", "json", "run"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tollgate run starts");
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().expect("stderr");
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut log = sink.lock().expect("log");
                log.push_str(&line);
                log.push('\n');
            }
        });
        Controller { child, log }
    }

    fn log(&self) -> String {
        self.log.lock().expect("log").clone()
    }

    /// Waits for a log line whose message contains `message`; returns that line's fields.
    fn wait_for_log(&self, message: &str) -> Value {
        eventually(&format!("log line {message:?}"), || {
            self.log().lines().find_map(|line| {
                let entry: Value = serde_json::from_str(line).ok()?;
                let text = entry.pointer("/fields/message")?.as_str()?;
                text.contains(message)
                    .then(|| entry.get("fields").cloned())
                    .flatten()
            })
        })
    }

    fn count_log(&self, message: &str) -> usize {
        self.log().matches(message).count()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback HTTP receiver for notifications: 401 to paths under `/refuse`, 200 to others.
fn notification_receiver() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind receiver");
    let addr = listener.local_addr().expect("receiver address").to_string();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            let mut request = [0u8; 16384];
            let read = stream.read(&mut request).unwrap_or(0);
            let head = String::from_utf8_lossy(&request[..read]);
            let status = if head.contains(" /refuse") {
                "401 Unauthorized"
            } else {
                "200 OK"
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    addr
}

/// A RolloutPolicy telling three endpoints: one that answers, one that refuses (401), one whose
/// port is closed (connection refused, retried for 3 s, given up).
fn notifying_policy(dir: &Path) -> String {
    let receiver = notification_receiver();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .to_string(); // the listener is dropped: nothing listens there any more
    let file = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write secret");
        path.to_str().expect("utf-8 path").to_string()
    };
    let chat = file(
        "chat-url",
        format!("http://{receiver}/services/{NOTIFY_URL_PATH}\n"),
    );
    let hook = file(
        "hook-secret",
        format!("http://{receiver}/refuse/{NOTIFY_URL_PATH}\n{NOTIFY_HMAC}\n"),
    );
    let status = file(
        "github-token",
        format!("http://{closed}/repos/{NOTIFY_URL_PATH}/r\n{NOTIFY_TOKEN}\n"),
    );
    tollgate_fixtures::policy("fleet-defaults")
        .notify("chat", "slack", &chat, &["StageStarted", "Completed"])
        .notify("hook", "webhook", &hook, &["StageStarted"])
        .notify("status", "github", &status, &["StageStarted"])
        .notify_retry_for("3s")
        .to_yaml()
}

fn response(answer: Option<(u16, String)>) -> String {
    let (code, body) = answer.expect("an HTTP answer");
    format!("{code} {body}\n")
}

fn emulator_addr(kubeconfig: &Path) -> String {
    let text = std::fs::read_to_string(kubeconfig).expect("kubeconfig");
    let server = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("server:"))
        .expect("server in kubeconfig");
    server
        .trim()
        .trim_matches('"')
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string()
}

fn status_json(kubeconfig: &Path) -> String {
    let output = Command::new(assert_cmd::cargo::cargo_bin("tollgate"))
        .args(["status", "-o", "json", "--kubeconfig"])
        .arg(kubeconfig)
        .output()
        .expect("tollgate status");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The web view's pages, refused without the token and served with it.
fn web_pages(addr: &str) -> String {
    let refused = http(addr, "GET", "/ui", &[], b"").expect("an answer");
    assert_eq!(refused.0, 401, "the web view asks for its token");
    let (_, list) = http(addr, "GET", "/api/v1/promotions", &[], b"").expect("promotions");
    let list: Value = serde_json::from_str(&list).expect("promotions JSON");
    let bearer = format!("Bearer {UI_TOKEN}");
    let auth = [("Authorization", bearer.as_str())];
    let mut pages = response(Some(refused));
    let mut paths = vec!["/ui".to_string(), "/ui/login".to_string()];
    for name in list.as_array().into_iter().flatten() {
        let name = name["name"].as_str().expect("a name");
        paths.push(format!("/ui/promotions/{name}"));
        paths.push(format!("/ui/promotions/{name}/timeline.svg"));
    }
    for path in &paths {
        let page = http(addr, "GET", path, &auth, b"").expect("a page");
        assert_eq!(page.0, 200, "{path}: {}", page.1);
        pages.push_str(&response(Some(page)));
    }
    assert!(pages.contains("Pipeline"), "a promotion page was served");
    pages
}

#[test]
fn secrets_never_appear_in_logs_statuses_events_or_responses() {
    // Upstream: a bare repository served over smart HTTP, readable only with TOKEN.
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "1s"),
    );
    let secrets_dir = tempfile::tempdir().expect("secrets dir");
    repo.write("policy.yaml", &notifying_policy(secrets_dir.path()));
    repo.commit("Kyverno, told to three notification endpoints");
    let served = tempfile::tempdir().expect("served dir");
    let bare = served.path().join("promos.git");
    repo.git(&[
        "clone",
        "-q",
        "--bare",
        ".",
        bare.to_str().expect("utf-8 path"),
    ]);
    let git_server = GitHttpServer::start(served.path().to_path_buf(), TOKEN_USER, TOKEN);
    let url = format!("{}/promos.git", git_server.base_url);

    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, content: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, content).expect("write");
        path.to_str().expect("utf-8 path").to_string()
    };
    let fleet = write("fleet.yaml", &fleet_yaml(1, "100ms"));
    let wrong_token = write("wrong-token", &format!("{WRONG_TOKEN}\n"));
    let token = write("token", &format!("{TOKEN}\n"));
    let webhook_secret = write("webhook-secret", WEBHOOK_SECRET);
    let ui_token = write("ui-token", &format!("{UI_TOKEN}\n"));

    // 1. Rejected credentials, one of them embedded in the URL: the failure is logged, the
    //    secrets are not.
    let url_with_password = url.replacen(
        "http://",
        &format!("http://{TOKEN_USER}:{URL_PASSWORD}@"),
        1,
    );
    let kubeconfig_a = dir.path().join("kubeconfig-a");
    let rejected = Controller::start(&[
        "--repo",
        &url_with_password,
        "--git-token-file",
        &wrong_token,
        "--interval",
        "1s",
        "--embedded",
        &fleet,
        "--embedded-kubeconfig",
        kubeconfig_a.to_str().expect("utf-8"),
        "--cache-dir",
        dir.path().join("cache-a").to_str().expect("utf-8"),
    ]);
    rejected.wait_for_log("git sync failed");
    eventually("a retried failure", || {
        (rejected.count_log("git sync failed") >= 2).then_some(())
    });
    assert_no_secret("the log of a rejected fetch", &rejected.log());
    assert_no_secret("status after a rejected fetch", &status_json(&kubeconfig_a));
    drop(rejected);

    // 2. The right token: a rollout, webhooks (forged and genuine), then the remote vanishes.
    let kubeconfig = dir.path().join("kubeconfig");
    let controller = Controller::start(&[
        "--repo",
        &url,
        "--git-token-file",
        &token,
        "--interval",
        "1s",
        "--embedded",
        &fleet,
        "--embedded-kubeconfig",
        kubeconfig.to_str().expect("utf-8"),
        // The cluster's content is read below with a plain HTTP request.
        "--embedded-insecure-http",
        "--cache-dir",
        dir.path().join("cache").to_str().expect("utf-8"),
        "--listen",
        "127.0.0.1:0",
        "--webhook-github-secret-file",
        &webhook_secret,
        "--ui",
        "--ui-token-file",
        &ui_token,
    ]);
    let serving = controller.wait_for_log("serving /healthz");
    let addr = serving["addr"].as_str().expect("bound address").to_string();
    eventually("the rollout completes", || {
        let status: Value = serde_json::from_str(&status_json(&kubeconfig)).ok()?;
        let text = status.to_string();
        text.contains("Completed").then_some(())
    });

    // Notifications: delivered, refused with 401, and given up after retries on a closed port.
    controller.wait_for_log("notification delivered");
    for endpoint in ["hook", "status"] {
        let needle = format!("\"endpoint\":\"{endpoint}\"");
        eventually(&format!("the {endpoint} notification given up"), || {
            controller
                .log()
                .lines()
                .any(|l| l.contains("notification not delivered") && l.contains(&needle))
                .then_some(())
        });
    }

    let push = br#"{"ref":"refs/heads/main"}"#;
    let genuine = format!(
        "sha256={}",
        tollgate::outbound::signature::hmac_sha256_hex(WEBHOOK_SECRET.as_bytes(), push)
    );
    let forged = format!(
        "sha256={}",
        tollgate::outbound::signature::hmac_sha256_hex(WRONG_TOKEN.as_bytes(), push)
    );
    let mut responses = String::new();
    for signature in [forged, genuine] {
        let headers = [
            ("X-GitHub-Event", "push"),
            ("X-Hub-Signature-256", signature.as_str()),
            ("Content-Type", "application/json"),
        ];
        responses.push_str(&response(http(
            &addr,
            "POST",
            "/webhooks/github",
            &headers,
            push,
        )));
    }
    assert!(responses.contains("401"), "the forged webhook is refused");
    assert!(responses.contains("202"), "the genuine webhook is accepted");

    // The remote disappears: connection errors are logged on every retry.
    let failures_before = controller.count_log("git sync failed");
    drop(git_server);
    eventually("a sync failure against the vanished remote", || {
        (controller.count_log("git sync failed") > failures_before).then_some(())
    });

    for path in ["/metrics", "/api/v1/promotions", "/readyz", "/healthz"] {
        responses.push_str(&response(http(&addr, "GET", path, &[], b"")));
    }
    responses.push_str(&web_pages(&addr));
    let emulator = emulator_addr(&kubeconfig);
    let mut cluster = String::new();
    for path in [
        "/apis/tollgate.dev/v1alpha1/gitpromotions",
        "/apis/events.k8s.io/v1/events",
        "/api/v1/events",
        "/apis/config.projectsveltos.io/v1beta1/clusterprofiles",
        "/apis/coordination.k8s.io/v1/leases",
    ] {
        cluster.push_str(&response(http(&emulator, "GET", path, &[], b"")));
    }
    // The events were really published (so the check above covered them), to the GitPromotion.
    let (_, events) =
        http(&emulator, "GET", "/apis/events.k8s.io/v1/events", &[], b"").expect("events list");
    let events: Value = serde_json::from_str(&events).expect("events JSON");
    let provisioned = events["items"].as_array().is_some_and(|items| {
        items.iter().any(|event| {
            event["reason"] == "Provisioned" && event["regarding"]["kind"] == "GitPromotion"
        })
    });
    assert!(
        provisioned,
        "a Provisioned event on the GitPromotion: {events}"
    );
    assert!(
        cluster.contains("GitPromotion") && cluster.contains("kyverno"),
        "the cluster holds what the controller wrote:\n{cluster}"
    );

    assert_no_secret(
        "HTTP responses (webhooks, metrics, status API, web view)",
        &responses,
    );
    assert_no_secret("objects and events on the cluster", &cluster);
    assert_no_secret("tollgate status", &status_json(&kubeconfig));
    assert_no_secret("the controller's debug log", &controller.log());
}

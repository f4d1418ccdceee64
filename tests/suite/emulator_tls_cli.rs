//! The embedded cluster as the CLI serves it: HTTPS with a generated CA and authentication by
//! default (`run --embedded`, `tollgate emulator`), plain HTTP only when asked. The controller
//! rolls out over TLS with the bearer token, `tollgate status` reads the written kubeconfig with
//! its client certificate, a client without credentials is refused, and the token is never logged.

use crate::support;

use support::child_emulator::ChildEmulator;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::Value;
use support::{
    KillOnDrop as Process, TestRepo, eventually, fleet_yaml, http, seed,
    tollgate_binary as tollgate,
};

const TOKEN_CONTEXT: &str = "tollgate-emulator-token";

fn status(kubeconfig: &Path, extra: &[&str]) -> Output {
    tollgate()
        .args(["status", "-o", "json", "--kubeconfig"])
        .arg(kubeconfig)
        .args(extra)
        .output()
        .expect("tollgate status runs")
}

fn status_json(kubeconfig: &Path, extra: &[&str]) -> Option<Value> {
    let output = status(kubeconfig, extra);
    output
        .status
        .success()
        .then(|| serde_json::from_slice(&output.stdout).ok())
        .flatten()
}

fn write_fleet(dir: &Path) -> PathBuf {
    let fleet = dir.join("fleet.yaml");
    std::fs::write(&fleet, fleet_yaml(1, "100ms")).expect("fleet");
    fleet
}

/// The value of the first `key: value` line of a kubeconfig (our writer puts one per line).
fn field(kubeconfig: &str, key: &str) -> Option<String> {
    kubeconfig.lines().find_map(|line| {
        let value = line.trim().strip_prefix(key)?.strip_prefix(':')?;
        Some(value.trim().trim_matches('"').to_string())
    })
}

/// The written kubeconfig with the same cluster (server and CA) but a user without credentials.
fn anonymous_kubeconfig(written: &str) -> String {
    let (cluster, _) = written.split_once("contexts:").expect("a contexts section");
    format!(
        "{cluster}contexts:\n- name: anonymous\n  context:\n    cluster: tollgate-emulator\n    user: anonymous\n\
         current-context: anonymous\nusers:\n- name: anonymous\n  user: {{}}\n"
    )
}

#[test]
fn tls_run_embedded_rolls_out_with_token_and_status_reads_it_with_client_certificate() {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "1s"),
    );
    repo.commit("Kyverno");
    let dir = tempfile::tempdir().expect("temp dir");
    let fleet = write_fleet(dir.path());
    let kubeconfig = dir.path().join("kubeconfig");
    let log_path = dir.path().join("controller.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let _controller = Process(
        tollgate()
            .args(["--log", "debug", "run", "--repo"])
            .arg(repo.path())
            .args(["--branch", "main", "--interval", "1s", "--embedded"])
            .arg(&fleet)
            .arg("--embedded-kubeconfig")
            .arg(&kubeconfig)
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("tollgate run starts"),
    );
    eventually("kubeconfig written", || kubeconfig.exists().then_some(()));
    let written = std::fs::read_to_string(&kubeconfig).expect("kubeconfig");
    let server = field(&written, "server").expect("server");
    assert!(server.starts_with("https://127.0.0.1:"), "{server}");
    assert!(field(&written, "certificate-authority-data").is_some());
    assert!(field(&written, "client-certificate-data").is_some());
    let token = field(&written, "token").expect("a token user");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&kubeconfig)
            .expect("metadata")
            .permissions();
        assert_eq!(mode.mode() & 0o777, 0o600, "credentials are private");
    }

    // The controller (token) rolls out; status (client certificate, the default context) sees it.
    let statuses = eventually("rollout completed, read over TLS", || {
        status_json(&kubeconfig, &[]).filter(|s| s[0]["status"]["phase"] == "Completed")
    });
    assert_eq!(statuses[0]["name"], "kyverno-rollout-auto");
    let by_token = status_json(&kubeconfig, &["--context", TOKEN_CONTEXT]).expect("token works");
    assert_eq!(by_token[0]["status"]["phase"], "Completed");

    // No credentials: refused.
    let anonymous = dir.path().join("anonymous.kubeconfig");
    std::fs::write(&anonymous, anonymous_kubeconfig(&written)).expect("anonymous kubeconfig");
    let refused = status(&anonymous, &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "no credentials, no status");
    assert!(stderr.contains("Unauthorized"), "{stderr}");

    let logged = std::fs::read_to_string(&log_path).expect("controller log");
    assert!(logged.contains("DEBUG"), "the log is at debug level");
    assert!(!logged.contains(&token), "the token is never logged");
    let printed = String::from_utf8_lossy(&status(&kubeconfig, &[]).stdout).into_owned();
    assert!(!printed.contains(&token), "nor shown by status");
}

fn start_emulator(dir: &Path, extra: &[&str]) -> (ChildEmulator, PathBuf) {
    let emulator = ChildEmulator::start(dir, &fleet_yaml(1, "100ms"), extra);
    let kubeconfig = emulator.kubeconfig.clone();
    (emulator, kubeconfig)
}

#[test]
fn tls_emulator_command_serves_https_by_default() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_emulator, kubeconfig) = start_emulator(dir.path(), &[]);
    let written = std::fs::read_to_string(&kubeconfig).expect("kubeconfig");
    let server = field(&written, "server").expect("server");
    let address = server.strip_prefix("https://").expect("https");
    assert_eq!(
        http(address, "GET", "/version", &[], b""),
        None,
        "no plain HTTP answer from a TLS server"
    );
    let statuses = status_json(&kubeconfig, &[]).expect("status over TLS");
    assert_eq!(statuses, Value::Array(Vec::new()));
}

#[test]
fn tls_emulator_command_serves_plain_http_when_asked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_emulator, kubeconfig) = start_emulator(dir.path(), &["--insecure-http"]);
    let written = std::fs::read_to_string(&kubeconfig).expect("kubeconfig");
    let server = field(&written, "server").expect("server");
    let address = server.strip_prefix("http://").expect("http");
    assert!(field(&written, "token").is_none(), "no credentials");
    let (code, _) =
        http(address, "GET", "/api/v1/namespaces", &[], b"").expect("a plain HTTP answer");
    assert_eq!(code, 200, "no authentication over plain HTTP");
}

//! The CLI where users' shells and clusters differ from the happy path: a reader that closes the
//! pipe early, a `KUBECONFIG` in the environment (set, empty), an X.509 v1 client certificate, and
//! a cluster without the GitPromotion CRD or without the RBAC to read it.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use support::{TestRepo, eventually, fleet_yaml, seed};
use tollgate_emulator::{Emulator, EmulatorConfig, EmulatorHandle, Fleet};

fn tollgate() -> Command {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("tollgate"));
    command.env_remove("KUBECONFIG");
    command
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A repository with two snapshots of `kyverno-rollout-auto`.
fn two_commit_repo() -> TestRepo {
    let repo = TestRepo::new();
    repo.write(
        "kyverno.yaml",
        &seed("05-kyverno-rollout-auto-v1.yaml", "1s"),
    );
    repo.commit("Kyverno v1");
    repo.write(
        "kyverno.yaml",
        &seed("06-kyverno-rollout-auto-v2.yaml", "1s"),
    );
    repo.commit("Kyverno v2");
    repo
}

/// Runs `command` with its stdout on a pipe whose reading end is already closed: every write
/// fails with EPIPE, deterministically (no race with an early-exiting reader).
fn run_into_closed_pipe(mut command: Command) -> Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    command
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("tollgate runs")
}

fn assert_quiet_broken_pipe(what: &str, output: &Output) {
    let stderr = text(&output.stderr);
    assert!(
        matches!(output.status.code(), Some(0 | 141)),
        "{what}: exit {:?}, stderr: {stderr}",
        output.status.code()
    );
    assert!(stderr.trim().is_empty(), "{what}: stderr: {stderr}");
}

async fn emulator(without_types: &[&str]) -> EmulatorHandle {
    let fleet = Fleet::parse(&fleet_yaml(1, "100ms"), Path::new("fleet.yaml")).expect("fleet");
    Emulator::start(EmulatorConfig {
        fleet,
        without_types: without_types.iter().map(ToString::to_string).collect(),
        ..support::emulator_config()
    })
    .await
    .expect("emulator starts")
}

/// Runs a blocking command while the test's runtime keeps serving the emulator.
async fn output_of(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || command.output().expect("tollgate runs"))
        .await
        .expect("join")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_to_a_closed_pipe_ends_quietly() {
    let repo = two_commit_repo();
    let mut validate = tollgate();
    validate.arg("validate").arg(repo.path());
    assert_quiet_broken_pipe("validate", &run_into_closed_pipe(validate));

    let mut history = tollgate();
    history
        .args(["history", "kyverno-rollout-auto", "--repo"])
        .arg(repo.path());
    assert_quiet_broken_pipe("history", &run_into_closed_pipe(history));

    let mut plan = tollgate();
    plan.args(["plan", "--from", "main~1", "--to", "main", "--repo"])
        .arg(repo.path());
    assert_quiet_broken_pipe("plan", &run_into_closed_pipe(plan));

    let mut crd = tollgate();
    crd.arg("crd");
    assert_quiet_broken_pipe("crd", &run_into_closed_pipe(crd));

    // clap_complete panicked on the closed pipe (exit 101).
    for shell in ["bash", "zsh", "fish"] {
        let mut completions = tollgate();
        completions.args(["completions", shell]);
        assert_quiet_broken_pipe("completions", &run_into_closed_pipe(completions));
    }

    let cluster = emulator(&[]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let mut status = tollgate();
    status.args(["status", "--kubeconfig"]).arg(&kubeconfig);
    let output = tokio::task::spawn_blocking(move || run_into_closed_pipe(status))
        .await
        .expect("join");
    assert_quiet_broken_pipe("status", &output);
}

#[test]
fn approve_into_a_closed_pipe_still_commits() {
    let repo = TestRepo::new();
    repo.write("manual.yaml", &seed("08-kyverno-rollout-manual.yaml", "1s"));
    repo.commit("Kyverno with a manual gate");
    let mut approve = tollgate();
    approve
        .args(["approve", "kyverno-prog-rollout-man", "staging", "--repo"])
        .arg(repo.path());
    let output = run_into_closed_pipe(approve);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        !repo
            .git(&["branch", "--list", "tollgate/approve-*"])
            .is_empty(),
        "the approval was committed although nobody read the report"
    );
}

struct Controller(Child);

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_kubeconfig_in_the_shell_does_not_break_run_embedded() {
    let repo = two_commit_repo();
    let dir = tempfile::tempdir().expect("temp dir");
    let fleet = dir.path().join("fleet.yaml");
    std::fs::write(&fleet, fleet_yaml(1, "100ms")).expect("fleet");
    let embedded_kubeconfig = dir.path().join("embedded.kubeconfig");
    // The shell's KUBECONFIG names some other cluster (here: a file that does not even exist).
    let mut child = Controller(
        tollgate()
            .env("KUBECONFIG", dir.path().join("someone-elses.kubeconfig"))
            .args(["run", "--repo"])
            .arg(repo.path())
            .args(["--branch", "main", "--embedded"])
            .arg(&fleet)
            .arg("--embedded-kubeconfig")
            .arg(&embedded_kubeconfig)
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tollgate run starts"),
    );
    eventually("the embedded cluster's kubeconfig is written", || {
        if let Ok(Some(status)) = child.0.try_wait() {
            let mut stderr = String::new();
            if let Some(mut pipe) = child.0.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
            }
            panic!("tollgate run exited ({status}): {stderr}");
        }
        embedded_kubeconfig.exists().then_some(())
    });
    // `status` reaches the embedded cluster through the kubeconfig it wrote, whatever the shell says.
    let status = tollgate()
        .env("KUBECONFIG", dir.path().join("someone-elses.kubeconfig"))
        .args(["status", "--kubeconfig"])
        .arg(&embedded_kubeconfig)
        .output()
        .expect("status runs");
    assert!(status.status.success(), "{}", text(&status.stderr));
}

/// A HOME whose `~/.kube/config` points at `cluster`.
fn home_with_kubeconfig(cluster: &EmulatorHandle) -> tempfile::TempDir {
    let home = tempfile::tempdir().expect("home");
    std::fs::create_dir_all(home.path().join(".kube")).expect("mkdir");
    cluster
        .write_kubeconfig(&home.path().join(".kube/config"))
        .expect("kubeconfig");
    home
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_kubeconfig_variable_means_unset() {
    let cluster = emulator(&[]).await;
    let home = home_with_kubeconfig(&cluster);
    let mut status = tollgate();
    status
        .env("KUBECONFIG", "")
        .env("HOME", home.path())
        .arg("status");
    let output = output_of(status).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "no promotions\n");

    // A `:`-separated list, as kubectl takes it, with an empty entry.
    let listed = home.path().join(".kube/config").display().to_string();
    let mut status = tollgate();
    status
        .env("KUBECONFIG", format!(":{listed}"))
        .env("HOME", "/nonexistent")
        .arg("status");
    let output = output_of(status).await;
    assert!(output.status.success(), "{}", text(&output.stderr));
}

/// A kubeconfig that is not there is named once, in plain words: kube's own message quoted the
/// path's debug form in quotes of its own (`'"/path"'`).
#[test]
fn a_missing_kubeconfig_is_named_once_without_doubled_quotes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("gone.kubeconfig");
    let by_flag = tollgate()
        .args(["status", "--kubeconfig"])
        .arg(&missing)
        .output()
        .expect("status runs");
    let by_variable = tollgate()
        .env("KUBECONFIG", &missing)
        .arg("status")
        .output()
        .expect("status runs");
    for output in [by_flag, by_variable] {
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(!stderr.contains("'\""), "doubled quotes: {stderr}");
        assert!(stderr.contains("No such file or directory"), "{stderr}");
        let named = stderr.matches(&missing.display().to_string()).count();
        assert!(named >= 1, "the file is named: {stderr}");
    }
}

fn openssl(dir: &Path, args: &[&str]) -> bool {
    Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A kubeconfig for an https server with a client certificate made by `openssl x509 -req`
/// without extensions: X.509 v1. `None` when the openssl CLI is not available.
fn v1_client_kubeconfig(dir: &Path) -> Option<PathBuf> {
    let made = openssl(
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "client.key",
            "-out",
            "client.csr",
            "-subj",
            "/CN=tester",
        ],
    ) && openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "client.csr",
            "-signkey",
            "client.key",
            "-out",
            "client.crt",
            "-days",
            "2",
        ],
    );
    if !made {
        return None;
    }
    let kubeconfig = dir.join("kubeconfig");
    let yaml = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:9
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    client-certificate: {0}/client.crt
    client-key: {0}/client.key
contexts:
- name: c
  context: {{cluster: c, user: u}}
current-context: c
",
        dir.display()
    );
    std::fs::write(&kubeconfig, yaml).expect("kubeconfig");
    Some(kubeconfig)
}

#[test]
fn an_x509_v1_client_certificate_is_named_as_the_problem() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some(kubeconfig) = v1_client_kubeconfig(dir.path()) else {
        eprintln!("skipped: the openssl CLI is not available to make a v1 certificate");
        return;
    };
    let output = tollgate()
        .args(["status", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .expect("status runs");
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("client certificate"), "{stderr}");
    assert!(stderr.contains("X.509 v1"), "{stderr}");
    assert!(stderr.contains("regenerate it as v3"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_without_the_crd_or_the_rbac_gives_runs_plain_hints() {
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    let without_crd = emulator(&["gitpromotions"]).await;
    without_crd
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig");
    for name in [None, Some("kyverno-rollout-auto")] {
        let mut status = tollgate();
        status.args(["status", "--kubeconfig"]).arg(&kubeconfig);
        status.args(name);
        let output = output_of(status).await;
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name:?}: {stderr}");
        assert!(
            stderr.contains("does not serve gitpromotions: is the gitpromotions.tollgate.dev"),
            "{name:?}: {stderr}"
        );
        assert!(
            stderr.contains("tollgate crd | kubectl apply -f -"),
            "{stderr}"
        );
    }

    let forbidden = emulator(&[]).await;
    forbidden.set_error_code(403);
    forbidden.set_error_rate("list", 1.0);
    forbidden.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let mut status = tollgate();
    status.args(["status", "--kubeconfig"]).arg(&kubeconfig);
    let output = output_of(status).await;
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("RBAC forbids"), "{stderr}");
    assert!(stderr.contains("list gitpromotions"), "{stderr}");
}

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
    KillOnDrop as Controller, TestRepo, eventually, fleet_yaml, seed, tollgate_binary as tollgate,
};

struct Run {
    controller: Controller,
    lines: mpsc::Receiver<String>,
}

fn start(repo: &TestRepo, dir: &Path, extra: &[&str]) -> Run {
    let fleet = dir.join("fleet.yaml");
    std::fs::write(&fleet, fleet_yaml(1, "100ms")).expect("fleet");
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

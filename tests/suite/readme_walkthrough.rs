//! The README's walkthrough as a newcomer types it: `bash examples/demo.sh`, then in a second shell
//! the lines the demo printed (`export KUBECONFIG=…`, `export PATH=…`, `tollgate status`), a commit
//! that bumps the chart (a rollout), and `git revert` (a rollback). No step the README does not give.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use support::{KillOnDrop, eventually};

fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The demo, on this test run's binary (the README's command builds a release one first).
fn start_demo(repo: &Path, cache: &Path) -> (KillOnDrop, mpsc::Receiver<String>) {
    let mut child = Command::new("bash")
        .arg(project_root().join("examples/demo.sh"))
        .env("TOLLGATE_DEMO_REPO", repo)
        .env("TOLLGATE_BIN", assert_cmd::cargo::cargo_bin("tollgate"))
        .env("XDG_CACHE_HOME", cache)
        .env_remove("KUBECONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("demo starts");
    let (send, lines) = mpsc::channel();
    for stream in [
        Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().expect("stderr")),
    ] {
        let send = send.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let _ = send.send(line);
            }
        });
    }
    (KillOnDrop(child), lines)
}

/// The "In another terminal:" lines, up to the repository line.
fn second_terminal_lines(lines: &mpsc::Receiver<String>) -> Vec<String> {
    let mut seen = Vec::new();
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(120)) {
        seen.push(line.clone());
        if line.starts_with("Commit to ") {
            break;
        }
    }
    let start = seen
        .iter()
        .position(|l| l == "In another terminal:")
        .unwrap_or_else(|| panic!("no reach block in:\n{}", seen.join("\n")));
    seen[start + 1..seen.len() - 1]
        .iter()
        .map(|l| l.trim().to_string())
        .collect()
}

/// Runs `command` in a shell that first ran the demo's `export` lines, with a PATH that has no
/// other tollgate: the printed PATH line must be what makes `tollgate` found.
fn in_second_terminal(exports: &[String], command: &str) -> std::process::Output {
    let script = format!("{}\n{command}", exports.join("\n"));
    Command::new("bash")
        .args(["-c", &script])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env_remove("KUBECONFIG")
        .output()
        .expect("bash runs")
}

/// git as the newcomer of the walkthrough runs it: their own identity, nothing else configured.
fn git(repo: &Path, args: &[&str]) {
    let mut command = tollgate_fixtures::git::isolated(repo);
    command.args([
        "-c",
        "user.name=New User",
        "-c",
        "user.email=new@example.com",
    ]);
    command.args(args);
    tollgate_fixtures::git::run(command, args);
}

#[test]
fn the_readme_walkthrough_rolls_out_and_back_with_only_the_printed_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = dir.path().join("tollgate-demo");
    let (_demo, lines) = start_demo(&repo, &dir.path().join("cache"));
    let block = second_terminal_lines(&lines);
    let exports: Vec<String> = block
        .iter()
        .filter(|l| l.starts_with("export "))
        .cloned()
        .collect();
    assert!(
        exports.iter().any(|l| l.starts_with("export KUBECONFIG=")),
        "{block:?}"
    );
    assert!(
        block.iter().any(|l| l == "tollgate status --watch"),
        "{block:?}"
    );

    let status_of = |name: &str| {
        let output = in_second_terminal(&exports, &format!("tollgate status {name}"));
        String::from_utf8_lossy(&output.stdout).to_string()
            + &String::from_utf8_lossy(&output.stderr)
    };
    eventually("the first rollout is visible", || {
        status_of("kyverno-rollout-auto")
            .contains("#1")
            .then_some(())
    });
    // "Once the first rollout is `Completed` (about a minute: each stage soaks 20s)"
    // Three stages of a 20s soak each, with provisioning: more than the usual patience.
    support::eventually_within(
        "the first rollout completes",
        std::time::Duration::from_secs(180),
        || {
            status_of("kyverno-rollout-auto")
                .contains("Completed")
                .then_some(())
        },
    );

    // "edit kyverno-rollout-auto.yaml: chartVersion: 3.5.2 → 3.6.2, then git commit -am …"
    let file = repo.join("kyverno-rollout-auto.yaml");
    let text = std::fs::read_to_string(&file).expect("the demo copied the examples");
    assert!(
        text.contains("3.5.2"),
        "the README's version is in the example"
    );
    std::fs::write(&file, text.replace("3.5.2", "3.6.2")).expect("edit");
    git(&repo, &["commit", "-qam", "Kyverno 3.6.2"]);
    eventually("snapshot #2 rolls out", || {
        status_of("kyverno-rollout-auto")
            .contains("#2")
            .then_some(())
    });

    // "Roll back. git revert --no-edit HEAD … status says #3 … (rollback to #1)"
    git(&repo, &["revert", "--no-edit", "HEAD"]);
    eventually("the revert is a rollback to #1", || {
        let text = status_of("kyverno-rollout-auto");
        (text.contains("#3") && text.contains("rollback to #1")).then_some(())
    });
}

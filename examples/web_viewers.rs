//! Web view harness (issue #49 item 5): what many viewers of the live overview cost `tollgate ui`,
//! and how soon a change reaches every one of them.
//!
//! Starts `tollgate run --embedded` on a generated repository (the management cluster and the
//! controller), then `tollgate ui` against it, opens `--viewers` server-sent-event streams of the
//! overview, and measures:
//! - the `ui` process's CPU over `--quiet-secs` while nothing changes (from /proc, in % of a core;
//!   its idle CPU without viewers is measured first and reported beside it);
//! - after a commit that changes one promotion: for each viewer, when its first event after the
//!   commit arrived; reported as the spread (last viewer − first viewer) and from the commit.
//!
//! `cargo run --release --example web_viewers -- [--binary PATH] [--viewers 200] [--promotions 20]
//! [--quiet-secs 20] [--settle-secs 65]` prints one JSON document. `--binary` measures another build (A/B).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1).cloned()
}

fn number(name: &str, default: u64) -> u64 {
    arg(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn promotion(name: &str, version: u64) -> String {
    format!(
        "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\nmetadata:\n  name: {name}\nspec:\n  profileSpec:\n    helmCharts:\n    - repositoryURL: https://charts.example.com\n      repositoryName: example\n      chartName: example/app\n      chartVersion: 1.0.{version}\n      releaseName: app\n      releaseNamespace: app\n  stages:\n  - name: dev\n    clusterSelector:\n      matchLabels:\n        env: dev\n  - name: prod\n    clusterSelector:\n      matchLabels:\n        env: prod\n"
    )
}

const FLEET: &str = "defaults:\n  latency: 50ms\nclusters:\n- name: dev-1\n  namespace: fleet\n  labels: {env: dev}\n- name: prod-1\n  namespace: fleet\n  labels: {env: prod}\n";

/// A process killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(120), "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// utime + stime of `pid`, in clock ticks (100 per second on Linux).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after_name = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap_or(0) + fields[12].parse::<u64>().unwrap_or(0)
}

/// % of one core `pid` used over `window`.
fn cpu_percent(pid: u32, window: Duration) -> f64 {
    let before = cpu_ticks(pid);
    std::thread::sleep(window);
    let used = cpu_ticks(pid) - before;
    used as f64 / window.as_secs_f64()
}

/// One viewer: the instants its `fragments` events arrived.
fn open_viewer(port: u16, arrivals: Arc<Mutex<Vec<Instant>>>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let request = format!(
        "GET /ui/events/overview HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).expect("request");
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { return };
            if line.starts_with("event: fragments") {
                arrivals.lock().expect("lock").push(Instant::now());
            }
        }
    });
}

/// The `tollgate` binary of the profile this example was built with (`target/<profile>/`).
fn beside_this_example() -> PathBuf {
    let exe = std::env::current_exe().expect("this example's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/examples");
    profile_dir.join("tollgate")
}

fn git(dir: &Path, args: &[&str]) {
    tollgate_fixtures::git::git(dir, args);
}

fn main() {
    let binary: PathBuf = arg("--binary")
        .map(PathBuf::from)
        .unwrap_or_else(beside_this_example);
    let viewers = number("--viewers", 200) as usize;
    let promotions = number("--promotions", 20);
    let quiet = Duration::from_secs(number("--quiet-secs", 20));
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).expect("repo dir");
    git(&repo, &["init", "-q", "-b", "main"]);
    for i in 0..promotions {
        std::fs::write(
            repo.join(format!("p{i}.yaml")),
            promotion(&format!("p{i}"), 0),
        )
        .expect("write");
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "promotions"]);
    std::fs::write(dir.path().join("fleet.yaml"), FLEET).expect("fleet");
    let kubeconfig = dir.path().join("kubeconfig");

    let _controller = Running(
        Command::new(&binary)
            .args(["--log", "warn", "run", "--repo"])
            .arg(&repo)
            .arg("--embedded")
            .arg(dir.path().join("fleet.yaml"))
            .arg("--embedded-kubeconfig")
            .arg(&kubeconfig)
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .args(["--interval", "1s", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tollgate run"),
    );
    wait_for("the embedded cluster's kubeconfig", || kubeconfig.exists());
    let port = free_port();
    let ui = Running(
        Command::new(&binary)
            .args([
                "--log",
                "warn",
                "ui",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--kubeconfig",
            ])
            .arg(&kubeconfig)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tollgate ui"),
    );
    wait_for("the web view", || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    // Let every promotion complete and its "completed … ago" reach minutes, so nothing changes
    // while the viewers watch.
    std::thread::sleep(Duration::from_secs(number("--settle-secs", 65)));
    let idle = cpu_percent(ui.0.id(), quiet);

    let arrivals: Vec<Arc<Mutex<Vec<Instant>>>> = (0..viewers).map(|_| Arc::default()).collect();
    for viewer in &arrivals {
        open_viewer(port, viewer.clone());
    }
    wait_for("every viewer's first event", || {
        arrivals.iter().all(|a| !a.lock().expect("lock").is_empty())
    });
    std::thread::sleep(Duration::from_secs(2));
    let watched = cpu_percent(ui.0.id(), quiet);

    let counts: Vec<usize> = arrivals
        .iter()
        .map(|a| a.lock().expect("lock").len())
        .collect();
    std::fs::write(repo.join("p0.yaml"), promotion("p0", 1)).expect("write");
    git(&repo, &["commit", "-q", "-am", "p0 1.0.1"]);
    let committed = Instant::now();
    wait_for("the change to reach every viewer", || {
        arrivals
            .iter()
            .zip(&counts)
            .all(|(a, before)| a.lock().expect("lock").len() > *before)
    });
    let reached: Vec<Instant> = arrivals
        .iter()
        .zip(&counts)
        .map(|(a, before)| a.lock().expect("lock")[*before])
        .collect();
    let first = reached.iter().min().copied().expect("a viewer");
    let last = reached.iter().max().copied().expect("a viewer");
    let report = json!({
        "binary": binary.display().to_string(),
        "viewers": viewers,
        "promotions": promotions,
        "quietSeconds": quiet.as_secs(),
        "uiCpuPercentNoViewers": idle,
        "uiCpuPercentWithViewers": watched,
        "changeSpreadMs": (last - first).as_secs_f64() * 1000.0,
        "commitToFirstViewerMs": (first - committed).as_secs_f64() * 1000.0,
        "commitToLastViewerMs": (last - committed).as_secs_f64() * 1000.0,
    });
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
}

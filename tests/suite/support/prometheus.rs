//! A real Prometheus for the analysis gates' end-to-end tests: Debian's `/usr/bin/prometheus`,
//! started ONCE per test binary on loopback (a free port, a temp data dir, a 1 s scrape
//! interval), scraping a test exporter served from this process whose series the tests set.
//!
//! Tests of one binary share both, so each test names its series with a label of its own
//! (`test="<name>"`). The server outlives no test binary: it runs under a `sh` that kills it and
//! removes its data dir when this process's end closes the `sh`'s stdin (statics are never
//! dropped, and a killed test binary runs no destructor either).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Where Debian's package installs the server.
pub const PROMETHEUS_BINARY: &str = "/usr/bin/prometheus";

/// How long the server may take to become ready on a loaded machine.
const STARTUP_PATIENCE: Duration = Duration::from_secs(60);

/// The running server and exporter of this test binary.
pub struct Prometheus {
    /// `http://127.0.0.1:<port>`: an analysis's `prometheus.address`.
    pub address: String,
    /// File-discovered scrape targets, one file per job ([`Prometheus::scrape`]).
    targets: std::path::PathBuf,
    exporter: &'static Exporter,
    /// Held open for the life of the process: its close tells the `sh` to stop the server.
    _lifeline: Mutex<(Child, ChildStdin)>,
}

/// The series served on `/metrics`: the exposition line's name and labels → value.
#[derive(Default)]
struct Exporter {
    series: Mutex<BTreeMap<String, f64>>,
}

static PROMETHEUS: OnceLock<Option<Prometheus>> = OnceLock::new();
static EXPORTER: OnceLock<Exporter> = OnceLock::new();

/// This binary's Prometheus, started at the first call. `None` (after a notice) when the binary
/// is missing outside CI; with `CI` set a missing binary fails the test.
pub fn prometheus() -> Option<&'static Prometheus> {
    PROMETHEUS.get_or_init(start).as_ref()
}

fn start() -> Option<Prometheus> {
    if !std::path::Path::new(PROMETHEUS_BINARY).exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{PROMETHEUS_BINARY} is missing: `apt-get install -y prometheus` (.ci/run installs it)"
        );
        eprintln!("SKIPPED: {PROMETHEUS_BINARY} missing (apt-get install -y prometheus)");
        return None;
    }
    let exporter = EXPORTER.get_or_init(Exporter::default);
    let exporter_port = exporter.serve();
    let port = super::free_port();
    let dir = tempfile::Builder::new()
        .prefix("tollgate-prometheus-")
        .tempdir()
        .expect("temp dir")
        .keep();
    let config = dir.join("prometheus.yml");
    std::fs::create_dir_all(dir.join("targets")).expect("targets dir");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n- job_name: exporter\n  static_configs:\n  - targets: ['127.0.0.1:{exporter_port}']\n\
             - job_name: discovered\n  file_sd_configs:\n  - files: ['{}/*.json']\n    refresh_interval: 1s\n",
            dir.join("targets").display()
        ),
    )
    .expect("prometheus.yml written");
    // `read` returns at EOF: when this process ends, whatever way.
    let script =
        r#""$0" "$@" >"$DIR/log" 2>&1 </dev/null & p=$!; read _; kill $p; wait $p; rm -rf "$DIR""#;
    let mut child = Command::new("sh")
        .args(["-c", script, PROMETHEUS_BINARY])
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--storage.tsdb.retention.time=1h")
        .env("DIR", &dir)
        .stdin(Stdio::piped())
        .spawn()
        .expect("sh starts prometheus");
    let stdin = child.stdin.take().expect("piped stdin");
    let address = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + STARTUP_PATIENCE;
    while get(&address, "/-/ready").map(|(code, _)| code) != Some(200) {
        if let Ok(Some(exit)) = child.try_wait() {
            let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
            panic!("prometheus exited ({exit}):\n{log}");
        }
        assert!(Instant::now() < deadline, "prometheus not ready in time");
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(Prometheus {
        address,
        targets: dir.join("targets"),
        exporter,
        _lifeline: Mutex::new((child, stdin)),
    })
}

impl Prometheus {
    /// Scrapes `host:port` from now on, its series labelled `job`, every second (the target
    /// file is read within a second).
    pub fn scrape(&self, job: &str, target: &str) {
        let file = serde_json::json!([{"targets": [target], "labels": {"job": job}}]);
        // Written aside and renamed: Prometheus never reads half a file.
        let partial = self.targets.join(format!("{job}.json.partial"));
        std::fs::write(&partial, file.to_string()).expect("target file");
        std::fs::rename(&partial, self.targets.join(format!("{job}.json"))).expect("target file");
    }

    /// Serves `name{labels} value` from now on (Prometheus sees it at its next scrape).
    pub fn set(&self, name: &str, labels: &[(&str, &str)], value: f64) {
        let line = series(name, labels);
        self.exporter.lock().insert(line, value);
    }

    /// The instant query's answer (the whole `data` document), or why it failed.
    pub fn query(&self, query: &str) -> Result<Value, String> {
        let encoded: String = form_urlencoded::byte_serialize(query.as_bytes()).collect();
        let (code, body) =
            get(&self.address, &format!("/api/v1/query?query={encoded}")).ok_or("no answer")?;
        let document: Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
        match code {
            200 => Ok(document["data"].clone()),
            _ => Err(format!("{code}: {body}")),
        }
    }

    /// Waits until `query` returns the samples `values` (in any order): Prometheus has scraped
    /// what the test set. Event-free by nature (a scrape is on Prometheus' clock), so polled.
    pub fn wait_for(&self, query: &str, values: &[f64]) {
        let mut wanted: Vec<f64> = values.to_vec();
        wanted.sort_by(f64::total_cmp);
        let deadline = Instant::now() + super::PATIENCE;
        loop {
            let mut got: Vec<f64> = self
                .query(query)
                .ok()
                .and_then(|data| data["result"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|s| s["value"][1].as_str()?.parse().ok())
                .collect();
            got.sort_by(f64::total_cmp);
            if got == wanted {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus never answered {query} with {wanted:?} (last: {got:?})"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Exporter {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, f64>> {
        self.series.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Serves `/metrics` (any path, in fact) on a free loopback port, from a thread.
    fn serve(&'static self) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").expect("exporter binds");
        let port = listener.local_addr().expect("exporter address").port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = self.answer(stream);
            }
        });
        port
    }

    fn answer(&self, mut stream: TcpStream) -> std::io::Result<()> {
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        read_head(&mut stream)?;
        let mut body = String::new();
        for (line, value) in self.lock().iter() {
            body.push_str(&format!("{line} {value}\n"));
        }
        write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    }
}

/// Reads a request up to the end of its headers (the requests answered here have no body).
pub fn read_head(stream: &mut TcpStream) -> std::io::Result<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte)? == 0 {
            break;
        }
        head.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

fn series(name: &str, labels: &[(&str, &str)]) -> String {
    let labels: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    format!("{name}{{{}}}", labels.join(","))
}

fn get(address: &str, path: &str) -> Option<(u16, String)> {
    let host = address.strip_prefix("http://")?;
    super::http(host, "GET", path, &[], b"")
}

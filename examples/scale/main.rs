//! Scale harness (issue #8): N promotions of S stages over a fleet of M clusters, the controller
//! in-process against the emulator over HTTP and a real local git repository.
//!
//! `cargo run --release --example scale -- --promotions N --stages S --clusters M
//!  [--shards 100] [--quiet-secs 10] [--poll-ms 100] [--changes 5] [--latency-ms 20]
//!  [--request-latency-ms 0] [--max-inflight N] [--concurrency N | --max-concurrency 256]
//!  [--distinct-specs] [--analysis | --policy-only] [--burst 1000]`
//!
//! `--latency-ms` is the fleet's provisioning latency; `--request-latency-ms` delays every API
//! answer of the emulator (a slower server); `--max-inflight N` makes it answer 429 (Retry-After
//! 1 s) to requests over N in flight, read-only and mutating each, like kube-apiserver's
//! --max-requests-inflight and --max-mutating-requests-inflight. `--concurrency N` runs the controller with a fixed
//! concurrency, otherwise it adapts up to `--max-concurrency` (the default, as `tollgate run`).
//!
//! Clusters carry `shard=<i % shards>`; promotion p's stage s selects shard `(p*S + s) % shards`,
//! so each stage matches M/shards clusters and the fleet holds N × S × M/shards ClusterSummaries.
//! All promotions deploy the same chart unless `--distinct-specs` gives each its own version, as
//! in a real fleet, where no two generated profiles carry the same spec.
//!
//! `--analysis` adds a RolloutPolicy with one Prometheus analysis gating every stage (issue #32),
//! against a stub query endpoint in this process (threads `analysis-stub`, counted with the
//! harness, not the controller) that answers every instant query at once with `0`: the
//! controller's cost of scheduling, making and recording measurements, without a real Prometheus.
//! `--policy-only` adds the same policy without analyses: the baseline that tells what analyses
//! cost apart from what being governed by a policy costs.
//!
//! The emulator runs in a child process (this binary with `--emulator-child`), so this process's
//! RSS and CPU are the controller's (plus the harness's main thread, reported apart). The child
//! answers one-line queries on stdin/stdout: resourceVersion, request counts, the write log's
//! newest matching write, its own CPU and peak RSS.
//!
//! Prints one JSON document:
//! - cold start → every stage-1 profile applied (seen by a watch), and → the API is quiet;
//! - one-file change: `git commit` of a chart bump → that promotion's stage-1 profile carries it
//!   (emulator write time), timed from before `git commit` starts (its own duration reported apart);
//! - controller CPU per idle git poll over a quiet window;
//! - peak RSS (VmHWM) of the controller process and of the emulator process;
//! - API requests by verb, total and over the quiet window (writes there must be 0);
//! - then the burst (`--burst N`, 1,000 by default, 0 skips it; see `burst.rs`): N promotions
//!   whose first stages all complete in the same instant, p50/p99/max from each one's last
//!   Sveltos status change to its next stage's apply, and the controller's peak RSS after it.

mod burst;

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use kube::{Client, Config};
use serde_json::{Value, json};
use tollgate::cli::run::controller_client;
use tollgate::cluster::leader::LeaderGate;
use tollgate::cluster::resources;
use tollgate::cluster::throttle::{Concurrency, DEFAULT_MAX_CONCURRENCY};
use tollgate::controller::{self, ControllerConfig, PruneGuard};
use tollgate_emulator::{Emulator, EmulatorConfig, EmulatorHandle, Fleet, RequestCounts};
use tollgate_source::SourceConfig;

// The allocator the tollgate binary ships with, so the controller measured here is the one deployed.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// "throttled": requests the emulator's in-flight limit refused with 429.
const VERBS: [&str; 9] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "apply",
    "throttled",
];

struct Args {
    promotions: usize,
    stages: usize,
    clusters: usize,
    shards: usize,
    quiet: Duration,
    poll: Duration,
    changes: usize,
    latency_ms: u64,
    request_latency_ms: u64,
    /// 0: no limit.
    max_inflight: u64,
    concurrency: Concurrency,
    /// Every promotion its own chart version, so no two generated profile specs are equal (as in
    /// a real fleet); otherwise all share one chart and the caches hold 100 distinct specs.
    distinct_specs: bool,
    /// One analysis per stage against the stub query endpoint.
    analysis: bool,
    /// The policy of `--analysis` without its analyses: the baseline that isolates what
    /// scheduling analyses costs from what governing by a policy costs.
    policy_only: bool,
    /// Promotions in the burst after the main measurement (0: none).
    burst: usize,
    emulator_child: bool,
}

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    match args.iter().position(|a| a == name) {
        None => default,
        Some(i) => match args.get(i + 1).map(|v| v.parse::<u64>()) {
            Some(Ok(value)) => value,
            _ => {
                eprintln!("{name} needs a non-negative integer");
                std::process::exit(2);
            }
        },
    }
}

impl Args {
    fn parse() -> Args {
        let args: Vec<String> = std::env::args().collect();
        let mut parsed = Args {
            promotions: arg(&args, "--promotions", 100) as usize,
            stages: arg(&args, "--stages", 4) as usize,
            clusters: arg(&args, "--clusters", 1_000) as usize,
            shards: arg(&args, "--shards", 100) as usize,
            quiet: Duration::from_secs(arg(&args, "--quiet-secs", 10)),
            poll: Duration::from_millis(arg(&args, "--poll-ms", 100)),
            changes: arg(&args, "--changes", 5) as usize,
            latency_ms: arg(&args, "--latency-ms", 20),
            request_latency_ms: arg(&args, "--request-latency-ms", 0),
            max_inflight: arg(&args, "--max-inflight", 0),
            concurrency: Concurrency::from_flags(
                match arg(&args, "--concurrency", 0) {
                    0 => None,
                    fixed => Some(fixed as usize),
                },
                arg(&args, "--max-concurrency", DEFAULT_MAX_CONCURRENCY as u64) as usize,
            ),
            distinct_specs: args.iter().any(|a| a == "--distinct-specs"),
            analysis: args.iter().any(|a| a == "--analysis"),
            policy_only: args.iter().any(|a| a == "--policy-only"),
            burst: arg(&args, "--burst", 1_000) as usize,
            emulator_child: args.iter().any(|a| a == "--emulator-child"),
        };
        if parsed.promotions == 0 || parsed.stages == 0 || parsed.shards == 0 {
            eprintln!("--promotions, --stages and --shards must be positive");
            std::process::exit(2);
        }
        if !args.iter().any(|a| a == "--burst") {
            // The default burst fits the fleet: up to 1,000 promotions, none with one stage.
            parsed.burst = match parsed.stages {
                1 => 0,
                _ => parsed.burst.min(parsed.promotions),
            };
        }
        // The emulator child is told the burst, not the promotions: it only sizes its write log.
        let burst_fits =
            parsed.burst <= parsed.promotions && (parsed.burst == 0 || parsed.stages > 1);
        if !parsed.emulator_child && !burst_fits {
            eprintln!("--burst needs at least as many promotions, and two stages");
            std::process::exit(2);
        }
        parsed
    }
}

fn git(dir: &Path, args: &[&str]) {
    tollgate_fixtures::git::git(dir, args);
}

fn profile_name(promotion: usize, stage: usize) -> String {
    format!("p{promotion}-s{stage}")
}

/// Promotion `index` at chart `version`: S stages without triggers, each selecting one shard.
fn promotion(index: usize, stages: usize, shards: usize, version: &str) -> String {
    let mut yaml = format!(
        "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\nmetadata:\n  name: p{index}\nspec:\n  profileSpec:\n    helmCharts:\n    - repositoryURL: https://charts.example.com\n      repositoryName: example\n      chartName: example/app\n      chartVersion: {version}\n      releaseName: app\n      releaseNamespace: app\n  stages:\n"
    );
    for stage in 0..stages {
        let shard = (index * stages + stage) % shards;
        yaml.push_str(&format!(
            "  - name: s{stage}\n    clusterSelector:\n      matchLabels:\n        shard: \"{shard}\"\n"
        ));
    }
    yaml
}

/// The policy of `--policy-only`: governs every promotion, gates nothing. `--analysis` adds its
/// analyses to this very text, so the baseline differs from it only by them.
const POLICY_WITHOUT_ANALYSES: &str = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: scale\nspec:\n  selector: {}\n";

/// The policy of `--analysis`: one Prometheus analysis on every stage, one measurement each.
fn analysis_policy(stages: usize, address: &str) -> String {
    let mut yaml = format!(
        "{POLICY_WITHOUT_ANALYSES}  analyses:\n  - name: errors\n    prometheus:\n      address: {address}\n      query: 'sum(errors{{cluster=~\"{{{{ clustersRegex }}}}\"}})'\n    successCondition: result < 0.01\n  stages:\n"
    );
    for stage in 0..stages {
        yaml.push_str(&format!("    s{stage}: {{analyses: [errors]}}\n"));
    }
    yaml
}

/// Promotion steps so far, by result, as `/metrics` counts them.
/// The chunks of a body, read in order.
struct ChunkReader<'a> {
    chunks: std::slice::Iter<'a, axum::body::Bytes>,
    current: &'a [u8],
}

impl std::io::Read for ChunkReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.chunks.next() {
                Some(chunk) => self.current = chunk,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current = &self.current[n..];
        Ok(n)
    }
}

/// Every line of a gzipped, chunked exposition, decompressed as it is read.
fn for_each_line(chunks: &[axum::body::Bytes], mut visit: impl FnMut(&str)) {
    let reader = ChunkReader {
        chunks: chunks.iter(),
        current: &[],
    };
    for line in BufReader::new(flate2::read::GzDecoder::new(reader)).lines() {
        match line {
            Ok(line) => visit(&line),
            Err(error) => {
                eprintln!("scrape: {error}");
                return;
            }
        }
    }
}

/// Reconciles by result, from a scrape.
fn reconciles(chunks: &[axum::body::Bytes]) -> serde_json::Map<String, Value> {
    let mut by_result = serde_json::Map::new();
    for_each_line(chunks, |line| {
        if let Some((result, count)) = line
            .strip_prefix("tollgate_reconciles_total{result=\"")
            .and_then(|rest| rest.split_once("\"} "))
        {
            by_result.insert(
                result.to_string(),
                json!(count.parse::<f64>().unwrap_or(0.0)),
            );
        }
    });
    by_result
}

/// The size of a gzipped `/metrics` scrape: bytes (text and gzipped), samples, and the five families with the most bytes.
fn exposition_sizes(chunks: &[axum::body::Bytes]) -> Value {
    let mut by_family = BTreeMap::<String, (usize, usize)>::new();
    let mut text_bytes = 0;
    for_each_line(chunks, |line| {
        text_bytes += line.len() + 1;
        if line.starts_with('#') {
            return;
        }
        let name = line.split(['{', ' ']).next().unwrap_or_default();
        let family = name
            .trim_end_matches("_bucket")
            .trim_end_matches("_sum")
            .trim_end_matches("_count");
        let entry = by_family.entry(family.to_string()).or_default();
        entry.0 += line.len() + 1;
        entry.1 += 1;
    });
    let mut largest: Vec<_> = by_family.into_iter().collect();
    largest.sort_by_key(|(_, (bytes, _))| std::cmp::Reverse(*bytes));
    json!({
        "bytes": text_bytes,
        "gzipped_bytes": chunks.iter().map(|c| c.len()).sum::<usize>(),
        "chunks": chunks.len(),
        "samples": largest.iter().map(|(_, (_, n))| n).sum::<usize>(),
        "largest_families": largest.iter().take(5)
            .map(|(name, (bytes, samples))| json!({"family": name, "bytes": bytes, "samples": samples}))
            .collect::<Vec<_>>(),
    })
}

/// The size of one promotion's state object (its status, mostly) as the API server serves it.
async fn state_object_bytes(client: Client, name: &str) -> Option<usize> {
    let api: Api<tollgate::cluster::crd::GitPromotion> = Api::all(client);
    let object = api.get(name).await.ok()?;
    serde_json::to_vec(&object).ok().map(|bytes| bytes.len())
}

/// Threads of the stub query endpoint (their CPU is the harness's).
const STUB_THREAD: &str = "analysis-stub";

/// A stub Prometheus: answers every request (keep-alive) with a one-sample vector `0` at once.
/// Returns its address and the count of queries answered.
fn start_query_stub() -> (String, Arc<std::sync::atomic::AtomicU64>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("stub binds");
    let address = format!("http://{}", listener.local_addr().expect("stub address"));
    let answered = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = answered.clone();
    let body = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"0"]}]}}"#;
    let spawn = move || {
        for stream in listener.incoming().flatten() {
            let count = count.clone();
            let serve = move || serve_stub(stream, body, &count);
            let _ = std::thread::Builder::new()
                .name(STUB_THREAD.into())
                .spawn(serve);
        }
    };
    std::thread::Builder::new()
        .name(STUB_THREAD.into())
        .spawn(spawn)
        .expect("stub thread");
    (address, answered)
}

fn serve_stub(stream: std::net::TcpStream, body: &str, count: &std::sync::atomic::AtomicU64) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        // The request line and headers up to the blank line; GETs carry no body.
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) if line == "\r\n" => break,
                Ok(_) => {}
            }
        }
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if reader.get_mut().write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

fn fleet(clusters: usize, shards: usize, latency_ms: u64) -> Fleet {
    let mut yaml = format!("defaults: {{latency: {latency_ms}ms}}\nclusters:\n");
    for i in 0..clusters {
        yaml.push_str(&format!(
            "- {{name: c{i}, namespace: fleet, labels: {{shard: \"{}\"}}}}\n",
            i % shards
        ));
    }
    Fleet::parse(&yaml, Path::new("scale-fleet.yaml")).expect("generated fleet parses")
}

/// `VmHWM`/`VmRSS` of this process in MiB.
fn memory_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// CPU seconds of one `/proc/.../stat` line: utime + stime.
fn stat_cpu_seconds(stat: &str) -> Option<(String, f64)> {
    // Clock ticks are 100 Hz on Linux unless the kernel is built otherwise.
    const TICKS: f64 = 100.0;
    // `pid (comm) state ...`: comm may hold spaces, so split at the last parenthesis.
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let comm = stat[open + 1..close].to_string();
    let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
    // After comm: state is field 3, utime 14 and stime 15 (1-based over the whole line).
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i).and_then(|v| v.parse::<f64>().ok()))
        .sum();
    Some((comm, ticks / TICKS))
}

/// CPU seconds of this process, split into (controller, harness): the harness is the main
/// thread and the stub's threads, the rest (controller runtime, git thread, filesystem watcher,
/// blocking-pool threads, also those that ended) is the controller's. The emulator is another
/// process.
fn cpu_by_part() -> (f64, f64) {
    let (_, harness) = cpu_by_thread();
    let total = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .as_deref()
        .and_then(stat_cpu_seconds)
        .map_or(f64::NAN, |(_, seconds)| seconds);
    (total - harness, harness)
}

/// CPU seconds of the threads alive now, by thread name (digits dropped, so that numbered
/// workers add up), and the harness's part of them.
fn cpu_by_thread() -> (BTreeMap<String, f64>, f64) {
    let pid = std::process::id().to_string();
    let (mut by_name, mut harness) = (BTreeMap::new(), 0.0);
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return (by_name, f64::NAN);
    };
    for task in tasks.flatten() {
        let tid = task.file_name().to_string_lossy().to_string();
        let Some((comm, seconds)) = std::fs::read_to_string(task.path().join("stat"))
            .ok()
            .as_deref()
            .and_then(stat_cpu_seconds)
        else {
            continue;
        };
        if tid == pid || comm.starts_with(STUB_THREAD) {
            harness += seconds;
        }
        let name: String = comm.chars().filter(|c| !c.is_ascii_digit()).collect();
        *by_name.entry(name).or_insert(0.0) += seconds;
    }
    (by_name, harness)
}

fn by_verb(counts: &RequestCounts) -> Value {
    let mut map = serde_json::Map::new();
    for verb in VERBS {
        let n = counts.verb(verb);
        if n > 0 {
            map.insert(verb.to_string(), json!(n));
        }
    }
    map.insert("writes".into(), json!(counts.writes()));
    Value::Object(map)
}

fn ms(d: chrono::Duration) -> f64 {
    d.num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0
}

/// The emulator child process, queried one line at a time.
struct EmulatorProcess {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    url: String,
}

impl EmulatorProcess {
    fn start(args: &Args) -> EmulatorProcess {
        let exe = std::env::current_exe().expect("own executable");
        let mut child = Command::new(exe)
            .args([
                "--emulator-child",
                "--clusters",
                &args.clusters.to_string(),
                "--shards",
                &args.shards.to_string(),
                "--latency-ms",
                &args.latency_ms.to_string(),
                "--request-latency-ms",
                &args.request_latency_ms.to_string(),
                "--max-inflight",
                &args.max_inflight.to_string(),
                "--burst",
                &args.burst.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // A heap profiler preloaded into the harness profiles the controller, not the emulator.
            .env_remove("LD_PRELOAD")
            .spawn()
            .expect("emulator child starts");
        let input = child.stdin.take().expect("child stdin");
        let output = BufReader::new(child.stdout.take().expect("child stdout"));
        let mut process = EmulatorProcess {
            child,
            input,
            output,
            url: String::new(),
        };
        process.url = process.read_line();
        process
    }

    fn read_line(&mut self) -> String {
        let mut line = String::new();
        self.output.read_line(&mut line).expect("child answers");
        line.trim_end().to_string()
    }

    fn ask(&mut self, query: &str) -> String {
        writeln!(self.input, "{query}").expect("child reads");
        self.input.flush().expect("child reads");
        self.read_line()
    }

    fn resource_version(&mut self) -> u64 {
        self.ask("rv").parse().expect("resourceVersion")
    }

    fn event_reasons(&mut self) -> Value {
        serde_json::from_str(&self.ask("events")).expect("events")
    }

    fn request_counts(&mut self) -> RequestCounts {
        let entries: Vec<(String, String, u64)> =
            serde_json::from_str(&self.ask("counts")).expect("counts");
        RequestCounts(entries.into_iter().map(|(v, r, n)| ((v, r), n)).collect())
    }

    fn reset_request_counts(&mut self) {
        self.ask("reset");
    }

    fn time_of(answer: &str) -> Option<DateTime<Utc>> {
        DateTime::parse_from_rfc3339(answer)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }

    /// When tollgate last wrote `name` with this chart version, if it has.
    fn applied(&mut self, name: &str, version: &str) -> Option<DateTime<Utc>> {
        Self::time_of(&self.ask(&format!("find {name} {version}")))
    }

    fn last_write(&mut self) -> Option<DateTime<Utc>> {
        Self::time_of(&self.ask("last"))
    }

    /// (CPU seconds, peak RSS MiB) of the emulator process.
    fn stats(&mut self) -> (f64, f64) {
        let answer = self.ask("stats");
        let mut parts = answer.split_whitespace().map(|p| p.parse::<f64>());
        match (parts.next(), parts.next()) {
            (Some(Ok(cpu)), Some(Ok(rss))) => (cpu, rss),
            _ => (f64::NAN, f64::NAN),
        }
    }

    fn stop(mut self) {
        drop(self.input);
        let _ = self.child.wait();
    }
}

/// `--emulator-child`: serve the fleet and answer the parent's queries until stdin closes.
fn emulator_child(args: &Args) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .thread_name("emulator")
        .enable_all()
        .build()
        .expect("emulator runtime");
    let emulator = runtime
        .block_on(Emulator::start(EmulatorConfig {
            fleet: fleet(args.clusters, args.shards, args.latency_ms),
            // Only the newest writes are needed (the one-file change); the log holds whole objects.
            // The burst reads its own writes back, every one of them.
            write_log_capacity: Some(2_000 + args.burst * burst::LOG_ENTRIES_PER_PROMOTION),
            watch_history: 10_000,
            crds: vec![tollgate::cluster::crd::git_promotion_crd_json()],
            ..EmulatorConfig::default()
        }))
        .expect("emulator starts");
    emulator.set_request_latency(Duration::from_millis(args.request_latency_ms));
    let max_inflight = (args.max_inflight > 0).then_some(args.max_inflight as usize);
    emulator.set_max_inflight(max_inflight, max_inflight);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "{}", emulator.url()).expect("parent reads");
    out.flush().expect("parent reads");
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let answer = answer(&emulator, &line);
        writeln!(out, "{answer}").expect("parent reads");
        out.flush().expect("parent reads");
    }
    // The parent may still hold keep-alive connections: a graceful shutdown would wait for them.
    // The timer must be created inside the runtime.
    let stopped = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(2), emulator.shutdown()).await
    });
    if stopped.is_err() {
        eprintln!("emulator child: shutdown timed out; exiting anyway");
    }
    runtime.shutdown_background();
}

fn answer(emulator: &EmulatorHandle, query: &str) -> String {
    let words: Vec<&str> = query.split_whitespace().collect();
    let time = |t: Option<DateTime<Utc>>| t.map_or("none".to_string(), |t| t.to_rfc3339());
    match words.as_slice() {
        ["rv"] => emulator.resource_version().to_string(),
        ["counts"] => {
            let entries: Vec<(String, String, u64)> = emulator
                .request_counts()
                .0
                .into_iter()
                .map(|((v, r), n)| (v, r, n))
                .collect();
            json!(entries).to_string()
        }
        ["reset"] => {
            emulator.reset_request_counts();
            "ok".into()
        }
        ["find", name, version] => time(
            emulator
                .newest_write(|w| {
                    w.object["metadata"]["name"] == *name
                        && w.field_manager == "tollgate"
                        && w.object["spec"]["helmCharts"][0]["chartVersion"] == *version
                })
                .map(|w| w.time),
        ),
        ["last"] => time(emulator.last_write().map(|w| w.time)),
        ["latency", ms] => match ms.parse() {
            Ok(ms) => {
                emulator.set_default_latency(Duration::from_millis(ms));
                "ok".into()
            }
            Err(_) => "bad latency".into(),
        },
        ["release"] => burst::release(emulator),
        ["burst", count, committed, released] => {
            burst::answer(emulator, count, committed, released)
        }
        ["events"] => {
            let mut reasons = BTreeMap::<String, u64>::new();
            emulator.scan_write_log(|w| {
                if w.resource.starts_with("events.") {
                    let reason = w.object["reason"].as_str().unwrap_or("?").to_string();
                    *reasons.entry(reason).or_default() += 1;
                }
            });
            json!(reasons).to_string()
        }
        ["stats"] => {
            let cpu = std::fs::read_to_string("/proc/self/stat")
                .ok()
                .as_deref()
                .and_then(stat_cpu_seconds)
                .map_or(f64::NAN, |(_, s)| s);
            format!("{cpu} {}", memory_mib("VmHWM").unwrap_or(f64::NAN))
        }
        _ => "unknown query".into(),
    }
}

fn median(samples: &[f64]) -> Option<f64> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied()
}

fn total_requests(counts: &RequestCounts) -> u64 {
    counts.0.values().sum()
}

/// The concurrency mode, and for adaptive runs the limit over the cold start (sampled every
/// 20 ms until every stage-1 profile was seen) and at the end.
fn concurrency_report(args: &Args, limit_samples: &[f64], final_limit: Option<usize>) -> Value {
    match args.concurrency {
        Concurrency::Fixed(steps) => json!({"mode": "fixed", "steps": steps}),
        Concurrency::Adaptive { ceiling } => json!({
            "mode": "adaptive",
            "ceiling": ceiling,
            "cold_start_limit": {
                "median": median(limit_samples),
                "max": limit_samples.iter().copied().reduce(f64::max),
            },
            "final_limit": final_limit,
        }),
    }
}

/// Waits until the store's resourceVersion has not moved for `calm`.
fn settle(emulator: &mut EmulatorProcess, calm: Duration) {
    let mut version = emulator.resource_version();
    let mut since = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = emulator.resource_version();
        if now != version {
            version = now;
            since = Instant::now();
        } else if since.elapsed() >= calm {
            return;
        }
    }
}

/// Stage-1 profile names seen by the watch, and when each was first seen.
#[derive(Default)]
struct Seen {
    first_stage: HashSet<String>,
    last_at: Option<Instant>,
}

fn watch_first_stage(client: Client, seen: Arc<Mutex<Seen>>) -> tokio::sync::oneshot::Receiver<()> {
    let (listed_tx, listed_rx) = tokio::sync::oneshot::channel();
    let api: Api<DynamicObject> = Api::all_with(client, &resources::cluster_profile());
    let config = watcher::Config::default().labels("tollgate.dev/stage=s0");
    tokio::spawn(async move {
        let mut listed = Some(listed_tx);
        let mut events = watcher(api, config).boxed();
        while let Some(event) = events.next().await {
            let object = match event {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = listed.take() {
                        let _ = tx.send(());
                    }
                    continue;
                }
                Ok(_) => continue,
                Err(error) => {
                    eprintln!("harness watch: {error}");
                    continue;
                }
            };
            let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(name) = object.metadata.name
                && seen.first_stage.insert(name)
            {
                seen.last_at = Some(Instant::now());
            }
        }
    });
    listed_rx
}

fn summary(mut samples: Vec<f64>) -> Value {
    samples.sort_by(f64::total_cmp);
    let at = |p: f64| {
        samples
            .get(((p * (samples.len().max(1) - 1) as f64).round()) as usize)
            .copied()
    };
    json!({"samples": samples.len(), "p50_ms": at(0.5), "max_ms": samples.last()})
}

/// Progress on stderr, with CPU seconds so far per part.
fn progress(what: &str, since: Instant, emulator: &mut EmulatorProcess) {
    let (controller, harness) = cpu_by_part();
    let (emulator_cpu, _) = emulator.stats();
    eprintln!(
        "[{:>8.1}s] {what} (cpu s: controller {controller:.1}, emulator {emulator_cpu:.1}, harness {harness:.1})",
        since.elapsed().as_secs_f64()
    );
}

fn main() {
    let args = Args::parse();
    if args.emulator_child {
        emulator_child(&args);
        return;
    }
    let controller_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("controller")
        .enable_all()
        .build()
        .expect("controller runtime");
    let harness_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("harness runtime");

    let build_started = Instant::now();
    let mut emulator = EmulatorProcess::start(&args);
    // As the tollgate binary does; after the emulator child started, so it is left as it was.
    tollgate::memory::disable_transparent_huge_pages();
    let repo = tempfile::tempdir().expect("repo dir");
    let cache = tempfile::tempdir().expect("cache dir");
    git(repo.path(), &["init", "-q", "-b", "main"]);
    git(repo.path(), &["config", "user.name", "Scale"]);
    git(repo.path(), &["config", "user.email", "scale@example.com"]);
    for p in 0..args.promotions {
        // p0 stays at 1.0.0 either way: the one-file changes bump it to 1.0.<n>.
        let version = match args.distinct_specs {
            true => format!("1.{p}.0"),
            false => "1.0.0".to_string(),
        };
        std::fs::write(
            repo.path().join(format!("p{p}.yaml")),
            promotion(p, args.stages, args.shards, &version),
        )
        .expect("write promotion");
    }
    let stub = args.analysis.then(start_query_stub);
    if let Some((address, _)) = &stub {
        std::fs::write(
            repo.path().join("policy.yaml"),
            analysis_policy(args.stages, address),
        )
        .expect("write policy");
    } else if args.policy_only {
        std::fs::write(repo.path().join("policy.yaml"), POLICY_WITHOUT_ANALYSES)
            .expect("write policy");
    }
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-q", "-m", "promotions"]);
    let setup_ms = build_started.elapsed().as_millis() as u64;
    progress("fleet and repository ready", build_started, &mut emulator);
    let rss_before_controller = memory_mib("VmRSS");

    let url = emulator.url.clone();
    let client_for = |url: &str| -> Client {
        Client::try_from(Config::new(url.parse().expect("emulator url"))).expect("client")
    };
    let harness_client = harness_rt.block_on(async { client_for(&url) });
    let seen = Arc::new(Mutex::new(Seen::default()));
    let listed = {
        let _runtime = harness_rt.enter();
        watch_first_stage(harness_client.clone(), seen.clone())
    };
    harness_rt.block_on(async {
        let _ = listed.await;
    });

    let metrics = Arc::new(tollgate::metrics::Metrics::new());
    let throttle_metrics = metrics.throttle();
    let throttle = args.concurrency.throttle(throttle_metrics.clone());
    let config = ControllerConfig {
        source: SourceConfig::new(repo.path().to_string_lossy(), "main", "", cache.path()),
        poll_interval: args.poll,
        dry_run: false,
        guard: PruneGuard::default(),
        concurrency: args.concurrency.steps(),
        throttle: throttle.clone(),
        instance: None,
        metrics: metrics.clone(),
        traces: Default::default(),
        analysis: Default::default(),
    };
    let started = Instant::now();
    let started_at: DateTime<Utc> = Utc::now();
    let (handle, task) = controller_rt
        .block_on(async {
            // The controller's own client, throttle included, as `tollgate run` builds it.
            let client =
                controller_client(Config::new(url.parse().expect("emulator url")), &throttle)
                    .expect("controller client");
            controller::start(client, config, LeaderGate::always()).await
        })
        .expect("controller starts");

    let mut limit_samples = Vec::new();
    let cold_first_stage = harness_rt.block_on(async {
        loop {
            {
                let seen = seen.lock().unwrap_or_else(|p| p.into_inner());
                if seen.first_stage.len() >= args.promotions {
                    break seen.last_at.map(|t| t - started);
                }
            }
            if let Some(limit) = throttle.limit() {
                limit_samples.push(limit as f64);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    progress(
        "every stage-1 profile applied",
        build_started,
        &mut emulator,
    );
    let rss_at_first_stage = memory_mib("VmRSS");
    settle(&mut emulator, Duration::from_secs(2));
    progress("API quiet", build_started, &mut emulator);
    let settled = emulator.last_write().map(|t| ms(t - started_at));
    let total_counts = emulator.request_counts();
    let event_reasons = emulator.event_reasons();
    let throttled_until_quiet = throttle_metrics.throttled.get();
    // One scrape, as Prometheus would make it: its size is part of the controller's footprint.
    let peak_before_scrape = memory_mib("VmHWM");
    let rss_before_scrape = memory_mib("VmRSS");
    // Gzipped, as Prometheus asks for it.
    let exposition = metrics.exposition(true).into_chunks();
    let rss_with_scrape = memory_mib("VmRSS");
    let steps_until_quiet = reconciles(&exposition);
    let exposition_report = exposition_sizes(&exposition);
    drop(exposition);
    let state_object_bytes = harness_rt.block_on(state_object_bytes(harness_client.clone(), "p1"));

    // One-file changes: bump p0's chart, time until its stage-1 profile carries the version.
    let mut change_samples = Vec::new();
    // The latency is timed from before `git commit` runs, so it includes git's own work (writing
    // a tree of N entries); that part is reported apart.
    let mut commit_samples = Vec::new();
    for change in 1..=args.changes {
        let version = format!("1.0.{change}");
        std::fs::write(
            repo.path().join("p0.yaml"),
            promotion(0, args.stages, args.shards, &version),
        )
        .expect("write promotion");
        git(repo.path(), &["add", "-A"]);
        let version_before = emulator.resource_version();
        let committed_at = Utc::now();
        let commit_started = Instant::now();
        git(
            repo.path(),
            &["commit", "-q", "-m", &format!("p0 {version}")],
        );
        commit_samples.push(commit_started.elapsed().as_secs_f64() * 1000.0);
        let target = profile_name(0, 0);
        let mut checked = version_before;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut applied = None;
        while applied.is_none() && Instant::now() < deadline {
            let now = emulator.resource_version();
            if now != checked {
                checked = now;
                applied = emulator.applied(&target, &version);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        match applied {
            Some(at) => change_samples.push(ms(at - committed_at)),
            None => eprintln!("change {change}: stage-1 profile not updated within 60 s"),
        }
        settle(&mut emulator, Duration::from_secs(1));
    }

    progress("one-file changes measured", build_started, &mut emulator);
    // Steady state: nothing changes; the controller only polls git and holds its watches.
    settle(&mut emulator, Duration::from_secs(2));
    emulator.reset_request_counts();
    let cpu_before = cpu_by_part();
    let emulator_before = emulator.stats();
    std::thread::sleep(args.quiet);
    let cpu_after = cpu_by_part();
    let emulator_after = emulator.stats();
    let quiet_counts = emulator.request_counts();
    let polls = (args.quiet.as_secs_f64() / args.poll.as_secs_f64()).max(1.0);
    let controller_cpu_ms = (cpu_after.0 - cpu_before.0) * 1000.0;
    let peak_before_burst = memory_mib("VmHWM");
    let burst = (args.burst > 0).then(|| {
        let report = burst::run(&mut emulator, repo.path(), &args, args.burst);
        progress("burst measured", build_started, &mut emulator);
        report
    });
    let (emulator_cpu_total, emulator_peak_rss) = emulator.stats();

    let report = json!({
        "promotions": args.promotions,
        "stages": args.stages,
        "clusters": args.clusters,
        "shards": args.shards,
        "distinct_specs": args.distinct_specs,
        "analysis_per_stage": args.analysis,
        "policy_only": args.policy_only,
        "analysis_queries_answered": stub.as_ref().map(|(_, n)| n.load(std::sync::atomic::Ordering::Relaxed)),
        "cluster_summaries_expected": args.promotions * args.stages * args.clusters.div_ceil(args.shards),
        "setup_ms": setup_ms,
        "cold_start_to_every_stage1_profile_ms": cold_first_stage.map(|d| d.as_millis() as u64),
        "cold_start_to_quiet_api_ms": settled,
        "cold_start_stage1_profiles_per_s": cold_first_stage
            .map(|d| args.promotions as f64 / d.as_secs_f64().max(f64::EPSILON)),
        "concurrency": concurrency_report(&args, &limit_samples, throttle.limit()),
        "request_latency_ms": args.request_latency_ms,
        "emulator_max_inflight": (args.max_inflight > 0).then_some(args.max_inflight),
        // 429 answers until the API was quiet (the controller's count: the emulator's in-flight
        // limit and injected ones), over every request the emulator got (429s included).
        "throttled_429_until_quiet": throttled_until_quiet,
        "throttled_429_rate": throttled_until_quiet as f64 / total_requests(&total_counts).max(1) as f64,
        "one_file_change_to_stage1_profile": summary(change_samples),
        "git_commit_command_ms": summary(commit_samples),
        "idle": {
            "window_s": args.quiet.as_secs_f64(),
            "poll_interval_ms": args.poll.as_millis() as u64,
            "controller_cpu_ms": controller_cpu_ms,
            "controller_cpu_ms_per_poll": controller_cpu_ms / polls,
            "emulator_cpu_ms": (emulator_after.0 - emulator_before.0) * 1000.0,
        },
        "cpu_s_total": {
            "controller": cpu_after.0,
            "harness": cpu_after.1,
            "emulator_process": emulator_cpu_total,
        },
        // Threads that ended (idle blocking-pool threads) count in the totals, not here.
        "cpu_s_by_live_thread": cpu_by_thread().0,
        "rss_mib": {
            "controller_process_peak_vmhwm": memory_mib("VmHWM"),
            "controller_process_peak_vmhwm_before_burst": peak_before_burst,
            "controller_process_peak_vmhwm_before_first_scrape": peak_before_scrape,
            "controller_process_before_first_scrape": rss_before_scrape,
            "controller_process_holding_first_scrape": rss_with_scrape,
            "controller_process_before_controller": rss_before_controller,
            "controller_process_at_every_stage1": rss_at_first_stage,
            "controller_process_end": memory_mib("VmRSS"),
            "emulator_process_peak_vmhwm": emulator_peak_rss,
        },
        "steps_until_quiet": steps_until_quiet,
        "metrics_exposition_until_quiet": exposition_report,
        "state_object_bytes_p1": state_object_bytes,
        // Writes until quiet over stage starts (N × S), the measure of issue #20 (was 5.7).
        "writes_per_stage_transition": total_counts.writes() as f64
            / (args.promotions * args.stages) as f64,
        "requests": {
            "total_until_quiet": by_verb(&total_counts),
            "steady_state": by_verb(&quiet_counts),
        },
        "events_by_reason_until_quiet": event_reasons,
        "requests_by_resource_until_quiet": total_counts.0.iter()
            .map(|((verb, resource), n)| (format!("{verb} {resource}"), json!(n)))
            .collect::<BTreeMap<String, Value>>(),
        "requests_by_resource_steady_state": quiet_counts.0.iter()
            .map(|((verb, resource), n)| (format!("{verb} {resource}"), json!(n)))
            .collect::<BTreeMap<String, Value>>(),
        "burst": burst,
    });
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
    handle.shutdown();
    let _ = controller_rt.block_on(task);
    // Close the clients' connections before the emulator stops.
    controller_rt.shutdown_timeout(Duration::from_secs(2));
    drop(harness_rt);
    emulator.stop();
}

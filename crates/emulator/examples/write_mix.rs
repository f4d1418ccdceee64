//! A small, repeatable write mix for profiling the emulator (e.g. under
//! `valgrind --tool=callgrind`): the kinds of writes the scale harness makes, over HTTP, with the
//! Sveltos stand-in doing its share and two open watches streaming every event.
//!
//! `cargo run --release -p tollgate-emulator --example write_mix -- [promotions] [clusters]`
//! (defaults 200 and 200). Per promotion, like tollgate's controller: server-side apply of a
//! namespaced object with a status subresource (GitPromotion's stand-in here: `Profile`), a
//! ClusterProfile apply matching `clusters / 20` clusters, an Event, two status PUTs. The fleet
//! never finishes provisioning, so the stand-in writes one ClusterSummary create and one status
//! write per matching cluster, plus the profile's finalizer and matchingClusters.
//! The client is a raw HTTP/1.1 socket so that nearly every instruction counted is the emulator's.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tollgate_emulator::{Emulator, EmulatorConfig, Fleet};

const SHARDS: usize = 20;

/// One keep-alive connection; requests answer with a Content-Length body.
struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("emulator accepts");
        stream.set_nodelay(true).expect("socket option");
        Client {
            reader: BufReader::new(stream.try_clone().expect("socket clones")),
            writer: stream,
        }
    }

    fn request(
        &mut self,
        method: &str,
        path: &str,
        content_type: &str,
        body: &Value,
    ) -> (u16, Value) {
        let body = body.to_string();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: emulator\r\nUser-Agent: write-mix/1\r\n\
             Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        self.writer
            .write_all(head.as_bytes())
            .expect("request sent");
        self.writer
            .write_all(body.as_bytes())
            .expect("request sent");
        let mut status_line = String::new();
        self.reader
            .read_line(&mut status_line)
            .expect("status line");
        let code: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("status code");
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).expect("header line");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().expect("content length");
            }
        }
        let mut bytes = vec![0; length];
        self.reader.read_exact(&mut bytes).expect("body");
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }
}

/// Opens a watch and drains it on a thread for as long as the process lives.
fn drain_watch(addr: SocketAddr, path: &str) {
    let mut stream = TcpStream::connect(addr).expect("emulator accepts");
    let head = format!("GET {path} HTTP/1.1\r\nHost: emulator\r\nUser-Agent: write-mix/1\r\n\r\n");
    stream.write_all(head.as_bytes()).expect("request sent");
    std::thread::spawn(move || {
        let mut buffer = vec![0; 64 * 1024];
        while matches!(stream.read(&mut buffer), Ok(n) if n > 0) {}
    });
}

fn fleet(clusters: usize) -> Fleet {
    let mut yaml = "defaults: {latency: 3600s}\nclusters:\n".to_string();
    for i in 0..clusters {
        yaml.push_str(&format!(
            "- {{name: c{i}, namespace: fleet, labels: {{shard: \"{}\"}}}}\n",
            i % SHARDS
        ));
    }
    Fleet::parse(&yaml, Path::new("write-mix-fleet.yaml")).expect("generated fleet parses")
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers"))
        .collect();
    let promotions = args.first().copied().unwrap_or(200);
    let clusters = args.get(1).copied().unwrap_or(200);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let emulator = runtime
        .block_on(Emulator::start(EmulatorConfig {
            fleet: fleet(clusters),
            write_log_capacity: Some(2_000),
            watch_history: 10_000,
            ..EmulatorConfig::default()
        }))
        .expect("emulator starts");
    let addr = emulator.addr();
    let sveltos = "/apis/config.projectsveltos.io/v1beta1";
    drain_watch(addr, &format!("{sveltos}/clusterprofiles?watch=true"));
    drain_watch(addr, &format!("{sveltos}/clustersummaries?watch=true"));
    drain_watch(addr, &format!("{sveltos}/profiles?watch=true"));
    let mut client = Client::connect(addr);
    let apply = "application/apply-patch+yaml";
    let json_type = "application/json";
    for p in 0..promotions {
        let promotion = format!("promo-{p}");
        let promotion_path = format!("{sveltos}/namespaces/default/profiles/{promotion}");
        let promotion_body = json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "Profile",
            "metadata": {"name": promotion, "namespace": "default", "labels": {"app.kubernetes.io/managed-by": "tollgate"}},
            "spec": {"source": {"repo": "https://example.invalid/repo.git", "path": format!("promotions/{p}.yaml")},
                     "stages": [{"name": "dev"}, {"name": "staging"}, {"name": "prod"}, {"name": "global"}]}});
        let (code, _) = client.request(
            "PATCH",
            &format!("{promotion_path}?fieldManager=tollgate&force=true"),
            apply,
            &promotion_body,
        );
        assert!(code < 300, "promotion apply: {code}");
        let profile = format!("{promotion}-dev");
        let profile_body = json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile",
            "metadata": {"name": profile, "labels": {"tollgate.io/promotion": promotion, "tollgate.io/stage": "dev"},
                         "annotations": {"tollgate.io/spec-hash": format!("{p:064x}")}},
            "spec": {"clusterSelector": {"matchLabels": {"shard": (p % SHARDS).to_string()}},
                     "syncMode": "Continuous", "maxUpdate": "25%",
                     "helmCharts": [{"repositoryURL": "https://charts.example.invalid", "repositoryName": "example",
                                     "chartName": "example/app", "chartVersion": "1.2.3", "releaseName": "app",
                                     "releaseNamespace": "apps", "helmChartAction": "Install"}]}});
        let (code, _) = client.request(
            "PATCH",
            &format!("{sveltos}/clusterprofiles/{profile}?fieldManager=tollgate&force=true"),
            apply,
            &profile_body,
        );
        assert!(code < 300, "profile apply: {code}");
        let event = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": format!("{promotion}."), "namespace": "default"},
            "involvedObject": {"kind": "GitPromotion", "name": promotion, "namespace": "default"},
            "reason": "StageStarted", "message": "stage dev started", "type": "Normal"});
        let (code, _) = client.request(
            "POST",
            "/api/v1/namespaces/default/events",
            json_type,
            &event,
        );
        assert!(code < 300, "event: {code}");
        for phase in ["Progressing", "Waiting"] {
            let (code, mut current) =
                client.request("GET", &promotion_path, json_type, &Value::Null);
            assert!(code < 300, "get: {code}");
            current["status"] = json!({"phase": phase, "observedGeneration": 1,
                "stages": [{"name": "dev", "phase": phase, "profile": profile}]});
            let (code, _) = client.request(
                "PUT",
                &format!("{promotion_path}/status"),
                json_type,
                &current,
            );
            assert!(code < 300, "status put: {code}");
        }
    }
    // Let the stand-in finish: the resourceVersion stops moving.
    let mut version = emulator.resource_version();
    let mut calm = 0;
    while calm < 5 {
        std::thread::sleep(Duration::from_millis(200));
        let now = emulator.resource_version();
        calm = if now == version { calm + 1 } else { 0 };
        version = now;
    }
    let counts = emulator.request_counts();
    println!(
        "promotions {promotions} clusters {clusters} resourceVersion {version} requests: {} writes",
        counts.writes()
    );
    std::process::exit(0);
}

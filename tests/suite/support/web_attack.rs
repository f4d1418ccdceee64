//! The web view as a hostile page meets it (issue #44 item 9): the real `tollgate run --ui`
//! binary on its embedded management cluster, raw HTTP requests carrying whatever `Host`,
//! `Origin` and fetch metadata an attacker chooses, and a loopback stand-in for a git host's
//! create-PR API whose answers the test picks.
#![cfg_attr(not(feature = "embedded"), allow(dead_code))] // the `run --embedded` tests use it

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;

use super::{eventually, fleet_yaml};

/// The form body type a browser posts.
pub const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

/// `tollgate run --ui` as an operator starts it, its JSON log collected line by line.
pub struct UiRun {
    child: Child,
    log: Arc<Mutex<String>>,
    _dir: TempDir,
}

impl UiRun {
    /// `tollgate run --repo REPO --embedded <3 clusters> --listen 127.0.0.1:0 --ui --ui-repo REPO`
    /// and `extra`, not yet waited for.
    pub fn spawn(repo: &Path, extra: &[&str]) -> UiRun {
        UiRun::spawn_with_env(repo, extra, &[])
    }

    /// [`UiRun::spawn`] with extra environment variables.
    pub fn spawn_with_env(repo: &Path, extra: &[&str], env: &[(String, PathBuf)]) -> UiRun {
        let dir = tempfile::tempdir().expect("temp dir");
        let fleet = dir.path().join("fleet.yaml");
        std::fs::write(&fleet, fleet_yaml(1, "100ms")).expect("fleet");
        let mut command = Command::new(assert_cmd::cargo::cargo_bin("tollgate"));
        command
            .args(["--log", "info", "--log-format", "json", "run", "--repo"])
            .arg(repo)
            .arg("--embedded")
            .arg(&fleet)
            .arg("--embedded-kubeconfig")
            .arg(dir.path().join("kubeconfig"))
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .args([
                "--interval",
                "1s",
                "--listen",
                "127.0.0.1:0",
                "--ui",
                "--ui-repo",
            ])
            .arg(repo)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("tollgate run starts");
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
        UiRun {
            child,
            log,
            _dir: dir,
        }
    }

    pub fn log(&self) -> String {
        self.log.lock().expect("log").clone()
    }

    /// The address the server bound (from its "serving /healthz" log line).
    pub fn addr(&self) -> String {
        eventually("the server to listen", || {
            self.log().lines().find_map(|line| {
                let entry: Value = serde_json::from_str(line).ok()?;
                let fields = entry.get("fields")?;
                let message = fields.get("message")?.as_str()?;
                message.starts_with("serving /healthz").then_some(())?;
                Some(fields.get("addr")?.as_str()?.to_string())
            })
        })
    }

    /// Waits until the promotion page of `name` offers `action` (the controller wrote a status).
    pub fn wait_for_action(&self, addr: &str, name: &str, action: &str) {
        let offered = format!("data-action=\"{action}\"");
        eventually(&format!("{name}'s page to offer {action}"), || {
            let page = request(
                addr,
                addr,
                "GET",
                &format!("/ui/promotions/{name}"),
                &[],
                b"",
            )?;
            (page.status == 200 && page.body.contains(&offered)).then_some(())
        });
    }

    /// Waits for the process to end by itself.
    pub fn wait_exit(&mut self) -> ExitStatus {
        eventually("tollgate run to exit", || {
            self.child.try_wait().ok().flatten()
        })
    }
}

impl Drop for UiRun {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP answer: status, headers (names lowercased) and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request to `addr` with `host` as its `Host` header (what a browser sends for the
/// name in its address bar: after DNS rebinding, the attacker's name) and `headers`.
pub fn request(
    addr: &str,
    host: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Option<Answer> {
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).ok()?;
    stream.write_all(body).ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let mut lines = head.lines();
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some(Answer {
        status,
        headers,
        body: body.to_string(),
    })
}

/// Every `href` value of an HTML text.
pub fn hrefs(html: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .filter_map(|rest| rest.split_once('"').map(|(value, _)| value.to_string()))
        .collect()
}

/// One create-PR request the stand-in received: its path, `Authorization` header and JSON body.
#[derive(Clone, Debug)]
pub struct PullRequestSeen {
    pub path: String,
    pub auth: String,
    pub body: Value,
}

/// A loopback stand-in for GitHub's create-PR endpoint: the n-th request is answered 201 with
/// the n-th of `html_urls` (the last one repeats) as the pull request's `html_url`.
pub struct GitHostStub {
    pub api_url: String,
    seen: Arc<Mutex<Vec<PullRequestSeen>>>,
}

impl GitHostStub {
    pub fn start(html_urls: &[&str]) -> GitHostStub {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind stub");
        let api_url = format!("http://{}", listener.local_addr().expect("stub address"));
        let seen: Arc<Mutex<Vec<PullRequestSeen>>> = Arc::default();
        let urls: Vec<String> = html_urls.iter().map(ToString::to_string).collect();
        let sink = Arc::clone(&seen);
        std::thread::spawn(move || {
            for mut stream in listener.incoming().map_while(Result::ok) {
                let Some(request) = read_request(&mut stream) else {
                    continue;
                };
                let mut seen = sink.lock().expect("seen");
                let url = urls
                    .get(seen.len())
                    .or(urls.last())
                    .cloned()
                    .unwrap_or_default();
                seen.push(request);
                let body = serde_json::json!({"number": seen.len(), "html_url": url}).to_string();
                let _ = write!(
                    stream,
                    "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        GitHostStub { api_url, seen }
    }

    pub fn seen(&self) -> Vec<PullRequestSeen> {
        self.seen.lock().expect("seen").clone()
    }

    /// `--ui-git-host github` flags pointing at this stand-in, with `token_file`.
    pub fn flags(&self, token_file: &Path) -> Vec<String> {
        vec![
            "--ui-git-host".into(),
            "github".into(),
            "--ui-git-token-file".into(),
            token_file.display().to_string(),
            "--ui-git-repository".into(),
            "acme/fleet".into(),
            "--ui-git-api-url".into(),
            self.api_url.clone(),
        ]
    }
}

/// Reads one request: its head up to the blank line, then `Content-Length` bytes of body.
fn read_request(stream: &mut std::net::TcpStream) -> Option<PullRequestSeen> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut first = String::new();
    reader.read_line(&mut first).ok()?;
    let path = first.split(' ').nth(1)?.to_string();
    let (mut length, mut auth) = (0usize, String::new());
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().ok()?,
            "authorization" => auth = value.trim().to_string(),
            _ => {}
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).ok()?;
    Some(PullRequestSeen {
        path,
        auth,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    })
}

/// The branches of a repository (local or bare).
pub fn branches(git_dir: &Path) -> Vec<String> {
    let output = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["for-each-ref", "--format=%(refname:short)", "refs/heads"])
        .output()
        .expect("git for-each-ref");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

//! A real headless Chromium driven through WebDriver (`fantoccini`), for the web view's tests.
//!
//! One chromedriver and one browser per test binary: the tests run their scenarios on one shared
//! runtime and take turns with the browser ([`with_browser`]). chromedriver runs under a small
//! shell that kills its process group when this process's end closes the shell's stdin, so
//! nothing outlives the test binary. With `CI` set, a missing chromium or chromedriver fails the
//! test; elsewhere the test says so and passes without a browser.

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The shared runtime: the WebDriver session lives on it, so every test uses it.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// chromedriver's process (its shell) and the browser session, made once.
struct Driver {
    _shell: Mutex<Child>,
    client: tokio::sync::Mutex<Client>,
    /// chromedriver's address, for the commands fantoccini does not have (the browser log).
    url: String,
}

fn tool(path: &str) -> Option<PathBuf> {
    Path::new(path).exists().then(|| PathBuf::from(path))
}

/// The browser, or `None` (outside CI) when chromium or chromedriver is not installed.
fn driver() -> Option<&'static Driver> {
    static DRIVER: OnceLock<Option<Driver>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            let (Some(chromium), Some(chromedriver)) = (tool(CHROMIUM), tool(CHROMEDRIVER)) else {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "CI is set and {CHROMIUM} or {CHROMEDRIVER} is missing: install chromium \
                     chromium-driver (.ci/run does)"
                );
                eprintln!("chromium or chromedriver is not installed: the browser test is skipped");
                return None;
            };
            Some(start(&chromium, &chromedriver))
        })
        .as_ref()
}

fn start(chromium: &Path, chromedriver: &Path) -> Driver {
    let port = super::free_port();
    // `setsid` makes chromedriver the leader of a new process group (Chromium joins it); the
    // shell kills that group once its stdin closes, i.e. when this test binary exits.
    let script = format!(
        "setsid {} --port={port} --log-level=SEVERE >/dev/null 2>&1 & pid=$!; echo started; \
         read _; kill -- -$pid 2>/dev/null; kill $pid 2>/dev/null",
        chromedriver.display()
    );
    let mut shell = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sh runs chromedriver");
    let mut line = String::new();
    BufReader::new(shell.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the shell starts");
    let url = format!("http://127.0.0.1:{port}");
    let client = runtime().block_on(connect(&url, chromium));
    Driver {
        _shell: Mutex::new(shell),
        client: tokio::sync::Mutex::new(client),
        url,
    }
}

async fn connect(url: &str, chromium: &Path) -> Client {
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": chromium.display().to_string(),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,800", "--hide-scrollbars"]
        },
        // The console (CSP violations are reported there), read by `console_log`.
        "goog:loggingPrefs": {"browser": "ALL"}
    });
    let capabilities = match capabilities {
        serde_json::Value::Object(map) => map,
        _ => unreachable!("an object"),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let attempt = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities.clone())
            .connect(url)
            .await;
        match attempt {
            Ok(client) => return client,
            Err(error) if std::time::Instant::now() > deadline => {
                panic!("cannot start a WebDriver session at {url}: {error}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Runs `scenario` with the browser on the shared runtime (tests take turns: one holds the
/// browser for its whole scenario). Without a browser outside CI, does nothing.
pub fn with_browser<F, Fut>(scenario: F)
where
    F: FnOnce(Client) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some(driver) = driver() else {
        return;
    };
    runtime().block_on(async {
        let client = driver.client.lock().await;
        scenario(client.clone()).await;
    });
}

/// Where screenshots go: `target/screenshots/` (next to the test binaries' temp dir).
pub fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

/// Saves a PNG of the page at 1280×800 as `screenshot_dir()/<name>.png`.
pub async fn screenshot(client: &Client, name: &str) -> PathBuf {
    client
        .set_window_size(1280, 800)
        .await
        .expect("window size");
    let png = client.screenshot().await.expect("screenshot");
    let path = screenshot_dir().join(format!("{name}.png"));
    std::fs::write(&path, png).expect("write screenshot");
    path
}

/// The browser console's messages since the last call (chromedriver's log of the session, which
/// it empties on each read): a Content-Security-Policy violation is reported there, including
/// one made while a page loaded, before a test could listen for it.
pub async fn console_log(client: &Client) -> Vec<String> {
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    let driver = driver().expect("a browser runs this test");
    let session = client
        .session_id()
        .await
        .expect("session id")
        .expect("a session");
    let request = hyper::Request::post(format!("{}/session/{session}/se/log", driver.url))
        .header("Content-Type", "application/json")
        .body(Full::new(Bytes::from_static(br#"{"type":"browser"}"#)))
        .expect("request");
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(HttpConnector::new());
    let response = client.request(request).await.expect("chromedriver answers");
    let body = response
        .into_body()
        .collect()
        .await
        .expect("log body")
        .to_bytes();
    let answer: serde_json::Value = serde_json::from_slice(&body).expect("log JSON");
    answer["value"]
        .as_array()
        .unwrap_or_else(|| panic!("chromedriver has no browser log: {answer}"))
        .iter()
        .filter_map(|entry| entry["message"].as_str().map(str::to_string))
        .collect()
}

//! A real smart-HTTP git server for tests: `git http-backend` (CGI) behind a small axum server on
//! loopback, with HTTP basic authentication.

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use tokio::io::AsyncWriteExt;

const HTTP_BACKEND: &str = "/usr/lib/git-core/git-http-backend";

pub struct GitHttpServer {
    /// `http://127.0.0.1:PORT` (append `/<repo>.git`).
    pub base_url: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

struct ServerState {
    project_root: PathBuf,
    username: String,
    password: String,
}

impl GitHttpServer {
    /// Serves the repositories under `project_root`, accepting only `username:password`.
    pub fn start(project_root: PathBuf, username: &str, password: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener.set_nonblocking(true).expect("nonblocking");
        let base_url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(ServerState {
            project_root,
            username: username.to_string(),
            password: password.to_string(),
        });
        let (shutdown, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                let app = Router::new().fallback(handle).with_state(state);
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = shutdown_rx.await;
                    })
                    .await
                    .expect("serve");
            });
        });
        GitHttpServer {
            base_url,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }
}

impl Drop for GitHttpServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn handle(State(state): State<Arc<ServerState>>, request: Request) -> Response {
    let credentials = format!("{}:{}", state.username, state.password);
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(credentials)
    );
    let authorized = request
        .headers()
        .get(header::AUTHORIZATION)
        .is_some_and(|value| value.as_bytes() == expected.as_bytes());
    if !authorized {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Basic realm=\"git\"")],
            "authentication required",
        )
            .into_response();
    }
    let method = request.method().to_string();
    let path = request.uri().path().to_string();
    let query = request.uri().query().unwrap_or("").to_string();
    let content_type = header_text(&request, header::CONTENT_TYPE);
    let content_encoding = header_text(&request, header::CONTENT_ENCODING);
    let body = axum::body::to_bytes(request.into_body(), 256 << 20)
        .await
        .expect("request body");
    let mut child = tokio::process::Command::new(HTTP_BACKEND)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_PROJECT_ROOT", &state.project_root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_TYPE", content_type)
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", content_encoding)
        .env("REMOTE_USER", &state.username)
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn git http-backend");
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&body).await.expect("cgi stdin");
    }
    let output = child.wait_with_output().await.expect("cgi output");
    cgi_response(&output.stdout)
}

fn header_text(request: &Request, name: header::HeaderName) -> String {
    request
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// CGI output: header lines, a blank line, the body. `Status:` sets the status code.
fn cgi_response(output: &[u8]) -> Response {
    let split = output
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| output.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let Some((end, separator)) = split else {
        return (StatusCode::BAD_GATEWAY, "malformed CGI output").into_response();
    };
    let head = String::from_utf8_lossy(&output[..end]).to_string();
    let mut response = Response::new(Body::from(output[end + separator..].to_vec()));
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value.split_whitespace().next().and_then(|c| c.parse().ok());
            if let Some(status) = code.and_then(|c: u16| StatusCode::from_u16(c).ok()) {
                *response.status_mut() = status;
            }
        } else if let (Ok(name), Ok(value)) = (
            header::HeaderName::from_bytes(name.trim().as_bytes()),
            HeaderValue::from_str(value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

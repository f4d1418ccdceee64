//! The web view's pages in a browser: the server as `run --ui` serves it in-process (over the
//! controller's own statuses), and the reads a WebDriver test makes of a page that may change
//! under it (a live update replaces fragments).

use std::net::SocketAddr;
use std::time::Duration;

use fantoccini::{Client, Locator};
use tollgate::web::git_view::RepoTarget;
use tollgate::web::pull_request::PullRequests;
use tollgate::web::{WebConfig, source};

use super::{PATIENCE, World};

/// The web view as `run --ui` serves it: over the controller's own status cache, committing in
/// the world's repository.
pub async fn serve_in_process(world: &World, pull_requests: Option<PullRequests>) -> SocketAddr {
    let repo = RepoTarget {
        dir: world.repo.path().to_path_buf(),
        branch: "main".to_string(),
        path: String::new(),
        trust: Some(world.trust.clone()),
    };
    serve(world, Some(repo), pull_requests).await
}

/// The web view as `run --ui` without `--ui-repo` serves it: reads only.
pub async fn serve_without_repo(world: &World) -> SocketAddr {
    serve(world, None, None).await
}

async fn serve(
    world: &World,
    repo: Option<RepoTarget>,
    pull_requests: Option<PullRequests>,
) -> SocketAddr {
    let (handle, _) = world.controller.as_ref().expect("controller");
    let config = WebConfig {
        source: source::from_status_cache(handle.statuses.clone(), handle.git_labels.clone()),
        repo,
        token: None,
        pull_requests,
        allowed_hosts: Vec::new(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let service = tollgate::web::router(config)
            .into_make_service_with_connect_info::<tollgate::web::ServedOn>();
        let _ = axum::serve(listener, service).await;
    });
    addr
}

/// Polls the page until `check` yields, or fails after [`PATIENCE`] naming `what`.
pub async fn until<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn attr(client: &Client, css: &str, name: &str) -> Option<String> {
    client
        .find(Locator::Css(css))
        .await
        .ok()?
        .attr(name)
        .await
        .ok()?
}

pub async fn text(client: &Client, css: &str) -> Option<String> {
    client.find(Locator::Css(css)).await.ok()?.text().await.ok()
}

/// A page's body (off the runtime's threads: the server runs on them).
pub async fn page_body(addr: &str, path: &str) -> Option<String> {
    let (addr, path) = (addr.to_string(), path.to_string());
    let answer = tokio::task::spawn_blocking(move || {
        crate::support::web_attack::request(&addr, &addr, "GET", &path, &[], b"")
    })
    .await
    .ok()??;
    (answer.status == 200).then_some(answer.body)
}

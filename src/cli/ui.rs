//! `tollgate ui`: the web view on a workstation, reading the management cluster like `tollgate
//! status` (a watch of the GitPromotions; it never writes there) and committing actions in a
//! local clone (`--repo`). Listens on loopback unless told otherwise.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use tracing::warn;

use super::connect::{self, ClusterArgs};
use super::ui_args::UiArgs;
use crate::web::git_view::RepoTarget;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where to serve the pages (loopback by default: put a proxy or a tunnel in front to share).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Local clone the action buttons commit in (each on a new branch; never pushed unless a git
    /// host is configured). Without it the buttons only show the commit and the command.
    #[arg(long)]
    pub repo: Option<PathBuf>,
    /// The branch the clone's promotions are tracked on (the base of each commit).
    #[arg(long, default_value = "main")]
    pub branch: String,
    /// Sub-path of the repository holding the manifests ("" = the whole repository).
    #[arg(long, default_value = "")]
    pub path: String,
    #[command(flatten)]
    pub ui: UiArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::block_on(serve(args))
}

async fn serve(args: Args) -> anyhow::Result<ExitCode> {
    let mut config = connect::config(&args.cluster).await?;
    // Its own user agent: the API server's audit log (and the tests) tell the web view's reads
    // from the controller's requests.
    config
        .headers
        .retain(|(name, _)| *name != hyper::header::USER_AGENT);
    config.headers.push((
        hyper::header::USER_AGENT,
        hyper::header::HeaderValue::from_static(concat!("tollgate-ui/", env!("CARGO_PKG_VERSION"))),
    ));
    let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
    let (source, _watch) = crate::web::source::from_cluster(client);
    let repo = args.repo.as_ref().map(|dir| RepoTarget {
        dir: dir.clone(),
        branch: args.branch.clone(),
        path: args.path.clone(),
        trust: None,
    });
    let web = args.ui.web_config(source, repo)?;
    if !args.listen.ip().is_loopback() && web.token.is_none() {
        warn!(listen = %args.listen, "serving the web view beyond loopback without --ui-token-file");
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener.local_addr().context("the listening address")?;
    super::report_line(&format!(
        "Serving the web view on http://{}/ui",
        reachable(addr)
    ));
    let service =
        super::ui_args::router(web).into_make_service_with_connect_info::<crate::web::ServedOn>();
    axum::serve(listener, service)
        .with_graceful_shutdown(crate::signals::ctrl_c())
        .await
        .context("serving the web view")?;
    Ok(ExitCode::SUCCESS)
}

/// The address to print for `addr`: on every interface, loopback (the Host allow-list admits the
/// address a connection reached, and `0.0.0.0` is none).
fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            (std::net::Ipv4Addr::LOCALHOST, addr.port()).into()
        }
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            (std::net::Ipv6Addr::LOCALHOST, addr.port()).into()
        }
        _ => addr,
    }
}

//! `tollgate emulator`: the embedded management cluster as a standalone server, for demos and for
//! pointing kubectl or `tollgate status` at (in builds with the `embedded` feature, the default).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Fleet file: the clusters, their labels, readiness and injected behaviour.
    #[arg(long)]
    pub fleet: PathBuf,
    /// Loopback address to listen on (default: a free port on 127.0.0.1).
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Where to write the kubeconfig.
    #[arg(long, default_value = "tollgate-emulator.kubeconfig")]
    pub kubeconfig: PathBuf,
    /// Keep the cluster's content in this file across restarts (with TLS, the CA and the client
    /// credentials too, in `<file stem>.tls.json`: the kubeconfig stays valid).
    #[arg(long)]
    pub state_file: Option<PathBuf>,
    /// Serve plain HTTP without authentication, for debugging (default: HTTPS with a CA
    /// generated at start; the kubeconfig carries the CA, a client certificate and a token).
    #[arg(long)]
    pub insecure_http: bool,
    /// Answer 429 (with `Retry-After`) to read-only requests beyond this many at once, like the
    /// real server's flag of the same name; watches are not counted (default: no limit).
    #[arg(long)]
    pub max_requests_inflight: Option<usize>,
    /// The same for writes (create, update, patch, delete).
    #[arg(long)]
    pub max_mutating_requests_inflight: Option<usize>,
    /// Delay added to every request, in milliseconds; a request holds its in-flight slot
    /// through it.
    #[arg(long, default_value_t = 0)]
    pub request_latency_ms: u64,
}

#[cfg(not(feature = "embedded"))]
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("tollgate emulator: {}", super::embedded::NOT_BUILT_IN)
}

#[cfg(feature = "embedded")]
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    use std::time::Duration;

    use anyhow::Context as _;
    use tollgate_emulator::{ServingFaults, StandaloneConfig, Transport, run_standalone};

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let transport = match args.insecure_http {
        true => Transport::PlainHttp,
        false => Transport::Tls,
    };
    runtime.block_on(run_standalone(StandaloneConfig {
        fleet: args.fleet,
        crds: vec![crate::cluster::crd::git_promotion_crd_json()],
        listen: args.listen,
        kubeconfig: args.kubeconfig,
        state_file: args.state_file,
        transport,
        serving: ServingFaults {
            max_requests_inflight: args.max_requests_inflight,
            max_mutating_requests_inflight: args.max_mutating_requests_inflight,
            request_latency: Duration::from_millis(args.request_latency_ms),
        },
    }))?;
    Ok(ExitCode::SUCCESS)
}

//! `tollgate run`: the controller. Follows a git branch and drives every promotion in it through
//! its stages on the management cluster (a real one, or the embedded emulator).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::fetch_request::{FetchRelay, start_relay, watch_fetch_requests};
use crate::cluster::leader::{ElectionConfig, LeaderGate, run_election};
use crate::cluster::throttle::layer::ThrottleLayer;
use crate::cluster::throttle::{Concurrency, DEFAULT_MAX_CONCURRENCY, Throttle};
use crate::cluster::user_agent;
use crate::controller::{self, ControllerConfig, ControllerHandle, PruneGuard};
use crate::metrics::Metrics;
use crate::server::{self, Provider, ServerConfig, ServerState, WebhookSecrets};
use anyhow::Context as _;
use kube::Client;
use kube::client::ClientBuilder;
use tollgate_source::{Auth, Secret, SourceConfig};
use tower::buffer::BufferLayer;
use tracing::{info, warn};

use super::connect::{self, ClusterArgs};
use super::embedded;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The promotions repository: a local path, or a file://, https:// or ssh:// URL.
    #[arg(long, env = "TOLLGATE_REPO")]
    pub repo: String,
    /// The branch to follow.
    #[arg(long, env = "TOLLGATE_BRANCH", default_value = "main")]
    pub branch: String,
    /// Sub-path of the repository holding ClusterPromotion manifests ("" = whole repository).
    #[arg(long, env = "TOLLGATE_PATH", default_value = "")]
    pub path: String,
    /// How often to poll the repository when nothing pokes it (Go duration).
    #[arg(long, env = "TOLLGATE_INTERVAL", default_value = "30s", value_parser = parse_interval)]
    pub interval: Duration,
    /// A fetch fails when the remote does not answer (connect, or any read/write) within this.
    #[arg(long, env = "TOLLGATE_GIT_TIMEOUT", default_value = "60s", value_parser = parse_interval)]
    pub git_timeout: Duration,
    /// Where remote repositories are cloned.
    #[arg(long, env = "TOLLGATE_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    #[command(flatten)]
    pub git_auth: GitAuthArgs,
    #[command(flatten)]
    pub trust: super::trust_args::TrustArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Run against an embedded management cluster (the emulator, in-process) built from this
    /// fleet file, instead of a real cluster.
    #[arg(long, env = "TOLLGATE_EMBEDDED", conflicts_with_all = ["kubeconfig", "context"])]
    pub embedded: Option<PathBuf>,
    /// Where to write the embedded cluster's kubeconfig (for kubectl and `tollgate status`);
    /// default: this run's own file under the cache dir, removed when the run stops. A file
    /// that belongs to another running cluster is refused.
    #[arg(long, env = "TOLLGATE_EMBEDDED_KUBECONFIG", requires = "embedded")]
    pub embedded_kubeconfig: Option<PathBuf>,
    /// Serve the embedded cluster over plain HTTP without authentication, for debugging
    /// (default: HTTPS with a generated CA; the kubeconfig carries the CA and credentials).
    #[arg(long, env = "TOLLGATE_EMBEDDED_INSECURE_HTTP", requires = "embedded")]
    pub embedded_insecure_http: bool,
    /// The embedded cluster's API address, a loopback IP and port (default: a free port on
    /// 127.0.0.1): a fixed address keeps a kubeconfig written by an earlier run working.
    #[arg(long, env = "TOLLGATE_EMBEDDED_LISTEN", requires = "embedded")]
    pub embedded_listen: Option<std::net::SocketAddr>,
    /// Compute and log every action, write nothing.
    #[arg(long, env = "TOLLGATE_DRY_RUN")]
    pub dry_run: bool,
    /// Confirm removals held by the blast-radius guard (mass deletions, vanished path).
    #[arg(long, env = "TOLLGATE_CONFIRM_PRUNE")]
    pub confirm_prune: bool,
    /// Removing more than this percentage of the promotions in one commit needs confirmation.
    #[arg(long, env = "TOLLGATE_PRUNE_MAX_SHARE", default_value_t = 50, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub prune_max_share: u32,
    /// Fixed concurrency: step this many promotions at once (each sends its API requests one
    /// after another). Unset (the default): adaptive, see --max-concurrency.
    #[arg(long, env = "TOLLGATE_CONCURRENCY", value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: Option<u32>,
    /// Ceiling of adaptive concurrency. By default tollgate adapts how many API requests it keeps
    /// in flight (watches, Leases and Events aside): more while throughput grows, fewer when latency
    /// rises without it or the server answers 429 or 5xx. A write refused with 429 is sent again
    /// after its Retry-After (at most 3 times); a step that still fails is retried no sooner.
    /// It starts at a quarter of this ceiling. 256 was the best fixed value on a real
    /// kube-apiserver.
    #[arg(long, env = "TOLLGATE_MAX_CONCURRENCY", default_value_t = DEFAULT_MAX_CONCURRENCY as u32,
          value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "concurrency")]
    pub max_concurrency: u32,
    /// Analysis measurements (Prometheus queries, web checks, commit statuses) made at once.
    #[arg(long, env = "TOLLGATE_ANALYSIS_CONCURRENCY", default_value_t = crate::analysis::DEFAULT_CONCURRENCY as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub analysis_concurrency: u32,
    /// The longest one analysis measurement may take; a slower one is an errored measurement.
    #[arg(long, env = "TOLLGATE_ANALYSIS_TIMEOUT", default_value = "10s", value_parser = parse_interval)]
    pub analysis_timeout: Duration,
    /// Send each run as an OpenTelemetry trace to this OTLP/HTTP collector (a base URL: spans go
    /// to `URL/v1/traces`). `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL) wins over the
    /// variable; with neither, no trace is made.
    #[arg(long, value_name = "URL", env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    #[command(flatten)]
    pub election: ElectionArgs,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(clap::Args, Debug)]
pub struct ServerArgs {
    /// Serve on this address: /healthz, /readyz, /metrics, the webhooks
    /// POST /webhooks/{github,gitlab,gitea,generic} (each on when its secret file is given) and the
    /// status API GET /api/v1/promotions[/NAME] (the GitPromotion statuses as JSON).
    #[arg(long, env = "TOLLGATE_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// File holding the GitHub webhook secret (X-Hub-Signature-256).
    #[arg(long, env = "TOLLGATE_WEBHOOK_GITHUB_SECRET_FILE")]
    pub webhook_github_secret_file: Option<PathBuf>,
    /// File holding the GitLab webhook token (X-Gitlab-Token).
    #[arg(long, env = "TOLLGATE_WEBHOOK_GITLAB_TOKEN_FILE")]
    pub webhook_gitlab_token_file: Option<PathBuf>,
    /// File holding the Gitea webhook secret (X-Gitea-Signature).
    #[arg(long, env = "TOLLGATE_WEBHOOK_GITEA_SECRET_FILE")]
    pub webhook_gitea_secret_file: Option<PathBuf>,
    /// File holding the secret of the generic webhook (X-Tollgate-Signature: sha256=<hmac>).
    #[arg(long, env = "TOLLGATE_WEBHOOK_GENERIC_SECRET_FILE")]
    pub webhook_generic_secret_file: Option<PathBuf>,
    /// Serve the web view under /ui on --listen (off by default; see docs/web.md). It reads the
    /// controller's statuses and never writes to the cluster; its buttons commit to git.
    #[arg(long, env = "TOLLGATE_UI", requires = "listen")]
    pub ui: bool,
    /// Local clone the web view's buttons commit in (each on a new branch of --branch);
    /// without it they only show the commit and the command.
    #[arg(long, env = "TOLLGATE_UI_REPO", requires = "ui")]
    pub ui_repo: Option<PathBuf>,
    #[command(flatten)]
    pub ui_args: super::ui_args::UiArgs,
}

impl ServerArgs {
    fn secrets(&self) -> anyhow::Result<WebhookSecrets> {
        let mut secrets = WebhookSecrets::default();
        for provider in Provider::ALL {
            // A match, so that a new provider cannot compile without its flag.
            let (flag, path, feature) = match provider {
                Provider::GitHub => (
                    "--webhook-github-secret-file",
                    &self.webhook_github_secret_file,
                    "the GitHub webhook",
                ),
                Provider::GitLab => (
                    "--webhook-gitlab-token-file",
                    &self.webhook_gitlab_token_file,
                    "the GitLab webhook",
                ),
                Provider::Gitea => (
                    "--webhook-gitea-secret-file",
                    &self.webhook_gitea_secret_file,
                    "the Gitea webhook",
                ),
                Provider::Generic => (
                    "--webhook-generic-secret-file",
                    &self.webhook_generic_secret_file,
                    "the generic webhook",
                ),
            };
            secrets.set(provider, optional_secret(flag, path, feature)?);
        }
        Ok(secrets)
    }
}

/// Reads the secret file given by `flag`. A file that does not exist turns `feature` off with a
/// warning: the shipped Deployment mounts its Secrets as optional, and a missing Secret must
/// not crash-loop the pod. A file that exists but cannot be read, or is empty, is an error:
/// someone meant to configure the feature and got it wrong, and starting without it would hide
/// that (an empty webhook secret would also make signatures forgeable).
fn optional_secret(
    flag: &str,
    path: &Option<PathBuf>,
    feature: &str,
) -> anyhow::Result<Option<Secret>> {
    let Some(path) = path else {
        return Ok(None);
    };
    if matches!(path.try_exists(), Ok(false)) {
        warn!(
            flag,
            path = %path.display(),
            "{flag} {}: the file does not exist; starting without {feature}",
            path.display()
        );
        return Ok(None);
    }
    let secret = Secret::from_file(path)?;
    if secret.expose().trim().is_empty() {
        anyhow::bail!(
            "{flag} {}: the file is empty; fill it, or remove the flag to run without {feature}",
            path.display()
        );
    }
    Ok(Some(secret))
}

#[derive(clap::Args, Debug)]
pub struct ElectionArgs {
    /// Elect a leader through a Lease: every replica syncs and watches, only the leader writes.
    #[arg(long, env = "TOLLGATE_LEADER_ELECT")]
    pub leader_elect: bool,
    #[arg(long, env = "TOLLGATE_LEASE_NAME", default_value = "tollgate-leader")]
    pub lease_name: String,
    /// Namespace of the Lease (default: this pod's namespace, else tollgate-system).
    #[arg(long, env = "POD_NAMESPACE", default_value = "tollgate-system")]
    pub lease_namespace: String,
    /// Lease validity after its last renewal.
    #[arg(long, env = "TOLLGATE_LEASE_DURATION", default_value = "15s", value_parser = parse_interval)]
    pub lease_duration: Duration,
    /// The leader stops writing this long before its lease could expire for the other replicas
    /// (a safety margin for request latency and clock drift); renewals come well before that.
    #[arg(long, env = "TOLLGATE_LEASE_GRACE", default_value = "5s", value_parser = parse_interval)]
    pub lease_grace: Duration,
    /// This replica's identity in the Lease (default: $POD_NAME, else host name and process id).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
}

impl ElectionArgs {
    fn identity(&self) -> String {
        self.identity.clone().unwrap_or_else(|| {
            let host = std::fs::read_to_string("/etc/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "tollgate".into());
            format!("{host}-{}", std::process::id())
        })
    }
}

#[derive(clap::Args, Debug)]
pub struct GitAuthArgs {
    /// File holding an access token for https remotes (sent as the basic-auth password).
    #[arg(
        long,
        env = "TOLLGATE_GIT_TOKEN_FILE",
        conflicts_with = "git_token_env"
    )]
    pub git_token_file: Option<PathBuf>,
    /// Name of an environment variable holding an access token.
    #[arg(long, env = "TOLLGATE_GIT_TOKEN_ENV")]
    pub git_token_env: Option<String>,
    /// Username for basic auth (with --git-password-file), or for the token (default x-access-token).
    #[arg(long, env = "TOLLGATE_GIT_USERNAME")]
    pub git_username: Option<String>,
    /// File holding the basic-auth password.
    #[arg(long, env = "TOLLGATE_GIT_PASSWORD_FILE", requires = "git_username")]
    pub git_password_file: Option<PathBuf>,
    /// Private key for ssh remotes.
    #[arg(long, env = "TOLLGATE_SSH_KEY_FILE", requires = "ssh_known_hosts")]
    pub ssh_key_file: Option<PathBuf>,
    /// known_hosts file the ssh host key is checked against (unknown hosts are refused).
    #[arg(long, env = "TOLLGATE_SSH_KNOWN_HOSTS")]
    pub ssh_known_hosts: Option<PathBuf>,
}

impl GitAuthArgs {
    pub fn to_auth(&self) -> anyhow::Result<Auth> {
        let token_file = optional_secret(
            "--git-token-file",
            &self.git_token_file,
            "a git token (fetching anonymously)",
        )?;
        let token = match (token_file, &self.git_token_env) {
            (Some(token), _) => Some(token),
            (None, Some(var)) => Some(Secret::from_env(var)?),
            (None, None) => None,
        };
        if let Some(token) = token {
            // Some hosts want a particular user name with a token (GitLab `oauth2`, Bitbucket
            // `x-token-auth`); GitHub takes any.
            return Ok(match &self.git_username {
                Some(username) => Auth::Basic {
                    username: username.clone(),
                    password: token,
                },
                None => Auth::Token { token },
            });
        }
        if let (Some(username), Some(file)) = (&self.git_username, &self.git_password_file) {
            return Ok(Auth::Basic {
                username: username.clone(),
                password: Secret::from_file(file)?,
            });
        }
        if let (Some(key_file), Some(known_hosts)) = (&self.ssh_key_file, &self.ssh_known_hosts) {
            return Ok(Auth::SshKey {
                key_file: key_file.clone(),
                known_hosts: known_hosts.clone(),
            });
        }
        Ok(Auth::None)
    }
}

fn parse_interval(text: &str) -> Result<Duration, String> {
    tollgate_manifest::duration::parse_go_duration(text).map_err(|e| e.to_string())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::block_on(run_async(args))
}

/// The run, as a pipeline: configuration checked → the management cluster reached → the
/// controller started → leader election and the server started → until a signal → stopped in
/// the order that keeps writes under the lease.
async fn run_async(args: Args) -> anyhow::Result<ExitCode> {
    let metrics = Arc::new(Metrics::new());
    // Configuration errors first, before anything starts.
    let election = match args.election.leader_elect {
        true => Some(election_config(&args.election)?),
        false => None,
    };
    let webhook_secrets = args.server.secrets()?;
    refuse_a_web_signer_that_approves(&args)?;
    let cache_dir = args.cache_dir.clone().unwrap_or_else(default_cache_dir);
    let source = source_config(&args, &cache_dir)?;
    let (mut kube_config, embedded_cluster) = management_cluster(&args, &cache_dir).await?;
    // Each replica's requests name it, as its Lease does.
    user_agent::identify(&mut kube_config, &args.election.identity());
    let concurrency = Concurrency::from_flags(
        args.concurrency.map(|n| n as usize),
        args.max_concurrency as usize,
    );
    let throttle = concurrency.throttle(metrics.throttle());
    let client = controller_client(kube_config.clone(), &throttle)?;
    let mut config = controller_config(&args, source, &concurrency, throttle, &metrics);
    if let Some(target) = crate::traces::TracesTarget::resolve(args.otlp_endpoint.as_deref()) {
        config.traces = crate::traces::Traces::exporting(&target)?;
        info!(collector = %target.traces_url, "each run is sent as an OpenTelemetry trace");
    }
    let gate = match election {
        Some(_) => LeaderGate::follower(),
        None => LeaderGate::always(),
    };
    // Returns at once: the controller waits for the management cluster in its task, with the
    // server below answering /healthz and saying on /readyz what it waits for.
    let (handle, task) = controller::start(client.clone(), config, gate.clone())
        .await
        .context("starting the controller")?;
    let (election_stop, election_stopped) = tokio::sync::oneshot::channel::<()>();
    let (fetch_relay, election_task) = match &election {
        Some(election) => {
            let (relay, task) = start_lease_tasks(
                &client,
                &kube_config,
                election,
                &gate,
                handle.poker.clone(),
                election_stopped,
            )?;
            (Some(relay), Some(task))
        }
        None => (None, None),
    };
    let served = Served {
        metrics: &metrics,
        handle: &handle,
        gate: &gate,
        fetch_relay,
    };
    let server = serve(&args, served, webhook_secrets).await?;
    announce(&args, embedded_cluster.as_ref());
    crate::signals::shutdown().await;
    info!("shutting down");
    // Writes stop first, then the controller ends, and only then is the lease released: no
    // write of this replica can land after a successor took over.
    gate.step_down();
    handle.shutdown();
    task.await.context("controller task")?;
    if let Some(election_task) = election_task {
        let _ = election_stop.send(());
        election_task.await.context("leader-election task")?;
    }
    if let Some((server_stop, server_task)) = server {
        let _ = server_stop.send(());
        server_task.await.context("server task")??;
    }
    Ok(ExitCode::SUCCESS)
}

/// The controller's settings from the flags.
fn controller_config(
    args: &Args,
    source: SourceConfig,
    concurrency: &Concurrency,
    throttle: Arc<Throttle>,
    metrics: &Arc<Metrics>,
) -> ControllerConfig {
    ControllerConfig {
        source,
        poll_interval: args.interval,
        dry_run: args.dry_run,
        guard: PruneGuard {
            max_share_percent: args.prune_max_share,
            confirmed: args.confirm_prune,
        },
        concurrency: concurrency.steps(),
        throttle,
        instance: std::env::var("POD_NAME").ok(),
        metrics: metrics.clone(),
        analysis: crate::analysis::AnalysisConfig {
            concurrency: args.analysis_concurrency as usize,
            timeout: args.analysis_timeout,
        },
        traces: crate::traces::Traces::disabled(),
    }
}

/// `--ui` with `--ui-repo` commits as the server: refused when its signing key is an approver's.
fn refuse_a_web_signer_that_approves(args: &Args) -> anyhow::Result<()> {
    if args.server.ui
        && let Some(ui_repo) = &args.server.ui_repo
    {
        super::ui_signing::refuse_approver_key(&super::ui_signing::WebSigner {
            ui_repo,
            tracked: &args.repo,
            branch: &args.branch,
            path: &args.path,
            trusted_keys: args.trust.trusted_keys.as_deref(),
        })?;
    }
    Ok(())
}

/// The git source the flags describe.
fn source_config(args: &Args, cache_dir: &Path) -> anyhow::Result<SourceConfig> {
    let mut source = SourceConfig::new(&args.repo, &args.branch, &args.path, cache_dir);
    source.timeouts = tollgate_source::timeouts::NetworkTimeouts {
        connect: args.git_timeout.min(Duration::from_secs(30)),
        io: args.git_timeout,
    };
    source.auth = args.git_auth.to_auth()?;
    source.trust = args.trust.config();
    Ok(source)
}

/// The management cluster: the embedded one (started here) or the kubeconfig's.
async fn management_cluster(
    args: &Args,
    cache_dir: &Path,
) -> anyhow::Result<(kube::Config, Option<embedded::EmbeddedCluster>)> {
    let Some(fleet_file) = &args.embedded else {
        return Ok((connect::config(&args.cluster).await?, None));
    };
    let options = embedded::EmbeddedOptions {
        insecure_http: args.embedded_insecure_http,
        kubeconfig: args.embedded_kubeconfig.clone(),
        listen: args.embedded_listen,
    };
    let (config, cluster) = embedded::start_for_run(fleet_file, options, cache_dir).await?;
    Ok((config, Some(cluster)))
}

/// What the server serves from the running controller.
struct Served<'a> {
    metrics: &'a Arc<Metrics>,
    handle: &'a ControllerHandle,
    gate: &'a LeaderGate,
    fetch_relay: Option<FetchRelay>,
}

/// The server (metrics, probes, webhooks, status API, the web view with `--ui`) when `--listen`.
async fn serve(
    args: &Args,
    served: Served<'_>,
    webhook_secrets: WebhookSecrets,
) -> anyhow::Result<Option<(tokio::sync::oneshot::Sender<()>, ServerTask)>> {
    let Some(listen) = args.server.listen else {
        return Ok(None);
    };
    let handle = served.handle;
    let state = ServerState {
        metrics: served.metrics.clone(),
        ready: handle.ready.clone(),
        startup: handle.startup.clone(),
        poker: handle.poker.clone(),
        statuses: server::status_api::status_source(handle.statuses.clone()),
        leader: served.gate.clone(),
        fetch_relay: served.fetch_relay,
        branch: args.branch.clone(),
        watch_health: handle.watch_health.clone(),
    };
    let ui = match args.server.ui {
        false => None,
        true => Some(web_router(args, handle)?),
    };
    Ok(Some(
        start_server(listen, webhook_secrets, state, ui).await?,
    ))
}

/// The log line that the controller runs, and the embedded cluster's reach block.
fn announce(args: &Args, embedded_cluster: Option<&embedded::EmbeddedCluster>) {
    info!(repo = %tollgate_source::redact_url(&args.repo), branch = %args.branch, dry_run = args.dry_run, "controller running");
    if args.dry_run {
        warn!("dry-run: every write is logged as 'dry-run: would …' and none is sent");
    }
    if let Some(cluster) = embedded_cluster {
        let repo = tollgate_source::redact_url(&args.repo);
        eprintln!(
            "\n{}\n",
            embedded::reach_block(cluster, &repo, &args.branch)
        );
    }
}

type ServerTask = tokio::task::JoinHandle<Result<(), server::ServerError>>;

/// The web view (`--ui`) over the controller's own statuses.
fn web_router(args: &Args, handle: &controller::ControllerHandle) -> anyhow::Result<axum::Router> {
    let source =
        crate::web::source::from_status_cache(handle.statuses.clone(), handle.git_labels.clone());
    let repo = args
        .server
        .ui_repo
        .as_ref()
        .map(|dir| crate::web::git_view::RepoTarget {
            dir: dir.clone(),
            branch: args.branch.clone(),
            path: args.path.clone(),
            trust: Some(args.trust.config()),
        });
    let config = args.server.ui_args.web_config(source, repo)?;
    Ok(crate::web::router(config))
}

/// Binds and serves the HTTP server until the returned sender fires (or is dropped).
async fn start_server(
    listen: SocketAddr,
    webhooks: WebhookSecrets,
    state: ServerState,
    ui: Option<axum::Router>,
) -> anyhow::Result<(tokio::sync::oneshot::Sender<()>, ServerTask)> {
    let mut server_config = ServerConfig::new(listen);
    server_config.webhooks = webhooks;
    server_config.ui = ui;
    let bound = server::bind(&server_config, state)
        .await
        .context("starting the HTTP server")?;
    info!(addr = %bound.local_addr(), "serving /healthz, /readyz, /metrics, webhooks and the status API");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(bound.run(async move {
        let _ = stopped.await;
    }));
    Ok((stop, task))
}

fn election_config(args: &ElectionArgs) -> anyhow::Result<ElectionConfig> {
    if args.lease_grace >= args.lease_duration {
        anyhow::bail!(
            "--lease-grace ({:?}) must be shorter than --lease-duration ({:?}): the leader stops writing a grace period before its lease expires",
            args.lease_grace,
            args.lease_duration
        );
    }
    Ok(ElectionConfig {
        lease_name: args.lease_name.clone(),
        lease_namespace: args.lease_namespace.clone(),
        identity: args.identity(),
        duration: args.lease_duration,
        grace: args.lease_grace,
    })
}

/// Starts the lease loop (stopped, and the lease released, when `stop` fires), the watch that
/// pokes git when a standby relays a webhook, and the relay itself (returned for the server).
fn start_lease_tasks(
    client: &Client,
    kube_config: &kube::Config,
    election: &ElectionConfig,
    gate: &LeaderGate,
    poker: tollgate_source::Poker,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> anyhow::Result<(FetchRelay, tokio::task::JoinHandle<()>)> {
    // A lease request that hangs must not outlive the validity window: each is bounded.
    let mut lease_config = kube_config.clone();
    let bound = election.retry_period();
    lease_config.connect_timeout = Some(bound);
    lease_config.read_timeout = Some(bound);
    lease_config.write_timeout = Some(bound);
    lease_config.default_retry = false;
    let lease_client =
        Client::try_from(lease_config).context("building the leader-election client")?;
    let task = tokio::spawn(run_election(
        lease_client,
        election.clone(),
        gate.clone(),
        async move {
            let _ = stop.await;
        },
    ));
    let namespace = &election.lease_namespace;
    tokio::spawn(watch_fetch_requests(
        client.clone(),
        namespace.clone(),
        election.lease_name.clone(),
        poker,
    ));
    let (relay, _relay_task) = start_relay(
        client.clone(),
        namespace,
        &election.lease_name,
        gate.clone(),
    );
    Ok((relay, task))
}

fn default_cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("tollgate")
}

/// The controller's client, without kube's built-in retry of 429/503/504: that retry backs off
/// up to minutes inside one request (15 attempts from 5 ms, doubling), which held a step started
/// during an API-server outage for many seconds after the server was back, and blocked the loop
/// meanwhile. Refused steps are retried by the controller instead, 200 ms doubling to 2 s; only
/// a 429 is sent again within the step, by the writer after its Retry-After (`cluster::writer`).
pub fn controller_client(
    mut config: kube::Config,
    throttle: &Arc<Throttle>,
) -> anyhow::Result<Client> {
    config.default_retry = false;
    user_agent::identify_if_anonymous(&mut config);
    let builder = ClientBuilder::try_from(config).context("building the Kubernetes client")?;
    Ok(builder
        // Under the throttle, so a request waiting for a slot does not hold up the others.
        .with_layer(&BufferLayer::new(1024))
        .with_layer(&ThrottleLayer::new(throttle.clone()))
        .build())
}

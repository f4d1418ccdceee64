//! tollgate's HTTP server: `/healthz`, `/readyz`, `/metrics`, webhook receivers that ask for a git
//! sync, and a read-only JSON status API. Nothing served here writes to git; the one cluster
//! write is a verified webhook on a standby stamping the leader Lease (see
//! [`crate::cluster::fetch_request`]), which carries no content, only "fetch now".

pub mod error;
pub mod probes;
pub mod status_api;
pub mod webhook;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tollgate_source::{Poker, Secret};
use tracing::{info, warn};

use crate::cluster::fetch_request::FetchRelay;
use crate::cluster::leader::LeaderGate;
use crate::cluster::watch::WatchHealth;
use crate::controller::Startup;
use crate::metrics::Metrics;
pub use error::ServerError;
pub use webhook::Provider;

/// The default webhook body limit: push payloads of huge commits stay well below it.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub webhooks: WebhookSecrets,
    /// Webhook bodies beyond this are refused with 413.
    pub max_body_bytes: usize,
    /// The web view's routes under `/ui` (`run --ui`), merged in when set.
    pub ui: Option<Router>,
}

impl ServerConfig {
    /// No webhooks, the default body limit.
    pub fn new(listen: SocketAddr) -> Self {
        ServerConfig {
            listen,
            webhooks: WebhookSecrets::default(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            ui: None,
        }
    }
}

/// One secret per provider; a provider without one has no webhook (it answers 404).
/// `Secret` prints as `<redacted>`, so this is safe to log.
#[derive(Clone, Debug, Default)]
pub struct WebhookSecrets(BTreeMap<Provider, Secret>);

impl WebhookSecrets {
    /// These secrets and `secret` for `provider`.
    pub fn with(mut self, provider: Provider, secret: Secret) -> Self {
        self.0.insert(provider, secret);
        self
    }

    /// Sets (or with `None`, removes) the secret of `provider`.
    pub fn set(&mut self, provider: Provider, secret: Option<Secret>) {
        match secret {
            Some(secret) => self.0.insert(provider, secret),
            None => self.0.remove(&provider),
        };
    }

    /// The usable secret of `provider`: an empty one would make signatures forgeable, so it
    /// counts as none.
    pub fn get(&self, provider: Provider) -> Option<&Secret> {
        self.configured(provider)
            .filter(|secret| !secret.expose().is_empty())
    }

    fn configured(&self, provider: Provider) -> Option<&Secret> {
        self.0.get(&provider)
    }
}

/// Every full status (or only the one named), keyed by promotion name (the JSON of
/// `PromotionStatus`). Named, so that one promotion's status does not cost reading every one back
/// (statuses are kept deflated).
pub type StatusSource =
    Arc<dyn Fn(Option<&str>) -> Vec<(String, tollgate_engine::PromotionStatus)> + Send + Sync>;

/// What the server reads from, and pokes, in the running controller.
#[derive(Clone)]
pub struct ServerState {
    pub metrics: Arc<Metrics>,
    /// True once git synced and every initial watch listed.
    pub ready: watch::Receiver<bool>,
    /// Whether the controller still waits for the management cluster, and why (`/readyz`).
    pub startup: watch::Receiver<Startup>,
    /// Asks the git task for a sync (webhooks).
    pub poker: Poker,
    pub statuses: StatusSource,
    pub leader: LeaderGate,
    /// With leader election: how a verified webhook on a standby reaches the leader.
    pub fetch_relay: Option<FetchRelay>,
    /// The tracked branch: pushes to other refs are ignored.
    pub branch: String,
    /// Which cluster watches fail: `/readyz` fails once one has failed beyond its grace.
    pub watch_health: WatchHealth,
}

/// What every handler sees.
pub(crate) struct Shared {
    state: ServerState,
    secrets: WebhookSecrets,
    max_body_bytes: usize,
}

impl Shared {
    fn secret(&self, provider: Provider) -> Option<&Secret> {
        self.secrets.get(provider)
    }
}

pub(crate) type AppState = Arc<Shared>;

pub fn router(state: ServerState, config: &ServerConfig) -> Router {
    for provider in Provider::ALL {
        let configured = config.webhooks.configured(provider).is_some();
        if configured && config.webhooks.get(provider).is_none() {
            warn!(
                provider = provider.name(),
                "webhook secret is empty: the webhook stays disabled"
            );
        }
    }
    let shared: AppState = Arc::new(Shared {
        state,
        secrets: config.webhooks.clone(),
        max_body_bytes: config.max_body_bytes,
    });
    let router = Router::new()
        .route("/healthz", get(probes::healthz))
        .route("/readyz", get(probes::readyz))
        .route("/metrics", get(probes::metrics))
        .route("/webhooks/{provider}", post(webhook::receive_named))
        .route("/api/v1/promotions", get(status_api::list))
        .route("/api/v1/promotions/{name}", get(status_api::get))
        .with_state(shared);
    match &config.ui {
        Some(ui) => router.merge(ui.clone()),
        None => router,
    }
}

/// A server bound to its address but not yet serving: lets callers (and tests binding port 0)
/// learn the address before requests arrive.
pub struct BoundServer {
    listener: TcpListener,
    addr: SocketAddr,
    router: Router,
}

pub async fn bind(config: &ServerConfig, state: ServerState) -> Result<BoundServer, ServerError> {
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServerError::Bind {
            addr: config.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(ServerError::LocalAddr)?;
    Ok(BoundServer {
        listener,
        addr,
        router: router(state, config),
    })
}

impl BoundServer {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` completes, then lets in-flight requests finish.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let addr = self.addr;
        info!(%addr, "HTTP server listening");
        // The web view's Host allow-list admits the address each connection reached.
        let service = self
            .router
            .into_make_service_with_connect_info::<crate::web::ServedOn>();
        axum::serve(self.listener, service)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|source| ServerError::Serve { addr, source })?;
        info!(%addr, "HTTP server stopped");
        Ok(())
    }
}

/// Binds `config.listen` and serves until `shutdown` completes.
pub async fn serve(
    config: ServerConfig,
    state: ServerState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    bind(&config, state).await?.run(shutdown).await
}

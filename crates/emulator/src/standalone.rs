//! `tollgate emulator`: serve a fleet until Ctrl-C, with an optional state file.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::fleet::Fleet;
use crate::server::{Emulator, EmulatorConfig, EmulatorError, EmulatorHandle, Transport};
use crate::tls::TlsAuthority;

/// How often the state file is rewritten while the store changes.
const SAVE_INTERVAL: Duration = Duration::from_secs(3);

/// A JSON file that may not exist yet: `None` when it does not.
fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, EmulatorError> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| EmulatorError::StateFile {
                path: path.to_path_buf(),
                message: e.to_string(),
            }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(EmulatorError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn read_state(path: &Path) -> Result<Option<Value>, EmulatorError> {
    read_json(path)
}

/// Where the TLS authority is kept beside a state file: `state.json` → `state.tls.json`.
pub fn authority_path(state_file: &Path) -> PathBuf {
    state_file.with_extension("tls.json")
}

fn read_authority(path: &Path) -> Result<Option<TlsAuthority>, EmulatorError> {
    read_json(path)
}

/// With TLS and a state file, the CA and client credentials of the previous run, if any: the
/// kubeconfig clients hold stays valid across a restart, as a real cluster's does.
fn resumed_transport(
    transport: Transport,
    state_file: Option<&Path>,
) -> Result<Transport, EmulatorError> {
    match (transport, state_file) {
        (Transport::Tls, Some(state_file)) => {
            Ok(read_authority(&authority_path(state_file))?
                .map_or(Transport::Tls, Transport::TlsWith))
        }
        (transport, _) => Ok(transport),
    }
}

fn save_authority(handle: &EmulatorHandle, state_file: &Path) -> Result<(), EmulatorError> {
    let Some(credentials) = handle.tls_credentials() else {
        return Ok(());
    };
    let path = authority_path(state_file);
    let text =
        serde_json::to_string(credentials.authority()).map_err(|e| EmulatorError::StateFile {
            path: path.clone(),
            message: e.to_string(),
        })?;
    crate::kubeconfig::write_private(&path, &text)
        .map_err(|source| EmulatorError::Io { path, source })
}

fn save_state(handle: &EmulatorHandle, path: &Path) -> Result<(), EmulatorError> {
    let temporary = path.with_extension("tmp");
    let text = handle.state_json().to_string();
    std::fs::write(&temporary, text).map_err(|source| EmulatorError::Io {
        path: temporary.clone(),
        source,
    })?;
    std::fs::rename(&temporary, path).map_err(|source| EmulatorError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// How a standalone emulator loads its clients like a busy real server: latency added to every
/// request, and the real server's max-in-flight limits (see
/// [`EmulatorHandle::set_max_inflight`]). The default is none of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServingFaults {
    pub max_requests_inflight: Option<usize>,
    pub max_mutating_requests_inflight: Option<usize>,
    pub request_latency: Duration,
}

/// What `tollgate emulator` serves, where, and how.
#[derive(Debug, Clone)]
pub struct StandaloneConfig {
    /// The fleet file.
    pub fleet: PathBuf,
    /// CRDs served from the start besides the built-in types ([`EmulatorConfig::crds`]).
    pub crds: Vec<Value>,
    /// Loopback address (default a free port on 127.0.0.1).
    pub listen: Option<SocketAddr>,
    /// Where the kubeconfig is written.
    pub kubeconfig: PathBuf,
    /// Loaded at start, saved every few seconds and on exit. With TLS, the CA and client
    /// credentials are kept beside it ([`authority_path`]), so clients survive a restart.
    pub state_file: Option<PathBuf>,
    pub transport: Transport,
    pub serving: ServingFaults,
}

/// Serves the fleet, writes the kubeconfig, prints where both are, and runs until Ctrl-C.
pub async fn run_standalone(config: StandaloneConfig) -> Result<(), EmulatorError> {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for Ctrl-C; stopping");
        }
    };
    run_standalone_until(config, ctrl_c).await
}

/// [`run_standalone`] that stops when `stop` completes instead of on Ctrl-C.
pub async fn run_standalone_until(
    standalone: StandaloneConfig,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), EmulatorError> {
    let StandaloneConfig {
        fleet,
        crds,
        listen,
        kubeconfig,
        state_file,
        transport,
        serving,
    } = standalone;
    let fleet = Fleet::load(&fleet)?;
    let initial_state = match &state_file {
        Some(path) => read_state(path)?,
        None => None,
    };
    let transport = resumed_transport(transport, state_file.as_deref())?;
    let mut config = EmulatorConfig {
        fleet,
        crds,
        initial_state,
        transport,
        ..EmulatorConfig::default()
    };
    if let Some(listen) = listen {
        config.listen = listen;
    }
    let handle = Emulator::start(config).await?;
    handle.set_request_latency(serving.request_latency);
    handle.set_max_inflight(
        serving.max_requests_inflight,
        serving.max_mutating_requests_inflight,
    );
    if let Some(state_file) = &state_file {
        save_authority(&handle, state_file)?;
    }
    handle.write_kubeconfig(&kubeconfig)?;
    println!("tollgate emulator listening on {}", handle.url());
    match handle.tls_credentials() {
        // Where the credentials are, never what they are.
        Some(_) => println!(
            "kubeconfig written to {} (it holds the CA and the credentials: a client certificate, and a token in context {})",
            kubeconfig.display(),
            crate::kubeconfig::TOKEN_CONTEXT_NAME
        ),
        None => println!("kubeconfig written to {}", kubeconfig.display()),
    }
    println!(
        "try: kubectl --kubeconfig {} get sveltosclusters -A",
        kubeconfig.display()
    );
    let mut saved_version = 0;
    let mut ticker = tokio::time::interval(SAVE_INTERVAL);
    let mut stop = std::pin::pin!(stop);
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                if let Some(path) = &state_file {
                    let version = handle.resource_version();
                    if version != saved_version {
                        save_state(&handle, path)?;
                        saved_version = version;
                    }
                }
            }
            () = &mut stop => break,
        }
    }
    if let Some(path) = &state_file {
        save_state(&handle, path)?;
    }
    handle.shutdown().await;
    Ok(())
}

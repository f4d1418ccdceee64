//! `tollgate run --embedded FLEET`: the in-process management cluster, its kubeconfig (one per
//! run, never a shared file another run overwrites) and the short block that tells a newcomer how
//! to reach it. Built with the `embedded` cargo feature (on by default; the container image is
//! built without it, see `embedded_absent.rs`).

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use kube::config::Kubeconfig;
use tollgate_emulator::{Emulator, EmulatorConfig, EmulatorHandle, Fleet, Transport};

use super::connect;
use super::fleet_health::FleetHealth;

/// A running embedded cluster and the kubeconfig written for it. The kubeconfig of a run that
/// chose no path lives in its own directory and is removed when the run ends, so a later
/// `tollgate status` with that file says "no such file", not "Connection refused".
pub struct EmbeddedCluster {
    pub emulator: EmulatorHandle,
    pub kubeconfig: PathBuf,
    owned_dir: Option<PathBuf>,
    /// The fleet's health endpoint, when the fleet file names one.
    pub health: Option<FleetHealth>,
}

/// How `run --embedded` starts its cluster (the `--embedded-*` flags).
#[derive(Clone, Debug, Default)]
pub struct EmbeddedOptions {
    pub insecure_http: bool,
    pub kubeconfig: Option<PathBuf>,
    /// The API's address (default: a free port on 127.0.0.1).
    pub listen: Option<SocketAddr>,
}

impl Drop for EmbeddedCluster {
    fn drop(&mut self) {
        if let Some(dir) = &self.owned_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The emulator as tollgate runs it: serving tollgate's own CRD besides the built-in types, as
/// a management cluster where `tollgate crd | kubectl apply -f -` was run.
pub fn emulator_config() -> EmulatorConfig {
    EmulatorConfig {
        crds: vec![crate::cluster::crd::git_promotion_crd_json()],
        ..EmulatorConfig::default()
    }
}

/// `run --embedded`: the cluster, and the configuration the controller reaches it with.
pub async fn start_for_run(
    fleet_file: &Path,
    options: EmbeddedOptions,
    cache_dir: &Path,
) -> anyhow::Result<(kube::Config, EmbeddedCluster)> {
    let transport = match options.insecure_http {
        true => Transport::PlainHttp,
        false => Transport::Tls,
    };
    let mut cluster = start(
        fleet_file,
        transport,
        options.kubeconfig,
        cache_dir,
        options.listen,
    )
    .await?;
    let fleet = Fleet::load(fleet_file)?;
    if let Some(addr) = fleet.health_endpoint {
        cluster.health = Some(super::fleet_health::serve(addr, fleet_file).await?);
    }
    let config = controller_config(&cluster.emulator).await?;
    Ok((config, cluster))
}

pub async fn start(
    fleet_file: &Path,
    transport: Transport,
    kubeconfig: Option<PathBuf>,
    cache_dir: &Path,
    listen: Option<SocketAddr>,
) -> anyhow::Result<EmbeddedCluster> {
    let (path, owned_dir) = match kubeconfig {
        Some(path) => (path, None),
        None => {
            let dir = cache_dir
                .join("embedded")
                .join(std::process::id().to_string());
            (dir.join("kubeconfig"), Some(dir))
        }
    };
    refuse_if_in_use(&path)?;
    let fleet = Fleet::load(fleet_file)?;
    let defaults = emulator_config();
    let emulator = Emulator::start(EmulatorConfig {
        fleet,
        transport,
        listen: listen.unwrap_or(defaults.listen),
        ..defaults
    })
    .await?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    emulator.write_kubeconfig(&path)?;
    Ok(EmbeddedCluster {
        emulator,
        kubeconfig: path,
        owned_dir,
        health: None,
    })
}

/// Another live embedded cluster's kubeconfig is not overwritten: its users would silently be
/// switched to this run's cluster (or, once this run ends, to nothing).
fn refuse_if_in_use(path: &Path) -> anyhow::Result<()> {
    let Ok(kubeconfig) = Kubeconfig::read_from(path) else {
        return Ok(());
    };
    for server in kubeconfig
        .clusters
        .iter()
        .filter_map(|named| named.cluster.as_ref()?.server.clone())
    {
        if answers(&server) {
            bail!(
                "the kubeconfig {} belongs to a running cluster at {server}: stop that run or pass \
                 another --embedded-kubeconfig",
                path.display()
            );
        }
    }
    Ok(())
}

fn answers(server: &str) -> bool {
    // "https://127.0.0.1:34567" or "http://[::1]:8080/": the authority's host and port.
    let authority = server
        .split_once("://")
        .map_or(server, |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default();
    let Some((host, port)) = authority.rsplit_once(':') else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let Ok(addresses) = (host, port.parse::<u16>().unwrap_or(0)).to_socket_addrs() else {
        return false;
    };
    addresses
        .into_iter()
        .any(|address| TcpStream::connect_timeout(&address, Duration::from_millis(300)).is_ok())
}

/// The controller reaches its embedded cluster as any client does, through the kubeconfig text;
/// over TLS as the token's user (the file's default context, which `tollgate status` and kubectl
/// use, holds the client certificate), so both ways of authenticating run.
pub async fn controller_config(emulator: &EmulatorHandle) -> anyhow::Result<kube::Config> {
    match emulator.tls_credentials() {
        None => connect::config_for_url(&emulator.url()),
        Some(_) => {
            let context = tollgate_emulator::kubeconfig::TOKEN_CONTEXT_NAME;
            connect::config_from_kubeconfig_text(&emulator.kubeconfig_yaml(), context).await
        }
    }
}

/// What a newcomer needs in the second terminal, printed once the cluster is up: the exact
/// `export` lines (the binary's directory when it is not on PATH) and where to commit.
pub fn reach_block(cluster: &EmbeddedCluster, repo: &str, branch: &str) -> String {
    let kubeconfig = cluster.kubeconfig.display();
    let mut lines = vec![
        format!("embedded management cluster at {}", cluster.emulator.url()),
        format!(
            "  kubeconfig: {kubeconfig}{}",
            match cluster.owned_dir {
                Some(_) => " (this run's own; removed when it stops)",
                None => "",
            }
        ),
    ];
    if let Some(health) = &cluster.health {
        lines.push(format!(
            "  fleet health: http://{}/clusters/<namespace>/<name> (the fleet file's health values; edit them to fail a gate)",
            health.addr
        ));
    }
    lines.extend([
        "In another terminal:".to_string(),
        format!("  export KUBECONFIG={kubeconfig}"),
    ]);
    if let Some(dir) = binary_dir_off_path() {
        lines.push(format!("  export PATH=\"{}:$PATH\"", dir.display()));
    }
    lines.push("  tollgate status --watch".to_string());
    lines.push(
        "  kubectl get clusterprofiles,clustersummaries -A   # kubectl works too".to_string(),
    );
    lines.push(format!(
        "Commit to {repo} (branch {branch}) to roll out; `git revert` rolls back."
    ));
    lines.join("\n")
}

/// The directory of this `tollgate` binary when `tollgate` on PATH is not this binary.
fn binary_dir_off_path() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?.canonicalize().ok()?;
    let dir = exe.parent()?.to_path_buf();
    let on_path = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths)
            .filter_map(|p| p.join("tollgate").canonicalize().ok())
            .any(|found| found == exe)
    });
    (!on_path).then_some(dir)
}

//! Connecting to the management cluster: kubeconfig (with context), in-cluster config, or a URL
//! (the embedded emulator).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::{Client, Config};

use super::client_certificate;
use crate::cluster::user_agent;

#[derive(clap::Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Kubeconfig file; default: $KUBECONFIG (a `:`-separated list; empty means unset, as for
    /// kubectl), ~/.kube/config, then in-cluster config.
    // Not `env = "KUBECONFIG"`: clap would take a path list as one path, an empty value as a path,
    // and a shell's KUBECONFIG as a conflict with `run --embedded`. kube reads it as kubectl does.
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
}

pub async fn client(args: &ClusterArgs) -> anyhow::Result<Client> {
    Ok(connect(args).await?.client)
}

/// A client and where it points, for errors: "Connection refused" alone names neither the server
/// nor the kubeconfig that chose it (a stale embedded kubeconfig was the usual cause).
pub struct Connection {
    pub client: Client,
    /// `API server https://127.0.0.1:6443 (kubeconfig /path, context ctx)`.
    pub target: String,
}

pub async fn connect(args: &ClusterArgs) -> anyhow::Result<Connection> {
    let config = config(args).await?;
    let target = describe(args, &config);
    let client = Client::try_from(config)
        .with_context(|| format!("building the Kubernetes client for {target}"))?;
    Ok(Connection { client, target })
}

fn describe(args: &ClusterArgs, config: &Config) -> String {
    let source = match (&args.kubeconfig, kubeconfig_env()) {
        (Some(path), _) => format!("kubeconfig {}", path.display()),
        (None, Some(paths)) => format!("kubeconfig KUBECONFIG={paths}"),
        (None, None) if args.context.is_some() => "the default kubeconfig".to_string(),
        (None, None) => "the default kubeconfig or in-cluster config".to_string(),
    };
    let context = match &args.context {
        Some(context) => format!(", context {context}"),
        None => String::new(),
    };
    format!("API server {} ({source}{context})", config.cluster_url)
}

/// `$KUBECONFIG` when it names at least one file; empty or unset is "not set", as for kubectl.
fn kubeconfig_env() -> Option<String> {
    std::env::var("KUBECONFIG")
        .ok()
        .filter(|value| std::env::split_paths(value).any(|p| !p.as_os_str().is_empty()))
}

/// The client configuration `args` select. kube bounds every request (30 s to connect, 295 s to
/// read, long enough for a watch); callers that need tighter bounds shorten them.
pub async fn config(args: &ClusterArgs) -> anyhow::Result<Config> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let mut config = match (&args.kubeconfig, kubeconfig_env()) {
        (Some(path), _) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .map_err(|error| without_quoted_path(error, Some(path)))
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?
        }
        (None, Some(paths)) => Config::from_kubeconfig(&options)
            .await
            .map_err(|error| without_quoted_path(error, None))
            .with_context(|| format!("loading the kubeconfig KUBECONFIG={paths}"))?,
        (None, None) if args.context.is_some() => Config::from_kubeconfig(&options)
            .await
            .map_err(|error| without_quoted_path(error, None))
            .context("loading the default kubeconfig")?,
        (None, None) => Config::infer()
            .await
            .context("no kubeconfig found and not running in a cluster")?,
    };
    client_certificate::check(&config.auth_info)?;
    user_agent::identify(&mut config, &user_agent::this_host());
    Ok(config)
}

/// kube words a kubeconfig it cannot read as `failed to read kubeconfig from '"/path"': …`: the
/// path's `Debug` form inside quotes of its own. Here the cause alone when our context names the
/// file (`named`), else the file plainly and the cause (the context names a list).
fn without_quoted_path(error: KubeconfigError, named: Option<&Path>) -> anyhow::Error {
    match error {
        KubeconfigError::ReadConfig(source, path) if named == Some(path.as_path()) => {
            anyhow::Error::new(source)
        }
        KubeconfigError::ReadConfig(source, path) => {
            anyhow::Error::new(source).context(format!("cannot read {}", path.display()))
        }
        other => anyhow::Error::new(other),
    }
}

/// The configuration a kubeconfig's text selects in `context` (the embedded emulator's, which
/// is never written to disk before the controller reads it).
pub async fn config_from_kubeconfig_text(text: &str, context: &str) -> anyhow::Result<Config> {
    let kubeconfig = Kubeconfig::from_yaml(text).context("parsing the embedded kubeconfig")?;
    let options = KubeConfigOptions {
        context: Some(context.to_string()),
        ..KubeConfigOptions::default()
    };
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .with_context(|| format!("loading the embedded kubeconfig's context {context}"))?;
    user_agent::identify(&mut config, &user_agent::this_host());
    Ok(config)
}

/// A client for a plain-HTTP loopback API server (the embedded emulator).
pub fn client_for_url(url: &str) -> anyhow::Result<Client> {
    Client::try_from(config_for_url(url)?).context("building the Kubernetes client")
}

/// The configuration of [`client_for_url`].
pub fn config_for_url(url: &str) -> anyhow::Result<Config> {
    let uri = url
        .parse()
        .with_context(|| format!("invalid API server URL {url}"))?;
    let mut config = Config::new(uri);
    user_agent::identify(&mut config, &user_agent::this_host());
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The path is named once, plainly: kube's own message quoted its `Debug` form in quotes.
    #[tokio::test]
    async fn a_missing_kubeconfig_is_named_once_without_doubled_quotes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("no-such-kubeconfig");
        let args = ClusterArgs {
            kubeconfig: Some(path.clone()),
            context: None,
        };
        let Err(error) = config(&args).await else {
            panic!("a missing kubeconfig loads");
        };
        let text = crate::cli::error_chain(&error);
        assert!(!text.contains("'\""), "doubled quotes: {text}");
        assert!(!text.contains("\"'"), "doubled quotes: {text}");
        assert_eq!(
            text,
            format!(
                "reading kubeconfig {}: No such file or directory (os error 2)",
                path.display()
            )
        );
    }
}

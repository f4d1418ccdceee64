//! `run --embedded` and `tollgate emulator` in a build without the `embedded` cargo feature (the
//! container image: a production controller has no use for an emulated cluster, and does not
//! carry one). The flags and the subcommand stay, so that using them says why they do nothing.

use std::path::{Path, PathBuf};

use anyhow::bail;

/// What using the embedded cluster in this build answers.
pub const NOT_BUILT_IN: &str = "this tollgate is built without the embedded management cluster \
(cargo feature `embedded`, left out of the container image): point it at a cluster with \
--kubeconfig or in-cluster config, or use a default build (`cargo install --path .`)";

/// No embedded cluster exists in this build.
pub enum EmbeddedCluster {}

/// The `--embedded-*` flags, read by nothing in this build.
#[derive(Clone, Debug, Default)]
pub struct EmbeddedOptions {
    pub insecure_http: bool,
    pub kubeconfig: Option<PathBuf>,
    pub listen: Option<std::net::SocketAddr>,
}

pub async fn start_for_run(
    _fleet_file: &Path,
    _options: EmbeddedOptions,
    _cache_dir: &Path,
) -> anyhow::Result<(kube::Config, EmbeddedCluster)> {
    bail!("--embedded: {NOT_BUILT_IN}")
}

pub fn reach_block(cluster: &EmbeddedCluster, _repo: &str, _branch: &str) -> String {
    match *cluster {}
}

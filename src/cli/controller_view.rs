//! What the controller says of one promotion, read from its GitPromotion: the commands that act
//! on a run (`approve`, `history`) see what the controller sees, not only what git here says
//! (issue #44): which run waits, numbered as the controller numbers it, and which commit of the
//! branch the controller refuses to roll out.

use kube::Api;
use kube::api::DynamicObject;
use tollgate_engine::PromotionStatus;
use tollgate_source::edit::WaitingRun;

use super::connect::ClusterArgs;

/// Whether a cluster is named: `--kubeconfig`, `--context`, or (with `implicit`) a `KUBECONFIG`
/// in the environment, as a person who reads `tollgate status` has.
pub fn named(cluster: &ClusterArgs, implicit: bool) -> bool {
    cluster.kubeconfig.is_some()
        || cluster.context.is_some()
        || (implicit && std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty()))
}

/// How long the read may take: a stale `KUBECONFIG` must not stall a command for kube's 30 s
/// connect timeout.
const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The GitPromotion's status; `Ok(None)` when the cluster has no such promotion (yet).
pub fn read(cluster: &ClusterArgs, name: &str) -> anyhow::Result<Option<PromotionStatus>> {
    super::block_on(async {
        let read = async {
            let client = super::connect::client(cluster).await?;
            let api: Api<DynamicObject> =
                Api::all_with(client, &crate::cluster::resources::git_promotion());
            let object = api.get_opt(name).await?;
            let status = object.as_ref().and_then(|o| o.data.get("status"));
            Ok(crate::views::shown::status_of(status)?)
        };
        tokio::time::timeout(READ_TIMEOUT, read)
            .await
            .unwrap_or_else(|_| anyhow::bail!("no answer within {READ_TIMEOUT:?}"))
    })
}

/// [`read`] when a cluster is named; a failed read is a warning (git alone decides then).
pub fn read_or_warn(cluster: &ClusterArgs, name: &str, implicit: bool) -> Option<PromotionStatus> {
    if !named(cluster, implicit) {
        return None;
    }
    match read(cluster, name) {
        Ok(status) => status,
        Err(error) => {
            eprintln!(
                "warning: cannot read the GitPromotion {name:?}: {}",
                super::error_chain(&error)
            );
            None
        }
    }
}

/// The run the status shows: its snapshot, as the controller numbers it.
pub fn current_run(status: &PromotionStatus) -> Option<WaitingRun> {
    Some(WaitingRun {
        index: status.snapshot_index?,
        id: status.snapshot_id.clone()?,
        commit: status.snapshot_commit.clone()?,
    })
}

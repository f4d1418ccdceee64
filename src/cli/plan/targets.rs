//! Which clusters each stage would hit: the management cluster's SveltosClusters and Cluster API
//! clusters, matched as the engine matches them (`ObservedCluster::targeted_by`); and the live
//! status of each promotion (its GitPromotion's), from which the estimate starts. Reading is
//! optional (only with `--kubeconfig` or `--context`) and never fails the plan: a failed read is
//! a warning and "unknown" targets.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams};
use tollgate_engine::{ObservedCluster, PromotionStatus};
use tollgate_model::model::LabelSelector;

use crate::cli::connect::{self, ClusterArgs};
use crate::cluster::errors::classify;
use crate::cluster::lean::LeanObject;
use crate::cluster::observe::{convert_capi_cluster, convert_sveltos_cluster};
use crate::cluster::resources;

/// How many cluster names a stage lists before "and N more".
const LISTED: usize = 10;

/// A plan must not hang on an unreachable cluster: it is a side dish to the git facts.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// What is known of the fleet.
#[derive(Debug)]
pub enum Fleet {
    /// No kubeconfig or context given.
    NotGiven,
    Read {
        clusters: Vec<ObservedCluster>,
        /// Each promotion's live status, by name (none: it has no GitPromotion, or no status).
        statuses: BTreeMap<String, PromotionStatus>,
    },
    /// The read failed: why.
    Failed(String),
}

impl Fleet {
    /// The warning to show once, when the read failed.
    pub fn warning(&self) -> Option<String> {
        match self {
            Fleet::Failed(why) => Some(format!(
                "cannot read the clusters from the management cluster, so the clusters per stage are unknown: {why}"
            )),
            _ => None,
        }
    }

    /// The clusters a stage with `selector` would hit, in one line.
    pub fn targets(&self, selector: &LabelSelector) -> String {
        let clusters = match self {
            Fleet::NotGiven => return "unknown (no cluster given)".to_string(),
            Fleet::Failed(_) => return "unknown (the cluster read failed)".to_string(),
            Fleet::Read { clusters, .. } => clusters,
        };
        let mut hit: Vec<String> = clusters
            .iter()
            .filter(|c| c.targeted_by(selector))
            .map(|c| format!("{}/{}", c.namespace, c.name))
            .collect();
        hit.sort();
        // Selected but not ready or paused: they get no add-ons now, the reader may wonder why.
        let idle = clusters
            .iter()
            .filter(|c| selector.matches(&c.labels) && !c.targeted_by(selector))
            .count();
        let mut line = match hit.len() {
            0 => "none (no ready cluster matches: the stage completes at once)".to_string(),
            n if n <= LISTED => format!("{n}: {}", hit.join(", ")),
            n => format!("{n}: {} and {} more", hit[..LISTED].join(", "), n - LISTED),
        };
        if idle > 0 {
            line.push_str(&format!("; {idle} more selected but not ready or paused"));
        }
        line
    }
}

/// Reads the fleet when `args` name a cluster; a failure is kept as [`Fleet::Failed`].
pub fn read_fleet(args: &ClusterArgs) -> Fleet {
    if args.kubeconfig.is_none() && args.context.is_none() {
        return Fleet::NotGiven;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return Fleet::Failed(format!("cannot start the async runtime: {error}")),
    };
    match runtime.block_on(list_clusters(args)) {
        Ok((clusters, statuses)) => Fleet::Read { clusters, statuses },
        Err(error) => Fleet::Failed(super::super::error_chain(&error)),
    }
}

impl Fleet {
    /// The live status of promotion `name`, when the cluster was read and has one.
    pub fn status(&self, name: &str) -> Option<&PromotionStatus> {
        match self {
            Fleet::Read { statuses, .. } => statuses.get(name),
            Fleet::NotGiven | Fleet::Failed(_) => None,
        }
    }

    /// The clusters, when the cluster was read.
    pub fn clusters(&self) -> Option<&[ObservedCluster]> {
        match self {
            Fleet::Read { clusters, .. } => Some(clusters),
            Fleet::NotGiven | Fleet::Failed(_) => None,
        }
    }
}

/// Every GitPromotion's status, by name. A status this version cannot read is left out (the
/// estimate then starts from scratch); a cluster that does not serve GitPromotions has none.
async fn list_statuses(
    client: &kube::Client,
) -> Result<BTreeMap<String, PromotionStatus>, crate::cluster::errors::ClusterError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resources::git_promotion());
    let objects = match super::super::status::fetch(&api, None).await {
        Ok(objects) => objects,
        Err(crate::cluster::errors::ClusterError::CrdMissing { .. }) => return Ok(BTreeMap::new()),
        Err(error) => return Err(error),
    };
    Ok(objects
        .iter()
        .map(super::super::status::Shown::of)
        .filter_map(|shown| Some((shown.name, shown.status.ok()??)))
        .collect())
}

async fn list_clusters(
    args: &ClusterArgs,
) -> anyhow::Result<(Vec<ObservedCluster>, BTreeMap<String, PromotionStatus>)> {
    let mut config = connect::config(args).await?;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    let server = match &args.kubeconfig {
        Some(path) => format!(
            "server {}, kubeconfig {}",
            config.cluster_url,
            path.display()
        ),
        None => format!("server {}", config.cluster_url),
    };
    let client = kube::Client::try_from(config)?;
    let list = |resource| Api::<LeanObject>::all_with(client.clone(), &resource);
    let params = ListParams::default();
    let sveltos = list(resources::sveltos_cluster())
        .list(&params)
        .await
        .map_err(|e| classify(e, "list", "sveltosclusters", ""))
        .map_err(|e| anyhow::anyhow!("{e} ({server})"))?;
    let mut clusters: Vec<ObservedCluster> = sveltos
        .items
        .iter()
        .filter_map(convert_sveltos_cluster)
        .map(|(_, cluster)| cluster)
        .collect();
    // Cluster API is optional on a management cluster: not served (404) means none.
    match list(resources::capi_cluster()).list(&params).await {
        Ok(capi) => clusters.extend(
            capi.items
                .iter()
                .filter_map(convert_capi_cluster)
                .map(|(_, cluster)| cluster),
        ),
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(error) => {
            let error = classify(error, "list", "clusters.cluster.x-k8s.io", "");
            anyhow::bail!("{error} ({server})");
        }
    }
    let statuses = list_statuses(&client)
        .await
        .map_err(|e| anyhow::anyhow!("{e} ({server})"))?;
    Ok((clusters, statuses))
}

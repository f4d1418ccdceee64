//! The watches feeding the controller's caches: Sveltos' types, tollgate's own state objects,
//! and Cluster API's clusters when served. Each reports what it changed as a [`Touch`].

use std::sync::Arc;

use kube::Client;
use kube::api::Api;
use kube::runtime::watcher;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::info;

use super::startup::Served;
use crate::cluster::cache::IndexedCache;
use crate::cluster::lean::LeanObject;
use crate::cluster::observe::{
    ObservedCaches, SummaryObject, convert_capi_cluster, convert_profile, convert_summary_object,
    convert_sveltos_cluster,
};
use crate::cluster::resources;
use crate::cluster::statuses::StatusCache;
use crate::cluster::watch::{Convert, IndexedBy, Touch, WatchHealth, WatchSpec, spawn_watch};

/// Where every watch reports: the touches it sees and its health.
struct Reporting {
    touches: mpsc::UnboundedSender<Touch>,
    health: WatchHealth,
}

impl Reporting {
    fn spawn<T, K>(&self, spec: WatchSpec<T, K>) -> JoinHandle<()>
    where
        T: Send + Sync + 'static,
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    {
        spawn_watch(spec, self.touches.clone(), self.health.clone())
    }
}

/// A watch of objects decoded lean, with the default watcher configuration.
fn lean_watch<T>(
    resource: &'static str,
    api: Api<LeanObject>,
    cache: Arc<IndexedCache<T>>,
    convert: Convert<T, LeanObject>,
    indexed_by: IndexedBy,
) -> WatchSpec<T, LeanObject> {
    WatchSpec {
        resource,
        api,
        config: watcher::Config::default(),
        cache,
        convert,
        indexed_by,
    }
}

/// The watches feeding the caches: Sveltos' types, tollgate's own state objects, and Cluster
/// API's clusters when served.
pub fn spawn_watches(
    client: &Client,
    caches: &Arc<ObservedCaches>,
    statuses: &Arc<StatusCache>,
    health: &WatchHealth,
    served: Served,
    touches: mpsc::UnboundedSender<Touch>,
) -> Vec<JoinHandle<()>> {
    let reporting = Reporting {
        touches,
        health: health.clone(),
    };
    // Decoded lean: nothing tollgate reads needs managed fields (see `cluster::lean`).
    let all = |ar| Api::<LeanObject>::all_with(client.clone(), &ar);
    let convert_state = {
        let statuses = statuses.clone();
        move |object: &LeanObject| statuses.convert_watched(object)
    };
    let mut watches = vec![
        reporting.spawn(lean_watch(
            "clusterprofiles",
            all(resources::cluster_profile()),
            caches.profiles.clone(),
            Box::new(convert_profile),
            IndexedBy::Promotion,
        )),
        reporting.spawn(WatchSpec {
            resource: "clustersummaries",
            // Decoded lean: the most numerous objects, and the engine reads few of their fields.
            api: Api::<SummaryObject>::all_with(client.clone(), &resources::cluster_summary()),
            config: watcher::Config::default(),
            cache: caches.summaries.clone(),
            convert: Box::new(convert_summary_object),
            indexed_by: IndexedBy::Profile,
        }),
        reporting.spawn(lean_watch(
            "sveltosclusters",
            all(resources::sveltos_cluster()),
            caches.clusters.clone(),
            Box::new(convert_sveltos_cluster),
            IndexedBy::Nothing,
        )),
    ];
    watches.push(reporting.spawn(WatchSpec {
        resource: "gitpromotions",
        api: all(resources::git_promotion()),
        config: watcher::Config::default(),
        cache: statuses.watched.clone(),
        convert: Box::new(convert_state),
        indexed_by: IndexedBy::Promotion,
    }));
    if served.capi_clusters {
        info!("Cluster API is served: CAPI clusters are matched too");
        watches.push(reporting.spawn(lean_watch(
            "clusters.cluster.x-k8s.io",
            all(resources::capi_cluster()),
            caches.clusters.clone(),
            Box::new(convert_capi_cluster),
            IndexedBy::Nothing,
        )));
    }
    watches
}

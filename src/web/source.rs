//! Where the web view reads promotions from: the controller's status cache (`run --ui`) or a watch
//! of the GitPromotions (`tollgate ui`). Both are reads; the web view has no way to write to the
//! management cluster.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tollgate_engine::PromotionStatus;

use crate::cluster::resources;
use crate::cluster::statuses::StatusCache;
use crate::cluster::stored_status::ReadBack;
use crate::controller::git_labels::GitLabels;
use crate::views::shown::Shown;

/// One promotion as the pages show it.
#[derive(Clone, Debug)]
pub struct Listed {
    pub name: String,
    /// The GitPromotion's labels (the ClusterPromotion's from git are added when a repository is
    /// configured, see `git_view`).
    pub labels: BTreeMap<String, String>,
    /// The engine's typed status; `Err` when this version cannot read it.
    pub status: Result<Option<Arc<PromotionStatus>>, String>,
}

/// Every promotion, read fresh on each call (cheap: both sources are in memory).
pub type PromotionSource = Arc<dyn Fn() -> Vec<Listed> + Send + Sync>;

/// The running controller's statuses (`run --ui`), with each promotion's labels in git.
pub fn from_status_cache(cache: Arc<StatusCache>, git_labels: Arc<GitLabels>) -> PromotionSource {
    let memo = ReadBack::default();
    Arc::new(move || {
        let listed: Vec<Listed> = cache
            .names()
            .into_iter()
            .filter_map(|name| {
                let state = cache.get_through(&name, &memo)?;
                Some(Listed {
                    labels: git_labels.of(&name),
                    name,
                    status: Ok(state.status),
                })
            })
            .collect();
        memo.keep_only(&listed.iter().map(|l| l.name.as_str()).collect());
        listed
    })
}

/// A watch of every GitPromotion through `client` (`tollgate ui`): list, then watch, kept in a
/// store the pages read. The returned task drives the watch; it ends when the source is dropped
/// only with the process (the command serves until stopped).
pub fn from_cluster(client: kube::Client) -> (PromotionSource, tokio::task::JoinHandle<()>) {
    let resource = resources::git_promotion();
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let writer = reflector::store::Writer::new(resource);
    let store: Store<DynamicObject> = writer.as_reader();
    let task = tokio::spawn(async move {
        let stream = reflector::reflector(
            writer,
            watcher::watcher(api, watcher::Config::default()).default_backoff(),
        )
        .applied_objects();
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            if let Err(error) = event {
                tracing::warn!(%error, "watching GitPromotions for the web view");
            }
        }
    });
    let source: PromotionSource = Arc::new(move || {
        store
            .state()
            .iter()
            .map(|object| {
                let shown = Shown::of(object);
                Listed {
                    name: shown.name,
                    labels: object.metadata.labels.clone().unwrap_or_default(),
                    status: shown.status.map(|status| status.map(Arc::new)),
                }
            })
            .collect()
    });
    (source, task)
}

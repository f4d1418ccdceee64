//! Watches feeding [`IndexedCache`]s, and telling the controller which promotions they touched.
//!
//! kube's `watcher` lists, then watches, relists on 410 and reconnects with backoff on errors. Errors
//! are not fatal (the API server may be restarting), but the last one per resource is kept so that
//! status, logs and `/readyz` can say plainly why nothing progresses (e.g. a missing Sveltos CRD).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use super::cache::{IndexedCache, ObjectKey};

/// What a watch event means to the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touch {
    /// These promotions' observed state changed.
    Promotions(Vec<String>),
    /// Objects belonging to these ClusterProfiles changed (ClusterSummaries): the controller maps
    /// them to their promotions.
    Profiles(Vec<String>),
    /// Cluster inventory changed: every promotion's matching may have changed.
    Clusters,
}

/// What a watched cache's index keys are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexedBy {
    Promotion,
    Profile,
    /// Not indexed: any change concerns every promotion.
    Nothing,
}

/// Converts a watched object into the cached value and the promotion it belongs to (if any).
/// `None` skips the object (not ours, or not decodable — logged by the converter). `K` is what the
/// watch decodes: a lean type with only the fields the converter reads (see `cluster::lean`).
pub type Convert<T, K> = fn(&K) -> Option<(Option<String>, T)>;

/// The last watch error per resource, for status and readiness.
#[derive(Clone, Default)]
pub struct WatchHealth(Arc<Mutex<BTreeMap<String, String>>>);

impl WatchHealth {
    fn set(&self, resource: &str, error: Option<String>) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match error {
            Some(e) => {
                map.insert(resource.to_string(), e);
            }
            None => {
                map.remove(resource);
            }
        }
    }

    /// `resource → last error` for every resource whose watch currently fails.
    pub fn errors(&self) -> BTreeMap<String, String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

pub struct WatchSpec<T, K> {
    pub resource: &'static str,
    pub api: Api<K>,
    pub config: watcher::Config,
    pub cache: Arc<IndexedCache<T>>,
    pub convert: Convert<T, K>,
    pub indexed_by: IndexedBy,
}

pub fn spawn_watch<T, K>(
    spec: WatchSpec<T, K>,
    touched: UnboundedSender<Touch>,
    health: WatchHealth,
) -> JoinHandle<()>
where
    T: Send + Sync + 'static,
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    tokio::spawn(async move {
        let WatchSpec {
            resource,
            api,
            config,
            cache,
            convert,
            indexed_by,
        } = spec;
        let notify = |indexes: Vec<String>| {
            let touch = match indexed_by {
                IndexedBy::Nothing => Touch::Clusters,
                _ if indexes.is_empty() => return,
                IndexedBy::Promotion => Touch::Promotions(indexes),
                IndexedBy::Profile => Touch::Profiles(indexes),
            };
            // The receiver is gone only during shutdown.
            let _ = touched.send(touch);
        };
        let mut stream = watcher::watcher(api, config).default_backoff().boxed();
        while let Some(item) = stream.next().await {
            match item {
                Ok(event) => {
                    health.set(resource, None);
                    match event {
                        Event::Init => cache.begin_relist(),
                        Event::InitApply(object) => {
                            if let Some((index, value)) = convert(&object) {
                                cache.relist_item(key_of(&object), index, value);
                            }
                        }
                        Event::InitDone => {
                            let indexes = cache.finish_relist();
                            debug!(resource, objects = cache.len(), "watch (re)synchronised");
                            notify(indexes);
                        }
                        Event::Apply(object) => {
                            let key = key_of(&object);
                            let indexes = match convert(&object) {
                                Some((index, value)) => cache.upsert(key, index, value),
                                None => cache.remove(&key),
                            };
                            notify(indexes);
                        }
                        Event::Delete(object) => notify(cache.remove(&key_of(&object))),
                    }
                }
                Err(error) => {
                    warn!(resource, %error, "watch failed; retrying with backoff");
                    health.set(resource, Some(error.to_string()));
                }
            }
        }
    })
}

fn key_of<K: Resource>(object: &K) -> ObjectKey {
    (object.namespace().unwrap_or_default(), object.name_any())
}

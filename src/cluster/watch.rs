//! Watches feeding [`IndexedCache`]s, and telling the controller which promotions they touched.
//!
//! kube's `watcher` lists, then watches, relists on 410 and reconnects with backoff on errors. Errors
//! are not fatal (the API server may be restarting), but the last one per resource is kept so that
//! status, logs and `/readyz` can say plainly why nothing progresses (e.g. a missing Sveltos CRD).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

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
pub type Convert<T, K> = Box<dyn Fn(&K) -> Option<(Option<String>, T)> + Send + Sync>;

/// The watches that currently fail, by resource, for status, readiness and metrics. A change of
/// state (failing, recovered) is logged once, at warn and info.
#[derive(Clone)]
pub struct WatchHealth {
    failures: Arc<Mutex<BTreeMap<String, WatchFailure>>>,
    /// How long a watch may fail (an API-server restart, a blip) before readiness fails.
    grace: Duration,
}

/// The default [`WatchHealth`] grace.
pub const WATCH_GRACE: Duration = Duration::from_secs(30);

impl Default for WatchHealth {
    fn default() -> Self {
        WatchHealth::with_grace(WATCH_GRACE)
    }
}

/// A watch failing since `since` (the first error after its last success).
#[derive(Clone, Debug)]
pub struct WatchFailure {
    pub error: String,
    pub since: Instant,
    /// Errors since it started failing.
    pub errors: u64,
}

impl WatchHealth {
    pub fn with_grace(grace: Duration) -> Self {
        WatchHealth {
            failures: Arc::default(),
            grace,
        }
    }

    /// Watches failing for longer than the grace, oldest first: the replica is not ready.
    pub fn failing_beyond_grace(&self) -> Vec<(String, WatchFailure)> {
        self.failing_longer_than(self.grace)
    }

    /// Records the watch's outcome; true when its state changed (failing ↔ working).
    pub fn set(&self, resource: &str, error: Option<String>) -> bool {
        let mut map = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        match error {
            Some(error) => match map.get_mut(resource) {
                Some(failure) => {
                    failure.errors += 1;
                    if failure.error != error {
                        debug!(resource, %error, "watch still failing, with another error");
                        failure.error = error;
                    }
                    false
                }
                None => {
                    warn!(resource, %error, "watch failing; retrying every second at most");
                    map.insert(
                        resource.to_string(),
                        WatchFailure {
                            error,
                            since: Instant::now(),
                            errors: 1,
                        },
                    );
                    true
                }
            },
            None => match map.remove(resource) {
                Some(failure) => {
                    info!(
                        resource,
                        failed_for_ms = failure.since.elapsed().as_millis() as u64,
                        errors = failure.errors,
                        "watch working again"
                    );
                    true
                }
                None => false,
            },
        }
    }

    /// `resource → last error` for every resource whose watch currently fails.
    pub fn errors(&self) -> BTreeMap<String, String> {
        self.failures()
            .into_iter()
            .map(|(resource, failure)| (resource, failure.error))
            .collect()
    }

    pub fn failures(&self) -> BTreeMap<String, WatchFailure> {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Watches failing for longer than `grace`, oldest first.
    pub fn failing_longer_than(&self, grace: Duration) -> Vec<(String, WatchFailure)> {
        let mut failing: Vec<_> = self
            .failures()
            .into_iter()
            .filter(|(_, f)| f.since.elapsed() >= grace)
            .collect();
        failing.sort_by_key(|(_, f)| f.since);
        failing
    }

    /// One line naming every failing watch, for the promotions' `WatchesHealthy` condition.
    pub fn problem(&self) -> Option<String> {
        // Read on every step: no copy of the map when, as usual, nothing fails.
        let failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.is_empty() {
            return None;
        }
        let text = failures
            .iter()
            .map(|(resource, f)| format!("watch of {resource} failing: {}", f.error))
            .collect::<Vec<_>>()
            .join("; ");
        Some(text)
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
        let mut stream = watcher::watcher(api, config)
            .backoff(WatchBackoff::default())
            .boxed();
        let mut failing = false;
        loop {
            // A failing watch errors again at every retry (at most a second apart); a resumed
            // watch may have nothing to say for a long time, so silence means it works.
            let item = if failing {
                match tokio::time::timeout(WATCH_SILENCE_MEANS_WORKING, stream.next()).await {
                    Ok(item) => item,
                    Err(_) => {
                        failing = false;
                        if health.set(resource, None) {
                            let _ = touched.send(Touch::Clusters);
                        }
                        continue;
                    }
                }
            } else {
                stream.next().await
            };
            let Some(item) = item else { break };
            failing = item.is_err();
            match item {
                Ok(event) => {
                    if health.set(resource, None) {
                        // Every promotion's WatchesHealthy condition changes.
                        let _ = touched.send(Touch::Clusters);
                    }
                    if let Some(indexes) = cache_event(resource, &cache, &convert, event) {
                        notify(indexes);
                    }
                }
                Err(error) => {
                    if health.set(resource, Some(error.to_string())) {
                        let _ = touched.send(Touch::Clusters);
                    }
                }
            }
        }
    })
}

/// Puts one watch event into the cache; the indexes it touched, once the cache is consistent
/// (`None` in the middle of a relist).
fn cache_event<T, K: Resource>(
    resource: &'static str,
    cache: &IndexedCache<T>,
    convert: &Convert<T, K>,
    event: Event<K>,
) -> Option<Vec<String>> {
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
            return Some(indexes);
        }
        Event::Apply(object) => {
            let key = key_of(&object);
            return Some(match convert(&object) {
                Some((index, value)) => cache.upsert(key, index, value),
                None => cache.remove(&key),
            });
        }
        Event::Delete(object) => return Some(cache.remove(&key_of(&object))),
    }
    None
}

/// The watch retry delay: 100 ms doubling to at most 1 s, reset by any successful event.
///
/// kube's default (client-go's: 0.8 s doubling to 30 s, reset only after 120 s without errors)
/// left the caches stale for up to a minute after an API-server restart. A watch is a single
/// cheap request per resource, so retrying every second while the server is gone costs little,
/// and the caches are current within about a second of it answering again (a 410 after a
/// restart is one more error, retried as quickly).
#[derive(Clone, Debug)]
pub struct WatchBackoff {
    next: Duration,
}

const WATCH_BACKOFF_FIRST: Duration = Duration::from_millis(100);
/// No error for this long after one: the watch was re-established and works.
const WATCH_SILENCE_MEANS_WORKING: Duration = Duration::from_secs(3);
const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(1);

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff {
            next: WATCH_BACKOFF_FIRST,
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let now = self.next;
        self.next = (now * 2).min(WATCH_BACKOFF_MAX);
        Some(now)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = WATCH_BACKOFF_FIRST;
    }
}

fn key_of<K: Resource>(object: &K) -> ObjectKey {
    (object.namespace().unwrap_or_default(), object.name_any())
}

#[cfg(test)]
mod tests {
    use kube::runtime::utils::Backoff;

    use super::*;

    #[test]
    fn a_failing_watch_is_reported_once_per_state_change() {
        let health = WatchHealth::default();
        assert!(health.set("clusterprofiles", Some("gone".into())));
        assert!(!health.set("clusterprofiles", Some("still gone".into())));
        assert_eq!(health.failures()["clusterprofiles"].errors, 2);
        let problem = health.problem().expect("a problem");
        assert!(problem.contains("clusterprofiles") && problem.contains("still gone"));
        assert_eq!(health.failing_longer_than(Duration::ZERO).len(), 1);
        assert!(
            health
                .failing_longer_than(Duration::from_secs(3600))
                .is_empty()
        );
        assert!(health.set("clusterprofiles", None));
        assert!(!health.set("clusterprofiles", None));
        assert_eq!(health.problem(), None);
    }

    #[test]
    fn the_watch_backoff_is_bounded_by_a_second_and_reset_by_success() {
        let mut backoff = WatchBackoff::default();
        let delays: Vec<Duration> = backoff.by_ref().take(6).collect();
        assert_eq!(delays[0], Duration::from_millis(100));
        assert!(delays.iter().all(|d| *d <= Duration::from_secs(1)));
        assert_eq!(delays[5], Duration::from_secs(1));
        backoff.reset();
        assert_eq!(backoff.next(), Some(Duration::from_millis(100)));
    }
}

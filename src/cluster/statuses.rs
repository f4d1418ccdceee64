//! The persisted status of every promotion, as the engine must see it.
//!
//! The GitPromotion watch lags behind our own writes, and stepping on a stale status would redo
//! work. So our own last write wins until the watch shows that same resourceVersion (and is not
//! recorded at all if the watch showed it before the write's response came back). If another
//! writer got in between, our next conditional write fails with 409 and [`StatusCache::forget_own`]
//! makes the watched (or re-read) object authoritative again: optimistic concurrency does the rest.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use tollgate_engine::PromotionStatus;
use tracing::warn;

use crate::cluster::cache::IndexedCache;
use crate::cluster::lean::LeanObject;
use crate::cluster::stored_status::{ReadBack, StoredStatus};
use crate::views::shown::status_of;

/// The annotation that confirms a removal held by the blast-radius guard.
pub const CONFIRM_PRUNE_ANNOTATION: &str = "tollgate.dev/confirm-prune";

#[derive(Debug, Clone, PartialEq)]
pub struct PersistedState {
    pub resource_version: Option<String>,
    pub uid: Option<String>,
    pub annotations: BTreeMap<String, String>,
    /// `None` when the object has no status yet, or one this version cannot read.
    pub status: Option<Arc<PromotionStatus>>,
}

impl PersistedState {
    pub fn confirms_prune(&self) -> bool {
        confirms_prune(&self.annotations)
    }
}

/// Whether these annotations confirm a removal held by the blast-radius guard.
pub fn confirms_prune(annotations: &BTreeMap<String, String>) -> bool {
    annotations
        .get(CONFIRM_PRUNE_ANNOTATION)
        .is_some_and(|v| v == "true")
}

/// A promotion's state as the cache keeps it: the status deflated ([`StoredStatus`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredState {
    pub resource_version: Option<String>,
    pub uid: Option<String>,
    pub annotations: BTreeMap<String, String>,
    pub status: Option<StoredStatus>,
}

impl StoredState {
    fn keep(state: PersistedState) -> Self {
        StoredState {
            status: state.status.as_deref().map(StoredStatus::keep),
            resource_version: state.resource_version,
            uid: state.uid,
            annotations: state.annotations,
        }
    }

    fn read(self, name: &str, memo: Option<&ReadBack>) -> PersistedState {
        let status = self.status.and_then(|stored| {
            let status = match memo {
                Some(memo) => memo.read(name, &stored),
                None => stored.read().map(Arc::new),
            };
            if status.is_none() {
                warn!(promotion = %name, "cannot read the status kept in memory; the next step starts a new run");
            }
            status
        });
        PersistedState {
            resource_version: self.resource_version,
            uid: self.uid,
            annotations: self.annotations,
            status,
        }
    }
}

fn convert_state(object: &LeanObject) -> Option<(Option<String>, StoredState)> {
    let name = object.name_any();
    let status = match status_of(object.status.as_ref()) {
        Ok(status) => status.as_ref().map(StoredStatus::keep),
        Err(error) => {
            warn!(promotion = %name, %error, "cannot read the persisted status; the next step starts a new run");
            None
        }
    };
    let state = StoredState {
        resource_version: object.resource_version(),
        uid: object.uid(),
        annotations: object.annotations().clone().into_iter().collect(),
        status,
    };
    Some((Some(name), state))
}

#[derive(Default)]
pub struct StatusCache {
    pub watched: Arc<IndexedCache<StoredState>>,
    own: Mutex<HashMap<String, OwnWrite>>,
    /// Per promotion, the last few resourceVersions the watch showed (locked only while `own`
    /// is). A write's response can come after the watch showed it and a later version: then
    /// our record must not be made, or it would hide that later version for good.
    shown: Mutex<HashMap<String, VecDeque<String>>>,
}

/// resourceVersions remembered per promotion in [`StatusCache::shown`]: more than the events
/// a watch shows between a write and its response.
const SHOWN_KEPT: usize = 4;

/// Our last write of one promotion's status, until the watch has caught up with it.
#[derive(Debug)]
struct OwnWrite {
    state: StoredState,
    /// The watch has shown this very version: a later version it shows is newer than our write
    /// (another writer's, e.g. a confirm-prune annotation), so the watched object wins again.
    shown: bool,
}

impl StatusCache {
    fn own(&self) -> std::sync::MutexGuard<'_, HashMap<String, OwnWrite>> {
        self.own.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Taken only while `own` is held (one lock order).
    fn shown(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<String>>> {
        self.shown.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The promotion's state, its status read back.
    pub fn get(&self, name: &str) -> Option<PersistedState> {
        Some(self.stored(name)?.read(name, None))
    }

    /// The same, read back through `memo` (for readers of every promotion, see [`ReadBack`]).
    pub fn get_through(&self, name: &str, memo: &ReadBack) -> Option<PersistedState> {
        Some(self.stored(name)?.read(name, Some(memo)))
    }

    /// Its annotations only (nothing to read back).
    pub fn annotations(&self, name: &str) -> Option<BTreeMap<String, String>> {
        Some(self.stored(name)?.annotations)
    }

    fn stored(&self, name: &str) -> Option<StoredState> {
        let watched = self.watched.get(&(String::new(), name.to_string()));
        let mut own = self.own();
        match (own.get(name), watched) {
            (Some(mine), Some(seen)) if mine.state.resource_version == seen.resource_version => {
                own.remove(name);
                Some(seen)
            }
            (Some(mine), _) => Some(mine.state.clone()),
            (None, seen) => seen,
        }
    }

    /// Records a write we just made (or, in dry-run, would have made), unless the watch has
    /// shown it already: what it shows is then that write or a later version.
    pub fn record_own(&self, name: &str, state: PersistedState) {
        // Deflated before the lock is taken.
        let state = StoredState::keep(state);
        let mut own = self.own();
        let shown = self.shown().get(name).is_some_and(|versions| {
            state
                .resource_version
                .as_ref()
                .is_some_and(|ours| versions.contains(ours))
        });
        if shown {
            own.remove(name);
            return;
        }
        let write = OwnWrite {
            state,
            shown: false,
        };
        own.insert(name.to_string(), write);
    }

    /// A watched GitPromotion as the watch caches it. When it shows our own write (same
    /// resourceVersion, same status) it shares our record's bytes: at a cold start of 10,000
    /// promotions the watch lags every write, and both copies were alive for each promotion.
    pub fn convert_watched(&self, object: &LeanObject) -> Option<(Option<String>, StoredState)> {
        let (index, mut state) = convert_state(object)?;
        let name = index.as_deref()?;
        let mut own = self.own();
        if let Some(version) = &state.resource_version {
            let mut shown = self.shown();
            let versions = shown.entry(name.to_string()).or_default();
            if versions.len() == SHOWN_KEPT {
                versions.pop_front();
            }
            versions.push_back(version.clone());
        }
        let Some(mine) = own.get_mut(name) else {
            return Some((index, state));
        };
        if mine.state.resource_version != state.resource_version {
            // Shown before, so this version came after ours. Without this, a watch that showed
            // our write and the next one between two loop turns left ours winning for good, and
            // a confirm-prune annotation made right after a RemovalHeld write was never seen.
            // The cache holds our version until this one replaces it.
            if mine.shown {
                own.remove(name);
            }
            return Some((index, state));
        }
        mine.shown = true;
        if let (Some(ours), Some(seen)) = (&mine.state.status, &state.status)
            && ours == seen
        {
            state.status = Some(ours.clone());
        }
        Some((index, state))
    }

    /// On gaining leadership another replica may have written since our last write: the watched
    /// objects become authoritative again.
    pub fn clear_own(&self) {
        self.own().clear();
    }

    /// Drops our own records that the watch has caught up with (it shows the same
    /// resourceVersion). They matter only while the watch lags; kept, every promotion that
    /// stopped stepping would hold its status twice (about 45 MB at 10,000 promotions).
    pub fn forget_caught_up(&self) {
        let mut own = self.own();
        if own.is_empty() {
            return;
        }
        own.retain(|name, mine| {
            self.watched
                .get(&(String::new(), name.clone()))
                .is_none_or(|seen| seen.resource_version != mine.state.resource_version)
        });
        // A cold start fills the map with every promotion; its table would stay that size.
        if own.capacity() > 64 && own.len() < own.capacity() / 4 {
            own.shrink_to_fit();
        }
    }

    pub fn forget_own(&self, name: &str) {
        let mut own = self.own();
        own.remove(name);
        self.shown().remove(name);
    }

    /// Names of every promotion with a GitPromotion object (including ones gone from git).
    pub fn names(&self) -> Vec<String> {
        let mut names = self.watched.index_keys();
        names.extend(self.own().keys().cloned());
        names.sort();
        names.dedup();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(version: &str) -> PersistedState {
        PersistedState {
            resource_version: Some(version.into()),
            uid: None,
            annotations: BTreeMap::new(),
            status: None,
        }
    }

    #[test]
    fn own_records_are_dropped_once_the_watch_shows_them() {
        let cache = StatusCache::default();
        cache.record_own("caught-up", state("2"));
        cache.record_own("lagging", state("5"));
        cache.watched.upsert(
            (String::new(), "caught-up".into()),
            Some("caught-up".into()),
            StoredState::keep(state("2")),
        );
        cache.watched.upsert(
            (String::new(), "lagging".into()),
            Some("lagging".into()),
            StoredState::keep(state("4")),
        );
        cache.forget_caught_up();
        let own = cache.own();
        assert!(!own.contains_key("caught-up"));
        assert_eq!(
            own.get("lagging")
                .and_then(|s| s.state.resource_version.as_deref()),
            Some("5"),
            "the watch has not shown our write yet: ours still wins"
        );
    }

    fn status(phase: &str) -> PromotionStatus {
        serde_json::from_value(serde_json::json!({"hashScheme": 1, "phase": phase}))
            .expect("valid status")
    }

    fn watched(version: &str, status: &PromotionStatus) -> LeanObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "tollgate.dev/v1alpha1", "kind": "GitPromotion",
            "metadata": {"name": "p", "resourceVersion": version},
            "status": status,
        }))
        .expect("valid object")
    }

    fn own(version: &str, status: &PromotionStatus) -> PersistedState {
        PersistedState {
            status: Some(Arc::new(status.clone())),
            ..state(version)
        }
    }

    #[test]
    fn the_watch_showing_our_own_write_shares_its_status() {
        let cache = StatusCache::default();
        let progressing = status("Progressing");
        cache.record_own("p", own("7", &progressing));
        let (_, seen) = cache
            .convert_watched(&watched("7", &progressing))
            .expect("converted");
        let ours = cache.own().get("p").and_then(|s| s.state.status.clone());
        assert!(
            seen.status.expect("status").shares(&ours.expect("ours")),
            "one copy for both"
        );
    }

    #[test]
    fn a_watched_status_other_than_our_write_keeps_its_own_content() {
        let cache = StatusCache::default();
        cache.record_own("p", own("7", &status("Progressing")));
        // Another writer's version, and (however unlikely) our version with other content.
        for version in ["8", "7"] {
            let (_, seen) = cache
                .convert_watched(&watched(version, &status("Completed")))
                .expect("converted");
            let seen = seen.status.expect("status");
            assert_eq!(seen.read(), Some(status("Completed")));
            let ours = cache.own().get("p").and_then(|s| s.state.status.clone());
            assert!(!seen.shares(&ours.expect("ours")));
        }
    }

    /// The watch as the controller's loop sees it: each event converted, then cached.
    fn watch_shows(cache: &StatusCache, object: &LeanObject) {
        let (index, state) = cache.convert_watched(object).expect("converted");
        cache
            .watched
            .upsert((String::new(), "p".into()), index, state);
    }

    /// Version `version` of `p`, annotated `tollgate.dev/confirm-prune=true` by someone else.
    fn confirmed(version: &str, status: &PromotionStatus) -> LeanObject {
        let mut object = watched(version, status);
        object.metadata.annotations =
            Some([(CONFIRM_PRUNE_ANNOTATION.to_string(), "true".to_string())].into());
        object
    }

    #[test]
    fn a_write_the_watch_showed_before_we_recorded_it_never_hides_a_later_version() {
        let cache = StatusCache::default();
        let held = status("RemovalHeld");
        // The watch shows our write and then a confirm-prune annotation before the write's
        // response is recorded (the step was still finishing).
        watch_shows(&cache, &watched("7", &held));
        watch_shows(&cache, &confirmed("8", &held));
        cache.record_own("p", own("7", &held));
        let state = cache.get("p").expect("state");
        assert_eq!(state.resource_version.as_deref(), Some("8"));
        assert!(state.confirms_prune(), "the later version is not hidden");
    }

    #[test]
    fn an_annotation_made_right_after_our_write_is_seen_even_if_no_step_ran_between() {
        let cache = StatusCache::default();
        let held = status("RemovalHeld");
        cache.record_own("p", own("7", &held));
        // The watch shows our write, then a confirm-prune annotation by someone else, before the
        // controller's loop looked (no `get` nor `forget_caught_up` between the two events).
        watch_shows(&cache, &watched("7", &held));
        watch_shows(&cache, &confirmed("8", &held));
        let state = cache.get("p").expect("state");
        assert_eq!(state.resource_version.as_deref(), Some("8"));
        assert!(
            state.confirms_prune(),
            "the later version wins over our write"
        );
    }

    #[test]
    fn a_lagging_watch_never_replaces_our_write_with_an_older_version() {
        let cache = StatusCache::default();
        cache.record_own("p", own("7", &status("Completed")));
        // Versions from before our write, still arriving: ours wins, for every step.
        for version in ["5", "6"] {
            watch_shows(&cache, &watched(version, &status("Progressing")));
            let state = cache.get("p").expect("state");
            assert_eq!(state.resource_version.as_deref(), Some("7"));
        }
    }
}

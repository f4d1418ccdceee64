//! The Sveltos stand-in's bookkeeping between passes: which profiles need a look, which summaries
//! belong to which profile, each profile's matching clusters, and when timers wake which profile.
//!
//! At fleet scale (10,000 profiles, 1,000 clusters, 100,000s of summaries) a pass over everything
//! per change is minutes of CPU; with this a change costs the profiles it concerns.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::Value;
use tokio::time::Instant;
use tollgate_model::model::TimeWindow;
use tollgate_model::window::{Window, WindowState};

use crate::selector::{LabelSelector, Requirement};
use crate::stand_in_inbox::{StandInChange, StandInInbox};
use crate::store::{ObjectKey, Store};

pub const PROFILES: &str = "clusterprofiles.config.projectsveltos.io";
pub const SUMMARIES: &str = "clustersummaries.config.projectsveltos.io";
pub const CLUSTERS: &str = "sveltosclusters.lib.projectsveltos.io";
const LABEL_PROFILE_NAME: &str = "projectsveltos.io/cluster-profile-name";

/// (namespace, name) of a namespaced object.
pub type Key = (String, String);

pub fn store_key(resource: &str, key: &Key) -> ObjectKey {
    ObjectKey {
        resource: resource.to_string(),
        namespace: key.0.clone(),
        name: key.1.clone(),
    }
}

fn is_ready(cluster: &Value) -> bool {
    cluster["metadata"].get("deletionTimestamp").is_none()
        && cluster["status"]["ready"].as_bool() == Some(true)
}

/// A profile's cluster selection as last computed, with the spec fields it came from.
struct Selection {
    selector_source: Value,
    refs_source: Value,
    /// None when absent, empty or invalid: then only `clusterRefs` select.
    selector: Option<LabelSelector>,
    refs: BTreeSet<Key>,
    matching: BTreeSet<Key>,
}

impl Selection {
    fn new(selector_source: Value, refs_source: Value) -> Self {
        let selector = LabelSelector::from_object(&selector_source)
            .ok()
            .filter(|s| selector_source.is_object() && !s.is_empty());
        let refs = refs_source
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| {
                Some((
                    r["namespace"].as_str()?.to_string(),
                    r["name"].as_str()?.to_string(),
                ))
            })
            .collect();
        Self {
            selector_source,
            refs_source,
            selector,
            refs,
            matching: BTreeSet::new(),
        }
    }

    fn admits(&self, key: &Key, cluster: &Value) -> bool {
        is_ready(cluster)
            && (self.selector.as_ref().is_some_and(|s| s.matches(cluster))
                || self.refs.contains(key))
    }
}

#[derive(Default)]
pub struct Tracking {
    dirty: BTreeSet<String>,
    /// Profile name (label `projectsveltos.io/cluster-profile-name`) → its summaries.
    summaries: HashMap<String, BTreeSet<Key>>,
    summary_profile: HashMap<Key, String>,
    selections: HashMap<String, Selection>,
    wakeups: BTreeSet<(Instant, String)>,
    /// Label (key, value) → clusters carrying it: a selector with an equality only looks at
    /// those instead of the whole fleet.
    clusters_by_label: HashMap<(String, String), BTreeSet<Key>>,
    cluster_labels: HashMap<Key, Vec<(String, String)>>,
    /// Clusters with `spec.paused: true`: every pass over a profile asks for each of its
    /// clusters, and reading the cluster object each time parsed it again at fleet scale.
    paused: HashSet<Key>,
    /// `spec.activeWindow` of the clusters that have one: outside it Sveltos pauses the cluster
    /// (evaluated at the wall clock, like Sveltos).
    windows: HashMap<Key, Window>,
}

impl Tracking {
    /// Takes in what changed since the last call.
    pub fn absorb(&mut self, inbox: StandInInbox, store: &Store) {
        if inbox.everything {
            // A full rebuild reads the store as it is now, which covers the filed changes too.
            self.rebuild(store);
            return;
        }
        for change in inbox.changes {
            match change {
                StandInChange::Profile(name) => {
                    self.dirty.insert(name);
                }
                StandInChange::Summary {
                    namespace,
                    name,
                    profiles,
                } => {
                    self.refile_summary((namespace, name), store);
                    self.dirty.extend(profiles);
                }
                StandInChange::Cluster { namespace, name } => {
                    self.cluster_changed(&(namespace, name), store);
                }
            }
        }
    }

    fn rebuild(&mut self, store: &Store) {
        self.summaries.clear();
        self.summary_profile.clear();
        self.selections.clear();
        self.clusters_by_label.clear();
        self.cluster_labels.clear();
        self.paused.clear();
        self.windows.clear();
        for (key, cluster) in store.range(CLUSTERS, None, None) {
            self.file_cluster_labels((key.namespace.clone(), key.name.clone()), Some(&cluster));
        }
        // Labels only: the selection view, without parsing every summary.
        for (key, summary) in store.range_stored(SUMMARIES, None, None) {
            if let Some(profile) = summary.view.label(LABEL_PROFILE_NAME) {
                self.file_summary((key.namespace.clone(), key.name.clone()), profile);
            }
        }
        self.dirty.extend(
            store
                .range(PROFILES, None, None)
                .map(|(key, _)| key.name.clone()),
        );
        self.dirty.extend(self.summaries.keys().cloned());
    }

    fn file_summary(&mut self, key: Key, profile: &str) {
        self.summaries
            .entry(profile.to_string())
            .or_default()
            .insert(key.clone());
        self.summary_profile.insert(key, profile.to_string());
    }

    fn refile_summary(&mut self, key: Key, store: &Store) {
        if let Some(old) = self.summary_profile.remove(&key)
            && let Some(members) = self.summaries.get_mut(&old)
        {
            members.remove(&key);
            if members.is_empty() {
                self.summaries.remove(&old);
            }
        }
        let label = store
            .get_stored(&store_key(SUMMARIES, &key))
            .and_then(|s| s.view.label(LABEL_PROFILE_NAME))
            .map(str::to_string);
        if let Some(profile) = label {
            self.file_summary(key, &profile);
        }
    }

    /// Updates every cached selection the cluster enters or leaves; profiles that match it before
    /// or after need a look (its readiness or pause may have changed).
    fn cluster_changed(&mut self, key: &Key, store: &Store) {
        let cluster = store.get(&store_key(CLUSTERS, key));
        let cluster = cluster.as_deref();
        self.file_cluster_labels(key.clone(), cluster);
        for (profile, selection) in &mut self.selections {
            let now_in = cluster.is_some_and(|c| selection.admits(key, c));
            let was_in = if now_in {
                !selection.matching.insert(key.clone())
            } else {
                selection.matching.remove(key)
            };
            if now_in || was_in {
                self.dirty.insert(profile.clone());
            }
        }
    }

    /// Files the cluster's labels (and whether it is paused), or forgets them when it is gone.
    fn file_cluster_labels(&mut self, key: Key, cluster: Option<&Value>) {
        if cluster.is_some_and(|c| c["spec"]["paused"].as_bool() == Some(true)) {
            self.paused.insert(key.clone());
        } else {
            self.paused.remove(&key);
        }
        match cluster.and_then(active_window) {
            Some(window) => {
                self.windows.insert(key.clone(), window);
            }
            None => {
                self.windows.remove(&key);
            }
        }
        for label in self.cluster_labels.remove(&key).unwrap_or_default() {
            if let Some(members) = self.clusters_by_label.get_mut(&label) {
                members.remove(&key);
                if members.is_empty() {
                    self.clusters_by_label.remove(&label);
                }
            }
        }
        let labels: Vec<(String, String)> = cluster
            .and_then(|c| c["metadata"]["labels"].as_object())
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect();
        for label in &labels {
            self.clusters_by_label
                .entry(label.clone())
                .or_default()
                .insert(key.clone());
        }
        if cluster.is_some() {
            self.cluster_labels.insert(key, labels);
        }
    }

    /// The clusters that can match `selection`: those carrying one of its required labels plus
    /// its references, or the whole fleet when it has no equality to narrow by.
    fn candidates(&self, selection: &Selection, store: &Store) -> Vec<Key> {
        let equality = selection.selector.as_ref().and_then(|s| {
            s.requirements.iter().find_map(|r| match r {
                Requirement::Equals(k, v) => Some((k.clone(), v.clone())),
                _ => None,
            })
        });
        match equality {
            Some(label) => {
                let mut keys: BTreeSet<Key> = selection.refs.clone();
                if let Some(members) = self.clusters_by_label.get(&label) {
                    keys.extend(members.iter().cloned());
                }
                keys.into_iter().collect()
            }
            None => store
                .range(CLUSTERS, None, None)
                .map(|(k, _)| (k.namespace.clone(), k.name.clone()))
                .collect(),
        }
    }

    /// The profile's ready matching clusters in (namespace, name) order; recomputed only when its
    /// selection fields changed (cluster changes update the cached result in place).
    pub fn matching(&mut self, profile: &str, spec: &Value, store: &Store) -> Vec<Key> {
        let selector_source = spec.get("clusterSelector").unwrap_or(&Value::Null);
        let refs_source = spec.get("clusterRefs").unwrap_or(&Value::Null);
        if let Some(selection) = self.selections.get(profile)
            && selection.selector_source == *selector_source
            && selection.refs_source == *refs_source
        {
            return selection.matching.iter().cloned().collect();
        }
        let (selector_source, refs_source) = (selector_source.clone(), refs_source.clone());
        let mut selection = Selection::new(selector_source, refs_source);
        selection.matching = self
            .candidates(&selection, store)
            .into_iter()
            .filter(|key| {
                store
                    .get(&store_key(CLUSTERS, key))
                    .is_some_and(|c| selection.admits(key, &c))
            })
            .collect();
        let matching = selection.matching.iter().cloned().collect();
        self.selections.insert(profile.to_string(), selection);
        matching
    }

    /// Whether the cluster is paused, as of the changes taken in.
    pub fn is_paused(&self, cluster: &Key) -> bool {
        self.paused.contains(cluster)
            || self.windows.get(cluster).is_some_and(|w| {
                matches!(w.state_at(chrono::Utc::now()), WindowState::Closed { .. })
            })
    }

    /// How long until the cluster's `activeWindow` opens or closes, if it has one: the stand-in
    /// looks at its profiles again then.
    pub fn window_change_in(&self, cluster: &Key) -> Option<std::time::Duration> {
        let window = self.windows.get(cluster)?;
        let now = chrono::Utc::now();
        let at = match window.state_at(now) {
            WindowState::Open { closes_at } => closes_at,
            WindowState::Closed { opens_at } => opens_at,
        };
        (at != chrono::DateTime::<chrono::Utc>::MAX_UTC)
            .then(|| (at - now).to_std().unwrap_or_default())
    }

    pub fn forget_selection(&mut self, profile: &str) {
        self.selections.remove(profile);
    }

    /// The summaries labelled with this profile, in (namespace, name) order.
    pub fn summaries_of(&self, profile: &str) -> Vec<Key> {
        self.summaries
            .get(profile)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    pub fn wake(&mut self, at: Instant, profile: &str) {
        self.wakeups.insert((at, profile.to_string()));
    }

    /// Marks every profile with a timer, due or not (their timers were all made due).
    pub fn wake_all(&mut self) {
        let wakeups = std::mem::take(&mut self.wakeups);
        self.dirty
            .extend(wakeups.into_iter().map(|(_, profile)| profile));
    }

    /// Marks the profiles whose timers are due.
    pub fn wake_due(&mut self, now: Instant) {
        while let Some((at, _)) = self.wakeups.first()
            && *at <= now
        {
            if let Some((_, profile)) = self.wakeups.pop_first() {
                self.dirty.insert(profile);
            }
        }
    }

    pub fn next_wake(&self) -> Option<Instant> {
        self.wakeups.first().map(|(at, _)| *at)
    }

    pub fn next_dirty(&mut self) -> Option<String> {
        self.dirty.pop_first()
    }

    pub fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }
}

/// A cluster's `spec.activeWindow`, when it has one that parses (one that does not pauses
/// nothing: Sveltos cannot evaluate it either).
fn active_window(cluster: &Value) -> Option<Window> {
    let window = cluster["spec"].get("activeWindow")?;
    let window: TimeWindow = serde_json::from_value(window.clone()).ok()?;
    Window::parse(&window).ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::ChangeKind;

    fn put(store: &mut Store, resource: &str, object: Value) {
        let version = store.next_resource_version();
        let key = ObjectKey {
            resource: resource.into(),
            namespace: object["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .into(),
            name: object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .into(),
        };
        store.commit(
            key,
            ChangeKind::Added,
            std::sync::Arc::new(object),
            None,
            version,
        );
    }

    fn cluster(name: &str, env: &str, ready: bool) -> Value {
        json!({"metadata": {"name": name, "namespace": "fleet", "labels": {"env": env}},
               "status": {"ready": ready}})
    }

    fn key(name: &str) -> Key {
        ("fleet".into(), name.into())
    }

    /// An inbox asking for everything to be looked at again.
    fn full_pass() -> StandInInbox {
        StandInInbox {
            everything: true,
            changes: Vec::new(),
            ..StandInInbox::default()
        }
    }

    #[test]
    fn selection_is_cached_and_follows_cluster_changes() {
        let mut store = Store::new(100);
        put(&mut store, CLUSTERS, cluster("a", "dev", true));
        put(&mut store, CLUSTERS, cluster("b", "prod", true));
        let mut tracking = Tracking::default();
        tracking.absorb(full_pass(), &store);
        let spec = json!({"clusterSelector": {"matchLabels": {"env": "dev"}},
                          "clusterRefs": [{"namespace": "fleet", "name": "b"}]});
        let matching = tracking.matching("p", &spec, &store);
        assert_eq!(matching, [key("a"), key("b")]);

        put(&mut store, CLUSTERS, cluster("c", "dev", true));
        put(&mut store, CLUSTERS, cluster("a", "dev", false));
        tracking.absorb(
            StandInInbox {
                everything: false,
                changes: ["c", "a"]
                    .map(|n| StandInChange::Cluster {
                        namespace: "fleet".into(),
                        name: n.into(),
                    })
                    .to_vec(),
                ..StandInInbox::default()
            },
            &store,
        );
        assert_eq!(tracking.next_dirty().as_deref(), Some("p"));
        assert!(!tracking.has_dirty());
        let matching = tracking.matching("p", &spec, &store);
        assert_eq!(matching, [key("b"), key("c")]);
    }

    #[test]
    fn summaries_are_filed_by_profile_and_refiled_on_change() {
        let mut store = Store::new(100);
        let summary = |profile: &str| {
            json!({"metadata": {"name": "s", "namespace": "fleet",
                   "labels": {LABEL_PROFILE_NAME: profile}}})
        };
        put(&mut store, SUMMARIES, summary("p1"));
        let mut tracking = Tracking::default();
        tracking.absorb(full_pass(), &store);
        assert_eq!(tracking.summaries_of("p1"), [key("s")]);
        put(&mut store, SUMMARIES, summary("p2"));
        tracking.absorb(
            StandInInbox {
                everything: false,
                changes: vec![StandInChange::Summary {
                    namespace: "fleet".into(),
                    name: "s".into(),
                    profiles: vec!["p2".into(), "p1".into()],
                }],
                ..StandInInbox::default()
            },
            &store,
        );
        assert!(tracking.summaries_of("p1").is_empty());
        assert_eq!(tracking.summaries_of("p2"), [key("s")]);
    }

    #[test]
    fn due_wakeups_mark_their_profiles() {
        let mut tracking = Tracking::default();
        let now = Instant::now();
        tracking.wake(now, "early");
        tracking.wake(now + std::time::Duration::from_secs(60), "late");
        tracking.wake_due(now);
        assert_eq!(tracking.next_dirty().as_deref(), Some("early"));
        assert!(!tracking.has_dirty());
        assert_eq!(
            tracking.next_wake(),
            Some(now + std::time::Duration::from_secs(60))
        );
    }
}

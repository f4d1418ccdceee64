//! The clusters every promotion sees (`ObservedCluster`), shared as one `Fleet` that remembers
//! which clusters each selector matches.
//!
//! Matching a stage's selector against every cluster's labels was about 40 % of a step at 1,000
//! clusters (twice per stage per step: its report and its completion check), yet the answer only
//! changes when the fleet does, and the controller builds a new fleet whenever a cluster
//! changes. A fleet therefore remembers, per selector, the clusters whose labels match;
//! readiness and pause are read from the clusters at each call. The memory is a cache of a pure
//! function of the fleet: it never changes an answer, and any mutable access forgets it.

use std::collections::{BTreeMap, HashMap};
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, OnceLock, RwLock};

use tollgate_model::model::LabelSelector;

use chrono::{DateTime, Utc};
use tollgate_model::window::{Window, WindowState};

/// Selectors remembered at most; past that the memory starts over (a fleet rarely sees more
/// distinct selectors than its promotions have stages).
const SELECTORS_REMEMBERED: usize = 8192;

#[derive(Default)]
pub struct Fleet {
    clusters: Vec<ObservedCluster>,
    /// Selector → positions in `clusters` of those whose labels it matches.
    matched: RwLock<HashMap<LabelSelector, Arc<[u32]>>>,
    /// Positions of the clusters Sveltos may pause (see [`Fleet::pausable`]).
    pausable: OnceLock<Box<[u32]>>,
}

impl Fleet {
    pub fn new(clusters: Vec<ObservedCluster>) -> Self {
        Fleet {
            clusters,
            matched: RwLock::default(),
            pausable: OnceLock::new(),
        }
    }

    /// The clusters Sveltos may pause: `spec.paused`, or with an `activeWindow`. No other is
    /// ever [`ObservedCluster::paused_at`] any time.
    pub fn pausable(&self) -> impl Iterator<Item = &ObservedCluster> + '_ {
        let positions = self
            .pausable
            .get_or_init(|| positions(&self.clusters, |c| c.paused || c.active_window.is_some()));
        positions.iter().map(|&i| &self.clusters[i as usize])
    }

    /// The clusters whose labels `selector` matches (ready or not, paused or not), in fleet
    /// order. An empty selector matches none.
    pub fn labelled<'a>(
        &'a self,
        selector: &LabelSelector,
    ) -> impl Iterator<Item = &'a ObservedCluster> + 'a {
        let positions = self.matching(selector);
        (0..positions.len()).map(move |i| &self.clusters[positions[i] as usize])
    }

    /// The positions of the clusters `selector` matches, remembered.
    fn matching(&self, selector: &LabelSelector) -> Arc<[u32]> {
        let remembered = self.matched.read().unwrap_or_else(|e| e.into_inner());
        if let Some(positions) = remembered.get(selector) {
            return positions.clone();
        }
        drop(remembered);
        let positions: Arc<[u32]> =
            positions(&self.clusters, |c| selector.matches(&c.labels)).into();
        let mut remembered = self.matched.write().unwrap_or_else(|e| e.into_inner());
        if remembered.len() >= SELECTORS_REMEMBERED {
            remembered.clear();
        }
        remembered.insert(selector.clone(), positions.clone());
        positions
    }
}

/// The positions of the clusters `wanted`.
fn positions(
    clusters: &[ObservedCluster],
    wanted: impl Fn(&ObservedCluster) -> bool,
) -> Box<[u32]> {
    clusters
        .iter()
        .enumerate()
        .filter(|(_, c)| wanted(c))
        .map(|(i, _)| u32::try_from(i).expect("fewer than 2^32 clusters"))
        .collect()
}

impl From<Vec<ObservedCluster>> for Fleet {
    fn from(clusters: Vec<ObservedCluster>) -> Self {
        Fleet::new(clusters)
    }
}

impl Deref for Fleet {
    type Target = Vec<ObservedCluster>;

    fn deref(&self) -> &Vec<ObservedCluster> {
        &self.clusters
    }
}

impl DerefMut for Fleet {
    /// Changing the clusters forgets what was matched.
    fn deref_mut(&mut self) -> &mut Vec<ObservedCluster> {
        self.matched
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.pausable = OnceLock::new();
        &mut self.clusters
    }
}

impl Clone for Fleet {
    fn clone(&self) -> Self {
        Fleet::new(self.clusters.clone())
    }
}

impl PartialEq for Fleet {
    fn eq(&self, other: &Self) -> bool {
        self.clusters == other.clusters
    }
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.clusters.fmt(f)
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObservedCluster {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// SveltosCluster `status.ready`, or CAPI control plane initialised; not being deleted.
    pub ready: bool,
    /// SveltosCluster `spec.paused`: it gets a ClusterSummary but nothing is deployed to it.
    pub paused: bool,
    /// A Cluster API `Cluster` (else a `SveltosCluster`): how a `clusterRefs` entry names it.
    pub capi: bool,
    /// SveltosCluster `spec.activeWindow`, parsed: outside it Sveltos pauses the cluster. `None`
    /// when absent (or unparsable: Sveltos cannot evaluate it either, so never pauses by it).
    pub active_window: Option<Window>,
}

impl ObservedCluster {
    /// Sveltos deploys nothing to it at `now`: `spec.paused`, or its `activeWindow` is closed
    /// (docs/rollout-policy.md#paused-clusters). Pure: `now` is an argument.
    pub fn paused_at(&self, now: DateTime<Utc>) -> bool {
        self.paused
            || self
                .active_window
                .as_ref()
                .is_some_and(|w| matches!(w.state_at(now), WindowState::Closed { .. }))
    }

    /// When its pause state changes next by its `activeWindow` (it opens or closes), if it has one.
    pub fn next_window_change(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let window = self.active_window.as_ref()?;
        Some(match window.state_at(now) {
            WindowState::Open { closes_at } => closes_at,
            WindowState::Closed { opens_at } => opens_at,
        })
    }

    /// A stage with `selector` targets it now: ready, not paused, and selected.
    pub fn targeted_by(&self, selector: &tollgate_model::model::LabelSelector) -> bool {
        self.targetable() && selector.matches(&self.labels)
    }

    /// A stage selecting it would target it now: ready and not paused.
    pub fn targetable(&self) -> bool {
        self.ready && !self.paused
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn cluster(name: &str, shard: &str) -> ObservedCluster {
        ObservedCluster {
            namespace: "fleet".into(),
            name: name.into(),
            labels: BTreeMap::from([("shard".to_string(), shard.to_string())]),
            ready: true,
            ..ObservedCluster::default()
        }
    }

    fn shard(value: &str) -> LabelSelector {
        serde_json::from_value(serde_json::json!({"matchLabels": {"shard": value}}))
            .expect("selector")
    }

    fn names<'a>(clusters: impl Iterator<Item = &'a ObservedCluster>) -> Vec<&'a str> {
        clusters.map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn a_selector_matches_the_same_clusters_remembered_or_not() {
        let fleet = Fleet::new(vec![
            cluster("a", "1"),
            cluster("b", "2"),
            cluster("c", "1"),
        ]);
        assert_eq!(names(fleet.labelled(&shard("1"))), ["a", "c"]);
        assert_eq!(names(fleet.labelled(&shard("1"))), ["a", "c"]);
        assert_eq!(names(fleet.labelled(&shard("3"))), Vec::<&str>::new());
        assert_eq!(
            names(fleet.labelled(&LabelSelector::default())),
            Vec::<&str>::new(),
            "an empty selector matches nothing"
        );
    }

    #[test]
    fn changing_the_clusters_forgets_what_was_matched() {
        let mut fleet = Fleet::new(vec![cluster("a", "1"), cluster("b", "2")]);
        assert_eq!(names(fleet.labelled(&shard("2"))), ["b"]);
        fleet[0].labels.insert("shard".into(), "2".into());
        fleet.push(cluster("c", "2"));
        assert_eq!(names(fleet.labelled(&shard("2"))), ["a", "b", "c"]);
        let copy = fleet.clone();
        fleet.truncate(1);
        assert_eq!(names(fleet.labelled(&shard("2"))), ["a"]);
        assert_eq!(names(copy.labelled(&shard("2"))), ["a", "b", "c"]);
    }

    #[test]
    fn only_clusters_with_a_pause_or_a_window_are_pausable_and_a_change_is_seen() {
        let mut fleet = Fleet::new(vec![cluster("a", "1"), cluster("b", "1")]);
        fleet[1].paused = true;
        assert_eq!(names(fleet.pausable()), ["b"]);
        fleet[0].active_window = Some(
            Window::parse(&tollgate_model::model::TimeWindow {
                from: "0 2 * * *".into(),
                to: "0 4 * * *".into(),
            })
            .expect("window"),
        );
        fleet[1].paused = false;
        assert_eq!(names(fleet.pausable()), ["a"]);
    }

    #[test]
    fn past_its_limit_the_memory_starts_over_and_answers_stay_right() {
        let fleet = Fleet::new(vec![cluster("a", "1")]);
        for i in 0..SELECTORS_REMEMBERED + 3 {
            let expected: &[&str] = if i == 1 { &["a"] } else { &[] };
            assert_eq!(names(fleet.labelled(&shard(&i.to_string()))), expected);
        }
        let remembered = fleet.matched.read().expect("lock").len();
        assert!(remembered <= SELECTORS_REMEMBERED, "{remembered}");
        assert_eq!(names(fleet.labelled(&shard("1"))), ["a"]);
    }
}

//! Waves inside a stage (RolloutPolicy `stages.<name>.waves`): the stage's members, fixed when it
//! starts, ordered by a label and cut into waves (an optional canary first). Between its first
//! and its last wave the stage's profile targets exactly the clusters of the waves reached
//! (`clusterRefs`), never a cluster of a later wave; the last wave restores the selector.

use std::cmp::Ordering;
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tollgate_model::model::Stage;
use tollgate_model::policy::Waves;
use tollgate_model::snapshot::Snapshot;
use tollgate_render::{ClusterRef, render_stage_profile_for, stage_profile_spec_for};

use crate::observed::cluster_key;
use crate::observed::{Observed, ObservedCluster};
use crate::status::WaveProgress;

/// The waves of a stage whose members are `members` (sorted `namespace/name`), starting now with
/// the first wave. `None` for a stage without members (it completes as skipped).
pub(crate) fn start(
    members: &[String],
    observed: &Observed,
    waves: &Waves,
    now: DateTime<Utc>,
) -> Option<WaveProgress> {
    if members.is_empty() {
        return None;
    }
    let by_key: HashMap<String, &ObservedCluster> = observed
        .clusters
        .iter()
        .map(|c| (cluster_key(&c.namespace, &c.name), c))
        .collect();
    let ordered = order(members, &by_key, waves.sorting_label_key.as_deref());
    let canary = waves
        .canary
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX).min(ordered.len()))
        .filter(|n| *n > 0);
    let size = waves.wave_size(members.len());
    let mut clusters: Vec<Vec<String>> = Vec::new();
    let rest = match canary {
        Some(n) => {
            clusters.push(ordered[..n].to_vec());
            &ordered[n..]
        }
        None => &ordered[..],
    };
    clusters.extend(rest.chunks(size).map(<[String]>::to_vec));
    let capi_clusters = members
        .iter()
        .filter(|k| by_key.get(*k).is_some_and(|c| c.capi))
        .cloned()
        .collect();
    Some(WaveProgress {
        clusters,
        reached: 1,
        canary: canary.is_some(),
        capi_clusters,
        wave_started_at: now,
        wave_done_at: None,
    })
}

/// Members by the sorting label: numerically when every value is an integer, else lexically;
/// clusters without the label last; ties by namespace/name.
fn order(
    members: &[String],
    by_key: &HashMap<String, &ObservedCluster>,
    label: Option<&str>,
) -> Vec<String> {
    let value = |key: &String| -> Option<&str> {
        let label = label?;
        by_key.get(key)?.labels.get(label).map(String::as_str)
    };
    let numeric = members
        .iter()
        .filter_map(value)
        .all(|v| v.trim().parse::<i64>().is_ok());
    let mut ordered = members.to_vec();
    ordered.sort_by(|a, b| {
        let by_label = match (value(a), value(b)) {
            (Some(x), Some(y)) if numeric => {
                let (x, y) = (x.trim().parse::<i64>(), y.trim().parse::<i64>());
                x.ok().cmp(&y.ok())
            }
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
        by_label.then_with(|| a.cmp(b))
    });
    ordered
}

/// The clusters the stage's profile names while waves remain; `None`: its selector.
fn targets(waves: Option<&WaveProgress>) -> Option<Vec<ClusterRef<'_>>> {
    let waves = waves.filter(|w| w.in_progress())?;
    let reached = usize::try_from(waves.reached).unwrap_or(usize::MAX);
    let mut refs: Vec<ClusterRef<'_>> = waves
        .clusters
        .iter()
        .take(reached)
        .flatten()
        .filter_map(|key| {
            let (namespace, name) = key.split_once('/')?;
            Some(ClusterRef {
                namespace,
                name,
                capi: waves.capi_clusters.contains(key),
            })
        })
        .collect();
    refs.sort_by(|a, b| (a.namespace, a.name).cmp(&(b.namespace, b.name)));
    Some(refs)
}

/// The spec of the stage's main profile for the waves reached (the selector when none remain).
pub(crate) fn main_spec(
    snapshot: &Snapshot,
    stage: &Stage,
    checks: &[Value],
    waves: Option<&WaveProgress>,
) -> Value {
    stage_profile_spec_for(snapshot, stage, checks, targets(waves).as_deref())
}

/// The whole main profile for the waves reached.
pub(crate) fn main_object(
    snapshot: &Snapshot,
    stage: &Stage,
    checks: &[Value],
    waves: Option<&WaveProgress>,
) -> Value {
    render_stage_profile_for(snapshot, stage, checks, targets(waves).as_deref())
}

/// The clusters judged and targeted now: those of the reached waves while waves remain.
pub(crate) fn reached(waves: Option<&WaveProgress>) -> Option<Vec<String>> {
    waves
        .filter(|w| w.in_progress())
        .map(WaveProgress::reached_clusters)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(clusters: &[(&str, Option<&str>)]) -> Observed {
        let mut observed = Observed::default();
        std::sync::Arc::make_mut(&mut observed.clusters).extend(clusters.iter().map(
            |(name, order)| {
                ObservedCluster {
                    namespace: "fleet".into(),
                    name: (*name).into(),
                    labels: order
                        .map(|o| [("order".to_string(), o.to_string())].into())
                        .unwrap_or_default(),
                    ready: true,
                    paused: false,
                    capi: false,
                    active_window: None,
                }
            },
        ));
        observed
    }

    fn keys(observed: &Observed) -> Vec<String> {
        let mut keys: Vec<String> = observed
            .clusters
            .iter()
            .map(|c| cluster_key(&c.namespace, &c.name))
            .collect();
        keys.sort();
        keys
    }

    fn waves(spec: serde_json::Value) -> Waves {
        serde_json::from_value(spec).expect("waves")
    }

    #[test]
    fn member3_with_order_1_goes_before_member1_with_order_2() {
        let o = observed(&[
            ("member1", Some("2")),
            ("member2", Some("10")),
            ("member3", Some("1")),
        ]);
        let w = start(
            &keys(&o),
            &o,
            &waves(serde_json::json!({"sortingLabelKey": "order", "size": 1})),
            chrono::DateTime::UNIX_EPOCH,
        )
        .expect("waves");
        assert_eq!(
            w.clusters,
            [["fleet/member3"], ["fleet/member1"], ["fleet/member2"]],
            "numeric: 10 after 2"
        );
    }

    #[test]
    fn mixed_labels_sort_lexically_and_missing_labels_go_last() {
        let o = observed(&[
            ("a", None),
            ("b", Some("10")),
            ("c", Some("9")),
            ("d", Some("x")),
        ]);
        let w = start(
            &keys(&o),
            &o,
            &waves(serde_json::json!({"sortingLabelKey": "order", "size": "50%", "canary": 1})),
            chrono::DateTime::UNIX_EPOCH,
        )
        .expect("waves");
        // Lexical: "10" < "9" < "x"; `a` has none. Canary of 1, then waves of 2 (50% of 4).
        assert_eq!(
            w.clusters,
            vec![vec!["fleet/b"], vec!["fleet/c", "fleet/d"], vec!["fleet/a"]]
        );
        assert!(w.canary);
        assert!(w.in_progress());
        assert_eq!(reached(Some(&w)), Some(vec!["fleet/b".to_string()]));
    }

    #[test]
    fn the_last_wave_targets_by_selector_again() {
        let o = observed(&[("a", Some("1")), ("b", Some("2"))]);
        let mut w = start(
            &keys(&o),
            &o,
            &waves(serde_json::json!({"size": 1})),
            chrono::DateTime::UNIX_EPOCH,
        )
        .expect("waves");
        assert_eq!(targets(Some(&w)).map(|t| t.len()), Some(1));
        w.reached = 2;
        assert!(targets(Some(&w)).is_none());
        assert!(reached(Some(&w)).is_none());
    }
}

//! Member clusters Sveltos pauses (`SveltosCluster.spec.paused`, or outside their
//! `spec.activeWindow`): `Paused` in the per-cluster state, never counted failed or timed out
//! while paused, and the time they spend paused is not charged against the stage's
//! `progressDeadline`: each one's deadline moves on by the time it was paused
//! (docs/rollout-policy.md#paused-clusters).
//!
//! Pure: whether a window is open is a function of `now`, an argument.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Duration, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::observed::{Observed, ObservedCluster, cluster_key};

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The time one member cluster of a stage spent paused during the stage's run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PausedTime {
    /// `namespace/name`.
    pub cluster: String,
    /// Paused since (first seen paused); absent while it is not paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// Seconds it was paused in earlier pauses of this run: its deadline moves on by as much.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub paused_seconds: u64,
}

impl PausedTime {
    /// How long its pauses took, the current one up to `now` included.
    pub fn paused_for(&self, now: DateTime<Utc>) -> Duration {
        let earlier = Duration::seconds(i64::try_from(self.paused_seconds).unwrap_or(i64::MAX));
        let current = self.since.map_or(Duration::zero(), |since| now - since);
        earlier + current.max(Duration::zero())
    }
}

/// The members paused at `now`, by `namespace/name`, with why in words.
pub(crate) fn paused_members(
    members: &[String],
    observed: &Observed,
    now: DateTime<Utc>,
) -> BTreeMap<String, String> {
    let mut paused = BTreeMap::new();
    if members.is_empty() {
        return paused;
    }
    for cluster in observed.clusters.pausable().filter(|c| c.paused_at(now)) {
        let key = cluster_key(&cluster.namespace, &cluster.name);
        if members.binary_search(&key).is_ok() {
            paused.insert(key, why_paused(cluster, now));
        }
    }
    paused
}

fn why_paused(cluster: &ObservedCluster, now: DateTime<Utc>) -> String {
    if cluster.paused {
        return "paused by Sveltos (spec.paused): waits for its maintenance window".to_string();
    }
    match cluster.next_window_change(now) {
        Some(opens_at) if opens_at != DateTime::<Utc>::MAX_UTC => format!(
            "outside its activeWindow: waits for it to open at {}",
            opens_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ),
        _ => "outside its activeWindow, which never opens again".to_string(),
    }
}

/// The pause record after this step: a member paused now keeps (or starts) its `since`; one
/// that unpaused has the pause added to its `paused_seconds`. Records of clusters no longer
/// members are dropped.
pub(crate) fn account(
    previous: &[PausedTime],
    paused_now: &BTreeMap<String, String>,
    members: &[String],
    now: DateTime<Utc>,
) -> Vec<PausedTime> {
    let mut times: Vec<PausedTime> = Vec::new();
    for record in previous {
        if members.binary_search(&record.cluster).is_err() {
            continue;
        }
        let mut record = record.clone();
        match (paused_now.contains_key(&record.cluster), record.since) {
            (true, _) => {}
            (false, Some(since)) => {
                let seconds = u64::try_from((now - since).num_seconds()).unwrap_or(0);
                record.paused_seconds = record.paused_seconds.saturating_add(seconds);
                record.since = None;
            }
            (false, None) => {}
        }
        times.push(record);
    }
    for cluster in paused_now.keys() {
        if !times.iter().any(|t| &t.cluster == cluster) {
            times.push(PausedTime {
                cluster: cluster.clone(),
                since: Some(now),
                paused_seconds: 0,
            });
        } else if let Some(record) = times.iter_mut().find(|t| &t.cluster == cluster)
            && record.since.is_none()
        {
            record.since = Some(now);
        }
    }
    times.retain(|t| t.since.is_some() || t.paused_seconds > 0);
    times.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    times
}

/// How far a cluster's deadline moves on: the time it spent paused in earlier pauses.
pub(crate) fn credit(times: &[PausedTime], cluster: &str) -> Duration {
    times
        .iter()
        .find(|t| t.cluster == cluster)
        .map_or(Duration::zero(), |t| {
            Duration::seconds(i64::try_from(t.paused_seconds).unwrap_or(i64::MAX))
        })
}

/// The next instant one of `clusters` opens or closes its `activeWindow`: the engine wakes then
/// (docs/architecture.md#d6-event-driven-not-polled).
pub(crate) fn next_window_change<'k>(
    clusters: impl Iterator<Item = &'k str>,
    observed: &Observed,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let windowed: HashMap<String, &ObservedCluster> = observed
        .clusters
        .pausable()
        .filter(|c| c.active_window.is_some())
        .map(|c| (cluster_key(&c.namespace, &c.name), c))
        .collect();
    if windowed.is_empty() {
        return None;
    }
    clusters
        .filter_map(|key| windowed.get(key))
        .filter_map(|c| c.next_window_change(now))
        .filter(|at| *at > now && *at != DateTime::<Utc>::MAX_UTC)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tollgate_model::model::TimeWindow;
    use tollgate_model::window::Window;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("time")
    }

    fn cluster(name: &str, paused: bool, window: Option<(&str, &str)>) -> ObservedCluster {
        ObservedCluster {
            namespace: "fleet".into(),
            name: name.into(),
            ready: true,
            paused,
            active_window: window.map(|(from, to)| {
                Window::parse(&TimeWindow {
                    from: from.into(),
                    to: to.into(),
                })
                .expect("window")
            }),
            ..Default::default()
        }
    }

    fn observed(clusters: Vec<ObservedCluster>) -> Observed {
        Observed {
            clusters: Arc::new(clusters.into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_cluster_is_paused_by_spec_or_outside_its_active_window_at_now() {
        // Active 02:00-04:00 every night (from unpauses, to pauses).
        let nightly = cluster("n", false, Some(("0 2 * * *", "0 4 * * *")));
        assert!(nightly.paused_at(at("2026-11-27T12:00:00Z")));
        assert!(
            !nightly.paused_at(at("2026-11-27T02:00:00Z")),
            "opens at from"
        );
        assert!(!nightly.paused_at(at("2026-11-27T03:59:59Z")));
        assert!(
            nightly.paused_at(at("2026-11-27T04:00:00Z")),
            "closes at to"
        );
        assert_eq!(
            nightly.next_window_change(at("2026-11-27T12:00:00Z")),
            Some(at("2026-11-28T02:00:00Z"))
        );
        assert_eq!(
            nightly.next_window_change(at("2026-11-27T03:00:00Z")),
            Some(at("2026-11-27T04:00:00Z"))
        );
        assert!(cluster("p", true, None).paused_at(at("2026-11-27T12:00:00Z")));
        assert!(!cluster("u", false, None).paused_at(at("2026-11-27T12:00:00Z")));
    }

    #[test]
    fn only_members_are_paused_and_each_says_why() {
        let now = at("2026-11-27T12:00:00Z");
        let world = observed(vec![
            cluster("a", true, None),
            cluster("b", false, Some(("0 2 * * *", "0 4 * * *"))),
            cluster("c", false, None),
            cluster("d", true, None),
        ]);
        let members = vec!["fleet/a".to_string(), "fleet/b".into(), "fleet/c".into()];
        let paused = paused_members(&members, &world, now);
        assert_eq!(paused.keys().collect::<Vec<_>>(), ["fleet/a", "fleet/b"]);
        assert!(paused["fleet/a"].contains("spec.paused"), "{paused:?}");
        assert!(
            paused["fleet/b"].contains("2026-11-28T02:00:00Z"),
            "{paused:?}"
        );
        assert_eq!(
            next_window_change(members.iter().map(String::as_str), &world, now),
            Some(at("2026-11-28T02:00:00Z"))
        );
    }

    #[test]
    fn paused_time_is_credited_once_the_cluster_unpauses_and_adds_up() {
        let t0 = at("2026-11-27T12:00:00Z");
        let members = vec!["fleet/a".to_string(), "fleet/b".into()];
        let paused_a = BTreeMap::from([("fleet/a".to_string(), "why".to_string())]);
        let none = BTreeMap::new();
        let times = account(&[], &paused_a, &members, t0);
        assert_eq!(times.len(), 1);
        assert_eq!(times[0].since, Some(t0));
        assert_eq!(credit(&times, "fleet/a"), Duration::zero(), "not yet");
        // Same input later: nothing changes (idempotent while paused).
        let later = account(&times, &paused_a, &members, t0 + Duration::minutes(5));
        assert_eq!(later, times);
        let unpaused = account(&times, &none, &members, t0 + Duration::minutes(10));
        assert_eq!(credit(&unpaused, "fleet/a"), Duration::minutes(10));
        assert_eq!(unpaused[0].since, None);
        let again = account(&unpaused, &paused_a, &members, t0 + Duration::minutes(20));
        let done = account(&again, &none, &members, t0 + Duration::minutes(23));
        assert_eq!(credit(&done, "fleet/a"), Duration::minutes(13));
        assert_eq!(
            again[0].paused_for(t0 + Duration::minutes(22)),
            Duration::minutes(12)
        );
        // A cluster that left the members is forgotten.
        assert!(account(&done, &none, &["fleet/b".to_string()], t0).is_empty());
    }
}

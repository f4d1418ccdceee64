//! Is a stage's profile fully provisioned (docs/architecture.md#stage-completion made strict: #d4-no-stale-done)?
//!
//! Every ClusterSummary of the profile must carry every field tollgate set (subset comparison:
//! Sveltos may add defaulted fields) and report every feature `Provisioned`, with a status written
//! after tollgate's apply for each feature whose inputs that apply changed. Zero summaries
//! complete the stage only when no ready, unpaused cluster matches its selector.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tollgate_model::model::LabelSelector;

use crate::features::required_features;
use crate::messages;
use crate::observed::{Observed, ObservedSummary};
use crate::observed_spec::InSyncCheck;
use crate::status::StageCounts;

/// What tollgate applied to one profile, to be checked against what Sveltos reports.
#[derive(Clone, Copy, Debug)]
pub struct AppliedExpectation<'a> {
    pub profile: &'a str,
    pub selector: &'a LabelSelector,
    pub spec: &'a Value,
    pub spec_hash: &'a str,
    pub applied_at: DateTime<Utc>,
    pub fresh_features: &'a [String],
    /// What the fresh features reported before the apply (`StageStatus::hashes_before_apply`).
    pub hashes_before_apply: &'a [String],
    /// The apply is among this step's actions. The status a step returns must describe the
    /// world once its actions took effect (the idempotence contract), so the profile then counts
    /// as carrying it; its summaries still have to catch up.
    pub being_applied: bool,
    /// Only these clusters (sorted `namespace/name`) are targeted: a waved stage's reached waves.
    pub targets: Option<&'a [String]>,
}

impl AppliedExpectation<'_> {
    /// This feature's status is about the apply: it names no fresh feature, or it was stamped in
    /// the apply's second or later and carries none of the hashes from before the apply.
    pub(crate) fn reports_apply(&self, feature: &crate::observed::FeatureSummary) -> bool {
        if !self
            .fresh_features
            .iter()
            .any(|id| **id == *feature.feature_id)
        {
            return true;
        }
        let stamped_since = feature
            .last_applied_time
            .is_some_and(|t| t >= whole_second(self.applied_at));
        let from_before = feature.hash.as_deref().is_some_and(|hash| {
            self.hashes_before_apply
                .iter()
                .any(|key| crate::features::is_hash_key(key, &feature.feature_id, hash))
        });
        stamped_since && !from_before
    }

    /// The profile targets this cluster now (its selector, and its reached waves if any).
    pub(crate) fn targets_cluster(&self, namespace: &str, name: &str) -> bool {
        self.targets.is_none_or(|keys| {
            keys.binary_search(&crate::observed::cluster_key(namespace, name))
                .is_ok()
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    pub complete: bool,
    /// Upstream's message: the first problem, or the success text.
    pub message: String,
    pub counts: StageCounts,
}

pub fn check(expected: &AppliedExpectation<'_>, observed: &Observed) -> Completion {
    let matching: Vec<(&str, &str)> = observed
        .clusters
        .labelled(expected.selector)
        .filter(|c| c.targetable())
        .filter(|c| expected.targets_cluster(&c.namespace, &c.name))
        .map(|c| (c.namespace.as_str(), c.name.as_str()))
        .collect();
    let summaries: Vec<&ObservedSummary> = observed
        .summaries
        .iter()
        .filter(|s| &*s.profile_name == expected.profile)
        .filter(|s| expected.targets_cluster(&s.namespace, &s.cluster_name))
        .collect();

    let mut counts = StageCounts {
        matching_clusters: count(matching.len()),
        summaries: count(summaries.len()),
        provisioned: 0,
        failed: 0,
        ..Default::default()
    };

    let profile_current = profile_current(expected, observed);

    // The reported problem is the first failing summary in (namespace, name) order, so the
    // message does not depend on the order the watches listed them in.
    let criteria = SummaryCriteria::new(expected);
    let mut first_failing: Option<(&ObservedSummary, String)> = None;
    for summary in &summaries {
        if summary_failed(summary) {
            counts.failed += 1;
        }
        match summary_problem(summary, expected, &criteria) {
            None => counts.provisioned += 1,
            Some(problem) => {
                let earlier = first_failing.as_ref().is_none_or(|(first, _)| {
                    (&summary.namespace, &summary.name) < (&first.namespace, &first.name)
                });
                if earlier {
                    first_failing = Some((summary, problem));
                }
            }
        }
    }

    let mut first_problem = if profile_current {
        first_failing.map(|(_, problem)| problem)
    } else {
        Some(messages::waiting_for_profile(expected.profile))
    };
    if first_problem.is_none() {
        let covered: HashSet<(&str, &str)> = summaries
            .iter()
            .map(|s| (&*s.namespace, &*s.cluster_name))
            .collect();
        let missing = matching.iter().filter(|c| !covered.contains(*c)).count();
        if missing > 0 {
            first_problem = Some(messages::waiting_for_summaries(missing));
        }
    }

    match first_problem {
        Some(message) => Completion {
            complete: false,
            message,
            counts,
        },
        None if summaries.is_empty() => Completion {
            complete: true,
            message: messages::no_matching_clusters(expected.profile),
            counts,
        },
        None => Completion {
            complete: true,
            message: messages::ALL_DEPLOYED.to_string(),
            counts,
        },
    }
}

/// The profile shows tollgate's latest apply (or it is being applied in this step): never judge
/// summaries against a profile that does not yet (reflector lag).
pub(crate) fn profile_current(expected: &AppliedExpectation<'_>, observed: &Observed) -> bool {
    expected.being_applied
        || observed
            .profiles
            .get(expected.profile)
            .and_then(|p| p.applied_spec_hash())
            == Some(expected.spec_hash)
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn summary_failed(summary: &ObservedSummary) -> bool {
    summary.failure_message.is_some() || summary.features.iter().any(|f| f.is_failed())
}

/// What every summary of one expected apply is judged against, worked out once per check.
pub(crate) struct SummaryCriteria<'e> {
    /// The features a summary must report.
    pub required: Vec<&'static str>,
    pub in_sync: InSyncCheck<'e>,
}

impl<'e> SummaryCriteria<'e> {
    pub(crate) fn new(expected: &AppliedExpectation<'e>) -> Self {
        SummaryCriteria {
            required: required_features(expected.spec),
            in_sync: InSyncCheck::new(expected.spec),
        }
    }
}

/// The first reason this summary does not count as provisioned for the expected apply.
pub(crate) fn summary_problem(
    summary: &ObservedSummary,
    expected: &AppliedExpectation<'_>,
    criteria: &SummaryCriteria<'_>,
) -> Option<String> {
    if let Some(field) = criteria.in_sync.first_field_out_of_sync(&summary.spec) {
        return Some(messages::not_in_sync(field, &summary.name));
    }
    let all_provisioned = summary.features.iter().all(|f| f.is_provisioned());
    let required_present = criteria
        .required
        .iter()
        .all(|id| summary.features.iter().any(|f| &*f.feature_id == *id));
    let fresh = expected.fresh_features.iter().all(|id| {
        summary
            .features
            .iter()
            .find(|f| *f.feature_id == *id)
            .is_some_and(|f| expected.reports_apply(f))
    });
    if all_provisioned && required_present && fresh {
        None
    } else {
        Some(messages::not_yet_provisioned(&summary.name))
    }
}

/// Kubernetes times (`metav1.Time`, hence Sveltos's `lastAppliedTime`) have whole-second
/// precision: a status written in the same second as our apply reads as that second, so the apply
/// instant is compared truncated to its second.
pub(crate) fn whole_second(t: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
    chrono::DurationRound::duration_trunc(t, chrono::TimeDelta::seconds(1)).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observed::ObservedSpec;
    use crate::subset::first_field_out_of_sync;
    use serde_json::json;

    #[test]
    fn helm_is_reported_before_other_fields() {
        let expected = json!({"tier": 100, "helmCharts": [{"chartVersion": "2"}]});
        let actual = json!({"tier": 90, "helmCharts": [{"chartVersion": "1"}]});
        assert_eq!(
            first_field_out_of_sync(&expected, &actual),
            Some("helmCharts")
        );
        let actual = json!({"tier": 90, "helmCharts": [{"chartVersion": "2"}]});
        assert_eq!(first_field_out_of_sync(&expected, &actual), Some("tier"));
    }

    /// A Provisioned summary of cluster `c` in namespace `fleet`, carrying `spec`.
    fn summary(cluster: &str, spec: &Value, at: DateTime<Utc>) -> ObservedSummary {
        ObservedSummary {
            namespace: "fleet".into(),
            name: format!("p-s1-sveltos-{cluster}").into(),
            profile_name: "p-s1".into(),
            cluster_name: cluster.into(),
            spec: ObservedSpec::of(spec),
            features: vec![crate::observed::FeatureSummary {
                feature_id: "Helm".into(),
                status: crate::observed::PROVISIONED.into(),
                last_applied_time: Some(at),
                failure_message: None,
                hash: None,
            }],
            failure_message: None,
        }
    }

    #[test]
    fn a_summary_with_an_older_spec_is_not_in_sync_and_one_with_server_defaults_is() {
        use std::collections::BTreeMap;
        use std::sync::Arc;

        use tollgate_model::label_map::LabelMap;

        use crate::observed::{ObservedCluster, ObservedProfile};

        let at: DateTime<Utc> = "2026-11-25T10:00:00Z".parse().unwrap();
        let applied = json!({"tier": 100, "helmCharts": [{"chartVersion": "2"}]});
        let defaulted = json!({"tier": 100, "maxUpdate": "100%",
            "helmCharts": [{"chartVersion": "2", "helmChartAction": "Install"}]});
        let older = json!({"tier": 100, "helmCharts": [{"chartVersion": "1"}]});
        let labels = BTreeMap::from([("env".to_string(), "s1".to_string())]);
        let clusters = ["a", "b", "c", "d"].map(|name| ObservedCluster {
            namespace: "fleet".into(),
            name: name.into(),
            labels: labels.clone(),
            ready: true,
            ..Default::default()
        });
        let profile = ObservedProfile::from_metadata(
            "p-s1".into(),
            |key| (key == tollgate_render::MANAGED_BY_LABEL).then_some("tollgate"),
            |key| (key == tollgate_render::SPEC_HASH_ANNOTATION).then_some("h2"),
            ObservedSpec::of(&applied),
            false,
        );
        let mut observed = Observed {
            profiles: BTreeMap::from([("p-s1".to_string(), profile)]),
            summaries: vec![
                summary("a", &applied, at),
                summary("b", &defaulted, at),
                summary("c", &older, at),
                summary("d", &older, at),
            ],
            clusters: Arc::new(clusters.to_vec().into()),
        };
        let selector = LabelSelector {
            match_labels: LabelMap::from_iter([("env".to_string(), "s1".to_string())]),
            ..Default::default()
        };
        let expected = AppliedExpectation {
            profile: "p-s1",
            selector: &selector,
            spec: &applied,
            spec_hash: "h2",
            applied_at: at,
            fresh_features: &[],
            hashes_before_apply: &[],
            being_applied: false,
            targets: None,
        };
        let completion = check(&expected, &observed);
        assert!(!completion.complete);
        assert_eq!(completion.counts.provisioned, 2, "{completion:?}");
        assert_eq!(
            completion.message,
            "ClusterSummary HelmCharts p-s1-sveltos-c is not in sync."
        );
        for lagging in &mut observed.summaries[2..] {
            lagging.spec = ObservedSpec::of(&defaulted);
        }
        let completion = check(&expected, &observed);
        assert!(completion.complete, "{completion:?}");
        assert_eq!(completion.message, messages::ALL_DEPLOYED);
    }
}

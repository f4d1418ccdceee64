//! A ClusterSummary as the summary cache holds it.
//!
//! A fleet holds hundreds of thousands of summaries, so the cached form keeps only what is not
//! already known from where it is filed: the namespace and name are the cache key and the profile
//! is the index, so none of them is stored again. What is kept is packed: a feature is an interned
//! (feature, status) pair and a time stamp, and failure messages (rare) share one optional box.
//! The engine's `ObservedSummary` is rebuilt from the three when a promotion is observed.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tollgate_engine::{FeatureSummary, ObservedSummary};

use super::intern::FeatureLabel;

#[derive(Clone, Debug, PartialEq)]
pub struct StoredSummary {
    /// `spec.clusterName` (the cluster lives in the summary's namespace). Interned.
    pub cluster_name: Arc<str>,
    /// `spec.clusterProfileSpec`. Interned: every summary of a profile carries the same spec.
    pub spec: Arc<Value>,
    features: Features,
    /// `status.failureMessage` and the features' failure messages, when there is any.
    failures: Option<Box<Failures>>,
}

/// One feature as read from a summary: its interned label, `lastAppliedTime`, `failureMessage`.
pub type FeatureFields = (Arc<FeatureLabel>, Option<DateTime<Utc>>, Option<Box<str>>);

/// A summary's failure messages: its own, and its features' by position.
#[derive(Clone, Debug, PartialEq)]
struct Failures {
    summary: Option<Box<str>>,
    features: Box<[Option<Box<str>>]>,
}

/// One feature of a summary: 16 bytes where the engine's [`FeatureSummary`] takes 64.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredFeature {
    label: Arc<FeatureLabel>,
    last_applied: Stamp,
}

/// `lastAppliedTime` in microseconds since the epoch; [`Stamp::NONE`] when absent.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stamp(i64);

impl Stamp {
    const NONE: Stamp = Stamp(i64::MIN);

    fn new(time: Option<DateTime<Utc>>) -> Stamp {
        time.map_or(Stamp::NONE, |t| Stamp(t.timestamp_micros()))
    }

    fn time(self) -> Option<DateTime<Utc>> {
        (self != Stamp::NONE)
            .then(|| DateTime::from_timestamp_micros(self.0))
            .flatten()
    }
}

impl StoredSummary {
    /// Packs a summary's fields; `features` pairs each interned label with its time and message.
    pub fn new(
        cluster_name: Arc<str>,
        spec: Arc<Value>,
        features: Vec<FeatureFields>,
        failure_message: Option<Box<str>>,
    ) -> StoredSummary {
        let mut messages = Vec::with_capacity(features.len());
        let stored: Features = features
            .into_iter()
            .map(|(label, time, message)| {
                messages.push(message);
                StoredFeature {
                    label,
                    last_applied: Stamp::new(time),
                }
            })
            .collect();
        let failures =
            (failure_message.is_some() || messages.iter().any(Option::is_some)).then(|| {
                Box::new(Failures {
                    summary: failure_message,
                    features: messages.into_boxed_slice(),
                })
            });
        StoredSummary {
            cluster_name,
            spec,
            features: stored,
            failures,
        }
    }

    /// The engine's view of this summary, filed under `(namespace, name)` for `profile`.
    pub fn observed(
        &self,
        namespace: &Arc<str>,
        name: &str,
        profile: &Arc<str>,
    ) -> ObservedSummary {
        ObservedSummary {
            namespace: namespace.clone(),
            name: Arc::from(name),
            profile_name: profile.clone(),
            cluster_name: self.cluster_name.clone(),
            spec: self.spec.clone(),
            features: self.features(),
            failure_message: self.failure_message().map(Box::from),
        }
    }

    /// The features as the engine reads them, in the summary's order.
    pub fn features(&self) -> Vec<FeatureSummary> {
        let messages = self.failures.as_ref().map(|f| &f.features);
        self.features
            .as_slice()
            .iter()
            .enumerate()
            .map(|(at, feature)| FeatureSummary {
                feature_id: feature.label.feature_id.clone(),
                status: feature.label.status.clone(),
                last_applied_time: feature.last_applied.time(),
                failure_message: messages.and_then(|m| m.get(at).cloned().flatten()),
            })
            .collect()
    }

    /// `status.failureMessage`.
    pub fn failure_message(&self) -> Option<&str> {
        self.failures.as_ref().and_then(|f| f.summary.as_deref())
    }
}

/// A summary's features. Most summaries report one feature (a profile deploying Helm
/// charts only, say): that one is kept inline rather than in an allocation of its own.
#[derive(Clone, Debug, PartialEq)]
enum Features {
    One(StoredFeature),
    Other(Box<[StoredFeature]>),
}

impl Features {
    fn as_slice(&self) -> &[StoredFeature] {
        match self {
            Features::One(feature) => std::slice::from_ref(feature),
            Features::Other(features) => features,
        }
    }
}

impl FromIterator<StoredFeature> for Features {
    fn from_iter<I: IntoIterator<Item = StoredFeature>>(features: I) -> Self {
        let mut features: Vec<StoredFeature> = features.into_iter().collect();
        if features.len() == 1
            && let Some(only) = features.pop()
        {
            return Features::One(only);
        }
        Features::Other(features.into_boxed_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(id: &str, status: &str) -> Arc<FeatureLabel> {
        super::super::intern::strings().feature_label(id, status)
    }

    fn time(text: &str) -> Option<DateTime<Utc>> {
        DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }

    #[test]
    fn features_keep_their_order_times_and_messages_whatever_their_number() {
        for ids in [
            &[][..],
            &["Helm"][..],
            &["Helm", "Resources", "Kustomize"][..],
        ] {
            let features = ids
                .iter()
                .enumerate()
                .map(|(at, id)| {
                    let message = (at == 1).then(|| Box::from("chart failed"));
                    (
                        label(id, "Provisioned"),
                        time("2025-10-07T10:00:00.5Z"),
                        message,
                    )
                })
                .collect();
            let summary =
                StoredSummary::new(Arc::from("c1"), Arc::new(Value::Null), features, None);
            let read = summary.features();
            let read_ids: Vec<&str> = read.iter().map(|f| &*f.feature_id).collect();
            assert_eq!(read_ids, ids);
            for (at, feature) in read.iter().enumerate() {
                assert!(feature.is_provisioned());
                assert_eq!(feature.last_applied_time, time("2025-10-07T10:00:00.5Z"));
                assert_eq!(
                    feature.failure_message.as_deref(),
                    (at == 1).then_some("chart failed")
                );
            }
        }
    }

    #[test]
    fn a_summary_without_failures_holds_no_failure_box() {
        let plain = StoredSummary::new(
            Arc::from("c1"),
            Arc::new(Value::Null),
            vec![(label("Helm", "Provisioning"), None, None)],
            None,
        );
        assert!(plain.failures.is_none());
        assert_eq!(plain.features()[0].last_applied_time, None);
        assert_eq!(plain.failure_message(), None);
        let failed = StoredSummary::new(
            Arc::from("c1"),
            Arc::new(Value::Null),
            vec![(label("Helm", "Failed"), None, None)],
            Some(Box::from("cluster unreachable")),
        );
        assert_eq!(failed.failure_message(), Some("cluster unreachable"));
        assert_eq!(failed.features()[0].failure_message, None);
    }

    #[test]
    fn a_stored_summary_is_packed() {
        // One feature inline, failures boxed: a fleet of 400,000 summaries weighs this each.
        assert!(std::mem::size_of::<StoredSummary>() <= 56);
        assert_eq!(std::mem::size_of::<StoredFeature>(), 16);
    }
}

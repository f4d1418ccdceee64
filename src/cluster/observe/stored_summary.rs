//! A ClusterSummary as the summary cache holds it.
//!
//! A fleet holds hundreds of thousands of summaries, so the cached form keeps only what is not
//! already known from where it is filed: the namespace and name are the cache key and the profile
//! is the index, so none of them is stored again, and neither is the cluster's name when the
//! summary's name gives it (Sveltos names a summary `<profile>-sveltos-<cluster>`, or `-capi-`).
//! What is kept is packed: the spec is interned, the first feature is an interned (feature,
//! status, hash) label and a time stamp, and whatever most summaries lack (more features, failure
//! messages, a cluster name of its own) shares one optional box. 32 bytes in all.
//! The engine's `ObservedSummary` is rebuilt from these when a promotion is observed.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tollgate_engine::{FeatureSummary, ObservedSpec, ObservedSummary};

use super::intern::FeatureLabel;

#[derive(Clone, Debug, PartialEq)]
pub struct StoredSummary {
    /// `spec.clusterProfileSpec`. Interned: every summary of a profile carries the same spec.
    pub spec: ObservedSpec,
    first: Option<StoredFeature>,
    rare: Option<Box<Rare>>,
}

/// What most summaries do not have.
#[derive(Clone, Debug, PartialEq)]
struct Rare {
    /// `spec.clusterName`, when the summary's name does not give it. Interned.
    cluster_name: Option<Arc<str>>,
    /// The features after the first.
    more: Box<[StoredFeature]>,
    /// `status.failureMessage`.
    failure_message: Option<Box<str>>,
    /// The features' failure messages by position; empty when none has one.
    feature_messages: Box<[Option<Box<str>>]>,
}

/// One feature as read from a summary: its interned label, `lastAppliedTime`, `failureMessage`.
pub type FeatureFields = (Arc<FeatureLabel>, Option<DateTime<Utc>>, Option<Box<str>>);

/// The cluster a summary named `name` of `profile` is for, by Sveltos's naming.
pub fn cluster_in_name<'a>(name: &'a str, profile: &str) -> Option<&'a str> {
    let rest = name.strip_prefix(profile)?.strip_prefix('-')?;
    rest.strip_prefix("sveltos-")
        .or_else(|| rest.strip_prefix("capi-"))
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
    /// `cluster_name`: `None` when the summary's name gives it (see [`cluster_in_name`]).
    pub fn new(
        cluster_name: Option<Arc<str>>,
        spec: ObservedSpec,
        features: Vec<FeatureFields>,
        failure_message: Option<Box<str>>,
    ) -> StoredSummary {
        let mut messages = Vec::with_capacity(features.len());
        let mut stored = features.into_iter().map(|(label, time, message)| {
            messages.push(message);
            StoredFeature {
                label,
                last_applied: Stamp::new(time),
            }
        });
        let first = stored.next();
        let more: Box<[StoredFeature]> = stored.collect();
        if messages.iter().all(Option::is_none) {
            messages.clear();
        }
        let rare = (cluster_name.is_some()
            || !more.is_empty()
            || failure_message.is_some()
            || !messages.is_empty())
        .then(|| {
            Box::new(Rare {
                cluster_name,
                more,
                failure_message,
                feature_messages: messages.into_boxed_slice(),
            })
        });
        StoredSummary { spec, first, rare }
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
            cluster_name: self.cluster_name(name, profile),
            spec: self.spec.clone(),
            features: self.features(),
            failure_message: self.failure_message().map(Box::from),
        }
    }

    /// `spec.clusterName` of the summary named `name` of `profile`.
    pub fn cluster_name(&self, name: &str, profile: &str) -> Arc<str> {
        match self.rare.as_ref().and_then(|r| r.cluster_name.as_ref()) {
            Some(cluster) => cluster.clone(),
            None => Arc::from(cluster_in_name(name, profile).unwrap_or_default()),
        }
    }

    /// The features as the engine reads them, in the summary's order.
    pub fn features(&self) -> Vec<FeatureSummary> {
        let more = self.rare.as_ref().map_or(&[][..], |r| &r.more[..]);
        let messages = self
            .rare
            .as_ref()
            .map_or(&[][..], |r| &r.feature_messages[..]);
        self.first
            .iter()
            .chain(more)
            .enumerate()
            .map(|(at, feature)| FeatureSummary {
                feature_id: feature.label.feature_id.clone(),
                status: feature.label.status.clone(),
                last_applied_time: feature.last_applied.time(),
                failure_message: messages.get(at).cloned().flatten(),
                hash: feature.label.hash.clone(),
            })
            .collect()
    }

    /// `status.failureMessage`.
    pub fn failure_message(&self) -> Option<&str> {
        self.rare
            .as_ref()
            .and_then(|r| r.failure_message.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(id: &str, status: &str) -> Arc<FeatureLabel> {
        super::super::intern::strings().feature_label(id, status, None)
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
            let summary = StoredSummary::new(None, ObservedSpec::null(), features, None);
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
    fn a_summary_with_one_feature_named_after_its_cluster_holds_no_box() {
        let plain = StoredSummary::new(
            None,
            ObservedSpec::null(),
            vec![(label("Helm", "Provisioning"), None, None)],
            None,
        );
        assert!(plain.rare.is_none());
        assert_eq!(plain.features()[0].last_applied_time, None);
        assert_eq!(plain.failure_message(), None);
        let failed = StoredSummary::new(
            None,
            ObservedSpec::null(),
            vec![(label("Helm", "Failed"), None, None)],
            Some(Box::from("cluster unreachable")),
        );
        assert_eq!(failed.failure_message(), Some("cluster unreachable"));
        assert_eq!(failed.features()[0].failure_message, None);
    }

    #[test]
    fn a_stored_summary_is_packed() {
        // One feature inline, the rest boxed: a fleet of 400,000 summaries weighs this each.
        assert!(std::mem::size_of::<StoredSummary>() <= 32);
        assert_eq!(std::mem::size_of::<StoredFeature>(), 16);
    }

    #[test]
    fn the_cluster_comes_from_the_name_sveltos_gives_a_summary_or_is_kept() {
        assert_eq!(cluster_in_name("web-dev-sveltos-c1", "web-dev"), Some("c1"));
        assert_eq!(cluster_in_name("web-dev-capi-c-1", "web-dev"), Some("c-1"));
        assert_eq!(cluster_in_name("web-dev-other-c1", "web-dev"), None);
        assert_eq!(cluster_in_name("web-devsveltos-c1", "web-dev"), None);
        let named = StoredSummary::new(None, ObservedSpec::null(), Vec::new(), None);
        assert_eq!(&*named.cluster_name("web-dev-capi-c-1", "web-dev"), "c-1");
        let kept = StoredSummary::new(
            Some(Arc::from("c9")),
            ObservedSpec::null(),
            Vec::new(),
            None,
        );
        assert_eq!(&*kept.cluster_name("hand-made", "web-dev"), "c9");
    }
}

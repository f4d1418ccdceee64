//! A ClusterSummary as the summary cache holds it.
//!
//! A fleet holds hundreds of thousands of summaries, so the cached form keeps only what is not
//! already known from where it is filed: the namespace and name are the cache key and the profile
//! is the index, so none of them is stored again. The engine's `ObservedSummary` is rebuilt from
//! the three when a promotion is observed (a handful of reference-count increments).

use std::sync::Arc;

use serde_json::Value;
use tollgate_engine::{FeatureSummary, ObservedSummary};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct StoredSummary {
    /// `spec.clusterName` (the cluster lives in the summary's namespace). Interned.
    pub cluster_name: Arc<str>,
    /// `spec.clusterProfileSpec`. Interned: every summary of a profile carries the same spec.
    pub spec: Arc<Value>,
    pub features: Features,
    /// `status.failureMessage`.
    pub failure_message: Option<Box<str>>,
}

impl StoredSummary {
    /// The engine's view of this summary, filed under `(namespace, name)` for `profile`.
    pub fn observed(
        &self,
        namespace: &Arc<str>,
        name: &Arc<str>,
        profile: &Arc<str>,
    ) -> ObservedSummary {
        ObservedSummary {
            namespace: namespace.clone(),
            name: name.clone(),
            profile_name: profile.clone(),
            cluster_name: self.cluster_name.clone(),
            spec: self.spec.clone(),
            features: self.features.to_vec(),
            failure_message: self.failure_message.clone(),
        }
    }
}

/// A summary's feature statuses. Most summaries report one feature (a profile deploying Helm
/// charts only, say): that one is kept inline rather than in an allocation of its own.
#[derive(Clone, Debug, PartialEq)]
pub enum Features {
    One(FeatureSummary),
    Other(Box<[FeatureSummary]>),
}

impl Default for Features {
    fn default() -> Self {
        Features::Other(Box::default())
    }
}

impl Features {
    pub fn as_slice(&self) -> &[FeatureSummary] {
        match self {
            Features::One(feature) => std::slice::from_ref(feature),
            Features::Other(features) => features,
        }
    }
}

impl FromIterator<FeatureSummary> for Features {
    fn from_iter<I: IntoIterator<Item = FeatureSummary>>(features: I) -> Self {
        let mut features: Vec<FeatureSummary> = features.into_iter().collect();
        if features.len() == 1
            && let Some(only) = features.pop()
        {
            return Features::One(only);
        }
        Features::Other(features.into_boxed_slice())
    }
}

impl std::ops::Deref for Features {
    type Target = [FeatureSummary];

    fn deref(&self) -> &[FeatureSummary] {
        self.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feature(id: &str) -> FeatureSummary {
        FeatureSummary {
            feature_id: Arc::from(id),
            status: Arc::from("Provisioned"),
            ..FeatureSummary::default()
        }
    }

    #[test]
    fn features_keep_their_order_whatever_their_number() {
        for ids in [
            &[][..],
            &["Helm"][..],
            &["Helm", "Resources", "Kustomize"][..],
        ] {
            let features: Features = ids.iter().map(|id| feature(id)).collect();
            let read: Vec<&str> = features.iter().map(|f| &*f.feature_id).collect();
            assert_eq!(read, ids);
        }
        let one: Features = [feature("Helm")].into_iter().collect();
        assert!(matches!(one, Features::One(_)), "one feature is inline");
    }
}

//! One shared copy of the strings that repeat across cached objects.
//!
//! A fleet's ClusterSummaries repeat a few hundred namespaces, cluster names, profile names,
//! feature ids, statuses and hashes hundreds of thousands of times; sharing them is most of what
//! a cached summary would otherwise weigh.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

/// The set is pruned of strings no cached object holds any more when it outgrows this.
const MIN_PRUNE_AT: usize = 1024;

pub struct Interner {
    strings: HashSet<Arc<str>>,
    prune_at: usize,
    labels: HashSet<Arc<FeatureLabel>>,
    labels_prune_at: usize,
}

/// A feature, its status and its `hash`, as ClusterSummaries report them: the clusters of a stage
/// share one content, so a fleet has about as many distinct labels as stage contents, and each
/// summary's feature holds one pointer to a shared label.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct FeatureLabel {
    pub feature_id: Arc<str>,
    pub status: Arc<str>,
    pub hash: Option<Arc<str>>,
}

/// Distinct labels beyond which the ones nobody holds are dropped (then at twice the number kept).
const MIN_LABELS_PRUNE_AT: usize = 64;

impl Interner {
    fn new() -> Self {
        Interner {
            strings: HashSet::new(),
            prune_at: MIN_PRUNE_AT,
            labels: HashSet::new(),
            labels_prune_at: MIN_LABELS_PRUNE_AT,
        }
    }

    /// The shared label of `feature_id`, `status` and `hash`.
    pub fn feature_label(
        &mut self,
        feature_id: &str,
        status: &str,
        hash: Option<&str>,
    ) -> Arc<FeatureLabel> {
        // The strings first (shared, so the candidate allocates nothing but itself).
        let candidate = FeatureLabel {
            feature_id: self.intern(feature_id),
            status: self.intern(status),
            hash: hash.map(|h| self.intern(h)),
        };
        if let Some(shared) = self.labels.get(&candidate) {
            return shared.clone();
        }
        if self.labels.len() >= self.labels_prune_at {
            // Held only by the set: no cached summary reports it any more.
            self.labels.retain(|l| Arc::strong_count(l) > 1);
            self.labels_prune_at = (self.labels.len() * 2).max(MIN_LABELS_PRUNE_AT);
        }
        let label = Arc::new(candidate);
        self.labels.insert(label.clone());
        label
    }

    /// The shared copy of `text`.
    pub fn intern(&mut self, text: &str) -> Arc<str> {
        if let Some(shared) = self.strings.get(text) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(text);
        self.strings.insert(shared.clone());
        if self.strings.len() > self.prune_at {
            // Held only by the set: nothing uses it any more.
            self.strings.retain(|s| Arc::strong_count(s) > 1);
            self.prune_at = (self.strings.len() * 2).max(MIN_PRUNE_AT);
        }
        shared
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.strings.len()
    }
}

static STRINGS: LazyLock<Mutex<Interner>> = LazyLock::new(|| Mutex::new(Interner::new()));

/// The process-wide interner, locked once per converted object rather than once per string.
pub fn strings() -> MutexGuard<'static, Interner> {
    // A panic while interning leaves a valid set behind: at worst one string is missing.
    STRINGS.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_share_one_allocation() {
        let mut interner = Interner::new();
        let a = interner.intern("Provisioned");
        let b = interner.intern("Provisioned");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(&*a, "Provisioned");
        assert!(!Arc::ptr_eq(&a, &interner.intern("Failed")));
    }

    #[test]
    fn feature_labels_are_shared_and_pruned_once_nobody_holds_them() {
        let mut interner = Interner::new();
        let a = interner.feature_label("Helm", "Provisioned", None);
        assert!(Arc::ptr_eq(
            &a,
            &interner.feature_label("Helm", "Provisioned", None)
        ));
        assert!(!Arc::ptr_eq(
            &a,
            &interner.feature_label("Helm", "Failed", None)
        ));
        assert_eq!((&*a.feature_id, &*a.status), ("Helm", "Provisioned"));
        // Sveltos' hash is part of the label: one per content, shared by the clusters running it.
        let hashed = interner.feature_label("Helm", "Provisioned", Some("aGFzaA=="));
        assert!(!Arc::ptr_eq(&a, &hashed));
        assert!(Arc::ptr_eq(
            &hashed,
            &interner.feature_label("Helm", "Provisioned", Some("aGFzaA=="))
        ));
        assert_eq!(hashed.hash.as_deref(), Some("aGFzaA=="));
        drop(hashed);
        for i in 0..MIN_LABELS_PRUNE_AT * 2 {
            interner.feature_label("Helm", &format!("odd-{i}"), None);
        }
        assert!(interner.labels.len() <= MIN_LABELS_PRUNE_AT + 1);
        assert!(Arc::ptr_eq(
            &a,
            &interner.feature_label("Helm", "Provisioned", None)
        ));
    }

    #[test]
    fn strings_nobody_holds_are_pruned() {
        let mut interner = Interner::new();
        let kept = interner.intern("kept");
        for i in 0..MIN_PRUNE_AT {
            interner.intern(&format!("dropped-{i}"));
        }
        // The insertion that crossed the threshold pruned every dropped string but the last.
        assert_eq!(interner.len(), 2);
        assert!(Arc::ptr_eq(&kept, &interner.intern("kept")));
    }
}

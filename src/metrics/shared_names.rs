//! Label values shared, not copied: one `Arc<str>` per distinct name serves every series (or
//! record) naming it, and a name nothing else holds any more is forgotten.

use std::collections::HashSet;
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct SharedNames(HashSet<Arc<str>>);

impl SharedNames {
    /// `name` as the series share it.
    pub fn get(&mut self, name: &str) -> Arc<str> {
        if let Some(shared) = self.0.get(name) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(name);
        self.0.insert(shared.clone());
        shared
    }

    #[cfg(test)]
    pub fn contains(&self, name: &str) -> bool {
        self.0.contains(name)
    }

    /// Forgets the names held by this set alone: without it the set grows with every promotion
    /// (or stage) ever seen.
    pub fn prune(&mut self) {
        self.0.retain(|name| Arc::strong_count(name) > 1);
    }
}

//! A watch-fed cache indexed by promotion.
//!
//! kube's reflector store has no secondary index, and the controller must find "everything of
//! promotion P" without scanning every ClusterProfile and ClusterSummary on each step (tens of
//! thousands at fleet scale). Objects are converted once per watch event, not once per step.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

/// The identity of a watched object: namespace ("" when cluster-scoped) and name.
pub type ObjectKey = (String, String);

struct Entry<T> {
    index: Option<String>,
    value: Arc<T>,
}

struct Inner<T> {
    objects: HashMap<ObjectKey, Entry<T>>,
    by_index: HashMap<String, BTreeMap<ObjectKey, Arc<T>>>,
    /// Objects received since the watch (re)started, swapped in on `InitDone` so readers never
    /// see a half-listed cache.
    relist: Option<Vec<(ObjectKey, Option<String>, T)>>,
    ready: bool,
    /// Bumped by every change of the content, so readers can tell a derived snapshot is stale.
    generation: u64,
}

pub struct IndexedCache<T> {
    inner: RwLock<Inner<T>>,
}

impl<T> Default for IndexedCache<T> {
    fn default() -> Self {
        IndexedCache {
            inner: RwLock::new(Inner {
                objects: HashMap::new(),
                by_index: HashMap::new(),
                relist: None,
                ready: false,
                generation: 0,
            }),
        }
    }
}

impl<T> IndexedCache<T> {
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner<T>> {
        // A poisoned lock only means a panic elsewhere mid-update of plain maps; the data is still
        // structurally valid, and the next relist repairs its content.
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner<T>> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Inserts or replaces an object. Returns the index keys affected (old and new).
    pub fn upsert(&self, key: ObjectKey, index: Option<String>, value: T) -> Vec<String> {
        let mut inner = self.write();
        inner.generation += 1;
        let value = Arc::new(value);
        let mut touched = Vec::new();
        if let Some(old) = inner.objects.remove(&key)
            && let Some(old_index) = old.index
        {
            remove_indexed(&mut inner.by_index, &old_index, &key);
            touched.push(old_index);
        }
        if let Some(new_index) = &index {
            inner
                .by_index
                .entry(new_index.clone())
                .or_default()
                .insert(key.clone(), value.clone());
            if !touched.contains(new_index) {
                touched.push(new_index.clone());
            }
        }
        inner.objects.insert(key, Entry { index, value });
        touched
    }

    pub fn remove(&self, key: &ObjectKey) -> Vec<String> {
        let mut inner = self.write();
        inner.generation += 1;
        match inner.objects.remove(key) {
            Some(Entry {
                index: Some(index), ..
            }) => {
                remove_indexed(&mut inner.by_index, &index, key);
                vec![index]
            }
            _ => Vec::new(),
        }
    }

    pub fn begin_relist(&self) {
        self.write().relist = Some(Vec::new());
    }

    pub fn relist_item(&self, key: ObjectKey, index: Option<String>, value: T) {
        if let Some(buffer) = self.write().relist.as_mut() {
            buffer.push((key, index, value));
        }
    }

    /// Replaces the content with the relisted objects; returns every index key that existed
    /// before or after, since any of them may have changed while the watch was down.
    pub fn finish_relist(&self) -> Vec<String> {
        let mut inner = self.write();
        let Some(buffer) = inner.relist.take() else {
            return Vec::new();
        };
        inner.generation += 1;
        let mut touched: Vec<String> = inner.by_index.keys().cloned().collect();
        inner.objects.clear();
        inner.by_index.clear();
        for (key, index, value) in buffer {
            let value = Arc::new(value);
            if let Some(index) = &index {
                inner
                    .by_index
                    .entry(index.clone())
                    .or_default()
                    .insert(key.clone(), value.clone());
                touched.push(index.clone());
            }
            inner.objects.insert(key, Entry { index, value });
        }
        inner.ready = true;
        touched.sort();
        touched.dedup();
        touched
    }

    pub fn is_ready(&self) -> bool {
        self.read().ready
    }

    pub fn get(&self, key: &ObjectKey) -> Option<Arc<T>> {
        self.read().objects.get(key).map(|e| e.value.clone())
    }

    /// Every object filed under `index`.
    pub fn indexed(&self, index: &str) -> Vec<Arc<T>> {
        self.read()
            .by_index
            .get(index)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    pub fn all(&self) -> Vec<Arc<T>> {
        self.read()
            .objects
            .values()
            .map(|e| e.value.clone())
            .collect()
    }

    /// Every object in key order, with the generation it was read at.
    pub fn all_sorted(&self) -> (u64, Vec<Arc<T>>) {
        let inner = self.read();
        let mut entries: Vec<(&ObjectKey, &Entry<T>)> = inner.objects.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        let values = entries.into_iter().map(|(_, e)| e.value.clone()).collect();
        (inner.generation, values)
    }

    /// Changes every time the content changes.
    pub fn generation(&self) -> u64 {
        self.read().generation
    }

    pub fn index_keys(&self) -> Vec<String> {
        self.read().by_index.keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.read().objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().objects.is_empty()
    }
}

fn remove_indexed<T>(
    by_index: &mut HashMap<String, BTreeMap<ObjectKey, Arc<T>>>,
    index: &str,
    key: &ObjectKey,
) {
    if let Some(members) = by_index.get_mut(index) {
        members.remove(key);
        if members.is_empty() {
            by_index.remove(index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        (String::new(), name.to_string())
    }

    #[test]
    fn upsert_moves_an_object_between_indexes() {
        let cache = IndexedCache::default();
        assert_eq!(cache.upsert(key("a"), Some("p1".into()), 1), vec!["p1"]);
        assert_eq!(
            cache.upsert(key("a"), Some("p2".into()), 2),
            vec!["p1", "p2"]
        );
        assert!(cache.indexed("p1").is_empty());
        assert_eq!(*cache.indexed("p2")[0], 2);
        assert_eq!(cache.remove(&key("a")), vec!["p2"]);
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn relist_swaps_content_atomically_and_reports_every_index() {
        let cache = IndexedCache::default();
        cache.upsert(key("old"), Some("gone".into()), 1);
        cache.begin_relist();
        cache.relist_item(key("new"), Some("fresh".into()), 2);
        // Until the relist finishes, readers still see the old content.
        assert_eq!(cache.indexed("gone").len(), 1);
        assert!(!cache.is_ready());
        assert_eq!(cache.finish_relist(), vec!["fresh", "gone"]);
        assert!(cache.is_ready());
        assert!(cache.indexed("gone").is_empty());
        assert_eq!(cache.indexed("fresh").len(), 1);
    }

    #[test]
    fn generation_moves_with_every_change_and_listing_is_sorted() {
        let cache = IndexedCache::default();
        let start = cache.generation();
        cache.upsert(key("b"), None, 2);
        cache.upsert(key("a"), None, 1);
        let (generation, values) = cache.all_sorted();
        assert_eq!(generation, cache.generation());
        assert!(generation > start);
        assert_eq!(values.iter().map(|v| **v).collect::<Vec<_>>(), [1, 2]);
        cache.remove(&key("a"));
        assert!(cache.generation() > generation);
    }
}

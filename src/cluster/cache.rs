//! A watch-fed cache indexed by promotion.
//!
//! kube's reflector store has no secondary index, and the controller must find "everything of
//! promotion P" without scanning every ClusterProfile and ClusterSummary on each step (tens of
//! thousands at fleet scale). Objects are converted once per watch event, not once per step.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use members::Members;

mod members;

/// The identity of a watched object: namespace ("" when cluster-scoped) and name.
pub type ObjectKey = (String, String);

/// A key as stored: the namespace is shared by every object in it, and the name by the two maps
/// that hold the object (at fleet scale the keys weighed as much as the objects).
pub type SharedKey = (Arc<str>, Arc<str>);

/// name → the index key the object is filed under (`None`: not indexed), for one namespace.
type FiledNames = HashMap<Arc<str>, Option<Arc<str>>>;

/// The objects, by index key, and where each one is filed.
struct Content<T> {
    /// By namespace.
    filed: HashMap<Arc<str>, FiledNames>,
    /// index key → the objects filed under it, in key order.
    by_index: HashMap<Arc<str>, Members<T>>,
    unindexed: Members<T>,
}

impl<T> Default for Content<T> {
    fn default() -> Self {
        Content {
            filed: HashMap::new(),
            by_index: HashMap::new(),
            unindexed: Members::default(),
        }
    }
}

impl<T> Content<T> {
    /// Inserts or replaces; returns the index the object was filed under before, if any.
    fn insert(&mut self, key: ObjectKey, index: Option<String>, value: T) -> Option<Arc<str>> {
        let (namespace, name) = key;
        let namespace = match self.filed.get_key_value(namespace.as_str()) {
            Some((shared, _)) => shared.clone(),
            None => Arc::from(namespace),
        };
        let names = self.filed.entry(namespace.clone()).or_default();
        let (name, old_index) = match names.remove_entry(name.as_str()) {
            Some((shared, old_index)) => (shared, Some(old_index)),
            None => (Arc::from(name), None),
        };
        let key = (namespace, name);
        if let Some(old_index) = &old_index {
            self.remove_member(old_index.as_ref(), &key);
        }
        let index = match index {
            Some(index) => {
                let index = match self.by_index.get_key_value(index.as_str()) {
                    Some((shared, _)) => shared.clone(),
                    None => Arc::from(index),
                };
                self.by_index
                    .entry(index.clone())
                    .or_default()
                    .insert(key.clone(), value);
                Some(index)
            }
            None => {
                self.unindexed.insert(key.clone(), value);
                None
            }
        };
        let (namespace, name) = key;
        self.filed.entry(namespace).or_default().insert(name, index);
        old_index.flatten()
    }

    /// Removes; returns the index the object was filed under, if any.
    fn remove(&mut self, (namespace, name): &ObjectKey) -> Option<Arc<str>> {
        let (shared_namespace, _) = self.filed.get_key_value(namespace.as_str())?;
        let shared_namespace = shared_namespace.clone();
        let names = self.filed.get_mut(namespace.as_str())?;
        let (shared_name, index) = names.remove_entry(name.as_str())?;
        if names.is_empty() {
            self.filed.remove(namespace.as_str());
        }
        self.remove_member(index.as_ref(), &(shared_namespace, shared_name));
        index
    }

    fn remove_member(&mut self, index: Option<&Arc<str>>, key: &SharedKey) {
        let Some(index) = index else {
            self.unindexed.remove(key);
            return;
        };
        if let Some(members) = self.by_index.get_mut(index) {
            members.remove(key);
            if members.is_empty() {
                self.by_index.remove(index);
            }
        }
    }

    fn get(&self, (namespace, name): &ObjectKey) -> Option<&T> {
        let (namespace, names) = self.filed.get_key_value(namespace.as_str())?;
        let (name, index) = names.get_key_value(name.as_str())?;
        let key = (namespace.clone(), name.clone());
        match index {
            Some(index) => self.by_index.get(index)?.get(&key),
            None => self.unindexed.get(&key),
        }
    }

    fn entries(&self) -> impl Iterator<Item = (&SharedKey, &T)> {
        self.by_index
            .values()
            .flat_map(Members::iter)
            .chain(self.unindexed.iter())
    }

    fn len(&self) -> usize {
        self.by_index.values().map(Members::len).sum::<usize>() + self.unindexed.len()
    }
}

struct Inner<T> {
    content: Content<T>,
    /// Objects received since the watch (re)started, swapped in on `InitDone` so readers never
    /// see a half-listed cache.
    relist: Option<Content<T>>,
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
                content: Content::default(),
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
        let mut touched: Vec<String> = Vec::with_capacity(2);
        touched.extend(index.clone());
        if let Some(old) = inner.content.insert(key, index, value)
            && !touched.iter().any(|t| **t == *old)
        {
            touched.insert(0, old.to_string());
        }
        touched
    }

    pub fn remove(&self, key: &ObjectKey) -> Vec<String> {
        let mut inner = self.write();
        inner.generation += 1;
        inner
            .content
            .remove(key)
            .map(|index| index.to_string())
            .into_iter()
            .collect()
    }

    pub fn begin_relist(&self) {
        self.write().relist = Some(Content::default());
    }

    pub fn relist_item(&self, key: ObjectKey, index: Option<String>, value: T) {
        if let Some(relisted) = self.write().relist.as_mut() {
            relisted.insert(key, index, value);
        }
    }

    /// Replaces the content with the relisted objects; returns every index key that existed
    /// before or after, since any of them may have changed while the watch was down.
    pub fn finish_relist(&self) -> Vec<String> {
        let mut inner = self.write();
        let Some(relisted) = inner.relist.take() else {
            return Vec::new();
        };
        inner.generation += 1;
        let previous = std::mem::replace(&mut inner.content, relisted);
        inner.ready = true;
        let mut touched: Vec<String> = previous
            .by_index
            .keys()
            .chain(inner.content.by_index.keys())
            .map(|index| index.to_string())
            .collect();
        touched.sort();
        touched.dedup();
        touched
    }

    pub fn is_ready(&self) -> bool {
        self.read().ready
    }

    pub fn get(&self, key: &ObjectKey) -> Option<T>
    where
        T: Clone,
    {
        self.read().content.get(key).cloned()
    }

    /// Every object filed under `index`, in key order.
    pub fn indexed(&self, index: &str) -> Vec<T>
    where
        T: Clone,
    {
        self.read()
            .content
            .by_index
            .get(index)
            .map(|m| m.iter().map(|(_, value)| value.clone()).collect())
            .unwrap_or_default()
    }

    /// Calls `visit` with the index key as stored, then with every object filed under it and its
    /// key, in key order, under the read lock: for values that do not repeat their own key and
    /// index, and are rebuilt from them.
    pub fn visit_indexed(&self, index: &str, mut visit: impl FnMut(&Arc<str>, &SharedKey, &T)) {
        let inner = self.read();
        if let Some((index, members)) = inner.content.by_index.get_key_value(index) {
            for (key, value) in members.iter() {
                visit(index, key, value);
            }
        }
    }

    pub fn all(&self) -> Vec<T>
    where
        T: Clone,
    {
        self.read()
            .content
            .entries()
            .map(|(_, value)| value.clone())
            .collect()
    }

    /// Every object in key order, with the generation it was read at.
    pub fn all_sorted(&self) -> (u64, Vec<T>)
    where
        T: Clone,
    {
        let inner = self.read();
        let mut entries: Vec<(&SharedKey, &T)> = inner.content.entries().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        let values = entries
            .into_iter()
            .map(|(_, value)| value.clone())
            .collect();
        (inner.generation, values)
    }

    /// Changes every time the content changes.
    pub fn generation(&self) -> u64 {
        self.read().generation
    }

    pub fn index_keys(&self) -> Vec<String> {
        self.read()
            .content
            .by_index
            .keys()
            .map(|index| index.to_string())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.read().content.len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().content.filed.is_empty()
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
        assert_eq!(cache.indexed("p2")[0], 2);
        assert_eq!(cache.remove(&key("a")), vec!["p2"]);
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn indexed_members_come_in_key_order_across_namespaces() {
        let cache = IndexedCache::default();
        cache.upsert(("b".into(), "x".into()), Some("p".into()), 3);
        cache.upsert(("a".into(), "y".into()), Some("p".into()), 2);
        cache.upsert(("a".into(), "x".into()), Some("p".into()), 1);
        cache.upsert(("a".into(), "z".into()), Some("q".into()), 4);
        let members: Vec<i32> = cache.indexed("p");
        assert_eq!(members, [1, 2, 3]);
        assert_eq!(cache.len(), 4);
        // Emptying a namespace and refilling it keeps lookups and the index consistent.
        assert_eq!(cache.remove(&("b".into(), "x".into())), vec!["p"]);
        assert!(cache.remove(&("b".into(), "x".into())).is_empty());
        assert_eq!(
            cache.upsert(("b".into(), "x".into()), None, 5),
            Vec::<String>::new()
        );
        assert_eq!(cache.get(&("b".into(), "x".into())), Some(5));
        assert_eq!(cache.indexed("p").len(), 2);
        let mut keys = cache.index_keys();
        keys.sort();
        assert_eq!(keys, ["p", "q"]);
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
        assert_eq!(values, [1, 2]);
        cache.remove(&key("a"));
        assert!(cache.generation() > generation);
    }
}

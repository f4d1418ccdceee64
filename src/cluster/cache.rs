//! A watch-fed cache indexed by promotion.
//!
//! kube's reflector store has no secondary index, and the controller must find "everything of
//! promotion P" without scanning every ClusterProfile and ClusterSummary on each step (tens of
//! thousands at fleet scale). Objects are converted once per watch event, not once per step.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, RwLock};

use hashbrown::HashTable;
use member_key::{MemberKey, MemberKeys};
use members::Members;

mod member_key;
mod members;

/// The identity of a watched object: namespace ("" when cluster-scoped) and name.
pub type ObjectKey = (String, String);

/// The objects, by index key.
struct Groups<T> {
    /// index key → the objects filed under it, in key order.
    by_index: HashMap<Arc<str>, Members<T>>,
    unindexed: Members<T>,
    /// The members' keys, relative to their index keys.
    keys: MemberKeys,
}

impl<T> Default for Groups<T> {
    fn default() -> Self {
        Groups {
            by_index: HashMap::new(),
            unindexed: Members::default(),
            keys: MemberKeys::default(),
        }
    }
}

impl<T> Groups<T> {
    fn group(&self, index: Option<&str>) -> Option<&Members<T>> {
        match index {
            Some(index) => self.by_index.get(index),
            None => Some(&self.unindexed),
        }
    }

    fn get(&self, index: Option<&str>, namespace: &str, name: &str) -> Option<&T> {
        let key = self.keys.find(index, namespace, name)?;
        self.group(index)?.get(key)
    }

    /// Files `value` under `index`; returns the index key as stored.
    fn insert(
        &mut self,
        index: Option<String>,
        namespace: &str,
        name: &str,
        value: T,
    ) -> Option<Arc<str>> {
        let key = self.keys.intern(index.as_deref(), namespace, name);
        let Some(index) = index else {
            self.unindexed.insert(key, value);
            return None;
        };
        let index = match self.by_index.get_key_value(index.as_str()) {
            Some((shared, _)) => shared.clone(),
            None => Arc::from(index),
        };
        self.by_index
            .entry(index.clone())
            .or_default()
            .insert(key, value);
        Some(index)
    }

    fn remove(&mut self, index: Option<&str>, namespace: &str, name: &str) {
        let Some(key) = self.keys.find(index, namespace, name).cloned() else {
            return;
        };
        let removed = match index {
            None => self.unindexed.remove(&key),
            Some(index) => {
                let Some(members) = self.by_index.get_mut(index) else {
                    return;
                };
                let removed = members.remove(&key);
                if members.is_empty() {
                    self.by_index.remove(index);
                }
                removed
            }
        };
        // The removed member's copy goes first, so that `release` sees the table's and ours.
        drop(removed);
        self.keys.release(key);
    }

    /// The index key `(namespace, name)` is filed under and the object, if the name is that key
    /// or starts with it and a `-`. An object is filed once, so at most one prefix holds it.
    fn filed_in_name(&self, namespace: &str, name: &str) -> Option<(&Arc<str>, &T)> {
        let ends = name.match_indices('-').map(|(at, _)| at);
        ends.chain(std::iter::once(name.len())).find_map(|end| {
            let prefix = &name[..end];
            let (index, members) = self.by_index.get_key_value(prefix)?;
            let key = self.keys.find(Some(prefix), namespace, name)?;
            members.get(key).map(|value| (index, value))
        })
    }

    /// Every member with the index key it is filed under.
    fn entries(&self) -> impl Iterator<Item = (Option<&Arc<str>>, &Arc<MemberKey>, &T)> {
        self.by_index
            .iter()
            .flat_map(|(index, members)| members.iter().map(move |(k, v)| (Some(index), k, v)))
            .chain(self.unindexed.iter().map(|(k, v)| (None, k, v)))
    }
}

/// Where one object whose name does not follow its index key is filed. The name is not kept
/// here: a candidate with the name's hash is confirmed by its group holding the name.
struct Filed {
    hash: u64,
    index: Option<Arc<str>>,
}

/// The objects, by index key, and where each one is filed.
///
/// An object whose name is its index key, or starts with it and a `-` (every generated name), is
/// found by trying the name's prefixes up to each `-` as index keys: nothing records where it
/// is. Only the others (hand-made names, objects without an index) are recorded, by hash.
struct Content<T> {
    groups: Groups<T>,
    whole_names: HashTable<Filed>,
    hasher: RandomState,
    len: usize,
}

impl<T> Default for Content<T> {
    fn default() -> Self {
        Content {
            groups: Groups::default(),
            whole_names: HashTable::new(),
            hasher: RandomState::new(),
            len: 0,
        }
    }
}

impl<T> Content<T> {
    fn hash(&self, namespace: &str, name: &str) -> u64 {
        self.hasher.hash_one((namespace, name))
    }

    /// Inserts or replaces; returns the index the object was filed under before, if any.
    fn insert(
        &mut self,
        (namespace, name): ObjectKey,
        index: Option<String>,
        value: T,
    ) -> Option<Arc<str>> {
        let old_index = self.take(&namespace, &name);
        let follows = member_key::follows_index(index.as_deref(), &name);
        let index = self.groups.insert(index, &namespace, &name, value);
        if !follows {
            let hash = self.hash(&namespace, &name);
            self.whole_names
                .insert_unique(hash, Filed { hash, index }, |filed| filed.hash);
        }
        self.len += 1;
        old_index.flatten()
    }

    /// Removes `(namespace, name)`; returns the index it was filed under (`Some(None)`: none).
    fn take(&mut self, namespace: &str, name: &str) -> Option<Option<Arc<str>>> {
        let index = match self.groups.filed_in_name(namespace, name) {
            Some((index, _)) => Some(index.clone()),
            None => self.take_whole_name(namespace, name)?,
        };
        self.groups.remove(index.as_deref(), namespace, name);
        self.len -= 1;
        Some(index)
    }

    fn take_whole_name(&mut self, namespace: &str, name: &str) -> Option<Option<Arc<str>>> {
        let hash = self.hash(namespace, name);
        let groups = &self.groups;
        let entry = self
            .whole_names
            .find_entry(hash, |filed| {
                filed.hash == hash
                    && groups
                        .get(filed.index.as_deref(), namespace, name)
                        .is_some()
            })
            .ok()?;
        let (filed, _) = entry.remove();
        let table = &mut self.whole_names;
        if table.capacity() > 64 && table.len() < table.capacity() / 4 {
            table.shrink_to_fit(|filed| filed.hash);
        }
        Some(filed.index)
    }

    /// Removes; returns the index the object was filed under, if any.
    fn remove(&mut self, (namespace, name): &ObjectKey) -> Option<Arc<str>> {
        self.take(namespace, name)?
    }

    fn get(&self, (namespace, name): &ObjectKey) -> Option<&T> {
        if let Some((_, value)) = self.groups.filed_in_name(namespace, name) {
            return Some(value);
        }
        let hash = self.hash(namespace, name);
        self.whole_names
            .iter_hash(hash)
            .filter(|filed| filed.hash == hash)
            .find_map(|filed| self.groups.get(filed.index.as_deref(), namespace, name))
    }

    fn len(&self) -> usize {
        self.len
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
            .groups
            .by_index
            .keys()
            .chain(inner.content.groups.by_index.keys())
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
            .groups
            .by_index
            .get(index)
            .map(|m| m.iter().map(|(_, value)| value.clone()).collect())
            .unwrap_or_default()
    }

    /// Calls `visit` with the index key as stored, then with the namespace and name of every
    /// object filed under it and the object, in key order, under the read lock: for values that
    /// do not repeat their own key and index, and are rebuilt from them.
    pub fn visit_indexed(
        &self,
        index: &str,
        mut visit: impl FnMut(&Arc<str>, &Arc<str>, &str, &T),
    ) {
        let inner = self.read();
        if let Some((index, members)) = inner.content.groups.by_index.get_key_value(index) {
            for (key, value) in members.iter() {
                visit(index, key.namespace(), &key.name(Some(index)), value);
            }
        }
    }

    pub fn all(&self) -> Vec<T>
    where
        T: Clone,
    {
        self.read()
            .content
            .groups
            .entries()
            .map(|(_, _, value)| value.clone())
            .collect()
    }

    /// Every object in (namespace, name) order, with the generation it was read at.
    pub fn all_sorted(&self) -> (u64, Vec<T>)
    where
        T: Clone,
    {
        let inner = self.read();
        let mut entries: Vec<((&str, String), &T)> = inner
            .content
            .groups
            .entries()
            .map(|(index, key, value)| ((&**key.namespace(), key.name(index.map(|i| &**i))), value))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
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
            .groups
            .by_index
            .keys()
            .map(|index| index.to_string())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.read().content.len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().content.len == 0
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

    #[test]
    fn names_that_follow_their_index_key_cost_no_key_of_their_own() {
        let cache = IndexedCache::default();
        for profile in ["p1", "p2", "p3"] {
            for cluster in ["c1", "c2"] {
                let name = format!("{profile}-sveltos-{cluster}");
                cache.upsert(("fleet".into(), name), Some(profile.into()), 0);
            }
        }
        assert_eq!(cache.len(), 6);
        assert_eq!(cache.read().content.groups.keys.sizes(), (2, 1));
        assert_eq!(
            cache.read().content.whole_names.len(),
            0,
            "nothing records where they are"
        );
        let mut seen = Vec::new();
        cache.visit_indexed("p2", |index, namespace, name, _| {
            seen.push(format!("{index} {namespace}/{name}"));
        });
        assert_eq!(seen, ["p2 fleet/p2-sveltos-c1", "p2 fleet/p2-sveltos-c2"]);
    }

    #[test]
    fn an_object_moved_to_an_index_its_name_does_not_follow_is_found_and_removed() {
        let cache = IndexedCache::default();
        let key = ("ns".to_string(), "p1-c1".to_string());
        cache.upsert(key.clone(), Some("p1".into()), 1);
        assert_eq!(cache.upsert(key.clone(), Some("q".into()), 2), ["p1", "q"]);
        assert_eq!(cache.get(&key), Some(2));
        assert_eq!(cache.read().content.whole_names.len(), 1);
        assert_eq!(cache.upsert(key.clone(), None, 3), ["q"]);
        assert_eq!(cache.get(&key), Some(3));
        assert_eq!(cache.remove(&key), Vec::<String>::new());
        assert_eq!(cache.get(&key), None);
        assert!(cache.is_empty());
        assert_eq!(cache.read().content.groups.keys.sizes(), (0, 0));
    }

    use proptest::prelude::*;

    /// Names that do and do not follow the index keys, in two namespaces.
    fn operation() -> impl Strategy<Value = (bool, usize, usize, Option<usize>, u8)> {
        (
            any::<bool>(),
            0..2usize,
            0..6usize,
            proptest::option::of(0..3usize),
            any::<u8>(),
        )
    }

    const NAMES: [&str; 6] = ["p", "p-a", "p-a-b", "q-a", "pa", "a"];
    const INDEXES: [&str; 3] = ["p", "q", "p-a"];

    proptest! {
        /// The cache answers as a plain map of (namespace, name) → (index, value) would.
        #[test]
        fn the_cache_agrees_with_a_plain_map(operations in proptest::collection::vec(operation(), 1..60)) {
            let cache = IndexedCache::default();
            let mut model: std::collections::BTreeMap<ObjectKey, (Option<String>, u8)> =
                std::collections::BTreeMap::new();
            for (upsert, namespace, name, index, value) in operations {
                let key = (["a", "b"][namespace].to_string(), NAMES[name].to_string());
                let index = index.map(|i| INDEXES[i].to_string());
                if upsert {
                    cache.upsert(key.clone(), index.clone(), value);
                    model.insert(key, (index, value));
                } else {
                    cache.remove(&key);
                    model.remove(&key);
                }
                prop_assert_eq!(cache.len(), model.len());
                for (key, (_, value)) in &model {
                    prop_assert_eq!(cache.get(key), Some(*value));
                }
                for index in INDEXES {
                    let expected: Vec<u8> = model
                        .values()
                        .filter(|(i, _)| i.as_deref() == Some(index))
                        .map(|(_, v)| *v)
                        .collect();
                    let mut found = cache.indexed(index);
                    found.sort();
                    let mut expected = expected;
                    expected.sort();
                    prop_assert_eq!(found, expected);
                }
                let (_, sorted) = cache.all_sorted();
                let expected: Vec<u8> = model.values().map(|(_, v)| *v).collect();
                prop_assert_eq!(sorted, expected);
            }
            for key in model.keys() {
                cache.remove(key);
            }
            prop_assert_eq!(cache.read().content.groups.keys.sizes(), (0, 0));
            prop_assert_eq!(cache.read().content.whole_names.len(), 0);
        }
    }
}

//! Objects in memory, the global resourceVersion counter, the watch history and open watches.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::api_error::ApiError;
use crate::selector::{FieldSelector, LabelSelector};

/// Identity of a stored object. Cluster-scoped objects have an empty namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// `plural.group` of the type.
    pub resource: String,
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One committed change, kept in the history so watches can resume from a resourceVersion.
#[derive(Debug, Clone)]
pub struct Change {
    pub resource_version: u64,
    pub resource: String,
    pub kind: ChangeKind,
    /// Shared with the store and with every watch it went out to: one copy per version.
    pub object: Arc<Value>,
    pub previous: Option<Arc<Value>>,
}

/// What a watch selects.
#[derive(Debug, Clone)]
pub struct WatchFilter {
    pub resource: String,
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl WatchFilter {
    fn selects(&self, object: &Value) -> bool {
        let namespace_ok = self
            .namespace
            .as_ref()
            .is_none_or(|ns| object["metadata"]["namespace"].as_str() == Some(ns.as_str()));
        namespace_ok && self.labels.matches(object) && self.fields.matches(object)
    }

    /// The event type this watcher sees for a change, if any: an object that starts or stops
    /// matching a selector is seen as added or deleted, like on the real server.
    fn event_for(&self, change: &Change) -> Option<&'static str> {
        if change.resource != self.resource {
            return None;
        }
        let now = self.selects(&change.object);
        let before = change.previous.as_ref().is_some_and(|p| self.selects(p));
        match (change.kind, before, now) {
            (ChangeKind::Added, _, true) => Some("ADDED"),
            (ChangeKind::Deleted, _, true) => Some("DELETED"),
            (ChangeKind::Modified, true, true) => Some("MODIFIED"),
            (ChangeKind::Modified, false, true) => Some("ADDED"),
            (ChangeKind::Modified, true, false) => Some("DELETED"),
            _ => None,
        }
    }
}

/// One watch event: its type and the object.
pub type WatchEvent = (&'static str, Arc<Value>);

struct Watcher {
    filter: WatchFilter,
    sender: mpsc::UnboundedSender<WatchEvent>,
}

/// The object store.
pub struct Store {
    resource_version: u64,
    objects: BTreeMap<ObjectKey, Arc<Value>>,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    /// Watches must start at this resourceVersion or later; older ones get 410.
    oldest_watchable: u64,
    watchers: Vec<Watcher>,
}

impl Store {
    pub fn new(history_limit: usize) -> Self {
        Self {
            resource_version: 1,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            oldest_watchable: 1,
            watchers: Vec::new(),
        }
    }

    pub fn resource_version(&self) -> u64 {
        self.resource_version
    }

    pub fn next_resource_version(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    pub fn get(&self, key: &ObjectKey) -> Option<&Value> {
        self.objects.get(key).map(|v| &**v)
    }

    /// The stored version itself, shared (no copy).
    pub fn get_shared(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        self.objects.get(key).cloned()
    }

    /// Objects of a type, optionally in one namespace, in (namespace, name) order, starting after
    /// `after` when given.
    pub fn range<'a>(
        &'a self,
        resource: &'a str,
        namespace: Option<&'a str>,
        after: Option<&ObjectKey>,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a Value)> + 'a {
        self.range_shared(resource, namespace, after)
            .map(|(k, v)| (k, &**v))
    }

    /// Like [`Store::range`], handing out the shared stored versions.
    pub fn range_shared<'a>(
        &'a self,
        resource: &'a str,
        namespace: Option<&'a str>,
        after: Option<&ObjectKey>,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a Arc<Value>)> + 'a {
        let start = after.cloned().unwrap_or(ObjectKey {
            resource: resource.to_string(),
            namespace: namespace.unwrap_or_default().to_string(),
            name: String::new(),
        });
        let skip_start = after.is_some();
        self.objects
            .range(start.clone()..)
            .skip_while(move |(k, _)| skip_start && **k == start)
            .take_while(move |(k, _)| k.resource == resource)
            .filter(move |(k, _)| namespace.is_none_or(|ns| k.namespace == ns))
    }

    pub fn all_objects(&self) -> impl Iterator<Item = (&ObjectKey, &Value)> {
        self.objects.iter().map(|(k, v)| (k, &**v))
    }

    /// Stores (or removes, for `Deleted`) an object whose `metadata.resourceVersion` is already
    /// `resource_version`, records the change and fans it out to open watches.
    pub fn commit(
        &mut self,
        key: ObjectKey,
        kind: ChangeKind,
        object: Arc<Value>,
        previous: Option<Arc<Value>>,
        resource_version: u64,
    ) {
        match kind {
            ChangeKind::Deleted => {
                self.objects.remove(&key);
            }
            _ => {
                self.objects.insert(key.clone(), object.clone());
            }
        }
        let change = Arc::new(Change {
            resource_version,
            resource: key.resource,
            kind,
            object,
            previous,
        });
        let shared = &change.object;
        self.watchers.retain(|w| match w.filter.event_for(&change) {
            Some(event) => w.sender.send((event, Arc::clone(shared))).is_ok(),
            None => !w.sender.is_closed(),
        });
        self.history.push_back(change);
        while self.history.len() > self.history_limit {
            if let Some(dropped) = self.history.pop_front() {
                self.oldest_watchable = self.oldest_watchable.max(dropped.resource_version);
            }
        }
    }

    /// Opens a watch. `from` = None means "now, starting with the current objects as ADDED"
    /// (the real server's behaviour for resourceVersion unset or "0").
    pub fn watch(
        &mut self,
        filter: WatchFilter,
        from: Option<u64>,
    ) -> Result<mpsc::UnboundedReceiver<WatchEvent>, ApiError> {
        let (sender, receiver) = mpsc::unbounded_channel();
        match from {
            Some(version) => {
                if version < self.oldest_watchable {
                    return Err(ApiError::Gone {
                        requested: version,
                        oldest: self.oldest_watchable,
                    });
                }
                for change in self.history.iter().filter(|c| c.resource_version > version) {
                    if let Some(event) = filter.event_for(change) {
                        // The receiver is still held here, so sending cannot fail.
                        let _ = sender.send((event, change.object.clone()));
                    }
                }
            }
            None => {
                let current =
                    self.range_shared(&filter.resource, filter.namespace.as_deref(), None);
                for (_, object) in current {
                    if filter.selects(object) {
                        let _ = sender.send(("ADDED", Arc::clone(object)));
                    }
                }
            }
        }
        self.watchers.push(Watcher { filter, sender });
        Ok(receiver)
    }

    /// Closes every open watch stream.
    pub fn drop_watches(&mut self) {
        self.watchers.clear();
    }

    pub fn open_watches(&self) -> usize {
        self.watchers
            .iter()
            .filter(|w| !w.sender.is_closed())
            .count()
    }

    /// Forgets the watch history: every resourceVersion handed out so far becomes too old to
    /// watch from. The counter moves on by one so a fresh list yields a watchable version.
    pub fn compact(&mut self) {
        self.history.clear();
        self.resource_version += 1;
        self.oldest_watchable = self.resource_version;
    }

    /// The whole store as JSON (for the state file).
    pub fn to_json(&self) -> Value {
        let objects: Vec<Value> = self
            .objects
            .iter()
            .map(|(k, v)| json!({"resource": k.resource, "object": &**v}))
            .collect();
        json!({"resourceVersion": self.resource_version, "objects": objects})
    }

    /// Replaces the content with a state file's; history starts empty.
    pub fn load_json(&mut self, state: &Value) -> Result<(), String> {
        let version = state["resourceVersion"]
            .as_u64()
            .ok_or("missing resourceVersion")?;
        let mut objects = BTreeMap::new();
        for (index, entry) in state["objects"]
            .as_array()
            .ok_or("missing objects")?
            .iter()
            .enumerate()
        {
            let resource = entry["resource"]
                .as_str()
                .ok_or(format!("objects[{index}].resource missing"))?;
            let object = &entry["object"];
            let name = object["metadata"]["name"]
                .as_str()
                .ok_or(format!("objects[{index}].object.metadata.name missing"))?;
            let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
            let key = ObjectKey {
                resource: resource.to_string(),
                namespace: namespace.to_string(),
                name: name.to_string(),
            };
            objects.insert(key, Arc::new(object.clone()));
        }
        self.objects = objects;
        self.resource_version = version;
        self.history.clear();
        self.oldest_watchable = version;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            resource: "things".into(),
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    fn filter() -> WatchFilter {
        WatchFilter {
            resource: "things".into(),
            namespace: None,
            labels: LabelSelector::default(),
            fields: FieldSelector::default(),
        }
    }

    fn put(store: &mut Store, name: &str) -> u64 {
        let version = store.next_resource_version();
        let object = json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": version.to_string()}});
        store.commit(
            key(name),
            ChangeKind::Added,
            Arc::new(object),
            None,
            version,
        );
        version
    }

    #[test]
    fn watch_replays_history_after_the_version() {
        let mut store = Store::new(100);
        let first = put(&mut store, "a");
        put(&mut store, "b");
        let mut receiver = store.watch(filter(), Some(first)).unwrap();
        let (event, object) = receiver.try_recv().unwrap();
        assert_eq!(
            (event, object["metadata"]["name"].as_str()),
            ("ADDED", Some("b"))
        );
        assert!(receiver.try_recv().is_err());
    }

    #[test]
    fn compact_and_history_limit_make_versions_too_old() {
        let mut store = Store::new(1);
        let first = put(&mut store, "a");
        put(&mut store, "b");
        assert!(matches!(
            store.watch(filter(), Some(first - 1)),
            Err(ApiError::Gone { .. })
        ));
        let current = store.resource_version();
        store.compact();
        assert!(matches!(
            store.watch(filter(), Some(current)),
            Err(ApiError::Gone { .. })
        ));
        assert!(
            store
                .watch(filter(), Some(store.resource_version()))
                .is_ok()
        );
    }

    #[test]
    fn range_pages_in_key_order() {
        let mut store = Store::new(10);
        for name in ["c", "a", "b"] {
            put(&mut store, name);
        }
        let names: Vec<&str> = store
            .range("things", None, Some(&key("a")))
            .map(|(k, _)| k.name.as_str())
            .collect();
        assert_eq!(names, ["b", "c"]);
    }
}

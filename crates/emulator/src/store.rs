//! Objects in memory, the global resourceVersion counter, the watch history and open watches.
//!
//! Like the real server's watch cache, history is bounded per resource type: a watch from a
//! resourceVersion older than what its type retains answers 410 Gone (`Expired`), and so does one
//! from before a compaction or a restart (see [`Store::load_json`]).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::api_error::ApiError;
use crate::selector::{FieldSelector, LabelSelector, field_value, selectable_fields};
use crate::stored_json::{ChunkTable, StoredJson};

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

/// One committed version of an object, kept as its JSON: serialised once at commit, the bytes
/// get, list, every watcher and the write's own answer send, with the subtrees it shares with
/// other versions kept once ([`StoredJson`]). The parsed object is kept only while the version
/// is among the [`PARSED_RECENTLY`] most recently committed or read ones, so memory follows the
/// JSON of the objects, not their parsed trees (several times larger).
#[derive(Debug)]
pub struct Stored {
    pub json: StoredJson,
    /// What selectors read.
    pub view: Arc<SelectionView>,
    resource_version: u64,
    parsed: RefCell<Option<Arc<Value>>>,
}

impl Stored {
    fn new(object: Arc<Value>, resource_version: u64, chunks: &mut ChunkTable) -> Self {
        Self {
            json: StoredJson::encode(&object, chunks),
            view: Arc::new(SelectionView::of(&object)),
            resource_version,
            parsed: RefCell::new(Some(object)),
        }
    }

    /// The parsed object when it is kept, without parsing.
    pub fn parsed(&self) -> Option<Arc<Value>> {
        self.parsed.borrow().clone()
    }
}

/// How many versions keep their parsed object besides their JSON: the ones the Sveltos stand-in
/// and writers read next are mostly the ones just written.
pub const PARSED_RECENTLY: usize = 8_192;

/// What list and watch selectors read of an object (metadata name, namespace and labels only),
/// kept beside its JSON and in the history instead of a parsed tree. Compact: a parsed
/// `{"metadata": {name, namespace, labels}}` cost about 1.8 KB per ClusterSummary, more
/// than half its JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectionView {
    /// Empty when absent.
    pub name: Box<str>,
    pub namespace: Box<str>,
    /// The string-valued labels: keys and values one after the other in `text`, with the end
    /// offsets of each (key, value) pair in `ends`.
    label_text: Box<str>,
    ends: Box<[(u32, u32)]>,
    /// The other selectable fields of its kind (Events: type, reason, regarding.*, …), as
    /// (path, value); empty for kinds selectable by name and namespace only.
    fields: Box<[(Box<str>, Box<str>)]>,
}

impl SelectionView {
    pub fn of(object: &Value) -> Self {
        let metadata = &object["metadata"];
        let text =
            |field: &str| -> Box<str> { metadata[field].as_str().unwrap_or_default().into() };
        let mut label_text = String::new();
        let mut ends = Vec::new();
        let labels = metadata["labels"].as_object().into_iter().flatten();
        for (key, value) in labels {
            let Some(value) = value.as_str() else {
                continue;
            };
            label_text.push_str(key);
            let key_end = label_text.len();
            label_text.push_str(value);
            // Labels over 4 GiB are not kept by this emulator.
            let offset = |at: usize| u32::try_from(at).unwrap_or(u32::MAX);
            ends.push((offset(key_end), offset(label_text.len())));
        }
        let kind = object["kind"].as_str().unwrap_or_default();
        let fields = selectable_fields(kind)
            .iter()
            .filter(|path| !path.starts_with("metadata."))
            .map(|path| (Box::from(*path), field_value(object, path).into_boxed_str()))
            .collect();
        Self {
            name: text("name"),
            namespace: text("namespace"),
            label_text: label_text.into_boxed_str(),
            ends: ends.into_boxed_slice(),
            fields,
        }
    }

    /// The value of a selectable field (empty when absent).
    pub fn field(&self, path: &str) -> &str {
        match path {
            "metadata.name" => &self.name,
            "metadata.namespace" => &self.namespace,
            _ => self
                .fields
                .iter()
                .find(|(at, _)| **at == *path)
                .map_or("", |(_, value)| value),
        }
    }

    /// The value of a string-valued label.
    pub fn label(&self, key: &str) -> Option<&str> {
        let mut start = 0usize;
        for &(key_end, value_end) in self.ends.iter() {
            let (key_end, value_end) = (key_end as usize, value_end as usize);
            let found = self.label_text.get(start..key_end) == Some(key);
            if found {
                return self.label_text.get(key_end..value_end);
            }
            start = value_end;
        }
        None
    }

    pub fn selected_by(&self, labels: &LabelSelector, fields: &FieldSelector) -> bool {
        labels.matches_labels(|key| self.label(key))
            && fields.matches_fields(|path| self.field(path))
    }
}

/// One committed change, kept in the history so watches can resume from a resourceVersion.
#[derive(Debug, Clone)]
pub struct Change {
    pub resource_version: u64,
    pub resource: String,
    pub kind: ChangeKind,
    /// [`SelectionView`] of the new version and of the one before.
    pub view: Arc<SelectionView>,
    pub previous_view: Option<Arc<SelectionView>>,
    /// The new version's JSON, shared with the store and with every watch it went out to.
    pub json: StoredJson,
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
    fn selects(&self, view: &SelectionView) -> bool {
        let namespace_ok = self
            .namespace
            .as_ref()
            .is_none_or(|ns| *view.namespace == **ns);
        namespace_ok && view.selected_by(&self.labels, &self.fields)
    }

    /// The event type this watcher sees for a change, if any: an object that starts or stops
    /// matching a selector is seen as added or deleted, like on the real server.
    fn event_for(&self, change: &Change) -> Option<&'static str> {
        if change.resource != self.resource {
            return None;
        }
        let now = self.selects(&change.view);
        let before = change
            .previous_view
            .as_ref()
            .is_some_and(|p| self.selects(p));
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

/// One watch event: its type and the object's JSON.
pub type WatchEvent = (&'static str, StoredJson);

struct Watcher {
    filter: WatchFilter,
    sender: mpsc::UnboundedSender<WatchEvent>,
    /// The resourceVersion this watcher is known to be current at (for its 410 message).
    seen: u64,
}

/// The changes one resource type retains for watches to resume from.
#[derive(Default)]
struct TypeHistory {
    changes: VecDeque<Arc<Change>>,
    /// Watches of this type must start at this resourceVersion or later; older ones get 410.
    oldest_watchable: u64,
}

/// By how much resourceVersions jump when a store is restored from a state file, unless asked to
/// stay continuous: etcd revisions are not the versions a client saw before a restart.
pub const RESTART_GAP: u64 = 1_000_000;

/// The object store.
pub struct Store {
    resource_version: u64,
    objects: BTreeMap<ObjectKey, Stored>,
    /// Versions whose parsed object is kept, oldest first (at most [`PARSED_RECENTLY`]).
    parsed_recently: RefCell<VecDeque<(ObjectKey, u64)>>,
    /// `plural.group` → its retained changes.
    history: HashMap<String, TypeHistory>,
    /// Changes retained per resource type.
    history_limit: usize,
    /// Watches of any type must start at this resourceVersion or later (compaction, restart).
    oldest_watchable: u64,
    watchers: Vec<Watcher>,
    /// The JSON subtrees versions share.
    chunks: ChunkTable,
}

impl Store {
    pub fn new(history_limit: usize) -> Self {
        Self {
            resource_version: 1,
            objects: BTreeMap::new(),
            parsed_recently: RefCell::new(VecDeque::new()),
            history: HashMap::new(),
            history_limit: history_limit.max(1),
            oldest_watchable: 1,
            watchers: Vec::new(),
            chunks: ChunkTable::default(),
        }
    }

    /// The oldest resourceVersion a watch of `resource` may start from.
    pub fn oldest_watchable(&self, resource: &str) -> u64 {
        let retained = self.history.get(resource).map_or(0, |h| h.oldest_watchable);
        self.oldest_watchable.max(retained)
    }

    pub fn resource_version(&self) -> u64 {
        self.resource_version
    }

    pub fn next_resource_version(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    /// The stored version, shared (no copy): parsed now unless it is kept parsed.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<Value>> {
        self.objects
            .get_key_value(key)
            .map(|(key, stored)| self.parsed(key, stored))
    }

    /// The stored version with its JSON.
    pub fn get_stored(&self, key: &ObjectKey) -> Option<&Stored> {
        self.objects.get(key)
    }

    /// The parsed object of `stored`, kept among the recently parsed ones.
    fn parsed(&self, key: &ObjectKey, stored: &Stored) -> Arc<Value> {
        if let Some(object) = stored.parsed() {
            return object;
        }
        let object = Arc::new(stored.json.parse());
        *stored.parsed.borrow_mut() = Some(Arc::clone(&object));
        self.remember_parsed(key.clone(), stored.resource_version);
        object
    }

    /// Notes a version as kept parsed, and lets the oldest such versions drop their trees.
    fn remember_parsed(&self, key: ObjectKey, resource_version: u64) {
        let mut recent = self.parsed_recently.borrow_mut();
        recent.push_back((key, resource_version));
        while recent.len() > PARSED_RECENTLY {
            let Some((key, version)) = recent.pop_front() else {
                break;
            };
            if let Some(stored) = self.objects.get(&key)
                && stored.resource_version == version
            {
                *stored.parsed.borrow_mut() = None;
            }
        }
    }

    /// Objects of a type, optionally in one namespace, in (namespace, name) order, starting after
    /// `after` when given.
    pub fn range<'a>(
        &'a self,
        resource: &'a str,
        namespace: Option<&'a str>,
        after: Option<&ObjectKey>,
    ) -> impl Iterator<Item = (&'a ObjectKey, Arc<Value>)> + 'a {
        self.range_stored(resource, namespace, after)
            .map(|(k, v)| (k, self.parsed(k, v)))
    }

    /// Like [`Store::range`], handing out the stored versions with their JSON (parsing nothing).
    pub fn range_stored<'a>(
        &'a self,
        resource: &'a str,
        namespace: Option<&'a str>,
        after: Option<&ObjectKey>,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a Stored)> + 'a {
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

    /// Stores (or removes, for `Deleted`) an object whose `metadata.resourceVersion` is already
    /// `resource_version`, records the change and fans it out to open watches. Returns the
    /// committed version's JSON, serialised here once for every reader.
    pub fn commit(
        &mut self,
        key: ObjectKey,
        kind: ChangeKind,
        object: Arc<Value>,
        previous: Option<Arc<Value>>,
        resource_version: u64,
    ) -> StoredJson {
        let stored = Stored::new(object, resource_version, &mut self.chunks);
        let json = stored.json.clone();
        let view = Arc::clone(&stored.view);
        // `previous` is the stored version this one replaces: its view is kept already.
        let previous_view = previous.map(|before| match self.objects.get(&key) {
            Some(stored) => Arc::clone(&stored.view),
            None => Arc::new(SelectionView::of(&before)),
        });
        let resource = key.resource.clone();
        match kind {
            ChangeKind::Deleted => {
                self.objects.remove(&key);
            }
            _ => {
                self.objects.insert(key.clone(), stored);
                self.remember_parsed(key, resource_version);
            }
        }
        let change = Arc::new(Change {
            resource_version,
            resource,
            kind,
            view,
            previous_view,
            json: json.clone(),
        });
        self.watchers
            .retain_mut(|w| match w.filter.event_for(&change) {
                Some(event) => {
                    w.seen = resource_version;
                    w.sender.send((event, change.json.clone())).is_ok()
                }
                None => !w.sender.is_closed(),
            });
        let history = self.history.entry(change.resource.clone()).or_default();
        history.changes.push_back(change);
        while history.changes.len() > self.history_limit {
            if let Some(dropped) = history.changes.pop_front() {
                history.oldest_watchable = history.oldest_watchable.max(dropped.resource_version);
            }
        }
        json
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
                let oldest = self.oldest_watchable(&filter.resource);
                if version < oldest {
                    return Err(ApiError::Gone {
                        requested: version,
                        oldest,
                    });
                }
                let retained = self
                    .history
                    .get(&filter.resource)
                    .map(|h| &h.changes)
                    .into_iter()
                    .flatten();
                for change in retained.filter(|c| c.resource_version > version) {
                    if let Some(event) = filter.event_for(change) {
                        // The receiver is still held here, so sending cannot fail.
                        let _ = sender.send((event, change.json.clone()));
                    }
                }
            }
            None => {
                let current =
                    self.range_stored(&filter.resource, filter.namespace.as_deref(), None);
                for (_, stored) in current {
                    if filter.selects(&stored.view) {
                        let _ = sender.send(("ADDED", stored.json.clone()));
                    }
                }
            }
        }
        let seen = from.unwrap_or(self.resource_version);
        self.watchers.push(Watcher {
            filter,
            sender,
            seen,
        });
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
    /// Open watches go on (the real server's watch cache outlives an etcd compaction).
    pub fn compact(&mut self) {
        self.history.clear();
        self.resource_version += 1;
        self.oldest_watchable = self.resource_version;
    }

    /// [`Store::compact`], and every open watch gets a 410 `Expired` ERROR event and ends, as
    /// when the real server's watch cache drops a watcher that fell behind: clients must relist.
    pub fn expire_history(&mut self) {
        self.compact();
        let oldest = self.oldest_watchable;
        for watcher in self.watchers.drain(..) {
            let gone = ApiError::Gone {
                requested: watcher.seen,
                oldest,
            };
            // A closed receiver needs no farewell.
            let status = serde_json::to_vec(&gone.status_body()).unwrap_or_default();
            let _ = watcher.sender.send(("ERROR", StoredJson::plain(status)));
        }
    }

    /// The whole store as JSON (for the state file).
    pub fn to_json(&self) -> Value {
        let objects: Vec<Value> = self
            .objects
            .iter()
            .map(|(k, v)| json!({"resource": k.resource, "object": &*self.parsed(k, v)}))
            .collect();
        json!({"resourceVersion": self.resource_version, "objects": objects})
    }

    /// Replaces the content with a state file's; history starts empty. Unless `continuous`, the
    /// counter jumps [`RESTART_GAP`] above the saved one, so versions clients saw before the
    /// restart are too old to watch from (410), as after a real API server's restart.
    pub fn load_json(&mut self, state: &Value, continuous: bool) -> Result<(), String> {
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
            let stored = Stored::new(Arc::new(object.clone()), version, &mut self.chunks);
            // Loaded versions are parsed again when read.
            *stored.parsed.borrow_mut() = None;
            objects.insert(key, stored);
        }
        self.objects = objects;
        self.parsed_recently.borrow_mut().clear();
        self.resource_version = if continuous {
            version
        } else {
            version.saturating_add(RESTART_GAP)
        };
        self.history.clear();
        self.oldest_watchable = self.resource_version;
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
        let (event, json) = receiver.try_recv().unwrap();
        let object = json.parse();
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

    fn put_other(store: &mut Store, name: &str) -> u64 {
        let version = store.next_resource_version();
        let object = json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": version.to_string()}});
        let key = ObjectKey {
            resource: "others".into(),
            ..key(name)
        };
        store.commit(key, ChangeKind::Added, Arc::new(object), None, version);
        version
    }

    #[test]
    fn history_is_bounded_per_resource_type() {
        let mut store = Store::new(2);
        let quiet = put(&mut store, "a");
        for i in 0..5 {
            put_other(&mut store, &format!("o{i}"));
        }
        // Five changes of another type do not push the quiet type's one change out.
        let mut receiver = store.watch(filter(), Some(quiet - 1)).unwrap();
        assert_eq!(receiver.try_recv().unwrap().0, "ADDED");
        let mut others = filter();
        others.resource = "others".into();
        assert!(matches!(
            store.watch(others.clone(), Some(quiet)),
            Err(ApiError::Gone { .. })
        ));
        assert!(
            store
                .watch(others, Some(store.resource_version() - 2))
                .is_ok()
        );
    }

    #[test]
    fn expired_history_sends_410_to_open_watches_and_closes_them() {
        let mut store = Store::new(100);
        let mut receiver = store.watch(filter(), None).unwrap();
        let seen = put(&mut store, "a");
        assert_eq!(receiver.try_recv().unwrap().0, "ADDED");
        store.expire_history();
        let (event, json) = receiver.try_recv().unwrap();
        let status = json.parse();
        assert_eq!(event, "ERROR");
        assert_eq!(status["code"], 410);
        assert_eq!(status["reason"], "Expired");
        assert_eq!(
            status["message"],
            format!(
                "too old resource version: {seen} ({})",
                store.resource_version()
            )
        );
        assert!(matches!(
            receiver.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
        assert!(matches!(
            store.watch(filter(), Some(seen)),
            Err(ApiError::Gone { .. })
        ));
    }

    #[test]
    fn a_restored_store_jumps_versions_unless_continuous() {
        let mut store = Store::new(100);
        let saved_version = put(&mut store, "a");
        let saved = store.to_json();
        let mut restarted = Store::new(100);
        restarted.load_json(&saved, false).unwrap();
        assert_eq!(restarted.resource_version(), saved_version + RESTART_GAP);
        assert!(matches!(
            restarted.watch(filter(), Some(saved_version)),
            Err(ApiError::Gone { .. })
        ));
        let mut continuous = Store::new(100);
        continuous.load_json(&saved, true).unwrap();
        assert_eq!(continuous.resource_version(), saved_version);
        assert!(continuous.watch(filter(), Some(saved_version)).is_ok());
    }

    #[test]
    fn a_version_is_serialised_once_for_the_store_and_every_watcher() {
        let mut store = Store::new(100);
        let mut watchers: Vec<_> = (0..3)
            .map(|_| store.watch(filter(), None).unwrap())
            .collect();
        put(&mut store, "a");
        let stored = store.get_stored(&key("a")).unwrap().json.clone();
        for receiver in &mut watchers {
            let (_, sent) = receiver.try_recv().unwrap();
            assert!(sent.ptr_eq(&stored), "the same bytes, not a copy");
        }
        let mut late = store.watch(filter(), Some(1)).unwrap();
        assert!(late.try_recv().unwrap().1.ptr_eq(&stored));
    }

    #[test]
    fn the_history_does_not_keep_parsed_objects_alive() {
        let mut store = Store::new(100);
        let first = Arc::new(json!({"metadata": {"name": "a", "namespace": "ns",
            "resourceVersion": "2", "labels": {"x": "1"}}, "spec": {"big": "..."}}));
        store.commit(key("a"), ChangeKind::Added, Arc::clone(&first), None, 2);
        let second = json!({"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "3"}});
        store.commit(
            key("a"),
            ChangeKind::Modified,
            Arc::new(second),
            Some(Arc::clone(&first)),
            3,
        );
        assert_eq!(
            Arc::strong_count(&first),
            1,
            "an old version costs its JSON in the history, not its parsed tree"
        );
        // The history still answers a watch from before both, selectors included.
        let mut labelled = filter();
        labelled.labels = LabelSelector::parse("x=1").unwrap();
        let mut receiver = store.watch(labelled, Some(1)).unwrap();
        assert_eq!(receiver.try_recv().unwrap().0, "ADDED");
        let (event, json) = receiver.try_recv().unwrap();
        let object = json.parse();
        assert_eq!(
            (event, &object["metadata"]["resourceVersion"]),
            ("DELETED", &json!("3"))
        );
    }

    #[test]
    fn only_recently_used_versions_keep_their_parsed_tree() {
        let mut store = Store::new(10);
        let count = PARSED_RECENTLY + 100;
        for i in 0..count {
            put(&mut store, &format!("o{i:06}"));
        }
        let kept = |store: &Store| {
            store
                .range_stored("things", None, None)
                .filter(|(_, stored)| stored.parsed().is_some())
                .count()
        };
        assert_eq!(
            kept(&store),
            PARSED_RECENTLY,
            "memory follows the JSON of the objects, not their parsed trees"
        );
        let oldest = key("o000000");
        assert!(store.get_stored(&oldest).unwrap().parsed().is_none());
        let read = store.get(&oldest).unwrap();
        assert_eq!(
            read["metadata"]["name"], "o000000",
            "parsed back from its JSON"
        );
        assert!(
            store.get_stored(&oldest).unwrap().parsed().is_some(),
            "kept once read"
        );
        assert_eq!(kept(&store), PARSED_RECENTLY);
    }

    #[test]
    fn the_selection_view_reads_exactly_the_string_labels() {
        let view = SelectionView::of(&json!({"metadata": {"name": "n", "labels": {
            "ab": "c", "a": "bc", "number": 5, "empty": "", "é/ü": "ß"}}}));
        // Keys and values are stored one after the other: "ab"+"c" and "a"+"bc" must not mix.
        assert_eq!(view.label("a"), Some("bc"));
        assert_eq!(view.label("ab"), Some("c"));
        assert_eq!(view.label("abc"), None);
        assert_eq!(view.label("number"), None, "only string values are labels");
        assert_eq!(view.label("empty"), Some(""));
        assert_eq!(view.label("é/ü"), Some("ß"));
        assert_eq!((&*view.name, &*view.namespace), ("n", ""));
        let selects = |labels: &str, fields: &str| {
            view.selected_by(
                &LabelSelector::parse(labels).unwrap(),
                &FieldSelector::parse(fields, selectable_fields("Unlabelled")).unwrap(),
            )
        };
        assert!(selects("a=bc,!number,empty", "metadata.name=n"));
        assert!(!selects("a=b", ""));
        assert!(!selects("", "metadata.namespace=ns"));
        assert!(selects("", "metadata.namespace="));
        let unlabelled = SelectionView::of(&json!({"metadata": {"name": "n", "labels": "x"}}));
        assert_eq!(unlabelled.label("x"), None);
    }

    #[test]
    fn versions_keep_the_subtrees_they_share_once() {
        let mut store = Store::new(100);
        let object = |name: &str| {
            json!({"metadata": {"name": name, "namespace": "ns",
                "annotations": {"shared": "an annotation long enough to be kept apart from the object"}}})
        };
        for name in ["a", "b"] {
            let version = store.next_resource_version();
            store.commit(
                key(name),
                ChangeKind::Added,
                Arc::new(object(name)),
                None,
                version,
            );
        }
        let a = &store.get_stored(&key("a")).unwrap().json;
        let b = &store.get_stored(&key("b")).unwrap().json;
        let (Some(a_chunk), Some(b_chunk)) = (a.chunks().next(), b.chunks().next()) else {
            panic!("the annotations are a chunk of each");
        };
        assert!(Arc::ptr_eq(a_chunk, b_chunk), "kept once");
        assert_eq!(a.parse(), object("a"));
        assert_eq!(a.to_vec(), serde_json::to_vec(&object("a")).unwrap());
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

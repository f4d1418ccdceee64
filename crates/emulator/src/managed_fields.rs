//! Field ownership for server-side apply: leaf field paths per field manager, stored in
//! `metadata.managedFields` as FieldsV1. Maps are merged key by key; lists are atomic.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// A path of map keys from the object root, e.g. `["spec", "replicas"]`.
pub type FieldPath = Vec<String>;
/// Leaf paths; no element is a prefix of another when built from one object.
pub type FieldSet = BTreeSet<FieldPath>;

/// Which part of an object a request may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything (types without a status subresource).
    Whole,
    /// Everything except `status` (main endpoint of a type with a status subresource).
    MainOnly,
    /// Only `status` (the `/status` subresource).
    StatusOnly,
}

impl Scope {
    pub fn includes(self, path: &[String]) -> bool {
        let is_status = path.first().is_some_and(|p| p == "status");
        match self {
            Self::Whole => true,
            Self::MainOnly => !is_status,
            Self::StatusOnly => is_status,
        }
    }

    pub fn subresource(self) -> Option<&'static str> {
        (self == Self::StatusOnly).then_some("status")
    }
}

/// Fields the server owns; nobody manages them.
fn is_server_field(path: &[String]) -> bool {
    match path {
        [top] => top == "apiVersion" || top == "kind",
        [meta, field, ..] if meta == "metadata" => matches!(
            field.as_str(),
            "name"
                | "namespace"
                | "uid"
                | "resourceVersion"
                | "generation"
                | "creationTimestamp"
                | "managedFields"
                | "deletionTimestamp"
                | "deletionGracePeriodSeconds"
                | "selfLink"
                | "generateName"
        ),
        _ => false,
    }
}

/// Leaf paths of `value` inside `scope`.
pub fn leaf_paths(value: &Value, scope: Scope) -> FieldSet {
    let mut out = FieldSet::new();
    collect_leaves(value, &mut Vec::new(), &mut out);
    out.retain(|p| scope.includes(p) && !is_server_field(p));
    out
}

/// Adds every leaf path under `node` (at `prefix`) to `out`. An empty map owns nothing; claiming
/// it would clash with every field inside it.
fn collect_leaves(node: &Value, prefix: &mut FieldPath, out: &mut FieldSet) {
    match node {
        Value::Object(map) => {
            for (key, child) in map {
                prefix.push(key.clone());
                collect_leaves(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {
            if !prefix.is_empty() {
                out.insert(prefix.clone());
            }
        }
    }
}

pub fn get_path<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(value, |node, key| node.get(key))
}

pub fn set_path(value: &mut Value, path: &[String], leaf: Value) {
    let mut node = value;
    for key in path {
        if !node.is_object() {
            *node = Value::Object(Map::new());
        }
        let Value::Object(map) = node else { return };
        node = map.entry(key.clone()).or_insert(Value::Null);
    }
    *node = leaf;
}

/// Removes a field, then parent maps it leaves empty (but never top-level fields).
pub fn remove_path(value: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    if let Some(Value::Object(map)) = parents
        .iter()
        .try_fold(&mut *value, |node, key| node.get_mut(key))
    {
        map.remove(last);
    }
    for depth in (2..=parents.len()).rev() {
        let parent = &path[..depth];
        let empty =
            get_path(value, parent).is_some_and(|v| v.as_object().is_some_and(Map::is_empty));
        if empty {
            remove_path_once(value, parent);
        }
    }
}

fn remove_path_once(value: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    if let Some(Value::Object(map)) = parents
        .iter()
        .try_fold(&mut *value, |node, key| node.get_mut(key))
    {
        map.remove(last);
    }
}

pub fn overlaps(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// `.spec.replicas` style rendering used in conflict messages.
pub fn render_path(path: &[String]) -> String {
    path.iter().map(|p| format!(".{p}")).collect()
}

pub fn to_fields_v1(fields: &FieldSet) -> Value {
    let mut root = Map::new();
    let mut key = String::new();
    for path in fields {
        // Descend, creating the `f:` maps that are missing; existing ones (shared prefixes) stay.
        let mut node = &mut root;
        for name in path {
            key.clear();
            key.push_str("f:");
            key.push_str(name);
            if !node.contains_key(key.as_str()) {
                node.insert(key.clone(), Value::Object(Map::new()));
            }
            let Some(Value::Object(child)) = node.get_mut(key.as_str()) else {
                break;
            };
            node = child;
        }
    }
    Value::Object(root)
}

/// Parses FieldsV1; list element keys (`k:`, `v:`, `i:`) make the list one atomic leaf.
pub fn from_fields_v1(value: &Value) -> FieldSet {
    fn walk(node: &Value, prefix: &mut FieldPath, out: &mut FieldSet) {
        let mut has_children = false;
        if let Some(map) = node.as_object() {
            for (key, child) in map {
                if key == "." {
                    continue;
                }
                has_children = true;
                if let Some(name) = key.strip_prefix("f:") {
                    prefix.push(name.to_string());
                    walk(child, prefix, out);
                    prefix.pop();
                } else if !prefix.is_empty() {
                    out.insert(prefix.clone());
                }
            }
        }
        if !has_children && !prefix.is_empty() {
            out.insert(prefix.clone());
        }
    }
    let mut out = FieldSet::new();
    walk(value, &mut Vec::new(), &mut out);
    out
}

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedEntry {
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    pub subresource: Option<String>,
    pub api_version: String,
    pub time: String,
    pub fields: FieldSet,
    /// Where the entry was read from (index in the old object's `managedFields`) and how many
    /// fields it had then. Writers only ever drop fields of other managers' entries, so an entry
    /// with as many fields as it was read with is unchanged and is written back verbatim instead
    /// of being rendered again. Cleared whenever the entry is edited otherwise.
    pub source: Option<(usize, usize)>,
}

impl ManagedEntry {
    fn same_slot(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }
}

pub fn read_entries(object: &Value) -> Vec<ManagedEntry> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(index, e)| {
            let fields = from_fields_v1(&e["fieldsV1"]);
            ManagedEntry {
                manager: e["manager"].as_str().unwrap_or_default().to_string(),
                operation: e["operation"].as_str().unwrap_or("Update").to_string(),
                subresource: e["subresource"].as_str().map(str::to_string),
                api_version: e["apiVersion"].as_str().unwrap_or_default().to_string(),
                time: e["time"].as_str().unwrap_or_default().to_string(),
                source: Some((index, fields.len())),
                fields,
            }
        })
        .collect()
}

/// The entry exactly as `read_entries` would render it, when it is unchanged since it was read
/// from `read_from` and that rendering is already canonical.
fn unchanged_source<'a>(entry: &ManagedEntry, read_from: &'a Value) -> Option<&'a Value> {
    let (index, count) = entry.source?;
    if count != entry.fields.len() {
        return None;
    }
    let raw = read_from["metadata"]["managedFields"].get(index)?;
    // Objects written by this server carry canonical entries; anything else is rendered again.
    let canonical = raw["manager"].as_str() == Some(entry.manager.as_str())
        && raw["operation"].as_str() == Some(entry.operation.as_str())
        && raw["apiVersion"].as_str() == Some(entry.api_version.as_str())
        && raw["time"].as_str() == Some(entry.time.as_str())
        && raw["subresource"].as_str() == entry.subresource.as_deref()
        && raw["fieldsType"].as_str() == Some("FieldsV1")
        && raw
            .as_object()
            .is_some_and(|m| m.len() == 6 + usize::from(entry.subresource.is_some()))
        && fields_v1_is_canonical(&raw["fieldsV1"]);
    canonical.then_some(raw)
}

/// Whether FieldsV1 is what `to_fields_v1` renders: nested maps of `f:` keys only.
fn fields_v1_is_canonical(value: &Value) -> bool {
    value.as_object().is_some_and(|map| {
        map.iter()
            .all(|(k, v)| k.starts_with("f:") && fields_v1_is_canonical(v))
    })
}

pub fn write_entries(object: &mut Value, entries: &[ManagedEntry]) {
    write_entries_reusing(object, entries, &Value::Null);
}

/// [`write_entries`], copying unchanged entries verbatim from `read_from`, the object the
/// entries were read from.
pub fn write_entries_reusing(object: &mut Value, entries: &[ManagedEntry], read_from: &Value) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| match unchanged_source(e, read_from) {
            Some(raw) => raw.clone(),
            None => rendered_entry(e),
        })
        .collect();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

fn rendered_entry(e: &ManagedEntry) -> Value {
    let mut entry = json!({
        "manager": e.manager, "operation": e.operation, "apiVersion": e.api_version,
        "time": e.time, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(&e.fields),
    });
    if let Some(sub) = &e.subresource {
        entry["subresource"] = json!(sub);
    }
    entry
}

/// Who is writing, and how.
#[derive(Debug, Clone)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub scope: Scope,
    pub api_version: String,
    pub now: String,
}

/// A field another manager owns with a different value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldConflict {
    pub manager: String,
    pub api_version: String,
    pub path: FieldPath,
}

/// Server-side apply of `applied` onto `live` (an object skeleton when creating).
/// Returns the new object with managedFields updated, or the conflicts.
pub fn apply(
    live: &Value,
    applied: &Value,
    writer: &Writer<'_>,
    force: bool,
) -> Result<Value, Vec<FieldConflict>> {
    let new_fields = leaf_paths(applied, writer.scope);
    let mut entries = read_entries(live);
    let subresource = writer.scope.subresource();
    let is_mine = |e: &ManagedEntry| e.same_slot(writer.manager, "Apply", subresource);

    let mut conflicts = Vec::new();
    for entry in entries.iter().filter(|e| e.manager != writer.manager) {
        for path in &new_fields {
            let clash = entry.fields.iter().any(|owned| overlaps(owned, path));
            if clash && get_path(live, path) != get_path(applied, path) {
                conflicts.push(FieldConflict {
                    manager: entry.manager.clone(),
                    api_version: entry.api_version.clone(),
                    path: path.clone(),
                });
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    let conflicting: Vec<FieldPath> = conflicts.into_iter().map(|c| c.path).collect();
    for entry in entries.iter_mut().filter(|e| e.manager != writer.manager) {
        entry
            .fields
            .retain(|owned| !conflicting.iter().any(|p| overlaps(owned, p)));
    }

    let old_fields = entries
        .iter()
        .find(|e| is_mine(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut result = live.clone();
    for dropped in old_fields.difference(&new_fields) {
        let co_owned = entries
            .iter()
            .filter(|e| !is_mine(e))
            .any(|e| e.fields.iter().any(|owned| overlaps(owned, dropped)));
        if !co_owned {
            remove_path(&mut result, dropped);
        }
    }
    for path in &new_fields {
        if let Some(value) = get_path(applied, path) {
            set_path(&mut result, path, value.clone());
        }
    }
    keep_empty_maps(applied, &mut Vec::new(), writer.scope, &mut result);
    match entries.iter_mut().find(|e| is_mine(e)) {
        Some(entry) => {
            entry.fields = new_fields;
            entry.time = writer.now.clone();
            entry.api_version = writer.api_version.clone();
            entry.source = None;
        }
        None => entries.push(ManagedEntry {
            manager: writer.manager.to_string(),
            operation: "Apply".into(),
            subresource: subresource.map(str::to_string),
            api_version: writer.api_version.clone(),
            time: writer.now.clone(),
            fields: new_fields,
            source: None,
        }),
    }
    write_entries_reusing(&mut result, &entries, live);
    Ok(result)
}

/// An empty map in an apply body owns nothing but, as with the real server, is still part of the
/// result (`spec: {}` satisfies a schema that requires `spec`).
fn keep_empty_maps(node: &Value, prefix: &mut FieldPath, scope: Scope, result: &mut Value) {
    let Value::Object(map) = node else { return };
    if map.is_empty() {
        if !prefix.is_empty() && scope.includes(prefix) && get_path(result, prefix).is_none() {
            set_path(result, prefix, Value::Object(Map::new()));
        }
        return;
    }
    for (key, child) in map {
        prefix.push(key.clone());
        keep_empty_maps(child, prefix, scope, result);
        prefix.pop();
    }
}

/// The common write of a controller that owns what it changes (a status writer setting its own
/// status again, or for the first time): when no other entry owns anything overlapping a
/// changed leaf, and every changed leaf is one the writer's `Update` entry owns (or it has no
/// entry yet), ownership moves nowhere: only the entry's time moves (or its entry is added).
/// Sets `new`'s managedFields to exactly what the general path renders and returns true then,
/// without parsing or rendering the other entries' FieldsV1 (most of a status write's cost at
/// fleet scale); returns false, changing nothing, in every other case.
fn restamp_own_entry(
    old: &Value,
    new: &mut Value,
    changed: &FieldSet,
    writer: &Writer<'_>,
) -> bool {
    let Some(entries) = old["metadata"]["managedFields"].as_array() else {
        return false;
    };
    let subresource = writer.scope.subresource();
    let mut own = None;
    for (index, entry) in entries.iter().enumerate() {
        // Entries are written back verbatim only when canonical and owning something.
        let Some(fields) = canonical_fields(entry) else {
            return false;
        };
        let is_own = entry["manager"].as_str() == Some(writer.manager)
            && entry["operation"].as_str() == Some("Update")
            && entry["subresource"].as_str() == subresource;
        if is_own {
            let owns_exactly = changed.iter().all(|path| owned_leaf(fields, path));
            if own.is_some() || !owns_exactly || !in_render_order(entry) {
                return false;
            }
            own = Some(index);
        } else if changed.iter().any(|path| owns_overlapping(fields, path)) {
            return false;
        }
    }
    let sent_back = new["metadata"].get("managedFields") == Some(&old["metadata"]["managedFields"]);
    if !sent_back {
        new["metadata"]["managedFields"] = old["metadata"]["managedFields"].clone();
    }
    let Some(list) = new["metadata"]["managedFields"].as_array_mut() else {
        return false;
    };
    match own {
        Some(own) => list[own]["time"] = Value::from(writer.now.as_str()),
        // The writer's first write of these fields: its entry comes last, as the general path
        // appends it.
        None => list.push(rendered_entry(&ManagedEntry {
            manager: writer.manager.to_string(),
            operation: "Update".into(),
            subresource: subresource.map(str::to_string),
            api_version: writer.api_version.clone(),
            time: writer.now.clone(),
            fields: changed.clone(),
            source: None,
        })),
    }
    true
}

/// An entry's FieldsV1 when the entry is canonical (what `write_entries` renders: the six or
/// seven keys, FieldsV1 of `f:` keys only) and owns at least one field.
fn canonical_fields(entry: &Value) -> Option<&Value> {
    let map = entry.as_object()?;
    let has_subresource = map.contains_key("subresource");
    let strings = ["manager", "operation", "apiVersion", "time"]
        .iter()
        .chain(has_subresource.then_some(&"subresource"))
        .all(|key| map.get(*key).is_some_and(Value::is_string));
    let fields = map.get("fieldsV1")?;
    let canonical = strings
        && map.len() == 6 + usize::from(has_subresource)
        && map.get("fieldsType").and_then(Value::as_str) == Some("FieldsV1")
        && fields_v1_is_canonical(fields)
        && fields.as_object().is_some_and(|m| !m.is_empty());
    canonical.then_some(fields)
}

/// Whether the entry's keys, and its FieldsV1's at every level, are in the order
/// `write_entries` renders them (FieldsV1 comes from a sorted set of paths).
fn in_render_order(entry: &Value) -> bool {
    fn sorted(fields: &Value) -> bool {
        fields.as_object().is_some_and(|map| {
            map.keys().zip(map.keys().skip(1)).all(|(a, b)| a < b) && map.values().all(sorted)
        })
    }
    const ORDER: [&str; 7] = [
        "manager",
        "operation",
        "apiVersion",
        "time",
        "fieldsType",
        "fieldsV1",
        "subresource",
    ];
    entry.as_object().is_some_and(|map| {
        map.keys()
            .map(String::as_str)
            .eq(ORDER.iter().copied().take(map.len()))
    }) && sorted(&entry["fieldsV1"])
}

/// The FieldsV1 node of `path` in canonical FieldsV1 (where owned leaves are empty maps).
fn fields_node<'a>(fields: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(fields, |node, name| node.get(format!("f:{name}").as_str()))
}

/// Whether canonical FieldsV1 owns a field overlapping `path`: `path` itself, a field inside
/// it, or a field it lies in (an owned leaf on the way down).
fn owns_overlapping(fields: &Value, path: &[String]) -> bool {
    let mut node = fields;
    for (depth, name) in path.iter().enumerate() {
        let is_owned_leaf = depth > 0 && node.as_object().is_some_and(Map::is_empty);
        if is_owned_leaf {
            return true;
        }
        match node.get(format!("f:{name}").as_str()) {
            Some(child) => node = child,
            None => return false,
        }
    }
    true
}

/// Whether canonical FieldsV1 owns exactly the leaf `path` and nothing inside it.
fn owned_leaf(fields: &Value, path: &[String]) -> bool {
    !path.is_empty()
        && fields_node(fields, path).is_some_and(|node| node.as_object().is_some_and(Map::is_empty))
}

/// Sets `new`'s managedFields to `old`'s (what rewriting unchanged entries produces; entries
/// without fields are dropped there, as `write_entries` does).
fn copy_managed_fields(old: &Value, new: &mut Value) {
    // FieldsV1 owns something exactly when its top map has a key other than ".".
    let owns_fields = |entry: &&Value| {
        entry["fieldsV1"]
            .as_object()
            .is_some_and(|map| map.keys().any(|k| k != "."))
    };
    let kept: Vec<Value> = old["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(owns_fields)
        .cloned()
        .collect();
    if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        if kept.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(kept));
        }
    }
}

/// The leaves a write touched within a scope: `changed` are leaves of the new object whose value
/// differs from the old object's at that path; `removed` are leaves of the old object the new
/// object has no value at. Equal to comparing every leaf of both objects path by path, found in
/// one walk over both (skipping equal subtrees) instead.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LeafChanges {
    pub changed: FieldSet,
    pub removed: FieldSet,
}

pub fn leaf_changes(old: &Value, new: &Value, scope: Scope) -> LeafChanges {
    /// Walks `new` where it differs from `old`. Each child is compared once, by its parent,
    /// before the walk goes down into it (comparing each node again on the way down compared
    /// a whole object twice per write).
    fn walk(old: Option<&Value>, new: &Value, prefix: &mut FieldPath, out: &mut LeafChanges) {
        match new {
            Value::Object(map) => {
                for (key, child) in map {
                    let old_child = old.and_then(|o| o.get(key));
                    if old_child == Some(child) {
                        // Equal subtrees: no leaf changed and every old leaf still has a value.
                        continue;
                    }
                    prefix.push(key.clone());
                    walk(old_child, child, prefix, out);
                    prefix.pop();
                }
                if let Some(Value::Object(old_map)) = old {
                    for (key, child) in old_map {
                        if !map.contains_key(key) {
                            prefix.push(key.clone());
                            collect_leaves(child, prefix, &mut out.removed);
                            prefix.pop();
                        }
                    }
                }
            }
            _ if old == Some(new) => {}
            _ => {
                if !prefix.is_empty() {
                    out.changed.insert(prefix.clone());
                }
                // An old map here loses all its leaves: the new leaf has no fields below it.
                if let Some(old @ Value::Object(_)) = old {
                    collect_leaves(old, prefix, &mut out.removed);
                }
            }
        }
    }
    let mut out = LeafChanges::default();
    walk(Some(old), new, &mut Vec::new(), &mut out);
    let keep = |p: &FieldPath| scope.includes(p) && !is_server_field(p);
    out.changed.retain(keep);
    out.removed.retain(keep);
    out
}

/// Records a non-apply write (create, update, patch): the fields that changed between `old` and
/// `new` now belong to the writer's `Update` entry and to nobody else.
pub fn record_update(old: &Value, new: &mut Value, writer: &Writer<'_>) {
    let LeafChanges { changed, removed } = leaf_changes(old, new, writer.scope);
    if changed.is_empty() && removed.is_empty() {
        // Nobody's fields move: the entries stay exactly as they are, without a parse/render trip.
        copy_managed_fields(old, new);
        return;
    }
    if removed.is_empty() && restamp_own_entry(old, new, &changed, writer) {
        return;
    }
    move_ownership(old, new, writer, changed, &removed);
}

/// [`record_update`]'s general case: reads every entry, takes the touched fields from their
/// owners and renders the entries again.
fn move_ownership(
    old: &Value,
    new: &mut Value,
    writer: &Writer<'_>,
    changed: FieldSet,
    removed: &FieldSet,
) {
    let mut entries = read_entries(old);
    let subresource = writer.scope.subresource();
    for entry in entries.iter_mut() {
        entry.fields.retain(|owned| {
            let touched = changed.iter().any(|p| overlaps(owned, p))
                || removed.iter().any(|p| owned.starts_with(p));
            // Fields inside a still-present map only lose the exact changed leaves.
            !touched
        });
    }
    match entries
        .iter_mut()
        .find(|e| e.same_slot(writer.manager, "Update", subresource))
    {
        Some(entry) => {
            entry.fields.extend(changed);
            entry.time = writer.now.clone();
            entry.source = None;
        }
        None => entries.push(ManagedEntry {
            manager: writer.manager.to_string(),
            operation: "Update".into(),
            subresource: subresource.map(str::to_string),
            api_version: writer.api_version.clone(),
            time: writer.now.clone(),
            fields: changed,
            source: None,
        }),
    }
    write_entries_reusing(new, &entries, old);
}

/// The real server's wording for apply conflicts.
pub fn conflict_message(conflicts: &[FieldConflict]) -> String {
    let count = conflicts.len();
    let plural = if count == 1 { "" } else { "s" };
    let mut managers: Vec<(&str, &str)> = Vec::new();
    for c in conflicts {
        if !managers.contains(&(c.manager.as_str(), c.api_version.as_str())) {
            managers.push((&c.manager, &c.api_version));
        }
    }
    let sections: Vec<String> = managers
        .iter()
        .map(|(manager, api_version)| {
            let paths: Vec<String> = conflicts
                .iter()
                .filter(|c| c.manager == *manager)
                .map(|c| render_path(&c.path))
                .collect();
            if count == 1 {
                format!(
                    "conflict with \"{manager}\" using {api_version}: {}",
                    paths.join("")
                )
            } else {
                format!(
                    "conflicts with \"{manager}\" using {api_version}:\n- {}",
                    paths.join("\n- ")
                )
            }
        })
        .collect();
    format!(
        "Apply failed with {count} conflict{plural}: {}",
        sections.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer(manager: &str) -> Writer<'_> {
        Writer {
            manager,
            scope: Scope::MainOnly,
            api_version: "v1".into(),
            now: "2026-01-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn fields_v1_round_trip() {
        let object = json!({"metadata": {"name": "x", "labels": {"a": "1"}}, "spec": {"l": [1], "m": {"k": "v"}}});
        let fields = leaf_paths(&object, Scope::Whole);
        assert_eq!(from_fields_v1(&to_fields_v1(&fields)), fields);
        assert!(!fields.contains(&vec!["metadata".to_string(), "name".to_string()]));
    }

    #[test]
    fn apply_conflicts_then_force_moves_ownership() {
        let base = json!({"metadata": {"name": "x"}});
        let first = apply(
            &base,
            &json!({"spec": {"a": 1, "b": 1}}),
            &writer("one"),
            false,
        )
        .unwrap();
        let conflict =
            apply(&first, &json!({"spec": {"a": 2}}), &writer("two"), false).unwrap_err();
        assert_eq!(
            conflict_message(&conflict),
            "Apply failed with 1 conflict: conflict with \"one\" using v1: .spec.a"
        );
        // Same value is shared ownership, not a conflict.
        let shared = apply(&first, &json!({"spec": {"a": 1}}), &writer("two"), false).unwrap();
        assert_eq!(shared["spec"], json!({"a": 1, "b": 1}));
        let forced = apply(&first, &json!({"spec": {"a": 2}}), &writer("two"), true).unwrap();
        let one = read_entries(&forced)
            .into_iter()
            .find(|e| e.manager == "one")
            .unwrap();
        assert_eq!(
            one.fields,
            FieldSet::from([vec!["spec".to_string(), "b".to_string()]])
        );
        // "one" stops sending b: removed, since nobody else owns it.
        let after = apply(&forced, &json!({"spec": {}}), &writer("one"), false).unwrap();
        assert_eq!(after["spec"], json!({"a": 2}));
    }

    #[test]
    fn update_takes_changed_fields() {
        let base = json!({"metadata": {"name": "x"}});
        let applied = apply(&base, &json!({"spec": {"a": 1}}), &writer("one"), false).unwrap();
        let mut updated = applied.clone();
        updated["spec"]["a"] = json!(5);
        record_update(&applied, &mut updated, &writer("editor"));
        let entries = read_entries(&updated);
        assert!(entries.iter().all(|e| e.manager != "one"));
        assert!(
            entries
                .iter()
                .any(|e| e.manager == "editor" && e.operation == "Update")
        );
    }

    /// The definition `leaf_changes` must agree with: every leaf of both objects, path by path.
    fn leaf_changes_by_definition(old: &Value, new: &Value, scope: Scope) -> LeafChanges {
        let changed = leaf_paths(new, scope)
            .into_iter()
            .filter(|p| get_path(old, p) != get_path(new, p))
            .collect();
        let removed = leaf_paths(old, scope)
            .into_iter()
            .filter(|p| get_path(new, p).is_none())
            .collect();
        LeafChanges { changed, removed }
    }

    #[test]
    fn leaf_changes_match_the_definition() {
        let old = json!({"metadata": {"name": "x", "labels": {"a": "1", "b": "2"}, "resourceVersion": "3"},
            "spec": {"keep": {"x": 1}, "gone": {"deep": {"y": 2}}, "flat": {"z": 1}, "list": [1, 2], "leaf": 1},
            "status": {"phase": "A", "conditions": [{"type": "Ready"}]}});
        let new = json!({"metadata": {"name": "x", "labels": {"a": "1", "c": "3"}, "resourceVersion": "4"},
            "spec": {"keep": {"x": 1}, "flat": 7, "list": [1], "leaf": {"now": "map"}, "empty": {}},
            "status": {"phase": "B"}});
        for scope in [Scope::Whole, Scope::MainOnly, Scope::StatusOnly] {
            for (a, b) in [(&old, &new), (&new, &old), (&old, &old)] {
                let fast = leaf_changes(a, b, scope);
                assert_eq!(fast, leaf_changes_by_definition(a, b, scope), "{scope:?}");
            }
        }
        let changes = leaf_changes(&old, &new, Scope::MainOnly);
        assert!(changes.removed.contains(&vec![
            "spec".to_string(),
            "flat".to_string(),
            "z".to_string()
        ]));
        assert!(
            changes
                .changed
                .contains(&vec!["spec".to_string(), "flat".to_string()])
        );
    }

    #[test]
    fn an_update_that_moves_no_field_keeps_the_entries_verbatim() {
        let base = json!({"metadata": {"name": "x"}});
        let applied = apply(&base, &json!({"spec": {"a": 1}}), &writer("one"), false).unwrap();
        let mut same = applied.clone();
        same["metadata"]["managedFields"] = json!([]);
        record_update(&applied, &mut same, &writer("editor"));
        assert_eq!(
            same["metadata"]["managedFields"],
            applied["metadata"]["managedFields"]
        );
        let mut rendered = applied.clone();
        write_entries(&mut rendered, &read_entries(&applied));
        assert_eq!(same, rendered);
    }

    fn status_writer(manager: &str) -> Writer<'_> {
        Writer {
            scope: Scope::StatusOnly,
            now: "2026-01-02T00:00:00Z".into(),
            ..writer(manager)
        }
    }

    /// `record_update` as it is without its shortcut: every entry read and rendered again.
    fn recorded_in_general(old: &Value, new: &Value, writer: &Writer<'_>) -> Value {
        let mut result = new.clone();
        let LeafChanges { changed, removed } = leaf_changes(old, new, writer.scope);
        move_ownership(old, &mut result, writer, changed, &removed);
        result
    }

    /// A summary as the stand-in keeps it: the main entry, and its own status entry.
    fn with_status(status: Value) -> Value {
        let base = json!({"metadata": {"name": "x"}});
        let mut object = apply(
            &base,
            &json!({"spec": {"a": 1}}),
            &writer("tollgate"),
            false,
        )
        .unwrap();
        let mut written = object.clone();
        written["status"] = status;
        record_update(&object, &mut written, &status_writer("addon-controller"));
        object = written;
        object
    }

    #[test]
    fn a_writer_restamping_only_its_own_fields_gets_what_the_general_path_renders() {
        let old = with_status(json!({"phase": "Provisioning", "list": [1]}));
        // Cases the shortcut must decline, each against the general path.
        let mut other_owner = old.clone();
        other_owner["status"]["phase"] = json!("Failed");
        let mut gone = old.clone();
        gone["status"].as_object_mut().unwrap().remove("list");
        let mut new_leaf = old.clone();
        new_leaf["status"]["extra"] = json!(true);
        let mut leaf_to_map = old.clone();
        leaf_to_map["status"]["phase"] = json!({"inner": 1});
        let mut foreign_managed_fields = old.clone();
        foreign_managed_fields["metadata"]["managedFields"] = json!([]);
        let mut unsorted = old.clone();
        let own = &mut unsorted["metadata"]["managedFields"][1];
        own["fieldsV1"]["f:status"] = json!({"f:phase": {}, "f:list": {}});
        let mut unsorted_new = unsorted.clone();
        unsorted_new["status"]["phase"] = json!("Provisioned");
        let mut non_canonical = old.clone();
        non_canonical["metadata"]["managedFields"][1]["fieldsV1"]["f:status"]["."] = json!({});
        let mut non_canonical_new = non_canonical.clone();
        non_canonical_new["status"]["phase"] = json!("Provisioned");
        let mut first_status = old.clone();
        first_status["metadata"]["managedFields"]
            .as_array_mut()
            .unwrap()
            .pop();
        let mut first_status_new = first_status.clone();
        first_status_new["status"]["phase"] = json!("Provisioned");
        let mut takes_spec = old.clone();
        takes_spec["spec"]["a"] = json!(2);
        let mut provisioned = old.clone();
        provisioned["status"]["phase"] = json!("Provisioned");
        provisioned["status"]["list"] = json!([1, 2]);
        let cases = [
            (&old, &other_owner, "another manager", false),
            (&old, &gone, "addon-controller", false),
            (&old, &new_leaf, "addon-controller", false),
            (&old, &leaf_to_map, "addon-controller", false),
            (&unsorted, &unsorted_new, "addon-controller", false),
            (
                &non_canonical,
                &non_canonical_new,
                "addon-controller",
                false,
            ),
            (&old, &foreign_managed_fields, "addon-controller", true),
            (&first_status, &first_status_new, "addon-controller", true),
            (&old, &provisioned, "addon-controller", true),
        ];
        let main_cases = [(&old, &takes_spec, "editor", false)];
        let cases = cases.into_iter().map(|case| (case, Scope::StatusOnly));
        let main_cases = main_cases.into_iter().map(|case| (case, Scope::MainOnly));
        for ((before, after, manager, shortcut), scope) in cases.chain(main_cases) {
            let writer = Writer {
                scope,
                ..status_writer(manager)
            };
            let changes = leaf_changes(before, after, writer.scope);
            let mut restamped = after.clone();
            let taken = changes.removed.is_empty()
                && restamp_own_entry(before, &mut restamped, &changes.changed, &writer);
            assert_eq!(taken, shortcut, "{manager}: {after}");
            let mut recorded = after.clone();
            record_update(before, &mut recorded, &writer);
            assert_eq!(
                serde_json::to_string(&recorded).unwrap(),
                serde_json::to_string(&recorded_in_general(before, after, &writer)).unwrap(),
                "{manager}: {after}"
            );
        }
        // The shortcut's own case: one entry per manager and subresource, its time moved.
        let mut recorded = provisioned.clone();
        record_update(&old, &mut recorded, &status_writer("addon-controller"));
        let entries = read_entries(&recorded);
        let slots: Vec<(&str, Option<&str>, &str)> = entries
            .iter()
            .map(|e| {
                (
                    e.manager.as_str(),
                    e.subresource.as_deref(),
                    e.time.as_str(),
                )
            })
            .collect();
        assert_eq!(
            slots,
            [
                ("tollgate", None, "2026-01-01T00:00:00Z"),
                ("addon-controller", Some("status"), "2026-01-02T00:00:00Z")
            ]
        );
    }

    #[test]
    fn reused_entries_equal_freshly_rendered_ones() {
        let base = json!({"metadata": {"name": "x"}});
        let one = apply(
            &base,
            &json!({"spec": {"a": 1, "b": {"c": 2}}}),
            &writer("one"),
            false,
        )
        .unwrap();
        let two = apply(&one, &json!({"spec": {"d": 1}}), &writer("two"), false).unwrap();
        let mut edited = two.clone();
        edited["spec"]["b"]["c"] = json!(3);
        record_update(&two, &mut edited, &writer("editor"));
        let forced = apply(&edited, &json!({"spec": {"a": 5}}), &writer("two"), true).unwrap();
        for object in [&one, &two, &edited, &forced] {
            let mut rendered = object.clone();
            let mut entries = read_entries(object);
            entries.iter_mut().for_each(|e| e.source = None);
            write_entries(&mut rendered, &entries);
            assert_eq!(&rendered, object);
        }
        let managers: Vec<String> = read_entries(&forced)
            .into_iter()
            .map(|e| e.manager)
            .collect();
        // "one" lost b.c to the editor and a to the forced apply.
        assert_eq!(managers, ["two", "editor"]);
    }
}

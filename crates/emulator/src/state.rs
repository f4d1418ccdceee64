//! The API server's state and the write paths every request (and the Sveltos stand-in) goes
//! through: create, replace, patch (merge, JSON, server-side apply), delete, get, list.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use chrono::{SecondsFormat, Utc};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::api_error::ApiError;
use crate::faults::Faults;
use crate::managed_fields::{self, Scope, Writer};
use crate::patch;
use crate::registry::{CRD_QUALIFIED_PLURAL, Registry, ResourceType};
use crate::schema_validation::SchemaAdmission;
use crate::selector::{FieldSelector, LabelSelector};
use crate::stand_in_inbox::{StandInChange, StandInInbox};
use crate::store::{ChangeKind, ObjectKey, Store};
use crate::stored_json::StoredJson;
use crate::write_log::{LoggedWrite, WriteLog};

/// The kind of a PATCH body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json`, and `application/strategic-merge-patch+json` treated alike.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/apply-patch+yaml`.
    Apply { force: bool },
}

/// Where a write goes.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub resource: &'a ResourceType,
    /// Empty for cluster-scoped types.
    pub namespace: &'a str,
    /// Main endpoint or `/status`.
    pub status: bool,
}

impl Target<'_> {
    fn scope(&self) -> Scope {
        if self.status {
            Scope::StatusOnly
        } else if self.resource.status_subresource {
            Scope::MainOnly
        } else {
            Scope::Whole
        }
    }

    pub fn key(&self, name: &str) -> ObjectKey {
        ObjectKey {
            resource: self.resource.qualified_plural(),
            namespace: if self.resource.namespaced {
                self.namespace.to_string()
            } else {
                String::new()
            },
            name: name.to_string(),
        }
    }

    fn not_found(&self, name: &str) -> ApiError {
        ApiError::NotFound {
            qualified_plural: self.resource.qualified_plural(),
            name: name.to_string(),
        }
    }
}

/// A LIST answer; the items are the stored versions themselves, with their JSON.
#[derive(Debug, Clone)]
pub struct ObjectList {
    pub kind: String,
    pub api_version: String,
    pub metadata: Value,
    /// The items' JSON, as serialised at their commit.
    pub items: Vec<StoredJson>,
}

impl ObjectList {
    /// The list as the API sends it: the items' JSON, serialised at commit, put together.
    pub fn to_bytes(&self) -> Vec<u8> {
        let items_length: usize = self.items.iter().map(|item| item.len() + 1).sum();
        let mut bytes = Vec::with_capacity(items_length + 256);
        // Writing strings and a Value into memory cannot fail.
        bytes.extend_from_slice(b"{\"kind\":");
        let _ = serde_json::to_writer(&mut bytes, &self.kind);
        bytes.extend_from_slice(b",\"apiVersion\":");
        let _ = serde_json::to_writer(&mut bytes, &self.api_version);
        bytes.extend_from_slice(b",\"metadata\":");
        let _ = serde_json::to_writer(&mut bytes, &self.metadata);
        bytes.extend_from_slice(b",\"items\":[");
        for (index, item) in self.items.iter().enumerate() {
            if index > 0 {
                bytes.push(b',');
            }
            item.write_to(&mut bytes);
        }
        bytes.extend_from_slice(b"]}");
        bytes
    }

    /// The items parsed (for the rare answers that rework them: tables, core/v1 Events).
    pub fn objects(&self) -> Vec<Value> {
        self.items.iter().map(StoredJson::parse).collect()
    }

    /// The list as one JSON value.
    pub fn to_json(&self) -> Value {
        json!({
            "kind": self.kind,
            "apiVersion": self.api_version,
            "metadata": self.metadata,
            "items": self.objects(),
        })
    }
}

/// List paging and filtering.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
}

/// Everything behind the API; one lock around it keeps every write atomic.
pub struct ApiState {
    pub registry: Registry,
    pub store: Store,
    pub write_log: WriteLog,
    pub faults: Faults,
    /// (verb, `plural.group` or path) → count.
    pub request_counts: BTreeMap<(String, String), u64>,
    rng: fastrand::Rng,
    /// Signalled after every committed change (the Sveltos stand-in and the state file wait on it).
    pub changed: Arc<Notify>,
    /// Changes of the kinds the Sveltos stand-in reads, for it to reconcile only what they concern.
    pub stand_in_inbox: StandInInbox,
    /// Custom resource schemas and the `fieldValidation` of the request being served.
    pub(crate) schema_admission: SchemaAdmission,
    /// The `User-Agent` of the request being served, for the write log (none outside requests).
    pub(crate) request_user_agent: Option<Arc<str>>,
}

pub fn now_rfc3339() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Whether two objects are equal apart from some top-level fields and some `metadata` fields.
/// Compares in place: copying both objects per write was most of a write's cost at fleet scale.
fn equal_apart_from(a: &Value, b: &Value, top: &[&str], metadata: &[&str]) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let kept = |map: &'_ serde_json::Map<String, Value>| {
        map.iter()
            .filter(|(k, _)| !top.contains(&k.as_str()))
            .count()
    };
    kept(a) == kept(b)
        && a.iter()
            .filter(|(k, _)| !top.contains(&k.as_str()))
            .all(|(k, v)| match b.get(k) {
                None => false,
                Some(w) if k == "metadata" && !metadata.is_empty() => {
                    equal_apart_from(v, w, metadata, &[])
                }
                Some(w) => v == w,
            })
}

/// Equal but for server-maintained bookkeeping: the write is a no-op.
fn same_content(old: &Value, new: &Value) -> bool {
    equal_apart_from(old, new, &[], &["managedFields", "resourceVersion"])
}

/// Equal in everything that bumps `metadata.generation`: all but metadata and status.
fn same_generation_content(old: &Value, new: &Value) -> bool {
    equal_apart_from(old, new, &["metadata", "status"], &[])
}

fn has_finalizers(object: &Value) -> bool {
    object["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty())
}

impl ApiState {
    /// Validates (and prunes) the object a write of a custom resource would store, against its
    /// CRD's schema (`schema_validation`).
    fn admit_custom_resource(
        &mut self,
        target: Target<'_>,
        object: &mut Value,
        verb: &str,
    ) -> Result<(), ApiError> {
        let resource = (target.resource, target.namespace);
        (self.schema_admission).admit(&self.store, resource, object, verb)
    }

    pub fn new(
        registry: Registry,
        history_limit: usize,
        write_log_capacity: Option<usize>,
        seed: u64,
    ) -> Self {
        Self {
            registry,
            store: Store::new(history_limit),
            write_log: WriteLog::new(write_log_capacity),
            faults: Faults::new(seed),
            request_counts: BTreeMap::new(),
            rng: fastrand::Rng::with_seed(seed ^ 0x5eed),
            changed: Arc::new(Notify::new()),
            // A store loaded from a state file may hold work: the stand-in starts with a full pass.
            stand_in_inbox: StandInInbox {
                everything: true,
                changes: Vec::new(),
                ..StandInInbox::default()
            },
            schema_admission: SchemaAdmission::default(),
            request_user_agent: None,
        }
    }

    pub fn count_request(&mut self, verb: &str, resource: &str) {
        *self
            .request_counts
            .entry((verb.to_string(), resource.to_string()))
            .or_insert(0) += 1;
    }

    fn random_suffix(&mut self, length: usize) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..length)
            .map(|_| ALPHABET[self.rng.usize(..ALPHABET.len())] as char)
            .collect()
    }

    fn new_uid(&mut self) -> String {
        let a = self.rng.u64(..);
        let b = self.rng.u64(..);
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            (b >> 48) & 0xfff,
            b & 0xffff_ffff_ffff
        )
    }

    /// The stored version itself, shared: committed versions are never changed in place.
    pub fn get(&self, target: Target<'_>, name: &str) -> Result<Arc<Value>, ApiError> {
        self.store
            .get(&target.key(name))
            .ok_or_else(|| target.not_found(name))
    }

    /// Lists objects of a type; `target.namespace` empty means all namespaces.
    pub fn list(&self, target: Target<'_>, options: &ListOptions) -> Result<ObjectList, ApiError> {
        let resource = target.resource.qualified_plural();
        let namespace = (!target.namespace.is_empty()).then_some(target.namespace);
        let (list_version, after) = match &options.continue_token {
            Some(token) => decode_continue(token)?,
            None => (self.store.resource_version(), None),
        };
        let mut items = Vec::new();
        let mut last_key = None;
        let mut remaining = 0usize;
        for (key, stored) in self
            .store
            .range_stored(&resource, namespace, after.as_ref())
        {
            if !stored.view.selected_by(&options.labels, &options.fields) {
                continue;
            }
            if options.limit.is_some_and(|limit| items.len() >= limit) {
                remaining += 1;
                continue;
            }
            items.push(stored.json.clone());
            last_key = Some(key.clone());
        }
        let mut metadata = json!({"resourceVersion": list_version.to_string()});
        if remaining > 0
            && let Some(key) = last_key
        {
            metadata["continue"] = json!(encode_continue(list_version, &key));
            metadata["remainingItemCount"] = json!(remaining);
        }
        Ok(ObjectList {
            kind: format!("{}List", target.resource.kind),
            api_version: target.resource.api_version(),
            metadata,
            items,
        })
    }

    pub fn create(
        &mut self,
        target: Target<'_>,
        body: Value,
        manager: &str,
    ) -> Result<Arc<Value>, ApiError> {
        if target.status {
            return Err(ApiError::MethodNotAllowed);
        }
        let mut object = body;
        if !object.is_object() {
            return Err(ApiError::BadRequest(
                "the request body is not a JSON object".into(),
            ));
        }
        let name = self.name_for_create(target, &object)?;
        let skeleton = self.skeleton(target, &name, &object)?;
        let writer = writer(target, manager);
        if target.resource.status_subresource
            && let Some(map) = object.as_object_mut()
        {
            map.remove("status");
        }
        managed_fields::set_path(
            &mut object,
            &["metadata".into(), "name".into()],
            json!(name),
        );
        let mut merged = skeleton.clone();
        patch::merge_patch_owned(&mut merged, object);
        self.admit_custom_resource(target, &mut merged, "create")?;
        // merge_patch drops nulls, which a create body should not contain anyway.
        let mut created = self.stamp_new(target, merged, &skeleton);
        managed_fields::record_update(&skeleton, &mut created, &writer);
        self.commit_new(target, created, "create", manager)
    }

    /// Validates the name and namespace of a create and builds the object skeleton.
    fn skeleton(
        &mut self,
        target: Target<'_>,
        name: &str,
        object: &Value,
    ) -> Result<Value, ApiError> {
        let body_namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        if target.resource.namespaced
            && !body_namespace.is_empty()
            && body_namespace != target.namespace
        {
            return Err(ApiError::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            ));
        }
        if self.store.get(&target.key(name)).is_some() {
            return Err(ApiError::AlreadyExists {
                qualified_plural: target.resource.qualified_plural(),
                name: name.to_string(),
            });
        }
        let mut metadata = json!({"name": name});
        if target.resource.namespaced {
            metadata["namespace"] = json!(target.namespace);
        }
        Ok(
            json!({"apiVersion": target.resource.api_version(), "kind": target.resource.kind, "metadata": metadata}),
        )
    }

    fn name_for_create(&mut self, target: Target<'_>, object: &Value) -> Result<String, ApiError> {
        match (
            object["metadata"]["name"].as_str(),
            object["metadata"]["generateName"].as_str(),
        ) {
            (Some(name), _) if !name.is_empty() => Ok(name.to_string()),
            (_, Some(prefix)) if !prefix.is_empty() => {
                Ok(format!("{prefix}{}", self.random_suffix(5)))
            }
            _ => Err(ApiError::Invalid {
                qualified_plural: target.resource.qualified_plural(),
                name: String::new(),
                detail: "metadata.name: Required value: name or generateName is required".into(),
            }),
        }
    }

    /// Adds the server-set metadata of a new object.
    fn stamp_new(&mut self, target: Target<'_>, mut object: Value, skeleton: &Value) -> Value {
        object["apiVersion"] = json!(target.resource.api_version());
        object["kind"] = json!(target.resource.kind);
        let uid = self.new_uid();
        let meta = &mut object["metadata"];
        meta["name"] = skeleton["metadata"]["name"].clone();
        if target.resource.namespaced {
            meta["namespace"] = json!(target.namespace);
        } else if let Some(map) = meta.as_object_mut() {
            map.remove("namespace");
        }
        meta["uid"] = json!(uid);
        meta["creationTimestamp"] = json!(now_rfc3339());
        meta["generation"] = json!(1);
        if let Some(map) = meta.as_object_mut() {
            map.remove("deletionTimestamp");
            map.remove("resourceVersion");
        }
        if target.resource.qualified_plural() == CRD_QUALIFIED_PLURAL {
            object["status"] = json!({"conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found",
                 "lastTransitionTime": now_rfc3339()},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": now_rfc3339()}],
                "acceptedNames": object["spec"]["names"].clone()});
        }
        object
    }

    fn commit_new(
        &mut self,
        target: Target<'_>,
        mut object: Value,
        verb: &'static str,
        manager: &str,
    ) -> Result<Arc<Value>, ApiError> {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let version = self.store.next_resource_version();
        object["metadata"]["resourceVersion"] = json!(version.to_string());
        if target.resource.qualified_plural() == CRD_QUALIFIED_PLURAL
            && !self.registry.register_crd(&object)
        {
            return Err(ApiError::Invalid {
                qualified_plural: CRD_QUALIFIED_PLURAL.into(),
                name,
                detail: "spec: group, names.kind, names.plural and versions are required".into(),
            });
        }
        self.notify_stand_in(target, &object, None);
        let object = Arc::new(object);
        self.log(target, verb, manager, version, &object);
        self.store.commit(
            target.key(&name),
            ChangeKind::Added,
            Arc::clone(&object),
            None,
            version,
        );
        Ok(object)
    }

    fn log(
        &mut self,
        target: Target<'_>,
        verb: &'static str,
        manager: &str,
        version: u64,
        object: &Arc<Value>,
    ) {
        self.write_log.push(LoggedWrite {
            time: Utc::now(),
            verb,
            resource: target.resource.qualified_plural(),
            status_subresource: target.status,
            field_manager: manager.to_string(),
            user_agent: self.request_user_agent.clone(),
            resource_version: version,
            object: Arc::clone(object),
        });
    }

    /// PUT.
    pub fn replace(
        &mut self,
        target: Target<'_>,
        name: &str,
        body: Value,
        manager: &str,
    ) -> Result<Arc<Value>, ApiError> {
        let old = self.get(target, name)?;
        check_precondition(target, name, &old, &body)?;
        let new = restrict_to_scope(target, &old, body);
        self.finish_update(target, name, old, new, "update", manager, false)
    }

    /// PATCH with any [`PatchKind`]. Apply creates the object when it does not exist.
    pub fn patch(
        &mut self,
        target: Target<'_>,
        name: &str,
        kind: PatchKind,
        body: Value,
        manager: &str,
    ) -> Result<Arc<Value>, ApiError> {
        let old = match self.store.get(&target.key(name)) {
            Some(old) => old,
            None => {
                return match kind {
                    PatchKind::Apply { force } if !target.status => {
                        self.apply_create(target, name, body, manager, force)
                    }
                    _ => Err(target.not_found(name)),
                };
            }
        };
        match kind {
            PatchKind::Merge => {
                check_precondition(target, name, &old, &body)?;
                let mut patched = Value::clone(&old);
                patch::merge_patch(&mut patched, &body);
                let new = restrict_to_scope(target, &old, patched);
                self.finish_update(target, name, old, new, "patch", manager, false)
            }
            PatchKind::Json => {
                let mut patched = Value::clone(&old);
                patch::json_patch(&mut patched, &body).map_err(|e| ApiError::Invalid {
                    qualified_plural: target.resource.qualified_plural(),
                    name: name.to_string(),
                    detail: e.to_string(),
                })?;
                let new = restrict_to_scope(target, &old, patched);
                self.finish_update(target, name, old, new, "patch", manager, false)
            }
            PatchKind::Apply { force } => {
                let body = with_url_identity(target, name, body);
                check_apply_identity(target, name, &body)?;
                let writer = writer(target, manager);
                let new =
                    managed_fields::apply(&old, &body, &writer, force).map_err(|conflicts| {
                        ApiError::ApplyConflict {
                            message: managed_fields::conflict_message(&conflicts),
                            fields: conflicts
                                .iter()
                                .map(|c| (c.manager.clone(), managed_fields::render_path(&c.path)))
                                .collect(),
                        }
                    })?;
                self.finish_update(target, name, old, new, "apply", manager, true)
            }
        }
    }

    fn apply_create(
        &mut self,
        target: Target<'_>,
        name: &str,
        body: Value,
        manager: &str,
        force: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let body = with_url_identity(target, name, body);
        check_apply_identity(target, name, &body)?;
        let skeleton = self.skeleton(target, name, &body)?;
        let writer = writer(target, manager);
        let mut applied =
            managed_fields::apply(&skeleton, &body, &writer, force).map_err(|conflicts| {
                ApiError::Internal(format!(
                    "unexpected conflicts on create: {}",
                    managed_fields::conflict_message(&conflicts)
                ))
            })?;
        self.admit_custom_resource(target, &mut applied, "apply")?;
        let created = self.stamp_new(target, applied, &skeleton);
        self.commit_new(target, created, "apply", manager)
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_update(
        &mut self,
        target: Target<'_>,
        name: &str,
        old: Arc<Value>,
        mut new: Value,
        verb: &'static str,
        manager: &str,
        managed_fields_done: bool,
    ) -> Result<Arc<Value>, ApiError> {
        if !new.is_object() {
            return Err(ApiError::BadRequest(
                "the request body is not a JSON object".into(),
            ));
        }
        new["apiVersion"] = json!(target.resource.api_version());
        new["kind"] = json!(target.resource.kind);
        if !new["metadata"].is_object() {
            new["metadata"] = json!({});
        }
        for field in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "generation",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            match old["metadata"].get(field) {
                Some(value) => new["metadata"][field] = value.clone(),
                None => {
                    if let Some(map) = new["metadata"].as_object_mut() {
                        map.remove(field);
                    }
                }
            }
        }
        self.admit_custom_resource(target, &mut new, verb)?;
        if !managed_fields_done {
            managed_fields::record_update(&old, &mut new, &writer(target, manager));
        }
        if same_content(&old, &new) {
            return Ok(old);
        }
        if !same_generation_content(&old, &new) {
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
            new["metadata"]["generation"] = json!(generation + 1);
        }
        let version = self.store.next_resource_version();
        new["metadata"]["resourceVersion"] = json!(version.to_string());
        let key = target.key(name);
        if target.resource.qualified_plural() == CRD_QUALIFIED_PLURAL {
            self.registry.register_crd(&new);
        }
        let finished = new["metadata"].get("deletionTimestamp").is_some() && !has_finalizers(&new);
        let kind = if finished {
            ChangeKind::Deleted
        } else {
            ChangeKind::Modified
        };
        if finished && target.resource.qualified_plural() == CRD_QUALIFIED_PLURAL {
            self.registry.unregister_crd(&new);
        }
        self.notify_stand_in(target, &new, Some(&old));
        let new = Arc::new(new);
        self.log(target, verb, manager, version, &new);
        self.store
            .commit(key, kind, Arc::clone(&new), Some(old), version);
        Ok(new)
    }

    /// DELETE: objects with finalizers only get a deletionTimestamp.
    pub fn delete(
        &mut self,
        target: Target<'_>,
        name: &str,
        manager: &str,
    ) -> Result<Arc<Value>, ApiError> {
        let old = self.get(target, name)?;
        let version = self.store.next_resource_version();
        let mut object = Value::clone(&old);
        let kind = if has_finalizers(&old) {
            if old["metadata"].get("deletionTimestamp").is_some() {
                return Ok(old);
            }
            object["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
            object["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            ChangeKind::Modified
        } else {
            if target.resource.qualified_plural() == CRD_QUALIFIED_PLURAL {
                self.registry.unregister_crd(&old);
            }
            ChangeKind::Deleted
        };
        object["metadata"]["resourceVersion"] = json!(version.to_string());
        self.notify_stand_in(target, &object, Some(&old));
        let object = Arc::new(object);
        self.log(target, "delete", manager, version, &object);
        self.store.commit(
            target.key(name),
            kind,
            Arc::clone(&object),
            Some(old),
            version,
        );
        Ok(object)
    }
}

fn writer<'a>(target: Target<'_>, manager: &'a str) -> Writer<'a> {
    Writer {
        manager,
        scope: target.scope(),
        api_version: target.resource.api_version(),
        now: now_rfc3339(),
    }
}

fn check_precondition(
    target: Target<'_>,
    name: &str,
    old: &Value,
    body: &Value,
) -> Result<(), ApiError> {
    match body["metadata"]["resourceVersion"].as_str() {
        Some(expected)
            if !expected.is_empty()
                && Some(expected) != old["metadata"]["resourceVersion"].as_str() =>
        {
            Err(ApiError::ResourceVersionConflict {
                qualified_plural: target.resource.qualified_plural(),
                name: name.to_string(),
            })
        }
        _ => Ok(()),
    }
}

/// Like the real API server, an apply patch may leave out `metadata.name` (and namespace): they
/// come from the URL. (kube-lease-manager's Lease patches do.) A name that is present must match.
fn with_url_identity(target: Target<'_>, name: &str, mut body: Value) -> Value {
    if let Some(object) = body.as_object_mut() {
        let metadata = object
            .entry("metadata")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(metadata) = metadata.as_object_mut() {
            let unnamed = metadata
                .get("name")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
            if unnamed {
                metadata.insert("name".into(), Value::from(name));
            }
            if !target.namespace.is_empty() && !metadata.contains_key("namespace") {
                metadata.insert("namespace".into(), Value::from(target.namespace));
            }
        }
    }
    body
}

fn check_apply_identity(target: Target<'_>, name: &str, body: &Value) -> Result<(), ApiError> {
    match body["metadata"]["name"].as_str() {
        Some(body_name) if body_name == name => Ok(()),
        _ => Err(ApiError::BadRequest(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            body["metadata"]["name"].as_str().unwrap_or_default()
        ))),
    }
    .and_then(|()| {
        if body.get("apiVersion").and_then(Value::as_str)
            == Some(target.resource.api_version().as_str())
            && body.get("kind").and_then(Value::as_str) == Some(target.resource.kind.as_str())
        {
            Ok(())
        } else {
            Err(ApiError::BadRequest(format!(
                "apiVersion and kind must be {} {} in an apply patch",
                target.resource.api_version(),
                target.resource.kind
            )))
        }
    })
}

/// Keeps only the part of `new` the endpoint may change; the rest comes from `old`.
fn restrict_to_scope(target: Target<'_>, old: &Value, mut new: Value) -> Value {
    match target.scope() {
        Scope::Whole => new,
        Scope::MainOnly => {
            match old.get("status") {
                Some(status) if new.get("status") == Some(status) => {}
                Some(status) => new["status"] = status.clone(),
                None => {
                    if let Some(map) = new.as_object_mut() {
                        map.remove("status");
                    }
                }
            }
            new
        }
        // Status writers mostly send the object they read with a new status: then the body already
        // is the result, and copying the old object would be most of the write's cost.
        Scope::StatusOnly if only_status_differs(old, &new) => new,
        Scope::StatusOnly => {
            let mut kept = old.clone();
            match new.get_mut("status").map(Value::take) {
                Some(status) => kept["status"] = status,
                None => {
                    if let Some(map) = kept.as_object_mut() {
                        map.remove("status");
                    }
                }
            }
            kept
        }
    }
}

/// Whether `new` is `old` with only `status` set, removed or changed, keys in the order that
/// putting the status into a copy of `old` would give.
fn only_status_differs(old: &Value, new: &Value) -> bool {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return false;
    };
    let has_status = new.contains_key("status");
    let expected_keys = old
        .keys()
        .map(String::as_str)
        .filter(|k| has_status || *k != "status")
        .chain((has_status && !old.contains_key("status")).then_some("status"));
    new.keys().map(String::as_str).eq(expected_keys)
        && old
            .iter()
            .all(|(k, v)| k == "status" || new.get(k) == Some(v))
}

fn encode_continue(version: u64, key: &ObjectKey) -> String {
    let token =
        json!({"rv": version, "ns": key.namespace, "name": key.name, "resource": key.resource});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, Option<ObjectKey>), ApiError> {
    let invalid = || ApiError::BadRequest(format!("invalid continue token {token:?}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| invalid())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    let version = value["rv"].as_u64().ok_or_else(invalid)?;
    let key = ObjectKey {
        resource: value["resource"].as_str().ok_or_else(invalid)?.to_string(),
        namespace: value["ns"].as_str().ok_or_else(invalid)?.to_string(),
        name: value["name"].as_str().ok_or_else(invalid)?.to_string(),
    };
    Ok((version, Some(key)))
}

/// The kinds the Sveltos stand-in reads. Only their changes wake it, and each change names what
/// it concerns: tollgate's own status writes, events and lease renewals never cost it anything.
const PROFILES: &str = "clusterprofiles.config.projectsveltos.io";
const SUMMARIES: &str = "clustersummaries.config.projectsveltos.io";
const CLUSTERS: &str = "sveltosclusters.lib.projectsveltos.io";
const SUMMARY_PROFILE_LABEL: &str = "projectsveltos.io/cluster-profile-name";

impl ApiState {
    /// Files a change for the stand-in (before the store takes the object) and wakes it.
    fn notify_stand_in(&mut self, target: Target<'_>, object: &Value, previous: Option<&Value>) {
        let resource = target.resource.qualified_plural();
        let name = || {
            object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        let namespace = || {
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        let change = match resource.as_str() {
            PROFILES => StandInChange::Profile(name()),
            SUMMARIES => {
                let mut profiles: Vec<String> = [Some(object), previous]
                    .into_iter()
                    .flatten()
                    .filter_map(|o| o["metadata"]["labels"][SUMMARY_PROFILE_LABEL].as_str())
                    .map(str::to_string)
                    .collect();
                profiles.dedup();
                StandInChange::Summary {
                    namespace: namespace(),
                    name: name(),
                    profiles,
                }
            }
            CLUSTERS => StandInChange::Cluster {
                namespace: namespace(),
                name: name(),
            },
            CRD_QUALIFIED_PLURAL => {
                self.stand_in_inbox.everything = true;
                self.changed.notify_one();
                return;
            }
            _ => return,
        };
        self.stand_in_inbox.changes.push(change);
        self.changed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_target(resource: &ResourceType) -> Target<'_> {
        Target {
            resource,
            namespace: "ns",
            status: true,
        }
    }

    #[test]
    fn a_status_write_keeps_everything_but_the_status_from_the_stored_object() {
        let resource = Registry::builtin()
            .find_qualified("clustersummaries.config.projectsveltos.io")
            .cloned()
            .unwrap();
        let target = status_target(&resource);
        let old = json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"p": 1}});
        // The usual body: the object as read, with a new status; taken as it is.
        let mut body = old.clone();
        body["status"] = json!({"p": 2});
        assert!(only_status_differs(&old, &body));
        assert_eq!(restrict_to_scope(target, &old, body.clone()), body);
        // A body that also changes the spec or drops a field: only its status is taken.
        let mut edited = body.clone();
        edited["spec"]["x"] = json!(9);
        edited.as_object_mut().unwrap().remove("kind");
        assert!(!only_status_differs(&old, &edited));
        assert_eq!(restrict_to_scope(target, &old, edited), body);
        // Without a status the stored status goes, wherever the body's keys are.
        let without =
            json!({"spec": {"x": 1}, "apiVersion": "v", "kind": "K", "metadata": {"name": "a"}});
        let mut expected = old.clone();
        expected.as_object_mut().unwrap().remove("status");
        let restricted = restrict_to_scope(target, &old, without);
        assert_eq!(restricted, expected);
        assert!(
            restricted
                .as_object()
                .unwrap()
                .keys()
                .eq(expected.as_object().unwrap().keys())
        );
    }
}

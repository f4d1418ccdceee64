//! Stand-in for Sveltos's addon-controller: turns ClusterProfiles and SveltosClusters into
//! ClusterSummaries whose feature statuses go Provisioning → Provisioned (or Failed) after each
//! cluster's latency, honouring maxUpdate, paused clusters, withdrawal and the profile finalizer.
//!
//! It reacts to store changes and to its own timers only, and writes only when something changed.
//! Each wake-up reconciles only the profiles the changes concern (see `sveltos_tracking`), a few
//! at a time under the state lock so that API requests are served in between.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::failure_rules::{FailureRule, rule_failure};
use crate::fleet::{ClusterBehaviour, Feature, FleetBehaviour};
use crate::registry::ResourceType;
use crate::shared::{Shared, lock};
use crate::state::{ApiState, PatchKind, Target, now_rfc3339};
use crate::sveltos_tracking::{CLUSTERS, Key, PROFILES, SUMMARIES, Tracking, store_key};

/// Field manager of every write the stand-in makes.
pub const FIELD_MANAGER: &str = "addon-controller";
pub const PROFILE_FINALIZER: &str = "clusterprofilefinalizer.projectsveltos.io";
pub const LABEL_PROFILE_NAME: &str = "projectsveltos.io/cluster-profile-name";
pub const LABEL_CLUSTER_NAME: &str = "projectsveltos.io/cluster-name";
pub const LABEL_CLUSTER_TYPE: &str = "projectsveltos.io/cluster-type";

/// How long one turn may hold the state lock (at least one profile is reconciled per turn): API
/// requests wait for the lock, so a long turn throttles every client while the stand-in works
/// through a backlog (16 profiles per turn made a cold start of 1,000 promotions 6 s slower).
const TURN_BUDGET: Duration = Duration::from_millis(1);

/// Timers the stand-in keeps in memory (lost on restart, then re-armed from the objects).
#[derive(Debug, Default)]
struct Timers {
    /// (namespace, summary) → feature → when the Provisioning feature finishes.
    deploy: HashMap<Key, BTreeMap<Feature, Instant>>,
    /// (namespace, summary) → when the summary of a deleted profile is removed.
    withdraw: HashMap<Key, Instant>,
}

impl Timers {
    /// Forgets the deploy timer of one feature of a summary (its deploy ended).
    fn disarm(&mut self, summary: &Key, feature: Feature) {
        if let Some(features) = self.deploy.get_mut(summary) {
            features.remove(&feature);
            if features.is_empty() {
                self.deploy.remove(summary);
            }
        }
    }

    /// Every deploy still running is due at `now`.
    fn finish_deploys(&mut self, now: Instant) {
        for due in self.deploy.values_mut().flat_map(|f| f.values_mut()) {
            *due = (*due).min(now);
        }
    }
}

/// Runs until `shutdown` turns true.
pub async fn run(shared: Arc<Shared>, changed: Arc<Notify>, mut shutdown: watch::Receiver<bool>) {
    let mut timers = Timers::default();
    let mut tracking = Tracking::default();
    loop {
        let next = loop {
            match reconcile_some(&shared, &mut timers, &mut tracking) {
                Turn::More => tokio::task::yield_now().await,
                Turn::Idle { next_wake } => break next_wake,
            }
            if *shutdown.borrow() {
                return;
            }
        };
        let sleep = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = changed.notified() => {}
            () = sleep => {}
            result = shutdown.changed() => {
                if result.is_err() || *shutdown.borrow() {
                    return;
                }
            }
        }
    }
}

/// What one turn left to do.
enum Turn {
    /// Profiles are still waiting.
    More,
    /// Nothing waits until the next timer (if any).
    Idle { next_wake: Option<Instant> },
}

fn features_of(spec: &Value) -> Vec<(Feature, &'static str)> {
    let non_empty = |field: &str| spec[field].as_array().is_some_and(|a| !a.is_empty());
    [
        (Feature::Resources, "policyRefs"),
        (Feature::Helm, "helmCharts"),
        (Feature::Kustomize, "kustomizationRefs"),
    ]
    .into_iter()
    .filter(|(_, field)| non_empty(field))
    .collect()
}

/// Like Sveltos, a feature's hash covers its own content list, the health checks of that feature
/// (so appending a check re-runs the feature's deploy, docs/architecture.md#post-delay-health-checks) and the fields that shape
/// every feature's deploy.
fn feature_hash(spec: &Value, field: &str) -> String {
    let feature_id = match field {
        "helmCharts" => "Helm",
        "policyRefs" => "Resources",
        _ => "Kustomize",
    };
    let checks_of = |list: &str| -> Vec<Value> {
        spec[list]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["featureID"].as_str() == Some(feature_id))
            .cloned()
            .collect()
    };
    let global: Vec<Value> = [
        "syncMode",
        "tier",
        "patches",
        "patchesFrom",
        "templateResourceRefs",
        "driftExclusions",
        "continueOnConflict",
        "continueOnError",
    ]
    .iter()
    .map(|f| spec[*f].clone())
    .collect();
    let inputs = serde_json::json!({
        "content": spec[field],
        "validateHealths": checks_of("validateHealths"),
        "preDeployChecks": checks_of("preDeployChecks"),
        "global": global,
    });
    let digest = Sha256::digest(inputs.to_string().as_bytes());
    base64::engine::general_purpose::STANDARD.encode(digest)
}

/// What the fleet injects into one cluster's deploys: its own behaviour, the fleet's failure
/// rules, and the cluster's labels (which those rules select on).
struct Injection<'a> {
    cluster: &'a ClusterBehaviour,
    rules: &'a [FailureRule],
    labels: &'a Value,
}

/// The failure the fleet injects for a feature on a cluster, worded like Sveltos: the cluster's
/// own `failFeatures` first, then the first `failures:` rule matching the applied `spec` (a deploy
/// error), then failing health checks (which run only after a successful deploy).
fn injected_failure(spec: &Value, feature: Feature, injection: &Injection<'_>) -> Option<String> {
    if let Some(message) = injection.cluster.fail_features.get(&feature) {
        return Some(message.clone());
    }
    if let Some(message) = rule_failure(injection.rules, spec, feature, injection.labels) {
        return Some(message.to_string());
    }
    let behaviour = injection.cluster;
    spec["validateHealths"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|check| {
            let name = check["name"].as_str()?;
            if check["featureID"].as_str() != Some(feature.as_str()) {
                return None;
            }
            let detail = behaviour.fail_health_checks.get(name)?;
            Some(format!(
                "health check '{name}' for feature {} failed: {detail}",
                feature.as_str()
            ))
        })
}

/// maxUpdate resolved against the number of matching clusters: int, or percent rounded down, min 1.
fn max_update(value: &Value, matching: usize) -> Option<usize> {
    match value {
        Value::Number(n) => n.as_u64().map(|n| (n as usize).max(1)),
        Value::String(s) => match s.strip_suffix('%') {
            Some(percent) => percent
                .trim()
                .parse::<usize>()
                .ok()
                .map(|p| (matching * p / 100).max(1)),
            None => s.parse::<usize>().ok().map(|n| n.max(1)),
        },
        _ => None,
    }
}

fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

fn namespace_of(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or_default()
}

fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object["metadata"]["labels"][key].as_str()
}

fn is_deleting(object: &Value) -> bool {
    object["metadata"].get("deletionTimestamp").is_some()
}

fn all_provisioned(summary: &Value) -> bool {
    let spec = &summary["spec"]["clusterProfileSpec"];
    let statuses = summary["status"]["featureSummaries"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    features_of(spec).iter().all(|(feature, _)| {
        statuses.iter().any(|s| {
            s["featureID"].as_str() == Some(feature.as_str())
                && s["status"].as_str() == Some("Provisioned")
        })
    })
}

/// What a ClusterProfile resolves to.
struct ProfileView<'a> {
    profile: &'a Value,
    name: &'a str,
    /// (namespace, name) of matching, ready clusters.
    matching: Vec<Key>,
    desired_spec: Value,
    /// Feature hashes of `desired_spec`, computed once per pass: every up-to-date summary of the
    /// profile carries that spec, and hashing (serialise + SHA-256) per summary was a visible cost.
    desired_hashes: std::cell::OnceCell<Vec<(&'static str, String)>>,
}

impl ProfileView<'_> {
    /// The feature hash of `field` in a summary's `spec`.
    fn feature_hash(&self, spec: &Value, field: &'static str) -> String {
        if *spec != self.desired_spec {
            return feature_hash(spec, field);
        }
        let hashes = self.desired_hashes.get_or_init(|| {
            features_of(&self.desired_spec)
                .into_iter()
                .map(|(_, field)| (field, feature_hash(&self.desired_spec, field)))
                .collect()
        });
        hashes
            .iter()
            .find(|(f, _)| *f == field)
            .map_or_else(|| feature_hash(spec, field), |(_, hash)| hash.clone())
    }
}

struct Types {
    profiles: ResourceType,
    summaries: ResourceType,
}

/// Takes in the filed changes and due timers, then reconciles profiles that need it for up to
/// [`TURN_BUDGET`].
fn reconcile_some(shared: &Shared, timers: &mut Timers, tracking: &mut Tracking) -> Turn {
    let mut state = lock(&shared.state);
    // Lock order: state, then fleet (nothing takes the state lock while holding the fleet's).
    let behaviour = lock(&shared.fleet);
    // Read the clock only once the lock is held, so deadlines count from the writes' own time.
    let now = Instant::now();
    let inbox = state.stand_in_inbox.take();
    if inbox.finish_provisioning {
        timers.finish_deploys(now);
        // Only the profiles waiting on a timer: a full pass over every profile (40,000 at
        // 10,000 promotions) held the API lock turn after turn while the burst was timed.
        tracking.wake_all();
    }
    tracking.absorb(inbox, &state.store);
    tracking.wake_due(now);
    let types = match (
        state.registry.find_qualified(PROFILES),
        state.registry.find_qualified(SUMMARIES),
    ) {
        (Some(profiles), Some(summaries)) => Types {
            profiles: profiles.clone(),
            summaries: summaries.clone(),
        },
        // Without the CRDs there is nothing to do; creating them files a full pass.
        _ => {
            while tracking.next_dirty().is_some() {}
            return Turn::Idle {
                next_wake: tracking.next_wake(),
            };
        }
    };
    let turn_started = std::time::Instant::now();
    while let Some(name) = tracking.next_dirty() {
        reconcile_profile(&mut state, &types, &behaviour, timers, tracking, &name, now);
        if turn_started.elapsed() >= TURN_BUDGET {
            break;
        }
    }
    // This turn's own writes filed changes too; they are taken in on the next turn.
    if tracking.has_dirty() || !state.stand_in_inbox.changes.is_empty() {
        Turn::More
    } else {
        Turn::Idle {
            next_wake: tracking.next_wake(),
        }
    }
}

fn reconcile_profile(
    state: &mut ApiState,
    types: &Types,
    behaviour: &FleetBehaviour,
    timers: &mut Timers,
    tracking: &mut Tracking,
    name: &str,
    now: Instant,
) {
    // Shared, not copied: the writes below replace the stored version, never change it in place.
    let profile = state
        .store
        .get(&store_key(PROFILES, &(String::new(), name.to_string())));
    let Some(profile) = profile else {
        // Gone: its summaries are withdrawn at once.
        tracking.forget_selection(name);
        withdraw_unwanted(state, types, timers, tracking, name, &BTreeSet::new());
        return;
    };
    if is_deleting(&profile) {
        tracking.forget_selection(name);
        withdraw_deleted(state, types, behaviour, timers, tracking, &profile, now);
        return;
    }
    ensure_finalizer(state, types, &profile);
    let matching = tracking.matching(name, &profile["spec"], &state.store);
    let references: Vec<Value> = matching
        .iter()
        .map(|(ns, name)| json!({"apiVersion": "lib.projectsveltos.io/v1beta1", "kind": "SveltosCluster", "namespace": ns, "name": name}))
        .collect();
    if profile["status"]["matchingClusters"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        != references.as_slice()
    {
        let body = json!({"status": {"matchingClusters": references}});
        write(
            state.patch(
                status_target(&types.profiles),
                name,
                PatchKind::Merge,
                body,
                FIELD_MANAGER,
            ),
            name,
        );
    }
    let mut desired_spec = profile["spec"].clone();
    if let Some(map) = desired_spec.as_object_mut() {
        for field in ["clusterSelector", "clusterRefs", "setRefs"] {
            map.remove(field);
        }
    }
    let view = ProfileView {
        profile: &profile,
        name,
        matching,
        desired_spec,
        desired_hashes: std::cell::OnceCell::new(),
    };
    let wanted = sync_summaries(state, types, behaviour, timers, tracking, &view, now);
    withdraw_unwanted(state, types, timers, tracking, name, &wanted);
}

/// Deletes the Sveltos summaries filed under `profile` that are not `wanted`.
fn withdraw_unwanted(
    state: &mut ApiState,
    types: &Types,
    timers: &mut Timers,
    tracking: &Tracking,
    profile: &str,
    wanted: &BTreeSet<Key>,
) {
    for key in tracking.summaries_of(profile) {
        if wanted.contains(&key) {
            continue;
        }
        let sveltos_type = state
            .store
            .get(&store_key(SUMMARIES, &key))
            .is_some_and(|s| label(&s, LABEL_CLUSTER_TYPE) == Some("Sveltos"));
        if !sveltos_type {
            continue;
        }
        delete_summary(state, types, &key);
        timers.deploy.remove(&key);
    }
}

fn delete_summary(state: &mut ApiState, types: &Types, (namespace, name): &Key) {
    let target = Target {
        resource: &types.summaries,
        namespace,
        status: false,
    };
    write(state.delete(target, name, FIELD_MANAGER), name);
}

fn ensure_finalizer(state: &mut ApiState, types: &Types, profile: &Value) {
    let finalizers: Vec<Value> = profile["metadata"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if finalizers
        .iter()
        .any(|f| f.as_str() == Some(PROFILE_FINALIZER))
    {
        return;
    }
    let mut updated = finalizers;
    updated.push(json!(PROFILE_FINALIZER));
    let target = Target {
        resource: &types.profiles,
        namespace: "",
        status: false,
    };
    let body = json!({"metadata": {"finalizers": updated}});
    write(
        state.patch(
            target,
            name_of(profile),
            PatchKind::Merge,
            body,
            FIELD_MANAGER,
        ),
        name_of(profile),
    );
}

/// A deleted profile's summaries go after each cluster's latency; then the finalizer goes.
fn withdraw_deleted(
    state: &mut ApiState,
    types: &Types,
    behaviour: &FleetBehaviour,
    timers: &mut Timers,
    tracking: &mut Tracking,
    profile: &Value,
    now: Instant,
) {
    let name = name_of(profile);
    let mut remaining = 0;
    for key in tracking.summaries_of(name) {
        let Some(summary) = state.store.get(&store_key(SUMMARIES, &key)) else {
            continue;
        };
        let cluster = summary["spec"]["clusterName"].as_str().unwrap_or_default();
        let due = *timers
            .withdraw
            .entry(key.clone())
            .or_insert_with(|| now + behaviour.latency(&key.0, cluster));
        if now >= due {
            delete_summary(state, types, &key);
            timers.withdraw.remove(&key);
            timers.deploy.remove(&key);
        } else {
            remaining += 1;
            tracking.wake(due, name);
        }
    }
    if remaining == 0 {
        let finalizers: Vec<Value> = profile["metadata"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f.as_str() != Some(PROFILE_FINALIZER))
            .cloned()
            .collect();
        if finalizers.len()
            != profile["metadata"]["finalizers"]
                .as_array()
                .map_or(0, Vec::len)
        {
            let target = Target {
                resource: &types.profiles,
                namespace: "",
                status: false,
            };
            let body = json!({"metadata": {"finalizers": finalizers}});
            write(
                state.patch(target, name, PatchKind::Merge, body, FIELD_MANAGER),
                name,
            );
        }
    }
}

/// Whether the summary's labels, annotations and owner references differ from what
/// [`summary_metadata`] gives, compared in place: building that metadata for every summary on
/// every pass over a profile was a visible share of the stand-in's work.
fn metadata_differs(summary: &Value, view: &ProfileView<'_>, cluster: &str) -> bool {
    let metadata = &summary["metadata"];
    let profile_meta = &view.profile["metadata"];
    let profile_labels = profile_meta["labels"].as_object();
    let expected_label = |key: &str| match key {
        LABEL_PROFILE_NAME => Some(view.name),
        LABEL_CLUSTER_NAME => Some(cluster),
        LABEL_CLUSTER_TYPE => Some("Sveltos"),
        _ => None,
    };
    let profile_only = profile_labels
        .into_iter()
        .flatten()
        .filter(|(key, _)| expected_label(key).is_none())
        .count();
    let labels_equal = metadata["labels"].as_object().is_some_and(|labels| {
        labels.len() == profile_only + 3
            && labels.iter().all(|(key, value)| match expected_label(key) {
                Some(expected) => value.as_str() == Some(expected),
                None => profile_labels.and_then(|p| p.get(key)) == Some(value),
            })
    });
    let annotations_equal = match profile_meta["annotations"]
        .as_object()
        .filter(|a| !a.is_empty())
    {
        Some(annotations) => metadata["annotations"].as_object() == Some(annotations),
        None => metadata.get("annotations").is_none(),
    };
    let owner_equal = metadata["ownerReferences"]
        .as_array()
        .is_some_and(|owners| match owners.as_slice() {
            [owner] => {
                owner.as_object().is_some_and(|o| o.len() == 6)
                    && owner["apiVersion"] == view.profile["apiVersion"]
                    && owner["kind"] == "ClusterProfile"
                    && owner["name"] == view.name
                    && owner["uid"] == profile_meta["uid"]
                    && owner["controller"] == true
                    && owner["blockOwnerDeletion"] == true
            }
            _ => false,
        });
    !(labels_equal && annotations_equal && owner_equal)
}

/// Creates and updates the profile's summaries and advances their statuses. Returns the summaries
/// the profile wants (one per matching cluster).
fn sync_summaries(
    state: &mut ApiState,
    types: &Types,
    behaviour: &FleetBehaviour,
    timers: &mut Timers,
    tracking: &mut Tracking,
    view: &ProfileView<'_>,
    now: Instant,
) -> BTreeSet<Key> {
    let paused: BTreeSet<&Key> = view
        .matching
        .iter()
        .filter(|c| tracking.is_paused(c))
        .collect();
    // A maintenance window that opens or closes changes what may be deployed: look again then.
    let window_change = view
        .matching
        .iter()
        .filter_map(|c| tracking.window_change_in(c))
        .min();
    if let Some(after) = window_change {
        tracking.wake(now + after, view.name);
    }
    let active = view.matching.len() - paused.len();
    let budget = max_update(&view.profile["spec"]["maxUpdate"], active);
    let updating = view
        .matching
        .iter()
        .filter(|c| !paused.contains(c))
        .filter_map(|c| {
            state
                .store
                .get(&store_key(SUMMARIES, &summary_key(view, c)))
        })
        .filter(|s| s["spec"]["clusterProfileSpec"] == view.desired_spec && !all_provisioned(s))
        .count();
    let mut allowed = budget.map(|b| b.saturating_sub(updating));
    let mut wanted = BTreeSet::new();
    for cluster_key in &view.matching {
        let key = summary_key(view, cluster_key);
        wanted.insert(key.clone());
        let cluster_paused = paused.contains(cluster_key);
        let written = write_summary(
            state,
            types,
            view,
            cluster_key,
            cluster_paused,
            &mut allowed,
        );
        if !written || cluster_paused {
            continue;
        }
        let mut summary = SummaryProgress {
            state: &mut *state,
            types,
            behaviour,
            timers: &mut *timers,
            tracking: &mut *tracking,
            view,
        };
        summary.advance(cluster_key, &key, now);
    }
    wanted
}

/// The summary of `view`'s profile on a cluster.
fn summary_key(view: &ProfileView<'_>, (namespace, cluster): &Key) -> Key {
    (
        namespace.clone(),
        format!("{}-sveltos-{cluster}", view.name),
    )
}

/// Creates the cluster's summary, or brings its metadata and (within the `maxUpdate` budget,
/// `allowed`; a paused cluster's does not count) its spec up to date. False when a write failed.
fn write_summary(
    state: &mut ApiState,
    types: &Types,
    view: &ProfileView<'_>,
    cluster_key: &Key,
    cluster_paused: bool,
    allowed: &mut Option<usize>,
) -> bool {
    let (namespace, cluster) = cluster_key;
    let key = summary_key(view, cluster_key);
    let name = &key.1;
    let target = Target {
        resource: &types.summaries,
        namespace,
        status: false,
    };
    let Some(summary) = state.store.get(&store_key(SUMMARIES, &key)) else {
        let metadata = summary_metadata(view, namespace, cluster);
        let spec = summary_spec(namespace, cluster, view.desired_spec.clone());
        let object = json!({"apiVersion": types.summaries.api_version(), "kind": "ClusterSummary", "metadata": metadata, "spec": spec});
        if let Err(error) = state.create(target, object, FIELD_MANAGER) {
            tracing::warn!(summary = name, %error, "creating ClusterSummary failed");
            return false;
        }
        return true;
    };
    let outdated = summary["spec"]["clusterProfileSpec"] != view.desired_spec;
    let may_update = outdated
        && (cluster_paused
            || match allowed.as_mut() {
                None => true,
                Some(0) => false,
                Some(left) => {
                    *left -= 1;
                    true
                }
            });
    if !may_update && !metadata_differs(&summary, view, cluster) {
        return true;
    }
    let metadata = summary_metadata(view, namespace, cluster);
    let mut updated = Value::clone(&summary);
    for field in ["labels", "annotations", "ownerReferences"] {
        match metadata.get(field) {
            Some(value) => updated["metadata"][field] = value.clone(),
            None => {
                if let Some(map) = updated["metadata"].as_object_mut() {
                    map.remove(field);
                }
            }
        }
    }
    if may_update {
        updated["spec"] = summary_spec(namespace, cluster, view.desired_spec.clone());
    }
    if let Err(error) = state.replace(target, name, updated, FIELD_MANAGER) {
        tracing::warn!(summary = name, %error, "updating ClusterSummary failed");
        return false;
    }
    true
}

/// What advancing one summary's status needs.
struct SummaryProgress<'a, 'v> {
    state: &'a mut ApiState,
    types: &'a Types,
    behaviour: &'a FleetBehaviour,
    timers: &'a mut Timers,
    tracking: &'a mut Tracking,
    view: &'a ProfileView<'v>,
}

impl SummaryProgress<'_, '_> {
    /// Moves the summary's status on (deploy, fail as the fleet file says) and arms the timers of
    /// what it deploys next.
    fn advance(&mut self, cluster_key: &Key, key: &Key, now: Instant) {
        let (namespace, cluster) = cluster_key;
        let name = &key.1;
        let Some(current) = self.state.store.get(&store_key(SUMMARIES, key)) else {
            return;
        };
        let behaviour = self.behaviour;
        let cluster_behaviour = behaviour.cluster(namespace, cluster);
        // Labels matter only to failure rules; without any, the per-summary lookup is skipped.
        static NO_LABELS: Value = Value::Null;
        let cluster_object = if behaviour.failure_rules.is_empty() {
            None
        } else {
            self.state.store.get(&store_key(CLUSTERS, cluster_key))
        };
        let labels = cluster_object
            .as_deref()
            .map_or(&NO_LABELS, |c| &c["metadata"]["labels"]);
        let injection = Injection {
            cluster: &cluster_behaviour,
            rules: &behaviour.failure_rules,
            labels,
        };
        let latency = behaviour.latency(namespace, cluster);
        let view = self.view;
        let tracking = &mut *self.tracking;
        let mut wake = |at: Instant| tracking.wake(at, view.name);
        let (status, armed) = next_status(
            &current,
            view,
            &injection,
            latency,
            self.timers,
            now,
            &mut wake,
        );
        if let Some(status) = status {
            let status_target = Target {
                resource: &self.types.summaries,
                namespace,
                status: true,
            };
            let mut object = Value::clone(&current);
            object["status"] = status;
            write(
                self.state
                    .replace(status_target, name, object, FIELD_MANAGER),
                name,
            );
        }
        // Deadlines count from the moment the Provisioning status was written.
        let written = Instant::now();
        for feature in armed {
            self.timers
                .deploy
                .entry(key.clone())
                .or_default()
                .insert(feature, written + latency);
            self.tracking.wake(written + latency, view.name);
        }
    }
}

fn status_target(resource: &ResourceType) -> Target<'_> {
    Target {
        resource,
        namespace: "",
        status: true,
    }
}

fn write(result: Result<Arc<Value>, crate::api_error::ApiError>, name: &str) {
    if let Err(error) = result {
        tracing::warn!(object = name, %error, "sveltos stand-in write failed");
    }
}

fn summary_metadata(view: &ProfileView<'_>, namespace: &str, cluster: &str) -> Value {
    let profile_meta = &view.profile["metadata"];
    let mut labels: Map<String, Value> = profile_meta["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.insert(LABEL_PROFILE_NAME.into(), json!(view.name));
    labels.insert(LABEL_CLUSTER_NAME.into(), json!(cluster));
    labels.insert(LABEL_CLUSTER_TYPE.into(), json!("Sveltos"));
    let mut metadata = json!({
        "name": format!("{}-sveltos-{cluster}", view.name),
        "namespace": namespace,
        "labels": labels,
        "ownerReferences": [{
            "apiVersion": view.profile["apiVersion"], "kind": "ClusterProfile", "name": view.name,
            "uid": profile_meta["uid"], "controller": true, "blockOwnerDeletion": true,
        }],
    });
    if let Some(annotations) = profile_meta["annotations"]
        .as_object()
        .filter(|a| !a.is_empty())
    {
        metadata["annotations"] = Value::Object(annotations.clone());
    }
    metadata
}

fn summary_spec(namespace: &str, cluster: &str, profile_spec: Value) -> Value {
    json!({"clusterNamespace": namespace, "clusterName": cluster, "clusterType": "Sveltos", "clusterProfileSpec": profile_spec})
}

/// A feature entry that (re)starts deploying `hash`. Like Sveltos's `updateFeatureStatus` for
/// Provisioning, only status and hash change: the last failure's message and count and the last
/// `lastAppliedTime` stay until the deploy ends.
fn redeploying(previous: Option<&Value>, feature: Feature, hash: &str) -> Value {
    let mut entry = previous
        .cloned()
        .unwrap_or_else(|| json!({"featureID": feature.as_str()}));
    entry["hash"] = json!(hash);
    entry["status"] = json!("Provisioning");
    entry
}

/// A Provisioning entry whose deploy ended, with `failure` or without. Like Sveltos, both stamp
/// `lastAppliedTime` (so a failure is recognisably about this deploy); a failure sets the message
/// and counts one more consecutive failure, a success clears both.
fn deployed(entry: &Value, failure: Option<&str>) -> Value {
    let mut done = entry.clone();
    let Some(map) = done.as_object_mut() else {
        return done;
    };
    map.insert("lastAppliedTime".into(), json!(now_rfc3339()));
    match failure {
        Some(message) => {
            map.insert("status".into(), json!("Failed"));
            map.insert("failureMessage".into(), json!(message));
            let failures = entry["consecutiveFailures"].as_u64().unwrap_or(0) + 1;
            map.insert("consecutiveFailures".into(), json!(failures));
        }
        None => {
            map.insert("status".into(), json!("Provisioned"));
            map.remove("failureMessage");
            map.remove("consecutiveFailures");
        }
    }
    done
}

#[allow(clippy::too_many_arguments)]
/// The summary's next status (None when nothing changes) and the features that (re)started
/// deploying, whose timers the caller arms once the status is written.
fn next_status(
    summary: &Value,
    view: &ProfileView<'_>,
    injection: &Injection<'_>,
    latency: Duration,
    timers: &mut Timers,
    now: Instant,
    wake: &mut impl FnMut(Instant),
) -> (Option<Value>, Vec<Feature>) {
    let mut armed = Vec::new();
    let summary_key = (
        namespace_of(summary).to_string(),
        name_of(summary).to_string(),
    );
    let spec = &summary["spec"]["clusterProfileSpec"];
    let old: &[Value] = summary["status"]["featureSummaries"]
        .as_array()
        .map_or(&[], Vec::as_slice);
    let needed = features_of(spec);
    let mut entries = Vec::new();
    for (feature, field) in &needed {
        let hash = view.feature_hash(spec, field);
        let failure = injected_failure(spec, *feature, injection);
        let existing = old
            .iter()
            .find(|e| e["featureID"].as_str() == Some(feature.as_str()));
        let entry = match existing {
            Some(entry) if entry["hash"].as_str() == Some(hash.as_str()) => {
                match entry["status"].as_str() {
                    Some("Provisioning") => {
                        let due = *timers
                            .deploy
                            .entry(summary_key.clone())
                            .or_default()
                            .entry(*feature)
                            .or_insert(now + latency);
                        if now >= due {
                            timers.disarm(&summary_key, *feature);
                            deployed(entry, failure.as_deref())
                        } else {
                            wake(due);
                            entry.clone()
                        }
                    }
                    Some("Provisioned") if failure.is_none() => entry.clone(),
                    Some("Failed")
                        if failure.is_some()
                            && entry["failureMessage"].as_str() == failure.as_deref() =>
                    {
                        entry.clone()
                    }
                    _ => {
                        armed.push(*feature);
                        redeploying(Some(entry), *feature, &hash)
                    }
                }
            }
            _ => {
                armed.push(*feature);
                redeploying(existing, *feature, &hash)
            }
        };
        entries.push(entry);
    }
    if entries.as_slice() == old {
        return (None, armed);
    }
    let mut status = summary["status"].as_object().cloned().unwrap_or_default();
    if entries.is_empty() {
        status.remove("featureSummaries");
    } else {
        status.insert("featureSummaries".into(), Value::Array(entries));
    }
    (Some(Value::Object(status)), armed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_update_rounds_down_with_minimum_one() {
        assert_eq!(max_update(&json!("10%"), 20), Some(2));
        assert_eq!(max_update(&json!("10%"), 5), Some(1));
        assert_eq!(max_update(&json!(3), 20), Some(3));
        assert_eq!(max_update(&Value::Null, 20), None);
    }

    #[test]
    fn health_check_failure_is_worded_like_sveltos() {
        let spec = json!({"validateHealths": [
            {"name": "other", "featureID": "Resources"},
            {"name": "deployment-health", "featureID": "Helm"}]});
        let mut behaviour = ClusterBehaviour::default();
        behaviour
            .fail_health_checks
            .insert("deployment-health".into(), "available replicas 0/1".into());
        let injection = Injection {
            cluster: &behaviour,
            rules: &[],
            labels: &Value::Null,
        };
        assert_eq!(
            injected_failure(&spec, Feature::Helm, &injection).as_deref(),
            Some(
                "health check 'deployment-health' for feature Helm failed: available replicas 0/1"
            )
        );
        assert_eq!(
            injected_failure(&spec, Feature::Resources, &injection),
            None
        );
    }

    fn staging_rule() -> FailureRule {
        FailureRule {
            chart_version: crate::failure_rules::VersionGlob::new("9.9.*").expect("glob"),
            selector: [("env".to_string(), "staging".to_string())].into(),
            feature: Feature::Helm,
            message: "values: replicas must be an integer".into(),
        }
    }

    #[test]
    fn failure_rules_follow_the_applied_chart_and_the_cluster_labels() {
        let rules = [staging_rule()];
        let behaviour = ClusterBehaviour::default();
        let staging = json!({"env": "staging"});
        let injection = |labels| Injection {
            cluster: &behaviour,
            rules: &rules,
            labels,
        };
        let bad = json!({"helmCharts": [{"chartVersion": "9.9.1"}]});
        let fixed = json!({"helmCharts": [{"chartVersion": "1.2.4"}]});
        assert_eq!(
            injected_failure(&bad, Feature::Helm, &injection(&staging)).as_deref(),
            Some("values: replicas must be an integer")
        );
        assert_eq!(
            injected_failure(&fixed, Feature::Helm, &injection(&staging)),
            None,
            "a fix commit's spec deploys"
        );
        assert_eq!(
            injected_failure(
                &bad,
                Feature::Helm,
                &injection(&json!({"env": "production"}))
            ),
            None,
            "clusters outside the selector deploy the bad chart"
        );
    }

    #[test]
    fn a_clusters_own_failure_comes_before_the_rules() {
        let rules = [staging_rule()];
        let mut behaviour = ClusterBehaviour::default();
        behaviour
            .fail_features
            .insert(Feature::Helm, "own failure".into());
        let injection = Injection {
            cluster: &behaviour,
            rules: &rules,
            labels: &json!({"env": "staging"}),
        };
        let bad = json!({"helmCharts": [{"chartVersion": "9.9.1"}]});
        assert_eq!(
            injected_failure(&bad, Feature::Helm, &injection).as_deref(),
            Some("own failure")
        );
    }

    /// Sveltos's `updateFeatureStatus`: Provisioning keeps the last failure until the deploy
    /// ends; Failed and Provisioned both stamp `lastAppliedTime`.
    #[test]
    fn feature_entries_move_like_sveltos() {
        let failed = json!({"featureID": "Helm", "hash": "old", "status": "Failed",
                            "failureMessage": "boom", "consecutiveFailures": 2,
                            "lastAppliedTime": "2026-01-01T00:00:00Z"});
        let retrying = redeploying(Some(&failed), Feature::Helm, "new");
        assert_eq!(
            retrying,
            json!({"featureID": "Helm", "hash": "new", "status": "Provisioning",
                   "failureMessage": "boom", "consecutiveFailures": 2,
                   "lastAppliedTime": "2026-01-01T00:00:00Z"})
        );
        assert_eq!(
            redeploying(None, Feature::Kustomize, "h"),
            json!({"featureID": "Kustomize", "hash": "h", "status": "Provisioning"})
        );

        let failed_again = deployed(&retrying, Some("still broken"));
        assert_eq!(failed_again["status"], "Failed");
        assert_eq!(failed_again["failureMessage"], "still broken");
        assert_eq!(failed_again["consecutiveFailures"], 3);
        assert_ne!(
            failed_again["lastAppliedTime"], "2026-01-01T00:00:00Z",
            "a failed deploy is stamped"
        );

        let recovered = deployed(&retrying, None);
        assert_eq!(recovered["status"], "Provisioned");
        assert_eq!(recovered["hash"], "new");
        assert!(recovered.get("failureMessage").is_none());
        assert!(recovered.get("consecutiveFailures").is_none());
        assert!(
            recovered["lastAppliedTime"]
                .as_str()
                .is_some_and(|t| t != "2026-01-01T00:00:00Z")
        );
    }

    /// The definition `metadata_differs` must agree with: build the metadata, compare fields.
    fn metadata_differs_by_definition(
        summary: &Value,
        view: &ProfileView<'_>,
        cluster: &str,
    ) -> bool {
        let metadata = summary_metadata(view, "fleet", cluster);
        ["labels", "annotations", "ownerReferences"]
            .iter()
            .any(|field| summary["metadata"].get(*field) != metadata.get(*field))
    }

    #[test]
    fn summary_metadata_is_compared_in_place_like_the_built_metadata() {
        let profile = json!({"apiVersion": "config.projectsveltos.io/v1beta1", "metadata": {
            "name": "p", "uid": "u-1", "labels": {"team": "a", LABEL_CLUSTER_TYPE: "overridden"},
            "annotations": {"note": "x"}}});
        let bare =
            json!({"apiVersion": "config.projectsveltos.io/v1beta1", "metadata": {"name": "p"}});
        for profile in [&profile, &bare] {
            let view = ProfileView {
                profile,
                name: "p",
                matching: Vec::new(),
                desired_spec: Value::Null,
                desired_hashes: std::cell::OnceCell::new(),
            };
            let exact = json!({"metadata": summary_metadata(&view, "fleet", "c1")});
            let mut variants = vec![exact.clone()];
            let mut edit = |change: &dyn Fn(&mut Value)| {
                let mut variant = exact.clone();
                change(&mut variant["metadata"]);
                variants.push(variant);
            };
            edit(&|m| m["labels"]["extra"] = json!("1"));
            edit(&|m| {
                m["labels"]
                    .as_object_mut()
                    .unwrap()
                    .remove(LABEL_PROFILE_NAME);
            });
            edit(&|m| m["labels"][LABEL_CLUSTER_NAME] = json!("c2"));
            edit(&|m| m["labels"][LABEL_CLUSTER_TYPE] = json!("overridden"));
            edit(&|m| m["labels"] = json!(null));
            edit(&|m| m["annotations"] = json!({"note": "y"}));
            edit(&|m| m["annotations"] = json!({}));
            edit(&|m| {
                m.as_object_mut().unwrap().remove("annotations");
            });
            edit(&|m| m["ownerReferences"][0]["uid"] = json!("u-2"));
            edit(&|m| m["ownerReferences"][0]["extra"] = json!(true));
            edit(&|m| m["ownerReferences"] = json!([]));
            for variant in &variants {
                assert_eq!(
                    metadata_differs(variant, &view, "c1"),
                    metadata_differs_by_definition(variant, &view, "c1"),
                    "{variant}"
                );
            }
            assert!(!metadata_differs(&exact, &view, "c1"));
        }
    }

    #[test]
    fn features_follow_the_spec_lists() {
        let spec = json!({"helmCharts": [{"releaseName": "a"}], "policyRefs": [], "kustomizationRefs": [{}]});
        let features: Vec<Feature> = features_of(&spec).into_iter().map(|(f, _)| f).collect();
        assert_eq!(features, [Feature::Helm, Feature::Kustomize]);
    }
}

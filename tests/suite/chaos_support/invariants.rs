//! Rollout invariants, checked after the fact over the emulator's write log: a pure function of
//! the log and the promotions' plans, so a violation names the exact writes that broke it.
//!
//! Rules:
//! - a stage's profile for snapshot S is first applied only after every earlier stage's profile
//!   for S was applied and all of its ClusterSummaries were Provisioned for S;
//! - nor before the previous stage's delay passed, counted from when its summaries were all
//!   Provisioned (per the log) and from the `provisionedAt` the controller persisted;
//! - nor past a manual gate before the approval commit;
//! - no approving commit is listed in `consumedApprovals` for two runs;
//! - every promotion ends Completed on its final snapshot, every stage profile carrying it;
//! - with leader election ([`check_leased`]): no controller write without a valid lease, as the
//!   API server saw it (within a lease duration of the last renewal naming a holder).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tollgate_emulator::WriteRecord;

use super::PromotionPlan;

/// Timestamps in statuses and git commits have one-second resolution.
pub const CLOCK_GRANULARITY: Duration = Duration::from_secs(1);

use tollgate_render::{
    PROMOTION_LABEL, SNAPSHOT_INDEX_ANNOTATION, STAGE_LABEL, VERIFICATION_LABEL, stage_profile_name,
};

/// The controller's field manager.
const CONTROLLER_MANAGER: &str = "tollgate";

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Violation {
    #[error(
        "{promotion}/{stage} applied for snapshot {snapshot} at {at} before {earlier} was applied for it"
    )]
    EarlierStageNotApplied {
        promotion: String,
        stage: String,
        snapshot: u64,
        at: DateTime<Utc>,
        earlier: String,
    },
    #[error(
        "{promotion}/{stage} applied for snapshot {snapshot} at {at} before {earlier}'s ClusterSummaries were all Provisioned for it"
    )]
    EarlierStageNotProvisioned {
        promotion: String,
        stage: String,
        snapshot: u64,
        at: DateTime<Utc>,
        earlier: String,
    },
    #[error(
        "{promotion}/{stage} applied for snapshot {snapshot} at {at}, but {previous} was provisioned ({by}) at {provisioned} and waits {delay:?}"
    )]
    DelayShortened {
        promotion: String,
        stage: String,
        snapshot: u64,
        at: DateTime<Utc>,
        previous: String,
        by: &'static str,
        provisioned: DateTime<Utc>,
        delay: Duration,
    },
    #[error(
        "{promotion}/{stage} applied for snapshot {snapshot} at {at}, past the manual gate of {gate}, approved at {approved:?}"
    )]
    PassedGateUnapproved {
        promotion: String,
        stage: String,
        snapshot: u64,
        at: DateTime<Utc>,
        gate: String,
        approved: Option<DateTime<Utc>>,
    },
    #[error("{promotion}: approval {commit} consumed by runs {runs:?}")]
    ApprovalReused {
        promotion: String,
        commit: String,
        runs: BTreeSet<u64>,
    },
    #[error("{promotion} did not complete snapshot {expected}: {detail}")]
    NotCompleted {
        promotion: String,
        expected: u64,
        detail: String,
    },
    #[error(
        "{resource} {name} written by the controller at {at} without a valid lease (last renewal {renewed:?}, valid until {valid_until:?})"
    )]
    UnleasedWrite {
        resource: String,
        name: String,
        at: DateTime<Utc>,
        renewed: Option<DateTime<Utc>>,
        valid_until: Option<DateTime<Utc>>,
    },
    #[error("{promotion} ({resource} write at {at}) carries an unreadable {what}")]
    Unreadable {
        promotion: String,
        resource: String,
        at: DateTime<Utc>,
        what: &'static str,
    },
}

/// One ClusterSummary as last written.
#[derive(Debug, Clone)]
struct SummaryState {
    /// The snapshot it is Provisioned for, if every feature is.
    provisioned_for: Option<u64>,
    /// `spec.clusterProfileSpec` at which that holds (Sveltos keeps a feature Provisioned when
    /// its inputs do not change).
    spec: Value,
}

/// (write time, `provisionedAt` it carried).
type PersistedAt = (DateTime<Utc>, DateTime<Utc>);

/// A stage profile's first apply for a snapshot.
#[derive(Debug, Clone)]
struct FirstApply {
    promotion: String,
    stage: usize,
    snapshot: u64,
    at: DateTime<Utc>,
}

#[derive(Default)]
struct Replay<'a> {
    plans: HashMap<&'a str, &'a PromotionPlan>,
    /// (promotion, stage index) → snapshot → first apply time.
    applied: HashMap<(String, usize), BTreeMap<u64, DateTime<Utc>>>,
    /// (promotion, stage index) → snapshot of the latest apply.
    latest_applied: HashMap<(String, usize), u64>,
    /// `namespace/name` of a summary → its state.
    summaries: HashMap<String, SummaryState>,
    /// (promotion, stage index, snapshot) → when all its summaries were first Provisioned for it.
    provisioned: HashMap<(String, usize, u64), DateTime<Utc>>,
    /// (promotion, stage name, snapshot) → (write time, persisted `provisionedAt`) of every status
    /// write carrying it.
    persisted_provisioned: HashMap<(String, String, u64), Vec<PersistedAt>>,
    /// (promotion, approving commit) → runs that consumed it.
    consumed: BTreeMap<(String, String), BTreeSet<u64>>,
    last_status: HashMap<String, Value>,
    first_applies: Vec<FirstApply>,
    violations: Vec<Violation>,
}

/// Every violated invariant in `log` (oldest first), given what was rolled out.
pub fn check(log: &[WriteRecord], plans: &[PromotionPlan]) -> Vec<Violation> {
    let mut replay = Replay {
        plans: plans.iter().map(|p| (p.name.as_str(), p)).collect(),
        ..Replay::default()
    };
    for record in log {
        if record.resource.starts_with("clusterprofiles.") {
            replay.on_profile(record);
        } else if record.resource.starts_with("clustersummaries.") {
            replay.on_summary(record);
        } else if record.resource.starts_with("gitpromotions.") {
            replay.on_status(record);
        }
    }
    replay.check_persisted_delays();
    for plan in plans {
        replay.check_completed(plan);
    }
    replay.violations
}

/// The Lease resource as the write log names it.
pub const LEASE_RESOURCE: &str = "leases.coordination.k8s.io";

/// Every controller write (profiles, promotion state) the API server received while no lease
/// was valid in its own view: a write must land before the last renewal naming a holder plus
/// that renewal's `leaseDurationSeconds`. Renewals are Lease writes that change `renewTime`
/// (other Lease writes, such as fetch-request stamps, renew nothing); one clearing the holder
/// ends validity at once. Meant for runs with a single elected replica.
pub fn check_leased(log: &[WriteRecord]) -> Vec<Violation> {
    let mut renew_time: Option<Value> = None;
    let mut valid: Option<(DateTime<Utc>, DateTime<Utc>)> = None;
    let mut violations = Vec::new();
    for record in log {
        if record.resource == LEASE_RESOURCE {
            let spec = &record.object["spec"];
            let held = spec["holderIdentity"]
                .as_str()
                .is_some_and(|h| !h.is_empty());
            if !held || record.verb == "delete" {
                valid = None;
            } else if renew_time.as_ref() != Some(&spec["renewTime"]) {
                let seconds = spec["leaseDurationSeconds"].as_u64().unwrap_or(0);
                valid = Some((
                    record.time,
                    after(record.time, Duration::from_secs(seconds)),
                ));
            }
            renew_time = Some(spec["renewTime"].clone());
            continue;
        }
        let by_controller = record.resource.starts_with("gitpromotions.")
            || (record.resource.starts_with("clusterprofiles.")
                && record.field_manager == CONTROLLER_MANAGER);
        if by_controller && valid.is_none_or(|(_, until)| record.time >= until) {
            violations.push(Violation::UnleasedWrite {
                resource: record.resource.clone(),
                name: record.name.clone(),
                at: record.time,
                renewed: valid.map(|(renewed, _)| renewed),
                valid_until: valid.map(|(_, until)| until),
            });
        }
    }
    violations
}

fn label<'v>(object: &'v Value, key: &str) -> Option<&'v str> {
    object["metadata"]["labels"][key].as_str()
}

fn snapshot_of(object: &Value) -> Option<u64> {
    object["metadata"]["annotations"][SNAPSHOT_INDEX_ANNOTATION]
        .as_str()
        .and_then(|s| s.parse().ok())
}

fn after(at: DateTime<Utc>, wait: Duration) -> DateTime<Utc> {
    at + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX)
}

/// Whether `at`, generous by the clock granularity, is no earlier than `not_before`.
fn not_earlier(at: DateTime<Utc>, not_before: DateTime<Utc>) -> bool {
    after(at, CLOCK_GRANULARITY) >= not_before
}

/// What a summary deploys: its profile spec without the fields that choose clusters or say what
/// happens when one stops matching (a waved stage changes those, never what is deployed).
fn deployed_inputs(spec: &Value) -> Value {
    let mut spec = spec.clone();
    if let Some(fields) = spec.as_object_mut() {
        for field in [
            "clusterSelector",
            "clusterRefs",
            "setRefs",
            "stopMatchingBehavior",
        ] {
            fields.remove(field);
        }
    }
    spec
}

fn all_features_provisioned(summary: &Value) -> bool {
    summary["status"]["featureSummaries"]
        .as_array()
        .is_some_and(|features| {
            !features.is_empty()
                && features
                    .iter()
                    .all(|f| f["status"].as_str() == Some("Provisioned"))
        })
}

impl<'a> Replay<'a> {
    /// The plan and stage index a generated object belongs to.
    fn stage_of(&self, object: &Value) -> Option<(&'a PromotionPlan, usize)> {
        let plan = *self.plans.get(label(object, PROMOTION_LABEL)?)?;
        let stage = label(object, STAGE_LABEL)?;
        let index = plan.stages.iter().position(|s| s.name == stage)?;
        Some((plan, index))
    }

    fn on_profile(&mut self, record: &WriteRecord) {
        if record.field_manager != CONTROLLER_MANAGER
            || record.status_subresource
            || record.verb == "delete"
            || label(&record.object, VERIFICATION_LABEL).is_some()
        {
            return;
        }
        let Some((plan, stage)) = self.stage_of(&record.object) else {
            return;
        };
        let Some(snapshot) = snapshot_of(&record.object) else {
            self.violations.push(Violation::Unreadable {
                promotion: plan.name.clone(),
                resource: record.name.clone(),
                at: record.time,
                what: "snapshot index",
            });
            return;
        };
        let key = (plan.name.clone(), stage);
        self.latest_applied.insert(key.clone(), snapshot);
        let firsts = self.applied.entry(key).or_default();
        if firsts.contains_key(&snapshot) {
            return;
        }
        firsts.insert(snapshot, record.time);
        if plan.stages[stage].clusters.is_empty() {
            // Nothing to provision: done as soon as applied.
            self.provisioned
                .entry((plan.name.clone(), stage, snapshot))
                .or_insert(record.time);
        }
        self.first_applies.push(FirstApply {
            promotion: plan.name.clone(),
            stage,
            snapshot,
            at: record.time,
        });
        self.check_predecessors(plan, stage, snapshot, record.time);
    }

    fn check_predecessors(
        &mut self,
        plan: &PromotionPlan,
        stage: usize,
        snapshot: u64,
        at: DateTime<Utc>,
    ) {
        let stage_name = &plan.stages[stage].name;
        for earlier in 0..stage {
            let earlier_plan = &plan.stages[earlier];
            let applied = self
                .applied
                .get(&(plan.name.clone(), earlier))
                .and_then(|firsts| firsts.get(&snapshot));
            if applied.is_none_or(|t| *t > at) {
                self.violations.push(Violation::EarlierStageNotApplied {
                    promotion: plan.name.clone(),
                    stage: stage_name.clone(),
                    snapshot,
                    at,
                    earlier: earlier_plan.name.clone(),
                });
                continue;
            }
            let Some(provisioned) = self
                .provisioned
                .get(&(plan.name.clone(), earlier, snapshot))
                .copied()
            else {
                self.violations.push(Violation::EarlierStageNotProvisioned {
                    promotion: plan.name.clone(),
                    stage: stage_name.clone(),
                    snapshot,
                    at,
                    earlier: earlier_plan.name.clone(),
                });
                continue;
            };
            if earlier + 1 == stage && !not_earlier(at, after(provisioned, earlier_plan.delay)) {
                self.violations.push(Violation::DelayShortened {
                    promotion: plan.name.clone(),
                    stage: stage_name.clone(),
                    snapshot,
                    at,
                    previous: earlier_plan.name.clone(),
                    by: "ClusterSummaries in the log",
                    provisioned,
                    delay: earlier_plan.delay,
                });
            }
            if earlier_plan.manual && plan.approved_at.is_none_or(|t| !not_earlier(at, t)) {
                self.violations.push(Violation::PassedGateUnapproved {
                    promotion: plan.name.clone(),
                    stage: stage_name.clone(),
                    snapshot,
                    at,
                    gate: earlier_plan.name.clone(),
                    approved: plan.approved_at,
                });
            }
        }
    }

    fn on_summary(&mut self, record: &WriteRecord) {
        let key = format!("{}/{}", record.namespace, record.name);
        if record.verb == "delete" {
            self.summaries.remove(&key);
            return;
        }
        let object = &record.object;
        let spec = deployed_inputs(&object["spec"]["clusterProfileSpec"]);
        let snapshot = snapshot_of(object);
        let provisioned_now = all_features_provisioned(object);
        let provisioned_for = if record.status_subresource {
            snapshot.filter(|_| provisioned_now)
        } else {
            // A metadata/spec update: still Provisioned only if the deployed inputs are the same.
            let before = self.summaries.get(&key);
            snapshot.filter(|_| {
                provisioned_now
                    && before.is_some_and(|b| b.provisioned_for.is_some() && b.spec == spec)
            })
        };
        self.summaries.insert(
            key,
            SummaryState {
                provisioned_for,
                spec,
            },
        );
        let (Some(snapshot), Some((plan, stage))) = (provisioned_for, self.stage_of(object)) else {
            return;
        };
        let profile = stage_profile_name(&plan.name, &plan.stages[stage].name);
        let all = plan.stages[stage].clusters.iter().all(|cluster| {
            let (namespace, name) = cluster.split_once('/').unwrap_or(("", cluster));
            self.summaries
                .get(&format!("{namespace}/{profile}-sveltos-{name}"))
                .is_some_and(|s| s.provisioned_for == Some(snapshot))
        });
        if all {
            self.provisioned
                .entry((plan.name.clone(), stage, snapshot))
                .or_insert(record.time);
        }
    }

    fn on_status(&mut self, record: &WriteRecord) {
        let Some(status) = record.object.get("status").filter(|s| s.is_object()) else {
            return;
        };
        let promotion = record.name.clone();
        for stage in status["stages"].as_array().into_iter().flatten() {
            let (Some(name), Some(snapshot), Some(at)) = (
                stage["name"].as_str(),
                stage["snapshotIndex"].as_u64(),
                stage["provisionedAt"]
                    .as_str()
                    .and_then(|t| DateTime::parse_from_rfc3339(t).ok()),
            ) else {
                continue;
            };
            self.persisted_provisioned
                .entry((promotion.clone(), name.to_string(), snapshot))
                .or_default()
                .push((record.time, at.with_timezone(&Utc)));
        }
        for consumed in status["consumedApprovals"].as_array().into_iter().flatten() {
            let (Some(commit), Some(run)) = (consumed["commit"].as_str(), consumed["run"].as_u64())
            else {
                continue;
            };
            self.consumed
                .entry((promotion.clone(), commit.to_string()))
                .or_default()
                .insert(run);
        }
        self.last_status.insert(promotion, status.clone());
    }

    fn check_persisted_delays(&mut self) {
        for apply in std::mem::take(&mut self.first_applies) {
            if apply.stage == 0 {
                continue;
            }
            let Some(plan) = self.plans.get(apply.promotion.as_str()) else {
                continue;
            };
            let previous = &plan.stages[apply.stage - 1];
            let key = (
                apply.promotion.clone(),
                previous.name.clone(),
                apply.snapshot,
            );
            // Only what the controller had persisted when it moved on can have informed that
            // step: after a lost status write it re-derives `provisionedAt`, later than the apply.
            let persisted_before = self.persisted_provisioned.get(&key).and_then(|writes| {
                writes
                    .iter()
                    .filter(|(written, _)| *written <= apply.at)
                    .map(|(_, provisioned)| *provisioned)
                    .min()
            });
            if let Some(provisioned) = persisted_before
                && !not_earlier(apply.at, after(provisioned, previous.delay))
            {
                self.violations.push(Violation::DelayShortened {
                    promotion: apply.promotion.clone(),
                    stage: plan.stages[apply.stage].name.clone(),
                    snapshot: apply.snapshot,
                    at: apply.at,
                    previous: previous.name.clone(),
                    by: "persisted provisionedAt",
                    provisioned,
                    delay: previous.delay,
                });
            }
        }
        for ((promotion, commit), runs) in &self.consumed {
            if runs.len() > 1 {
                self.violations.push(Violation::ApprovalReused {
                    promotion: promotion.clone(),
                    commit: commit.clone(),
                    runs: runs.clone(),
                });
            }
        }
    }

    fn check_completed(&mut self, plan: &PromotionPlan) {
        let expected = plan.final_snapshot;
        let not_completed = |detail: String| Violation::NotCompleted {
            promotion: plan.name.clone(),
            expected,
            detail,
        };
        match self.last_status.get(&plan.name) {
            None => self
                .violations
                .push(not_completed("no status was ever written".into())),
            Some(status) => {
                let phase = status["phase"].as_str().unwrap_or("?");
                let snapshot = status["snapshotIndex"].as_u64();
                if phase != "Completed" || snapshot != Some(expected) {
                    self.violations.push(not_completed(format!(
                        "last status is {phase} on snapshot {snapshot:?}"
                    )));
                }
            }
        }
        for (index, stage) in plan.stages.iter().enumerate() {
            let latest = self.latest_applied.get(&(plan.name.clone(), index));
            if latest != Some(&expected) {
                self.violations.push(not_completed(format!(
                    "stage {} last applied snapshot {latest:?}",
                    stage.name
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::StagePlan;
    use super::*;
    use serde_json::json;

    fn t(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).expect("valid time")
    }

    fn plan(delays: &[u64], manual_first: bool) -> PromotionPlan {
        PromotionPlan {
            name: "p".into(),
            stages: delays
                .iter()
                .enumerate()
                .map(|(i, d)| StagePlan {
                    name: format!("s{i}"),
                    delay: Duration::from_secs(*d),
                    manual: manual_first && i == 0,
                    group: i,
                    clusters: vec![format!("fleet/c{i}")],
                })
                .collect(),
            depends_on: None,
            final_snapshot: 1,
            approved_at: None,
            tier: None,
        }
    }

    fn record(
        at: DateTime<Utc>,
        resource: &str,
        name: &str,
        status: bool,
        object: Value,
    ) -> WriteRecord {
        WriteRecord {
            time: at,
            verb: "apply".into(),
            resource: resource.into(),
            status_subresource: status,
            namespace: object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("")
                .into(),
            name: name.into(),
            field_manager: if resource.starts_with("clustersummaries") {
                "addon-controller".into()
            } else {
                "tollgate".into()
            },
            user_agent: String::new(),
            resource_version: 0,
            object,
        }
    }

    fn meta(stage: usize, snapshot: u64, name: &str, namespace: &str) -> Value {
        json!({"name": name, "namespace": namespace,
            "labels": {PROMOTION_LABEL: "p", STAGE_LABEL: format!("s{stage}")},
            "annotations": {SNAPSHOT_INDEX_ANNOTATION: snapshot.to_string()}})
    }

    fn lease(at: i64, holder: Option<&str>, renewed: i64) -> WriteRecord {
        let object = json!({"metadata": {"name": "tollgate-leader", "namespace": "default"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 5,
                "renewTime": t(renewed).to_rfc3339()}});
        record(t(at), LEASE_RESOURCE, "tollgate-leader", false, object)
    }

    #[test]
    fn no_controller_write_without_a_valid_lease() {
        let leased = [
            lease(0, Some("a"), 0),
            apply(1, 0, 1),
            // A stamp on the Lease renews nothing.
            lease(3, Some("a"), 0),
            apply(4, 0, 1),
        ];
        assert_eq!(check_leased(&leased), vec![]);
        let expired = [
            lease(0, Some("a"), 0),
            lease(3, Some("a"), 0),
            apply(6, 0, 1),
        ];
        assert!(matches!(
            check_leased(&expired)[..],
            [Violation::UnleasedWrite { .. }]
        ));
        let released = [lease(0, Some("a"), 0), lease(1, None, 0), apply(2, 0, 1)];
        assert_eq!(check_leased(&released).len(), 1);
        assert_eq!(check_leased(&[apply(0, 0, 1)]).len(), 1, "never leased");
        let renewed = [
            lease(0, Some("a"), 0),
            lease(4, Some("a"), 4),
            apply(8, 0, 1),
        ];
        assert_eq!(check_leased(&renewed), vec![]);
    }

    fn apply(at: i64, stage: usize, snapshot: u64) -> WriteRecord {
        let name = format!("p-s{stage}");
        let object = json!({"metadata": meta(stage, snapshot, &name, ""), "spec": {"v": snapshot}});
        record(
            t(at),
            "clusterprofiles.config.projectsveltos.io",
            &name,
            false,
            object,
        )
    }

    fn summary(at: i64, stage: usize, snapshot: u64, state: &str) -> WriteRecord {
        let name = format!("p-s{stage}-sveltos-c{stage}");
        let object = json!({"metadata": meta(stage, snapshot, &name, "fleet"),
            "spec": {"clusterProfileSpec": {"v": snapshot}},
            "status": {"featureSummaries": [{"featureID": "Helm", "status": state}]}});
        record(
            t(at),
            "clustersummaries.config.projectsveltos.io",
            &name,
            true,
            object,
        )
    }

    fn status(at: i64, value: Value) -> WriteRecord {
        let object = json!({"metadata": {"name": "p"}, "status": value});
        record(t(at), "gitpromotions.tollgate.dev", "p", true, object)
    }

    fn completed(at: i64, snapshot: u64) -> WriteRecord {
        status(at, json!({"phase": "Completed", "snapshotIndex": snapshot}))
    }

    /// Two stages, s0 waits 5 s; everything in order.
    fn good_log() -> Vec<WriteRecord> {
        vec![
            apply(0, 0, 1),
            summary(1, 0, 1, "Provisioning"),
            summary(2, 0, 1, "Provisioned"),
            status(
                3,
                json!({"phase": "Waiting", "snapshotIndex": 1,
                "stages": [{"name": "s0", "snapshotIndex": 1, "provisionedAt": t(3).to_rfc3339()}]}),
            ),
            apply(8, 1, 1),
            summary(9, 1, 1, "Provisioned"),
            completed(10, 1),
        ]
    }

    #[test]
    fn an_orderly_rollout_violates_nothing() {
        assert_eq!(check(&good_log(), &[plan(&[5, 0], false)]), vec![]);
    }

    #[test]
    fn applying_a_stage_before_the_earlier_one_is_caught() {
        let log = vec![
            apply(0, 1, 1),
            apply(1, 0, 1),
            summary(2, 0, 1, "Provisioned"),
            completed(3, 1),
        ];
        let violations = check(&log, &[plan(&[0, 0], false)]);
        assert!(
            matches!(violations.as_slice(), [Violation::EarlierStageNotApplied { earlier, .. }] if earlier == "s0"),
            "{violations:?}"
        );
    }

    #[test]
    fn applying_before_the_earlier_stage_is_provisioned_is_caught() {
        let log = vec![
            apply(0, 0, 1),
            summary(1, 0, 1, "Provisioning"),
            apply(2, 1, 1),
            summary(3, 0, 1, "Provisioned"),
            completed(4, 1),
        ];
        let violations = check(&log, &[plan(&[0, 0], false)]);
        assert!(
            matches!(
                violations.as_slice(),
                [Violation::EarlierStageNotProvisioned { .. }]
            ),
            "{violations:?}"
        );
    }

    #[test]
    fn provisioned_for_an_older_spec_does_not_count() {
        // Snapshot 2 rewrites the summary's spec while its status still says Provisioned (for 1).
        let mut stale = summary(11, 0, 2, "Provisioned");
        stale.status_subresource = false;
        let mut log = good_log();
        log.extend([apply(10, 0, 2), stale, apply(12, 1, 2)]);
        let mut p = plan(&[0, 0], false);
        p.final_snapshot = 2;
        let violations = check(&log, &[p]);
        assert!(
            violations
                .iter()
                .any(|v| matches!(v, Violation::EarlierStageNotProvisioned { snapshot: 2, .. })),
            "{violations:?}"
        );
    }

    #[test]
    fn a_shortened_delay_is_caught_from_the_summaries() {
        let log = vec![
            apply(0, 0, 1),
            summary(2, 0, 1, "Provisioned"),
            apply(4, 1, 1),
            completed(5, 1),
        ];
        let violations = check(&log, &[plan(&[5, 0], false)]);
        assert!(
            matches!(
                violations.as_slice(),
                [
                    Violation::DelayShortened {
                        by: "ClusterSummaries in the log",
                        ..
                    },
                    ..
                ]
            ),
            "{violations:?}"
        );
    }

    #[test]
    fn a_shortened_delay_is_caught_from_the_persisted_status() {
        // The summaries went Provisioned at 2 (so 8 ≥ 2 + 5 passes), but the controller recorded
        // provisionedAt 6 and still moved on at 8.
        let mut log = good_log();
        log[3] = status(
            6,
            json!({"phase": "Waiting", "snapshotIndex": 1,
            "stages": [{"name": "s0", "snapshotIndex": 1, "provisionedAt": t(6).to_rfc3339()}]}),
        );
        let violations = check(&log, &[plan(&[5, 0], false)]);
        assert!(
            matches!(
                violations.as_slice(),
                [Violation::DelayShortened {
                    by: "persisted provisionedAt",
                    ..
                }]
            ),
            "{violations:?}"
        );
    }

    #[test]
    fn a_provisioned_at_persisted_after_the_next_apply_is_not_a_shortened_delay() {
        // The status write of the step that moved on was lost; the next step re-derived a later
        // provisionedAt. The summaries show the delay was respected.
        let mut log = good_log();
        log.remove(3);
        log.push(status(
            12,
            json!({"phase": "Completed", "snapshotIndex": 1,
            "stages": [{"name": "s0", "snapshotIndex": 1, "provisionedAt": t(11).to_rfc3339()}]}),
        ));
        assert_eq!(check(&log, &[plan(&[5, 0], false)]), vec![]);
    }

    #[test]
    fn passing_a_manual_gate_before_the_approval_is_caught() {
        let mut gated = plan(&[0, 0], true);
        gated.approved_at = Some(t(20));
        let violations = check(&good_log(), &[gated.clone()]);
        assert!(
            matches!(
                violations.as_slice(),
                [Violation::PassedGateUnapproved { .. }]
            ),
            "{violations:?}"
        );
        gated.approved_at = Some(t(7));
        assert_eq!(check(&good_log(), &[gated]), vec![]);
    }

    #[test]
    fn an_approval_consumed_by_two_runs_is_caught() {
        let mut log = good_log();
        log.push(status(
            11,
            json!({"phase": "Completed", "snapshotIndex": 1,
            "consumedApprovals": [{"stage": "s0", "commit": "abc", "run": 1}]}),
        ));
        log.push(status(12, json!({"phase": "Completed", "snapshotIndex": 1,
            "consumedApprovals": [{"stage": "s0", "commit": "abc", "run": 1}, {"stage": "s0", "commit": "abc", "run": 2}]})));
        let violations = check(&log, &[plan(&[5, 0], false)]);
        assert!(
            matches!(violations.as_slice(), [Violation::ApprovalReused { commit, .. }] if commit == "abc"),
            "{violations:?}"
        );
    }

    #[test]
    fn an_unfinished_rollout_is_caught() {
        let mut log = good_log();
        log.truncate(4);
        let violations = check(&log, &[plan(&[5, 0], false)]);
        assert_eq!(violations.len(), 2, "{violations:?}");
        assert!(
            violations
                .iter()
                .all(|v| matches!(v, Violation::NotCompleted { .. }))
        );
    }
}

//! Drift on generated ClusterProfiles: a hand edit (`kubectl edit`/`replace`) of what tollgate set
//! on a profile — spec fields, its labels, its annotations — or a hand delete. The engine
//! re-applies the rendered object and says which fields drifted (docs/operations.md#drift-correction: generated objects are
//! owned).
//!
//! Only what tollgate set is compared: fields others add (server defaults, another manager's
//! labels) are not drift, since an apply would not remove them and the correction would never end.

use serde_json::Value;
use tollgate_model::model::ClusterPromotion;
use tollgate_model::snapshot::Snapshot;
use tollgate_render::{
    MANAGED_BY_LABEL, PROMOTION_LABEL, SPEC_HASH_ANNOTATION, STAGE_LABEL, VERIFICATION_LABEL,
    snapshot_digest, spec_hash, stage_profile_name,
};

use crate::effects::Effects;
use crate::observed::{Observed, ObservedProfile};
use crate::output::{EngineEvent, EventReason};
use crate::stage::waves;
use crate::status::{Phase, PromotionStatus};
use crate::subset::carries;

/// What tollgate set on a stage's main profile, as the watch cache can compare it (the spec
/// itself is rendered only when its hash does not settle it, see [`untouched`]).
pub struct Expected<'a> {
    pub promotion: &'a str,
    pub stage: &'a str,
    /// `tollgate.dev/spec-hash` of that apply: the hash of the spec it applied.
    pub spec_hash: &'a str,
    /// [`tollgate_render::snapshot_digest`] of the run's snapshot.
    pub snapshot_annotations: u64,
}

/// The profile carries exactly the spec tollgate applied (by its hash) and everything else
/// tollgate set: nothing drifted, known without rendering the spec. `false` only says to compare
/// fields ([`drifted_fields`]): a server default added to the spec is not drift either.
pub fn untouched(expected: &Expected<'_>, observed: Option<&ObservedProfile>) -> bool {
    observed.is_some_and(|observed| {
        !observed.deleting
            && observed.spec.hash() == expected.spec_hash
            && metadata_fields(expected, observed).is_empty()
    })
}

/// The fields of a generated profile that differ from what tollgate set, by path
/// (`spec.helmCharts`, `metadata.labels[tollgate.dev/stage]`, …); `["deleted"]` when it is gone.
/// Empty when the profile carries everything tollgate set.
/// `spec` is the spec that apply set (its hash `expected.spec_hash`).
pub fn drifted_fields(
    expected: &Expected<'_>,
    spec: &Value,
    observed: Option<&ObservedProfile>,
) -> Vec<String> {
    let Some(observed) = observed.filter(|p| !p.deleting) else {
        return vec!["deleted".to_string()];
    };
    let mut fields = Vec::new();
    if let Some(fields_set) = spec.as_object()
        && !observed.spec.is(spec)
    {
        let observed_spec = observed.spec.value();
        for (key, value) in fields_set {
            if !carries(value, observed_spec.get(key)) {
                fields.push(format!("spec.{key}"));
            }
        }
    }
    fields.extend(metadata_fields(expected, observed));
    fields
}

/// The labels and annotations tollgate set that the profile no longer carries, by path.
fn metadata_fields(expected: &Expected<'_>, observed: &ObservedProfile) -> Vec<String> {
    let mut fields = Vec::new();
    let labels = [
        (MANAGED_BY_LABEL, observed.managed_by_tollgate),
        (
            PROMOTION_LABEL,
            observed.promotion.as_deref() == Some(expected.promotion),
        ),
        (
            STAGE_LABEL,
            observed.stage.as_deref() == Some(expected.stage),
        ),
        // Set on pre-verification profiles only.
        (VERIFICATION_LABEL, !observed.verification),
    ];
    for (key, as_set) in labels {
        if !as_set {
            fields.push(format!("metadata.labels[{key}]"));
        }
    }
    if observed.spec_hash.as_deref() != Some(expected.spec_hash) {
        fields.push(format!("metadata.annotations[{SPEC_HASH_ANNOTATION}]"));
    }
    if observed.snapshot_annotations != expected.snapshot_annotations {
        fields.push("metadata.annotations[tollgate.dev/snapshot-*]".to_string());
    }
    fields
}

/// The profiles a run applied, as drift correction reads them.
pub(crate) struct RunProfiles<'a> {
    pub promotion: &'a ClusterPromotion,
    /// The run's snapshot.
    pub snapshot: &'a Snapshot,
    pub observed: &'a Observed,
    /// The status persisted by the last step: what earlier steps of this run applied.
    pub persisted: &'a PromotionStatus,
}

impl RunProfiles<'_> {
    /// Re-apply the main profile of every stage this run applied in an earlier step (its apply is
    /// in the persisted status) whose profile no longer carries what tollgate set: a hand edit or
    /// delete. A promotion is not Completed while one of its profiles is being corrected.
    pub(crate) fn correct(&self, status: &mut PromotionStatus, effects: &mut Effects) {
        let drifted = self.drifted(status);
        for (profile, object, fields) in drifted {
            let fields = fields.join(", ");
            effects.events.push(EngineEvent::warning(
                EventReason::DriftCorrected,
                format!("ClusterProfile {profile} drifted from what tollgate applied ({fields}): re-applied"),
            ));
            if status.phase == Phase::Completed {
                status.phase = Phase::Progressing;
                status.message = Some(format!(
                    "correcting drift on ClusterProfile {profile} ({fields})"
                ));
            }
            effects.apply(profile, object);
        }
    }

    /// Each drifted main profile: its name, the object to re-apply, the fields that drifted.
    fn drifted(&self, status: &PromotionStatus) -> Vec<(String, Value, Vec<String>)> {
        let name = self.promotion.name();
        let snapshot_annotations = snapshot_digest(self.snapshot);
        let mut drifted = Vec::new();
        for st in &status.stages {
            let applied_before = self.persisted.stage(&st.name).is_some_and(|p| {
                p.snapshot_index == st.snapshot_index
                    && p.applied_spec_hash == st.applied_spec_hash
                    && p.applied_at == st.applied_at
            });
            let Some(stage) = self.promotion.stage(&st.name) else {
                continue;
            };
            let profile = stage_profile_name(name, &st.name);
            let observed = self.observed.profiles.get(&profile);
            let foreign = observed.is_some_and(|p| !p.is_owned_by(name));
            let retrying = st.retry.as_deref().is_some_and(|r| r.withdrawing());
            if !applied_before || st.snapshot_index != self.snapshot.index || foreign || retrying {
                continue;
            }
            let checks = match (&stage.trigger, st.post_delay_checks_applied) {
                (Some(trigger), true) => trigger.post_delay_health_checks(),
                _ => &[],
            };
            let expected = Expected {
                promotion: name,
                stage: &st.name,
                spec_hash: &st.applied_spec_hash,
                snapshot_annotations,
            };
            // Without appended checks the spec is pinned by the run's hashes, so the recorded
            // hash is its hash: a profile carrying that hash is untouched, without rendering.
            // With them, a trigger edit within the run may have changed the checks, and then
            // what was applied is not known.
            if !st.post_delay_checks_applied && untouched(&expected, observed) {
                continue;
            }
            let spec = waves::main_spec(self.snapshot, stage, checks, st.waves.as_deref());
            if st.post_delay_checks_applied && spec_hash(&spec) != st.applied_spec_hash {
                continue;
            }
            let fields = drifted_fields(&expected, &spec, observed);
            if !fields.is_empty() {
                let object = waves::main_object(self.snapshot, stage, checks, st.waves.as_deref());
                drifted.push((profile, object, fields));
            }
        }
        drifted
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::observed::ObservedSpec;

    fn expected() -> Value {
        json!({
            "metadata": {
                "name": "p-dev",
                "labels": {
                    MANAGED_BY_LABEL: "tollgate",
                    PROMOTION_LABEL: "p",
                    STAGE_LABEL: "dev",
                },
                "annotations": {
                    "tollgate.dev/snapshot-index": "1",
                    "tollgate.dev/snapshot-commit": "abc",
                    "tollgate.dev/snapshot-id": "id",
                    "tollgate.dev/profile-spec-hash": "h",
                    SPEC_HASH_ANNOTATION: "s",
                },
            },
            "spec": {"syncMode": "Continuous", "helmCharts": [{"chartVersion": "1.0.0"}]},
        })
    }

    /// The profile as the watch would decode `object`.
    fn observed(object: &Value) -> ObservedProfile {
        let metadata = &object["metadata"];
        ObservedProfile::from_metadata(
            "p-dev".to_string(),
            |key| metadata["labels"][key].as_str(),
            |key| metadata["annotations"][key].as_str(),
            ObservedSpec::of(&object["spec"]),
            false,
        )
    }

    /// The fields of `observed_object` that drifted from [`expected`].
    fn drifted(observed_object: Option<&ObservedProfile>) -> Vec<String> {
        let object = expected();
        let as_applied = observed(&object);
        drifted_fields(
            &Expected {
                promotion: "p",
                stage: "dev",
                spec_hash: "s",
                snapshot_annotations: as_applied.snapshot_annotations,
            },
            &object["spec"],
            observed_object,
        )
    }

    #[test]
    fn an_untouched_profile_with_server_defaults_has_not_drifted() {
        let mut object = expected();
        object["spec"]["stopMatchingBehavior"] = json!("WithdrawPolicies");
        object["metadata"]["labels"]["team"] = json!("payments");
        assert!(drifted(Some(&observed(&object))).is_empty());
    }

    #[test]
    fn hand_edits_name_the_fields_they_changed() {
        let mut object = expected();
        object["spec"]["helmCharts"][0]["chartVersion"] = json!("9.9.9");
        object["metadata"]["labels"][STAGE_LABEL] = json!("prod");
        object["metadata"]["annotations"]["tollgate.dev/snapshot-index"] = json!("7");
        assert_eq!(
            drifted(Some(&observed(&object))),
            [
                "spec.helmCharts",
                "metadata.labels[tollgate.dev/stage]",
                "metadata.annotations[tollgate.dev/snapshot-*]"
            ]
        );
        let mut object = expected();
        object["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("syncMode");
        object["metadata"]["annotations"][SPEC_HASH_ANNOTATION] = json!("other");
        assert_eq!(
            drifted(Some(&observed(&object))),
            [
                "spec.syncMode",
                "metadata.annotations[tollgate.dev/spec-hash]"
            ]
        );
    }

    /// Whether the profile applied from [`expected`] (annotated with its spec's hash), after
    /// `edit`, is [`untouched`]; `None` when `edit` deletes it.
    fn untouched_after(edit: impl FnOnce(&mut Value) -> Option<ObservedProfile>) -> bool {
        let mut object = expected();
        let applied_hash = tollgate_model::hash::hash_value(&object["spec"]);
        object["metadata"]["annotations"][SPEC_HASH_ANNOTATION] = json!(applied_hash);
        let expected = Expected {
            promotion: "p",
            stage: "dev",
            spec_hash: &applied_hash,
            snapshot_annotations: observed(&object).snapshot_annotations,
        };
        let after = edit(&mut object);
        untouched(&expected, after.as_ref())
    }

    #[test]
    fn a_spec_edited_by_hand_is_not_untouched_though_its_annotations_are() {
        assert!(!untouched_after(|object| {
            object["spec"]["helmCharts"][0]["chartVersion"] = json!("9.9.9");
            Some(observed(object))
        }));
    }

    #[test]
    fn edited_labels_and_deletions_are_not_untouched() {
        assert!(!untouched_after(|object| {
            object["metadata"]["labels"][PROMOTION_LABEL] = json!("other");
            Some(observed(object))
        }));
        assert!(!untouched_after(|object| {
            object["metadata"]["annotations"][SPEC_HASH_ANNOTATION] = json!("other");
            Some(observed(object))
        }));
        assert!(!untouched_after(|object| {
            let mut deleting = observed(object);
            deleting.deleting = true;
            Some(deleting)
        }));
        assert!(!untouched_after(|_| None));
    }

    #[test]
    fn the_profile_as_applied_is_untouched_and_a_server_default_sends_to_the_fields() {
        assert!(untouched_after(|object| Some(observed(object))));
        assert!(!untouched_after(|object| {
            object["spec"]["stopMatchingBehavior"] = json!("WithdrawPolicies");
            Some(observed(object))
        }));
        let mut object = expected();
        object["spec"]["stopMatchingBehavior"] = json!("WithdrawPolicies");
        assert!(drifted(Some(&observed(&object))).is_empty());
    }

    #[test]
    fn a_deleted_profile_has_drifted() {
        assert_eq!(drifted(None), ["deleted"]);
        let mut deleting = observed(&expected());
        deleting.deleting = true;
        assert_eq!(drifted(Some(&deleting)), ["deleted"]);
    }
}

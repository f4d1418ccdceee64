//! A RolloutPolicy's structure checked against its schema: the JSON Schema derived from the
//! model's types (`tollgate_model::policy_schema`, what `tollgate schema rolloutpolicy` prints),
//! walked by the schema crate as ClusterPromotions are against their CRD. Unknown fields, wrong
//! types, missing fields and values outside an enumeration are found there; what each is told
//! (a code and a message pointing at the field, in the words a policy author reads: which
//! fields an object has, what a value should look like) is [`crate::policy_wording`]'s. The
//! rules a schema cannot say (durations, names, CEL, PromQL, references between fields) are
//! the `policy*` modules'.

use std::sync::OnceLock;

use serde_json::Value;
use tollgate_schema::{Checks, StructuralSchema, UnknownFields};

use crate::diagnostic::Finding;
use crate::policy_wording::tell;

/// A policy is linted, not admitted: unknown fields are errors, nothing is defaulted (the model
/// has its defaults), and an integer is written as one.
const CHECKS: Checks = Checks {
    unknown_fields: UnknownFields::Report,
    defaults: false,
    list_types: false,
    integral_floats: false,
};

/// The derived schema, and compiled for the walker.
struct PolicySchema {
    derived: Value,
    compiled: StructuralSchema,
}

static SCHEMA: OnceLock<PolicySchema> = OnceLock::new();

/// The RolloutPolicy schema, compiled once.
fn policy_schema() -> &'static PolicySchema {
    SCHEMA.get_or_init(|| {
        let derived = tollgate_model::policy_schema::rollout_policy_schema();
        let compiled = StructuralSchema::compile(&derived, |_| None)
            .expect("the derived RolloutPolicy schema compiles (unit-tested)");
        PolicySchema { derived, compiled }
    })
}

/// The structural findings of a policy document (its nulls where the policy format treats them
/// as absent already pruned): each violation of the schema, told once.
pub fn check_structure(document: &Value, findings: &mut Vec<Finding>) {
    let mut walked = document.clone();
    let schema = policy_schema();
    let violations = schema
        .compiled
        .validate_keeping_nulls(&mut walked, &CHECKS)
        .violations;
    let mut told: Vec<Finding> = Vec::new();
    for violation in violations {
        if let Some(finding) = tell(&violation, document, &schema.derived)
            && !told.contains(&finding)
        {
            told.push(finding);
        }
    }
    findings.extend(told);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_derived_schema_compiles_and_accepts_a_full_policy() {
        let policy = json!({
            "apiVersion": "tollgate.dev/v1alpha1", "kind": "RolloutPolicy",
            "metadata": {"name": "p"},
            "spec": {
                "selector": {"matchLabels": {"tier": "web"}},
                "maxFailures": "10%", "onFailure": "Rollback",
                "stages": {"prod": {"waves": {"size": 2, "canary": 1}, "pausedClusters": "Skip"}},
                "notify": [{"name": "n", "type": "slack", "addressSecretFile": "/s",
                            "events": ["Completed", "WaveStarted"]}],
                "analyses": [{"name": "a", "web": {"url": "https://x"}, "count": 2,
                              "successCondition": "result", "onNoData": "Pass"}],
                "approvals": {"prod": {"approvers": ["a"], "minApprovals": 1}},
                "rollback": {"strategy": "Staged"}, "onRewind": "Hold"
            }
        });
        let mut findings = Vec::new();
        check_structure(&policy, &mut findings);
        assert_eq!(findings, Vec::new());
    }
}

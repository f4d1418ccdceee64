//! `spec.approvals` of a RolloutPolicy (issue #33, docs/rollout-policy.md#approvals): per manual
//! gate, who may approve and how many must. Its structure is the schema's
//! ([`crate::policy_schema`]); the rules here are the stage names, distinct principals and a
//! quorum the listed approvers can reach.

use serde_json::{Map, Value};

use crate::diagnostic::Finding;
use crate::located::child_path;
use crate::policy_fields::stage_name_key;
use crate::policy_wording::principal_message;

/// `spec.approvals`: a mapping from stage name to an approval policy.
pub(crate) fn check_approvals(stages: &Map<String, Value>, findings: &mut Vec<Finding>) {
    for (stage, body) in stages {
        let path = child_path("spec.approvals", stage);
        stage_name_key(stage, &path, findings);
        if let Some(fields) = body.as_object() {
            check_fields(fields, &path, findings);
        }
    }
}

fn check_fields(fields: &Map<String, Value>, path: &str, findings: &mut Vec<Finding>) {
    let listed = fields
        .get("approvers")
        .and_then(Value::as_array)
        .map(|a| check_principals(a, &child_path(path, "approvers"), findings));
    let min = fields.get("minApprovals").and_then(Value::as_u64);
    if let (Some(listed), Some(n)) = (listed, min)
        && listed > 0
        && n > listed as u64
        && n <= u64::from(u32::MAX)
    {
        findings.push(Finding::error(
            "unreachable-quorum",
            child_path(path, "minApprovals"),
            format!("Invalid value: {n}: the gate could never open, only {listed} distinct approvers are listed"),
        ));
    }
}

/// A list (at `path`: `approvers`, `admins`) of distinct, non-empty principals. How many
/// distinct ones are listed.
pub(crate) fn check_principals(list: &[Value], path: &str, findings: &mut Vec<Finding>) -> usize {
    let field = path.rsplit('.').next().unwrap_or(path);
    let mut seen = std::collections::BTreeSet::new();
    for (index, approver) in list.iter().enumerate() {
        let item = crate::located::item_path(path, index);
        let Some(name) = approver.as_str().map(str::trim) else {
            continue;
        };
        if name.is_empty() {
            findings.push(Finding::error(
                "invalid-value",
                item,
                principal_message(field, approver),
            ));
        } else if !seen.insert(name.to_ascii_lowercase()) {
            findings.push(Finding::error(
                "duplicate-value",
                item,
                format!("Duplicate value: {name:?} is listed twice (principals compare case-insensitively)"),
            ));
        }
    }
    seen.len()
}

#[cfg(test)]
mod tests {
    use crate::parse::{Limits, parse_file};
    use crate::policy::ParsedPolicy;

    fn read(spec: &str) -> ParsedPolicy {
        let text = format!(
            "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: gates\nspec:\n{spec}"
        );
        let mut parsed = parse_file("p.yaml", text.as_bytes(), &Limits::default());
        assert_eq!(parsed.policies.len(), 1, "{parsed:?}");
        parsed.policies.remove(0)
    }

    #[test]
    fn the_issue_example_is_read_into_the_model() {
        let parsed = read(
            "  approvals:\n    production:\n      approvers: [\"sre-lead\", \"alice@example.com\"]\n      minApprovals: 2\n      forbidSelfApproval: true\n      requireSignature: true\n",
        );
        assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
        let policy = parsed.policy.expect("a policy");
        let production = policy.for_stage("production").approvals.expect("approvals");
        assert_eq!(production.approvers, ["sre-lead", "alice@example.com"]);
        assert_eq!(production.min_approvals, 2);
        assert!(production.forbid_self_approval && production.require_signature);
        assert!(policy.for_stage("staging").approvals.is_none());
    }

    #[test]
    fn bad_approval_policies_name_line_and_field() {
        let parsed = read(
            "  approvals:\n    production:\n      approvers: [alice, Alice, \"\"]\n      minApprovals: 3\n      requireSignature: yes please\n      quorum: 2\n    Bad_Stage: {minApprovals: 0}\n",
        );
        assert!(parsed.policy.is_none());
        let found: Vec<(u32, &str, &str)> = parsed
            .diagnostics
            .iter()
            .map(|d| (d.line, d.path.as_str(), d.code))
            .collect();
        for expected in [
            (
                8,
                "spec.approvals.production.approvers[1]",
                "duplicate-value",
            ),
            (8, "spec.approvals.production.approvers[2]", "invalid-value"),
            (
                9,
                "spec.approvals.production.minApprovals",
                "unreachable-quorum",
            ),
            (
                10,
                "spec.approvals.production.requireSignature",
                "wrong-type",
            ),
            (11, "spec.approvals.production.quorum", "unknown-field"),
            (12, "spec.approvals.Bad_Stage", "invalid-stage-name"),
            (12, "spec.approvals.Bad_Stage.minApprovals", "invalid-value"),
        ] {
            assert!(
                found.contains(&expected),
                "{expected:?} missing from {found:?}"
            );
        }
    }
}

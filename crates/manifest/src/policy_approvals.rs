//! `spec.approvals` of a RolloutPolicy (issue #33, docs/rollout-policy.md#approvals): per manual
//! gate, who may approve and how many must. Checked field by field like the rest of the policy.

use serde_json::{Map, Value};

use crate::diagnostic::Finding;
use crate::located::child_path;
use crate::policy_fields::stage_name_key;

const APPROVAL_FIELDS: &[&str] = &[
    "approvers",
    "minApprovals",
    "forbidSelfApproval",
    "requireSignature",
];

/// `spec.approvals`: a mapping from stage name to an approval policy.
pub(crate) fn check_approvals(approvals: &Value, findings: &mut Vec<Finding>) {
    let Some(stages) = approvals.as_object() else {
        findings.push(Finding::error(
            "wrong-type",
            "spec.approvals",
            "Invalid value: approvals must be a mapping from stage name to an approval policy, e.g. `production: {approvers: [alice@example.com], minApprovals: 1}`",
        ));
        return;
    };
    for (stage, body) in stages {
        let path = child_path("spec.approvals", stage);
        stage_name_key(stage, &path, findings);
        let Some(fields) = body.as_object() else {
            findings.push(Finding::error(
                "wrong-type",
                path,
                "Invalid value: an approval policy must be a mapping of approvers, minApprovals, forbidSelfApproval and requireSignature",
            ));
            continue;
        };
        check_fields(fields, &path, findings);
    }
}

fn check_fields(fields: &Map<String, Value>, path: &str, findings: &mut Vec<Finding>) {
    for field in fields
        .keys()
        .filter(|f| !APPROVAL_FIELDS.contains(&f.as_str()))
    {
        findings.push(
            Finding::error(
                "unknown-field",
                child_path(path, field),
                format!(
                    "unknown field {field:?}: an approval policy has only {}",
                    APPROVAL_FIELDS.join(", ")
                ),
            )
            .at_key(),
        );
    }
    let approvers = fields
        .get("approvers")
        .map(|a| check_approvers(a, path, findings));
    for flag in ["forbidSelfApproval", "requireSignature"] {
        if fields.get(flag).is_some_and(|v| !v.is_boolean()) {
            findings.push(Finding::error(
                "wrong-type",
                child_path(path, flag),
                format!("Invalid value: {flag} must be true or false"),
            ));
        }
    }
    let Some(min) = fields.get("minApprovals") else {
        return;
    };
    let min_path = child_path(path, "minApprovals");
    match min.as_u64() {
        Some(n) if n >= 1 && n <= u64::from(u32::MAX) => {
            if let Some(Some(listed)) = approvers
                && listed > 0
                && n > listed as u64
            {
                findings.push(Finding::error(
                    "unreachable-quorum",
                    min_path,
                    format!("Invalid value: {n}: the gate could never open, only {listed} distinct approvers are listed"),
                ));
            }
        }
        _ => findings.push(Finding::error(
            "invalid-value",
            min_path,
            format!("Invalid value: {min}: minApprovals must be a whole number of at least 1"),
        )),
    }
}

/// `approvers`: a list of distinct, non-empty principals. How many distinct ones are listed,
/// when it is a list.
fn check_approvers(approvers: &Value, path: &str, findings: &mut Vec<Finding>) -> Option<usize> {
    check_principals(
        approvers,
        &child_path(path, "approvers"),
        "approvers",
        findings,
    )
}

/// A list (`field` at `path`: `approvers`, `admins`) of distinct, non-empty principals. How many
/// distinct ones are listed, when it is a list.
pub(crate) fn check_principals(
    principals: &Value,
    path: &str,
    field: &str,
    findings: &mut Vec<Finding>,
) -> Option<usize> {
    let path = path.to_string();
    let Some(list) = principals.as_array() else {
        findings.push(Finding::error(
            "wrong-type",
            path,
            format!("Invalid value: {field} must be a list of principals from the trusted keys, e.g. [\"sre-lead\", \"alice@example.com\"]"),
        ));
        return None;
    };
    let mut seen = std::collections::BTreeSet::new();
    for (index, approver) in list.iter().enumerate() {
        let item = crate::located::item_path(&path, index);
        match approver.as_str().map(str::trim) {
            Some(name) if !name.is_empty() => {
                if !seen.insert(name.to_ascii_lowercase()) {
                    findings.push(Finding::error(
                        "duplicate-value",
                        item,
                        format!("Duplicate value: {name:?} is listed twice (principals compare case-insensitively)"),
                    ));
                }
            }
            _ => findings.push(Finding::error(
                "invalid-value",
                item,
                format!("Invalid value: {approver}: each of {field} is a non-empty principal (an allowed-signers principal or an OpenPGP user-ID e-mail)"),
            )),
        }
    }
    Some(seen.len())
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

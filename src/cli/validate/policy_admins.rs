//! A RolloutPolicy that gates stages with `approvals` but lists no `admins` separates no duties
//! (issue #44): anyone who can sign a commit can lift its gates by editing it, and the change
//! takes effect as committed. A warning says so where the approvals are declared. (Analyses are
//! gates too, but judge measurements, not people: no warning for them alone.)

use tollgate_manifest::{Diagnostic, RolloutPolicy, Severity};

use super::policies::key_position;

/// One warning for a policy with gates and without admins.
pub fn diagnostics<'t>(
    policy: &RolloutPolicy,
    file: &str,
    line: u32,
    text_of: &impl Fn(&str) -> Option<&'t str>,
) -> Vec<Diagnostic> {
    if !policy.spec.admins.is_empty() {
        return Vec::new();
    }
    let gated: Vec<&str> = policy.spec.approvals.keys().map(String::as_str).collect();
    if gated.is_empty() {
        return Vec::new();
    }
    let (line, column) = text_of(file)
        .and_then(|text| key_position(text, line, &["spec", "approvals"]))
        .unwrap_or((line, 1));
    vec![Diagnostic {
        severity: Severity::Warning,
        code: "policy-without-admins",
        file: file.to_string(),
        line,
        column,
        path: "spec.approvals".to_string(),
        message: format!(
            "RolloutPolicy {:?} gates stage {} but lists no admins: anyone who can sign a commit can lift its gates by editing it; list who approves its changes under spec.admins (docs/trust.md#admins)",
            policy.name(),
            gated.join(", ")
        ),
    }]
}

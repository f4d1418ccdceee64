//! CEL rules (`x-kubernetes-validations`): the schema keeps every rule's text and message; a rule
//! is checked only when the caller supplies a Rust implementation for its text.

use serde_json::{Map, Value};

/// One implemented rule: a stable code for its violations, and the check (true = valid) of the
/// object the rule is declared on.
#[derive(Clone, Copy)]
pub struct CrdRule {
    pub code: &'static str,
    pub check: fn(&Map<String, Value>) -> bool,
}

/// The implementation of a rule, by the rule's text (`None`: the rule is kept, not checked).
pub type RuleLookup = fn(&str) -> Option<CrdRule>;

/// One `x-kubernetes-validations` entry of a schema node.
pub(crate) struct ValidationRule {
    /// The rule's text, whitespace normalised (CRDs fold long rules over several lines).
    pub text: String,
    /// The rule's `message`, or `failed rule: <rule>` as the API server says without one.
    pub message: String,
    pub implementation: Option<CrdRule>,
}

impl ValidationRule {
    pub(crate) fn compile(rule: &Value, lookup: RuleLookup) -> Self {
        let text = rule.get("rule").and_then(Value::as_str).unwrap_or_default();
        let normalized = normalize_rule(text);
        Self {
            message: rule
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("failed rule: {text}")),
            implementation: lookup(&normalized),
            text: normalized,
        }
    }
}

/// A rule's text with every run of whitespace made one space.
pub fn normalize_rule(rule: &str) -> String {
    rule.split_whitespace().collect::<Vec<_>>().join(" ")
}

//! Rust implementations of the CEL rules (`x-kubernetes-validations`) in the embedded Sveltos
//! CRDs, matched by their exact rule text. A test in [`crate::schema`] asserts every rule in every
//! embedded CRD has one, so a CRD update cannot silently drop a check.

use serde_json::{Map, Value};
use tollgate_schema::{CrdRule, normalize_rule};

fn has(object: &Map<String, Value>, field: &str) -> bool {
    object.contains_key(field)
}

/// `self.repositoryURL.startsWith(prefix) ? size(self.<field>) >= 1 : true`. A missing field makes
/// CEL fail with "no such key", which the API server reports as a rejection too.
fn non_empty_when_url_starts_with(object: &Map<String, Value>, prefix: &str, field: &str) -> bool {
    let url = object.get("repositoryURL").and_then(Value::as_str);
    match url {
        Some(url) if url.starts_with(prefix) => object
            .get(field)
            .and_then(Value::as_str)
            .is_some_and(|v| !v.is_empty()),
        _ => true,
    }
}

const RULES: &[(&str, CrdRule)] = &[
    (
        "has(self.manual) != has(self.auto)",
        CrdRule {
            code: "trigger-needs-auto-xor-manual",
            check: |o| has(o, "manual") != has(o, "auto"),
        },
    ),
    (
        "has(self.remoteURL) != has(self.kind)",
        CrdRule {
            code: "remote-url-xor-kind",
            check: |o| has(o, "remoteURL") != has(o, "kind"),
        },
    ),
    (
        "!has(self.jobCheck) || (!has(self.script) && !has(self.evaluateCEL))",
        CrdRule {
            code: "job-check-exclusive",
            check: |o| !has(o, "jobCheck") || (!has(o, "script") && !has(o, "evaluateCEL")),
        },
    ),
    (
        "self.repositoryURL.startsWith('http') ? size(self.chartName) >= 1 : true",
        CrdRule {
            code: "helm-chart-name-missing",
            check: |o| non_empty_when_url_starts_with(o, "http", "chartName"),
        },
    ),
    (
        "self.repositoryURL.startsWith('oci') ? size(self.chartName) >= 1 : true",
        CrdRule {
            code: "helm-chart-name-missing",
            check: |o| non_empty_when_url_starts_with(o, "oci", "chartName"),
        },
    ),
    (
        "self.repositoryURL.startsWith('http') ? size(self.chartVersion) >= 1 : true",
        CrdRule {
            code: "helm-chart-version-missing",
            check: |o| non_empty_when_url_starts_with(o, "http", "chartVersion"),
        },
    ),
    (
        "self.repositoryURL.startsWith('oci') ? size(self.chartVersion) >= 1 : true",
        CrdRule {
            code: "helm-chart-version-missing",
            check: |o| non_empty_when_url_starts_with(o, "oci", "chartVersion"),
        },
    ),
    (
        "self.repositoryURL.startsWith('http') ? size(self.repositoryName) >= 1 : true",
        CrdRule {
            code: "helm-repository-name-missing",
            check: |o| non_empty_when_url_starts_with(o, "http", "repositoryName"),
        },
    ),
    (
        "self.repositoryURL.startsWith('oci') ? size(self.repositoryName) >= 1 : true",
        CrdRule {
            code: "helm-repository-name-missing",
            check: |o| non_empty_when_url_starts_with(o, "oci", "repositoryName"),
        },
    ),
];

/// The implementation of a rule, by its text (whitespace normalised: the CRD folds long rules
/// over several lines).
pub fn implementation(rule: &str) -> Option<CrdRule> {
    let normalized = normalize_rule(rule);
    RULES
        .iter()
        .find(|(text, _)| *text == normalized)
        .map(|(_, rule)| *rule)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(rule: &str, value: Value) -> bool {
        let object = value.as_object().cloned().unwrap_or_default();
        (implementation(rule).expect("implemented").check)(&object)
    }

    #[test]
    fn trigger_xor() {
        let rule = "has(self.manual) != has(self.auto)";
        assert!(check(rule, json!({"auto": {}})));
        assert!(check(rule, json!({"manual": {}})));
        assert!(!check(rule, json!({})));
        assert!(!check(rule, json!({"auto": {}, "manual": {}})));
    }

    #[test]
    fn helm_fields_for_http_and_oci_only() {
        let rule =
            "self.repositoryURL.startsWith('http') ?   size(self.chartVersion)\n >= 1 : true";
        assert!(!check(rule, json!({"repositoryURL": "https://x"})));
        assert!(!check(
            rule,
            json!({"repositoryURL": "https://x", "chartVersion": ""})
        ));
        assert!(check(
            rule,
            json!({"repositoryURL": "https://x", "chartVersion": "1"})
        ));
        assert!(check(rule, json!({"repositoryURL": "git://x"})));
    }

    #[test]
    fn job_check_exclusive() {
        let rule = "!has(self.jobCheck) || (!has(self.script) && !has(self.evaluateCEL))";
        assert!(check(rule, json!({"jobCheck": {}})));
        assert!(!check(rule, json!({"jobCheck": {}, "script": "x"})));
        assert!(!check(rule, json!({"jobCheck": {}, "evaluateCEL": []})));
        assert!(check(rule, json!({"script": "x"})));
    }

    #[test]
    fn unknown_rules_have_no_implementation() {
        assert!(implementation("self.x > 1").is_none());
    }
}

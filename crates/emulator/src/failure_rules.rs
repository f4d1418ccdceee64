//! Failures that depend on what was applied: the fleet file's `failures:` rules make a feature of
//! a cluster fail while the profile spec applied to it carries a matching chart version, so a fix
//! commit that changes the version recovers the cluster, as it would with real Sveltos.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::feature::Feature;

/// A `chartVersion` pattern: `*` matches any run of characters (none included), `?` exactly one,
/// every other character itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionGlob(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    #[error("chartVersion glob must not be empty")]
    Empty,
    #[error(
        "chartVersion glob {pattern:?}: {found:?} is not supported (only `*` and `?` are special)"
    )]
    Unsupported { pattern: String, found: char },
    #[error("chartVersion glob {pattern:?} must not contain whitespace")]
    Whitespace { pattern: String },
}

impl VersionGlob {
    /// Rejects what would never match a version as the user meant: nothing at all, whitespace,
    /// and glob syntax of other tools (character classes, braces, escapes) that this one lacks.
    pub fn new(pattern: &str) -> Result<Self, GlobError> {
        if pattern.is_empty() {
            return Err(GlobError::Empty);
        }
        if pattern.chars().any(char::is_whitespace) {
            return Err(GlobError::Whitespace {
                pattern: pattern.to_string(),
            });
        }
        if let Some(found) = pattern.chars().find(|c| "[]{}\\".contains(*c)) {
            return Err(GlobError::Unsupported {
                pattern: pattern.to_string(),
                found,
            });
        }
        Ok(Self(pattern.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the whole of `text` matches. Linear backtracking to the last `*`: a later `*`
    /// can absorb whatever an earlier one would have, so only the last one needs retrying.
    pub fn matches(&self, text: &str) -> bool {
        let pattern: Vec<char> = self.0.chars().collect();
        let text: Vec<char> = text.chars().collect();
        let (mut p, mut t) = (0, 0);
        // (pattern index after the last `*`, text index that `*` currently stops at)
        let mut retry: Option<(usize, usize)> = None;
        while t < text.len() {
            match pattern.get(p) {
                Some('*') => {
                    retry = Some((p + 1, t));
                    p += 1;
                }
                Some(c) if *c == '?' || *c == text[t] => {
                    p += 1;
                    t += 1;
                }
                _ => match retry {
                    Some((after_star, stop)) => {
                        retry = Some((after_star, stop + 1));
                        p = after_star;
                        t = stop + 1;
                    }
                    None => return false,
                },
            }
        }
        pattern[p..].iter().all(|c| *c == '*')
    }
}

impl<'de> Deserialize<'de> for VersionGlob {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let pattern = String::deserialize(deserializer)?;
        Self::new(&pattern).map_err(serde::de::Error::custom)
    }
}

fn helm() -> Feature {
    Feature::Helm
}

fn non_empty_message<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let message = String::deserialize(deserializer)?;
    if message.trim().is_empty() {
        return Err(serde::de::Error::custom(
            "message must not be empty: it is the failureMessage Sveltos would report",
        ));
    }
    Ok(message)
}

/// One entry of the fleet file's `failures:` list.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FailureRule {
    /// Matched against every `helmCharts[].chartVersion` of the applied profile spec.
    pub chart_version: VersionGlob,
    /// Labels the cluster must carry (all of them); empty: every cluster.
    #[serde(default)]
    pub selector: BTreeMap<String, String>,
    /// The feature that fails (only if the spec deploys it: its list is not empty).
    #[serde(default = "helm")]
    pub feature: Feature,
    /// The feature's `failureMessage`.
    #[serde(deserialize_with = "non_empty_message")]
    pub message: String,
}

impl FailureRule {
    /// Whether deploying `feature` of `spec` (a ClusterSummary's `clusterProfileSpec`) fails on a
    /// cluster with `labels` (its `metadata.labels` object).
    pub fn fails(&self, spec: &Value, feature: Feature, labels: &Value) -> bool {
        feature == self.feature && self.selects(labels) && self.matches_a_chart(spec)
    }

    fn selects(&self, labels: &Value) -> bool {
        self.selector
            .iter()
            .all(|(key, value)| labels[key].as_str() == Some(value.as_str()))
    }

    fn matches_a_chart(&self, spec: &Value) -> bool {
        spec["helmCharts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|chart| chart["chartVersion"].as_str())
            .any(|version| self.chart_version.matches(version))
    }
}

/// The message of the first rule that fails `feature` of `spec` on a cluster with `labels`.
pub fn rule_failure<'a>(
    rules: &'a [FailureRule],
    spec: &Value,
    feature: Feature,
    labels: &Value,
) -> Option<&'a str> {
    rules
        .iter()
        .find(|rule| rule.fails(spec, feature, labels))
        .map(|rule| rule.message.as_str())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn glob(pattern: &str) -> VersionGlob {
        VersionGlob::new(pattern).expect("valid glob")
    }

    #[test]
    fn star_matches_any_run_and_question_mark_one_character() {
        assert!(glob("9.9.*").matches("9.9.1"));
        assert!(glob("9.9.*").matches("9.9.10-rc.1"));
        assert!(glob("9.9.*").matches("9.9."), "a star matches nothing too");
        assert!(!glob("9.9.*").matches("9.8.1"));
        assert!(!glob("9.9.*").matches("19.9.1"), "anchored at the start");
        assert!(glob("9.?.1").matches("9.9.1"));
        assert!(
            !glob("9.?.1").matches("9.10.1"),
            "? is exactly one character"
        );
        assert!(!glob("9.?.1").matches("9..1"));
        assert!(glob("*-rc*").matches("1.2.3-rc.4"));
        assert!(!glob("*-rc").matches("1.2.3-rc.4"), "anchored at the end");
        assert!(glob("*.*.*").matches("1.2.3"));
        assert!(glob("*").matches(""));
        assert!(glob("1.2.3").matches("1.2.3"));
        assert!(!glob("1.2.3").matches("1.2.30"));
        assert!(
            glob("a*b*c").matches("aXbYbZc"),
            "backtracks past a false start"
        );
        assert!(!glob("a*b*c").matches("aXbYbZ"));
    }

    #[test]
    fn empty_whitespace_and_foreign_glob_syntax_are_rejected() {
        assert_eq!(VersionGlob::new(""), Err(GlobError::Empty));
        assert!(matches!(
            VersionGlob::new("9.9.* "),
            Err(GlobError::Whitespace { .. })
        ));
        for pattern in ["9.[89].*", "{9,10}.*", "9\\.9"] {
            assert!(
                matches!(
                    VersionGlob::new(pattern),
                    Err(GlobError::Unsupported { .. })
                ),
                "{pattern}"
            );
        }
    }

    fn rule(selector: &[(&str, &str)], feature: Feature) -> FailureRule {
        FailureRule {
            chart_version: glob("9.9.*"),
            selector: selector
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            feature,
            message: "values: replicas must be an integer".into(),
        }
    }

    fn spec(versions: &[&str]) -> Value {
        let charts: Vec<Value> = versions
            .iter()
            .map(|v| json!({"chartName": "kyverno/kyverno", "chartVersion": v}))
            .collect();
        json!({"helmCharts": charts})
    }

    #[test]
    fn any_chart_of_the_applied_spec_matches() {
        let labels = json!({"env": "staging"});
        let any_cluster = rule(&[], Feature::Helm);
        assert!(any_cluster.fails(&spec(&["1.0.0", "9.9.1"]), Feature::Helm, &labels));
        assert!(!any_cluster.fails(&spec(&["1.0.0", "1.2.4"]), Feature::Helm, &labels));
        assert!(!any_cluster.fails(&json!({}), Feature::Helm, &labels));
        assert!(
            !any_cluster.fails(&spec(&["9.9.1"]), Feature::Resources, &labels),
            "only the rule's feature fails"
        );
    }

    #[test]
    fn selector_needs_every_label() {
        let bad = spec(&["9.9.1"]);
        let staging_eu = rule(&[("env", "staging"), ("region", "eu")], Feature::Helm);
        assert!(staging_eu.fails(
            &bad,
            Feature::Helm,
            &json!({"env": "staging", "region": "eu", "tier": "x"})
        ));
        assert!(!staging_eu.fails(&bad, Feature::Helm, &json!({"env": "staging"})));
        assert!(!staging_eu.fails(
            &bad,
            Feature::Helm,
            &json!({"env": "production", "region": "eu"})
        ));
        assert!(
            !staging_eu.fails(&bad, Feature::Helm, &Value::Null),
            "no labels"
        );
        assert!(rule(&[], Feature::Helm).fails(&bad, Feature::Helm, &Value::Null));
    }

    #[test]
    fn the_first_matching_rule_gives_the_message() {
        let mut first = rule(&[("env", "production")], Feature::Helm);
        first.message = "first".into();
        let mut second = rule(&[], Feature::Helm);
        second.message = "second".into();
        let rules = [first, second];
        let bad = spec(&["9.9.1"]);
        assert_eq!(
            rule_failure(&rules, &bad, Feature::Helm, &json!({"env": "production"})),
            Some("first")
        );
        assert_eq!(
            rule_failure(&rules, &bad, Feature::Helm, &json!({"env": "staging"})),
            Some("second")
        );
        assert_eq!(
            rule_failure(&rules, &spec(&["1.2.4"]), Feature::Helm, &json!({})),
            None
        );
    }
}

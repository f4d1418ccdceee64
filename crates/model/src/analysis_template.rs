//! The templates of an analysis's query or URL: `{{ stage }}`, `{{ promotion }}`,
//! `{{ cluster }}`, `{{ clusterNamespace }}`, `{{ clusters }}`, `{{ clustersRegex }}` (escaped for
//! a PromQL regular expression), `{{ labels.<key> }}` (of the cluster, for `scope: Cluster`),
//! `{{ snapshot.index }}` and `{{ snapshot.commit }}`. Rendered by the engine (so the resolved
//! text is shown in status) and by the reader with sample values (so PromQL is checked).

use std::collections::BTreeMap;

/// What a template may name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TemplateContext {
    pub promotion: String,
    pub stage: String,
    /// `namespace/name` of the cluster measured (`scope: Cluster`).
    pub cluster: Option<String>,
    /// The stage's member clusters, `namespace/name`.
    pub clusters: Vec<String>,
    /// The measured cluster's labels (`scope: Cluster`).
    pub labels: BTreeMap<String, String>,
    pub snapshot_index: u64,
    pub snapshot_commit: String,
}

/// Every name a template may use (besides `labels.<key>`).
pub const TEMPLATE_NAMES: [&str; 8] = [
    "stage",
    "promotion",
    "cluster",
    "clusterNamespace",
    "clusters",
    "clustersRegex",
    "snapshot.index",
    "snapshot.commit",
];

/// A template that cannot be rendered: an unknown name, or an unclosed `{{`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError(pub String);

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `text` with every `{{ name }}` replaced.
pub fn render(text: &str, context: &TemplateContext) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(TemplateError(format!(
                "unclosed {{{{ in {text:?}: close it with }}}}"
            )));
        };
        let name = after[..end].trim();
        out.push_str(&value(name, context)?);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn value(name: &str, context: &TemplateContext) -> Result<String, TemplateError> {
    let (namespace, cluster) = match &context.cluster {
        Some(key) => key.split_once('/').unwrap_or(("", key.as_str())),
        None => ("", ""),
    };
    let names = || {
        context
            .clusters
            .iter()
            .map(|c| c.split_once('/').map_or(c.as_str(), |(_, n)| n))
    };
    Ok(match name {
        "stage" => context.stage.clone(),
        "promotion" => context.promotion.clone(),
        "cluster" => cluster.to_string(),
        "clusterNamespace" => namespace.to_string(),
        "clusters" => names().collect::<Vec<_>>().join(","),
        "clustersRegex" => names().map(regex_escape).collect::<Vec<_>>().join("|"),
        "snapshot.index" => context.snapshot_index.to_string(),
        "snapshot.commit" => context.snapshot_commit.clone(),
        other => match other.strip_prefix("labels.") {
            Some(key) => context.labels.get(key).cloned().unwrap_or_default(),
            None => {
                return Err(TemplateError(format!(
                    "unknown template {{{{ {other} }}}}: use one of {}, or labels.<key>",
                    TEMPLATE_NAMES.join(", ")
                )));
            }
        },
    })
}

/// Escapes RE2 metacharacters, and doubles backslashes for the PromQL string literal the regex
/// sits in (`=~"…"`).
fn regex_escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push_str("\\\\");
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> TemplateContext {
        TemplateContext {
            promotion: "web".into(),
            stage: "prod".into(),
            cluster: Some("fleet/eu-1".into()),
            clusters: vec!["fleet/eu-1".into(), "fleet/us.2".into()],
            labels: BTreeMap::from([("region".into(), "eu".into())]),
            snapshot_index: 3,
            snapshot_commit: "abc".into(),
        }
    }

    #[test]
    fn every_name_renders_and_the_regex_is_escaped_for_promql() {
        let text = "{{ stage }} {{promotion}} {{ cluster }} {{ clusterNamespace }} {{ clusters }} {{ clustersRegex }} {{ labels.region }} {{ snapshot.index }} {{ snapshot.commit }}";
        assert_eq!(
            render(text, &context()),
            Ok(r"prod web eu-1 fleet eu-1,us.2 eu-1|us\\.2 eu 3 abc".to_string())
        );
    }

    #[test]
    fn an_unknown_name_or_an_unclosed_template_is_an_error() {
        let unknown = render("{{ stag }}", &context()).expect_err("unknown");
        assert!(
            unknown.0.contains("unknown template {{ stag }}"),
            "{unknown}"
        );
        assert!(render("{{ stage", &context()).is_err());
    }
}

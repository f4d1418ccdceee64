//! The provider of an analysis gate: `prometheus` (a base URL, an optional credentials file and a
//! PromQL query), `web` (a URL, an optional headers file and a jsonPath) or `commitStatus` (the
//! git host, a file holding its API address and token, the contexts). Their structure is the
//! schema's ([`crate::policy_schema`]); the values are checked here. A query or URL is
//! rendered with sample values as the engine renders it (`analysis_template::render`), so an
//! unknown template is an error at it, and the PromQL is parsed as Prometheus would receive it.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::diagnostic::Finding;
use crate::located::child_path;
use crate::policy_wording::{contexts_message, file_message};
use crate::rules::json_path::parse_json_path;
use crate::rules::promql::check_promql;
use tollgate_model::analysis::AnalysisScope;
use tollgate_model::analysis_template::{TemplateContext, render};

/// Templates naming the measured cluster: they render empty with `scope: Stage`.
const CLUSTER_TEMPLATES: [&str; 2] = ["cluster", "clusterNamespace"];

/// Checks one provider (`prometheus`, `web` or `commitStatus`) of an analysis at `path`.
pub fn check_provider(
    provider: &str,
    fields: &Map<String, Value>,
    path: &str,
    scope: AnalysisScope,
    findings: &mut Vec<Finding>,
) {
    match provider {
        "prometheus" => check_prometheus(fields, path, scope, findings),
        "web" => check_web(fields, path, scope, findings),
        _ => check_commit_status(fields, path, findings),
    }
}

fn check_prometheus(
    fields: &Map<String, Value>,
    path: &str,
    scope: AnalysisScope,
    findings: &mut Vec<Finding>,
) {
    let example = "the Prometheus base URL, such as http://prometheus.monitoring:9090";
    if let Some(address) = required_string(fields, path, "address", example, findings) {
        check_address(address, &child_path(path, "address"), findings);
    }
    optional_file(fields, path, "credentialsSecretFile", findings);
    let example = "a PromQL query, such as sum(rate(http_requests_total{code=~\"5..\"}[2m]))";
    let Some(query) = required_string(fields, path, "query", example, findings) else {
        return;
    };
    let query_path = child_path(path, "query");
    let Some(rendered) = render_sample(query, &query_path, scope, findings) else {
        return;
    };
    if let Err(e) = check_promql(&rendered) {
        let rendered_note = if rendered == query {
            String::new()
        } else {
            format!(" (with its templates rendered with sample values: {rendered:?})")
        };
        findings.push(Finding::error(
            "invalid-promql",
            query_path,
            format!("Invalid value: {e}{rendered_note}"),
        ));
    }
}

fn check_web(
    fields: &Map<String, Value>,
    path: &str,
    scope: AnalysisScope,
    findings: &mut Vec<Finding>,
) {
    let example = "an http:// or https:// URL whose answer is JSON";
    if let Some(url) = required_string(fields, path, "url", example, findings) {
        let url_path = child_path(path, "url");
        if let Some(rendered) = render_sample(url, &url_path, scope, findings)
            && !is_http_url(&rendered)
        {
            findings.push(Finding::error(
                "invalid-url",
                url_path,
                format!("Invalid value: {url:?}: url must be an http:// or https:// URL"),
            ));
        }
    }
    optional_file(fields, path, "headersSecretFile", findings);
    if let Some(json_path) = fields.get("jsonPath")
        && let Some(Err(problem)) = json_path.as_str().map(parse_json_path)
    {
        findings.push(Finding::error(
            "invalid-json-path",
            child_path(path, "jsonPath"),
            format!("Invalid value: {json_path}: {problem}"),
        ));
    }
}

fn check_commit_status(fields: &Map<String, Value>, path: &str, findings: &mut Vec<Finding>) {
    let example =
        "the path of a file whose first line is the repository's API URL and the second a token";
    required_string(fields, path, "addressSecretFile", example, findings);
    let Some(contexts) = fields.get("contexts") else {
        return;
    };
    // Items that are no strings are the schema's finding (the same message, once).
    let strings = contexts
        .as_array()
        .filter(|list| list.iter().all(Value::is_string));
    let blank = strings.is_some_and(|list| {
        list.iter()
            .any(|c| c.as_str().is_some_and(|c| c.trim().is_empty()))
    });
    if blank {
        findings.push(Finding::error(
            "wrong-type",
            child_path(path, "contexts"),
            contexts_message(contexts),
        ));
    }
}

/// The field's text when it is a string that is not blank (a finding when blank; a missing
/// field, or one of another type, is the schema's).
fn required_string<'v>(
    fields: &'v Map<String, Value>,
    path: &str,
    field: &str,
    what: &str,
    findings: &mut Vec<Finding>,
) -> Option<&'v str> {
    match fields.get(field) {
        Some(Value::String(text)) if !text.trim().is_empty() => Some(text),
        Some(other @ Value::String(_)) => {
            findings.push(Finding::error(
                "wrong-type",
                child_path(path, field),
                format!("Invalid value: {other}: {field} must be {what}"),
            ));
            None
        }
        _ => None,
    }
}

/// A `…SecretFile`, when set, is the path of a file.
fn optional_file(
    fields: &Map<String, Value>,
    path: &str,
    field: &str,
    findings: &mut Vec<Finding>,
) {
    if let Some(value) = fields.get(field)
        && value.as_str().is_some_and(|f| f.trim().is_empty())
    {
        findings.push(Finding::error(
            "wrong-type",
            child_path(path, field),
            file_message(value, field),
        ));
    }
}

/// Prometheus' base URL: http(s), and not templated (only the query is).
fn check_address(address: &str, path: &str, findings: &mut Vec<Finding>) {
    let problem = if address.contains("{{") {
        "address takes no templates (only the query does)"
    } else if !is_http_url(address) {
        "address must be an http:// or https:// URL, such as http://prometheus.monitoring:9090"
    } else {
        return;
    };
    findings.push(Finding::error(
        "invalid-url",
        path,
        format!("Invalid value: {address:?}: {problem}"),
    ));
}

fn is_http_url(text: &str) -> bool {
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"));
    rest.is_some_and(|rest| {
        !rest.is_empty() && !rest.starts_with('/') && !rest.contains(char::is_whitespace)
    })
}

/// `text` rendered with sample values; a finding when a template is unknown or unclosed, and a
/// warning when it names the measured cluster under `scope: Stage`, where that renders empty.
fn render_sample(
    text: &str,
    path: &str,
    scope: AnalysisScope,
    findings: &mut Vec<Finding>,
) -> Option<String> {
    let rendered = match render(text, &sample_context(text)) {
        Ok(rendered) => rendered,
        Err(e) => {
            findings.push(Finding::error(
                "invalid-template",
                path,
                format!("Invalid value: {e}"),
            ));
            return None;
        }
    };
    let per_cluster = template_names(text)
        .find(|name| CLUSTER_TEMPLATES.contains(name) || name.starts_with("labels."));
    if scope == AnalysisScope::Stage
        && let Some(name) = per_cluster
    {
        findings.push(Finding::warning(
            "template-scope",
            path,
            format!("{{{{ {name} }}}} renders empty with scope: Stage (one measurement for the whole stage): set scope: Cluster to measure each cluster, or use {{{{ clusters }}}} or {{{{ clustersRegex }}}}"),
        ));
    }
    Some(rendered)
}

/// The names between `{{` and `}}` in `text`.
fn template_names(text: &str) -> impl Iterator<Item = &str> {
    text.split("{{")
        .skip(1)
        .filter_map(|part| part.split_once("}}").map(|(name, _)| name.trim()))
}

/// Values like the engine's, two clusters (one with a dot, so that `{{ clustersRegex }}` shows
/// its escaping), and a value for every label the text names.
fn sample_context(text: &str) -> TemplateContext {
    let labels: BTreeMap<String, String> = template_names(text)
        .filter_map(|name| name.strip_prefix("labels."))
        .map(|key| (key.to_string(), "sample".to_string()))
        .collect();
    TemplateContext {
        promotion: "sample-promotion".to_string(),
        stage: "sample-stage".to_string(),
        cluster: Some("fleet/eu-1".to_string()),
        clusters: vec!["fleet/eu-1".to_string(), "fleet/us.2".to_string()],
        labels,
        snapshot_index: 1,
        snapshot_commit: "0123456789abcdef0123456789abcdef01234567".to_string(),
    }
}

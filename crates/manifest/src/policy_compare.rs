//! A comparative analysis (`compare:`, issue #48) and `stages.<stage>.score`: the rules a schema
//! cannot say. A comparison measures a Prometheus query per cohort, so it needs `prometheus`
//! and `scope: Stage`, and the query must keep the `cluster` label (one sample per cluster); `confidence` lies
//! strictly between 0 and 1, `minEffect` is a percentage, `minClusters` at least 1; a stage that
//! compares with `OtherWaves` needs waves. Whether a `NextStage` exists is known only with the
//! promotions a policy governs (`tollgate validate`'s cross-checks).

use serde_json::{Map, Value};

use crate::diagnostic::Finding;
use crate::located::child_path;
use crate::rules::promql_labels::keeps_label;
use tollgate_model::analysis_template::{TemplateContext, render};
use tollgate_model::compare::parse_percent;

/// The label a comparison tells clusters apart by.
pub const CLUSTER_LABEL: &str = "cluster";

/// Checks an analysis's `compare` block, when it has one; whether it has one (its conditions
/// are then optional: the default verdict judges).
pub fn check_compare(
    analysis: &Map<String, Value>,
    item_path: &str,
    findings: &mut Vec<Finding>,
) -> bool {
    let Some(compare) = analysis.get("compare") else {
        return false;
    };
    let path = child_path(item_path, "compare");
    if let Some(fields) = compare.as_object() {
        check_values(fields, &path, findings);
    }
    if analysis.get("scope").and_then(Value::as_str) == Some("Cluster") {
        findings.push(Finding::error(
            "compare-scope",
            child_path(item_path, "scope"),
            "Invalid value: \"Cluster\": a comparison measures two cohorts of clusters at once, not one cluster: use scope: Stage (the default)",
        ));
    }
    match analysis.get("prometheus").and_then(Value::as_object) {
        Some(prometheus) => check_query_keeps_cluster(prometheus, item_path, findings),
        None => findings.push(
            Finding::error(
                "compare-provider",
                path,
                "Invalid value: compare measures a Prometheus query once per cohort: it needs prometheus (with a query that keeps the cluster label), not web or commitStatus",
            )
            .at_key(),
        ),
    }
    true
}

fn check_values(fields: &Map<String, Value>, path: &str, findings: &mut Vec<Finding>) {
    if let Some(confidence) = fields.get("confidence").and_then(Value::as_f64)
        && !(confidence > 0.0 && confidence < 1.0)
    {
        findings.push(Finding::error(
            "invalid-value",
            child_path(path, "confidence"),
            format!("Invalid value: {confidence}: confidence must lie strictly between 0 and 1, such as 0.95"),
        ));
    }
    if let Some(effect) = fields.get("minEffect")
        && effect.as_str().and_then(parse_percent).is_none()
        && effect.is_string()
    {
        findings.push(Finding::error(
            "invalid-value",
            child_path(path, "minEffect"),
            format!("Invalid value: {effect}: minEffect must be a percentage of the baseline's median, such as \"10%\""),
        ));
    }
    if let Some(clusters) = fields.get("minClusters").and_then(Value::as_i64)
        && clusters < 1
    {
        findings.push(Finding::error(
            "invalid-value",
            child_path(path, "minClusters"),
            format!("Invalid value: {clusters}: minClusters must be at least 1 (a cohort with fewer samples is no data)"),
        ));
    }
}

/// The query, its templates rendered, must return series labelled by cluster.
fn check_query_keeps_cluster(
    prometheus: &Map<String, Value>,
    item_path: &str,
    findings: &mut Vec<Finding>,
) {
    let Some(query) = prometheus.get("query").and_then(Value::as_str) else {
        return;
    };
    let sample = TemplateContext {
        promotion: "sample-promotion".to_string(),
        stage: "sample-stage".to_string(),
        cluster: None,
        clusters: vec!["fleet/eu-1".to_string(), "fleet/us-2".to_string()],
        labels: Default::default(),
        snapshot_index: 1,
        snapshot_commit: "0".repeat(40),
    };
    // A template or PromQL error is the provider's finding already.
    let Ok(rendered) = render(query, &sample) else {
        return;
    };
    if keeps_label(&rendered, CLUSTER_LABEL) == Some(false) {
        findings.push(Finding::error(
            "query-drops-cluster",
            child_path(&child_path(item_path, "prometheus"), "query"),
            "Invalid value: a comparison needs one sample per cluster, but this query's result has no cluster label: aggregate by (cluster) (or by (le, cluster) under histogram_quantile), or leave the aggregation out",
        ));
    }
}

/// A stage that names a comparison against `OtherWaves` needs waves (`waves` in its override):
/// the finding at the name in `stages.<stage>.analyses`.
pub fn check_stage_baselines(
    stage: &Map<String, Value>,
    stage_path: &str,
    other_waves_analyses: &[&str],
    findings: &mut Vec<Finding>,
) {
    if stage.contains_key("waves") {
        return;
    }
    let Some(names) = stage.get("analyses").and_then(Value::as_array) else {
        return;
    };
    for (index, name) in names.iter().enumerate() {
        let Some(name) = name.as_str().filter(|n| other_waves_analyses.contains(n)) else {
            continue;
        };
        findings.push(Finding::error(
            "compare-baseline",
            crate::located::item_path(&child_path(stage_path, "analyses"), index),
            format!("Invalid value: {name:?} compares with baseline OtherWaves, the clusters of the stage's waves not reached yet, but this stage has no waves: add waves to it, or use baseline NextStage or Before"),
        ));
    }
}

/// The names of the analyses that compare with `OtherWaves` (the default baseline).
pub fn other_waves_analyses(analyses: &[Value]) -> Vec<&str> {
    analyses
        .iter()
        .filter_map(Value::as_object)
        .filter(|a| {
            a.get("compare")
                .and_then(Value::as_object)
                .is_some_and(|c| {
                    matches!(
                        c.get("baseline").and_then(Value::as_str),
                        None | Some("OtherWaves")
                    )
                })
        })
        .filter_map(|a| a.get("name").and_then(Value::as_str))
        .collect()
}

/// `score`: percentages, `marginal` at most `pass`.
pub fn check_score(stage: &Map<String, Value>, stage_path: &str, findings: &mut Vec<Finding>) {
    let Some(score) = stage.get("score").and_then(Value::as_object) else {
        return;
    };
    let percent = |field: &str| score.get(field).and_then(Value::as_u64);
    let path = child_path(stage_path, "score");
    for field in ["pass", "marginal"] {
        if let Some(over) = percent(field).filter(|p| *p > 100) {
            findings.push(Finding::error(
                "invalid-value",
                child_path(&path, field),
                format!("Invalid value: {over}: {field} is a percentage of the stage's analyses that passed, 0 to 100"),
            ));
        }
    }
    if let (Some(pass), Some(marginal)) = (percent("pass"), percent("marginal"))
        && marginal > pass
    {
        findings.push(Finding::error(
            "invalid-value",
            child_path(&path, "marginal"),
            format!("Invalid value: {marginal}: marginal must be at most pass ({pass}): a score of at least pass passes the stage, at least marginal holds it, below marginal fails it"),
        ));
    }
}

#[cfg(test)]
#[path = "policy_compare_tests.rs"]
mod tests;

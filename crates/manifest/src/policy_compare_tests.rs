//! The rules of a comparative analysis (`compare:`, issue #48) and of `stages.<stage>.score`,
//! read through `parse_file` as a user's file is: each error at its line and field.

use crate::parse::{Limits, parse_file};
use crate::policy::ParsedPolicy;
use tollgate_model::compare::{Baseline, Samples, Worse};

const HEAD: &str =
    "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: gates\nspec:\n";

/// The issue's example, gating stage `prod` (which has waves).
const EXAMPLE: &str = r#"  analyses:
  - name: latency-vs-baseline
    prometheus:
      address: http://prometheus.monitoring:9090
      query: |
        histogram_quantile(0.99, sum by (le, cluster) (rate(http_request_duration_seconds_bucket{cluster=~"{{ clustersRegex }}"}[2m])))
    compare:
      baseline: OtherWaves
      test: MannWhitneyU
      worse: Higher
      confidence: 0.95
      minEffect: 10%
      minClusters: 3
    interval: 30s
    count: 6
  stages:
    prod:
      waves: {size: 2}
      analyses: [latency-vs-baseline]
      score: {pass: 90, marginal: 75}
"#;

fn read(spec: &str) -> ParsedPolicy {
    let text = format!("{HEAD}{spec}");
    let mut parsed = parse_file("p.yaml", text.as_bytes(), &Limits::default());
    assert_eq!(parsed.policies.len(), 1, "{parsed:?}");
    parsed.policies.remove(0)
}

/// `(line, path, code)` of every diagnostic.
fn places(policy: &ParsedPolicy) -> Vec<(u32, String, &'static str)> {
    policy
        .diagnostics
        .iter()
        .map(|d| (d.line, d.path.clone(), d.code))
        .collect()
}

fn message(policy: &ParsedPolicy, code: &str) -> String {
    policy
        .diagnostics
        .iter()
        .find(|d| d.code == code)
        .map(|d| d.message.clone())
        .unwrap_or_else(|| panic!("no {code} in {:#?}", policy.diagnostics))
}

#[test]
fn compare_needs_a_prometheus_query() {
    let parsed = read(&EXAMPLE.replace(
        "    prometheus:\n      address: http://prometheus.monitoring:9090\n      query: |\n        histogram_quantile(0.99, sum by (le, cluster) (rate(http_request_duration_seconds_bucket{cluster=~\"{{ clustersRegex }}\"}[2m])))\n",
        "    web: {url: \"https://x/{{ stage }}\"}\n",
    ));
    assert_eq!(
        places(&parsed),
        [(
            9,
            "spec.analyses[0].compare".to_string(),
            "compare-provider"
        )]
    );
    assert!(message(&parsed, "compare-provider").contains("prometheus"));
    assert!(parsed.policy.is_none());
}

#[test]
fn confidence_min_effect_and_min_clusters_out_of_range_are_errors_at_their_values() {
    let parsed = read(
        &EXAMPLE
            .replace("confidence: 0.95", "confidence: 1.5")
            .replace("minEffect: 10%", "minEffect: ten")
            .replace("minClusters: 3", "minClusters: 0"),
    );
    let found = places(&parsed);
    assert_eq!(
        found,
        [
            (
                16,
                "spec.analyses[0].compare.confidence".to_string(),
                "invalid-value"
            ),
            (
                17,
                "spec.analyses[0].compare.minEffect".to_string(),
                "invalid-value"
            ),
            (
                18,
                "spec.analyses[0].compare.minClusters".to_string(),
                "invalid-value"
            ),
        ],
        "{:#?}",
        parsed.diagnostics
    );
    for zero_or_one in ["confidence: 0\n", "confidence: 1\n"] {
        let parsed = read(&EXAMPLE.replace("confidence: 0.95\n", zero_or_one));
        assert_eq!(
            places(&parsed),
            [(
                16,
                "spec.analyses[0].compare.confidence".to_string(),
                "invalid-value"
            )]
        );
    }
}

#[test]
fn a_query_that_drops_the_cluster_label_is_an_error_at_the_query() {
    let parsed = read(&EXAMPLE.replace("sum by (le, cluster)", "sum by (le)"));
    assert_eq!(
        places(&parsed),
        [(
            11,
            "spec.analyses[0].prometheus.query".to_string(),
            "query-drops-cluster"
        )]
    );
    assert!(message(&parsed, "query-drops-cluster").contains("by (cluster)"));
}

#[test]
fn other_waves_needs_the_stage_to_have_waves() {
    let parsed = read(&EXAMPLE.replace("      waves: {size: 2}\n", ""));
    assert_eq!(
        places(&parsed),
        [(
            23,
            "spec.stages.prod.analyses[0]".to_string(),
            "compare-baseline"
        )]
    );
    assert!(message(&parsed, "compare-baseline").contains("waves"));
    let before = read(
        &EXAMPLE
            .replace("      waves: {size: 2}\n", "")
            .replace("baseline: OtherWaves", "baseline: Before"),
    );
    assert_eq!(places(&before), []);
}

#[test]
fn a_marginal_score_above_pass_or_over_100_is_an_error() {
    let parsed = read(&EXAMPLE.replace("{pass: 90, marginal: 75}", "{pass: 75, marginal: 90}"));
    assert_eq!(
        places(&parsed),
        [(
            25,
            "spec.stages.prod.score.marginal".to_string(),
            "invalid-value"
        )]
    );
    let over = read(&EXAMPLE.replace("{pass: 90, marginal: 75}", "{pass: 190, marginal: 75}"));
    assert_eq!(
        places(&over).into_iter().map(|p| p.1).collect::<Vec<_>>(),
        ["spec.stages.prod.score.pass"]
    );
}

#[test]
fn the_issue_example_is_read_into_the_model_without_conditions() {
    let parsed = read(EXAMPLE);
    assert_eq!(parsed.diagnostics, Vec::new());
    let policy = parsed.policy.expect("valid");
    let compare = policy.spec.analyses[0].compare.as_ref().expect("compare");
    assert_eq!(compare.baseline, Baseline::OtherWaves);
    assert_eq!(compare.worse, Worse::Higher);
    assert_eq!(compare.samples, Samples::Instant);
    assert_eq!(compare.min_effect(), Some(0.1));
    let score = policy.for_stage("prod").score.expect("score");
    assert_eq!((score.pass, score.marginal), (90, 75));
    let ranged =
        read(&EXAMPLE.replace("minClusters: 3\n", "minClusters: 3\n      samples: Range\n"));
    let policy = ranged.policy.expect("valid");
    assert_eq!(
        policy.spec.analyses[0].compare.as_ref().map(|c| c.samples),
        Some(Samples::Range)
    );
}

#[test]
fn a_comparison_measures_cohorts_not_one_cluster() {
    let parsed = read(&EXAMPLE.replace(
        "    interval: 30s\n",
        "    scope: Cluster\n    interval: 30s\n",
    ));
    assert_eq!(
        places(&parsed),
        [(19, "spec.analyses[0].scope".to_string(), "compare-scope")]
    );
    assert!(message(&parsed, "compare-scope").contains("scope: Stage"));
}

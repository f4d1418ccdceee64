//! Every rule of `spec.analyses` and `stages.<stage>.analyses`, read through `parse_file` as a
//! user's file is: each error at its line, column and field.

use crate::parse::{Limits, parse_file};
use crate::policy::ParsedPolicy;
use tollgate_model::analysis::{AnalysisScope, CommitStatusProvider, OnNoData, Provider};

const HEAD: &str =
    "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: gates\nspec:\n";

/// The issue's example: three analyses, production runs two of them, canary the third.
const EXAMPLE: &str = r#"  analyses:
  - name: error-rate
    prometheus:
      address: http://prometheus.monitoring:9090
      credentialsSecretFile: /var/run/secrets/tollgate/prom
      query: |
        sum(rate(http_requests_total{cluster=~"{{ clustersRegex }}",code=~"5.."}[2m]))
        / sum(rate(http_requests_total{cluster=~"{{ clustersRegex }}"}[2m]))
    scope: Stage
    initialDelay: 30s
    interval: 30s
    count: 6
    successCondition: "result < 0.01"
    failureCondition: "result >= 0.05"
    failureLimit: 1
    inconclusiveLimit: 1
    consecutiveErrorLimit: 4
    onNoData: Inconclusive
    dryRun: false
  - name: smoke
    web:
      url: https://smoke.example.com/check?stage={{ stage }}&snapshot={{ snapshot.commit }}
      headersSecretFile: /var/run/secrets/tollgate/smoke-headers
      jsonPath: "{.ok}"
    successCondition: "result == true"
  - name: ci-checks
    commitStatus:
      provider: github
      addressSecretFile: /var/run/secrets/tollgate/github
      contexts: ["e2e/canary"]
  stages:
    production:
      analyses: [error-rate, smoke]
    canary:
      analyses: [ci-checks]
"#;

fn read(spec: &str) -> ParsedPolicy {
    let text = format!("{HEAD}{spec}");
    let mut parsed = parse_file("p.yaml", text.as_bytes(), &Limits::default());
    assert_eq!(parsed.policies.len(), 1, "{parsed:?}");
    parsed.policies.remove(0)
}

/// `(line, column, path, code)` of every diagnostic.
fn places(policy: &ParsedPolicy) -> Vec<(u32, u32, String, &'static str)> {
    policy
        .diagnostics
        .iter()
        .map(|d| (d.line, d.column, d.path.clone(), d.code))
        .collect()
}

/// One analysis (its YAML lines under `- `, indented by four), named by stage `prod`.
fn one(analysis: &str) -> ParsedPolicy {
    read(&format!(
        "  analyses:\n  - {}\n  stages:\n    prod:\n      analyses: [a]\n",
        analysis.trim_start()
    ))
}

/// The only diagnostic of `policy`: its path and code, and the message.
fn only(policy: &ParsedPolicy) -> (String, &'static str, String) {
    assert_eq!(policy.diagnostics.len(), 1, "{:#?}", policy.diagnostics);
    let d = &policy.diagnostics[0];
    (d.path.clone(), d.code, d.message.clone())
}

const PROM: &str = "name: a\n    prometheus: {address: \"http://p:9090\", query: up}\n    successCondition: \"result > 0\"\n";

#[test]
fn the_issue_example_is_read_into_the_model() {
    let parsed = read(EXAMPLE);
    assert_eq!(parsed.diagnostics, Vec::new());
    let policy = parsed.policy.expect("valid");
    let analyses = &policy.spec.analyses;
    assert_eq!(analyses.len(), 3);
    assert!(matches!(
        analyses[0].provider(),
        Some(Provider::Prometheus(p)) if p.query.contains("{{ clustersRegex }}")
    ));
    assert_eq!(analyses[0].scope, AnalysisScope::Stage);
    assert_eq!(analyses[0].on_no_data, OnNoData::Inconclusive);
    assert_eq!(analyses[0].duration().as_secs(), 30 + 5 * 30);
    assert_eq!(analyses[0].failure_limit(), 1);
    assert!(matches!(
        analyses[1].provider(),
        Some(Provider::Web(w)) if w.json_path.as_deref() == Some("{.ok}")
    ));
    assert!(matches!(
        analyses[2].provider(),
        Some(Provider::CommitStatus(c)) if c.provider == CommitStatusProvider::Github
    ));
    let production = policy.for_stage("production");
    let names: Vec<&str> = production
        .analyses
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names, ["error-rate", "smoke"]);
}

#[test]
fn empty_values_are_unset() {
    let parsed = one(&format!("{PROM}    scope:\n    onNoData:\n    count:\n"));
    assert_eq!(places(&parsed), []);
    let policy = parsed.policy.expect("valid");
    assert_eq!(policy.spec.analyses[0].count(), 1);
}

#[test]
fn duplicate_name() {
    let parsed = read(
        "  analyses:\n  - name: a\n    commitStatus: {provider: github, addressSecretFile: /f}\n  - name: a\n    commitStatus: {provider: gitea, addressSecretFile: /f}\n  stages:\n    prod: {analyses: [a]}\n",
    );
    assert_eq!(
        places(&parsed),
        [(9, 11, "spec.analyses[1].name".into(), "duplicate-name")]
    );
    assert!(parsed.policy.is_none());
}

#[test]
fn a_missing_or_blank_name_is_required_value_and_invalid_name() {
    let parsed = read(
        "  analyses:\n  - commitStatus: {provider: github, addressSecretFile: /f}\n  - name: \"\"\n    commitStatus: {provider: github, addressSecretFile: /f}\n",
    );
    let codes: Vec<(String, &str)> = places(&parsed).into_iter().map(|p| (p.2, p.3)).collect();
    assert_eq!(
        codes,
        [
            ("spec.analyses[0]".into(), "required-value"),
            ("spec.analyses[1].name".into(), "invalid-name"),
        ]
    );
}

#[test]
fn analysis_provider_exactly_one() {
    let none = one("name: a\n    successCondition: \"result > 0\"\n");
    let (path, code, message) = only(&none);
    assert_eq!(
        (path.as_str(), code),
        ("spec.analyses[0]", "required-value")
    );
    assert!(
        message.contains("exactly one of prometheus, web or commitStatus"),
        "{message}"
    );
    let two = one(&format!("{PROM}    web: {{url: \"https://x\"}}\n"));
    assert_eq!(
        places(&two),
        [(10, 5, "spec.analyses[0].web".into(), "analysis-provider")]
    );
    assert!(
        two.diagnostics[0]
            .message
            .contains("already has prometheus")
    );
}

#[test]
fn required_value_per_provider() {
    let parsed = one(
        "name: a\n    prometheus: {credentialsSecretFile: /c}\n    successCondition: \"result > 0\"\n",
    );
    let messages: Vec<(&str, &str)> = parsed
        .diagnostics
        .iter()
        .map(|d| (d.path.as_str(), d.message.as_str()))
        .collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages
            .iter()
            .all(|(path, _)| *path == "spec.analyses[0].prometheus")
    );
    assert!(
        messages[0].1.contains("prometheus needs address"),
        "{messages:?}"
    );
    assert!(
        messages[1].1.contains("prometheus needs query"),
        "{messages:?}"
    );
    let web = one("name: a\n    web: {jsonPath: \"{.ok}\"}\n    successCondition: \"result\"\n");
    assert!(only(&web).2.contains("web needs url"));
    let commit = one("name: a\n    commitStatus: {contexts: [ci]}\n");
    let codes: Vec<&str> = commit.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(
        codes,
        ["required-value", "required-value"],
        "{:?}",
        commit.diagnostics
    );
    assert!(commit.diagnostics[0].message.contains("provider"));
    assert!(commit.diagnostics[1].message.contains("addressSecretFile"));
}

#[test]
fn a_measuring_provider_needs_a_condition() {
    let parsed = one("name: a\n    prometheus: {address: \"http://p:9090\", query: up}\n");
    let (path, code, message) = only(&parsed);
    assert_eq!(
        (path.as_str(), code),
        ("spec.analyses[0]", "required-value")
    );
    assert!(
        message.contains("successCondition or failureCondition"),
        "{message}"
    );
    let commit = one("name: a\n    commitStatus: {provider: gitlab, addressSecretFile: /f}\n");
    assert_eq!(places(&commit), [], "a commit status is green or not");
}

#[test]
fn unsupported_value_of_scope_on_no_data_and_commit_status_provider() {
    let parsed = read(
        "  analyses:\n  - name: a\n    commitStatus: {provider: bitbucket, addressSecretFile: /f}\n    scope: cluster\n    onNoData: Ignore\n  stages:\n    prod: {analyses: [a]}\n",
    );
    assert_eq!(
        places(&parsed),
        [
            (
                8,
                30,
                "spec.analyses[0].commitStatus.provider".into(),
                "unsupported-value"
            ),
            (9, 12, "spec.analyses[0].scope".into(), "unsupported-value"),
            (
                10,
                15,
                "spec.analyses[0].onNoData".into(),
                "unsupported-value"
            ),
        ]
    );
    let messages: Vec<&str> = parsed
        .diagnostics
        .iter()
        .map(|d| d.message.as_str())
        .collect();
    assert!(
        messages[0].contains("\"github\", \"gitlab\", \"gitea\""),
        "{messages:?}"
    );
    assert!(
        messages[1].contains("\"Stage\", \"Cluster\""),
        "{messages:?}"
    );
    assert!(
        messages[2].contains("\"Fail\", \"Pass\", \"Inconclusive\""),
        "{messages:?}"
    );
}

#[test]
fn invalid_duration_of_interval_and_initial_delay() {
    let parsed = one(&format!("{PROM}    interval: 0s\n    initialDelay: soon\n"));
    assert_eq!(
        places(&parsed),
        [
            (
                10,
                15,
                "spec.analyses[0].interval".into(),
                "invalid-duration"
            ),
            (
                11,
                19,
                "spec.analyses[0].initialDelay".into(),
                "invalid-duration"
            ),
        ]
    );
    assert!(parsed.diagnostics[0].message.contains("greater than zero"));
    let immediate = one(&format!("{PROM}    initialDelay: 0s\n"));
    assert_eq!(places(&immediate), [], "the first measurement at once");
}

#[test]
fn invalid_count_and_limits() {
    let parsed = one(&format!(
        "{PROM}    count: 0\n    failureLimit: -1\n    inconclusiveLimit: \"2\"\n    consecutiveErrorLimit: 1.5\n"
    ));
    let codes: Vec<(String, &str)> = places(&parsed).into_iter().map(|p| (p.2, p.3)).collect();
    assert_eq!(
        codes,
        [
            ("spec.analyses[0].count".into(), "invalid-count"),
            ("spec.analyses[0].failureLimit".into(), "invalid-count"),
            ("spec.analyses[0].inconclusiveLimit".into(), "invalid-count"),
            (
                "spec.analyses[0].consecutiveErrorLimit".into(),
                "invalid-count"
            ),
        ]
    );
    assert!(parsed.diagnostics[0].message.contains("at least 1"));
    assert!(parsed.diagnostics[1].message.contains("0 or more"));
}

#[test]
fn invalid_template_at_the_query_or_url() {
    let parsed = one(
        "name: a\n    prometheus: {address: \"http://p:9090\", query: \"up{stage=\\\"{{ stag }}\\\"}\"}\n    successCondition: \"result > 0\"\n",
    );
    let (path, code, message) = only(&parsed);
    assert_eq!(
        (path.as_str(), code),
        ("spec.analyses[0].prometheus.query", "invalid-template")
    );
    assert!(message.contains("unknown template {{ stag }}"), "{message}");
    let web =
        one("name: a\n    web: {url: \"https://x/{{ stage\"}\n    successCondition: \"result\"\n");
    let (path, code, _) = only(&web);
    assert_eq!(
        (path.as_str(), code),
        ("spec.analyses[0].web.url", "invalid-template")
    );
}

#[test]
fn invalid_promql_is_an_error_at_the_query_with_the_parsers_message() {
    let parsed = read(
        "  analyses:\n  - name: a\n    prometheus:\n      address: http://p:9090\n      query: sum(rate(x{cluster=~\"{{ clustersRegex }}\"}[2m])\n    successCondition: \"result > 0\"\n  stages:\n    prod: {analyses: [a]}\n",
    );
    assert_eq!(
        places(&parsed),
        [(
            10,
            14,
            "spec.analyses[0].prometheus.query".into(),
            "invalid-promql"
        )]
    );
    let message = &parsed.diagnostics[0].message;
    assert!(message.contains("PromQL does not parse"), "{message}");
    assert!(
        message.contains(r#"eu-1|us\\\\.2"#),
        "rendered with sample values (Debug-quoted, so the PromQL escape's two backslashes show as four): {message}"
    );
}

#[test]
fn invalid_cel_in_either_condition() {
    let parsed = one(
        "name: a\n    prometheus: {address: \"http://p:9090\", query: up}\n    successCondition: \"result <\"\n    failureCondition: \"value > 1\"\n",
    );
    assert_eq!(
        places(&parsed),
        [
            (
                9,
                23,
                "spec.analyses[0].successCondition".into(),
                "invalid-cel"
            ),
            (
                10,
                23,
                "spec.analyses[0].failureCondition".into(),
                "invalid-cel"
            ),
        ]
    );
    let unknown = &parsed.diagnostics[1].message;
    assert!(unknown.contains("unknown variable `value`"), "{unknown}");
    assert!(unknown.contains("names only `result`"), "{unknown}");
}

#[test]
fn invalid_json_path() {
    let parsed = one(
        "name: a\n    web: {url: \"https://x\", jsonPath: \".ok\"}\n    successCondition: \"result\"\n",
    );
    let (path, code, message) = only(&parsed);
    assert_eq!(
        (path.as_str(), code),
        ("spec.analyses[0].web.jsonPath", "invalid-json-path")
    );
    assert!(message.contains("braces"), "{message}");
}

#[test]
fn invalid_url_of_web_and_prometheus() {
    let parsed = one(
        "name: a\n    web: {url: \"smoke.example.com/{{ stage }}\"}\n    successCondition: \"result\"\n",
    );
    assert_eq!(only(&parsed).1, "invalid-url");
    let prometheus = one(
        "name: a\n    prometheus: {address: \"http://{{ stage }}:9090\", query: up}\n    successCondition: \"result > 0\"\n",
    );
    let (path, code, message) = only(&prometheus);
    assert_eq!(
        (path.as_str(), code),
        ("spec.analyses[0].prometheus.address", "invalid-url")
    );
    assert!(message.contains("no templates"), "{message}");
}

#[test]
fn template_scope_warns_of_a_cluster_template_in_a_stage_scope_analysis() {
    let parsed = one(
        "name: a\n    prometheus: {address: \"http://p:9090\", query: \"up{cluster=\\\"{{ cluster }}\\\"}\"}\n    successCondition: \"result > 0\"\n",
    );
    let (path, code, message) = only(&parsed);
    assert_eq!(
        (path.as_str(), code),
        ("spec.analyses[0].prometheus.query", "template-scope")
    );
    assert!(message.contains("set scope: Cluster"), "{message}");
    assert!(parsed.policy.is_some(), "a warning only");
    let per_cluster = one(
        "name: a\n    scope: Cluster\n    prometheus: {address: \"http://p:9090\", query: \"up{cluster=\\\"{{ cluster }}\\\",region=\\\"{{ labels.region }}\\\"}\"}\n    successCondition: \"result > 0\"\n",
    );
    assert_eq!(places(&per_cluster), []);
}

#[test]
fn unknown_analysis_in_a_stage_suggests_the_closest() {
    let parsed = read(&EXAMPLE.replace("[error-rate, smoke]", "[eror-rate, smoke, latency]"));
    assert_eq!(
        places(&parsed),
        [
            (7, 11, "spec.analyses[0].name".into(), "analysis-unused"),
            (
                38,
                18,
                "spec.stages.production.analyses[0]".into(),
                "unknown-analysis"
            ),
            (
                38,
                36,
                "spec.stages.production.analyses[2]".into(),
                "unknown-analysis"
            ),
        ]
    );
    let typo = &parsed.diagnostics[1].message;
    assert!(typo.contains("did you mean \"error-rate\"?"), "{typo}");
    let far = &parsed.diagnostics[2].message;
    assert!(!far.contains("did you mean"), "{far}");
    assert!(
        far.contains("(defined: error-rate, smoke, ci-checks)"),
        "{far}"
    );
    let none = read("  stages:\n    prod: {analyses: [a]}\n");
    assert!(only(&none).2.contains("spec.analyses defines no analysis"));
}

#[test]
fn duplicate_name_in_a_stage_and_wrong_types() {
    let parsed = read(&EXAMPLE.replace("[ci-checks]", "[ci-checks, ci-checks, 3]"));
    let codes: Vec<(String, &str)> = places(&parsed).into_iter().map(|p| (p.2, p.3)).collect();
    assert_eq!(
        codes,
        [
            ("spec.stages.canary.analyses[1]".into(), "duplicate-name"),
            ("spec.stages.canary.analyses[2]".into(), "wrong-type"),
        ]
    );
    let list = read("  analyses: {name: a}\n  stages:\n    prod: {analyses: a}\n");
    let codes: Vec<&str> = list.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["wrong-type", "wrong-type"]);
}

#[test]
fn analysis_unused_is_a_warning_at_its_name() {
    let parsed = read(&EXAMPLE.replace("    canary:\n      analyses: [ci-checks]\n", ""));
    assert_eq!(
        places(&parsed),
        [(31, 11, "spec.analyses[2].name".into(), "analysis-unused")]
    );
    assert!(parsed.policy.is_some());
}

#[test]
fn unknown_fields_of_an_analysis_and_its_provider_are_errors_at_their_key() {
    let parsed = one(&format!("{PROM}    intervall: 1m\n    dryRun: \"yes\"\n")
        .replace("query: up}", "query: up, token: x}"));
    let codes: Vec<(String, &str)> = places(&parsed).into_iter().map(|p| (p.2, p.3)).collect();
    assert_eq!(
        codes,
        [
            ("spec.analyses[0].prometheus.token".into(), "unknown-field"),
            ("spec.analyses[0].intervall".into(), "unknown-field"),
            ("spec.analyses[0].dryRun".into(), "wrong-type"),
        ]
    );
}

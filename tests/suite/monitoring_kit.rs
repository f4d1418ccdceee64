//! The monitoring kit in deploy/monitoring (issue #49 item 1), tried for real: the alert rules
//! pass `promtool check rules` and their unit tests (`promtool test rules`, alerts.test.yaml), and
//! every metric the rules and the Grafana dashboard name is served by a running controller's
//! /metrics (each query parsed with the PromQL parser `validate` uses). A labelled family has no
//! series before its first sample (a failure, a time-out), so one absent from the scrape must be
//! a family the binary registers (`docs_tables::metric_names`, which reads the registrations).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::TestRepo;
use support::web_attack::{UiRun, request};
use tollgate_fixtures::{promotion, stage};

use crate::support;

fn kit(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/monitoring")
        .join(file)
}

/// The shipped PrometheusRule.
fn prometheus_rule() -> Value {
    let text = std::fs::read_to_string(kit("prometheusrule.yaml")).expect("the PrometheusRule");
    let rule: Value = serde_saphyr::from_str(&text).expect("YAML");
    assert_eq!(rule["kind"], "PrometheusRule");
    rule
}

/// Its rules, every group's.
fn rules(rule: &Value) -> Vec<Value> {
    rule["spec"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| group["rules"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// The PrometheusRule's `spec` (its `groups`), as a rules file promtool reads (JSON is YAML).
fn rules_file(dir: &Path, rule: &Value) -> PathBuf {
    let path = dir.join("rules.yaml");
    std::fs::write(&path, rule["spec"].to_string()).expect("rules file");
    path
}

fn promtool() -> Option<&'static str> {
    let found = Command::new("promtool").arg("--version").output().is_ok();
    assert!(
        found || std::env::var_os("CI").is_none(),
        "promtool is missing (Debian's prometheus package; .ci/run installs it)"
    );
    found.then_some("promtool")
}

#[test]
fn the_alert_rules_check_and_pass_their_unit_tests() {
    let Some(promtool) = promtool() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let rule = prometheus_rule();
    let rules_path = rules_file(dir.path(), &rule);
    std::fs::copy(kit("alerts.test.yaml"), dir.path().join("alerts.test.yaml")).expect("tests");
    for args in [
        vec!["check", "rules", &*rules_path.to_string_lossy()],
        vec!["test", "rules", "alerts.test.yaml"],
    ] {
        let output = Command::new(promtool)
            .args(&args)
            .current_dir(dir.path())
            .output()
            .expect("promtool runs");
        assert!(
            output.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // Every alert has a unit test and a runbook section.
    let alerts: Vec<String> = rules(&rule)
        .iter()
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect();
    let tests = std::fs::read_to_string(kit("alerts.test.yaml")).expect("tests");
    let operations =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md"))
            .expect("operations.md");
    for alert in &alerts {
        assert!(
            tests.contains(&format!("alertname: {alert}")),
            "{alert} has no unit test"
        );
        assert!(
            operations.contains(&format!("### {alert}")),
            "{alert} has no runbook in operations.md"
        );
    }
}

/// Every PromQL expression of the rules and the dashboard (Grafana's `$__rate_interval` as it
/// would substitute it).
fn queries() -> Vec<String> {
    let mut queries: Vec<String> = rules(&prometheus_rule())
        .iter()
        .map(|r| r["expr"].as_str().expect("expr").to_string())
        .collect();
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(kit("grafana-dashboard.json")).expect("dashboard"),
    )
    .expect("JSON");
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            queries.push(expr.replace("$__rate_interval", "5m"));
        }
    }
    queries
}

/// The `tollgate_…` names a query reads.
fn metric_names(query: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = query;
    while let Some(start) = rest.find("tollgate_") {
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

/// The family names a scrape declares, and the sample names each may have.
fn served(scrape: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for family in scrape.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let name = family.split(' ').next().unwrap_or_default();
        for suffix in ["", "_total", "_bucket", "_sum", "_count", "_created"] {
            names.insert(format!("{name}{suffix}"));
        }
    }
    names
}

/// `tollgate run --ui` on a repository with promotion `web` (one stage), once it serves `web`;
/// with its server's address.
fn controller_rolling_out_web() -> (TestRepo, UiRun, String) {
    let repo = TestRepo::new();
    let web = promotion("web")
        .chart("web", "1.0.0")
        .stage(stage("dev").selector("env", "dev").auto())
        .to_yaml();
    repo.write("web.yaml", &web);
    repo.commit("web");
    let ui = UiRun::spawn(repo.path(), &[]);
    let addr = ui.addr();
    ui.wait_for_action(&addr, "web", "pause");
    (repo, ui, addr)
}

#[test]
fn every_metric_the_dashboard_and_the_alerts_name_is_served() {
    let queries = queries();
    assert!(queries.len() > 20, "{queries:?}");
    let (_repo, _ui, addr) = controller_rolling_out_web();
    let scrape = request(&addr, &addr, "GET", "/metrics", &[], b"").expect("a scrape");
    assert_eq!(scrape.status, 200);
    let served = served(&scrape.body);
    let registered = crate::docs_tables::metric_names();
    let suffixes = ["", "_total", "_bucket", "_sum", "_count"];
    let known = |name: &str| {
        served.contains(name)
            || suffixes.iter().any(|suffix| {
                name.strip_suffix(suffix)
                    .is_some_and(|family| registered.contains(family))
            })
    };
    assert!(served.contains("tollgate_leader") && served.contains("tollgate_reconciles_total"));
    let mut missing = Vec::new();
    for query in &queries {
        if let Err(error) = tollgate_manifest::rules::promql::check_promql(query) {
            panic!("{query}: {error}");
        }
        for name in metric_names(query) {
            if !known(&name) {
                missing.push(format!("{name} (in {query})"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not on /metrics:\n{}",
        missing.join("\n")
    );
}

/// A real Prometheus scrapes a running controller as it scrapes any target (it asks for gzip,
/// which `/metrics` then sends, chunked): the dashboard's phase query answers from the scrape.
#[test]
fn a_real_prometheus_scrapes_a_running_controller() {
    let Some(prometheus) = support::prometheus::prometheus() else {
        return;
    };
    let (_repo, _ui, addr) = controller_rolling_out_web();
    prometheus.scrape("tollgate-kit", &addr);
    prometheus.wait_for(r#"tollgate_leader{job="tollgate-kit"}"#, &[1.0]);
    prometheus.wait_for(
        r#"count(tollgate_stage_activity{job="tollgate-kit",promotion="web"})"#,
        &[1.0],
    );
    prometheus.wait_for(
        r#"sum(tollgate_promotion_phase{job="tollgate-kit",promotion="web"})"#,
        &[1.0],
    );
}

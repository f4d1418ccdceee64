//! The CI templates in examples/ci/ (issue #49 item 4) run what they say on a real pull request:
//! each template's `tollgate` commands, taken from the file as written, run in a clone checked
//! out at a branch that bumps a chart, with the variables the CI system sets; `validate` passes
//! and the plan written for the comment names the promotion and its chart change. Posting the
//! comment (`gh pr comment`, GitLab's notes API) is the host's part and is not run here.

use std::path::Path;
use std::process::Command;

use support::TestRepo;
use tollgate_fixtures::{promotion, stage};

use crate::support;

/// The template's shell commands that run tollgate: GitHub's `run:` values and GitLab's `script:`
/// items (the install step aside: the test runs this build).
fn tollgate_commands(template: &str) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(template))
        .expect(template);
    let document: serde_json::Value = serde_saphyr::from_str(&text).expect("the template is YAML");
    let mut commands = Vec::new();
    collect(&document, &mut commands);
    commands.retain(|c| c.trim_start().starts_with("tollgate "));
    assert!(commands.len() >= 2, "{template}: {commands:?}");
    commands
}

fn collect(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(text) => out.push(text.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|i| collect(i, out)),
        serde_json::Value::Object(fields) => fields.values().for_each(|v| collect(v, out)),
        _ => {}
    }
}

fn web(chart: &str) -> String {
    promotion("web")
        .chart("web", chart)
        .stage(stage("dev").selector("env", "dev").auto())
        .stage(stage("prod").selector("env", "prod").manual())
        .to_yaml()
}

/// A clone at the pull request's branch, `origin/main` beside it, as CI checks it out.
fn pull_request_checkout() -> (TestRepo, tempfile::TempDir) {
    let origin = TestRepo::new();
    origin.write("web.yaml", &web("1.0.0"));
    origin.commit("web 1.0.0");
    origin.git(&["checkout", "-q", "-b", "bump"]);
    origin.write("web.yaml", &web("1.1.0"));
    origin.commit("web 1.1.0");
    origin.git(&["checkout", "-q", "main"]);
    let dir = tempfile::tempdir().expect("checkout dir");
    let checkout = dir.path().join("checkout");
    origin.git(&[
        "clone",
        "-q",
        "--branch",
        "bump",
        &origin.path().to_string_lossy(),
        &checkout.to_string_lossy(),
    ]);
    (origin, dir)
}

fn run_template(template: &str, base_variable: &str) {
    let (_origin, dir) = pull_request_checkout();
    let checkout = dir.path().join("checkout");
    let binary = assert_cmd::cargo::cargo_bin("tollgate");
    let path = format!(
        "{}:{}",
        binary.parent().expect("a directory").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for command in tollgate_commands(template) {
        let output = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &command])
            .current_dir(&checkout)
            .env("PATH", &path)
            .env(base_variable, "main")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("bash runs");
        assert!(
            output.status.success(),
            "{template}: `{command}` failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let plan = std::fs::read_to_string(checkout.join("tollgate-plan.md")).expect("the plan file");
    assert!(plan.contains("web"), "{plan}");
    assert!(
        plan.contains("1.0.0") && plan.contains("1.1.0"),
        "the chart change is not in:\n{plan}"
    );
}

#[test]
fn the_github_actions_template_validates_and_writes_the_plan_comment() {
    run_template("examples/ci/github-actions.yml", "GITHUB_BASE_REF");
}

#[test]
fn the_gitlab_ci_template_validates_and_writes_the_plan_note() {
    run_template(
        "examples/ci/gitlab-ci.yml",
        "CI_MERGE_REQUEST_TARGET_BRANCH_NAME",
    );
}

//! `tollgate validate`: exit codes, output formats, caret rendering, directory walks, seeds.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use tollgate_fixtures::{promotion, stage};

fn tollgate() -> Command {
    assert_cmd::cargo::cargo_bin_cmd!("tollgate")
}

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn seeds() -> PathBuf {
    repo("../shared/fixtures/seeds")
}

fn stdout_of(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stdout).to_string()
}

#[test]
fn valid_seed_exits_zero_and_shows_its_warning() {
    let assert = tollgate()
        .arg("validate")
        .arg(seeds().join("04-cert-manager-rollout-auto.yaml"))
        .assert()
        .code(0);
    let out = stdout_of(&assert);
    assert!(out.contains("warning[lua-never-sets-healthy]"), "{out}");
    assert!(
        out.contains("1 file(s), 1 promotion(s): 0 error(s), 1 warning(s)"),
        "{out}"
    );
}

#[test]
fn the_shipped_examples_validate_without_errors_or_warnings_and_warnings_name_no_fixture() {
    let assert = tollgate()
        .arg("validate")
        .arg(repo("examples/promotions"))
        .assert()
        .code(0);
    let out = stdout_of(&assert);
    assert!(out.contains("0 error(s), 0 warning(s)"), "{out}");
    let seed = tollgate()
        .arg("validate")
        .arg(seeds().join("04-cert-manager-rollout-auto.yaml"))
        .assert()
        .code(0);
    let out = stdout_of(&seed);
    assert!(
        !out.to_lowercase().contains("seed 0"),
        "an internal fixture named: {out}"
    );
}

#[test]
fn strict_makes_warnings_fail() {
    tollgate()
        .args(["validate", "--strict"])
        .arg(seeds().join("04-cert-manager-rollout-auto.yaml"))
        .assert()
        .code(1);
}

#[test]
fn every_seed_validates() {
    // One by one: the seeds hold several versions of the same promotions, which together in one
    // directory define those names more than once.
    let mut count = 0;
    for entry in std::fs::read_dir(seeds()).expect("seeds") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "yaml")
            && !path.ends_with("fleet-kubefleet-demo.yaml")
        {
            let assert = tollgate().arg("validate").arg(&path).assert().code(0);
            assert!(
                stdout_of(&assert).contains("0 error(s)"),
                "{}",
                path.display()
            );
            count += 1;
        }
    }
    assert!(count >= 8, "{count} seeds");
    let together = tollgate().arg("validate").arg(seeds()).assert().code(1);
    assert!(stdout_of(&together).contains("error[duplicate-promotion-name]"));
}

#[test]
fn invalid_file_exits_one_with_the_line_quoted_and_a_caret() {
    let assert = tollgate()
        .arg("validate")
        .arg(repo("fixtures/invalid/12-duplicate-stage-names.yaml"))
        .assert()
        .code(1);
    let out = stdout_of(&assert);
    let expected = "error[duplicate-stage-name]: Duplicate value: \"staging\"\n";
    assert!(out.starts_with(expected), "{out}");
    assert!(
        out.contains("12-duplicate-stage-names.yaml:21:11\n"),
        "{out}"
    );
    assert!(
        out.contains(
            "   |\n21 |   - name: staging\n   |           ^\n   = field: spec.stages[1].name\n"
        ),
        "{out}"
    );
}

#[test]
fn json_output_is_a_stable_document() {
    let assert = tollgate()
        .args(["validate", "--output", "json"])
        .arg(repo("fixtures/invalid/08-unknown-trigger-key.yaml"))
        .arg(repo("fixtures/valid/01-multi-document-other-kinds.yaml"))
        .assert()
        .code(1);
    let report: serde_json::Value =
        serde_json::from_str(&stdout_of(&assert)).expect("JSON on stdout");
    assert_eq!(report["valid"], false);
    assert_eq!(report["files"], 2);
    assert_eq!(report["promotions"], 3);
    let diagnostics = report["diagnostics"].as_array().expect("diagnostics");
    assert_eq!(diagnostics.len(), 2);
    assert_eq!(diagnostics[0]["code"], "trigger-needs-auto-xor-manual");
    assert_eq!(diagnostics[0]["severity"], "error");
    assert_eq!(diagnostics[0]["line"], 22);
    assert_eq!(diagnostics[0]["column"], 5);
    assert_eq!(diagnostics[0]["path"], "spec.stages[0].trigger");
    assert_eq!(diagnostics[1]["code"], "unknown-field");
}

#[test]
fn json_output_for_a_valid_tree() {
    let assert = tollgate()
        .args(["validate", "-o", "json"])
        .arg(repo("fixtures/valid"))
        .assert()
        .code(0);
    let report: serde_json::Value = serde_json::from_str(&stdout_of(&assert)).expect("JSON");
    assert_eq!(report["valid"], true);
    assert_eq!(report["diagnostics"], serde_json::json!([]));
}

#[test]
fn github_output_is_workflow_commands() {
    let assert = tollgate()
        .args(["validate", "-o", "github"])
        .arg(repo("fixtures/invalid/21-delay-in-words.yaml"))
        .assert()
        .code(1);
    let out = stdout_of(&assert);
    let line = out.lines().next().expect("one command");
    assert!(line.starts_with("::error file="), "{line}");
    assert!(
        line.contains("21-delay-in-words.yaml,line=23,col=16,title=tollgate invalid-duration::spec.stages[0].trigger.auto.delay: Invalid value: \"5 minutes\""),
        "{line}"
    );
}

fn write(dir: &Path, relative: &str, text: &str) {
    let path = dir.join(relative);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

const GOOD: &str = "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\nmetadata:\n  name: good\nspec:\n  stages:\n  - name: a\n    clusterSelector:\n      matchLabels: {env: a}\n";

#[test]
fn directories_are_walked_recursively_skipping_hidden_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "a.yaml", GOOD);
    write(
        dir.path(),
        "nested/deeper/b.yml",
        &GOOD.replace("good", "other"),
    );
    write(dir.path(), ".git/bad.yaml", "stages: [");
    write(dir.path(), "notes.txt", "stages: [");
    let assert = tollgate().arg("validate").arg(dir.path()).assert().code(0);
    assert!(
        stdout_of(&assert).contains("2 file(s), 2 promotion(s): 0 error(s), 0 warning(s)"),
        "{}",
        stdout_of(&assert)
    );
    // One bad file does not stop the others from being read and reported.
    write(
        dir.path(),
        "nested/c.yaml",
        "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\nmetadata: {name: c}\nspec: {stages: []}\n",
    );
    let assert = tollgate().arg("validate").arg(dir.path()).assert().code(1);
    let out = stdout_of(&assert);
    assert!(
        out.contains("3 file(s), 3 promotion(s): 1 error(s)"),
        "{out}"
    );
}

#[test]
fn io_and_usage_errors_exit_two() {
    tollgate()
        .args(["validate", "/nonexistent/tollgate/path"])
        .assert()
        .code(2);
    let empty = tempfile::tempdir().expect("tempdir");
    let assert = tollgate()
        .arg("validate")
        .arg(empty.path())
        .assert()
        .code(2);
    assert!(
        String::from_utf8_lossy(&assert.get_output().stderr)
            .contains("no *.yaml or *.yml files found")
    );
    tollgate()
        .args(["validate", "--output", "xml"])
        .assert()
        .code(2);
}

fn json_diagnostics(assert: &assert_cmd::assert::Assert) -> Vec<serde_json::Value> {
    let report: serde_json::Value = serde_json::from_str(&stdout_of(assert)).expect("JSON report");
    report["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .clone()
}

/// (code, file name, line) of each diagnostic, for compact assertions.
fn places(diagnostics: &[serde_json::Value]) -> Vec<(String, String, u64)> {
    diagnostics
        .iter()
        .map(|d| {
            let file = d["file"].as_str().unwrap_or_default();
            let name = Path::new(file)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned());
            (
                d["code"].as_str().unwrap_or_default().to_string(),
                name.unwrap_or_default(),
                d["line"].as_u64().unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn the_same_promotion_name_twice_is_an_error_at_each_definition() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "a.yaml", &format!("{GOOD}---\n{GOOD}"));
    write(dir.path(), "b.yaml", GOOD);
    write(dir.path(), "c.yaml", &GOOD.replace("good", "unique"));
    let assert = tollgate()
        .args(["validate", "-o", "json"])
        .arg(dir.path())
        .assert()
        .code(1);
    let diagnostics = json_diagnostics(&assert);
    let code = "duplicate-promotion-name".to_string();
    assert_eq!(
        places(&diagnostics),
        [
            (code.clone(), "a.yaml".to_string(), 4),
            (code.clone(), "a.yaml".to_string(), 14),
            (code, "b.yaml".to_string(), 4),
        ]
    );
    assert_eq!(diagnostics[0]["severity"], "error");
    let message = diagnostics[2]["message"].as_str().expect("message");
    assert!(message.contains("\"good\" is also defined at"), "{message}");
    assert!(
        message.contains("a.yaml:4, ") && message.contains("a.yaml:14"),
        "{message}"
    );
}

#[test]
fn near_misses_of_cluster_promotion_are_warnings_at_their_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let documents = [
        GOOD.replace("kind: ClusterPromotion", "kind: ClusterPromtion"),
        GOOD.replace("kind: ClusterPromotion", "kind: clusterpromotion"),
        GOOD.replace("config.projectsveltos.io", "config.projectsveltos.com"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n".to_string(),
        GOOD.replace("kind: ClusterPromotion", "kind: ClusterProfile"),
    ];
    write(dir.path(), "kinds.yaml", &documents.join("---\n"));
    let assert = tollgate()
        .args(["validate", "-o", "json"])
        .arg(dir.path())
        .assert()
        .code(0);
    let diagnostics = json_diagnostics(&assert);
    let code = "near-miss-cluster-promotion".to_string();
    let file = "kinds.yaml".to_string();
    assert_eq!(
        places(&diagnostics),
        [
            (code.clone(), file.clone(), 2),
            (code.clone(), file.clone(), 12),
            (code, file, 21)
        ],
        "ConfigMap and ClusterProfile stay silent"
    );
    assert!(diagnostics.iter().all(|d| d["severity"] == "warning"));
    assert_eq!(diagnostics[2]["path"], "apiVersion");
    // The right group with another version is a ClusterPromotion of an unsupported version: an error.
    write(
        dir.path(),
        "kinds.yaml",
        &GOOD.replace("v1beta1", "v1beta2"),
    );
    tollgate().arg("validate").arg(dir.path()).assert().code(1);
}

/// `name` with a manual `prod` stage and an auto `staging` stage, approved by `annotation`.
fn approved(name: &str, annotation: (&str, &str)) -> String {
    promotion(name)
        .annotation(
            &format!("approve.tollgate.dev/{}", annotation.0),
            annotation.1,
        )
        .stage(stage("staging").selector("env", "staging").delay("5m"))
        .stage(stage("prod").selector("env", "prod").manual())
        .to_yaml()
}

fn snapshot_id(text: &str) -> String {
    let parsed = tollgate_manifest::parse_file("f.yaml", text.as_bytes(), &Default::default());
    let promotion = parsed.promotions[0].promotion.as_ref().expect("valid");
    tollgate_manifest::SpecHashes::of(promotion).snapshot_id
}

use tollgate_fixtures::git::git;

#[test]
fn approval_annotations_that_name_no_snapshot_are_warnings() {
    let repo = tempfile::tempdir().expect("tempdir");
    let root = repo.path();
    git(root, &["init", "-q", "-b", "main"]);
    write(root, "first.yaml", &approved("first", ("prod", "0000000")));
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "first"]);
    let commit = git(root, &["rev-parse", "HEAD"]);

    let current = snapshot_id(&approved("x", ("prod", "0")));
    let files = [
        ("a-not-hex.yaml", approved("a", ("prod", "yes please"))),
        ("b-too-short.yaml", approved("b", ("prod", "abc12"))),
        (
            "c-no-such-stage.yaml",
            approved("c", ("canary", &current[..12])),
        ),
        (
            "d-auto-stage.yaml",
            approved("d", ("staging", &current[..12])),
        ),
        (
            "e-other-snapshot.yaml",
            approved("e", ("prod", "0123456789abcdef")),
        ),
        (
            "f-this-snapshot.yaml",
            approved("f", ("prod", &current[..12])),
        ),
        ("g-a-commit.yaml", approved("g", ("prod", &commit))),
    ];
    for (file, text) in &files {
        write(root, file, text);
    }
    let assert = tollgate()
        .args(["validate", "-o", "json"])
        .arg(root)
        .assert()
        .code(0);
    let diagnostics = json_diagnostics(&assert);
    let found: Vec<(String, String)> = places(&diagnostics)
        .into_iter()
        .map(|(code, file, line)| {
            assert_eq!(line, 6, "{code} {file}: at the annotation");
            (code, file)
        })
        .collect();
    let expected = [
        ("invalid-approve-annotation", "a-not-hex.yaml"),
        ("invalid-approve-annotation", "b-too-short.yaml"),
        ("approve-unknown-stage", "c-no-such-stage.yaml"),
        ("approve-not-manual-stage", "d-auto-stage.yaml"),
        ("approve-names-no-snapshot", "e-other-snapshot.yaml"),
    ]
    .map(|(code, file)| (code.to_string(), file.to_string()));
    assert_eq!(
        found, expected,
        "this snapshot and a first-parent commit are fine"
    );
    assert!(diagnostics.iter().all(|d| d["severity"] == "warning"));
    let message = diagnostics[4]["message"].as_str().unwrap_or_default();
    assert!(message.contains("it approves nothing"), "{message}");
    assert!(message.contains("nor is it a commit"), "{message}");

    // Outside the repository nothing can say the SHA is a commit: it names no snapshot here.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    write(elsewhere.path(), "g-a-commit.yaml", &files[6].1);
    let assert = tollgate()
        .args(["validate", "-o", "json"])
        .arg(elsewhere.path())
        .assert()
        .code(0);
    assert_eq!(
        places(&json_diagnostics(&assert)),
        [(
            "approve-names-no-snapshot".to_string(),
            "g-a-commit.yaml".to_string(),
            6
        )]
    );
}

// RolloutPolicies: their own errors, and which policy governs each promotion.

fn policy_yaml(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

/// `GOOD` (one stage `a`) with labels and annotations.
fn promotion_yaml(name: &str, labels: &str, annotations: &str) -> String {
    GOOD.replace(
        "  name: good\n",
        &format!("  name: {name}\n  labels: {labels}\n  annotations: {annotations}\n"),
    )
}

/// Validates `files` (written to a temp dir) with JSON output; the exit code and diagnostics.
fn validate_json(files: &[(&str, &str)]) -> (i32, Vec<serde_json::Value>) {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        write(dir.path(), path, text);
    }
    let output = tollgate()
        .args(["validate", "-o", "json"])
        .arg(dir.path())
        .output()
        .expect("run");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON report");
    let diagnostics = report["diagnostics"].as_array().expect("list").clone();
    (output.status.code().unwrap_or(-1), diagnostics)
}

fn message(diagnostic: &serde_json::Value) -> &str {
    diagnostic["message"].as_str().unwrap_or_default()
}

#[test]
fn a_valid_policy_and_the_promotion_it_governs_validate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = "  selector: {}\n  progressDeadline: 10m\n  maxFailures: \"10%\"\n  onFailure: Rollback\n  stages:\n    a: {maxFailures: 0, progressDeadline: 30m}\n";
    write(
        dir.path(),
        "policies/fleet.yaml",
        &policy_yaml("fleet", spec),
    );
    write(dir.path(), "app.yaml", GOOD);
    let assert = tollgate().arg("validate").arg(dir.path()).assert().code(0);
    let out = stdout_of(&assert);
    assert!(
        out.contains("2 file(s), 1 promotion(s), 1 policy: 0 error(s), 0 warning(s)"),
        "{out}"
    );
}

/// A line per promotion: the policy governing it and that policy's file, or none; the same in
/// JSON. A promotion whose policy cannot be chosen has its error instead.
#[test]
fn validate_says_which_policy_governs_each_promotion() {
    let dir = tempfile::tempdir().expect("tempdir");
    let critical = "  selector:\n    matchLabels: {tier: critical}\n";
    write(
        dir.path(),
        "policies.yaml",
        &policy_yaml("fleet-defaults", critical),
    );
    write(
        dir.path(),
        "web.yaml",
        &promotion_yaml("web", "{tier: critical}", "{}"),
    );
    write(
        dir.path(),
        "low.yaml",
        &promotion_yaml("low", "{tier: low}", "{}"),
    );
    let at = |file: &str| dir.path().join(file).display().to_string();
    let assert = tollgate().arg("validate").arg(dir.path()).assert().code(0);
    let out = stdout_of(&assert);
    let governed = format!(
        "{}: ClusterPromotion \"web\" is governed by RolloutPolicy \"fleet-defaults\" ({})\n",
        at("web.yaml"),
        at("policies.yaml")
    );
    let upstream = format!(
        "{}: ClusterPromotion \"low\" is governed by no RolloutPolicy (upstream behaviour)\n",
        at("low.yaml")
    );
    assert!(out.contains(&governed) && out.contains(&upstream), "{out}");

    let assert = tollgate()
        .args(["validate", "-o", "json"])
        .arg(dir.path())
        .assert()
        .code(0);
    let report: serde_json::Value = serde_json::from_str(&stdout_of(&assert)).expect("JSON");
    assert_eq!(
        report["governance"],
        serde_json::json!([
            {"file": at("low.yaml"), "promotion": "low", "policy": null, "policyFile": null},
            {"file": at("web.yaml"), "promotion": "web", "policy": "fleet-defaults",
             "policyFile": at("policies.yaml")},
        ])
    );

    write(dir.path(), "also.yaml", &policy_yaml("also", critical));
    let assert = tollgate().arg("validate").arg(dir.path()).assert().code(1);
    let out = stdout_of(&assert);
    assert!(!out.contains("\"web\" is governed"), "{out}");
    assert!(out.contains(&upstream), "{out}");
}

#[test]
fn a_bad_policy_duration_is_an_error_with_file_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "fleet.yaml",
        &policy_yaml("fleet", "  progressDeadline: 10 minutes\n"),
    );
    let assert = tollgate().arg("validate").arg(dir.path()).assert().code(1);
    let out = stdout_of(&assert);
    assert!(
        out.starts_with("error[invalid-duration]: Invalid value: \"10 minutes\""),
        "{out}"
    );
    assert!(out.contains("fleet.yaml:6:21\n"), "{out}");
    assert!(out.contains("= field: spec.progressDeadline\n"), "{out}");
}

#[test]
fn a_bad_max_failures_is_an_error_at_its_value() {
    let (code, diagnostics) = validate_json(&[(
        "fleet.yaml",
        &policy_yaml("fleet", "  stages:\n    a:\n      maxFailures: \"150%\"\n"),
    )]);
    assert_eq!(code, 1);
    assert_eq!(
        places(&diagnostics),
        [(
            "invalid-max-failures".to_string(),
            "fleet.yaml".to_string(),
            8
        )]
    );
    assert_eq!(diagnostics[0]["column"], 20);
    assert_eq!(diagnostics[0]["path"], "spec.stages.a.maxFailures");
    assert!(
        message(&diagnostics[0]).contains("over 100%"),
        "{diagnostics:?}"
    );
}

#[test]
fn an_unknown_policy_field_is_an_error_at_its_key() {
    let (code, diagnostics) =
        validate_json(&[("fleet.yaml", &policy_yaml("fleet", "  maxFailure: 1\n"))]);
    assert_eq!(code, 1);
    assert_eq!(
        places(&diagnostics),
        [("unknown-field".to_string(), "fleet.yaml".to_string(), 6)]
    );
    assert_eq!(diagnostics[0]["column"], 3);
    assert!(
        message(&diagnostics[0]).contains("\"maxFailure\""),
        "{diagnostics:?}"
    );
}

#[test]
fn two_policies_selecting_one_promotion_is_an_error_naming_both_files() {
    let (code, diagnostics) = validate_json(&[
        ("policies/all.yaml", &policy_yaml("all", "  selector: {}\n")),
        (
            "policies/critical.yaml",
            &policy_yaml(
                "critical",
                "  selector:\n    matchLabels: {tier: critical}\n",
            ),
        ),
        ("app.yaml", &promotion_yaml("app", "{tier: critical}", "{}")),
        ("other.yaml", &promotion_yaml("other", "{tier: low}", "{}")),
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        places(&diagnostics),
        [("policy-conflict".to_string(), "app.yaml".to_string(), 4)]
    );
    let text = message(&diagnostics[0]);
    for part in [
        "ClusterPromotion \"app\"",
        "\"all\" (",
        "policies/all.yaml)",
        "\"critical\" (",
        "policies/critical.yaml)",
        "tollgate.dev/policy",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }
}

#[test]
fn an_annotation_naming_a_missing_policy_is_an_error_at_the_annotation() {
    let (code, diagnostics) = validate_json(&[
        ("fleet.yaml", &policy_yaml("fleet", "  selector: {}\n")),
        (
            "app.yaml",
            &promotion_yaml("app", "{}", "\n    tollgate.dev/policy: fleet-typo"),
        ),
    ]);
    assert_eq!(code, 1);
    assert_eq!(
        places(&diagnostics),
        [("policy-not-found".to_string(), "app.yaml".to_string(), 7)]
    );
    assert_eq!(
        diagnostics[0]["path"],
        "metadata.annotations[tollgate.dev/policy]"
    );
    assert!(
        message(&diagnostics[0]).contains(
            "\"fleet-typo\", which is not among the validated files; pass the directory that holds it"
        ),
        "{}",
        message(&diagnostics[0])
    );
}

#[test]
fn an_annotation_naming_an_invalid_policy_points_at_its_file() {
    let (code, diagnostics) = validate_json(&[
        ("fleet.yaml", &policy_yaml("fleet", "  onFailure: Retry\n")),
        (
            "app.yaml",
            &promotion_yaml("app", "{}", "{tollgate.dev/policy: fleet}"),
        ),
    ]);
    assert_eq!(code, 1);
    let codes: Vec<String> = places(&diagnostics).into_iter().map(|p| p.0).collect();
    assert_eq!(codes, ["unsupported-value", "policy-not-found"]);
    let text = message(&diagnostics[1]);
    assert!(
        text.contains("fleet.yaml defines but which has no valid version"),
        "{text}"
    );
}

#[test]
fn the_annotation_resolves_a_conflict() {
    let (code, diagnostics) = validate_json(&[
        ("all.yaml", &policy_yaml("all", "  selector: {}\n")),
        ("also.yaml", &policy_yaml("also", "  selector: {}\n")),
        (
            "app.yaml",
            &promotion_yaml("app", "{}", "{tollgate.dev/policy: also}"),
        ),
    ]);
    assert_eq!((code, diagnostics), (0, Vec::new()));
}

#[test]
fn a_stage_override_no_governed_promotion_has_is_a_warning() {
    let (code, diagnostics) = validate_json(&[
        (
            "fleet.yaml",
            &policy_yaml(
                "fleet",
                "  stages:\n    a: {maxFailures: 1}\n    prod: {maxFailures: 0}\n",
            ),
        ),
        ("app.yaml", GOOD),
    ]);
    assert_eq!(code, 0, "a warning only");
    assert_eq!(
        places(&diagnostics),
        [(
            "policy-stage-unknown".to_string(),
            "fleet.yaml".to_string(),
            8
        )]
    );
    assert_eq!(diagnostics[0]["severity"], "warning");
    assert!(
        message(&diagnostics[0]).contains("\"prod\""),
        "{diagnostics:?}"
    );
}

#[test]
fn one_policy_name_in_two_files_is_an_error_at_each() {
    let (code, diagnostics) = validate_json(&[
        ("a.yaml", &policy_yaml("fleet", "  selector: {}\n")),
        ("b.yaml", &policy_yaml("fleet", "  selector: {}\n")),
        ("app.yaml", GOOD),
    ]);
    assert_eq!(code, 1);
    let code_name = "duplicate-policy-name".to_string();
    assert_eq!(
        places(&diagnostics),
        [
            (code_name.clone(), "a.yaml".to_string(), 4),
            (code_name, "b.yaml".to_string(), 4)
        ]
    );
}

/// A policy gating stage `a` with a 30s + 5 × 30s analysis (3m), and a promotion whose stage
/// `a` soaks for `delay`.
fn gated(delay: &str) -> [(&'static str, String); 2] {
    let policy = policy_yaml(
        "fleet",
        "  selector: {}\n  analyses:\n  - name: error-rate\n    prometheus:\n      address: http://prometheus.monitoring:9090\n      query: sum(rate(http_requests_total{cluster=~\"{{ clustersRegex }}\",code=~\"5..\"}[2m]))\n    initialDelay: 30s\n    interval: 30s\n    count: 6\n    successCondition: \"result < 0.01\"\n  stages:\n    a:\n      analyses: [error-rate]\n",
    );
    let promotion = GOOD.replace(
        "      matchLabels: {env: a}\n",
        &format!(
            "      matchLabels: {{env: a}}\n    trigger:\n      auto:\n        delay: {delay}\n"
        ),
    );
    [("fleet.yaml", policy), ("app.yaml", promotion)]
}

#[test]
fn an_analysis_longer_than_the_soak_is_a_warning_saying_by_how_much() {
    let files = gated("1m");
    let (code, diagnostics) = validate_json(&files.each_ref().map(|(p, t)| (*p, t.as_str())));
    assert_eq!(code, 0, "a warning only: {diagnostics:?}");
    assert_eq!(
        places(&diagnostics),
        [(
            "analysis-extends-soak".to_string(),
            "fleet.yaml".to_string(),
            18
        )]
    );
    assert_eq!(diagnostics[0]["column"], 7, "at the stage's analyses");
    assert_eq!(diagnostics[0]["path"], "spec.stages.a.analyses");
    let text = message(&diagnostics[0]);
    for part in [
        "analysis \"error-rate\" takes 3m0s",
        "longer than stage a's 1m0s soak: it extends the soak by 2m0s",
        "(ClusterPromotion good)",
    ] {
        assert!(text.contains(part), "{part:?} in {text}");
    }
    let fits = gated("5m");
    let (code, diagnostics) = validate_json(&fits.each_ref().map(|(p, t)| (*p, t.as_str())));
    assert_eq!((code, diagnostics), (0, Vec::new()), "3m fits a 5m soak");
}

#[test]
fn a_query_that_does_not_parse_is_an_error_at_its_line_through_the_binary() {
    let [(_, policy), (_, promotion)] = gated("5m");
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "fleet.yaml",
        &policy.replace("[2m]))\n", "[2m])\n"),
    );
    write(dir.path(), "app.yaml", &promotion);
    let assert = tollgate().arg("validate").arg(dir.path()).assert().code(1);
    let out = stdout_of(&assert);
    assert!(
        out.starts_with("error[invalid-promql]: Invalid value: PromQL does not parse: "),
        "{out}"
    );
    assert!(out.contains("fleet.yaml:11:14\n"), "{out}");
    assert!(
        out.contains("= field: spec.analyses[0].prometheus.query\n"),
        "{out}"
    );
}

#[test]
fn a_stage_naming_an_undefined_analysis_is_an_error_suggesting_the_closest() {
    let [(_, policy), (_, promotion)] = gated("5m");
    let policy = policy.replace("analyses: [error-rate]", "analyses: [eror-rate]");
    let (code, diagnostics) = validate_json(&[("fleet.yaml", &policy), ("app.yaml", &promotion)]);
    assert_eq!(code, 1);
    let codes: Vec<&str> = diagnostics
        .iter()
        .map(|d| d["code"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        codes,
        ["analysis-unused", "unknown-analysis"],
        "{diagnostics:?}"
    );
    assert_eq!(
        (
            diagnostics[1]["line"].as_u64(),
            diagnostics[1]["column"].as_u64()
        ),
        (Some(18), Some(18))
    );
    assert!(
        message(&diagnostics[1]).contains("did you mean \"error-rate\"?"),
        "{diagnostics:?}"
    );
}

#[test]
fn analyses_for_a_stage_no_governed_promotion_has_are_the_unused_override_warning() {
    let [(_, policy), (_, promotion)] = gated("1m");
    let policy = policy.replace("    a:\n      analyses", "    prod:\n      analyses");
    let (code, diagnostics) = validate_json(&[("fleet.yaml", &policy), ("app.yaml", &promotion)]);
    assert_eq!(code, 0, "{diagnostics:?}");
    assert_eq!(
        places(&diagnostics),
        [(
            "policy-stage-unknown".to_string(),
            "fleet.yaml".to_string(),
            17
        )],
        "no soak warning for a stage the promotion does not have"
    );
}

#[test]
fn a_policy_with_gates_and_no_admins_is_a_warning() {
    let policy = policy_yaml(
        "fleet",
        "  selector: {}\n  approvals:\n    a:\n      approvers: [alice@example.com, bob@example.com]\n      minApprovals: 2\n",
    );
    let (code, diagnostics) = validate_json(&[("fleet.yaml", &policy), ("app.yaml", GOOD)]);
    assert_eq!(code, 0, "a warning only: {diagnostics:?}");
    assert_eq!(
        places(&diagnostics),
        [(
            "policy-without-admins".to_string(),
            "fleet.yaml".to_string(),
            7
        )]
    );
    assert_eq!(diagnostics[0]["path"], "spec.approvals");
    let text = message(&diagnostics[0]);
    assert!(text.contains("gates stage a but lists no admins"), "{text}");
    // With admins: no warning (the gate applies whatever stage a's trigger says).
    let governed = policy.replace("  selector: {}\n", "  selector: {}\n  admins: [sre-lead]\n");
    let (code, diagnostics) = validate_json(&[("fleet.yaml", &governed), ("app.yaml", GOOD)]);
    assert_eq!((code, diagnostics), (0, Vec::new()));
}

#[test]
fn a_condition_that_can_never_be_true_or_false_is_an_error_at_its_line() {
    let analysis = |condition: &str| {
        policy_yaml(
            "fleet",
            &format!(
                "  selector: {{}}\n  analyses:\n  - name: error-rate\n    prometheus:\n      address: http://prometheus.monitoring:9090\n      query: sum(rate(http_requests_total[2m]))\n    interval: 30s\n    count: 2\n    successCondition: {condition}\n  stages:\n    a:\n      analyses: [error-rate]\n"
            ),
        )
    };
    let (code, diagnostics) = validate_json(&[
        ("fleet.yaml", &analysis("\"result + 1.0\"")),
        ("app.yaml", GOOD),
    ]);
    assert_eq!(code, 1, "{diagnostics:?}");
    assert_eq!(
        places(&diagnostics),
        [(
            "condition-not-boolean".to_string(),
            "fleet.yaml".to_string(),
            14
        )]
    );
    assert!(
        message(&diagnostics[0]).contains("an arithmetic result, never true or false"),
        "{diagnostics:?}"
    );
    // A comparison, or a value that may be a boolean when it runs, is fine.
    for fine in [
        "\"result < 0.01\"",
        "\"result\"",
        "\"size(result) > 0 && result[0] < 1.0\"",
    ] {
        let (code, diagnostics) =
            validate_json(&[("fleet.yaml", &analysis(fine)), ("app.yaml", GOOD)]);
        assert_eq!(code, 0, "{fine}: {diagnostics:?}");
    }
}

/// A policy whose stage `stage` compares latency with its `baseline` cohort (issue #48), and a
/// promotion with stages `a` then `b`.
fn compared(stage: &str, baseline: &str) -> [(&'static str, String); 2] {
    let policy = policy_yaml(
        "fleet",
        &format!(
            "  selector: {{}}\n  analyses:\n  - name: latency\n    prometheus:\n      address: http://prometheus.monitoring:9090\n      query: histogram_quantile(0.99, sum by (le, cluster) (rate(h_bucket{{cluster=~\"{{{{ clustersRegex }}}}\"}}[2m])))\n    compare:\n      baseline: {baseline}\n  stages:\n    {stage}:\n      analyses: [latency]\n"
        ),
    );
    let promotion =
        format!("{GOOD}  - name: b\n    clusterSelector:\n      matchLabels: {{env: b}}\n");
    [("fleet.yaml", policy), ("app.yaml", promotion)]
}

#[test]
fn a_next_stage_baseline_in_the_last_stage_is_an_error_at_the_stage_naming_it() {
    let files = compared("b", "NextStage");
    let (code, diagnostics) = validate_json(&files.each_ref().map(|(p, t)| (*p, t.as_str())));
    assert_eq!(code, 1, "{diagnostics:#?}");
    assert_eq!(
        places(&diagnostics),
        [("compare-baseline".to_string(), "fleet.yaml".to_string(), 16)]
    );
    assert_eq!(diagnostics[0]["path"], "spec.stages.b.analyses");
    let text = message(&diagnostics[0]);
    for part in [
        "\"latency\" compares with baseline NextStage",
        "stage b is the last stage of ClusterPromotion good",
    ] {
        assert!(text.contains(part), "{part:?} in {text}");
    }
    for fine in [compared("a", "NextStage"), compared("b", "Before")] {
        let (code, diagnostics) = validate_json(&fine.each_ref().map(|(p, t)| (*p, t.as_str())));
        assert_eq!((code, diagnostics), (0, Vec::new()));
    }
}

//! `tollgate validate`: exit codes, output formats, caret rendering, directory walks, seeds.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

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
fn strict_makes_warnings_fail() {
    tollgate()
        .args(["validate", "--strict"])
        .arg(seeds().join("04-cert-manager-rollout-auto.yaml"))
        .assert()
        .code(1);
}

#[test]
fn the_whole_seed_directory_validates() {
    let assert = tollgate().arg("validate").arg(seeds()).assert().code(0);
    assert!(stdout_of(&assert).contains("0 error(s)"));
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

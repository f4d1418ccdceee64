//! `tollgate retry` on a real repository: the retry annotation it commits (on a new branch, or with
//! `--commit` on the tracked branch), its counter going up by one, and refusals of unknown stages.

use assert_cmd::Command;
use tollgate_fixtures::{TestRepo, promotion, stage};

fn web() -> String {
    let mut p = promotion("web").chart("web", "1.0.0");
    for env in ["dev", "staging"] {
        p = p.stage(stage(env).selector("env", env).auto());
    }
    p.to_yaml()
}

fn retry(repo: &TestRepo, extra: &[&str]) -> std::process::Output {
    Command::cargo_bin("tollgate")
        .expect("binary")
        .args(["retry", "web"])
        .args(extra)
        .arg("--repo")
        .arg(repo.path())
        .output()
        .expect("tollgate retry runs")
}

fn annotation_at(repo: &TestRepo, rev: &str) -> String {
    let text = repo.git(&["show", &format!("{rev}:web.yaml")]);
    text.lines()
        .find(|l| l.contains("retry.tollgate.dev/staging"))
        .map(|l| l.trim().replace('"', ""))
        .unwrap_or_default()
}

#[test]
fn an_unknown_stage_is_refused_and_nothing_is_committed() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web());
    let head = repo.commit("web");
    let output = retry(&repo, &["prod"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("prod"));
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head);
    assert_eq!(repo.git(&["branch", "--list", "tollgate/*"]), "");
}

#[test]
fn retry_commits_on_a_branch_then_on_main_counting_up() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web());
    let head = repo.commit("web");
    let output = retry(&repo, &["staging"]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head, "main is untouched");
    let branch = format!("tollgate/retry-web-staging-{}-1", &head[..7]);
    let first = annotation_at(&repo, &branch);
    assert!(first.ends_with("/1"), "{first}");
    repo.git(&["merge", "-q", "--ff-only", &branch]);
    // The counter defaults to one more than the annotation's, for the same snapshot.
    let output = retry(&repo, &["staging", "--commit"]);
    assert!(output.status.success(), "{output:?}");
    let second = annotation_at(&repo, "HEAD");
    assert_eq!(second, first.replace("/1", "/2"));
    assert!(
        repo.git(&["log", "-1", "--format=%s"])
            .contains("Retry web stage staging of snapshot #1"),
    );
}

#[test]
fn a_retry_committed_on_the_checked_out_branch_survives_the_users_next_commit() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web());
    repo.commit("web");
    let output = retry(&repo, &["staging", "--commit"]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        "",
        "the index and the working tree follow the commit, as after `git commit`"
    );
    // The user goes on working and commits everything.
    repo.write("NOTES.md", "notes\n");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-am", "notes"]);
    assert!(
        annotation_at(&repo, "HEAD").ends_with("/1"),
        "the next commit keeps the retry: {}",
        repo.git(&["show", "HEAD:web.yaml"])
    );

    // Uncommitted changes to the file are never overwritten: the retry is refused.
    let edited = web().replace("1.0.0", "1.0.1");
    repo.write("web.yaml", &edited);
    let head = repo.git(&["rev-parse", "HEAD"]);
    let output = retry(&repo, &["staging", "--commit"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("uncommitted changes"),
        "{output:?}"
    );
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head, "nothing committed");
    assert_eq!(
        std::fs::read_to_string(repo.path().join("web.yaml")).expect("read"),
        edited,
        "the user's edit is kept"
    );
}

#[test]
fn a_counter_not_above_the_written_one_is_warned_about_and_zero_is_a_usage_error() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web());
    repo.commit("web");
    assert!(retry(&repo, &["staging", "--commit"]).status.success());
    assert!(retry(&repo, &["staging", "--commit"]).status.success());
    assert!(annotation_at(&repo, "HEAD").ends_with("/2"));
    let output = retry(&repo, &["staging", "--commit", "--n", "1"]);
    assert!(output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("already holds counter 2")
            && stderr.contains("a spent counter does nothing"),
        "{stderr}"
    );
    let head = repo.git(&["rev-parse", "HEAD"]);
    let output = retry(&repo, &["staging", "--n", "0"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head, "nothing committed");
}

//! `tollgate plan --from REV --to REV` on real repositories built with the git CLI; the text and
//! Markdown outputs are snapshot-tested (commit dates are pinned, so SHAs are stable).

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;
use tollgate_fixtures::{promotion, stage};

mod git_support;

/// Dates are pinned so commit SHAs in the snapshots are stable.
fn git(dir: &Path, args: &[&str]) -> String {
    git_support::git_at(dir, args, "2026-01-02T03:04:05Z")
}

/// The knobs the scenarios turn.
#[derive(Clone)]
struct App {
    version: &'static str,
    staging_env: &'static str,
    delay: &'static str,
    approved: bool,
    canary: bool,
}

const APP: App = App {
    version: "1.0.0",
    staging_env: "staging",
    delay: "5m",
    approved: false,
    canary: false,
};

fn app(app: &App) -> String {
    let staging = stage("staging")
        .selector("env", app.staging_env)
        .delay(app.delay);
    let production = stage("production")
        .selector("env", "production")
        .approved(app.approved);
    let mut promotion = promotion("app").chart("app", app.version);
    if app.canary {
        promotion = promotion.stage(stage("canary").selector("env", "canary"));
    }
    promotion.stage(staging).stage(production).to_yaml()
}

fn db() -> String {
    promotion("db")
        .preserve_on_delete(true)
        .policy_ref("ConfigMap", "db-config", "default")
        .stage(stage("all").selector("tier", "db"))
        .to_yaml()
}

/// A repository whose `HEAD~1` has `app` (and `db`) as given, and whose `HEAD` has `to`.
fn repository(from: &[(&str, &str)], to: &[(&str, Option<&str>)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    for (file, content) in from {
        let path = root.join(file);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, content).expect("write");
    }
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "before"]);
    for (file, content) in to {
        match content {
            Some(content) => std::fs::write(root.join(file), content).expect("write"),
            None => std::fs::remove_file(root.join(file)).expect("remove"),
        }
    }
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "--allow-empty", "-m", "after"]);
    dir
}

fn plan(dir: &Path, format: &str) -> (Option<i32>, String) {
    let output = Command::cargo_bin("tollgate")
        .expect("binary")
        .args([
            "plan", "--from", "HEAD~1", "--to", "HEAD", "-o", format, "--repo",
        ])
        .arg(dir)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.is_empty(), "{stderr}");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// Checks the exit code and snapshots text and Markdown.
fn snapshot(name: &str, dir: &Path, exit: i32) {
    let (code, text) = plan(dir, "text");
    assert_eq!(code, Some(exit), "{text}");
    insta::assert_snapshot!(format!("{name}_text"), text);
    let (code, markdown) = plan(dir, "markdown");
    assert_eq!(code, Some(exit), "{markdown}");
    assert!(!markdown.contains('\u{1b}'), "no ANSI in Markdown");
    insta::assert_snapshot!(format!("{name}_markdown"), markdown);
}

fn base() -> Vec<(&'static str, String)> {
    vec![("app.yaml", app(&APP)), ("db.yaml", db())]
}

fn repo_from(to: &[(&str, Option<String>)]) -> tempfile::TempDir {
    let from = base();
    let from: Vec<(&str, &str)> = from.iter().map(|(f, c)| (*f, c.as_str())).collect();
    let to: Vec<(&str, Option<&str>)> = to.iter().map(|(f, c)| (*f, c.as_deref())).collect();
    repository(&from, &to)
}

#[test]
fn chart_bump_restarts_every_stage_and_lists_approvals() {
    let dir = repo_from(&[(
        "app.yaml",
        Some(app(&App {
            version: "1.1.0",
            ..APP
        })),
    )]);
    snapshot("chart_bump", dir.path(), 0);
    let (_, json) = plan(dir.path(), "json");
    insta::assert_snapshot!("chart_bump_json", json);
    let document: Value = serde_json::from_str(&json).expect("json");
    let app = &document["promotions"][0];
    assert_eq!(app["name"], "app");
    assert_eq!(app["restart"], true);
    assert_eq!(
        app["stagesRerun"],
        serde_json::json!(["staging", "production"])
    );
    assert_eq!(app["approvals"][0]["stage"], "production");
    assert_eq!(app["approvals"][0]["need"], "needed");
    assert_eq!(app["chartChanges"][0]["new"]["chartVersion"], "1.1.0");
    assert_eq!(document["promotions"][1]["status"], "unchanged");
}

#[test]
fn trigger_only_edit_does_not_restart() {
    let dir = repo_from(&[(
        "app.yaml",
        Some(app(&App {
            delay: "10m",
            approved: true,
            ..APP
        })),
    )]);
    snapshot("trigger_only", dir.path(), 0);
}

#[test]
fn selector_change_shows_old_and_new() {
    let dir = repo_from(&[(
        "app.yaml",
        Some(app(&App {
            staging_env: "qa",
            ..APP
        })),
    )]);
    snapshot("selector_change", dir.path(), 0);
}

#[test]
fn stage_added() {
    let dir = repo_from(&[(
        "app.yaml",
        Some(app(&App {
            canary: true,
            ..APP
        })),
    )]);
    snapshot("stage_added", dir.path(), 0);
}

#[test]
fn promotion_removed_warns_about_profiles() {
    let dir = repo_from(&[("db.yaml", None)]);
    snapshot("promotion_removed", dir.path(), 0);
}

#[test]
fn invalid_file_at_to_exits_1_with_locations() {
    let broken = app(&APP).replace("delay: 5m", "delay: five minutes");
    let dir = repo_from(&[
        ("app.yaml", Some(broken)),
        ("db.yaml", Some(format!("{}  oops: [\n", db()))),
    ]);
    snapshot("invalid_at_to", dir.path(), 1);
}

#[test]
fn unknown_revision_exits_2() {
    let dir = repo_from(&[]);
    let output = Command::cargo_bin("tollgate")
        .expect("binary")
        .args(["plan", "--from", "nope", "--to", "HEAD", "--repo"])
        .arg(dir.path())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("\"nope\""));
}

#[test]
fn recovery_compares_with_the_last_good_snapshot() {
    let broken = app(&APP).replace("delay: 5m", "delay: soon");
    let dir = repository(&[("app.yaml", &app(&APP))], &[("app.yaml", Some(&broken))]);
    let root = dir.path();
    let recover = |content: &str, message: &str| {
        std::fs::write(root.join("app.yaml"), content).expect("write");
        git(root, &["commit", "-q", "-a", "-m", message]);
        let (code, json) = plan(root, "json");
        assert_eq!(code, Some(0), "{json}");
        let document: Value = serde_json::from_str(&json).expect("json");
        document["promotions"][0].clone()
    };
    let same = recover(&app(&APP), "fix the delay");
    assert_eq!(same["status"], "recovered");
    assert_eq!(same["stagesRerun"], serde_json::json!([]));
    assert_eq!(same["snapshotFrom"], same["snapshotTo"]);

    git(root, &["reset", "-q", "--hard", "HEAD~1"]);
    let bumped = recover(
        &app(&App {
            version: "2.0.0",
            ..APP
        }),
        "fix and bump",
    );
    assert_eq!(bumped["status"], "recovered");
    assert_eq!(bumped["profileSpecChanged"], true);
    assert_eq!(
        bumped["stagesRerun"],
        serde_json::json!(["staging", "production"])
    );
}

//! `tollgate history NAME` on real repositories built with the git CLI.

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;
use tollgate_fixtures::{promotion, stage};
use tollgate_manifest::snapshot::short_sha;

use crate::git_http_server;

use tollgate_fixtures::git::{git, git_at};

fn manifest(name: &str, version: &str, annotation: Option<&str>, approved: bool) -> String {
    let mut manifest = promotion(name);
    if let Some(value) = annotation {
        manifest = manifest.annotation("approve.tollgate.dev/production", value);
    }
    manifest
        .chart("app", version)
        .stage(stage("staging").selector("env", "staging"))
        .stage(
            stage("production")
                .selector("env", "production")
                .approved(approved),
        )
        .to_yaml()
}

fn commit(dir: &Path, file: &str, content: &str, message: &str) -> String {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, content).expect("write");
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
    git(dir, &["rev-parse", "HEAD"])
}

/// v1, v2, approval of production, revert of the approval-free v2 content → rollback to #1.
struct Fixture {
    dir: tempfile::TempDir,
    v1: String,
    approval: String,
}

fn fixture(branch: &str) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    git(root, &["init", "-q", "-b", branch]);
    let v1 = commit(
        root,
        "deploy/app.yaml",
        &manifest("app", "1.0.0", None, false),
        "app v1",
    );
    commit(
        root,
        "deploy/other.yaml",
        &manifest("other", "1.0.0", None, false),
        "add other",
    );
    commit(
        root,
        "deploy/app.yaml",
        &manifest("app", "2.0.0", None, false),
        "app v2",
    );
    let approval = commit(
        root,
        "deploy/app.yaml",
        &manifest("app", "2.0.0", Some(&v1[..10]), true),
        "approve production",
    );
    commit(
        root,
        "deploy/app.yaml",
        &manifest("app", "1.0.0", Some(&v1[..10]), true),
        "roll back to v1",
    );
    Fixture { dir, v1, approval }
}

fn tollgate() -> Command {
    Command::cargo_bin("tollgate").expect("binary")
}

#[test]
fn table_lists_snapshots_rollbacks_and_approvals() {
    let fixture = fixture("main");
    let output = tollgate()
        .args(["history", "app", "--repo"])
        .arg(fixture.dir.path())
        .args(["--path", "deploy"])
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for expected in [
        "#1",
        "#2",
        "#3",
        short_sha(&fixture.v1),
        "Alice Author",
        "app v2",
        // Without the cluster, git can only tell that #3 has #1's content.
        "same content as #1",
        "current",
        "Approvals:",
        "approved: true",
        short_sha(&fixture.approval),
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    assert!(
        stdout.contains(&format!("annotation {}", &fixture.v1[..10])),
        "{stdout}"
    );
}

/// The fixture's history with pinned dates (stable commit SHAs), under a promotion name as long
/// as real ones get, committed with a subject that wraps.
fn pinned_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    let name = "core-payments-gateway-eu";
    let mut v1 = String::new();
    for (n, (version, approved, subject)) in [
        ("1.0.0", false, "core payments gateway v1"),
        (
            "2.0.0",
            false,
            "core payments gateway v2: the new settlement batching for the EU",
        ),
        ("2.0.0", true, "approve production"),
        ("1.0.0", true, "roll back to v1"),
    ]
    .into_iter()
    .enumerate()
    {
        let annotation = (n > 1).then(|| &v1[..10]);
        let content = manifest(name, version, annotation, approved);
        std::fs::create_dir_all(root.join("deploy")).expect("mkdir");
        std::fs::write(root.join("deploy/app.yaml"), content).expect("write");
        let date = format!("2026-12-06T02:5{n}:00Z");
        git_at(root, &["add", "-A"], &date);
        git_at(root, &["commit", "-q", "-m", subject], &date);
        if n == 0 {
            v1 = git(root, &["rev-parse", "HEAD"]);
        }
    }
    dir
}

#[test]
fn the_table_at_80_and_120_columns_cuts_no_word() {
    let dir = pinned_fixture();
    for columns in [80usize, 120] {
        let output = tollgate()
            .args([
                "history",
                "core-payments-gateway-eu",
                "--path",
                "deploy",
                "--repo",
            ])
            .arg(dir.path())
            .env("COLUMNS", columns.to_string())
            .output()
            .expect("run");
        assert!(output.status.success(), "{output:?}");
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        for line in text.lines() {
            assert!(
                line.chars().count() <= columns,
                "wider than {columns}: {line:?}\n{text}"
            );
        }
        assert!(!text.contains('…'), "{text}");
        // A date and its time on one line (a no-break space joins them).
        assert!(text.contains("2026-12-06\u{a0}02:50"), "{text}");
        insta::assert_snapshot!(format!("history_{columns}"), text);
    }
}

#[test]
fn json_is_a_stable_document() {
    let fixture = fixture("main");
    let output = tollgate()
        .args(["history", "app", "-o", "json", "--branch", "main", "--repo"])
        .arg(fixture.dir.path())
        .output()
        .expect("run");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let document: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(document["name"], "app");
    assert_eq!(document["branch"], "main");
    assert_eq!(document["status"], "valid");
    assert_eq!(document["current"], 3);
    let snapshots = document["snapshots"].as_array().expect("snapshots");
    assert_eq!(snapshots.len(), 3);
    assert_eq!(snapshots[0]["commit"]["sha"], fixture.v1.as_str());
    assert_eq!(snapshots[0]["commit"]["seq"], 0);
    assert_eq!(snapshots[0]["sameContentAs"], Value::Null);
    assert_eq!(snapshots[2]["sameContentAs"], 1);
    // Whether #3 was a rollback is the cluster's to say (`--kubeconfig`); git alone cannot.
    assert_eq!(snapshots[2]["rollbackOf"], Value::Null);
    assert_eq!(snapshots[2]["run"], Value::Null);
    assert_eq!(snapshots[2]["snapshotId"], snapshots[0]["snapshotId"]);
    assert_eq!(snapshots[1]["file"], "deploy/app.yaml");
    assert_eq!(
        snapshots[1]["profileSpecHash"].as_str().map(str::len),
        Some(44)
    );
    let approvals = document["approvals"].as_array().expect("approvals");
    assert_eq!(approvals.len(), 2);
    assert_eq!(approvals[0]["stage"], "production");
    assert_eq!(approvals[0]["commit"]["sha"], fixture.approval.as_str());
    let kinds: Vec<&str> = approvals
        .iter()
        .filter_map(|a| a["kind"]["type"].as_str())
        .collect();
    assert_eq!(kinds, vec!["field", "annotation"]);
    assert_eq!(approvals[1]["kind"]["value"], &fixture.v1[..10]);
    assert_eq!(document["head"]["subject"], "roll back to v1");
}

#[test]
fn default_branch_is_the_checked_out_one() {
    let fixture = fixture("release");
    let output = tollgate()
        .args(["history", "other", "-o", "json", "--repo"])
        .arg(fixture.dir.path())
        .output()
        .expect("run");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let document: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(document["branch"], "release");
    assert_eq!(document["snapshots"].as_array().map(Vec::len), Some(1));
}

#[test]
fn unknown_name_exits_1_and_lists_known_names() {
    let fixture = fixture("main");
    let output = tollgate()
        .args(["history", "nope", "--repo"])
        .arg(fixture.dir.path())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("nope") && stderr.contains("app, other"),
        "{stderr}"
    );
}

#[test]
fn repository_errors_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = tollgate()
        .args(["history", "app", "--repo"])
        .arg(dir.path().join("missing"))
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    let fixture = fixture("main");
    let output = tollgate()
        .args(["history", "app", "--branch", "nope", "--repo"])
        .arg(fixture.dir.path())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("nope"), "{stderr}");
}

#[test]
fn a_private_remote_is_read_with_a_token_and_refused_without() {
    let fixture = fixture("main");
    let served = tempfile::tempdir().expect("served");
    let bare = served.path().join("promos.git");
    git(
        fixture.dir.path(),
        &["clone", "-q", "--bare", ".", bare.to_str().expect("utf-8")],
    );
    let server = git_http_server::GitHttpServer::start(
        served.path().to_path_buf(),
        "x-access-token",
        "hist-tok-5e1",
    );
    let url = format!("{}/promos.git", server.base_url);
    let token = served.path().join("token");
    std::fs::write(&token, "hist-tok-5e1\n").expect("token file");
    let cache = tempfile::tempdir().expect("cache");

    let output = tollgate()
        .args([
            "history", "app", "--path", "deploy", "-o", "json", "--repo", &url,
        ])
        .arg("--cache-dir")
        .arg(cache.path())
        .arg("--git-token-file")
        .arg(&token)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let history: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert!(history.to_string().contains(&fixture.v1), "{history}");

    let refused = tollgate()
        .args(["history", "app", "--repo", &url])
        .arg("--cache-dir")
        .arg(cache.path())
        .output()
        .expect("run");
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.to_lowercase().contains("auth"), "{stderr}");
}

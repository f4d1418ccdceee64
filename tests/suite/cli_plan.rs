//! `tollgate plan --from REV --to REV` on real repositories built with the git CLI; the text and
//! Markdown outputs are snapshot-tested (commit dates are pinned, so SHAs are stable).

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;
use tollgate_fixtures::{promotion, stage};

use crate::support;

/// Dates are pinned so commit SHAs in the snapshots are stable.
fn git(dir: &Path, args: &[&str]) -> String {
    tollgate_fixtures::git::git_at(dir, args, "2026-01-02T03:04:05Z")
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

/// The instant timeline estimates start from, so that the Mermaid blocks are stable.
const NOW: &str = "2026-01-02T03:04:05Z";

fn plan(dir: &Path, format: &str) -> (Option<i32>, String) {
    plan_with(dir, &["--from", "HEAD~1", "--to", "HEAD", "-o", format])
}

/// `tollgate plan --repo DIR --now NOW ARGS…`: exit code and stdout; stderr must be empty.
/// Text one line per detail (a width no detail reaches), for tests of what it says; the
/// snapshots pin it at 80 and 120 columns.
fn plan_with(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    plan_at(dir, args, 1000)
}

/// `plan_with` with text as wide as `columns` (`COLUMNS`).
fn plan_at(dir: &Path, args: &[&str], columns: usize) -> (Option<i32>, String) {
    let output = Command::cargo_bin("tollgate")
        .expect("binary")
        .arg("plan")
        .args(args)
        .args(["--now", NOW, "--repo"])
        .arg(dir)
        .env("COLUMNS", columns.to_string())
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.is_empty(), "{stderr}");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// `tollgate plan --repo DIR ARGS…` that must fail: exit code and stderr.
fn plan_error(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let output = Command::cargo_bin("tollgate")
        .expect("binary")
        .arg("plan")
        .args(args)
        .arg("--repo")
        .arg(dir)
        .output()
        .expect("run");
    assert!(
        output.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Checks the exit code and snapshots text and Markdown.
fn snapshot(name: &str, dir: &Path, exit: i32) {
    let args = ["--from", "HEAD~1", "--to", "HEAD", "-o", "text"];
    let (code, text) = plan_at(dir, &args, 80);
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
    // At 120 columns too, every line within the width and every word whole.
    let args = ["--from", "HEAD~1", "--to", "HEAD", "-o", "text"];
    for columns in [80, 120] {
        let (_, text) = plan_at(dir.path(), &args, columns);
        for line in text.lines() {
            assert!(
                line.chars().count() <= columns,
                "wider than {columns}: {line:?}"
            );
        }
        let approval = text
            .lines()
            .position(|l| l.starts_with("  approval "))
            .expect("an approval line");
        let continued = text.lines().nth(approval + 1).unwrap_or_default();
        assert!(continued.starts_with(&" ".repeat(19)), "{text}");
    }
    let (_, wide) = plan_at(dir.path(), &args, 120);
    insta::assert_snapshot!("chart_bump_text_120", wide);
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
    let (code, stderr) = plan_error(dir.path(), &["--from", "nope", "--to", "HEAD"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("unknown revision \"nope\""), "{stderr}");
    // Also when the merge base is asked for: the unknown name is said, not a merge-base error.
    let (code, stderr) = plan_error(
        dir.path(),
        &["--from", "main", "--to", "no-such-branch", "--merge-base"],
    );
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("unknown revision \"no-such-branch\""),
        "{stderr}"
    );
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

/// A repository where `main` changed `app` after `pr` branched off, and `pr` changed `db`:
/// the PR branch is behind main, as a PR usually is by the time it is reviewed.
fn pr_behind_main() -> tempfile::TempDir {
    let dir = repo_from(&[]);
    let root = dir.path();
    git(root, &["checkout", "-q", "-b", "pr"]);
    let db_changed = db().replace("db-config", "db-config-v2");
    std::fs::write(root.join("db.yaml"), db_changed).expect("write");
    git(root, &["commit", "-q", "-a", "-m", "pr: new db config"]);
    git(root, &["checkout", "-q", "main"]);
    let app_bumped = app(&App {
        version: "2.0.0",
        ..APP
    });
    std::fs::write(root.join("app.yaml"), app_bumped).expect("write");
    git(root, &["commit", "-q", "-a", "-m", "main: bump app"]);
    dir
}

fn statuses(json: &str) -> Vec<(String, String)> {
    let document: Value = serde_json::from_str(json).expect("json");
    document["promotions"]
        .as_array()
        .expect("promotions")
        .iter()
        .map(|p| {
            let field = |name: &str| p[name].as_str().unwrap_or_default().to_string();
            (field("name"), field("status"))
        })
        .collect()
}

#[test]
fn a_branch_is_compared_with_its_merge_base_so_only_the_pr_changes_show() {
    let dir = pr_behind_main();
    let root = dir.path();
    let base = git(root, &["merge-base", "main", "pr"]);
    let short = &base[..7];

    let (code, json) = plan_with(root, &["--from", "main", "--to", "pr", "-o", "json"]);
    assert_eq!(code, Some(0), "{json}");
    let only_db = vec![
        ("app".to_string(), "unchanged".to_string()),
        ("db".to_string(), "restart".to_string()),
    ];
    assert_eq!(statuses(&json), only_db, "{json}");
    let document: Value = serde_json::from_str(&json).expect("json");
    assert_eq!(document["mergeBase"]["sha"], base.as_str());

    let said = format!("compared with merge base {short} of main and pr");
    let (_, text) = plan_with(root, &["--from", "main", "--to", "pr"]);
    assert!(text.contains(&said), "{text}");
    let (_, markdown) = plan_with(root, &["--from", "main", "--to", "pr", "-o", "markdown"]);
    assert!(markdown.contains(&said), "{markdown}");

    // A remote-tracking branch is a branch too.
    git(root, &["update-ref", "refs/remotes/origin/main", "main"]);
    let (_, json) = plan_with(root, &["--from", "origin/main", "--to", "pr", "-o", "json"]);
    assert_eq!(statuses(&json), only_db, "{json}");

    // Today's behaviour on request: main's newer app reads as undone by the PR.
    let (_, json) = plan_with(
        root,
        &[
            "--from",
            "main",
            "--to",
            "pr",
            "--no-merge-base",
            "-o",
            "json",
        ],
    );
    assert_eq!(statuses(&json)[0], ("app".into(), "restart".into()));
    let (_, text) = plan_with(root, &["--from", "main", "--to", "pr", "--no-merge-base"]);
    assert!(!text.contains("merge base"), "{text}");
}

#[test]
fn a_commit_sha_is_compared_as_is_unless_the_merge_base_is_asked_for() {
    let dir = pr_behind_main();
    let root = dir.path();
    let main = git(root, &["rev-parse", "main"]);
    let (_, json) = plan_with(root, &["--from", &main, "--to", "pr", "-o", "json"]);
    assert_eq!(statuses(&json)[0], ("app".into(), "restart".into()));
    let document: Value = serde_json::from_str(&json).expect("json");
    assert!(document["mergeBase"].is_null(), "{json}");

    let (_, json) = plan_with(
        root,
        &["--from", &main, "--to", "pr", "--merge-base", "-o", "json"],
    );
    assert_eq!(statuses(&json)[0], ("app".into(), "unchanged".into()));
}

#[test]
fn unrelated_histories_have_no_merge_base_and_the_error_names_both_refs() {
    let dir = repo_from(&[]);
    let root = dir.path();
    git(root, &["checkout", "-q", "--orphan", "elsewhere"]);
    git(root, &["commit", "-q", "-m", "unrelated"]);
    let (code, stderr) = plan_error(root, &["--from", "main", "--to", "elsewhere"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("main and elsewhere have no common ancestor (unrelated histories)"),
        "{stderr}"
    );
    assert!(stderr.contains("--no-merge-base"), "{stderr}");
}

#[test]
fn a_shallow_clone_missing_the_merge_base_says_to_fetch_more_history() {
    let source = pr_behind_main();
    let clones = tempfile::tempdir().expect("tempdir");
    let url = format!("file://{}", source.path().display());
    git(
        clones.path(),
        &[
            "clone",
            "-q",
            "--depth",
            "1",
            "--no-single-branch",
            &url,
            "shallow",
        ],
    );
    let shallow = clones.path().join("shallow");
    let (code, stderr) = plan_error(&shallow, &["--from", "origin/main", "--to", "origin/pr"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("the merge base of origin/main and origin/pr is not in this shallow clone: fetch more history"),
        "{stderr}"
    );
}

/// One promotion whose stages have a delay, a promotion window and a manual gate.
fn gated() -> String {
    promotion("gated")
        .chart("app", "1.0.0")
        .stage(stage("canary").selector("env", "canary").delay("30m"))
        .stage(
            stage("staging")
                .selector("env", "staging")
                .delay("10m")
                .window("0 10 * * 1-5", "0 16 * * 1-5"),
        )
        .stage(stage("production").selector("env", "production").manual())
        .to_yaml()
}

/// A repository whose `HEAD` adds the gated promotion.
fn gated_repo() -> tempfile::TempDir {
    repository(&[("db.yaml", &db())], &[("gated.yaml", Some(&gated()))])
}

/// The ```mermaid block of a Markdown plan.
fn mermaid_block(markdown: &str) -> &str {
    let start = markdown.find("```mermaid\n").expect("a mermaid block");
    let end = markdown[start + 3..].find("```").expect("block end") + start + 3;
    &markdown[start..end + 3]
}

/// One task of a Mermaid gantt block: `name :[tags, ]id, start, end`.
#[derive(Debug)]
struct Task {
    name: String,
    tags: Vec<String>,
    id: String,
    start: chrono::NaiveDateTime,
    /// `None` for a milestone (`0m`).
    end: Option<chrono::NaiveDateTime>,
    section: String,
}

/// The tasks of the Markdown's Mermaid block, checked against Mermaid's rules on the way: a task
/// name has no colon, ids are unique and of `[A-Za-z0-9_-]`, dates are in the `dateFormat`.
fn gantt_tasks(markdown: &str) -> Vec<Task> {
    let date = |text: &str| {
        chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S")
            .unwrap_or_else(|e| panic!("{text:?} is not in the dateFormat: {e}"))
    };
    let block = mermaid_block(markdown);
    assert!(block.contains("dateFormat YYYY-MM-DD HH:mm:ss"), "{block}");
    let mut tasks: Vec<Task> = Vec::new();
    let mut section = String::new();
    for line in block.lines() {
        if let Some(name) = line.trim().strip_prefix("section ") {
            section = name.to_string();
        }
        let Some((name, meta)) = line.split_once(" :") else {
            continue;
        };
        assert!(!name.contains(':'), "colon in task name: {line}");
        let mut fields: Vec<&str> = meta.split(", ").collect();
        let tags: Vec<String> = fields
            .iter()
            .take_while(|f| ["crit", "milestone", "done", "active"].contains(f))
            .map(|t| t.to_string())
            .collect();
        fields.drain(..tags.len());
        let [id, start, end] = fields[..] else {
            panic!("task line is not `name :[tags, ]id, start, end`: {line}");
        };
        assert!(
            id.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "{line}"
        );
        assert!(tasks.iter().all(|t| t.id != id), "duplicate id: {line}");
        let end = match end {
            "0m" => None,
            end => Some(date(end)),
        };
        let task = Task {
            name: name.trim().to_string(),
            tags,
            id: id.to_string(),
            start: date(start),
            end,
            section: section.clone(),
        };
        assert!(task.end.is_none_or(|end| end >= task.start), "{line}");
        tasks.push(task);
    }
    tasks
}

fn at(text: &str) -> chrono::NaiveDateTime {
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").expect("test time")
}

#[test]
fn timeline_is_a_mermaid_gantt_of_soaks_windows_and_approvals() {
    let dir = gated_repo();
    let (code, markdown) = plan(dir.path(), "markdown");
    assert_eq!(code, Some(0), "{markdown}");
    insta::assert_snapshot!("timeline_markdown", markdown);
    let tasks = gantt_tasks(&markdown);
    let names: Vec<(&str, &str)> = tasks
        .iter()
        .map(|t| (t.section.as_str(), t.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("canary", "provisioning"),
            ("canary", "soak"),
            ("staging", "provisioning"),
            ("staging", "soak"),
            ("staging", "wait for the promotion window"),
            ("production", "provisioning"),
            ("production", "approval (assumed at once)"),
        ],
        "{markdown}"
    );
    // The window (weekdays 10:00 to 16:00) opens at 10:00 on this Friday: the wait ends then, and
    // production starts at that instant.
    assert_eq!(tasks[4].end, Some(at("2026-01-02 10:00:00")));
    assert_eq!(tasks[5].start, at("2026-01-02 10:00:00"));
    assert_eq!(tasks[6].tags, ["milestone"]);
    assert!(
        markdown.contains("- estimated end: 2026-01-02 10:01 UTC"),
        "{markdown}"
    );
}

/// The gated promotion governed by `policy` (YAML), added in `HEAD`.
fn gated_repo_with_policy(policy: &str) -> tempfile::TempDir {
    repository(
        &[("db.yaml", &db())],
        &[
            ("gated.yaml", Some(&gated())),
            ("policy.yaml", Some(policy)),
        ],
    )
}

/// The issue's case: a blackout in force until 00:03 tomorrow. The old estimate ended at 10:01
/// today; the engine starts nothing before 00:03.
#[test]
fn the_estimate_starts_no_stage_before_a_blackout_in_force_ends() {
    let policy = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: freeze\nspec:\n  blackouts:\n  - from: \"2026-01-01T00:00:00Z\"\n    to: \"2026-01-03T00:03:00Z\"\n    reason: release freeze\n";
    let dir = gated_repo_with_policy(policy);
    let (code, markdown) = plan(dir.path(), "markdown");
    assert_eq!(code, Some(0), "{markdown}");
    let tasks = gantt_tasks(&markdown);
    let end_of_freeze = at("2026-01-03 00:03:00");
    let (held, rest): (Vec<&Task>, Vec<&Task>) = tasks
        .iter()
        .partition(|t| t.name == "blackout holds the start");
    assert_eq!(held.len(), 1, "{markdown}");
    assert_eq!(
        (
            held[0].section.as_str(),
            held[0].start,
            held[0].end,
            &held[0].tags
        ),
        (
            "canary",
            at("2026-01-02 03:04:05"),
            Some(end_of_freeze),
            &vec!["crit".to_string()]
        )
    );
    assert!(!rest.is_empty());
    for task in rest {
        assert!(task.start >= end_of_freeze, "starts before 00:03: {task:?}");
    }
    for needle in [
        "- canary: a blackout (release freeze) holds its start until 2026-01-03 00:03 UTC",
        "| blackout | in force until 2026-01-03 00:03 UTC (release freeze): no stage of this run starts before then |",
        // canary 1m + 30m, staging 1m + 10m, then its window (Saturday: Monday 10:00).
        "- staging: waits for its promotion window, which opens at 2026-01-05 10:00 UTC",
        "- estimated end: 2026-01-05 10:01 UTC",
    ] {
        assert!(
            markdown.contains(needle),
            "{needle:?} missing in:\n{markdown}"
        );
    }
    let (_, json) = plan(dir.path(), "json");
    let document: Value = serde_json::from_str(&json).expect("json");
    let start = &document["promotions"][1]["runStart"];
    assert_eq!(start["blackoutUntil"], "2026-01-03T00:03:00Z", "{json}");
    assert_eq!(start["waits"]["for"], "nothing", "{json}");
}

/// Waves and their pauses take their time; onNewSnapshot is stated by the engine.
#[test]
fn waves_with_pauses_add_their_time_to_the_estimate() {
    let policy = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: waves\nspec:\n  onNewSnapshot: Queue\n  stages:\n    canary:\n      waves:\n        size: 1\n        canary: 1\n        pause: 7m\n";
    let dir = gated_repo_with_policy(policy);
    let (code, markdown) = plan(dir.path(), "markdown");
    assert_eq!(code, Some(0), "{markdown}");
    let canary: Vec<(String, i64, Option<i64>)> = gantt_tasks(&markdown)
        .into_iter()
        .filter(|t| t.section == "canary")
        .map(|t| {
            let minute = |at: chrono::NaiveDateTime| (at - t.start).num_minutes();
            let from_now = (t.start - at("2026-01-02 03:04:05")).num_minutes();
            (t.name.clone(), from_now, t.end.map(minute))
        })
        .collect();
    // Assumed fleet: the canary, then two waves of one; 1m each, 7m pauses, then the 30m soak.
    let expected: Vec<(String, i64, Option<i64>)> = [
        ("provisioning wave 1/3", 0, Some(1)),
        ("pause after wave 1/3", 1, Some(7)),
        ("provisioning wave 2/3", 8, Some(1)),
        ("pause after wave 2/3", 9, Some(7)),
        ("provisioning wave 3/3", 16, Some(1)),
        ("soak", 17, Some(30)),
    ]
    .iter()
    .map(|(n, s, e)| (n.to_string(), *s, *e))
    .collect();
    assert_eq!(canary, expected, "{markdown}");
    assert!(
        markdown.contains("| new commits | Queue: a run in progress completes first; then every newer snapshot runs in commit order, this one last |"),
        "{markdown}"
    );
    assert!(
        markdown.contains("- assumes no run in progress: with onNewSnapshot Queue, a run in progress finishes first"),
        "{markdown}"
    );
    // Without the cluster, the waves follow from an assumed fleet: every output says so, alike.
    let basis = "one cluster per stage assumed, one per wave: canary 3 waves";
    let (_, text) = plan(dir.path(), "text");
    let estimate_line = |out: &str, prefix: &str| {
        (out.lines())
            .find_map(|l| l.strip_prefix(prefix).map(str::to_string))
            .unwrap_or_else(|| panic!("no estimate in {out}"))
    };
    let in_text = estimate_line(&text, "  estimate         ");
    assert!(in_text.contains(basis), "{text}");
    assert_eq!(
        format!("{in_text} |"),
        estimate_line(&markdown, "| estimate | ")
    );
    let (_, json) = plan(dir.path(), "json");
    let document: Value = serde_json::from_str(&json).expect("json");
    let estimate = &document["promotions"][1]["estimate"];
    assert_eq!(estimate["assumedWaves"]["canary"], 3, "{json}");
    assert!(in_text.ends_with(&format!("({})", estimate["basis"].as_str().unwrap())));
}

/// 12 ready staging clusters (more than a stage lists), one paused, one production cluster.
fn fleet_yaml() -> String {
    let mut fleet = tollgate_fixtures::fleet();
    for i in 1..=12 {
        fleet = fleet.cluster(
            tollgate_fixtures::cluster(&format!("staging-{i:02}"))
                .ns("fleet")
                .label("env", "staging"),
        );
    }
    fleet
        .cluster(
            tollgate_fixtures::cluster("staging-paused")
                .ns("fleet")
                .label("env", "staging")
                .paused(),
        )
        .cluster(
            tollgate_fixtures::cluster("prod-1")
                .ns("fleet")
                .label("env", "production"),
        )
        .to_yaml()
}

/// The `| clusters | …` rows of a Markdown plan.
fn cluster_rows(markdown: &str) -> Vec<&str> {
    markdown
        .lines()
        .filter(|line| line.starts_with("| clusters |"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_per_stage_come_from_the_live_management_cluster() {
    let fleet = tollgate_emulator::Fleet::parse(&fleet_yaml(), Path::new("fleet.yaml"))
        .expect("valid fleet");
    let emulator = tollgate_emulator::Emulator::start(tollgate_emulator::EmulatorConfig {
        fleet,
        ..Default::default()
    })
    .await
    .expect("emulator starts");
    let dir = repo_from(&[(
        "app.yaml",
        Some(app(&App {
            version: "1.1.0",
            canary: true,
            ..APP
        })),
    )]);
    let kubeconfig = dir.path().join(".git").join("emulator.kubeconfig");
    emulator
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig written");
    let root = dir.path().to_path_buf();
    let kubeconfig_arg = kubeconfig.to_string_lossy().into_owned();
    let (code, markdown) = tokio::task::spawn_blocking(move || {
        plan_with(
            &root,
            &[
                "--from",
                "HEAD~1",
                "--to",
                "HEAD",
                "-o",
                "markdown",
                "--kubeconfig",
                &kubeconfig_arg,
            ],
        )
    })
    .await
    .expect("plan runs");
    assert_eq!(code, Some(0), "{markdown}");
    let staging: Vec<String> = (1..=10).map(|i| format!("fleet/staging-{i:02}")).collect();
    assert_eq!(
        cluster_rows(&markdown),
        [
            "| clusters | canary: none (no ready cluster matches: the stage completes at once) |"
                .to_string(),
            format!(
                "| clusters | staging: 12: {} and 2 more; 1 more selected but not ready or paused |",
                staging.join(", ")
            ),
            "| clusters | production: 1: fleet/prod-1 |".to_string(),
        ],
        "{markdown}"
    );
    assert!(!markdown.contains("warning"), "{markdown}");
}

#[test]
fn without_a_cluster_the_clusters_are_unknown() {
    let dir = gated_repo();
    let (_, markdown) = plan(dir.path(), "markdown");
    assert_eq!(
        cluster_rows(&markdown),
        [
            "| clusters | canary: unknown (no cluster given) |",
            "| clusters | staging: unknown (no cluster given) |",
            "| clusters | production: unknown (no cluster given) |",
        ]
    );
}

#[test]
fn a_cluster_read_failure_is_a_warning_not_a_failed_plan() {
    let dir = gated_repo();
    // A kubeconfig whose server refuses connections: nothing listens on a port just released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let kubeconfig = dir.path().join(".git").join("dead.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: dead\n  cluster: {{server: 'http://127.0.0.1:{port}'}}\nusers:\n- name: dead\n  user: {{}}\ncontexts:\n- name: dead\n  context: {{cluster: dead, user: dead}}\ncurrent-context: dead\n"
        ),
    )
    .expect("kubeconfig");
    // Not `plan_with`: kube's own log line about the refused connection may go to stderr.
    let output = Command::cargo_bin("tollgate")
        .expect("binary")
        .args(["plan", "--from", "HEAD~1", "--to", "HEAD", "-o", "markdown"])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--repo")
        .arg(dir.path())
        .output()
        .expect("run");
    let markdown = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{markdown}");
    assert!(
        markdown.contains("> **warning**: cannot read the clusters from the management cluster"),
        "{markdown}"
    );
    assert!(
        markdown.contains(&format!(
            "server http://127.0.0.1:{port}/, kubeconfig {}",
            kubeconfig.display()
        )),
        "names the server: {markdown}"
    );
    assert!(
        markdown.contains("| clusters | staging: unknown (the cluster read failed) |"),
        "{markdown}"
    );
}

/// The governing RolloutPolicy's effects on a run: new commits, blackouts, waves.
#[test]
fn plan_shows_the_policy_waves_new_commit_rule_and_blackouts() {
    let policy = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: prod-waves\nspec:\n  onNewSnapshot: FinishCurrent\n  blackouts:\n  - from: \"2026-12-20T00:00:00\"\n    to: \"2027-01-03T00:00:00\"\n    timeZone: Europe/Berlin\n    reason: year-end freeze\n  stages:\n    production:\n      waves:\n        sortingLabelKey: order\n        size: 10%\n        canary: 1\n        pause: 2m\n";
    let dir = repo_from(&[
        (
            "app.yaml",
            Some(app(&App {
                version: "1.1.0",
                ..APP
            })),
        ),
        ("policy.yaml", Some(policy.to_string())),
    ]);
    let (_, text) = plan(dir.path(), "text");
    for needle in [
        "prod-waves: onFailure Halt",
        "prod-waves: onFailure Halt, maxFailures 0, onNewSnapshot FinishCurrent",
        "FinishCurrent: a run in progress completes with its snapshot first",
        "2026-12-19T23:00:00Z → 2027-01-02T23:00:00Z (year-end freeze)",
        "production: canary of 1 (no failure tolerated), then waves of 10%, ordered by label order, 2m pause",
    ] {
        assert!(text.contains(needle), "{needle:?} missing in:\n{text}");
    }
    let (_, markdown) = plan(dir.path(), "markdown");
    assert!(
        markdown.contains("| waves | production: canary of 1"),
        "{markdown}"
    );
}

/// The analyses a policy gates stages with (issue #32): each listed by name with its provider,
/// count × interval, and by how much it extends the stage's soak; a manual approval beside them.
#[test]
fn plan_lists_each_stages_analysis_gates_and_whether_they_extend_the_soak() {
    let policy = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: gated\nspec:\n  analyses:\n  - name: error-rate\n    prometheus:\n      address: http://prometheus.monitoring:9090\n      query: sum(rate(http_requests_total{cluster=~\"{{ clustersRegex }}\",code=~\"5..\"}[2m]))\n    initialDelay: 30s\n    interval: 1m\n    count: 6\n    successCondition: \"result < 0.01\"\n  - name: smoke\n    web: {url: \"https://smoke.example.com/check?stage={{ stage }}\", jsonPath: \"{.ok}\"}\n    successCondition: \"result == true\"\n    dryRun: true\n  stages:\n    staging:\n      analyses: [error-rate]\n    production:\n      analyses: [smoke, error-rate]\n";
    let dir = repo_from(&[
        (
            "app.yaml",
            Some(app(&App {
                version: "1.1.0",
                ..APP
            })),
        ),
        ("policy.yaml", Some(policy.to_string())),
    ]);
    let (code, text) = plan(dir.path(), "text");
    assert_eq!(code, Some(0), "{text}");
    let gates: Vec<&str> = text
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("gates"))
        .map(str::trim_start)
        .collect();
    assert_eq!(
        gates,
        [
            "staging: analysis error-rate (prometheus, 6 × 1m0s after 30s; extends the 5m0s soak by 30s)",
            "production: manual approval, analysis smoke (web, 1 × 30s, dry run), analysis error-rate (prometheus, 6 × 1m0s after 30s; extends the 0s soak by 5m30s)",
        ],
        "{text}"
    );
    let (_, markdown) = plan(dir.path(), "markdown");
    assert!(
        markdown.contains("| gates | staging: analysis error-rate (prometheus, 6 × 1m0s after 30s; extends the 5m0s soak by 30s) |"),
        "{markdown}"
    );
}

/// With the management cluster given, the estimate starts from the promotion's live status: under
/// `onNewSnapshot: FinishCurrent` the run waiting at production's gate finishes first (its
/// approval assumed at once), and the change's run starts after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_cluster_the_estimate_lets_the_running_run_finish_first() {
    let policy = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: finish\nspec:\n  onNewSnapshot: FinishCurrent\n";
    let repo = support::TestRepo::new();
    repo.write("app.yaml", &app(&App { delay: "1s", ..APP }));
    repo.write("policy.yaml", policy);
    repo.commit("app 1.0.0");
    let fleet = tollgate_fixtures::fleet()
        .default_latency("50ms")
        .cluster(
            tollgate_fixtures::cluster("staging-1")
                .ns("fleet")
                .label("env", "staging"),
        )
        .cluster(
            tollgate_fixtures::cluster("prod-1")
                .ns("fleet")
                .label("env", "production"),
        )
        .to_yaml();
    let world = support::World::start(repo, &fleet).await;
    world
        .eventually("#1 waits at production's gate", || async {
            let status = world.status("app").await?;
            status
                .pointer("/stages/1/awaitingApprovalSince")
                .map(|_| ())
        })
        .await;
    world.repo.write(
        "app.yaml",
        &app(&App {
            version: "1.1.0",
            delay: "1s",
            ..APP
        }),
    );
    world.repo.commit("app 1.1.0");
    let root = world.repo.path().to_path_buf();
    let kubeconfig = world.kubeconfig();
    let output = tokio::task::spawn_blocking(move || {
        Command::cargo_bin("tollgate")
            .expect("binary")
            .args(["plan", "--from", "HEAD~1", "--to", "HEAD", "-o", "markdown"])
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--repo")
            .arg(&root)
            .output()
            .expect("run")
    })
    .await
    .expect("plan runs");
    let markdown = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{markdown}");
    assert!(
        markdown.contains("| new commits | FinishCurrent: run #1 in progress completes first; then this one starts |"),
        "{markdown}"
    );
    let tasks = gantt_tasks(&markdown);
    let sections: Vec<&str> = tasks.iter().map(|t| t.section.as_str()).collect();
    let gate = tasks
        .iter()
        .find(|t| t.section == "run 1 - production")
        .unwrap_or_else(|| panic!("no run 1 - production in {sections:?}: {markdown}"));
    assert_eq!(gate.name, "approval (assumed at once)");
    let second: Vec<&Task> = tasks
        .iter()
        .filter(|t| t.section.starts_with("run 2 - "))
        .collect();
    assert_eq!(
        second.first().map(|t| t.section.as_str()),
        Some("run 2 - staging"),
        "{markdown}"
    );
    for task in second {
        assert!(
            task.start >= gate.start,
            "#2 starts before #1 finished: {task:?}"
        );
    }
    assert!(
        markdown.contains("- run #1 in progress finishes first (onNewSnapshot FinishCurrent)"),
        "{markdown}"
    );
}

//! `tollgate approve` and `tollgate rollback` on real repositories built with the git CLI: the
//! right commits on the right branches, nothing else touched.

use std::path::Path;

use assert_cmd::Command;
use tollgate_manifest::snapshot::short_sha;
use tollgate_manifest::{ApprovalKind, Snapshot};
use tollgate_source::{GitSource, PromotionView, SourceConfig};

use tollgate_fixtures::git::git;

/// `app` (commented, with an existing annotation) followed by a second promotion in one file.
fn manifests(version: &str, production_env: &str) -> String {
    format!(
        "# Rollout of the app chart. Keep this comment.
apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata:
  name: app
  annotations:
    owner: platform-team   # who to ask
spec:
  profileSpec:
    helmCharts:
    - repositoryURL: https://charts.example.com
      repositoryName: example
      chartName: example/app
      chartVersion: {version}
      releaseName: app
      releaseNamespace: app
      helmChartAction: Install
  stages:
  - name: staging
    clusterSelector:
      matchLabels:
        env: staging
    trigger:
      auto:
        delay: 5m
  - name: production
    clusterSelector:
      matchLabels:
        env: {production_env}
    trigger:
      manual: {{}}
---
apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata:
  name: other
spec:
  profileSpec:
    helmCharts:
    - repositoryURL: https://charts.example.com
      repositoryName: example
      chartName: example/other
      chartVersion: 9.9.9
      releaseName: other
      releaseNamespace: other
      helmChartAction: Install
  stages:
  - name: all
    clusterSelector:
      matchLabels:
        env: production
"
    )
}

const FILE: &str = "deploy/promotions.yaml";

fn commit(dir: &Path, content: &str, message: &str) -> String {
    let path = dir.join(FILE);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, content).expect("write");
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
    git(dir, &["rev-parse", "HEAD"])
}

/// app v1 → v2 (chart bump) → v3 (production selector change); a dirty working tree on top.
struct Fixture {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
    v1: String,
    tip: String,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = tempfile::tempdir().expect("home");
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["config", "user.name", "Rita Reviewer"]);
    git(root, &["config", "user.email", "rita@example.com"]);
    let v1 = commit(root, &manifests("1.0.0", "production"), "app v1");
    commit(root, &manifests("1.1.0", "production"), "app v2");
    let tip = commit(root, &manifests("1.1.0", "prod"), "app v3");
    // Uncommitted work that must survive: a modified tracked file and an untracked one.
    std::fs::write(root.join(FILE), "# work in progress\n").expect("dirty");
    std::fs::write(root.join("notes.txt"), "untracked\n").expect("untracked");
    Fixture { dir, home, v1, tip }
}

impl Fixture {
    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn tollgate(&self) -> Command {
        let mut command = Command::cargo_bin("tollgate").expect("binary");
        // No global git config: the identity comes from the repository's config only.
        command
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .arg("--log")
            .arg("error");
        command
    }

    fn source(&self, branch: &str) -> GitSource {
        let config = SourceConfig::new(
            self.root().to_string_lossy().into_owned(),
            branch,
            "",
            std::env::temp_dir(),
        );
        let mut source = GitSource::open(config).expect("open");
        source.sync().expect("sync");
        source
    }

    fn current(&self, branch: &str, name: &str) -> Snapshot {
        match self.source(branch).promotion(name) {
            Some(PromotionView::Valid { snapshot }) => Snapshot::clone(snapshot),
            other => panic!("{name} on {branch}: {other:?}"),
        }
    }

    fn status(&self) -> (String, String, String) {
        (
            git(self.root(), &["symbolic-ref", "HEAD"]),
            git(self.root(), &["rev-parse", "main"]),
            git(self.root(), &["status", "--porcelain"]),
        )
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn approve_commits_only_the_annotation_line_on_a_new_branch() {
    let fixture = fixture();
    // With a remote, the next step is a push and a pull request.
    git(
        fixture.root(),
        &["remote", "add", "upstream", "https://git.example.com/p.git"],
    );
    let before = fixture.status();
    let id12 = fixture.current("main", "app").id()[..12].to_string();

    let output = fixture
        .tollgate()
        .args(["approve", "app", "production", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        text(&output.stderr)
    );

    let branch = format!("tollgate/approve-app-production-{id12}");
    assert!(
        stdout.contains(&format!("git push upstream {branch}")),
        "{stdout}"
    );
    assert!(stdout.contains("pull request"), "{stdout}");
    assert_eq!(
        git(fixture.root(), &["rev-parse", &format!("{branch}^")]),
        fixture.tip,
        "the approval sits on the branch tip"
    );
    assert_eq!(
        git(
            fixture.root(),
            &["log", "-1", "--format=%s|%an|%ae", &branch]
        ),
        format!(
            "Approve app stage production for snapshot #3 ({id12})|Rita Reviewer|rita@example.com"
        )
    );
    assert_eq!(
        git(
            fixture.root(),
            &["diff", "--numstat", &fixture.tip, &branch]
        ),
        format!("1\t0\t{FILE}")
    );
    let diff = git(fixture.root(), &["diff", "-U0", &fixture.tip, &branch]);
    let changed: Vec<&str> = diff
        .lines()
        .filter(|l| {
            (l.starts_with('+') || l.starts_with('-'))
                && !l.starts_with("+++")
                && !l.starts_with("---")
        })
        .collect();
    assert_eq!(
        changed,
        [format!("+    approve.tollgate.dev/production: \"{id12}\"").as_str()]
    );
    assert_eq!(
        fixture.status(),
        before,
        "checkout and working tree untouched"
    );
    assert_eq!(
        std::fs::read_to_string(fixture.root().join(FILE)).expect("read"),
        "# work in progress\n"
    );

    // The source crate reads it back as an annotation approval of exactly this snapshot.
    let approved = fixture.source(&branch);
    let event = approved
        .approvals("app")
        .last()
        .expect("an approval event")
        .clone();
    assert_eq!(event.stage, "production");
    assert_eq!(
        event.kind,
        ApprovalKind::Annotation {
            value: id12.clone()
        }
    );
    assert_eq!(
        fixture.current(&branch, "app").hashes,
        fixture.current("main", "app").hashes,
        "annotations are not content"
    );

    // Once merged, approving the same snapshot again writes a different value naming the same
    // snapshot (the SHA of the commit that introduced it), never "nothing to commit".
    git(fixture.root(), &["update-ref", "refs/heads/main", &branch]);
    let again = fixture
        .tollgate()
        .args(["approve", "app", "production", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    assert!(again.status.success(), "{}", text(&again.stderr));
    let sha_branch = format!("tollgate/approve-app-production-{}", &fixture.tip[..12]);
    assert_eq!(
        fixture
            .source(&sha_branch)
            .approvals("app")
            .last()
            .map(|e| e.kind.clone()),
        Some(ApprovalKind::Annotation {
            value: fixture.tip.clone()
        })
    );
}

#[test]
fn approve_can_name_an_older_snapshot() {
    let fixture = fixture();
    let first = fixture.source("main").history("app")[0].clone();
    let output = fixture
        .tollgate()
        .args(["approve", "app", "production", "--snapshot", "#1", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", text(&output.stderr));
    let branch = format!("tollgate/approve-app-production-{}", &first.id()[..12]);
    assert_eq!(
        git(fixture.root(), &["log", "-1", "--format=%s", &branch]),
        format!(
            "Approve app stage production for snapshot #1 ({})",
            &first.id()[..12]
        )
    );
    assert!(text(&output.stderr).contains("not the current snapshot"));
}

#[test]
fn approve_refuses_a_stage_without_a_manual_trigger() {
    let fixture = fixture();
    let before = git(fixture.root(), &["branch", "--list"]);
    let output = fixture
        .tollgate()
        .args(["approve", "app", "staging", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("stage \"staging\""), "{stderr}");
    assert!(
        stderr.contains("an auto trigger, not a manual one"),
        "{stderr}"
    );
    assert_eq!(
        git(fixture.root(), &["branch", "--list"]),
        before,
        "nothing committed"
    );
}

#[test]
fn approve_rejects_unknown_names_and_stages() {
    let fixture = fixture();
    let before = git(fixture.root(), &["branch", "--list"]);
    let unknown_name = fixture
        .tollgate()
        .args(["approve", "nope", "production", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    assert_eq!(unknown_name.status.code(), Some(1));
    let stderr = text(&unknown_name.stderr);
    assert!(
        stderr.contains("no ClusterPromotion named \"nope\""),
        "{stderr}"
    );
    assert!(stderr.contains("known: app, other"), "{stderr}");

    let unknown_stage = fixture
        .tollgate()
        .args(["approve", "app", "canary", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    assert_eq!(unknown_stage.status.code(), Some(1));
    let stderr = text(&unknown_stage.stderr);
    assert!(stderr.contains("has no stage \"canary\""), "{stderr}");
    assert!(stderr.contains("staging, production"), "{stderr}");
    assert_eq!(
        git(fixture.root(), &["branch", "--list"]),
        before,
        "no branch created"
    );
}

#[test]
fn approve_needs_a_git_identity() {
    let fixture = fixture();
    git(fixture.root(), &["config", "--unset", "user.name"]);
    git(fixture.root(), &["config", "--unset", "user.email"]);
    let output = fixture
        .tollgate()
        .args(["approve", "app", "production", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("user.name"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn rollback_restores_snapshot_content_on_a_new_branch() {
    let fixture = fixture();
    let before = fixture.status();
    let first = fixture.source("main").history("app")[0].clone();

    let output = fixture
        .tollgate()
        .args(["rollback", "app", "--to", "1", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        text(&output.stderr)
    );
    let branch = "tollgate/rollback-app-to-1";
    // Without a remote there is nothing to push to: the advice is a local merge.
    assert!(!stdout.contains("git push"), "{stdout}");
    assert!(
        stdout.contains(&format!("merge --ff-only {branch}")),
        "{stdout}"
    );
    assert_eq!(
        git(fixture.root(), &["rev-parse", &format!("{branch}^")]),
        fixture.tip
    );
    assert_eq!(
        git(fixture.root(), &["log", "-1", "--format=%s", branch]),
        format!("Roll back app to snapshot #1 ({})", short_sha(&fixture.v1))
    );
    assert_eq!(
        fixture.status(),
        before,
        "checkout and working tree untouched"
    );

    // The file is v1's again (the other document kept), and the source sees "rollback to #1".
    assert_eq!(
        git(fixture.root(), &["show", &format!("{branch}:{FILE}")]),
        git(fixture.root(), &["show", &format!("{}:{FILE}", fixture.v1)])
    );
    let restored = fixture.current(branch, "app");
    assert_eq!(restored.hashes, first.hashes);
    assert_eq!(restored.same_content_as, Some(1));
    assert_eq!(
        fixture.current(branch, "other").hashes,
        fixture.current("main", "other").hashes
    );

    let plan = fixture
        .tollgate()
        .args(["plan", "--from", "main", "--to", branch, "--repo"])
        .arg(fixture.root())
        // One line per detail: what it says is checked here, not how it wraps.
        .env("COLUMNS", "1000")
        .output()
        .expect("run plan");
    let plan_text = text(&plan.stdout);
    assert!(plan.status.success(), "{plan_text}\n{}", text(&plan.stderr));
    assert!(
        plan_text.contains("same content as snapshot #1: a rollback if #1 completed its run"),
        "{plan_text}"
    );
    assert!(plan_text.contains("RESTART"), "{plan_text}");
}

#[test]
fn rollback_rejects_unknown_snapshots_and_no_ops() {
    let fixture = fixture();
    let missing = fixture
        .tollgate()
        .args(["rollback", "app", "--to", "7", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        text(&missing.stderr).contains("no snapshot \"#7\""),
        "{}",
        text(&missing.stderr)
    );

    let current = fixture
        .tollgate()
        .args(["rollback", "app", "--to", "3", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    assert_eq!(current.status.code(), Some(1));
    assert!(
        text(&current.stderr).contains("nothing to roll back"),
        "{}",
        text(&current.stderr)
    );
}

#[test]
fn rollback_follows_a_promotion_that_moved_files() {
    let fixture = fixture();
    let root = fixture.root();
    git(root, &["checkout", "-q", "--", FILE]);
    git(root, &["mv", FILE, "deploy/moved.yaml"]);
    git(root, &["commit", "-q", "-m", "move"]);
    let output = fixture
        .tollgate()
        .args(["rollback", "app", "--to", "2", "--repo"])
        .arg(root)
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", text(&output.stderr));
    let branch = "tollgate/rollback-app-to-2";
    assert_eq!(
        git(root, &["diff", "--name-only", "main", branch]),
        "deploy/moved.yaml"
    );
    let second = fixture.source("main").history("app")[1].clone();
    assert_eq!(fixture.current(branch, "app").hashes, second.hashes);
}

#[test]
fn push_happens_only_when_asked() {
    let fixture = fixture();
    let remote = tempfile::tempdir().expect("remote");
    git(remote.path(), &["init", "-q", "--bare"]);
    let remote_path = remote.path().to_string_lossy().into_owned();
    git(fixture.root(), &["remote", "add", "origin", &remote_path]);

    let local_only = fixture
        .tollgate()
        .args(["approve", "app", "production", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    assert!(local_only.status.success(), "{}", text(&local_only.stderr));
    assert_eq!(
        git(remote.path(), &["branch", "--list"]),
        "",
        "nothing pushed"
    );

    let pushed = fixture
        .tollgate()
        .args(["rollback", "app", "--to", "1", "--push", "origin", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    assert_eq!(
        git(remote.path(), &["rev-parse", "tollgate/rollback-app-to-1"]),
        git(fixture.root(), &["rev-parse", "tollgate/rollback-app-to-1"])
    );
    assert_eq!(
        git(remote.path(), &["branch", "--list"]),
        "tollgate/rollback-app-to-1"
    );
}

#[test]
fn approve_refuses_an_invalid_manifest() {
    let fixture = fixture();
    let broken = manifests("1.1.0", "prod").replace("delay: 5m", "delay: soon");
    git(fixture.root(), &["checkout", "-q", "--", FILE]);
    commit(fixture.root(), &broken, "break app");
    let output = fixture
        .tollgate()
        .args(["approve", "app", "production", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("is invalid at the tip"), "{stderr}");
    assert!(stderr.contains(&format!("{FILE}:")), "{stderr}");
}

/// A clean repository (no uncommitted work) whose first commit holds `content`.
fn clean_fixture(content: &str) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = tempfile::tempdir().expect("home");
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["config", "user.name", "Rita Reviewer"]);
    git(root, &["config", "user.email", "rita@example.com"]);
    let v1 = commit(root, content, "app v1");
    Fixture {
        dir,
        home,
        v1: v1.clone(),
        tip: v1,
    }
}

/// A clean repository whose `app` went #1 (approved for production by annotation, merged) → #2
/// (chart bump) → `git revert` → #3 with #1's content, the annotation still naming #1's id.
fn reverted_after_approval() -> (Fixture, String) {
    let fixture = clean_fixture(&manifests("1.0.0", "production"));
    let root = fixture.root();
    let approve = fixture
        .tollgate()
        .args(["approve", "app", "production", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    assert!(approve.status.success(), "{}", text(&approve.stderr));
    let id1 = fixture.current("main", "app").id()[..12].to_string();
    git(
        root,
        &[
            "merge",
            "-q",
            "--ff-only",
            &format!("tollgate/approve-app-production-{id1}"),
        ],
    );
    let approved = std::fs::read_to_string(root.join(FILE)).expect("read");
    commit(
        root,
        &approved.replace("chartVersion: 1.0.0", "chartVersion: 2.0.0"),
        "app v2",
    );
    git(root, &["revert", "--no-edit", "HEAD"]);
    let revert = git(root, &["rev-parse", "HEAD"]);
    (fixture, revert)
}

#[test]
fn approval_after_a_revert_is_a_fresh_value_naming_the_restored_snapshot() {
    let (fixture, revert) = reverted_after_approval();
    let current = fixture.current("main", "app");
    assert_eq!((current.index, current.same_content_as), (3, Some(1)));
    assert_eq!(
        current.commit.sha, revert,
        "the revert introduced snapshot #3"
    );
    let key = "approve.tollgate.dev/production";
    assert_eq!(
        current.promotion.metadata.annotations.get(key),
        Some(&current.id()[..12].to_string()),
        "the consumed annotation still names the restored content"
    );

    let output = fixture
        .tollgate()
        .args(["approve", "app", "production", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        text(&output.stderr)
    );
    assert!(stdout.contains("already holds snapshot id"), "{stdout}");
    assert!(stdout.contains("SHA of commit"), "{stdout}");

    let branch = format!("tollgate/approve-app-production-{}", &revert[..12]);
    let approved = fixture.current(&branch, "app");
    assert_eq!(
        approved.promotion.metadata.annotations.get(key),
        Some(&revert)
    );
    assert_eq!(
        approved.hashes, current.hashes,
        "annotations are not content"
    );
    let event = fixture
        .source(&branch)
        .approvals("app")
        .last()
        .cloned()
        .expect("event");
    assert_eq!(
        event.kind,
        ApprovalKind::Annotation {
            value: revert.clone()
        }
    );
    assert_eq!(
        event.commit.sha,
        git(fixture.root(), &["rev-parse", &branch]),
        "a new approval event, after the snapshot's commit"
    );
}

/// Every commit SHA the CLI prints is abbreviated the one way, `short_sha` (issue #14 item 7):
/// the new commit, its base, and the commit a note names.
#[test]
fn commit_shas_in_approve_output_use_the_one_short_form() {
    let (fixture, revert) = reverted_after_approval();
    let output = fixture
        .tollgate()
        .args(["approve", "app", "production", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        text(&output.stderr)
    );
    let branch = format!("tollgate/approve-app-production-{}", &revert[..12]);
    let commit = git(fixture.root(), &["rev-parse", &branch]);
    let committed = format!(
        "Committed {} on new branch {branch} (from {};",
        short_sha(&commit),
        short_sha(&revert)
    );
    assert!(stdout.contains(&committed), "{committed:?} in:\n{stdout}");
    let note = format!(
        "wrote the SHA of commit {} that introduced",
        short_sha(&revert)
    );
    assert!(stdout.contains(&note), "{note:?} in:\n{stdout}");
}

#[test]
fn approve_works_through_the_annotation_when_the_field_is_already_true() {
    let content =
        manifests("1.0.0", "production").replace("manual: {}", "manual:\n        approved: true");
    let fixture = clean_fixture(&content);
    let root = fixture.root();
    let current = fixture.current("main", "app");
    let output = fixture
        .tollgate()
        .args(["approve", "app", "production", "--repo"])
        .arg(fixture.root())
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", text(&output.stderr));
    let id12 = current.id()[..12].to_string();
    let branch = format!("tollgate/approve-app-production-{id12}");
    let approved = fixture.current(&branch, "app");
    assert_eq!(
        approved
            .promotion
            .metadata
            .annotations
            .get("approve.tollgate.dev/production"),
        Some(&id12)
    );
    assert!(
        git(root, &["show", &format!("{branch}:{FILE}")]).contains("approved: true"),
        "the field is left as it is"
    );
}

#[test]
fn rollback_restores_content_and_keeps_the_tips_metadata() {
    let fixture = clean_fixture(&manifests("1.0.0", "production"));
    let root = fixture.root();
    commit(root, &manifests("2.0.0", "production"), "app v2");
    // At the tip: paused, labelled, approved, another annotation (none of it content).
    let metadata_at_tip = manifests("2.0.0", "production").replacen(
        "    owner: platform-team   # who to ask\n",
        "    owner: platform-team   # who to ask\n    tollgate.dev/paused: \"true\"\n    approve.tollgate.dev/production: \"0123456789abcdef\"\n  labels:\n    team: payments\n",
        1,
    );
    commit(root, &metadata_at_tip, "pause app");
    let tip = fixture.current("main", "app");
    let first = fixture.source("main").history("app")[0].clone();

    let output = fixture
        .tollgate()
        .args(["rollback", "app", "--to", "1", "--repo"])
        .arg(root)
        .output()
        .expect("run");
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        text(&output.stderr)
    );
    let branch = "tollgate/rollback-app-to-1";
    let restored = fixture.current(branch, "app");
    assert_eq!(restored.hashes, first.hashes, "snapshot #1's spec");
    assert_eq!(restored.same_content_as, Some(1));
    assert_eq!(
        restored.promotion.metadata, tip.promotion.metadata,
        "the tip's metadata: still paused, labels and annotations kept"
    );
    assert_eq!(
        restored
            .promotion
            .metadata
            .annotations
            .get("tollgate.dev/paused")
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(restored.promotion.spec, first.promotion.spec);
    let file = git(root, &["show", &format!("{branch}:{FILE}")]);
    assert!(file.contains("# who to ask"), "comments kept: {file}");
    assert!(file.contains("chartVersion: 1.0.0"), "{file}");
    assert!(
        stdout.contains("tollgate.dev/paused"),
        "says it stays paused: {stdout}"
    );
}

//! Snapshot history and change detection on real repositories built with the git CLI.

use crate::common;

use common::{Manifest, SourceRepo, TestRepo, invalid_manifest};
use tollgate_source::{Change, PromotionView, SourceError};

fn snapshot_summary(
    source: &tollgate_source::GitSource,
    name: &str,
) -> Vec<(u64, String, Option<u64>)> {
    source
        .history(name)
        .iter()
        .map(|s| (s.index, s.commit.sha.clone(), s.same_content_as))
        .collect()
}

#[test]
fn linear_history_indexes_content_changes_only() {
    let repo = TestRepo::with_fixed_identity();
    repo.write("promotions/app.yaml", &Manifest::new("app", "1.0.0").yaml());
    let c0 = repo.commit("add app");
    let mut source = repo.source();
    let report = source.sync().expect("first sync");
    assert!(report.head_moved && report.rebuilt && !report.path_missing);
    assert_eq!(report.changes.get("app"), Some(&Change::Added));
    assert_eq!(
        report.head.as_ref().map(|h| (h.sha.as_str(), h.seq)),
        Some((c0.as_str(), 0))
    );

    repo.write("README.md", "docs only\n");
    repo.commit("docs");
    let report = source.sync().expect("sync docs");
    assert!(report.head_moved && !report.rebuilt);
    assert_eq!(report.changes.get("app"), Some(&Change::Unchanged));

    repo.write("promotions/app.yaml", &Manifest::new("app", "1.1.0").yaml());
    let c2 = repo.commit("bump app to 1.1.0");
    let report = source.sync().expect("sync bump");
    assert_eq!(
        report.changes.get("app"),
        Some(&Change::SpecChanged {
            profile_spec: true,
            stages: false
        })
    );

    repo.write(
        "promotions/app.yaml",
        &Manifest::new("app", "1.1.0").delay("10m").yaml(),
    );
    let c3 = repo.commit("slower staging");
    let report = source.sync().expect("sync trigger edit");
    assert_eq!(report.changes.get("app"), Some(&Change::TriggerOnly));

    repo.write(
        "promotions/app.yaml",
        &Manifest::new("app", "1.1.0")
            .delay("10m")
            .production_env("prod")
            .yaml(),
    );
    let c4 = repo.commit("new production selector");
    let report = source.sync().expect("sync selector");
    assert_eq!(
        report.changes.get("app"),
        Some(&Change::SpecChanged {
            profile_spec: false,
            stages: true
        })
    );

    let history = source.history("app");
    assert_eq!(
        snapshot_summary(&source, "app"),
        vec![
            (1, c0.clone(), None),
            (2, c2.clone(), None),
            (3, c4.clone(), None)
        ]
    );
    assert_eq!(history[1].commit.seq, 2);
    assert_eq!(history[1].commit.subject, "bump app to 1.1.0");
    assert_eq!(history[1].commit.author, "Alice Author");
    assert_eq!(history[1].commit.committer_email, "carl@example.com");
    assert_eq!(history[1].file, "promotions/app.yaml");
    // The trigger edit updated snapshot 2's content without creating a snapshot.
    let delay = history[1].promotion.spec.stages[0]
        .trigger
        .as_ref()
        .and_then(|t| t.delay())
        .map(|d| d.text.clone());
    assert_eq!(delay.as_deref(), Some("10m"));
    assert_eq!(
        source.head().map(|h| (h.sha.as_str(), h.seq)),
        Some((c4.as_str(), 4))
    );
    assert!(!c3.is_empty());

    // A fresh index built in one go agrees with the incrementally built one.
    let mut fresh = repo.source();
    fresh.sync().expect("fresh sync");
    assert_eq!(fresh.history("app"), source.history("app"));
    assert_eq!(fresh.promotion("app"), source.promotion("app"));
}

#[test]
fn idle_sync_reports_nothing() {
    let repo = TestRepo::with_fixed_identity();
    repo.write("app.yaml", &Manifest::new("app", "1.0.0").yaml());
    repo.commit("add app");
    let mut source = repo.source();
    source.sync().expect("first sync");
    let idle = source.sync().expect("idle sync");
    assert!(!idle.head_moved && !idle.rebuilt);
    assert!(idle.changes.is_empty());
    assert_eq!(source.history("app").len(), 1);
}

#[test]
fn merge_commits_are_the_only_snapshots_of_a_merged_branch() {
    let repo = TestRepo::with_fixed_identity();
    repo.write("app.yaml", &Manifest::new("app", "1.0.0").yaml());
    let c0 = repo.commit("add app");
    repo.git(&["checkout", "-q", "-b", "feature"]);
    repo.write("app.yaml", &Manifest::new("app", "2.0.0").yaml());
    repo.commit("try 2.0.0");
    repo.write("app.yaml", &Manifest::new("app", "2.0.1").yaml());
    repo.commit("fix to 2.0.1");
    repo.git(&["checkout", "-q", "main"]);
    repo.write("README.md", "main moved on\n");
    repo.commit("docs on main");
    repo.git(&[
        "merge",
        "-q",
        "--no-ff",
        "feature",
        "-m",
        "Merge pull request #1",
    ]);
    let merge = repo.head();

    let mut source = repo.source();
    source.sync().expect("sync");
    assert_eq!(
        snapshot_summary(&source, "app"),
        vec![(1, c0, None), (2, merge.clone(), None)]
    );
    let merged = &source.history("app")[1];
    assert_eq!(
        merged.commit.seq, 2,
        "root, docs, merge: the merge is third on first-parent"
    );
    assert_eq!(merged.commit.subject, "Merge pull request #1");
    let version = merged.promotion.spec.profile_spec.helm_charts()[0]["chartVersion"].clone();
    assert_eq!(version, serde_json::json!("2.0.1"));
}

#[test]
fn revert_is_a_rollback_to_the_earlier_snapshot() {
    let repo = TestRepo::with_fixed_identity();
    repo.write("app.yaml", &Manifest::new("app", "1.0.0").yaml());
    let c0 = repo.commit("v1");
    let mut source = repo.source();
    source.sync().expect("sync v1");
    repo.write("app.yaml", &Manifest::new("app", "2.0.0").yaml());
    let c1 = repo.commit("v2");
    source.sync().expect("sync v2");
    repo.git(&["revert", "--no-edit", "HEAD"]);
    let revert = repo.head();
    let report = source.sync().expect("sync revert");
    assert_eq!(
        report.changes.get("app"),
        Some(&Change::SpecChanged {
            profile_spec: true,
            stages: false
        })
    );
    assert_eq!(
        snapshot_summary(&source, "app"),
        vec![(1, c0, None), (2, c1, None), (3, revert, Some(1))]
    );
    let history = source.history("app");
    assert_eq!(history[2].id(), history[0].id());
}

#[test]
fn force_push_with_identical_content_keeps_indexes() {
    let repo = TestRepo::with_fixed_identity();
    let versions = ["1.0.0", "1.1.0", "1.2.0"];
    repo.write("app.yaml", &Manifest::new("app", versions[0]).yaml());
    repo.write("other.yaml", &Manifest::new("other", "9.0.0").yaml());
    let root = repo.commit("v1");
    for version in &versions[1..] {
        repo.write("app.yaml", &Manifest::new("app", version).yaml());
        repo.commit(&format!("bump {version}"));
    }
    let mut source = repo.source();
    source.sync().expect("sync original");
    let before: Vec<_> = source.history("app").to_vec();
    assert_eq!(before.len(), 3);

    // Rewrite: same contents, different messages and an extra commit, new SHAs.
    repo.git(&["reset", "-q", "--hard", &root]);
    repo.git(&["commit", "-q", "--amend", "-m", "v1 (reworded)"]);
    repo.write("NOTES.md", "inserted\n");
    repo.commit("inserted commit");
    for version in &versions[1..] {
        repo.write("app.yaml", &Manifest::new("app", version).yaml());
        repo.commit(&format!("reworded bump {version}"));
    }
    let report = source.sync().expect("sync rewritten");
    assert!(report.rebuilt);
    assert_eq!(report.changes.get("app"), Some(&Change::Unchanged));
    assert_eq!(report.changes.get("other"), Some(&Change::Unchanged));
    let after = source.history("app");
    assert_eq!(after.len(), 3);
    for (old, new) in before.iter().zip(after) {
        assert_eq!(old.index, new.index);
        assert_eq!(old.id(), new.id());
        assert_ne!(
            old.commit.sha, new.commit.sha,
            "commit info follows the new commits"
        );
    }
    assert!(after[2].commit.subject.starts_with("reworded"));
    assert_eq!(after[2].commit.seq, 3, "root, inserted, 1.1.0, 1.2.0");

    // A rewrite that drops content drops the snapshot, and says the spec changed.
    repo.git(&["reset", "-q", "--hard", "HEAD~1"]);
    let report = source.sync().expect("sync shortened");
    assert_eq!(
        report.changes.get("app"),
        Some(&Change::SpecChanged {
            profile_spec: true,
            stages: false
        })
    );
    assert_eq!(source.history("app").len(), 2);
}

#[test]
fn renaming_a_file_keeps_the_history() {
    let repo = TestRepo::with_fixed_identity();
    repo.write("old/app.yaml", &Manifest::new("app", "1.0.0").yaml());
    repo.commit("v1");
    repo.write("old/app.yaml", &Manifest::new("app", "2.0.0").yaml());
    repo.commit("v2");
    let mut source = repo.source();
    source.sync().expect("sync");
    std::fs::create_dir_all(repo.path().join("new")).expect("mkdir");
    repo.git(&["mv", "old/app.yaml", "new/app.yml"]);
    repo.commit("move");
    let report = source.sync().expect("sync move");
    assert_eq!(report.changes.get("app"), Some(&Change::Unchanged));
    let history = source.history("app");
    assert_eq!(history.len(), 2);
    assert_eq!(history[1].file, "new/app.yml");
    assert!(
        matches!(source.promotion("app"), Some(PromotionView::Valid { snapshot }) if snapshot.index == 2)
    );
}

#[test]
fn same_name_in_two_files_is_an_error_for_that_name_only() {
    let repo = TestRepo::with_fixed_identity();
    repo.write("a.yaml", &Manifest::new("app", "1.0.0").yaml());
    repo.write("other.yaml", &Manifest::new("other", "1.0.0").yaml());
    repo.commit("two promotions");
    let mut source = repo.source();
    source.sync().expect("sync");

    repo.write("b.yaml", &Manifest::new("app", "2.0.0").yaml());
    repo.commit("copy app by mistake");
    let report = source.sync().expect("sync duplicate");
    assert_eq!(report.changes.get("app"), Some(&Change::Invalid));
    assert_eq!(report.changes.get("other"), Some(&Change::Unchanged));
    match source.promotion("app") {
        Some(PromotionView::Invalid { errors, last_good }) => {
            assert_eq!(errors.len(), 1);
            assert!(errors[0].message.contains("a.yaml"), "{:?}", errors[0]);
            assert!(errors[0].message.contains("b.yaml"), "{:?}", errors[0]);
            assert_eq!(last_good.as_ref().map(|s| s.index), Some(1));
        }
        other => panic!("expected invalid, got {other:?}"),
    }
    assert!(matches!(
        source.promotion("other"),
        Some(PromotionView::Valid { .. })
    ));
    assert_eq!(source.history("app").len(), 1);

    repo.remove("a.yaml");
    let fix = repo.commit("drop the old copy");
    let report = source.sync().expect("sync fix");
    assert_eq!(report.changes.get("app"), Some(&Change::Recovered));
    let history = source.history("app");
    assert_eq!(
        (
            history.len(),
            history[1].commit.sha.as_str(),
            history[1].file.as_str()
        ),
        (2, fix.as_str(), "b.yaml")
    );
}

#[test]
fn invalid_commit_then_fix() {
    let repo = TestRepo::with_fixed_identity();
    repo.write("app.yaml", &Manifest::new("app", "1.0.0").yaml());
    repo.write("other.yaml", &Manifest::new("other", "1.0.0").yaml());
    repo.commit("valid");
    let mut source = repo.source();
    source.sync().expect("sync");

    repo.write("app.yaml", &invalid_manifest("app"));
    repo.commit("break app");
    let report = source.sync().expect("sync broken");
    assert_eq!(report.changes.get("app"), Some(&Change::Invalid));
    assert_eq!(report.changes.get("other"), Some(&Change::Unchanged));
    match source.promotion("app") {
        Some(PromotionView::Invalid { errors, last_good }) => {
            assert!(!errors.is_empty());
            assert!(errors.iter().all(|e| e.file == "app.yaml"), "{errors:?}");
            assert_eq!(last_good.as_ref().map(|s| s.index), Some(1));
        }
        other => panic!("expected invalid, got {other:?}"),
    }

    // Broken YAML: the file defines no name any more, yet `app` stays (invalid), not removed.
    repo.write("app.yaml", "apiVersion: [unclosed\n");
    repo.commit("break app harder");
    let report = source.sync().expect("sync unparsable");
    assert_eq!(report.changes.get("app"), Some(&Change::Invalid));
    assert!(matches!(
        source.promotion("app"),
        Some(PromotionView::Invalid {
            last_good: Some(_),
            ..
        })
    ));

    repo.write("app.yaml", &Manifest::new("app", "2.0.0").yaml());
    let fix = repo.commit("fix app");
    let report = source.sync().expect("sync fixed");
    assert_eq!(report.changes.get("app"), Some(&Change::Recovered));
    let history = source.history("app");
    assert_eq!(history.len(), 2);
    assert_eq!(history[1].commit.sha, fix);

    // Building from scratch gives the same result: invalid commits create no snapshot.
    let mut fresh = repo.source();
    fresh.sync().expect("fresh");
    assert_eq!(fresh.history("app"), history);
}

#[test]
fn removed_promotions_are_reported_once_and_path_missing_is_flagged() {
    let repo = TestRepo::with_fixed_identity();
    repo.write("deploy/app.yaml", &Manifest::new("app", "1.0.0").yaml());
    repo.write("deploy/db.yaml", &Manifest::new("db", "1.0.0").yaml());
    repo.write(
        "elsewhere/ignored.yaml",
        &Manifest::new("ignored", "1.0.0").yaml(),
    );
    repo.commit("add");
    let mut source = repo.source_at("deploy/");
    let report = source.sync().expect("sync");
    assert_eq!(report.changes.keys().collect::<Vec<_>>(), vec!["app", "db"]);

    repo.remove("deploy/db.yaml");
    repo.commit("drop db");
    let report = source.sync().expect("sync removal");
    assert_eq!(report.changes.get("db"), Some(&Change::Removed));
    assert!(source.promotion("db").is_none());
    assert_eq!(source.history("db").len(), 1, "history stays readable");

    repo.write("deploy/app.yaml", &Manifest::new("app", "2.0.0").yaml());
    repo.commit("bump app");
    let report = source.sync().expect("sync bump");
    assert_eq!(report.changes.get("db"), None, "removal reported once");

    repo.git(&["rm", "-q", "-r", "deploy"]);
    repo.commit("oops, removed the directory");
    let report = source.sync().expect("sync missing path");
    assert!(report.path_missing);
    assert!(source.path_missing());
    assert_eq!(report.changes.get("app"), Some(&Change::Removed));
    assert_eq!(source.promotions().count(), 0);
}

#[test]
fn multi_document_files_and_other_kinds() {
    let repo = TestRepo::with_fixed_identity();
    let content = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: not-a-promotion\n---\n{}---\n{}",
        Manifest::new("one", "1.0.0").yaml(),
        Manifest::new("two", "1.0.0").yaml()
    );
    repo.write("all.yaml", &content);
    repo.write("notes.txt", "not yaml");
    repo.commit("two in one");
    let mut source = repo.source();
    source.sync().expect("sync");
    let names: Vec<&str> = source.promotions().map(|(name, _)| name).collect();
    assert_eq!(names, vec!["one", "two"]);
}

#[test]
fn unknown_branch_is_an_error_that_keeps_nothing_broken() {
    let repo = TestRepo::with_fixed_identity();
    repo.write("app.yaml", &Manifest::new("app", "1.0.0").yaml());
    repo.commit("v1");
    let mut config = repo.config("");
    config.branch = "release".into();
    let mut source = tollgate_source::GitSource::open(config).expect("open");
    let error = source.sync().expect_err("no such branch");
    assert!(matches!(error, SourceError::BranchNotFound { ref branch, .. } if branch == "release"));
    assert!(error.to_string().contains("release"));
    assert_eq!(
        source.retry_after(),
        Some(std::time::Duration::from_secs(1))
    );
    let error = source.sync().expect_err("still missing");
    assert!(matches!(error, SourceError::BranchNotFound { .. }));
    assert_eq!(
        source.retry_after(),
        Some(std::time::Duration::from_secs(2))
    );
    repo.git(&["branch", "release"]);
    source.sync().expect("branch exists now");
    assert_eq!(source.retry_after(), None);
    assert_eq!(source.history("app").len(), 1);
}

#[test]
fn opening_a_missing_repository_fails_clearly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nothing-here");
    let config =
        tollgate_source::SourceConfig::new(missing.display().to_string(), "main", "", dir.path());
    let error = tollgate_source::GitSource::open(config)
        .err()
        .expect("open fails");
    assert!(matches!(error, SourceError::Open { .. }));
    assert!(error.to_string().contains("nothing-here"));
}

/// The project's parser fixtures, committed as a config repository: valid files index, a bad
/// promotion does not hide a good one in the same file, a nameless promotion is a file error.
#[test]
fn project_fixtures_index_as_expected() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let repo = TestRepo::with_fixed_identity();
    for file in [
        "valid/01-multi-document-other-kinds.yaml",
        "valid/04-selectors-and-annotations.yaml",
        "invalid/51-second-promotion-bad.yaml",
        "invalid/32-missing-metadata-name.yaml",
    ] {
        let content = std::fs::read_to_string(fixtures.join(file)).expect("fixture");
        repo.write(&format!("promotions/{file}"), &content);
    }
    repo.commit("fixtures");
    let mut source = repo.source_at("promotions");
    source.sync().expect("sync");
    let valid: Vec<&str> = source
        .promotions()
        .filter(|(_, view)| matches!(view, PromotionView::Valid { .. }))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(valid, vec!["first", "good", "second", "selectors"]);
    match source.promotion("bad") {
        Some(PromotionView::Invalid {
            errors,
            last_good: None,
        }) => {
            assert!(
                errors.iter().any(|e| e.code == "invalid-duration"),
                "{errors:?}"
            );
            assert!(
                errors
                    .iter()
                    .all(|e| e.file == "promotions/invalid/51-second-promotion-bad.yaml")
            );
        }
        other => panic!("expected bad to be invalid, got {other:?}"),
    }
    let file_errors = source.file_errors();
    let nameless = file_errors
        .get("promotions/invalid/32-missing-metadata-name.yaml")
        .expect("nameless promotion reported against its file");
    assert!(
        nameless.iter().any(|e| e.path == "metadata.name"),
        "{nameless:?}"
    );
}

/// A new file that does not parse is reported under a name of its own (its readable
/// `metadata.name`, else one derived from its path), never silently dropped; fixing or deleting
/// it reports that name removed.
#[test]
fn a_new_file_that_does_not_parse_is_reported_under_a_name() {
    let repo = TestRepo::with_fixed_identity();
    repo.write("app.yaml", &Manifest::new("app", "1.0.0").yaml());
    repo.commit("valid");
    let mut source = repo.source();
    source.sync().expect("sync");

    let broken_web = Manifest::new("web", "1.0.0")
        .yaml()
        .replacen("spec:", "spec: [", 1);
    repo.write("web.yaml", &broken_web);
    repo.write("junk.yaml", "metadata: {name: [\n");
    repo.commit("two broken files");
    let report = source.sync().expect("sync broken");
    assert_eq!(report.changes.get("web"), Some(&Change::Invalid));
    assert_eq!(
        report.changes.get("invalid-file-junk-yaml"),
        Some(&Change::Invalid)
    );
    assert_eq!(report.changes.get("app"), Some(&Change::Unchanged));
    for name in ["web", "invalid-file-junk-yaml"] {
        match source.promotion(name) {
            Some(PromotionView::Invalid {
                errors,
                last_good: None,
            }) => assert!(
                errors[0].to_string().contains(".yaml:") && errors[0].line > 0,
                "{errors:?}"
            ),
            other => panic!("{name}: expected invalid, got {other:?}"),
        }
    }
    // Building from scratch gives the same names.
    let mut fresh = repo.source();
    fresh.sync().expect("fresh");
    let names: Vec<&str> = fresh.promotions().map(|(name, _)| name).collect();
    assert_eq!(names, ["app", "invalid-file-junk-yaml", "web"]);

    repo.write("web.yaml", &Manifest::new("web", "1.0.0").yaml());
    repo.remove("junk.yaml");
    repo.commit("fix web, drop junk");
    let report = source.sync().expect("sync fixed");
    assert_eq!(report.changes.get("web"), Some(&Change::Recovered));
    assert_eq!(
        report.changes.get("invalid-file-junk-yaml"),
        Some(&Change::Removed)
    );
    assert!(source.promotion("invalid-file-junk-yaml").is_none());
}

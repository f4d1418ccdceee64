//! Approval provenance (docs/architecture.md#d2-approvals-are-consumed-never-lost) from first-parent history.

use crate::common;

use common::{Manifest, SourceRepo, TestRepo};
use tollgate_manifest::{ApprovalEvent, ApprovalKind};
use tollgate_source::Change;

fn events(source: &tollgate_source::GitSource, name: &str) -> Vec<(String, ApprovalKind, String)> {
    source
        .approvals(name)
        .iter()
        .map(
            |ApprovalEvent {
                 stage,
                 kind,
                 commit,
             }| (stage.clone(), kind.clone(), commit.sha.clone()),
        )
        .collect()
}

#[test]
fn approved_true_false_true_gives_two_field_events() {
    let repo = TestRepo::with_fixed_identity();
    repo.write("app.yaml", &Manifest::new("app", "1.0.0").yaml());
    repo.commit("v1, not approved");
    let mut source = repo.source();
    source.sync().expect("sync");
    assert!(source.approvals("app").is_empty());

    repo.write(
        "app.yaml",
        &Manifest::new("app", "1.0.0").approved(Some(true)).yaml(),
    );
    let first = repo.commit("approve production");
    let report = source.sync().expect("sync approval");
    assert_eq!(report.changes.get("app"), Some(&Change::TriggerOnly));

    repo.write(
        "app.yaml",
        &Manifest::new("app", "1.0.0").approved(Some(false)).yaml(),
    );
    repo.commit("reset approval");
    repo.write(
        "app.yaml",
        &Manifest::new("app", "1.0.0").approved(Some(true)).yaml(),
    );
    let second = repo.commit("approve again");
    // Unrelated edits while approved are not new approvals.
    repo.write(
        "app.yaml",
        &Manifest::new("app", "2.0.0").approved(Some(true)).yaml(),
    );
    repo.commit("bump while approved");
    source.sync().expect("sync rest");

    let expected = vec![
        ("production".to_string(), ApprovalKind::Field, first),
        ("production".to_string(), ApprovalKind::Field, second),
    ];
    assert_eq!(events(&source, "app"), expected);
    // Approval edits never create snapshots; the version bump does.
    assert_eq!(source.history("app").len(), 2);
    let approvals = source.approvals("app");
    assert!(approvals[0].commit.seq < approvals[1].commit.seq);
    assert_eq!(approvals[1].commit.author_email, "alice@example.com");

    let mut fresh = repo.source();
    fresh.sync().expect("fresh");
    assert_eq!(fresh.approvals("app"), source.approvals("app"));
}

#[test]
fn approved_in_the_first_commit_counts() {
    let repo = TestRepo::with_fixed_identity();
    repo.write(
        "app.yaml",
        &Manifest::new("app", "1.0.0").approved(Some(true)).yaml(),
    );
    let first = repo.commit("born approved");
    let mut source = repo.source();
    source.sync().expect("sync");
    assert_eq!(
        events(&source, "app"),
        vec![("production".to_string(), ApprovalKind::Field, first)]
    );
}

#[test]
fn annotation_approvals_for_current_and_stale_snapshots_are_recorded_with_values() {
    let repo = TestRepo::with_fixed_identity();
    let base = Manifest::new("app", "1.0.0");
    repo.write("app.yaml", &base.yaml());
    let c1 = repo.commit("v1");
    let mut source = repo.source();
    source.sync().expect("sync v1");
    let snapshot_1 = source.history("app")[0].id()[..12].to_string();

    // Approve the current snapshot by id prefix.
    let annotated = base
        .clone()
        .annotation("approve.tollgate.dev/production", &snapshot_1);
    repo.write("app.yaml", &annotated.yaml());
    let approve_current = repo.commit("approve snapshot 1 for production");

    // A new snapshot; the annotation (now stale, it names snapshot 1) is carried unchanged: no event.
    let bumped = annotated.clone().version("2.0.0");
    repo.write("app.yaml", &bumped.yaml());
    repo.commit("v2");

    // Someone approves by commit SHA of snapshot 1 (stale), then by the snapshot 2 commit.
    let stale = bumped
        .clone()
        .annotation("approve.tollgate.dev/production", &c1[..10]);
    repo.write("app.yaml", &stale.yaml());
    let approve_stale = repo.commit("approve v1 commit");
    source.sync().expect("sync");
    let snapshot_2_sha = source.history("app")[1].commit.sha.clone();
    let current = stale.annotation("approve.tollgate.dev/production", &snapshot_2_sha);
    repo.write("app.yaml", &current.yaml());
    let approve_v2 = repo.commit("approve v2 commit");
    source.sync().expect("sync");

    let annotation = |value: &str| ApprovalKind::Annotation {
        value: value.to_string(),
    };
    assert_eq!(
        events(&source, "app"),
        vec![
            (
                "production".to_string(),
                annotation(&snapshot_1),
                approve_current
            ),
            (
                "production".to_string(),
                annotation(&c1[..10]),
                approve_stale
            ),
            (
                "production".to_string(),
                annotation(&snapshot_2_sha),
                approve_v2
            ),
        ]
    );
    assert_eq!(source.history("app").len(), 2);
}

//! `watch_local` sees new commits of a local repository.

use crate::common;

use std::sync::mpsc;
use std::time::Duration;

use common::{Manifest, TestRepo};
use tollgate_source::watch_local;

#[test]
fn a_new_commit_triggers_the_watch_and_a_sync_sees_it() {
    let repo = TestRepo::new();
    repo.write("app.yaml", &Manifest::new("app", "1.0.0").yaml());
    repo.commit("v1");
    let mut source = repo.source();
    source.sync().expect("sync");
    let poker = source.poker();

    let (tx, rx) = mpsc::channel();
    let watch_poker = poker.clone();
    let watch = watch_local(repo.path(), move || {
        watch_poker.poke();
        let _ = tx.send(());
    })
    .expect("watch");

    repo.write("app.yaml", &Manifest::new("app", "2.0.0").yaml());
    let v2 = repo.commit("v2");
    // Generous upper bound: this checks that the event arrives, not how fast.
    rx.recv_timeout(Duration::from_secs(30))
        .expect("watch event for the new commit");
    assert!(
        poker.wait(Duration::from_secs(30)),
        "the watch poked the source"
    );
    let report = source.sync().expect("sync after poke");
    assert!(report.head_moved);
    assert_eq!(source.history("app")[1].commit.sha, v2);

    // Dropping the watch stops it: its callback (and so the sender) is released.
    drop(watch);
    let outcome = loop {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(()) => continue,
            Err(end) => break end,
        }
    };
    assert_eq!(outcome, mpsc::RecvTimeoutError::Disconnected);
}

#[test]
fn watching_a_non_repository_fails() {
    let dir = tempfile::tempdir().expect("tempdir");
    let error = watch_local(dir.path(), || {}).expect_err("not a repository");
    assert!(matches!(error, tollgate_source::SourceError::Open { .. }));
}

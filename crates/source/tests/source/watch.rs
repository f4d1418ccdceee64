//! `watch_local` sees new commits of a local repository; `watch_keys` sees the trusted keys
//! change, in a plain directory and in one laid out as a mounted Kubernetes Secret.

use crate::common;

use std::sync::mpsc;
use std::time::Duration;

use common::{Manifest, SourceRepo, TestRepo};
use std::path::Path;
use tollgate_fixtures::signing::{Signer, SshSigner, have_tool};
use tollgate_fixtures::volume::SecretVolume;
use tollgate_source::{
    GitSource, SourceConfig, TrustConfig, VerifyCommits, watch_keys, watch_local,
};

#[test]
fn a_new_commit_triggers_the_watch_and_a_sync_sees_it() {
    let repo = TestRepo::with_fixed_identity();
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

#[test]
fn watching_a_missing_keys_directory_fails() {
    let dir = tempfile::tempdir().expect("tempdir");
    let error = watch_keys(&dir.path().join("missing"), || {}).expect_err("no directory");
    assert!(matches!(error, tollgate_source::SourceError::Watch { .. }));
}

/// The trusted keys of `watch_keys` tests: `alice` trusted, `bob` not yet; the branch tip is
/// signed by bob, so whether it runs verified says whether bob's key is in force. (Once it ran,
/// removing bob's key keeps it running, refused: a key change never rolls content back.)
struct KeysWorld {
    alice: SshSigner,
    bob: SshSigner,
    by_bob: String,
    source: GitSource,
    poker: tollgate_source::Poker,
    _repo: tollgate_fixtures::TestRepo,
}

/// The world, with the keys directory laid out by `trust_alice` before the source reads it.
fn keys_world<T>(keys: &Path, trust_alice: impl FnOnce(&SshSigner) -> T) -> (KeysWorld, T) {
    let (alice, bob) = (SshSigner::new("alice"), SshSigner::new("bob"));
    let laid_out = trust_alice(&alice);
    let repo = tollgate_fixtures::TestRepo::new();
    repo.write("app.yaml", &Manifest::new("app", "1.0.0").yaml());
    repo.commit_signed(&alice, "by alice");
    repo.write("app.yaml", &Manifest::new("app", "2.0.0").yaml());
    let by_bob = repo.commit_signed(&bob, "by bob");
    let mut config = SourceConfig::new(
        repo.path().display().to_string(),
        "main",
        "",
        repo.path().join("unused-cache"),
    );
    config.trust = TrustConfig {
        verify_commits: Some(VerifyCommits::Head),
        trusted_keys: Some(keys.to_path_buf()),
    };
    let mut source = GitSource::open(config).expect("open source");
    source.sync().expect("sync");
    let poker = source.poker();
    let world = KeysWorld {
        alice,
        bob,
        by_bob,
        source,
        poker,
        _repo: repo,
    };
    assert!(!world.bob_runs(), "bob's key is not trusted yet");
    (world, laid_out)
}

/// A signer's allowed-signers line, naming its e-mail.
fn line(signer: &SshSigner) -> String {
    signer.allowed_signer(signer.email()) + "\n"
}

impl KeysWorld {
    /// Bob's commit runs, and verifies with the keys in force.
    fn bob_runs(&self) -> bool {
        let runs = self
            .source
            .head()
            .is_some_and(|head| head.sha == self.by_bob);
        runs && self.source.refusal().is_none()
    }

    /// Syncs on every poke until none has come for a while: the pokes of a change's first steps
    /// are spent, so the poke that follows its last step is the one seen. (A late poke only
    /// makes the next check less strict, never fail.)
    fn settle(&mut self) {
        while self.poker.wait(Duration::from_millis(300)) {
            self.source.sync().expect("sync");
        }
    }

    /// Syncs on every poke, as the controller's git thread does, until bob's commit runs (or
    /// stops running); fails when no poke comes (a generous bound: the event's arrival is
    /// checked, not its speed).
    fn sync_until_bob_runs(&mut self, runs: bool, after: &str) {
        while self.bob_runs() != runs {
            assert!(
                self.poker.wait(Duration::from_secs(30)),
                "no poke after {after}"
            );
            self.source.sync().expect("sync");
        }
    }
}

#[test]
fn the_keys_watch_pokes_a_sync_when_a_key_file_is_added_replaced_or_removed() {
    if !have_tool("ssh-keygen", "openssh-client") {
        return;
    }
    let keys = tempfile::tempdir().expect("temp dir");
    let (mut world, ()) = keys_world(keys.path(), |alice| alice.trust_in(keys.path()));
    let poker = world.poker.clone();
    let _watch = watch_keys(keys.path(), move || poker.poke()).expect("watch");

    world.bob.trust_in(keys.path());
    world.sync_until_bob_runs(true, "a new key file");

    std::fs::remove_file(keys.path().join("bob.sshpub")).expect("remove");
    world.sync_until_bob_runs(false, "a removed key file");

    // An editor's atomic save: a temporary file renamed over the key file.
    let temporary = keys.path().join(".alice.sshpub.swp");
    std::fs::write(&temporary, line(&world.alice) + &line(&world.bob)).expect("write");
    world.settle();
    assert!(!world.bob_runs());
    std::fs::rename(&temporary, keys.path().join("alice.sshpub")).expect("rename");
    world.sync_until_bob_runs(true, "a key file replaced by a rename");

    // Written in place (truncated, then written).
    world.alice.trust_in(keys.path());
    world.sync_until_bob_runs(false, "a key file rewritten in place");
}

#[test]
fn the_keys_watch_sees_a_kubernetes_secret_volume_swap_its_data_link() {
    if !have_tool("ssh-keygen", "openssh-client") {
        return;
    }
    let keys = tempfile::tempdir().expect("temp dir");
    let (mut world, mut volume) = keys_world(keys.path(), |alice| {
        SecretVolume::new(keys.path(), &[("alice.sshpub", &line(alice))])
    });
    let poker = world.poker.clone();
    let _watch = watch_keys(keys.path(), move || poker.poke()).expect("watch");
    let (alice, bob) = (line(&world.alice), line(&world.bob));

    volume.update(&[("alice.sshpub", &alice), ("bob.sshpub", &bob)]);
    world.sync_until_bob_runs(true, "a key added to the Secret");

    volume.update(&[("alice.sshpub", &alice)]);
    world.sync_until_bob_runs(false, "a key removed from the Secret");

    // A key file changed: the same name, new content, seen only through the swapped link.
    let changed = [("alice.sshpub", &*(alice.clone() + &bob))];
    volume.stage(&changed);
    world.settle();
    assert!(!world.bob_runs());
    volume.publish(&changed);
    world.sync_until_bob_runs(true, "the Secret's ..data link swapped");
}

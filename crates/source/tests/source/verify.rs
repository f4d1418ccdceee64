//! Commit verification with real keys made in the test (issue #33): SSH (`ssh-keygen`) and
//! OpenPGP (`gpg`) signatures checked in-process against a `--trusted-keys` directory, and the
//! `Head`/`Strict` screening of the branch.

use std::path::Path;

use tollgate_fixtures::signing::{DAY, GpgSigner, Signer, SshSigner, have_tool, unix_now};
use tollgate_fixtures::{TestRepo, promotion, stage};
use tollgate_model::{SignatureCheck, Unverified};
use tollgate_source::verify::{TrustedKeys, commit_signature};
use tollgate_source::{GitSource, SourceConfig, TrustConfig, VerifyCommits};

fn tools() -> bool {
    have_tool("ssh-keygen", "openssh-client") && have_tool("gpg", "gnupg")
}

fn check(repo: &TestRepo, sha: &str, keys: &Path) -> SignatureCheck {
    let git = git2::Repository::open(repo.path()).expect("open");
    let keys = TrustedKeys::read_dir(keys).expect("trusted keys");
    commit_signature(&git, git2::Oid::from_str(sha).expect("oid"), &keys)
}

fn manifest(version: &str) -> String {
    promotion("web")
        .chart("web", version)
        .stage(stage("staging").selector("env", "staging").auto())
        .to_yaml()
}

fn source(repo: &TestRepo, keys: &Path, mode: VerifyCommits) -> GitSource {
    let mut config = SourceConfig::new(
        repo.path().display().to_string(),
        "main",
        "",
        repo.path().join("unused-cache"),
    );
    config.trust = TrustConfig {
        verify_commits: Some(mode),
        trusted_keys: Some(keys.to_path_buf()),
    };
    GitSource::open(config).expect("open source")
}

/// The commit the source runs (its last accepted commit).
fn running(source: &GitSource) -> String {
    source.head().expect("a running commit").sha.clone()
}

#[test]
fn ssh_and_openpgp_signatures_verify_against_trusted_keys_only() {
    if !tools() {
        return;
    }
    let (alice, bob, gerda) = (
        SshSigner::new("alice"),
        SshSigner::new("bob"),
        GpgSigner::new("gerda"),
    );
    let keys = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        keys.path().join("team.sshpub"),
        format!(
            "# the release team\nsre-lead,Alice@example.com {}\n",
            alice.public_key()
        ),
    )
    .expect("write");
    gerda.trust_in(keys.path());
    let repo = TestRepo::new();
    repo.write("web.yaml", &manifest("1.0.0"));
    let unsigned = repo.commit("unsigned");
    repo.write("web.yaml", &manifest("1.0.1"));
    let by_alice = repo.commit_signed(&alice, "by alice");
    repo.write("web.yaml", &manifest("1.0.2"));
    let by_bob = repo.commit_signed(&bob, "by bob");
    repo.write("web.yaml", &manifest("1.0.3"));
    let by_gerda = repo.commit_signed(&gerda, "by gerda");

    assert_eq!(
        check(&repo, &unsigned, keys.path()),
        SignatureCheck::unverified(Unverified::Unsigned, "")
    );
    match check(&repo, &by_alice, keys.path()) {
        SignatureCheck::Verified { principals, key } => {
            assert_eq!(principals, ["sre-lead", "alice@example.com"]);
            assert!(key.starts_with("SHA256:"), "{key}");
        }
        other => panic!("alice's commit should verify: {other:?}"),
    }
    match check(&repo, &by_bob, keys.path()) {
        SignatureCheck::Unverified {
            reason: Unverified::UnknownKey,
            detail,
        } => assert!(detail.starts_with("SHA256:"), "{detail}"),
        other => panic!("bob's key is not trusted: {other:?}"),
    }
    match check(&repo, &by_gerda, keys.path()) {
        SignatureCheck::Verified { principals, key } => {
            assert_eq!(principals, ["gerda@example.com"]);
            assert_eq!(key, gerda.fingerprint());
        }
        other => panic!("gerda's commit should verify: {other:?}"),
    }
}

#[test]
fn a_tampered_commit_is_a_bad_signature() {
    if !tools() {
        return;
    }
    let (alice, gerda) = (SshSigner::new("alice"), GpgSigner::new("gerda"));
    let keys = tempfile::tempdir().expect("temp dir");
    alice.trust_in(keys.path());
    gerda.trust_in(keys.path());
    let repo = TestRepo::new();
    for signer in [&alice as &dyn Signer, &gerda] {
        repo.write("web.yaml", &manifest(signer.email()));
        let sha = repo.commit_signed(signer, "signed");
        // The same signature over a different message: rewrite the commit object by hand.
        let raw = repo.git(&["cat-file", "commit", &sha]);
        let forged = raw.replace("\n\nsigned", "\n\nforged");
        let object = repo.path().join("forged");
        std::fs::write(&object, forged + "\n").expect("write");
        let forged_sha = repo.git(&[
            "hash-object",
            "-t",
            "commit",
            "-w",
            &object.display().to_string(),
        ]);
        match check(&repo, &forged_sha, keys.path()) {
            SignatureCheck::Unverified {
                reason: Unverified::BadSignature,
                ..
            } => {}
            other => panic!("a forged commit must not verify: {other:?}"),
        }
    }
}

#[test]
fn head_mode_runs_only_signed_tips_and_says_why_not() {
    if !tools() {
        return;
    }
    let alice = SshSigner::new("alice");
    let keys = tempfile::tempdir().expect("temp dir");
    alice.trust_in(keys.path());
    let repo = TestRepo::new();
    repo.write("web.yaml", &manifest("1.0.0"));
    let first = repo.commit("unsigned start");
    let mut source = source(&repo, keys.path(), VerifyCommits::Head);
    let error = source.sync().expect_err("nothing is verified yet");
    assert!(
        error.to_string().contains("unsigned") && error.to_string().contains(&first[..7]),
        "{error}"
    );

    repo.write("web.yaml", &manifest("1.0.1"));
    let signed = repo.commit_signed(&alice, "signed 1.0.1");
    source.sync().expect("sync");
    assert_eq!(running(&source), signed);
    assert!(source.refusal().is_none());
    assert_eq!(
        source.history("web").len(),
        1,
        "the unsigned start folds into it"
    );

    repo.write("web.yaml", &manifest("1.0.2"));
    let unsigned = repo.commit("unsigned 1.0.2");
    let report = source.sync().expect("sync");
    assert_eq!(
        running(&source),
        signed,
        "the verified commit keeps running"
    );
    assert!(report.changes.is_empty(), "{:?}", report.changes);
    let refusal = source.refusal().expect("the tip is refused");
    assert_eq!(refusal.commit, unsigned);
    assert_eq!(refusal.reason, Unverified::Unsigned);
    let message = refusal.message();
    assert!(
        message.contains(&unsigned[..7])
            && message.contains("unsigned")
            && message.contains(&format!(
                "the last verified commit {} keeps running",
                &signed[..7]
            )),
        "{message}"
    );

    repo.write("web.yaml", &manifest("1.0.3"));
    let signed_again = repo.commit_signed(&alice, "signed 1.0.3");
    source.sync().expect("sync");
    assert_eq!(running(&source), signed_again);
    assert!(source.refusal().is_none());
    let history = source.history("web");
    assert_eq!(history.len(), 2);
    assert!(
        history[1]
            .contributors
            .iter()
            .any(|c| c == "author@example.com"),
        "the folded unsigned commit's author brought this content: {:?}",
        history[1].contributors
    );
}

#[test]
fn strict_mode_refuses_an_unsigned_commit_in_the_middle_until_a_seal() {
    if !tools() {
        return;
    }
    let gerda = GpgSigner::new("gerda");
    let keys = tempfile::tempdir().expect("temp dir");
    gerda.trust_in(keys.path());
    let repo = TestRepo::new();
    repo.write("web.yaml", &manifest("1.0.0"));
    let start = repo.commit_signed(&gerda, "signed start");
    let mut source = source(&repo, keys.path(), VerifyCommits::Strict);
    source.sync().expect("sync");
    assert_eq!(running(&source), start);

    repo.write("web.yaml", &manifest("1.0.1"));
    let middle = repo.commit("unsigned in the middle");
    repo.write("web.yaml", &manifest("1.0.2"));
    let signed_tip = repo.commit_signed(&gerda, "signed tip");
    source.sync().expect("sync");
    assert_eq!(running(&source), start, "Strict refuses the signed tip");
    let refusal = source.refusal().expect("refused");
    assert_eq!(
        refusal.commit, middle,
        "the refusal names the unsigned commit"
    );
    assert_eq!(refusal.tip, signed_tip);
    assert!(
        refusal.message().contains("Tollgate-Seal"),
        "{}",
        refusal.message()
    );

    let seal = repo.commit_empty_signed(
        &gerda,
        "Seal the history\n\nTollgate-Seal: the unsigned 1.0.1 commit was reviewed in #12",
    );
    source.sync().expect("sync");
    assert_eq!(
        running(&source),
        seal,
        "the seal vouches for the unsigned commit"
    );
    assert!(source.refusal().is_none());
    let history = source.history("web");
    assert_eq!(
        history.last().map(|s| s.commit.sha.as_str()),
        Some(seal.as_str())
    );
}

#[test]
fn new_trusted_keys_are_read_on_change() {
    if !tools() {
        return;
    }
    let (alice, bob) = (SshSigner::new("alice"), SshSigner::new("bob"));
    let keys = tempfile::tempdir().expect("temp dir");
    alice.trust_in(keys.path());
    let repo = TestRepo::new();
    repo.write("web.yaml", &manifest("1.0.0"));
    let by_alice = repo.commit_signed(&alice, "by alice");
    let mut source = source(&repo, keys.path(), VerifyCommits::Head);
    source.sync().expect("sync");
    repo.write("web.yaml", &manifest("1.0.1"));
    let by_bob = repo.commit_signed(&bob, "by bob");
    source.sync().expect("sync");
    assert_eq!(running(&source), by_alice);
    assert_eq!(
        source.refusal().map(|r| r.reason),
        Some(Unverified::UnknownKey)
    );
    bob.trust_in(keys.path());
    source.sync().expect("sync");
    assert_eq!(running(&source), by_bob, "bob's key is trusted now");
    assert!(source.refusal().is_none());
}

/// Whether `git verify-commit` accepts `sha`: the oracle tollgate follows. SSH signatures are
/// checked against `allowed` (an allowed-signers file), OpenPGP ones in the signer's gpg home.
fn git_verifies(repo: &TestRepo, sha: &str, allowed: &Path, signer: &dyn Signer) -> bool {
    let mut command = std::process::Command::new("git");
    command
        .current_dir(repo.path())
        .arg("-c")
        .arg(format!("gpg.ssh.allowedSignersFile={}", allowed.display()))
        .args(["verify-commit", sha]);
    for (key, value) in signer.env() {
        command.env(key, value);
    }
    command.output().expect("git runs").status.success()
}

/// The reason and detail of an unverified check; panics on a verified one.
fn refused(check: SignatureCheck) -> (Unverified, String) {
    match check {
        SignatureCheck::Unverified { reason, detail } => (reason, detail),
        SignatureCheck::Verified { .. } => panic!("verified, but should not be: {check:?}"),
    }
}

fn utc(at: i64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(at, 0).expect("a valid time")
}

#[test]
fn an_allowed_signer_counts_only_for_commits_dated_within_its_validity_window() {
    if !tools() {
        return;
    }
    let alice = SshSigner::new("alice");
    let keys = tempfile::tempdir().expect("temp dir");
    alice.trust_with_options(
        keys.path(),
        r#"valid-after="20200101Z",valid-before="20210101Z""#,
    );
    let allowed = keys.path().join("alice.sshpub");
    let repo = TestRepo::new();
    repo.write("web.yaml", &manifest("1.0.0"));
    let within = repo.commit_signed_at(&alice, "in the window", 1_590_969_600); // 2020-06-01
    repo.write("web.yaml", &manifest("1.0.1"));
    let after = repo.commit_signed(&alice, "after the window");
    repo.write("web.yaml", &manifest("1.0.2"));
    let before = repo.commit_signed_at(&alice, "before the window", 1_546_300_800); // 2019-01-01

    let (reason, detail) = refused(check(&repo, &after, keys.path()));
    assert_eq!(reason, Unverified::BadSignature);
    assert!(
        detail.contains("SHA256:")
            && detail.contains("alice.sshpub:1")
            && detail.contains("expired")
            && detail.contains("valid-before 2021-01-01T00:00:00Z"),
        "{detail}"
    );
    let (reason, detail) = refused(check(&repo, &before, keys.path()));
    assert_eq!(reason, Unverified::BadSignature);
    assert!(
        detail.contains("not yet valid")
            && detail.contains("valid-after 2020-01-01T00:00:00Z")
            && detail.contains("2019-01-01T00:00:00Z"),
        "{detail}"
    );
    assert!(
        matches!(
            check(&repo, &within, keys.path()),
            SignatureCheck::Verified { .. }
        ),
        "a commit dated within the window verifies"
    );
    // git judges the same way, at the committer date.
    assert!(git_verifies(&repo, &within, &allowed, &alice));
    assert!(!git_verifies(&repo, &after, &allowed, &alice));
    assert!(!git_verifies(&repo, &before, &allowed, &alice));
}

#[test]
fn a_revoked_openpgp_key_does_not_verify() {
    if !tools() {
        return;
    }
    let gerda = GpgSigner::new("gerda");
    let keys = tempfile::tempdir().expect("temp dir");
    let repo = TestRepo::new();
    repo.write("web.yaml", &manifest("1.0.0"));
    let sha = repo.commit_signed(&gerda, "signed, then the key is revoked");
    gerda.trust_in(keys.path());
    assert!(matches!(
        check(&repo, &sha, keys.path()),
        SignatureCheck::Verified { .. }
    ));

    let before_revocation = gerda.armored();
    gerda.revoke();
    gerda.trust_in(keys.path());
    let (reason, detail) = refused(check(&repo, &sha, keys.path()));
    assert_eq!(reason, Unverified::BadSignature);
    assert!(
        detail.contains(gerda.fingerprint()) && detail.contains("revoked"),
        "{detail}"
    );
    // An old export left beside the revoked one (and read first) does not undo the revocation.
    std::fs::write(keys.path().join("gerda-old.asc"), before_revocation).expect("write");
    let (_, detail) = refused(check(&repo, &sha, keys.path()));
    assert!(detail.contains("revoked"), "{detail}");
    assert!(!git_verifies(&repo, &sha, keys.path(), &gerda));
}

/// The dates (`YYYY-MM-DD`) an expiry set by `GpgSigner::expire(days_ago)` may fall on, computed
/// around the call (a midnight may pass while gpg runs).
fn expiry_dates(days_ago: i64, expire: impl FnOnce()) -> [String; 2] {
    let day = |at: i64| utc(at - days_ago * DAY).format("%Y-%m-%d").to_string();
    let before = day(unix_now());
    expire();
    [before, day(unix_now())]
}

#[test]
fn an_openpgp_key_counts_only_for_signatures_made_before_it_expired() {
    if !tools() {
        return;
    }
    let gerda = GpgSigner::made_days_ago("gerda", 10, false);
    let keys = tempfile::tempdir().expect("temp dir");
    let repo = TestRepo::new();
    repo.write("web.yaml", &manifest("1.0.0"));
    let early = repo.commit_signed(&gerda.at(unix_now() - 5 * DAY), "signed five days ago");
    repo.write("web.yaml", &manifest("1.0.1"));
    let late = repo.commit_signed(&gerda, "signed now");
    let dates = expiry_dates(2, || gerda.expire(2));
    gerda.trust_in(keys.path());

    let (reason, detail) = refused(check(&repo, &late, keys.path()));
    assert_eq!(reason, Unverified::BadSignature);
    assert!(
        detail.contains(gerda.fingerprint())
            && dates
                .iter()
                .any(|date| detail.contains(&format!("expired on {date}"))),
        "{detail} (expected an expiry on {dates:?})"
    );
    assert!(!git_verifies(&repo, &late, keys.path(), &gerda));
    assert!(
        matches!(
            check(&repo, &early, keys.path()),
            SignatureCheck::Verified { .. }
        ),
        "a signature made before the key expired still verifies"
    );
}

#[test]
fn a_revoked_or_expired_signing_subkey_does_not_verify() {
    if !tools() {
        return;
    }
    let (hans, ida, jan) = (
        GpgSigner::made_days_ago("hans", 10, true),
        GpgSigner::made_days_ago("ida", 10, true),
        GpgSigner::made_days_ago("jan", 10, true),
    );
    let keys = tempfile::tempdir().expect("temp dir");
    let repo = TestRepo::new();
    let mut signed = Vec::new();
    for (version, signer) in ["1.0.0", "1.0.1", "1.0.2"]
        .into_iter()
        .zip([&hans, &ida, &jan])
    {
        repo.write("web.yaml", &manifest(version));
        signed.push(repo.commit_signed(signer, "signed by a subkey"));
    }
    let [by_hans, by_ida, by_jan] = <[String; 3]>::try_from(signed).expect("three commits");
    hans.trust_in(keys.path());
    assert!(matches!(
        check(&repo, &by_hans, keys.path()),
        SignatureCheck::Verified { .. }
    ));

    hans.revoke_subkey();
    let ida_dates = expiry_dates(2, || ida.expire_subkey(2));
    // The primary key's expiry covers its subkeys.
    let jan_dates = expiry_dates(2, || jan.expire(2));
    for signer in [&hans, &ida, &jan] {
        signer.trust_in(keys.path());
    }
    let subkey = |signer: &GpgSigner| signer.subkey_fingerprint().expect("subkey").to_string();
    let (reason, detail) = refused(check(&repo, &by_hans, keys.path()));
    assert_eq!(reason, Unverified::BadSignature);
    assert!(
        detail.contains(&format!(
            "signing subkey {} of key {} is revoked",
            subkey(&hans),
            hans.fingerprint()
        )),
        "{detail}"
    );
    for (sha, expired, dates) in [
        (
            &by_ida,
            format!("signing subkey {}", subkey(&ida)),
            ida_dates,
        ),
        (&by_jan, format!("key {}", jan.fingerprint()), jan_dates),
    ] {
        let (reason, detail) = refused(check(&repo, sha, keys.path()));
        assert_eq!(reason, Unverified::BadSignature);
        assert!(
            detail.starts_with(&expired)
                && dates
                    .iter()
                    .any(|date| detail.contains(&format!("expired on {date}"))),
            "{detail} (expected {expired} to have expired on {dates:?})"
        );
    }
    assert!(!git_verifies(&repo, &by_hans, keys.path(), &hans));
    assert!(!git_verifies(&repo, &by_ida, keys.path(), &ida));
    assert!(!git_verifies(&repo, &by_jan, keys.path(), &jan));
}

#[test]
fn a_key_file_rewritten_with_the_same_keys_does_not_re_verify_the_history() {
    if !tools() {
        return;
    }
    let alice = SshSigner::new("alice");
    let keys = tempfile::tempdir().expect("temp dir");
    alice.trust_in(keys.path());
    let repo = TestRepo::new();
    repo.write("web.yaml", &manifest("1.0.0"));
    repo.commit_signed(&alice, "by alice");
    let mut source = source(&repo, keys.path(), VerifyCommits::Head);
    source.sync().expect("sync");
    // The same bytes, a new file (as an editor saving without a change, or a Secret re-synced):
    // its modification time moves, its keys do not.
    let file = keys.path().join("alice.sshpub");
    let text = std::fs::read(&file).expect("read");
    std::fs::remove_file(&file).expect("remove");
    std::fs::write(&file, &text).expect("write");
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .and_then(|f| f.set_modified(later))
        .expect("touch");
    let report = source.sync().expect("sync");
    assert!(!report.rebuilt, "the same keys: nothing to re-verify");
}

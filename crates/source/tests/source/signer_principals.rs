//! Which trusted principals a git signing configuration signs as (issue #44 item 9), with real
//! keys made in the test: each way `user.signingKey` names a key finds the principals that a
//! commit signed with it verifies as, and an untrusted key finds none.

use tollgate_fixtures::TestRepo;
use tollgate_fixtures::signing::{GpgSigner, Signer, SshSigner, have_tool};
use tollgate_model::SignatureCheck;
use tollgate_source::sign::{Signing, SigningFormat};
use tollgate_source::signer_principals::{SignerIdentity, signer_identities};
use tollgate_source::verify::{TrustedKeys, commit_signature};

fn signing(format: SigningFormat, key: &str) -> Signing {
    Signing {
        format,
        program: String::new(),
        key: key.to_string(),
    }
}

/// What verification says of a commit `signer` signs in a fresh repository.
fn verified_as(signer: &dyn Signer, keys: &std::path::Path) -> SignatureCheck {
    let repo = TestRepo::new();
    repo.write("a", "a");
    let sha = repo.commit_signed(signer, "signed");
    let git = git2::Repository::open(repo.path()).expect("open");
    let trusted = TrustedKeys::read_dir(keys).expect("keys");
    commit_signature(&git, git2::Oid::from_str(&sha).expect("oid"), &trusted)
}

#[test]
fn an_ssh_signing_key_named_any_way_git_takes_it_is_found_with_its_principals() {
    if !have_tool("ssh-keygen", "openssh-client") {
        return;
    }
    let (alice, bob) = (SshSigner::new("alice"), SshSigner::new("bob"));
    let keys = tempfile::tempdir().expect("keys");
    // A second line for alice's key, trusted for files only: it signs no commit.
    let lines = format!(
        "{}\nops namespaces=\"file\" {}\n",
        alice.allowed_signer("alice@example.com,sre-lead"),
        alice.public_key()
    );
    std::fs::write(keys.path().join("team.sshpub"), lines).expect("write");
    let SignatureCheck::Verified { principals, key } = verified_as(&alice, keys.path()) else {
        panic!("alice's commit does not verify");
    };
    let expected = vec![SignerIdentity { key, principals }];
    let public_file = format!("{}.pub", alice.key_path().display());
    for named in [
        alice.key_path().display().to_string(),
        public_file,
        alice.public_key(),
        format!("key::{}", alice.public_key()),
    ] {
        let found = signer_identities(&signing(SigningFormat::Ssh, &named), keys.path());
        assert_eq!(found.expect("read"), expected, "user.signingKey {named}");
    }
    let bob_key = bob.key_path().display().to_string();
    let found = signer_identities(&signing(SigningFormat::Ssh, &bob_key), keys.path());
    assert_eq!(found.expect("read"), [], "bob's key is not trusted");
    let missing = signer_identities(
        &signing(SigningFormat::Ssh, "/nonexistent/key"),
        keys.path(),
    );
    assert!(
        missing.is_err(),
        "an unreadable key is an error, not no match"
    );
}

#[test]
fn an_openpgp_signing_key_is_found_by_fingerprint_key_id_or_user_id() {
    if !have_tool("gpg", "gnupg") {
        return;
    }
    let gerda = GpgSigner::new("gerda");
    let keys = tempfile::tempdir().expect("keys");
    gerda.trust_in(keys.path());
    let SignatureCheck::Verified { principals, key } = verified_as(&gerda, keys.path()) else {
        panic!("gerda's commit does not verify");
    };
    let expected = vec![SignerIdentity { key, principals }];
    let fingerprint = gerda.fingerprint();
    let long_id = &fingerprint[fingerprint.len() - 16..];
    for named in [
        fingerprint.to_string(),
        format!("0x{long_id}"),
        long_id.to_ascii_lowercase(),
        "gerda@example.com".to_string(),
        "Gerda <gerda@example.com>".to_string(),
    ] {
        let found = signer_identities(&signing(SigningFormat::OpenPgp, &named), keys.path());
        assert_eq!(found.expect("read"), expected, "user.signingKey {named}");
    }
    for other in ["DEADBEEFDEADBEEF", "carol@example.com", ""] {
        let found = signer_identities(&signing(SigningFormat::OpenPgp, other), keys.path());
        assert_eq!(found.expect("read"), [], "{other:?} names no trusted key");
    }
}

#[test]
fn a_passphrase_locked_ssh_key_file_is_found_without_unlocking_it() {
    if !have_tool("ssh-keygen", "openssh-client") {
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let key = dir.path().join("id_ed25519");
    let made = std::process::Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "a passphrase",
            "-C",
            "carol@example.com",
            "-f",
        ])
        .arg(&key)
        .status()
        .expect("ssh-keygen");
    assert!(made.success());
    let public = std::fs::read_to_string(dir.path().join("id_ed25519.pub")).expect("public");
    std::fs::remove_file(dir.path().join("id_ed25519.pub")).expect("only the locked file left");
    let keys = tempfile::tempdir().expect("keys");
    std::fs::write(keys.path().join("carol.sshpub"), public).expect("write");
    let found = signer_identities(
        &signing(SigningFormat::Ssh, &key.display().to_string()),
        keys.path(),
    )
    .expect("read");
    let principals: Vec<&[String]> = found.iter().map(|i| i.principals.as_slice()).collect();
    assert_eq!(principals, [["carol@example.com".to_string()]]);
}

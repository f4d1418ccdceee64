//! Commit signature verification against a directory of trusted keys (issue #33,
//! docs/trust.md): SSH signatures (SSHSIG, namespace `git`) with the RustCrypto `ssh-key` crate,
//! OpenPGP signatures with `pgp`. Nothing here shells out: the controller verifies in-process.

mod commit;
mod keys;
mod openpgp;
mod options;
mod ssh;

use tollgate_model::SignatureCheck;

pub use commit::{CommitChecks, commit_signature};
pub use keys::{KeyDirError, SignerIdentity, TrustedKeys, TrustedKeysDir};

/// Checks a detached signature over `signed` (a git commit without its `gpgsig` header).
pub trait SignatureVerifier {
    fn check(&self, signature: &[u8], signed: &[u8]) -> SignatureCheck;
}

/// Where an armored signature comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Armor {
    Ssh,
    OpenPgp,
    Unknown,
}

fn armor_of(signature: &[u8]) -> Armor {
    let text = String::from_utf8_lossy(&signature[..signature.len().min(64)]);
    let text = text.trim_start();
    if text.starts_with("-----BEGIN SSH SIGNATURE-----") {
        Armor::Ssh
    } else if text.starts_with("-----BEGIN PGP SIGNATURE-----") {
        Armor::OpenPgp
    } else {
        Armor::Unknown
    }
}

/// The date a signed git object carries, in seconds since the epoch: its committer date (a tag's
/// tagger date), the time `git verify-commit` judges an SSH key's validity at. `None` when the
/// headers have none.
fn signed_time(signed: &[u8]) -> Option<i64> {
    for line in signed.split(|byte| *byte == b'\n') {
        if line.is_empty() {
            return None; // the end of the headers
        }
        let Some(person) = line
            .strip_prefix(b"committer ")
            .or_else(|| line.strip_prefix(b"tagger "))
        else {
            continue;
        };
        // `Name <email> 1767225600 +0100`: the time follows the e-mail's closing bracket.
        let person = std::str::from_utf8(person).ok()?;
        let (_, when) = person.rsplit_once('>')?;
        return when.split_whitespace().next()?.parse().ok();
    }
    None
}

/// A time as status shows it: RFC 3339 in UTC.
fn show_time(at: i64) -> String {
    chrono::DateTime::from_timestamp(at, 0)
        .map(|time| time.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| format!("@{at}"))
}

impl SignatureVerifier for TrustedKeys {
    fn check(&self, signature: &[u8], signed: &[u8]) -> SignatureCheck {
        match armor_of(signature) {
            Armor::Ssh => ssh::check(&self.ssh, signature, signed, signed_time(signed)),
            Armor::OpenPgp => openpgp::check(&self.openpgp, signature, signed),
            Armor::Unknown => SignatureCheck::unverified(
                tollgate_model::Unverified::BadSignature,
                "neither an SSH nor an OpenPGP signature (X.509 signatures are not supported)",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signed_time_is_the_committer_date() {
        let commit = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\
author A <a@example.com> 1000000000 +0000\n\
committer C <c@example.com> 1767225600 +0100\n\
\n\
committer Not <a header> 5\n";
        assert_eq!(signed_time(commit), Some(1_767_225_600));
        let tag = b"object 4b825dc642cb6eb9a060e54bf8d69288fbee4904\ntagger T <t@example.com> 42 +0000\n\nv1\n";
        assert_eq!(signed_time(tag), Some(42));
        assert_eq!(signed_time(b"tree x\n\ncommitter C <c> 5 +0000\n"), None);
        assert_eq!(show_time(1_767_225_600), "2026-01-01T00:00:00Z");
    }
}

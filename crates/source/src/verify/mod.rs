//! Commit signature verification against a directory of trusted keys (issue #33,
//! docs/trust.md): SSH signatures (SSHSIG, namespace `git`) with the RustCrypto `ssh-key` crate,
//! OpenPGP signatures with `pgp`. Nothing here shells out: the controller verifies in-process.

mod commit;
mod keys;
mod openpgp;
mod ssh;

use tollgate_model::SignatureCheck;

pub use commit::{CommitChecks, commit_signature};
pub use keys::{KeyDirError, TrustedKeys, TrustedKeysDir};

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

impl SignatureVerifier for TrustedKeys {
    fn check(&self, signature: &[u8], signed: &[u8]) -> SignatureCheck {
        match armor_of(signature) {
            Armor::Ssh => ssh::check(&self.ssh, signature, signed),
            Armor::OpenPgp => openpgp::check(&self.openpgp, signature, signed),
            Armor::Unknown => SignatureCheck::unverified(
                tollgate_model::Unverified::BadSignature,
                "neither an SSH nor an OpenPGP signature (X.509 signatures are not supported)",
            ),
        }
    }
}

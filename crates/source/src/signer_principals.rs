//! Which principals of the trusted keys a git signing configuration signs as (issue #44 item 9):
//! the identity a commit made with that configuration verifies as, found without signing
//! anything (the key may be locked, or in an agent). `tollgate run --ui` asks it of the web
//! view's clone: were its key an approver's, anyone who reaches the web view would approve as
//! that approver.
//!
//! The trusted-keys directory is read exactly as verification reads it
//! ([`TrustedKeys::read_dir`]: a directory the controller refuses is refused here too), and the
//! signing key is looked up among the keys it read, with verification's own rules
//! ([`TrustedKeys::ssh_signer`], [`TrustedKeys::openpgp_signer`]).

use std::path::{Path, PathBuf};

use ssh_key::{PrivateKey, PublicKey};

use crate::sign::{Signing, SigningFormat};
pub use crate::verify::SignerIdentity;
use crate::verify::{KeyDirError, TrustedKeys};

#[derive(Debug, thiserror::Error)]
pub enum SignerKeyError {
    #[error(transparent)]
    Keys(#[from] KeyDirError),
    #[error("git config user.signingKey {key:?}: {message}")]
    SigningKey { key: String, message: String },
}

/// The trusted keys in `dir` that `signing` signs with (none: its key is not trusted).
pub fn signer_identities(
    signing: &Signing,
    dir: &Path,
) -> Result<Vec<SignerIdentity>, SignerKeyError> {
    let keys = TrustedKeys::read_dir(dir)?;
    Ok(match signing.format {
        SigningFormat::Ssh => keys.ssh_signer(&ssh_public_key(&signing.key)?),
        SigningFormat::OpenPgp => keys.openpgp_signer(&signing.key),
    })
}

/// The public key of `user.signingKey` under `gpg.format ssh`: a literal key (`key::…`,
/// `ssh-…`), or a key file, public or private (its public half is readable even when locked),
/// or a private key file with its `.pub` beside it.
fn ssh_public_key(key: &str) -> Result<PublicKey, SignerKeyError> {
    let error = |message: String| SignerKeyError::SigningKey {
        key: key.to_string(),
        message,
    };
    let literal = key.strip_prefix("key::").or_else(|| {
        (key.starts_with("ssh-") || key.starts_with("ecdsa-") || key.starts_with("sk-"))
            .then_some(key)
    });
    if let Some(literal) = literal {
        return PublicKey::from_openssh(literal.trim())
            .map_err(|e| error(format!("not an OpenSSH public key: {e}")));
    }
    let path = expand_home(key);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| error(format!("cannot read {}: {e}", path.display())))?;
    if let Ok(public) = PublicKey::from_openssh(text.trim()) {
        return Ok(public);
    }
    if let Ok(private) = PrivateKey::from_openssh(&text) {
        return Ok(private.public_key().clone());
    }
    let beside = PathBuf::from(format!("{}.pub", path.display()));
    let text = std::fs::read_to_string(&beside).map_err(|_| {
        error("neither an OpenSSH public nor private key, and no .pub beside it".to_string())
    })?;
    PublicKey::from_openssh(text.trim()).map_err(|e| error(format!("{}: {e}", beside.display())))
}

fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

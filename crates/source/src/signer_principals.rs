//! Which principals of the trusted keys a git signing configuration signs as (issue #44 item 9):
//! the identity a commit made with that configuration verifies as, found without signing
//! anything (the key may be locked, or in an agent). `tollgate run --ui` asks it of the web
//! view's clone: were its key an approver's, anyone who reaches the web view would approve as
//! that approver.
//!
//! The trusted-keys directory is first read exactly as verification reads it
//! ([`TrustedKeys::read_dir`], so a directory the controller refuses is refused here too); the
//! matching key is then looked up in the same files, with the same rules (principals before the
//! key, else its comment; a key whose `namespaces` exclude `git` signs no commit; an OpenPGP key's
//! principals are its user IDs' e-mail addresses, its subkeys sign as it).

use std::path::{Path, PathBuf};

use pgp::composed::{Deserializable, SignedPublicKey};
use pgp::types::KeyDetails;
use ssh_key::{HashAlg, PrivateKey, PublicKey};

use crate::sign::{Signing, SigningFormat};
use crate::verify::{KeyDirError, TrustedKeys};

/// A trusted key the configuration signs with, and the principals a signature by it verifies as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignerIdentity {
    /// The key as verification names it: an SSH SHA-256 fingerprint, an OpenPGP fingerprint.
    pub key: String,
    pub principals: Vec<String>,
}

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
    TrustedKeys::read_dir(dir)?;
    match signing.format {
        SigningFormat::Ssh => {
            let key = ssh_public_key(&signing.key)?;
            let mut found = Vec::new();
            for (_, text) in key_files(dir, "sshpub")? {
                found.extend(ssh_matches(&text, &key));
            }
            Ok(found)
        }
        SigningFormat::OpenPgp => {
            let mut found = Vec::new();
            for (path, text) in key_files(dir, "asc")? {
                found.extend(openpgp_matches(&path, &text, &signing.key)?);
            }
            Ok(found)
        }
    }
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

/// The `*.<extension>` files of `dir` and their text, sorted by name.
fn key_files(dir: &Path, extension: &str) -> Result<Vec<(PathBuf, String)>, KeyDirError> {
    let read_error = |path: &Path, e: std::io::Error| KeyDirError::Read {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| read_error(dir, e))? {
        let path = entry.map_err(|e| read_error(dir, e))?.path();
        if path.extension().is_some_and(|e| e == extension) && path.is_file() {
            let text = std::fs::read_to_string(&path).map_err(|e| read_error(&path, e))?;
            files.push((path, text));
        }
    }
    files.sort();
    Ok(files)
}

/// Splits an allowed-signers line into tokens, keeping double-quoted parts together.
fn tokens(line: &str) -> Vec<String> {
    let (mut tokens, mut current, mut quoted) = (Vec::new(), String::new(), false);
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                current.push(c);
            }
            c if c.is_whitespace() && !quoted => {
                tokens.extend(Some(std::mem::take(&mut current)).filter(|t| !t.is_empty()))
            }
            c => current.push(c),
        }
    }
    tokens.extend(Some(current).filter(|t| !t.is_empty()));
    tokens
}

/// The lines of an allowed-signers file whose key is `key`, as identities.
fn ssh_matches(text: &str, key: &PublicKey) -> Vec<SignerIdentity> {
    let fingerprint = key.fingerprint(HashAlg::Sha256).to_string();
    let mut found = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let tokens = tokens(line);
        let is_type = |t: &String| {
            t.starts_with("ssh-") || t.starts_with("ecdsa-sha2-") || t.starts_with("sk-")
        };
        let Some(at) = tokens.iter().position(is_type) else {
            continue;
        };
        let Ok(listed) = PublicKey::from_openssh(&tokens[at..].join(" ")) else {
            continue;
        };
        let options = tokens[..at].get(1).map(String::as_str).unwrap_or_default();
        if listed.key_data() != key.key_data() || !signs_git(options) {
            continue;
        }
        let principals = match tokens[..at].first() {
            Some(list) => list
                .split(',')
                .filter(|p| !p.is_empty())
                .map(str::to_ascii_lowercase)
                .collect(),
            None if !listed.comment().trim().is_empty() => {
                vec![listed.comment().trim().to_ascii_lowercase()]
            }
            None => vec![fingerprint.clone()],
        };
        found.push(SignerIdentity {
            key: fingerprint.clone(),
            principals,
        });
    }
    found
}

/// Whether an option list lets the key sign git commits (`namespaces="…"` must name `git`).
fn signs_git(options: &str) -> bool {
    options
        .split(',')
        .all(|option| match option.strip_prefix("namespaces=") {
            Some(list) => list.trim_matches('"').split(',').any(|n| n.trim() == "git"),
            None => true,
        })
}

/// The keys of an armored file that `user.signingKey` (a key ID or fingerprint, of the primary
/// key or a subkey; or, as gpg reads it, part of a user ID such as the e-mail address) names.
fn openpgp_matches(
    path: &Path,
    text: &str,
    wanted: &str,
) -> Result<Vec<SignerIdentity>, KeyDirError> {
    let wanted = wanted.trim().trim_end_matches('!');
    let hex = wanted
        .trim_start_matches("0x")
        .replace(' ', "")
        .to_ascii_uppercase();
    let by_id = hex.len() >= 8 && hex.chars().all(|c| c.is_ascii_hexdigit());
    let user_part = wanted
        .trim_start_matches('<')
        .trim_end_matches('>')
        .to_ascii_lowercase();
    let keys = SignedPublicKey::from_armor_many(text.as_bytes())
        .map_err(|e| KeyDirError::Key {
            path: path.display().to_string(),
            line: 1,
            message: format!("not an armored OpenPGP public key: {e}"),
        })?
        .0;
    let mut found = Vec::new();
    for key in keys.flatten() {
        let fingerprints: Vec<String> = std::iter::once(format!("{:X}", key.fingerprint()))
            .chain(
                key.public_subkeys
                    .iter()
                    .map(|s| format!("{:X}", s.key.fingerprint())),
            )
            .collect();
        let user_ids: Vec<String> = key
            .details
            .users
            .iter()
            .filter_map(|u| u.id.as_str().map(str::to_string))
            .collect();
        let named = if by_id {
            fingerprints.iter().any(|f| f.ends_with(&hex))
        } else {
            !user_part.is_empty()
                && user_ids
                    .iter()
                    .any(|id| id.to_ascii_lowercase().contains(&user_part))
        };
        if named {
            found.push(SignerIdentity {
                key: fingerprints[0].clone(),
                principals: user_ids.iter().map(|id| principal_of(id)).collect(),
            });
        }
    }
    Ok(found)
}

/// The e-mail address of a user ID, lowercased; the whole ID when it has none (as verification
/// names an OpenPGP signer).
fn principal_of(user_id: &str) -> String {
    let inner = user_id
        .rsplit_once('<')
        .and_then(|(_, rest)| rest.split_once('>'))
        .map(|(email, _)| email);
    inner.unwrap_or(user_id).trim().to_ascii_lowercase()
}

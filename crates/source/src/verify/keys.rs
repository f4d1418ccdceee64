//! The trusted keys: a directory of `*.sshpub` files (OpenSSH public keys, one per line, an
//! optional principal list before the key as in git's allowed-signers format) and `*.asc` files
//! (armored OpenPGP public keys). Re-read when a file in it changes.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use tracing::{info, warn};

use super::openpgp::{OpenPgpKey, read_openpgp_keys};
use super::ssh::{SshKey, read_allowed_signers};

/// A problem with the trusted-keys directory, naming the file and line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyDirError {
    #[error("trusted keys: cannot read {path}: {message}")]
    Read { path: String, message: String },
    #[error("trusted keys: {path}:{line}: {message}")]
    Key {
        path: String,
        line: usize,
        message: String,
    },
}

/// Every key the directory holds.
#[derive(Debug, Default)]
pub struct TrustedKeys {
    pub(super) ssh: Vec<SshKey>,
    pub(super) openpgp: Vec<OpenPgpKey>,
}

/// A trusted key and the principals a signature by it verifies as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignerIdentity {
    /// The key as verification names it: an SSH SHA-256 fingerprint, an OpenPGP fingerprint.
    pub key: String,
    pub principals: Vec<String>,
}

impl TrustedKeys {
    /// The trusted lines of SSH key `key` (only those that may sign git commits are read at
    /// all), each with the principals a signature by it verifies as.
    pub fn ssh_signer(&self, key: &ssh_key::PublicKey) -> Vec<SignerIdentity> {
        self.ssh.iter().filter_map(|k| k.identity_of(key)).collect()
    }

    /// The trusted OpenPGP keys `wanted` names as gpg reads `user.signingKey`: a key ID or
    /// fingerprint (of the primary key or a subkey, which signs as it), or part of a user ID.
    pub fn openpgp_signer(&self, wanted: &str) -> Vec<SignerIdentity> {
        super::openpgp::named_by(&self.openpgp, wanted)
    }

    pub fn is_empty(&self) -> bool {
        self.ssh.is_empty() && self.openpgp.is_empty()
    }

    pub fn len(&self) -> usize {
        self.ssh.len() + self.openpgp.len()
    }

    /// Reads every `*.sshpub` and `*.asc` file of `dir` (other files are ignored). Any error
    /// fails the whole read: a half-read trust set is no trust set.
    pub fn read_dir(dir: &Path) -> Result<Self, KeyDirError> {
        Self::parse(&read_files(dir)?)
    }

    fn parse(files: &[(PathBuf, String)]) -> Result<Self, KeyDirError> {
        let mut keys = TrustedKeys::default();
        for (path, text) in files {
            let shown = path.display().to_string();
            match extension(path) {
                Some("sshpub") => keys.ssh.extend(read_allowed_signers(&shown, text)?),
                Some("asc") => keys.openpgp.extend(read_openpgp_keys(&shown, text)?),
                _ => {}
            }
        }
        Ok(keys)
    }
}

/// The key files of `dir` with their text, sorted by name.
fn read_files(dir: &Path) -> Result<Vec<(PathBuf, String)>, KeyDirError> {
    let mut files = Vec::new();
    for path in key_files(dir)? {
        let text = std::fs::read_to_string(&path).map_err(|e| read_error(&path, e))?;
        files.push((path, text));
    }
    Ok(files)
}

/// A digest of the key files' names and text: what decides whether the keys changed (a file
/// saved again unchanged, or a Secret volume re-synced, moves the stamp, not the keys).
fn digest(files: &[(PathBuf, String)]) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for (path, text) in files {
        for part in [path.as_os_str().as_encoded_bytes(), text.as_bytes()] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part);
        }
    }
    hasher.finalize().to_vec()
}

fn read_error(path: &Path, error: std::io::Error) -> KeyDirError {
    KeyDirError::Read {
        path: path.display().to_string(),
        message: error.to_string(),
    }
}

fn extension(path: &Path) -> Option<&str> {
    path.extension().and_then(|e| e.to_str())
}

/// The key files of `dir`, sorted by name.
fn key_files(dir: &Path) -> Result<Vec<PathBuf>, KeyDirError> {
    let entries = std::fs::read_dir(dir).map_err(|e| read_error(dir, e))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| read_error(dir, e))?.path();
        if matches!(extension(&path), Some("sshpub" | "asc")) && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// What identifies one state of the directory: each key file's name, size and modification time.
type Stamp = Vec<(PathBuf, u64, Option<SystemTime>)>;

fn stamp(dir: &Path) -> Result<Stamp, KeyDirError> {
    let mut stamp = Vec::new();
    for path in key_files(dir)? {
        let meta = std::fs::metadata(&path).map_err(|e| read_error(&path, e))?;
        stamp.push((path, meta.len(), meta.modified().ok()));
    }
    Ok(stamp)
}

/// The trusted-keys directory, re-read when its key files change (`--trusted-keys DIR`).
#[derive(Debug)]
pub struct TrustedKeysDir {
    dir: PathBuf,
    /// Cheap to take on every sync; when it moves, the files are read and their digest compared.
    stamp: Stamp,
    /// The digest of the files the keys in force were read from.
    digest: Vec<u8>,
    keys: std::sync::Arc<TrustedKeys>,
}

impl TrustedKeysDir {
    /// Reads the directory once; an unreadable directory or a bad key is an error (at startup
    /// the operator fixes it before anything runs).
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, KeyDirError> {
        let dir = dir.into();
        let stamp = stamp(&dir)?;
        let files = read_files(&dir)?;
        let keys = TrustedKeys::parse(&files)?;
        info!(dir = %dir.display(), keys = keys.len(), "trusted keys read");
        Ok(TrustedKeysDir {
            dir,
            stamp,
            digest: digest(&files),
            keys: std::sync::Arc::new(keys),
        })
    }

    pub fn keys(&self) -> &std::sync::Arc<TrustedKeys> {
        &self.keys
    }

    /// Re-reads the directory if a key file was added, removed or changed. Returns true when the
    /// keys changed (not when a file was only saved again). A broken file keeps the previous keys
    /// in force (logged with file and line): removing trust takes a readable directory, not a
    /// corrupted one.
    pub fn refresh(&mut self) -> bool {
        let stamp = match stamp(&self.dir) {
            Ok(stamp) => stamp,
            Err(error) => {
                warn!(%error, "cannot re-read the trusted keys; the previous keys stay in force");
                return false;
            }
        };
        if stamp == self.stamp {
            return false;
        }
        self.stamp = stamp;
        let parsed = read_files(&self.dir).and_then(|files| {
            let digest = digest(&files);
            match digest == self.digest {
                true => Ok(None),
                false => TrustedKeys::parse(&files).map(|keys| Some((digest, keys))),
            }
        });
        match parsed {
            Ok(Some((digest, keys))) => {
                info!(dir = %self.dir.display(), keys = keys.len(), "trusted keys changed; re-verifying");
                self.digest = digest;
                self.keys = std::sync::Arc::new(keys);
                true
            }
            Ok(None) => false,
            Err(error) => {
                warn!(%error, "trusted keys unreadable; the previous keys stay in force");
                false
            }
        }
    }
}

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

impl TrustedKeys {
    pub fn is_empty(&self) -> bool {
        self.ssh.is_empty() && self.openpgp.is_empty()
    }

    pub fn len(&self) -> usize {
        self.ssh.len() + self.openpgp.len()
    }

    /// Reads every `*.sshpub` and `*.asc` file of `dir` (other files are ignored). Any error
    /// fails the whole read: a half-read trust set is no trust set.
    pub fn read_dir(dir: &Path) -> Result<Self, KeyDirError> {
        let mut keys = TrustedKeys::default();
        for path in key_files(dir)? {
            let text = std::fs::read_to_string(&path).map_err(|e| read_error(&path, e))?;
            let shown = path.display().to_string();
            match extension(&path) {
                Some("sshpub") => keys.ssh.extend(read_allowed_signers(&shown, &text)?),
                Some("asc") => keys.openpgp.extend(read_openpgp_keys(&shown, &text)?),
                _ => {}
            }
        }
        Ok(keys)
    }
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
    stamp: Stamp,
    keys: std::sync::Arc<TrustedKeys>,
}

impl TrustedKeysDir {
    /// Reads the directory once; an unreadable directory or a bad key is an error (at startup
    /// the operator fixes it before anything runs).
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, KeyDirError> {
        let dir = dir.into();
        let stamp = stamp(&dir)?;
        let keys = TrustedKeys::read_dir(&dir)?;
        info!(dir = %dir.display(), keys = keys.len(), "trusted keys read");
        Ok(TrustedKeysDir {
            dir,
            stamp,
            keys: std::sync::Arc::new(keys),
        })
    }

    pub fn keys(&self) -> &std::sync::Arc<TrustedKeys> {
        &self.keys
    }

    /// Re-reads the directory if a key file was added, removed or changed. Returns true when the
    /// keys changed. A broken file keeps the previous keys in force (logged with file and line):
    /// removing trust takes a readable directory, not a corrupted one.
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
        match TrustedKeys::read_dir(&self.dir) {
            Ok(keys) => {
                info!(dir = %self.dir.display(), keys = keys.len(), "trusted keys changed; re-verifying");
                self.keys = std::sync::Arc::new(keys);
                true
            }
            Err(error) => {
                warn!(%error, "trusted keys unreadable; the previous keys stay in force");
                false
            }
        }
    }
}

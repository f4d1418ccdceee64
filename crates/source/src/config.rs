//! What to read: repository, branch, sub-path, cache location and credentials.

use std::fmt;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use crate::error::SourceError;

#[derive(Clone, Debug)]
pub struct SourceConfig {
    /// A local path (read in place, no clone), or a URL: `file://`, `http(s)://`, `ssh://`, or
    /// scp-like `user@host:path` (fetched into a bare cache clone under `cache_dir`).
    pub repo: String,
    pub branch: String,
    /// Sub-path inside the repository holding the manifests; `""` is the root.
    pub path: String,
    /// Where remote repositories are cloned; one directory per repository URL.
    pub cache_dir: PathBuf,
    pub auth: Auth,
    pub limits: tollgate_manifest::parse::Limits,
    /// Connect and read/write timeouts of fetches (process-wide: the first fetch's apply).
    pub timeouts: crate::timeouts::NetworkTimeouts,
    /// Commit verification and the trusted keys (issue #33); off by default.
    pub trust: crate::trust::TrustConfig,
}

impl SourceConfig {
    /// A local repository or `file://`/network URL with default limits and no credentials.
    pub fn new(
        repo: impl Into<String>,
        branch: impl Into<String>,
        path: impl Into<String>,
        cache_dir: impl Into<PathBuf>,
    ) -> Self {
        SourceConfig {
            repo: repo.into(),
            branch: branch.into(),
            path: path.into(),
            cache_dir: cache_dir.into(),
            auth: Auth::None,
            limits: tollgate_manifest::parse::Limits::default(),
            timeouts: crate::timeouts::NetworkTimeouts::default(),
            trust: crate::trust::TrustConfig::default(),
        }
    }

    /// Whether `repo` names a remote (fetched) repository rather than a local path.
    pub fn is_remote(&self) -> bool {
        is_remote_address(&self.repo)
    }

    /// The sub-path without leading/trailing slashes or `./`.
    pub(crate) fn normalized_path(&self) -> String {
        self.path
            .split('/')
            .filter(|part| !part.is_empty() && *part != ".")
            .collect::<Vec<_>>()
            .join("/")
    }
}

pub(crate) fn is_remote_address(repo: &str) -> bool {
    if repo.contains("://") {
        return true;
    }
    // scp-like `[user@]host:path`: a colon before any slash, and not a Windows drive letter.
    match repo.find(':') {
        Some(colon) => {
            let before = &repo[..colon];
            !before.contains('/') && before.len() > 1 && !Path::new(repo).exists()
        }
        None => false,
    }
}

#[derive(Clone, Debug, Default)]
pub enum Auth {
    #[default]
    None,
    /// An access token, sent as the HTTP basic password with user `x-access-token`.
    Token {
        token: Secret,
    },
    Basic {
        username: String,
        password: Secret,
    },
    /// An ssh private key; the server's host key must be listed in `known_hosts`.
    SshKey {
        key_file: PathBuf,
        known_hosts: PathBuf,
    },
}

/// A credential. Its `Debug` and `Display` print `<redacted>` so it cannot leak into logs.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

/// The largest secret file read: tokens and private keys are a few KiB.
pub const SECRET_FILE_LIMIT: u64 = 64 * 1024;

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// Reads a secret file (e.g. a mounted Kubernetes Secret); one trailing newline is dropped.
    /// Larger files are refused: a token or key is never this big, and a path pointing at
    /// the wrong file (a device, a log) must not be read whole into memory.
    pub fn from_file(path: &Path) -> Result<Self, SourceError> {
        let read_error = |source| SourceError::SecretFile {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read_error)?;
        let mut bytes = Vec::new();
        file.take(SECRET_FILE_LIMIT + 1)
            .read_to_end(&mut bytes)
            .map_err(read_error)?;
        if bytes.len() as u64 > SECRET_FILE_LIMIT {
            return Err(SourceError::SecretFileTooLarge {
                path: path.to_path_buf(),
                limit: SECRET_FILE_LIMIT,
            });
        }
        let text = String::from_utf8(bytes).map_err(|_| {
            read_error(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not UTF-8",
            ))
        })?;
        let trimmed = text.strip_suffix('\n').unwrap_or(&text);
        let trimmed = trimmed.strip_suffix('\r').unwrap_or(trimmed);
        Ok(Secret(trimmed.to_string()))
    }

    pub fn from_env(var: &str) -> Result<Self, SourceError> {
        std::env::var(var)
            .map(Secret)
            .map_err(|_| SourceError::SecretEnv {
                var: var.to_string(),
            })
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_never_prints() {
        let auth = Auth::Basic {
            username: "bob".into(),
            password: Secret::new("hunter2"),
        };
        let shown = format!("{auth:?} {}", Secret::new("hunter2"));
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("<redacted>"));
    }

    #[test]
    fn secret_from_file_drops_trailing_newline() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("token");
        std::fs::write(&file, "abc123\n").expect("write");
        assert_eq!(Secret::from_file(&file).expect("read").expose(), "abc123");
        let missing = Secret::from_file(&dir.path().join("none"));
        assert!(matches!(missing, Err(SourceError::SecretFile { .. })));
        assert!(matches!(
            Secret::from_env("TOLLGATE_SOURCE_TEST_UNSET_VARIABLE"),
            Err(SourceError::SecretEnv { .. })
        ));
    }

    #[test]
    fn secret_files_are_bounded_and_utf8() {
        let dir = tempfile::tempdir().expect("tempdir");
        let exact = dir.path().join("exact");
        std::fs::write(&exact, "k".repeat(SECRET_FILE_LIMIT as usize)).expect("write");
        assert!(Secret::from_file(&exact).is_ok());
        let big = dir.path().join("big");
        std::fs::write(&big, "k".repeat(SECRET_FILE_LIMIT as usize + 1)).expect("write");
        let error = Secret::from_file(&big).expect_err("too large");
        assert!(
            matches!(error, SourceError::SecretFileTooLarge { .. }),
            "{error}"
        );
        assert!(error.to_string().contains("big"), "names the file: {error}");
        let binary = dir.path().join("binary");
        std::fs::write(&binary, [0xff, 0xfe]).expect("write");
        assert!(matches!(
            Secret::from_file(&binary),
            Err(SourceError::SecretFile { .. })
        ));
        // A device that never ends is read only up to the limit.
        let endless = Secret::from_file(Path::new("/dev/zero")).expect_err("endless");
        assert!(matches!(endless, SourceError::SecretFileTooLarge { .. }));
    }

    #[test]
    fn classifies_addresses() {
        assert!(is_remote_address("https://example.com/r.git"));
        assert!(is_remote_address("file:///srv/r.git"));
        assert!(is_remote_address("ssh://git@example.com/r.git"));
        assert!(is_remote_address("git@example.com:org/r.git"));
        assert!(!is_remote_address("/srv/r"));
        assert!(!is_remote_address("./r"));
        assert!(!is_remote_address("."));
    }

    #[test]
    fn normalizes_sub_path() {
        let mut config = SourceConfig::new(".", "main", "./deploy/promotions/", "/tmp");
        assert_eq!(config.normalized_path(), "deploy/promotions");
        config.path = String::new();
        assert_eq!(config.normalized_path(), "");
    }
}

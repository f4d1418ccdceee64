//! Everything that can go wrong while reading a promotion repository. Messages name the step and
//! the repository (with credentials stripped from URLs) and never carry a secret.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("cannot open git repository {repo}: {source}")]
    Open {
        repo: String,
        #[source]
        source: git2::Error,
    },
    #[error("cannot prepare cache directory {path}: {source}")]
    Cache {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot fetch branch {branch:?} from {url}: {source}")]
    Fetch {
        url: String,
        branch: String,
        #[source]
        source: git2::Error,
    },
    #[error("authentication to {url} failed: {reason}")]
    Auth { url: String, reason: String },
    #[error("host key of {host} (fetching {url}) is not trusted: {reason}")]
    UntrustedHost {
        url: String,
        host: String,
        reason: String,
    },
    #[error("cannot read known_hosts file {path}: {source}")]
    KnownHosts {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("branch {branch:?} not found in {repo}")]
    BranchNotFound { repo: String, branch: String },
    #[error("cannot walk first-parent history of {repo} from {commit}: {source}")]
    Walk {
        repo: String,
        commit: String,
        #[source]
        source: git2::Error,
    },
    #[error("cannot read {what} at commit {commit} in {repo}: {source}")]
    Read {
        repo: String,
        commit: String,
        what: String,
        #[source]
        source: git2::Error,
    },
    #[error(transparent)]
    TrustedKeys(#[from] crate::verify::KeyDirError),
    /// No commit of the branch is verified yet (`--verify-commits`): nothing may run.
    #[error("no commit of branch {branch:?} in {repo} is verified: {refusal}")]
    NothingVerified {
        repo: String,
        branch: String,
        refusal: String,
    },
    #[error("cannot read secret from file {path}: {source}")]
    SecretFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("secret file {path} is larger than {limit} bytes; is it the right file?")]
    SecretFileTooLarge { path: PathBuf, limit: u64 },
    #[error("cannot read secret from environment variable {var}: it is not set or not UTF-8")]
    SecretEnv { var: String },
    #[error("cannot watch {path}: {source}")]
    Watch {
        path: PathBuf,
        #[source]
        source: notify::Error,
    },
}

impl SourceError {
    /// Whether the error means the local object store (cache clone) is damaged, so that deleting
    /// and re-cloning it can help.
    pub(crate) fn is_corruption(&self) -> bool {
        let (git, reading) = match self {
            SourceError::Walk { source, .. } | SourceError::Read { source, .. } => (source, true),
            SourceError::Fetch { source, .. } | SourceError::Open { source, .. } => (source, false),
            _ => return false,
        };
        let damaged_store = matches!(
            git.class(),
            git2::ErrorClass::Odb
                | git2::ErrorClass::Zlib
                | git2::ErrorClass::Object
                | git2::ErrorClass::Indexer
                | git2::ErrorClass::Repository
                | git2::ErrorClass::Reference
        );
        // A missing object while reading history means the clone lost it; a "not found" from
        // the server (e.g. no such repository) does not.
        damaged_store || (reading && git.code() == git2::ErrorCode::NotFound)
    }
}

/// `scheme://user:password@host/path` → `scheme://host/path`, so that URLs can be logged and put
/// into errors. scp-like addresses (`git@host:path`) keep their user name, which is not a secret.
pub fn redact_url(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let authority_end = rest.find('/').unwrap_or(rest.len());
        let (authority, path) = rest.split_at(authority_end);
        let host = authority
            .rsplit_once('@')
            .map_or(authority, |(_, host)| host);
        format!("{scheme}://{host}{path}")
    } else {
        url.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_strips_userinfo() {
        assert_eq!(
            redact_url("https://bob:s3cret@git.example.com/org/repo.git"),
            "https://git.example.com/org/repo.git"
        );
        assert_eq!(
            redact_url("https://git.example.com/org/repo.git"),
            "https://git.example.com/org/repo.git"
        );
        assert_eq!(
            redact_url("ssh://git@host:2222/repo"),
            "ssh://host:2222/repo"
        );
        assert_eq!(
            redact_url("git@github.com:o/r.git"),
            "git@github.com:o/r.git"
        );
        assert_eq!(redact_url("/srv/repo"), "/srv/repo");
    }
}

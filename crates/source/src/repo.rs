//! Access to the repository: a local repository read in place, or a bare cache clone of a remote
//! one, refreshed by fetching the tracked branch into a private ref.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use git2::{
    AutotagOption, CertificateCheckStatus, Cred, CredentialType, FetchOptions, Oid,
    RemoteCallbacks, Repository,
};
use sha2::{Digest, Sha256};
use tracing::{debug, warn};

use crate::config::{Auth, SourceConfig};
use crate::error::{SourceError, redact_url};
use crate::known_hosts::verify_host_key;
use crate::timeouts::{self, NetworkTimeouts};

/// A fetch that stops receiving data for this long is abandoned. (libgit2's own connect/read
/// timeouts are only settable through `unsafe` global options, which this crate forbids.)
const FETCH_DEADLINE: Duration = Duration::from_secs(300);

pub(crate) struct RepoAccess {
    repo: Repository,
    /// Repository address safe to show (credentials stripped).
    display: String,
    branch: String,
    remote: Option<RemoteCache>,
}

struct RemoteCache {
    url: String,
    dir: PathBuf,
    auth: Auth,
    timeouts: NetworkTimeouts,
}

impl RepoAccess {
    pub fn open(config: &SourceConfig) -> Result<Self, SourceError> {
        let display = redact_url(&config.repo);
        if !config.is_remote() {
            let repo = Repository::open(&config.repo).map_err(|source| SourceError::Open {
                repo: display.clone(),
                source,
            })?;
            return Ok(RepoAccess {
                repo,
                display,
                branch: config.branch.clone(),
                remote: None,
            });
        }
        let dir = config.cache_dir.join(cache_dir_name(&display));
        let repo = open_or_init_cache(&dir, &display)?;
        Ok(RepoAccess {
            repo,
            display,
            branch: config.branch.clone(),
            remote: Some(RemoteCache {
                url: config.repo.clone(),
                dir,
                auth: config.auth.clone(),
                timeouts: config.timeouts,
            }),
        })
    }

    pub fn repo(&self) -> &Repository {
        &self.repo
    }

    pub fn branch(&self) -> &str {
        &self.branch
    }

    pub fn display(&self) -> &str {
        &self.display
    }

    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    fn tracked_ref(&self) -> String {
        match self.remote {
            Some(_) => format!("refs/tollgate/heads/{}", self.branch),
            None => format!("refs/heads/{}", self.branch),
        }
    }

    /// Fetches (remote only) and returns the commit the tracked branch points at.
    pub fn refresh(&mut self) -> Result<Oid, SourceError> {
        if let Some(remote) = &self.remote {
            fetch(&self.repo, remote, &self.display, &self.branch)?;
        }
        let not_found = || SourceError::BranchNotFound {
            repo: self.display.clone(),
            branch: self.branch.clone(),
        };
        let reference = self.repo.find_reference(&self.tracked_ref()).map_err(|e| {
            if e.code() == git2::ErrorCode::NotFound {
                not_found()
            } else {
                SourceError::Open {
                    repo: self.display.clone(),
                    source: e,
                }
            }
        })?;
        let commit = reference
            .peel_to_commit()
            .map_err(|source| SourceError::Read {
                repo: self.display.clone(),
                commit: self.tracked_ref(),
                what: "the branch head commit".into(),
                source,
            })?;
        Ok(commit.id())
    }

    /// Deletes the cache clone and starts an empty one (remote only; a no-op for local repos).
    pub fn recreate_cache(&mut self) -> Result<(), SourceError> {
        let Some(remote) = &self.remote else {
            return Ok(());
        };
        warn!(repo = %self.display, dir = %remote.dir.display(), "git cache is corrupt: deleting it and cloning again");
        remove_dir(&remote.dir)?;
        self.repo = open_or_init_cache(&remote.dir, &self.display)?;
        Ok(())
    }
}

/// One directory per repository URL (credentials excluded from the hash and the name).
fn cache_dir_name(display_url: &str) -> String {
    let digest = Sha256::digest(display_url.as_bytes());
    let hex: String = digest.iter().take(10).map(|b| format!("{b:02x}")).collect();
    format!("repo-{hex}")
}

fn remove_dir(dir: &Path) -> Result<(), SourceError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(SourceError::Cache {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

fn open_or_init_cache(dir: &Path, shown: &str) -> Result<Repository, SourceError> {
    if dir.exists() {
        match Repository::open_bare(dir) {
            Ok(repo) => return Ok(repo),
            Err(e) => {
                warn!(repo = shown, dir = %dir.display(), error = %e, "git cache cannot be opened: deleting it and cloning again");
                remove_dir(dir)?;
            }
        }
    }
    std::fs::create_dir_all(dir).map_err(|source| SourceError::Cache {
        path: dir.to_path_buf(),
        source,
    })?;
    Repository::init_bare(dir).map_err(|source| SourceError::Open {
        repo: shown.to_string(),
        source,
    })
}

/// Why a fetch was refused by our own callbacks (kept outside libgit2's error to classify it).
#[derive(Default)]
struct CallbackVerdict {
    credential_attempts: Cell<u32>,
    auth_refused: RefCell<Option<String>>,
    host_rejected: RefCell<Option<(String, String)>>,
}

fn fetch(
    repo: &Repository,
    remote: &RemoteCache,
    display: &str,
    branch: &str,
) -> Result<(), SourceError> {
    let fetch_error = |source| SourceError::Fetch {
        url: display.to_string(),
        branch: branch.to_string(),
        source,
    };
    timeouts::apply_once(remote.timeouts);
    let verdict = CallbackVerdict::default();
    let started = Instant::now();
    let mut callbacks = RemoteCallbacks::new();
    callbacks.credentials(|_url, username_from_url, allowed| {
        credentials(&remote.auth, username_from_url, allowed, &verdict)
    });
    callbacks.certificate_check(|cert, host| check_host(&remote.auth, cert, host, &verdict));
    // Returning false aborts a transfer that has run past the deadline.
    callbacks.transfer_progress(|_| started.elapsed() < FETCH_DEADLINE);
    let mut options = FetchOptions::new();
    options.remote_callbacks(callbacks);
    options.download_tags(AutotagOption::None);
    let refspec = format!("+refs/heads/{branch}:refs/tollgate/heads/{branch}");
    let mut git_remote = repo.remote_anonymous(&remote.url).map_err(fetch_error)?;
    let fetched = git_remote.fetch(&[refspec.as_str()], Some(&mut options), None);
    if let Err(source) = fetched {
        return Err(refusal(&source, &verdict, display).unwrap_or_else(|| fetch_error(source)));
    }
    // A deleted upstream branch leaves our private ref in place; the advertisement tells.
    let advertised = git_remote
        .list()
        .map_err(fetch_error)?
        .iter()
        .any(|head| head.name() == format!("refs/heads/{branch}"));
    if !advertised {
        return Err(SourceError::BranchNotFound {
            repo: display.to_string(),
            branch: branch.to_string(),
        });
    }
    let shown = display;
    debug!(
        repo = shown,
        branch,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "fetched"
    );
    Ok(())
}

/// An ssh server's host key must be in known_hosts; TLS keeps libgit2's own validation.
fn check_host(
    auth: &Auth,
    cert: &git2::cert::Cert<'_>,
    host: &str,
    verdict: &CallbackVerdict,
) -> Result<CertificateCheckStatus, git2::Error> {
    let Some(hostkey) = cert.as_hostkey() else {
        return Ok(CertificateCheckStatus::CertificatePassthrough);
    };
    let result = match (auth, hostkey.hostkey()) {
        (Auth::SshKey { known_hosts, .. }, Some(key)) => std::fs::read_to_string(known_hosts)
            .map_err(|e| format!("cannot read known_hosts {}: {e}", known_hosts.display()))
            .and_then(|text| verify_host_key(&text, host, key)),
        (Auth::SshKey { .. }, None) => Err("the server sent no host key".to_string()),
        _ => Err("ssh needs a known_hosts file (use ssh key authentication)".to_string()),
    };
    match result {
        Ok(()) => Ok(CertificateCheckStatus::CertificateOk),
        Err(reason) => {
            let error = git2::Error::from_str(&reason);
            verdict
                .host_rejected
                .replace(Some((host.to_string(), reason)));
            Err(error)
        }
    }
}

/// A failed fetch refused by the host check or by authentication, as its own error.
fn refusal(source: &git2::Error, verdict: &CallbackVerdict, display: &str) -> Option<SourceError> {
    if let Some((host, reason)) = verdict.host_rejected.take() {
        return Some(SourceError::UntrustedHost {
            url: display.to_string(),
            host,
            reason,
        });
    }
    let reason = match verdict.auth_refused.take() {
        Some(reason) => reason,
        None if source.code() == git2::ErrorCode::Auth => source.message().to_string(),
        None => return None,
    };
    Some(SourceError::Auth {
        url: display.to_string(),
        reason,
    })
}

fn credentials(
    auth: &Auth,
    username_from_url: Option<&str>,
    allowed: CredentialType,
    verdict: &CallbackVerdict,
) -> Result<Cred, git2::Error> {
    let refuse = |reason: String| {
        let error = git2::Error::from_str(&reason);
        verdict.auth_refused.replace(Some(reason));
        Err(error)
    };
    if allowed.contains(CredentialType::USERNAME) {
        return Cred::username(username_from_url.unwrap_or("git"));
    }
    // libgit2 asks again after the server rejects what we sent; asking twice means rejection.
    let attempts = verdict.credential_attempts.get() + 1;
    verdict.credential_attempts.set(attempts);
    if attempts > 1 {
        return refuse("the server rejected the configured credentials".into());
    }
    match auth {
        Auth::None => refuse("the server requires credentials and none are configured".into()),
        Auth::Token { token } if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) => {
            Cred::userpass_plaintext("x-access-token", token.expose())
        }
        Auth::Basic { username, password }
            if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) =>
        {
            Cred::userpass_plaintext(username, password.expose())
        }
        Auth::SshKey { key_file, .. } if allowed.contains(CredentialType::SSH_KEY) => {
            Cred::ssh_key(username_from_url.unwrap_or("git"), None, key_file, None)
        }
        _ => refuse(format!(
            "the server asks for {allowed:?} credentials, which the configured authentication does not provide"
        )),
    }
}

/// The branch checked out in the local repository at `repo_path`, if any (for CLI defaults).
pub fn current_branch(repo_path: &Path) -> Option<String> {
    let repo = Repository::open(repo_path).ok()?;
    let head = repo.find_reference("HEAD").ok()?;
    // Read HEAD symbolically so that an unborn branch (no commit yet) still has a name.
    let target = head.symbolic_target().ok().flatten()?;
    target.strip_prefix("refs/heads/").map(str::to_string)
}

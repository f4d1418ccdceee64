//! Remote repositories: fetch over file:// and over a real smart-HTTP server with basic auth,
//! authentication failures, unreachable remotes, corrupt caches.

use crate::common;
use crate::git_http_server;

use std::path::Path;

use common::{Manifest, TestRepo, git_in};
use git_http_server::GitHttpServer;
use tollgate_source::{Auth, Change, GitSource, Secret, SourceConfig, SourceError};

/// A working repository plus a bare "remote" it pushes to.
struct Upstream {
    work: TestRepo,
    bare_root: tempfile::TempDir,
}

impl Upstream {
    fn new() -> Self {
        let work = TestRepo::with_fixed_identity();
        work.write("app.yaml", &Manifest::new("app", "1.0.0").yaml());
        work.commit("v1");
        let bare_root = tempfile::tempdir().expect("tempdir");
        git_in(
            bare_root.path(),
            &[
                "clone",
                "-q",
                "--bare",
                &work.path().display().to_string(),
                "app.git",
            ],
        );
        work.git(&[
            "remote",
            "add",
            "origin",
            &bare_root.path().join("app.git").display().to_string(),
        ]);
        Upstream { work, bare_root }
    }

    fn bare(&self) -> std::path::PathBuf {
        self.bare_root.path().join("app.git")
    }

    fn file_url(&self) -> String {
        format!("file://{}", self.bare().display())
    }

    fn push_version(&self, version: &str) -> String {
        self.work
            .write("app.yaml", &Manifest::new("app", version).yaml());
        let sha = self.work.commit(&format!("app {version}"));
        self.work.git(&["push", "-q", "--force", "origin", "main"]);
        sha
    }
}

fn remote_config(url: &str, cache: &Path, auth: Auth) -> SourceConfig {
    let mut config = SourceConfig::new(url, "main", "", cache);
    config.auth = auth;
    config
}

fn cache_repo_dirs(cache: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(cache)
        .expect("cache dir")
        .map(|e| e.expect("entry").path())
        .collect()
}

#[test]
fn fetch_over_file_url_follows_pushes_and_force_pushes() {
    let upstream = Upstream::new();
    let cache = tempfile::tempdir().expect("cache");
    let mut source = GitSource::open(remote_config(
        &upstream.file_url(),
        cache.path(),
        Auth::None,
    ))
    .expect("open");
    let report = source.sync().expect("first fetch");
    assert_eq!(report.changes.get("app"), Some(&Change::Added));
    assert_eq!(
        cache_repo_dirs(cache.path()).len(),
        1,
        "one bare cache clone per URL"
    );

    let v2 = upstream.push_version("2.0.0");
    let report = source.sync().expect("fetch v2");
    assert!(report.head_moved && !report.rebuilt);
    assert_eq!(source.history("app")[1].commit.sha, v2);
    assert!(!source.sync().expect("idle").head_moved);

    // Force-push a rewrite of the last commit with identical content.
    upstream
        .work
        .git(&["commit", "-q", "--amend", "-m", "app 2.0.0 (reworded)"]);
    upstream
        .work
        .git(&["push", "-q", "--force", "origin", "main"]);
    let report = source.sync().expect("fetch rewrite");
    assert!(report.rebuilt);
    assert_eq!(report.changes.get("app"), Some(&Change::Unchanged));
    assert_eq!(source.history("app")[1].index, 2);
    assert_eq!(
        source.history("app")[1].commit.subject,
        "app 2.0.0 (reworded)"
    );

    // A second source over the same cache directory reuses the clone.
    let mut again = GitSource::open(remote_config(
        &upstream.file_url(),
        cache.path(),
        Auth::None,
    ))
    .expect("reopen");
    again.sync().expect("sync from existing cache");
    assert_eq!(again.history("app"), source.history("app"));
}

#[test]
fn missing_remote_branch_is_reported() {
    let upstream = Upstream::new();
    let cache = tempfile::tempdir().expect("cache");
    let mut config = remote_config(&upstream.file_url(), cache.path(), Auth::None);
    config.branch = "release".into();
    let mut source = GitSource::open(config).expect("open");
    let error = source.sync().expect_err("no release branch");
    assert!(
        matches!(error, SourceError::BranchNotFound { .. }),
        "{error}"
    );
}

#[test]
fn corrupt_cache_is_deleted_and_recloned() {
    let upstream = Upstream::new();
    let cache = tempfile::tempdir().expect("cache");
    let mut source = GitSource::open(remote_config(
        &upstream.file_url(),
        cache.path(),
        Auth::None,
    ))
    .expect("open");
    source.sync().expect("first fetch");

    // Damage the clone: truncate every pack and drop every loose object.
    let objects = cache_repo_dirs(cache.path())[0].join("objects");
    let mut damaged = 0;
    for entry in walk(&objects) {
        let name = entry
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        if name.ends_with(".pack") {
            let len = std::fs::metadata(&entry).expect("meta").len();
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&entry)
                .expect("open pack");
            file.set_len(len / 2).expect("truncate");
            damaged += 1;
        } else if entry
            .parent()
            .and_then(|p| p.file_name())
            .is_some_and(|d| d.len() == 2)
        {
            std::fs::remove_file(&entry).expect("remove loose object");
            damaged += 1;
        }
    }
    assert!(damaged > 0, "the cache held objects to damage");
    // A fetch heals missing objects by itself; a garbage ref it cannot: that forces the re-clone.
    let clone_dir = cache_repo_dirs(cache.path())[0].clone();
    std::fs::write(clone_dir.join("refs/tollgate/heads/main"), "not a sha\n").expect("corrupt ref");
    std::fs::write(clone_dir.join("marker"), "left by the test").expect("marker");

    let v2 = upstream.push_version("2.0.0");
    let report = source.sync().expect("sync recovers by re-cloning");
    assert!(report.head_moved);
    let history = source.history("app");
    assert_eq!(history.len(), 2);
    assert_eq!(history[1].commit.sha, v2);
    assert!(
        !clone_dir.join("marker").exists(),
        "the damaged clone was deleted"
    );

    // A cache directory that is not a repository at all is replaced too.
    let dir = cache_repo_dirs(cache.path())[0].clone();
    std::fs::remove_dir_all(&dir).expect("rm");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("HEAD"), "garbage").expect("write");
    let mut reopened = GitSource::open(remote_config(
        &upstream.file_url(),
        cache.path(),
        Auth::None,
    ))
    .expect("reopen over garbage");
    reopened.sync().expect("sync");
    assert_eq!(reopened.history("app").len(), 2);
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn http_fetch_with_basic_auth_success_and_failure() {
    let upstream = Upstream::new();
    let server = GitHttpServer::start(
        upstream.bare_root.path().to_path_buf(),
        "alice",
        "s3cret-pw",
    );
    let url = format!("{}/app.git", server.base_url);
    let cache = tempfile::tempdir().expect("cache");

    // Wrong password: an Auth error that does not leak the password.
    let wrong = Auth::Basic {
        username: "alice".into(),
        password: Secret::new("wrong-pw"),
    };
    let mut source = GitSource::open(remote_config(&url, cache.path(), wrong)).expect("open");
    let error = source.sync().expect_err("wrong password");
    assert!(matches!(error, SourceError::Auth { .. }), "{error:?}");
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains("wrong-pw"), "{shown}");
    assert!(source.head().is_none());
    assert_eq!(
        source.retry_after(),
        Some(std::time::Duration::from_secs(1))
    );

    // No credentials at all.
    let mut anonymous =
        GitSource::open(remote_config(&url, cache.path(), Auth::None)).expect("open");
    assert!(matches!(anonymous.sync(), Err(SourceError::Auth { .. })));

    // Right password.
    let right = Auth::Basic {
        username: "alice".into(),
        password: Secret::new("s3cret-pw"),
    };
    let mut source = GitSource::open(remote_config(&url, cache.path(), right)).expect("open");
    source.sync().expect("authenticated fetch");
    assert_eq!(source.history("app").len(), 1);
    let v2 = upstream.push_version("2.0.0");
    source.sync().expect("fetch v2 over http");
    assert_eq!(source.history("app")[1].commit.sha, v2);
    assert_eq!(source.retry_after(), None);
}

#[test]
fn http_auth_failure_keeps_the_last_state() {
    let upstream = Upstream::new();
    let server = GitHttpServer::start(
        upstream.bare_root.path().to_path_buf(),
        "x-access-token",
        "tok-123",
    );
    let url = format!("{}/app.git", server.base_url);
    let cache = tempfile::tempdir().expect("cache");
    let token_file = cache.path().join("token");
    std::fs::write(&token_file, "tok-123\n").expect("write token");
    let token = Secret::from_file(&token_file).expect("token");
    let mut source =
        GitSource::open(remote_config(&url, cache.path(), Auth::Token { token })).expect("open");
    source.sync().expect("token fetch");
    let before = source.history("app").to_vec();

    // The token is revoked (the server now wants another): state is kept, backoff grows.
    drop(server);
    let rotated = GitHttpServer::start(
        upstream.bare_root.path().to_path_buf(),
        "x-access-token",
        "tok-456",
    );
    let moved_url = format!("{}/app.git", rotated.base_url);
    upstream.push_version("2.0.0");
    let mut config = remote_config(
        &moved_url,
        cache.path(),
        Auth::Token {
            token: Secret::new("tok-123"),
        },
    );
    config.cache_dir = cache.path().to_path_buf();
    let mut stale = GitSource::open(config).expect("open");
    assert!(matches!(stale.sync(), Err(SourceError::Auth { .. })));

    // The original source, pointed at a dead server: a fetch error, index intact.
    let error = source.sync().expect_err("server gone");
    assert!(matches!(error, SourceError::Fetch { .. }), "{error:?}");
    assert_eq!(source.history("app"), before.as_slice());
    assert!(matches!(
        source.promotion("app"),
        Some(tollgate_source::PromotionView::Valid { .. })
    ));
    assert_eq!(
        source.retry_after(),
        Some(std::time::Duration::from_secs(1))
    );
    assert!(error.to_string().contains("127.0.0.1"));
}

#[test]
fn credentials_in_urls_never_reach_errors() {
    let cache = tempfile::tempdir().expect("cache");
    let mut source = GitSource::open(remote_config(
        "http://bob:hunter2@127.0.0.1:1/nothing.git",
        cache.path(),
        Auth::None,
    ))
    .expect("open");
    let error = source.sync().expect_err("nothing listens on port 1");
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("http://127.0.0.1:1/nothing.git"), "{shown}");
}

//! The web view's flags shared by `run --ui` and `tollgate ui`: the access token and the git
//! host pull requests are opened on.

use std::path::PathBuf;

use anyhow::Context as _;
use tollgate_source::Secret;

use crate::web::git_view::RepoTarget;
use crate::web::pull_request::{GitHost, PullRequests};
use crate::web::source::PromotionSource;
use crate::web::{self, AllowedHost, WebConfig};

#[derive(clap::Args, Debug, Clone)]
pub struct UiArgs {
    /// File holding a token every web view request must carry (`Authorization: Bearer …`, or the
    /// cookie its sign-in form sets). Without one, anyone who reaches the port sees the pages.
    #[arg(long, env = "TOLLGATE_UI_TOKEN_FILE")]
    pub ui_token_file: Option<PathBuf>,
    /// Open a pull request for each commit the web view makes, on this git host.
    #[arg(long, env = "TOLLGATE_UI_GIT_HOST", value_enum, requires_all = ["ui_git_token_file", "ui_git_repository"])]
    pub ui_git_host: Option<GitHost>,
    /// File holding the git host's API token (GitHub, Gitea: a token with pull-request write
    /// access; GitLab: a token with the `api` scope).
    #[arg(long, env = "TOLLGATE_UI_GIT_TOKEN_FILE")]
    pub ui_git_token_file: Option<PathBuf>,
    /// The repository on the git host: `owner/name` (GitLab: the project's full path).
    #[arg(long, env = "TOLLGATE_UI_GIT_REPOSITORY")]
    pub ui_git_repository: Option<String>,
    /// The git host's API base URL (default: https://api.github.com, https://gitlab.com; Gitea:
    /// required, e.g. https://gitea.example).
    #[arg(long, env = "TOLLGATE_UI_GIT_API_URL")]
    pub ui_git_api_url: Option<String>,
    /// The remote the web view pushes a new branch to before opening its pull request.
    #[arg(long, env = "TOLLGATE_UI_GIT_REMOTE", default_value = "origin")]
    pub ui_git_remote: String,
    /// A name (NAME, any port; or NAME:PORT) requests may give as Host besides the address they
    /// reached: the public name a proxy or ingress serves the web view under. Repeatable; other
    /// names are refused (a rebound DNS name must not reach the pages).
    #[arg(
        long = "ui-allowed-host",
        env = "TOLLGATE_UI_ALLOWED_HOSTS",
        value_name = "NAME[:PORT]",
        value_delimiter = ','
    )]
    pub ui_allowed_hosts: Vec<AllowedHost>,
}

impl UiArgs {
    /// The web view's configuration over `source`, committing in `repo` when given.
    pub fn web_config(
        &self,
        source: PromotionSource,
        repo: Option<RepoTarget>,
    ) -> anyhow::Result<WebConfig> {
        let token = match &self.ui_token_file {
            None => None,
            Some(path) => Some(
                Secret::from_file(path)
                    .with_context(|| format!("reading --ui-token-file {}", path.display()))?,
            ),
        };
        if token.as_ref().is_some_and(|t| t.expose().trim().is_empty()) {
            anyhow::bail!("--ui-token-file is empty: an empty token would let anyone in");
        }
        Ok(WebConfig {
            source,
            pull_requests: self.pull_requests(repo.is_some())?,
            repo,
            token,
            allowed_hosts: self.ui_allowed_hosts.clone(),
        })
    }

    fn pull_requests(&self, has_repo: bool) -> anyhow::Result<Option<PullRequests>> {
        let Some(host) = self.ui_git_host else {
            return Ok(None);
        };
        if !has_repo {
            anyhow::bail!("--ui-git-host needs a repository to commit in (--repo / --ui-repo)");
        }
        let api_url = match (&self.ui_git_api_url, host) {
            (Some(url), _) => url.clone(),
            (None, GitHost::Github) => "https://api.github.com".to_string(),
            (None, GitHost::Gitlab) => "https://gitlab.com".to_string(),
            (None, GitHost::Gitea) => anyhow::bail!("--ui-git-host gitea needs --ui-git-api-url"),
        };
        Ok(Some(PullRequests {
            host,
            api_url,
            repository: self.ui_git_repository.clone().unwrap_or_default(),
            token_file: self.ui_git_token_file.clone().unwrap_or_default(),
            remote: self.ui_git_remote.clone(),
        }))
    }
}

/// The routes under `/ui`.
pub fn router(config: WebConfig) -> axum::Router {
    web::router(config)
}

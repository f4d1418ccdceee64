//! Opening a pull (merge) request for a branch the web view committed: push the branch, then one
//! call to the git host's create-PR endpoint. The token is read from its file at each use and is
//! never logged, shown or put in an error.

use std::path::Path;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};
use tollgate_source::Secret;

use crate::outbound::https::https_client;

/// The git hosts whose create-PR API the web view speaks.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum GitHost {
    Github,
    Gitlab,
    Gitea,
}

/// Where and how to open pull requests.
#[derive(Clone, Debug)]
pub struct PullRequests {
    pub host: GitHost,
    /// The API's base URL (`https://api.github.com`, `https://gitlab.com`, `https://gitea.example`).
    pub api_url: String,
    /// `owner/name` (GitLab: the project's full path).
    pub repository: String,
    pub token_file: std::path::PathBuf,
    /// The remote the branch is pushed to first.
    pub remote: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PullRequestError {
    #[error("cannot read the git host token file {path}: {message}")]
    Token { path: String, message: String },
    #[error("git push {remote} {branch} failed: {message}")]
    Push {
        remote: String,
        branch: String,
        message: String,
    },
    #[error("the git host's create-PR request failed: {0}")]
    Request(String),
    #[error("the git host answered {status} to the create-PR request: {message}")]
    Refused { status: u16, message: String },
}

/// The request for `host`: (path under the API URL, auth header, JSON body).
fn request_for(
    config: &PullRequests,
    token: &Secret,
    change: &Change<'_>,
) -> (String, (&'static str, String), Value) {
    let repo = &config.repository;
    match config.host {
        GitHost::Github => (
            format!("/repos/{repo}/pulls"),
            ("Authorization", format!("Bearer {}", token.expose())),
            json!({"title": change.title, "head": change.branch, "base": change.base, "body": change.body}),
        ),
        GitHost::Gitea => (
            format!("/api/v1/repos/{repo}/pulls"),
            ("Authorization", format!("token {}", token.expose())),
            json!({"title": change.title, "head": change.branch, "base": change.base, "body": change.body}),
        ),
        GitHost::Gitlab => (
            format!(
                "/api/v4/projects/{}/merge_requests",
                form_urlencoded::byte_serialize(repo.as_bytes()).collect::<String>()
            ),
            ("PRIVATE-TOKEN", token.expose().to_string()),
            json!({"title": change.title, "source_branch": change.branch, "target_branch": change.base, "description": change.body}),
        ),
    }
}

/// The pull request to open.
pub struct Change<'a> {
    pub branch: &'a str,
    pub base: &'a str,
    pub title: &'a str,
    pub body: &'a str,
}

/// Pushes `change.branch` from `repo` and opens the pull request; returns its web address.
pub async fn open(
    config: &PullRequests,
    repo: &Path,
    change: &Change<'_>,
) -> Result<String, PullRequestError> {
    let token = Secret::from_file(&config.token_file).map_err(|e| PullRequestError::Token {
        path: config.token_file.display().to_string(),
        message: e.to_string(),
    })?;
    push(repo, &config.remote, change.branch).await?;
    let (path, (header, value), body) = request_for(config, &token, change);
    let url = format!("{}{path}", config.api_url.trim_end_matches('/'));
    let client = https_client().map_err(|e| PullRequestError::Request(e.to_string()))?;
    let request = hyper::Request::post(url.as_str())
        .header("Content-Type", "application/json")
        .header("Accept", "application/json")
        .header(
            "User-Agent",
            concat!("tollgate/", env!("CARGO_PKG_VERSION")),
        )
        .header(header, value)
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|_| PullRequestError::Request("the API URL is not valid".to_string()))?;
    let exchange = async {
        let response = client.request(request).await?;
        let status = response.status();
        let bytes = response.into_body().collect().await?.to_bytes();
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>((status, bytes))
    };
    let (status, bytes) = tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .map_err(|_| PullRequestError::Request("no answer within 30s".to_string()))?
        .map_err(|_| PullRequestError::Request("the connection failed".to_string()))?;
    let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if !status.is_success() {
        let message = answer
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("no message")
            .replace(token.expose(), "<redacted>");
        return Err(PullRequestError::Refused {
            status: status.as_u16(),
            message,
        });
    }
    answer
        .get("html_url")
        .or_else(|| answer.get("web_url"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| {
            PullRequestError::Request("the answer has no html_url or web_url".to_string())
        })
}

async fn push(repo: &Path, remote: &str, branch: &str) -> Result<(), PullRequestError> {
    let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
    let output = tokio::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["push", "--quiet", remote, &refspec])
        .output()
        .await
        .map_err(|e| PullRequestError::Push {
            remote: remote.to_string(),
            branch: branch.to_string(),
            message: e.to_string(),
        })?;
    if output.status.success() {
        return Ok(());
    }
    Err(PullRequestError::Push {
        remote: remote.to_string(),
        branch: branch.to_string(),
        message: tollgate_source::redact_url(String::from_utf8_lossy(&output.stderr).trim()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(host: GitHost, repository: &str) -> PullRequests {
        PullRequests {
            host,
            api_url: "https://git.example".to_string(),
            repository: repository.to_string(),
            token_file: std::path::PathBuf::new(),
            remote: "origin".to_string(),
        }
    }

    #[test]
    fn each_host_gets_its_own_endpoint_auth_header_and_fields() {
        let token = Secret::new("tok");
        let change = Change {
            branch: "tollgate/pause-web",
            base: "main",
            title: "Pause web",
            body: "b",
        };
        let (path, auth, body) =
            request_for(&config(GitHost::Github, "acme/fleet"), &token, &change);
        assert_eq!(path, "/repos/acme/fleet/pulls");
        assert_eq!(auth, ("Authorization", "Bearer tok".to_string()));
        assert_eq!(
            (body["head"].as_str(), body["base"].as_str()),
            (Some("tollgate/pause-web"), Some("main"))
        );
        let (path, auth, _) = request_for(&config(GitHost::Gitea, "acme/fleet"), &token, &change);
        assert_eq!(path, "/api/v1/repos/acme/fleet/pulls");
        assert_eq!(auth, ("Authorization", "token tok".to_string()));
        let (path, auth, body) = request_for(
            &config(GitHost::Gitlab, "acme/infra/fleet"),
            &token,
            &change,
        );
        assert_eq!(path, "/api/v4/projects/acme%2Finfra%2Ffleet/merge_requests");
        assert_eq!(auth, ("PRIVATE-TOKEN", "tok".to_string()));
        assert_eq!(body["source_branch"], "tollgate/pause-web");
        assert_eq!(body["target_branch"], "main");
    }
}

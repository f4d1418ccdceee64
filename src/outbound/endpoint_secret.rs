//! Reading an endpoint's `addressSecretFile`.
//!
//! Format (docs/notifications.md#secret-file): the first non-empty line is the URL; the second, when the
//! type needs one, is the credential: the API token for `github`/`gitlab`/`gitea`, the HMAC
//! secret for `webhook`; `slack` needs only the URL (the incoming-webhook URL is the secret).
//! Lines starting with `#` are comments. For the commit-status APIs the URL is the repository's
//! (project's) API URL, to which tollgate appends `/statuses/<sha>`:
//! `https://api.github.com/repos/OWNER/REPO`, `https://gitlab.example.com/api/v4/projects/42`,
//! `https://gitea.example.com/api/v1/repos/OWNER/REPO`.
//!
//! The file is read at each delivery, so a rotated secret is used without a restart. No error
//! here ever carries the file's content: only its path and what is wrong with it.

use std::path::Path;

use tollgate_model::policy::NotifyType;

/// What an endpoint's secret file holds. `Debug` is redacted: this must never reach a log.
#[derive(Clone, PartialEq, Eq)]
pub struct EndpointSecret {
    pub url: String,
    /// The token (commit-status APIs) or HMAC secret (`webhook`).
    pub credential: Option<String>,
}

impl std::fmt::Debug for EndpointSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EndpointSecret(<redacted>)")
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SecretError {
    #[error("cannot read addressSecretFile {path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("addressSecretFile {path} is empty: its first line must be the endpoint's URL")]
    Empty { path: String },
    #[error("addressSecretFile {path}: the first line is not an http:// or https:// URL")]
    NotAUrl { path: String },
    #[error("addressSecretFile {path}: a {kind} endpoint needs a second line with its {what}")]
    MissingCredential {
        path: String,
        kind: &'static str,
        what: &'static str,
    },
}

/// Reads and checks the secret file of an endpoint of type `kind`.
pub fn read_secret(path: &str, kind: NotifyType) -> Result<EndpointSecret, SecretError> {
    let text = std::fs::read_to_string(Path::new(path)).map_err(|e| SecretError::Unreadable {
        path: path.to_string(),
        // The io error's kind only: its Display is fine too, but stay terse and content-free.
        reason: e.kind().to_string(),
    })?;
    parse_secret(path, &text, kind)
}

fn parse_secret(path: &str, text: &str, kind: NotifyType) -> Result<EndpointSecret, SecretError> {
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    let url = lines.next().ok_or_else(|| SecretError::Empty {
        path: path.to_string(),
    })?;
    if !(url.starts_with("https://") || url.starts_with("http://"))
        || url.contains(char::is_whitespace)
    {
        return Err(SecretError::NotAUrl {
            path: path.to_string(),
        });
    }
    let credential = lines.next().map(str::to_string);
    let needed = match kind {
        NotifyType::Slack => None,
        NotifyType::Webhook => Some("HMAC secret"),
        NotifyType::Github | NotifyType::Gitlab | NotifyType::Gitea => Some("API token"),
    };
    if let Some(what) = needed
        && credential.is_none()
    {
        return Err(SecretError::MissingCredential {
            path: path.to_string(),
            kind: kind.as_str(),
            what,
        });
    }
    Ok(EndpointSecret {
        url: url.trim_end_matches('/').to_string(),
        credential,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_then_credential_comments_and_blank_lines_ignored() {
        let secret = parse_secret(
            "f",
            "# the repo\n\nhttps://api.github.com/repos/o/r/\nghp_s3cret\n",
            NotifyType::Github,
        )
        .expect("valid");
        assert_eq!(secret.url, "https://api.github.com/repos/o/r");
        assert_eq!(secret.credential.as_deref(), Some("ghp_s3cret"));
        assert_eq!(format!("{secret:?}"), "EndpointSecret(<redacted>)");
    }

    #[test]
    fn errors_never_carry_the_content() {
        let cases = [
            ("", NotifyType::Slack),
            ("hooks.slack.com/T0/s3cret-path", NotifyType::Slack),
            ("https://x.example/s3cret-path", NotifyType::Webhook),
            ("https://x.example/s3cret-path", NotifyType::Gitea),
        ];
        for (text, kind) in cases {
            let error = parse_secret("/run/secret", text, kind).expect_err(text);
            assert!(!error.to_string().contains("s3cret"), "{error}");
            assert!(error.to_string().contains("/run/secret"), "{error}");
        }
        let missing = read_secret("/nonexistent/tollgate-secret", NotifyType::Slack);
        assert!(matches!(missing, Err(SecretError::Unreadable { .. })));
    }
}

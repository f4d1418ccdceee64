//! The request each endpoint type gets for a notice: URL, headers and body, as each provider
//! documents them. Pure: no I/O, so every format is unit-tested.
//!
//! Checked against (docs corpus of the `search` tool, 2026-11):
//! - Slack incoming webhooks: `POST <webhook URL>`, `Content-type: application/json`, body
//!   `{"text": …}` (docs.slack.dev, "Incoming webhooks").
//! - GitHub "Create a commit status": `POST /repos/{owner}/{repo}/statuses/{sha}`, body `state`
//!   (error | failure | pending | success), `target_url`, `description`, `context`
//!   (GitHub's OpenAPI description as published in `openapi-github`, ReposCreateCommitStatusRequest).
//!   GitHub rejects requests without a `User-Agent`; the description is kept to 140 characters.
//! - GitLab "Set the pipeline status of a commit": `POST /projects/:id/statuses/:sha`, header
//!   `PRIVATE-TOKEN`, `state` (pending | running | success | failed | canceled), `name` (the
//!   context), `target_url`, `description`.
//! - Gitea `POST /repos/{owner}/{repo}/statuses/{sha}`, `Authorization: token …`,
//!   CreateStatusOption `state` (pending | success | error | failure | warning), `target_url`,
//!   `description`, `context` (Gitea's swagger as published in `gitea-rs`).

use serde_json::{Value, json};
use tollgate_engine::Notice;
use tollgate_model::policy::{NotifyEvent, NotifyType};
use tollgate_model::snapshot::short_sha;

use crate::outbound::endpoint_secret::EndpointSecret;
use crate::outbound::signature::hmac_sha256_hex;

/// The header carrying the generic webhook's signature (`sha256=<hex hmac of the body>`), the
/// same scheme the inbound generic webhook verifies.
pub const SIGNATURE_HEADER: &str = "X-Tollgate-Signature";

/// GitHub's limit on a status description.
const DESCRIPTION_CHARS: usize = 140;

/// One HTTP request to send (always a POST of JSON).
#[derive(Clone, PartialEq, Eq)]
pub struct Outgoing {
    pub url: String,
    /// Headers besides `Content-Type: application/json`. Some carry credentials: never logged.
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// What the notice is about, beyond the engine's view: from git.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Context {
    /// Author of the snapshot's commit.
    pub author: Option<String>,
    /// The endpoint's `targetURL`.
    pub target_url: Option<String>,
}

/// The request for `notice`, or `None` when the type has nothing to say about it: commit
/// statuses are per stage, so `Completed` (the last stage's `StageCompleted` already said it) and
/// a notice without a commit post nothing.
pub fn request(
    kind: NotifyType,
    secret: &EndpointSecret,
    notice: &Notice,
    context: &Context,
) -> Option<Outgoing> {
    match kind {
        NotifyType::Slack => Some(json_post(&secret.url, Vec::new(), &slack(notice))),
        NotifyType::Webhook => {
            let body = serde_json::to_vec(&generic(notice, context)).unwrap_or_default();
            let key = secret.credential.as_deref().unwrap_or_default();
            let signature = format!("sha256={}", hmac_sha256_hex(key.as_bytes(), &body));
            Some(Outgoing {
                url: secret.url.clone(),
                headers: vec![
                    (SIGNATURE_HEADER, signature),
                    ("X-Tollgate-Event", notice.kind.as_str().to_string()),
                    ("X-Tollgate-Delivery", notice.id.clone()),
                ],
                body,
            })
        }
        NotifyType::Github | NotifyType::Gitlab | NotifyType::Gitea => {
            commit_status(kind, secret, notice, context)
        }
    }
}

/// Whether an endpoint of type `kind` posts anything for `notice` (see [`request`]).
pub fn applies(kind: NotifyType, notice: &Notice) -> bool {
    !kind.is_commit_status()
        || (state(kind, notice.kind).is_some() && notice.snapshot_commit.is_some())
}

fn json_post(url: &str, headers: Vec<(&'static str, String)>, body: &Value) -> Outgoing {
    Outgoing {
        url: url.to_string(),
        headers,
        body: serde_json::to_vec(body).unwrap_or_default(),
    }
}

/// One line a person reads.
pub fn summary(notice: &Notice) -> String {
    let snapshot = match &notice.snapshot_commit {
        Some(sha) => format!("snapshot #{} ({})", notice.snapshot_index, short_sha(sha)),
        None => format!("snapshot #{}", notice.snapshot_index),
    };
    let what = match notice.kind {
        NotifyEvent::StageStarted => format!("stage {} started", notice.stage),
        NotifyEvent::StageCompleted => format!("stage {} completed", notice.stage),
        NotifyEvent::StageFailed => format!("stage {} failed", notice.stage),
        NotifyEvent::RolledBack => format!("rolled back after stage {} failed", notice.stage),
        NotifyEvent::ApprovalNeeded => format!("stage {} waits for an approval", notice.stage),
        NotifyEvent::Completed => "rollout completed".to_string(),
        NotifyEvent::WaveStarted | NotifyEvent::WaveCompleted => match &notice.reason {
            Some(wave) => format!("stage {}: {wave}", notice.stage),
            None => format!("stage {}: {}", notice.stage, notice.kind.as_str()),
        },
        NotifyEvent::BlackoutHeld => format!("stage {} held by a blackout", notice.stage),
        NotifyEvent::AnalysisFailed => format!("stage {}: an analysis failed", notice.stage),
        NotifyEvent::AnalysisInconclusive => {
            format!("stage {}: an analysis is inconclusive", notice.stage)
        }
        NotifyEvent::BranchRewound => "the branch was rewritten".to_string(),
    };
    let counts = &notice.counts;
    let mut line = format!(
        "{}: {what}, {snapshot}; clusters {}/{} provisioned",
        notice.promotion, counts.provisioned, counts.matching_clusters
    );
    if counts.failed > 0 {
        line.push_str(&format!(", {} failed", counts.failed));
    }
    if let Some(reason) = notice.reason.as_deref().filter(|_| {
        matches!(
            notice.kind,
            NotifyEvent::StageFailed
                | NotifyEvent::RolledBack
                | NotifyEvent::ApprovalNeeded
                | NotifyEvent::BlackoutHeld
                | NotifyEvent::AnalysisFailed
                | NotifyEvent::AnalysisInconclusive
                | NotifyEvent::BranchRewound
        )
    }) {
        line.push_str(&format!(" — {reason}"));
    }
    line
}

fn slack(notice: &Notice) -> Value {
    let icon = match notice.kind {
        NotifyEvent::StageStarted => ":arrow_forward:",
        NotifyEvent::StageCompleted | NotifyEvent::Completed => ":white_check_mark:",
        NotifyEvent::StageFailed | NotifyEvent::RolledBack => ":x:",
        NotifyEvent::ApprovalNeeded => ":raised_hand:",
        NotifyEvent::WaveStarted => ":arrow_forward:",
        NotifyEvent::WaveCompleted => ":ballot_box_with_check:",
        NotifyEvent::BlackoutHeld => ":no_entry:",
        NotifyEvent::AnalysisFailed => ":chart_with_downwards_trend:",
        NotifyEvent::AnalysisInconclusive => ":grey_question:",
        NotifyEvent::BranchRewound => ":warning:",
    };
    json!({"text": format!("{icon} {}", summary(notice))})
}

/// The generic webhook payload: `deploy/notification.schema.json` describes it.
pub fn generic(notice: &Notice, context: &Context) -> Value {
    let c = &notice.counts;
    let mut payload = json!({
        "id": notice.id,
        "event": notice.kind.as_str(),
        "promotion": notice.promotion,
        "stage": notice.stage,
        "snapshot": {
            "index": notice.snapshot_index,
            "commit": notice.snapshot_commit,
            "author": context.author,
        },
        "phase": notice.phase.as_str(),
        "reason": notice.reason,
        "clusters": {
            "matching": c.matching_clusters,
            "provisioned": c.provisioned,
            "failed": c.failed,
            "pending": c.pending,
            "provisioning": c.provisioning,
            "timedOut": c.timed_out,
        },
        "time": notice.time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "summary": summary(notice),
    });
    if let Some(url) = &context.target_url {
        payload["targetURL"] = json!(url);
    }
    payload
}

/// The provider's state for a notice (`None`: this notice posts no status).
fn state(kind: NotifyType, event: NotifyEvent) -> Option<&'static str> {
    let state = match (kind, event) {
        // The run's end is its last stage's success; a held stage has no status of its own yet
        // (a new run's first stage waits on a commit that has none).
        (_, NotifyEvent::Completed | NotifyEvent::BlackoutHeld | NotifyEvent::BranchRewound) => {
            return None;
        }
        (
            NotifyType::Gitlab,
            NotifyEvent::StageStarted | NotifyEvent::WaveStarted | NotifyEvent::WaveCompleted,
        ) => "running",
        (
            _,
            NotifyEvent::StageStarted
            | NotifyEvent::ApprovalNeeded
            | NotifyEvent::WaveStarted
            | NotifyEvent::WaveCompleted
            | NotifyEvent::AnalysisInconclusive,
        ) => "pending",
        (_, NotifyEvent::StageCompleted) => "success",
        (
            NotifyType::Gitlab,
            NotifyEvent::StageFailed | NotifyEvent::RolledBack | NotifyEvent::AnalysisFailed,
        ) => "failed",
        (_, NotifyEvent::StageFailed | NotifyEvent::AnalysisFailed) => "failure",
        (_, NotifyEvent::RolledBack) => "error",
    };
    Some(state)
}

fn commit_status(
    kind: NotifyType,
    secret: &EndpointSecret,
    notice: &Notice,
    context: &Context,
) -> Option<Outgoing> {
    let state = state(kind, notice.kind)?;
    let sha = notice.snapshot_commit.as_deref()?;
    let token = secret.credential.clone().unwrap_or_default();
    let label = format!("tollgate/{}", notice.stage);
    let description: String = summary(notice).chars().take(DESCRIPTION_CHARS).collect();
    let mut body = json!({"state": state, "description": description});
    match kind {
        NotifyType::Gitlab => body["name"] = json!(label),
        _ => body["context"] = json!(label),
    }
    if let Some(url) = &context.target_url {
        body["target_url"] = json!(url);
    }
    let headers = match kind {
        NotifyType::Github => vec![
            ("Authorization", format!("Bearer {token}")),
            ("Accept", "application/vnd.github+json".to_string()),
            ("X-GitHub-Api-Version", "2022-11-28".to_string()),
        ],
        NotifyType::Gitlab => vec![("PRIVATE-TOKEN", token)],
        _ => vec![("Authorization", format!("token {token}"))],
    };
    Some(json_post(
        &format!("{}/statuses/{sha}", secret.url),
        headers,
        &body,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn notice(kind: NotifyEvent) -> Notice {
        Notice {
            id: "abc".into(),
            kind,
            promotion: "demo".into(),
            stage: "prod".into(),
            snapshot_index: 2,
            snapshot_commit: Some("a".repeat(40)),
            author: None,
            phase: tollgate_engine::Phase::Progressing,
            reason: Some("budget spent".into()),
            counts: Default::default(),
            time: Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
        }
    }

    fn secret(credential: &str) -> EndpointSecret {
        EndpointSecret {
            url: "https://api.example/repos/o/r".into(),
            credential: Some(credential.into()),
        }
    }

    #[test]
    fn each_commit_status_api_gets_its_path_header_and_states() {
        let none = Context::default();
        let gh = request(
            NotifyType::Github,
            &secret("t"),
            &notice(NotifyEvent::StageFailed),
            &none,
        )
        .expect("posted");
        assert_eq!(
            gh.url,
            format!("https://api.example/repos/o/r/statuses/{}", "a".repeat(40))
        );
        assert!(gh.headers.contains(&("Authorization", "Bearer t".into())));
        let body: Value = serde_json::from_slice(&gh.body).unwrap();
        assert_eq!(body["state"], "failure");
        assert_eq!(body["context"], "tollgate/prod");
        let gl = request(
            NotifyType::Gitlab,
            &secret("t"),
            &notice(NotifyEvent::StageStarted),
            &none,
        )
        .expect("posted");
        assert!(gl.headers.contains(&("PRIVATE-TOKEN", "t".into())));
        let body: Value = serde_json::from_slice(&gl.body).unwrap();
        assert_eq!(
            (body["state"].as_str(), body["name"].as_str()),
            (Some("running"), Some("tollgate/prod"))
        );
        let gt = request(
            NotifyType::Gitea,
            &secret("t"),
            &notice(NotifyEvent::RolledBack),
            &none,
        )
        .expect("posted");
        assert!(gt.headers.contains(&("Authorization", "token t".into())));
        let body: Value = serde_json::from_slice(&gt.body).unwrap();
        assert_eq!(body["state"], "error");
        assert!(
            request(
                NotifyType::Gitea,
                &secret("t"),
                &notice(NotifyEvent::Completed),
                &none
            )
            .is_none()
        );
    }

    #[test]
    fn the_generic_webhook_is_signed_like_the_inbound_one() {
        let out = request(
            NotifyType::Webhook,
            &secret("k"),
            &notice(NotifyEvent::StageCompleted),
            &Context::default(),
        )
        .expect("posted");
        let (_, signature) = out
            .headers
            .iter()
            .find(|(h, _)| *h == SIGNATURE_HEADER)
            .unwrap();
        let hex = signature.strip_prefix("sha256=").expect("prefixed");
        assert!(crate::outbound::signature::hmac_sha256_matches(
            b"k", &out.body, hex
        ));
    }
}

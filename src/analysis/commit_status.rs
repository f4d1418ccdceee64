//! The `commitStatus` provider: the snapshot commit's checks on the git host, read from the
//! provider's commit status API with the address and token of `addressSecretFile` (as a notify
//! endpoint's): GitHub's combined status (`GET {api}/commits/{sha}/status`), GitLab's statuses
//! (`GET {api}/repository/commits/{sha}/statuses`), Gitea's combined status (`GET
//! {api}/commits/{sha}/status`).
//!
//! The result is `true` when every listed context (every context, when none is listed) is green
//! and `false` when one failed. A check still running, or a listed one not reported yet, is not
//! green yet: the measurement is inconclusive (the next one looks again) unless another failed.

use std::time::Duration;

use serde_json::Value;
use tollgate_model::analysis::{CommitStatusCheck, CommitStatusProvider};
use tollgate_model::policy::NotifyType;

use super::http;
use super::observation::{MeasureError, Observation, ResultValue};
use crate::outbound::endpoint_secret::read_secret;
use crate::outbound::https::HttpsClient;

/// How one context stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    Green,
    Pending,
    Failed,
}

pub async fn measure(
    client: &HttpsClient,
    check: &CommitStatusCheck,
    commit: Option<&str>,
    timeout: Duration,
) -> Result<Observation, MeasureError> {
    let Some(sha) = commit else {
        return Err(MeasureError::Config(
            "the snapshot's commit is not known".to_string(),
        ));
    };
    let kind = match check.provider {
        CommitStatusProvider::Github => NotifyType::Github,
        CommitStatusProvider::Gitlab => NotifyType::Gitlab,
        CommitStatusProvider::Gitea => NotifyType::Gitea,
    };
    let secret = read_secret(&check.address_secret_file, kind)
        .map_err(|e| MeasureError::Secret(e.to_string()))?;
    let token = secret.credential.clone().unwrap_or_default();
    let (url, headers) = match check.provider {
        CommitStatusProvider::Github => (
            format!("{}/commits/{sha}/status?per_page=100", secret.url),
            vec![
                ("Authorization".to_string(), format!("Bearer {token}")),
                (
                    "Accept".to_string(),
                    "application/vnd.github+json".to_string(),
                ),
                ("X-GitHub-Api-Version".to_string(), "2022-11-28".to_string()),
            ],
        ),
        CommitStatusProvider::Gitlab => (
            format!(
                "{}/repository/commits/{sha}/statuses?per_page=100",
                secret.url
            ),
            vec![("PRIVATE-TOKEN".to_string(), token)],
        ),
        CommitStatusProvider::Gitea => (
            format!("{}/commits/{sha}/status?limit=100", secret.url),
            vec![("Authorization".to_string(), format!("token {token}"))],
        ),
    };
    // The address is a secret: the error names the file it is in.
    let server = format!("the address in {}", check.address_secret_file);
    let answer = http::get(client, &url, &server, &headers, timeout).await?;
    if !(200..300).contains(&answer.status) {
        return Err(MeasureError::Status {
            status: answer.status,
            detail: None,
        });
    }
    let document: Value = serde_json::from_slice(&answer.body)
        .map_err(|e| MeasureError::Malformed(format!("the answer is not JSON: {e}")))?;
    let statuses = statuses(&document)?;
    Ok(judge(&statuses, &check.contexts))
}

/// (context, state) of each status, newest first as the APIs list them. GitHub and Gitea answer
/// `{statuses: [{context, state|status}]}`, GitLab a list of `{name, status}`.
fn statuses(document: &Value) -> Result<Vec<(String, String)>, MeasureError> {
    let list = match document {
        Value::Array(list) => list,
        Value::Object(_) => document["statuses"].as_array().ok_or_else(|| {
            MeasureError::Malformed("no statuses list in the combined status".to_string())
        })?,
        _ => {
            return Err(MeasureError::Malformed(
                "neither a list nor an object".into(),
            ));
        }
    };
    Ok(list
        .iter()
        .filter_map(|status| {
            let context = status
                .get("context")
                .or_else(|| status.get("name"))
                .and_then(Value::as_str)?;
            let state = status
                .get("state")
                .or_else(|| status.get("status"))
                .and_then(Value::as_str)?;
            Some((context.to_string(), state.to_ascii_lowercase()))
        })
        .collect())
}

fn classify(state: &str) -> Check {
    match state {
        // Gitea's `warning` is a finished check that passed with remarks.
        "success" | "warning" => Check::Green,
        "failure" | "error" | "failed" | "canceled" | "cancelled" | "skipped" => Check::Failed,
        _ => Check::Pending,
    }
}

/// The listed contexts (all reported ones when none is listed) as one verdict-ready observation.
fn judge(statuses: &[(String, String)], contexts: &[String]) -> Observation {
    let mut wanted: Vec<&str> = contexts.iter().map(String::as_str).collect();
    if wanted.is_empty() {
        for (context, _) in statuses {
            if !wanted.contains(&context.as_str()) {
                wanted.push(context);
            }
        }
    }
    if wanted.is_empty() {
        return Observation::NoData("the commit has no statuses".to_string());
    }
    let mut failed = Vec::new();
    let mut pending = Vec::new();
    for context in &wanted {
        // The newest status of the context (the APIs list newest first).
        match statuses.iter().find(|(c, _)| c == context) {
            None => pending.push(format!("{context} (not reported)")),
            Some((_, state)) => match classify(state) {
                Check::Green => {}
                Check::Pending => pending.push(format!("{context} ({state})")),
                Check::Failed => failed.push(format!("{context} ({state})")),
            },
        }
    }
    if !failed.is_empty() {
        return Observation::Value {
            result: ResultValue::Bool(false),
            shown: format!("false: {}", failed.join(", ")),
        };
    }
    if !pending.is_empty() {
        return Observation::Pending(format!("pending: {}", pending.join(", ")));
    }
    Observation::Value {
        result: ResultValue::Bool(true),
        shown: format!("true: {} green", wanted.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn github(statuses: &[(&str, &str)]) -> Value {
        let list: Vec<Value> = statuses
            .iter()
            .map(|(c, s)| json!({"context": c, "state": s}))
            .collect();
        json!({"state": "pending", "statuses": list})
    }

    fn judged(document: Value, contexts: &[&str]) -> Observation {
        let contexts: Vec<String> = contexts.iter().map(|c| c.to_string()).collect();
        judge(&statuses(&document).expect("statuses"), &contexts)
    }

    #[test]
    fn listed_contexts_green_is_true_one_failed_is_false_pending_is_not_green_yet() {
        let green = judged(github(&[("e2e", "success"), ("lint", "failure")]), &["e2e"]);
        assert!(matches!(
            green,
            Observation::Value {
                result: ResultValue::Bool(true),
                ..
            }
        ));
        let failed = judged(github(&[("e2e", "failure"), ("lint", "pending")]), &[]);
        assert_eq!(
            failed,
            Observation::Value {
                result: ResultValue::Bool(false),
                shown: "false: e2e (failure)".into()
            }
        );
        let pending = judged(github(&[("lint", "success")]), &["e2e"]);
        assert_eq!(
            pending,
            Observation::Pending("pending: e2e (not reported)".into())
        );
        assert!(matches!(judged(github(&[]), &[]), Observation::NoData(_)));
    }

    #[test]
    fn gitlab_lists_name_and_status_and_the_newest_status_of_a_context_counts() {
        let gitlab = json!([
            {"name": "e2e", "status": "running"},
            {"name": "e2e", "status": "failed"},
        ]);
        assert_eq!(
            judged(gitlab, &["e2e"]),
            Observation::Pending("pending: e2e (running)".into())
        );
        let gitea =
            json!({"state": "success", "statuses": [{"context": "e2e", "status": "success"}]});
        assert!(matches!(
            judged(gitea, &["e2e"]),
            Observation::Value {
                result: ResultValue::Bool(true),
                ..
            }
        ));
    }
}

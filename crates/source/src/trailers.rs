//! The trailers tollgate reads from commit messages (issue #33): `Tollgate-Approve:
//! <promotion>/<stage>@<snapshot>` and `Tollgate-Seal: <justification>`. Like `git
//! interpret-trailers`, only the message's last paragraph holds trailers; keys are
//! case-insensitive.

use tollgate_model::signature::{APPROVE_POLICY_TRAILER, APPROVE_TRAILER, SEAL_TRAILER};

use std::sync::Arc;

use tollgate_manifest::CommitInfo;

/// One `Tollgate-Approve` trailer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApproveTrailer {
    pub promotion: String,
    pub stage: String,
    pub snapshot: String,
}

/// One `Tollgate-Approve-Policy` trailer: an admin approves the pending changes of `policy` up
/// to and including the change made by commit `change` (a prefix of 7+ hex characters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyApproveTrailer {
    pub policy: String,
    pub change: String,
}

/// The policy approvals a commit message carries, and the trailers that do not parse.
pub fn policy_approvals(message: &str) -> (Vec<PolicyApproveTrailer>, Vec<String>) {
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for value in trailer_values(message, APPROVE_POLICY_TRAILER) {
        let parsed = value.rsplit_once('@').and_then(|(policy, change)| {
            let (policy, change) = (policy.trim(), change.trim());
            let hex = change.len() >= 7 && change.chars().all(|c| c.is_ascii_hexdigit());
            (!policy.is_empty() && hex).then(|| PolicyApproveTrailer {
                policy: policy.to_string(),
                change: change.to_ascii_lowercase(),
            })
        });
        match parsed {
            Some(trailer) => found.push(trailer),
            None => errors.push(format!(
                "{APPROVE_POLICY_TRAILER}: {value:?} is not `<policy>@<commit, 7+ hex characters>`"
            )),
        }
    }
    (found, errors)
}

/// The policy approval trailer, in the form `tollgate approve --policy` writes.
pub fn approve_policy_line(policy: &str, change: &str) -> String {
    format!("{APPROVE_POLICY_TRAILER}: {policy}@{change}")
}

/// The values of trailer `key` in `message`'s last paragraph.
fn trailer_values<'m>(message: &'m str, key: &str) -> Vec<&'m str> {
    let last = message.trim_end().rsplit("\n\n").next().unwrap_or_default();
    last.lines()
        .filter_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.trim().eq_ignore_ascii_case(key).then(|| v.trim())
        })
        .collect()
}

/// Parses `<promotion>/<stage>@<snapshot>`.
pub fn parse_approve(value: &str) -> Result<ApproveTrailer, String> {
    let bad = || format!("{APPROVE_TRAILER}: {value:?} is not `<promotion>/<stage>@<snapshot id>`");
    let (target, snapshot) = value.rsplit_once('@').ok_or_else(bad)?;
    let (promotion, stage) = target.split_once('/').ok_or_else(bad)?;
    let (promotion, stage, snapshot) = (promotion.trim(), stage.trim(), snapshot.trim());
    if promotion.is_empty() || stage.is_empty() || snapshot.is_empty() {
        return Err(bad());
    }
    Ok(ApproveTrailer {
        promotion: promotion.to_string(),
        stage: stage.to_string(),
        snapshot: snapshot.to_string(),
    })
}

/// The approvals a commit message carries, and the trailers that do not parse.
pub fn approvals(message: &str) -> (Vec<ApproveTrailer>, Vec<String>) {
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for value in trailer_values(message, APPROVE_TRAILER) {
        match parse_approve(value) {
            Ok(trailer) => found.push(trailer),
            Err(error) => errors.push(error),
        }
    }
    (found, errors)
}

/// Whether the message carries a `Tollgate-Seal` trailer with a justification.
pub fn is_seal(message: &str) -> bool {
    trailer_values(message, SEAL_TRAILER)
        .iter()
        .any(|justification| !justification.is_empty())
}

/// The seal trailer, in the form `tollgate seal` writes.
pub fn seal_line(justification: &str) -> String {
    format!("{SEAL_TRAILER}: {justification}")
}

/// The message with an approval trailer, in the form `tollgate approve` writes.
pub fn approve_line(promotion: &str, stage: &str, snapshot: &str) -> String {
    format!("{APPROVE_TRAILER}: {promotion}/{stage}@{snapshot}")
}

/// One `Tollgate-Approve-Policy` statement and its commit (read with the commit, judged by
/// `governance`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyApproval {
    pub trailer: PolicyApproveTrailer,
    pub commit: Arc<CommitInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailers_are_read_from_the_last_paragraph_only() {
        let message = "Approve web\n\nTollgate-Approve: web/prod@0123456789ab in the body is prose\n\ntollgate-approve: web/prod@0123456789ab\nSigned-off-by: A <a@example.com>\n";
        let (found, errors) = approvals(message);
        assert_eq!(
            found,
            [ApproveTrailer {
                promotion: "web".into(),
                stage: "prod".into(),
                snapshot: "0123456789ab".into()
            }]
        );
        assert!(errors.is_empty());
        assert!(
            approvals("Tollgate-Approve: web/prod@abc").0.len() == 1,
            "a one-line message is its own last paragraph"
        );
    }

    #[test]
    fn malformed_approvals_are_reported() {
        let (found, errors) =
            approvals("x\n\nTollgate-Approve: web@abc\nTollgate-Approve: /prod@abc\n");
        assert!(found.is_empty());
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].contains("`<promotion>/<stage>@<snapshot id>`"));
    }

    #[test]
    fn policy_approvals_name_a_policy_and_a_change_commit() {
        let (found, errors) = policy_approvals(
            "Approve\n\nTollgate-Approve-Policy: gates@ABCDEF1\nTollgate-Approve-Policy: gates@xyz\nTollgate-Approve: web/prod@0123456789ab\n",
        );
        assert_eq!(
            found,
            [PolicyApproveTrailer {
                policy: "gates".into(),
                change: "abcdef1".into()
            }]
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(approvals("Tollgate-Approve-Policy: gates@abcdef1").0, []);
    }

    #[test]
    fn a_seal_needs_a_justification() {
        assert!(is_seal(
            "Adopt signing\n\nTollgate-Seal: history before 2026-05 reviewed in #12\n"
        ));
        assert!(!is_seal("Adopt signing\n\nTollgate-Seal:\n"));
        assert!(!is_seal("Tollgate-Seal: yes\n\nmore text"));
    }
}

//! The approval policy of a manual gate (`spec.approvals.<stage>`, issue #33,
//! docs/trust.md#approval-policy): which approvals of the current run count, and whether enough
//! distinct approvers opened the gate.
//!
//! Every approval statement made since the run started is one candidate: each commit carrying a
//! `Tollgate-Approve` trailer, each commit that set the `approve.tollgate.dev/<stage>`
//! annotation, and each commit that set `approved: true` (with `automaticReset: false`, the
//! latest such commit whenever it was made). A candidate counts when it names this run's
//! snapshot, no other run used it, it is signed by a trusted key (`requireSignature`), its
//! approver is listed (`approvers`), it is not a self-approval (`forbidSelfApproval`) and its
//! approver was not counted already. The approver is the verified signer's principals, or the
//! author's e-mail address of an unverified commit. A self-approval is an approval whose signer
//! principal or author e-mail is among the snapshot's contributors (the authors, committers and
//! verified signers of the commits that brought its content).

use tollgate_model::approval_policy::ApprovalPolicy;
use tollgate_model::model::ManualTrigger;
use tollgate_model::signature::SignatureCheck;
use tollgate_model::snapshot::{ApprovalEvent, ApprovalKind, Snapshot, short_sha};

use crate::gates::approval::{self, names_snapshot};
use crate::status::{ApprovalReview, Approver, ApproverKind, ConsumedApproval};

/// What the gate found: every candidate reviewed, and the approvals that count (with their
/// consumption) when there are enough of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quorum {
    pub reviews: Vec<ApprovalReview>,
    /// The counted approvals, oldest first.
    pub counted: Vec<Approver>,
    /// What passing the gate consumes (nothing for `automaticReset: false` field approvals).
    pub consumes: Vec<ConsumedApproval>,
    pub needed: u32,
}

impl Quorum {
    pub fn is_met(&self) -> bool {
        self.counted.len() >= self.needed as usize
    }

    /// Why the gate waits: what counts so far, what does not and why, and how to approve.
    pub fn waiting_reason(&self, snapshot: &Snapshot, stage: &str) -> String {
        let counted: Vec<&str> = self
            .reviews
            .iter()
            .filter(|r| r.counts)
            .map(|r| r.approver.as_str())
            .collect();
        let mut text = format!(
            "waiting for approvals: {} of {} distinct approvers",
            counted.len(),
            self.needed
        );
        if !counted.is_empty() {
            text.push_str(&format!(" ({})", counted.join(", ")));
        }
        let refused: Vec<String> = self
            .reviews
            .iter()
            .filter_map(|r| {
                let reason = r.reason.as_deref()?;
                Some(format!("{} by {}: {reason}", short_sha(&r.sha), r.approver))
            })
            .collect();
        if !refused.is_empty() {
            text.push_str(&format!("; not counted: {}", refused.join("; ")));
        }
        text.push_str(&format!(
            "; each approver runs `tollgate approve {} {stage}` (signed) for snapshot {}",
            snapshot.promotion.name(),
            snapshot.hashes.short()
        ));
        text
    }

    /// The note of the event that says the gate opened.
    pub fn used_note(&self, stage: &str, snapshot: &Snapshot) -> String {
        let who: Vec<&str> = self
            .reviews
            .iter()
            .filter(|r| r.counts)
            .map(|r| r.approver.as_str())
            .collect();
        format!(
            "Stage {stage} approved for snapshot #{} by {} of {} required approvers: {}",
            snapshot.index,
            who.len(),
            self.needed,
            who.join(", ")
        )
    }
}

/// Reviews the approvals of the run of `snapshot` for `stage` under `policy`.
pub fn judge(
    snapshot: &Snapshot,
    stage: &str,
    trigger: &ManualTrigger,
    policy: &ApprovalPolicy,
    events: &[ApprovalEvent],
    consumed: &[ConsumedApproval],
) -> Quorum {
    let mut quorum = Quorum {
        reviews: Vec::new(),
        counted: Vec::new(),
        consumes: Vec::new(),
        needed: policy.min_approvals.max(1),
    };
    // The names of each counted approval, with its commit: a later approval sharing a name is
    // the same approver.
    let mut counted_names: Vec<(Vec<String>, String)> = Vec::new();
    let mut candidates = candidates(snapshot, stage, trigger, events);
    candidates.sort_by_key(|(event, _)| event.commit.seq);
    for (event, consumable) in candidates {
        let (kind, for_this_snapshot) = match &event.kind {
            ApprovalKind::Field => (ApproverKind::Field, true),
            ApprovalKind::Annotation { value } => {
                (ApproverKind::Annotation, names_snapshot(value, snapshot))
            }
            ApprovalKind::Trailer { snapshot: value } => {
                (ApproverKind::Trailer, names_snapshot(value, snapshot))
            }
        };
        let identity = Identity::of(event, policy);
        let refusal = if !for_this_snapshot {
            Some(format!(
                "for another snapshot (this run's is {})",
                snapshot.hashes.short()
            ))
        } else if let Some(other) = used_by_another_run(consumed, stage, event, snapshot.index) {
            Some(format!("used by run #{other}"))
        } else if consumable && !approval::is_fresh(event, snapshot) {
            Some(approval::stale_note(event, snapshot))
        } else {
            refusal(policy, snapshot, &identity, &counted_names)
        };
        let review = ApprovalReview {
            kind,
            sha: event.commit.sha.clone(),
            approver: identity.approver.clone(),
            signature: identity.signature.clone(),
            counts: refusal.is_none(),
            reason: refusal,
        };
        if review.counts {
            counted_names.push((identity.names.clone(), event.commit.sha.clone()));
            quorum.counted.push(approver_of(kind, event));
            if consumable {
                quorum.consumes.push(ConsumedApproval {
                    stage: stage.to_string(),
                    commit: event.commit.sha.clone(),
                    run: snapshot.index,
                });
            }
        }
        quorum.reviews.push(review);
    }
    quorum
}

/// The approval statements of this run for `stage`, each with whether passing consumes it.
fn candidates<'e>(
    snapshot: &Snapshot,
    stage: &str,
    trigger: &ManualTrigger,
    events: &'e [ApprovalEvent],
) -> Vec<(&'e ApprovalEvent, bool)> {
    let run_start = snapshot.commit.seq;
    let mut found: Vec<(&ApprovalEvent, bool)> = events
        .iter()
        .filter(|e| e.stage == stage && e.commit.seq >= run_start)
        .filter(|e| !matches!(e.kind, ApprovalKind::Field))
        .map(|e| (e, true))
        .collect();
    if trigger.approved == Some(true) {
        let fields = events
            .iter()
            .filter(|e| e.stage == stage && matches!(e.kind, ApprovalKind::Field));
        if trigger.automatic_reset {
            found.extend(
                fields
                    .filter(|e| e.commit.seq >= run_start)
                    .map(|e| (e, true)),
            );
        } else if let Some(latest) = fields.max_by_key(|e| e.commit.seq) {
            found.push((latest, false));
        }
    }
    found
}

/// Who made an approval, as far as the commit proves it.
struct Identity {
    /// Verified signer principals, or the author's e-mail (lowercase).
    names: Vec<String>,
    /// The author's e-mail (lowercase), also checked against the contributors.
    author: String,
    /// The name shown: the first listed approver among `names`, else the first name.
    approver: String,
    signature: String,
    /// Why the commit does not prove its signer, if it does not.
    unverified: Option<String>,
}

impl Identity {
    fn of(event: &ApprovalEvent, policy: &ApprovalPolicy) -> Identity {
        let author = event.commit.author_email.to_ascii_lowercase();
        let (names, signature, unverified) = match &event.commit.signature {
            Some(check @ SignatureCheck::Verified { principals, .. }) => {
                (principals.clone(), check.describe(), None)
            }
            Some(check @ SignatureCheck::Unverified { reason, .. }) => (
                vec![author.clone()],
                check.describe(),
                Some(reason.to_string()),
            ),
            None => (
                vec![author.clone()],
                "not checked (no trusted keys)".to_string(),
                Some("unsigned (the controller has no --trusted-keys to verify it)".to_string()),
            ),
        };
        let approver = names
            .iter()
            .find(|n| policy.lists(n))
            .or(names.first())
            .cloned()
            .unwrap_or_else(|| author.clone());
        Identity {
            names,
            author,
            approver,
            signature,
            unverified,
        }
    }
}

/// Why an approval for this run does not count under `policy`, if it does not. Names `identity`'s
/// approver as the listed one it matches.
fn refusal(
    policy: &ApprovalPolicy,
    snapshot: &Snapshot,
    identity: &Identity,
    counted: &[(Vec<String>, String)],
) -> Option<String> {
    if policy.require_signature
        && let Some(why) = &identity.unverified
    {
        return Some(why.clone());
    }
    if !policy.approvers.is_empty() && !identity.names.iter().any(|n| policy.lists(n)) {
        return Some(format!("not an approver ({})", identity.names.join(", ")));
    }
    if policy.forbid_self_approval
        && let Some(own) = identity
            .names
            .iter()
            .chain(std::iter::once(&identity.author))
            .find(|n| {
                snapshot
                    .contributors
                    .iter()
                    .any(|c| c.eq_ignore_ascii_case(n))
            })
    {
        return Some(format!(
            "self-approval ({own} brought a commit of this snapshot)"
        ));
    }
    let shared = |names: &[String]| {
        names
            .iter()
            .find(|n| identity.names.iter().any(|m| m.eq_ignore_ascii_case(n)))
            .cloned()
    };
    if let Some((name, sha)) = counted
        .iter()
        .find_map(|(names, sha)| Some((shared(names)?, sha)))
    {
        return Some(format!(
            "duplicate approver ({name} already approved in commit {})",
            short_sha(sha)
        ));
    }
    None
}

fn used_by_another_run(
    consumed: &[ConsumedApproval],
    stage: &str,
    event: &ApprovalEvent,
    run: u64,
) -> Option<u64> {
    consumed
        .iter()
        .find(|c| c.stage == stage && c.commit == event.commit.sha && c.run != run)
        .map(|c| c.run)
}

fn approver_of(kind: ApproverKind, event: &ApprovalEvent) -> Approver {
    let commit = &event.commit;
    Approver {
        kind,
        sha: Some(commit.sha.clone()),
        author: Some(format!("{} <{}>", commit.author, commit.author_email)),
        committer: Some(format!("{} <{}>", commit.committer, commit.committer_email)),
        time: Some(commit.time),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use tollgate_model::signature::Unverified;
    use tollgate_model::snapshot::CommitInfo;

    use super::*;
    use crate::testing::{approval, commit, promotion, snapshot};

    /// Run 4 of promotion `p`, started at commit 20, brought by bob (commit 19 and 20).
    fn run() -> (Snapshot, ManualTrigger) {
        let p = promotion(json!({
            "apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterPromotion",
            "metadata": {"name": "p"},
            "spec": {"stages": [{"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}},
                "trigger": {"manual": {"approved": false}}}]}
        }));
        let mut s = snapshot(p, 4, commit(20));
        s.contributors = Arc::from(["bob@example.com".to_string(), "bob".to_string()]);
        let trigger = ManualTrigger {
            approved: Some(false),
            automatic_reset: true,
            ..Default::default()
        };
        (s, trigger)
    }

    /// A commit at `seq` authored by `author`, signed by `signer` (principal) when given.
    fn signed(seq: u64, author: &str, signer: Option<&str>) -> CommitInfo {
        CommitInfo {
            author_email: format!("{author}@example.com"),
            signature: Some(match signer {
                Some(principal) => SignatureCheck::Verified {
                    principals: vec![principal.to_string()],
                    key: format!("SHA256:{principal}"),
                },
                None => SignatureCheck::unverified(Unverified::Unsigned, ""),
            }),
            ..commit(seq)
        }
    }

    fn trailer(s: &Snapshot, c: CommitInfo) -> ApprovalEvent {
        approval(
            "prod",
            ApprovalKind::Trailer {
                snapshot: s.hashes.snapshot_id[..12].to_string(),
            },
            c,
        )
    }

    fn policy(min: u32) -> ApprovalPolicy {
        ApprovalPolicy {
            approvers: vec!["alice".into(), "carol".into(), "bob".into()],
            min_approvals: min,
            forbid_self_approval: true,
            require_signature: true,
        }
    }

    fn reasons(q: &Quorum) -> Vec<Option<&str>> {
        q.reviews.iter().map(|r| r.reason.as_deref()).collect()
    }

    #[test]
    fn two_distinct_signed_approvers_open_a_gate_of_two() {
        let (s, trigger) = run();
        let one = [trailer(&s, signed(21, "alice", Some("alice")))];
        let q = judge(&s, "prod", &trigger, &policy(2), &one, &[]);
        assert!(!q.is_met());
        let reason = q.waiting_reason(&s, "prod");
        assert!(
            reason.contains("1 of 2 distinct approvers (alice)"),
            "{reason}"
        );
        let two = [
            trailer(&s, signed(21, "alice", Some("alice"))),
            trailer(&s, signed(22, "carol", Some("carol"))),
        ];
        let q = judge(&s, "prod", &trigger, &policy(2), &two, &[]);
        assert!(q.is_met(), "{:?}", q.reviews);
        assert_eq!(q.consumes.len(), 2);
        assert!(q.consumes.iter().all(|c| c.run == 4));
    }

    #[test]
    fn refused_approvals_say_why() {
        let (s, trigger) = run();
        let mut other = trailer(&s, signed(26, "carol", Some("carol")));
        other.kind = ApprovalKind::Trailer {
            snapshot: "0123456789ab".into(),
        };
        let events = [
            trailer(&s, signed(21, "alice", Some("alice"))),
            trailer(&s, signed(22, "dave", Some("dave"))),
            trailer(&s, signed(23, "bob", Some("bob"))),
            trailer(&s, signed(24, "alice", Some("alice"))),
            trailer(&s, signed(25, "carol", None)),
            other,
            // Before the run started: not a candidate at all.
            trailer(&s, signed(19, "carol", Some("carol"))),
        ];
        let q = judge(&s, "prod", &trigger, &policy(2), &events, &[]);
        assert!(!q.is_met());
        let got = reasons(&q);
        assert_eq!(got.len(), 6, "{got:?}");
        assert_eq!(got[0], None);
        assert_eq!(got[1], Some("not an approver (dave)"));
        assert_eq!(
            got[2],
            Some("self-approval (bob brought a commit of this snapshot)")
        );
        assert!(
            got[3].is_some_and(|r| r.starts_with("duplicate approver (alice")),
            "{got:?}"
        );
        assert_eq!(got[4], Some("unsigned"));
        assert!(
            got[5].is_some_and(|r| r.starts_with("for another snapshot")),
            "{got:?}"
        );
        let reason = q.waiting_reason(&s, "prod");
        assert!(
            reason.contains("not an approver") && reason.contains("unsigned"),
            "{reason}"
        );
    }

    #[test]
    fn an_unsigned_author_counts_when_no_signature_is_required() {
        let (s, trigger) = run();
        let lenient = ApprovalPolicy {
            approvers: Vec::new(),
            require_signature: false,
            forbid_self_approval: false,
            ..policy(1)
        };
        let events = [trailer(&s, signed(21, "carol", None))];
        let q = judge(&s, "prod", &trigger, &lenient, &events, &[]);
        assert!(q.is_met(), "{:?}", q.reviews);
        assert_eq!(q.reviews[0].approver, "carol@example.com");
        // A listed approver is matched by the author's e-mail; `carol` (a principal) is not it.
        let principal_only = ApprovalPolicy {
            approvers: vec!["carol".into()],
            ..lenient.clone()
        };
        let q = judge(&s, "prod", &trigger, &principal_only, &events, &[]);
        assert_eq!(reasons(&q), [Some("not an approver (carol@example.com)")]);
        let q = judge(
            &s,
            "prod",
            &trigger,
            &ApprovalPolicy {
                approvers: vec!["carol@example.com".into()],
                ..lenient
            },
            &events,
            &[],
        );
        assert!(q.is_met());
    }

    #[test]
    fn an_approval_used_by_another_run_does_not_count_again() {
        let (s, trigger) = run();
        let events = [trailer(&s, signed(21, "alice", Some("alice")))];
        let consumed = [ConsumedApproval {
            stage: "prod".into(),
            commit: events[0].commit.sha.clone(),
            run: 3,
        }];
        let q = judge(&s, "prod", &trigger, &policy(1), &events, &consumed);
        assert_eq!(reasons(&q), [Some("used by run #3")]);
    }

    #[test]
    fn field_and_annotation_approvals_are_candidates_too() {
        let (s, mut trigger) = run();
        trigger.approved = Some(true);
        let events = [
            approval(
                "prod",
                ApprovalKind::Field,
                signed(21, "alice", Some("alice")),
            ),
            approval(
                "prod",
                ApprovalKind::Annotation {
                    value: s.commit.sha.clone(),
                },
                signed(22, "carol", Some("carol")),
            ),
        ];
        let q = judge(&s, "prod", &trigger, &policy(2), &events, &[]);
        assert!(q.is_met(), "{:?}", q.reviews);
        assert_eq!(q.counted[0].kind, ApproverKind::Field);
        assert_eq!(q.counted[1].kind, ApproverKind::Annotation);
    }
}

//! `approve` as a git edit: the approval annotation for a manual (or analysis-gated) stage,
//! committed on a new branch; or, when the stage's approval policy wants several approvers, an
//! empty commit carrying the approval as a trailer, one branch per approver.

use std::sync::Arc;

use git2::Repository;
use tollgate_manifest::snapshot::APPROVE_ANNOTATION_PREFIX;
use tollgate_manifest::{ClusterPromotion, Snapshot, Trigger};

use super::annotate::{AnnotationCommit, commit_annotation};
use super::commit::{commit_tree, signing_note};
use super::target::{Loaded, Target, current_snapshot, load, select_snapshot, tip};
use super::{EditError, EditOutcome, git_error};
use crate::source::GitSource;

/// The run that waits, as the controller's status tells it (`tollgate approve` reads it from
/// the cluster when it can): the snapshot it runs, numbered and introduced as the controller
/// sees them, which `approve` names rather than the branch tip's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitingRun {
    pub index: u64,
    /// The snapshot id (content identity: the same whoever numbers it).
    pub id: String,
    /// The commit that introduced it, as the controller sees it.
    pub commit: String,
}

/// Writes `approve.tollgate.dev/<stage>: <value>` into promotion `name` as of the branch tip and
/// commits it on `tollgate/approve-<name>-<stage>-<value12>`. `snapshot` (`#N` or an id prefix)
/// defaults to the current snapshot; the value is its id prefix, or the SHA of the commit that
/// introduced it when the annotation already holds that id (see [`approval_value`]).
pub fn approve(
    target: &Target<'_>,
    name: &str,
    stage: &str,
    snapshot: Option<&str>,
) -> Result<EditOutcome, EditError> {
    approve_run(target, name, stage, snapshot, None)
}

/// [`approve`], naming `waiting` (the run the controller says waits) unless `snapshot` is given.
pub fn approve_run(
    target: &Target<'_>,
    name: &str,
    stage: &str,
    snapshot: Option<&str>,
    waiting: Option<&WaitingRun>,
) -> Result<EditOutcome, EditError> {
    let Loaded { repo, source } = load(target)?;
    let current = current_snapshot(&source, name, target.branch)?;
    let promotion = &current.promotion;
    let mut warnings = Vec::new();
    let governing = governing_policy(&source, current, &mut warnings);
    let policy = governing
        .as_ref()
        .and_then(|p| p.spec.approvals.get(stage).cloned());
    if !gated_by_analyses(governing.as_deref(), current, stage) && policy.is_none() {
        require_manual_stage(promotion, name, stage)?;
    }
    let waiting_snapshot = waiting.and_then(|w| as_controller_sees(source.history(name), w));
    let chosen = match (snapshot, &waiting_snapshot) {
        (Some(selector), _) => select_snapshot(source.history(name), name, selector)?,
        (None, Some(waiting)) => waiting,
        (None, None) => current,
    };
    let from_cluster = snapshot.is_none() && waiting_snapshot.is_some();
    if chosen.id() != current.id() {
        warnings.push(match from_cluster {
            true => format!(
                "approving snapshot #{}, the run the GitPromotion says waits; the branch tip's content is snapshot #{} (as git here numbers it)",
                chosen.index, current.index
            ),
            false => format!(
                "snapshot #{} is not the current snapshot #{}: the approval only applies if #{} runs again",
                chosen.index, current.index, chosen.index
            ),
        });
    }
    let (trailer_for, signed) = approval_form(&repo, policy.as_ref(), stage)?;
    if let Some(min_approvals) = trailer_for {
        let approval = TrailerApproval {
            name,
            stage,
            snapshot: chosen,
            min_approvals,
        };
        return approve_by_trailer(&repo, target, &approval, signed, warnings);
    }
    let key = format!("{APPROVE_ANNOTATION_PREFIX}{stage}");
    let (value, note) = approval_value(promotion.metadata.annotations.get(&key), chosen, &key);
    let value12 = &value[..12.min(value.len())];
    let edit = AnnotationCommit {
        name,
        key: &key,
        value: &value,
        branch: approval_branch(name, stage, &value, None),
        message: format!(
            "Approve {name} stage {stage} for snapshot #{} ({value12})",
            chosen.index
        ),
        direct: false,
    };
    let mut outcome = commit_annotation(&repo, target, current, edit)?;
    outcome.snapshot_index = chosen.index;
    outcome.snapshot_id = chosen.id().to_string();
    outcome.notes = [note].into_iter().chain(signed).collect();
    outcome.warnings.splice(0..0, warnings);
    Ok(outcome)
}

/// The snapshot of `history` with `waiting`'s content, numbered and introduced as the
/// controller sees it; `None` when git here has no such content.
fn as_controller_sees(history: &[Snapshot], waiting: &WaitingRun) -> Option<Snapshot> {
    let local = history.iter().rev().find(|s| s.id() == waiting.id)?;
    let mut commit = (*local.commit).clone();
    commit.sha = waiting.commit.clone();
    Some(Snapshot {
        index: waiting.index,
        commit: Arc::new(commit),
        ..local.clone()
    })
}

/// The manual stage `stage` of `promotion`; any other stage is a request error.
fn require_manual_stage(
    promotion: &ClusterPromotion,
    name: &str,
    stage: &str,
) -> Result<(), EditError> {
    match promotion.stage(stage).map(|s| &s.trigger) {
        None => {
            let stages: Vec<&str> = promotion
                .spec
                .stages
                .iter()
                .map(|s| s.name.as_str())
                .collect();
            Err(EditError::UnknownStage {
                name: name.to_string(),
                stage: stage.to_string(),
                stages: stages.join(", "),
            })
        }
        Some(Some(Trigger::Manual(_))) => Ok(()),
        Some(other) => Err(EditError::NotManualStage {
            name: name.to_string(),
            stage: stage.to_string(),
            trigger: if other.is_some() {
                "an auto trigger"
            } else {
                "no trigger"
            },
        }),
    }
}

/// The annotation value that approves `chosen`, and a note saying which form it is and why.
///
/// The controller counts an approval event only once (docs/architecture.md#d2-approvals-are-consumed-never-lost): after a revert brings back a
/// snapshot whose id the annotation already holds, that value was consumed by the earlier run and
/// writing it again changes nothing. The SHA of the commit that introduced the snapshot names the
/// same snapshot with a different value, hence a new approval event.
fn approval_value(existing: Option<&String>, chosen: &Snapshot, key: &str) -> (String, String) {
    let id12 = chosen.hashes.short().to_string();
    let value = approval_annotation_value(
        existing.map(String::as_str),
        chosen.id(),
        &chosen.commit.sha,
    );
    if value != id12 {
        let sha = value;
        let note = format!(
            "{key} already holds snapshot id {id12}, which a run may already have consumed (e.g. before a revert brought this content back); wrote the SHA of commit {} that introduced snapshot #{} instead, so the change is a new approval",
            tollgate_manifest::snapshot::short_sha(&sha),
            chosen.index
        );
        (sha, note)
    } else {
        let note = format!("wrote {key}: {id12} (the id of snapshot #{})", chosen.index);
        (id12, note)
    }
}

/// The value an approval annotation gets: the snapshot's 12-character id, or the SHA of the commit
/// that introduced it when the annotation already holds that id (see [`approval_value`]). The
/// web view's Approve form previews it.
pub fn approval_annotation_value(
    existing: Option<&str>,
    snapshot_id: &str,
    commit: &str,
) -> String {
    let id12 = &snapshot_id[..12.min(snapshot_id.len())];
    match existing == Some(id12) {
        true => commit.to_string(),
        false => id12.to_string(),
    }
}

/// The approvers an approval policy wants when more than one: then an approval is a trailer on
/// an empty commit, one branch per approver, not the annotation.
pub fn approval_in_trailer(
    policy: Option<&tollgate_model::approval_policy::ApprovalPolicy>,
) -> Option<u32> {
    policy.map(|p| p.min_approvals).filter(|min| *min > 1)
}

/// The branch of an approval: `tollgate/approve-<name>-<stage>-<value12>`, and `-<approver>`
/// in the trailer form (several approvers approve one snapshot).
pub fn approval_branch(name: &str, stage: &str, value: &str, approver: Option<&str>) -> String {
    let value12 = &value[..12.min(value.len())];
    match approver {
        None => format!("tollgate/approve-{name}-{stage}-{value12}"),
        Some(approver) => format!("tollgate/approve-{name}-{stage}-{value12}-{approver}"),
    }
}

/// How to write the approval under the stage's approval policy: `Some(minApprovals)` for the
/// trailer form (the policy wants several approvers), and how the commit is signed. Refuses an
/// unsigned approval the policy would not count.
fn approval_form(
    repo: &Repository,
    policy: Option<&tollgate_model::approval_policy::ApprovalPolicy>,
    stage: &str,
) -> Result<(Option<u32>, Option<String>), EditError> {
    let signed = signing_note(repo)?;
    if policy.is_some_and(|p| p.require_signature) && signed.is_none() {
        return Err(EditError::SigningRequired {
            stage: stage.to_string(),
        });
    }
    Ok((approval_in_trailer(policy), signed))
}

/// The RolloutPolicy governing the current snapshot, if any (resolved once per approval).
fn governing_policy(
    source: &GitSource,
    current: &Snapshot,
    warnings: &mut Vec<String>,
) -> Option<Arc<tollgate_manifest::RolloutPolicy>> {
    match source.policies().choose(&current.promotion, &current.file) {
        Ok(policy) => policy,
        Err(problem) => {
            warnings.push(format!(
                "the RolloutPolicy governing this promotion cannot be resolved ({}); wrote the approval as if it had no approval policy"
            , problem.message));
            None
        }
    }
}

/// Whether the RolloutPolicy governing the current snapshot gates `stage` with analyses: an
/// inconclusive one holds the stage like a manual gate, and an approval lets it go on.
fn gated_by_analyses(
    governing: Option<&tollgate_manifest::RolloutPolicy>,
    current: &Snapshot,
    stage: &str,
) -> bool {
    current.promotion.stage(stage).is_some()
        && governing.is_some_and(|p| !p.for_stage(stage).analyses.is_empty())
}

/// One approval in the trailer form.
struct TrailerApproval<'a> {
    name: &'a str,
    stage: &'a str,
    snapshot: &'a Snapshot,
    min_approvals: u32,
}

/// An approval as an empty commit carrying `Tollgate-Approve: <name>/<stage>@<snapshot id>`:
/// several approvers approve one snapshot without editing the same line.
fn approve_by_trailer(
    repo: &Repository,
    target: &Target<'_>,
    approval: &TrailerApproval<'_>,
    signed: Option<String>,
    warnings: Vec<String>,
) -> Result<EditOutcome, EditError> {
    let TrailerApproval {
        name,
        stage,
        snapshot,
        min_approvals,
    } = *approval;
    let tip = tip(repo, target.branch)?;
    let tree = tip
        .tree()
        .map_err(git_error(format!("read the tree of {}", tip.id())))?;
    let id = snapshot.id();
    let id12 = &id[..12.min(id.len())];
    // One branch per approver: several approvers approve one snapshot, each with a commit.
    let wanted = approval_branch(name, stage, id12, Some(&approver_slug(repo)));
    let branch = super::branch_for(repo, target, wanted);
    let subject = format!(
        "Approve {name} stage {stage} for snapshot #{} ({id12})",
        snapshot.index
    );
    let message = format!(
        "{subject}\n\n{}\n",
        crate::trailers::approve_line(name, stage, id12)
    );
    let commit = commit_tree(repo, &tip, &tree, &branch, &message)?;
    let note = format!(
        "wrote the trailer {} (the approval policy wants {min_approvals} approvers: each commits one)",
        crate::trailers::approve_line(name, stage, id12)
    );
    Ok(EditOutcome {
        branch,
        direct: false,
        commit: commit.to_string(),
        base: tip.id().to_string(),
        file: snapshot.file.clone(),
        message: subject,
        snapshot_index: snapshot.index,
        snapshot_id: id.to_string(),
        notes: [note].into_iter().chain(signed).collect(),
        warnings,
    })
}

/// The committer's e-mail local part (or name) as a branch-name word: `alice` for
/// `alice@example.com`.
pub fn approver_slug(repo: &Repository) -> String {
    let signature = repo.signature().ok();
    let who = signature
        .as_ref()
        .and_then(|s| {
            s.email()
                .ok()
                .map(|e| e.split('@').next().unwrap_or(e).to_string())
        })
        .or_else(|| {
            signature
                .as_ref()
                .and_then(|s| s.name().ok().map(str::to_string))
        })
        .unwrap_or_default();
    let slug: String = who
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() {
            true => c.to_ascii_lowercase(),
            false => '-',
        })
        .collect();
    match slug.trim_matches('-') {
        "" => "approver".to_string(),
        slug => slug.to_string(),
    }
}

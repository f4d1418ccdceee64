//! The buttons that act on a rollout, and what each one commits. An action never writes to the
//! management cluster: it makes the same git commit the CLI makes, on a new branch, and (with a
//! git host configured) opens a pull request with it. The preview shown next to each button is
//! computed here, from the engine's status, and names the equivalent CLI command.

use std::collections::BTreeMap;

use tollgate_engine::PromotionStatus;
use tollgate_engine::activity::StageActivity;
use tollgate_engine::{Phase, RunOutcome};
use tollgate_model::snapshot::{
    APPROVE_ANNOTATION_PREFIX, PAUSED_ANNOTATION, RETRY_ANNOTATION_PREFIX,
};
use tollgate_source::edit::{self, AnnotationEdit, EditError, EditOutcome};
use tollgate_source::edit_retry::{self, RetryRequest};

use super::git_view::RepoTarget;

/// What a button asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Approve { stage: String },
    Retry { stage: String },
    Rollback { to: u64 },
    Pause,
    Resume,
}

/// A button with the commit it will make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    pub request: Request,
    /// The button's text (also its accessible name).
    pub label: String,
    /// The change, as diff lines (`+ key: value`).
    pub diff: Vec<String>,
    /// The equivalent command line.
    pub command: String,
    /// The branch the commit goes on.
    pub branch: String,
}

/// What the repository says that a preview depends on.
#[derive(Clone, Copy)]
pub struct RepoState<'a> {
    /// Whether a branch exists (a repeated action takes the next free name).
    pub taken: &'a dyn Fn(&str) -> bool,
    /// What the branch tip says of the promotion.
    pub tip: Tip<'a>,
}

/// The promotion as of the branch tip, which the commits are made on.
#[derive(Clone, Copy)]
pub struct Tip<'a> {
    /// Its annotations (a retry counts on from them; an approval avoids a consumed value).
    pub annotations: &'a BTreeMap<String, String>,
    /// The approvers the governing policy wants for a stage, when more than one (the approval is
    /// then a trailer: `edit::approval_in_trailer`).
    pub trailer_approvals: &'a dyn Fn(&str) -> Option<u32>,
    /// The web view's committer as a branch word (`edit::approver_slug`).
    pub approver: &'a str,
    /// What rolling back to a snapshot changes at the tip, one line per field.
    pub rollback_changes: &'a dyn Fn(u64) -> Option<Vec<String>>,
}

/// Every action that applies to the promotion now, in the order the page shows them, each on the
/// branch its commit will take: its own name, or the first free one after it (`repo.taken`), as
/// `edit::branch_for` chooses when the button is pressed.
pub fn planned(name: &str, status: &PromotionStatus, repo: RepoState<'_>) -> Vec<Planned> {
    let mut planned = offered(name, status, repo.tip);
    for action in &mut planned {
        action.branch = edit::fresh_branch_name(&action.branch, repo.taken);
    }
    planned
}

/// [`planned`] on the branch names the actions want.
pub fn offered(name: &str, status: &PromotionStatus, tip: Tip<'_>) -> Vec<Planned> {
    let mut planned = Vec::new();
    if status
        .snapshot_id
        .as_deref()
        .is_some_and(|id| !id.is_empty())
    {
        for view in status.pipeline() {
            match view.activity {
                StageActivity::AwaitingApproval | StageActivity::AnalysisInconclusive { .. } => {
                    planned.push(approve_action(name, view.name, status, tip));
                }
                StageActivity::Failed { .. } => {
                    planned.push(retry_action(name, view.name, status, tip));
                }
                _ => {}
            }
        }
    }
    planned.extend(rollbacks(name, status, tip));
    planned.push(pause_or_resume(name, status));
    planned
}

/// Approve `stage` for the running snapshot, written as `tollgate approve` writes it: the
/// annotation, or a trailer on an empty commit when the policy wants several approvers.
fn approve_action(name: &str, stage: &str, status: &PromotionStatus, tip: Tip<'_>) -> Planned {
    let snapshot_id = status.snapshot_id.as_deref().unwrap_or_default();
    let commit = status.snapshot_commit.as_deref().unwrap_or_default();
    let id12 = &snapshot_id[..12.min(snapshot_id.len())];
    let index = status.snapshot_index.unwrap_or_default();
    let (diff, branch) = match (tip.trailer_approvals)(stage) {
        Some(wanted) => (
            vec![
                format!(
                    "+ trailer {}",
                    tollgate_source::trailers::approve_line(name, stage, id12)
                ),
                format!(
                    "  (an empty commit: the approval policy wants {wanted} approvers, each commits one)"
                ),
            ],
            edit::approval_branch(name, stage, id12, Some(tip.approver)),
        ),
        None => {
            let key = format!("{APPROVE_ANNOTATION_PREFIX}{stage}");
            let written = tip.annotations.get(&key).map(String::as_str);
            let value = edit::approval_annotation_value(written, snapshot_id, commit);
            (
                vec![format!("+ {key}: \"{value}\"")],
                edit::approval_branch(name, stage, &value, None),
            )
        }
    };
    Planned {
        request: Request::Approve {
            stage: stage.to_string(),
        },
        label: format!("Approve {stage} for snapshot #{index}"),
        diff,
        command: format!("tollgate approve {name} {stage} --snapshot '#{index}'"),
        branch,
    }
}

/// Retry the failed `stage`: the counter `tollgate retry` writes next for the snapshot.
fn retry_action(name: &str, stage: &str, status: &PromotionStatus, tip: Tip<'_>) -> Planned {
    let snapshot_id = status.snapshot_id.as_deref().unwrap_or_default();
    let commit = status.snapshot_commit.as_deref().unwrap_or_default();
    let written = tip
        .annotations
        .get(&format!("{RETRY_ANNOTATION_PREFIX}{stage}"));
    let n = edit_retry::next_retry_counter(written.map(String::as_str), snapshot_id, commit);
    let value = edit_retry::retry_value(snapshot_id, n);
    Planned {
        request: Request::Retry {
            stage: stage.to_string(),
        },
        label: format!(
            "Retry {stage} with snapshot #{}",
            status.snapshot_index.unwrap_or_default()
        ),
        diff: vec![format!("+ {RETRY_ANNOTATION_PREFIX}{stage}: \"{value}\"")],
        command: format!("tollgate retry {name} {stage}"),
        branch: edit_retry::retry_branch(name, stage, commit, n),
    }
}

/// Rollback to each earlier snapshot that completed a run (only completed content is restored).
fn rollbacks(name: &str, status: &PromotionStatus, tip: Tip<'_>) -> Vec<Planned> {
    let current = status.snapshot_index;
    let mut targets: Vec<u64> = status
        .runs
        .iter()
        .filter(|run| run.outcome == RunOutcome::Completed)
        .map(|run| run.snapshot_index)
        .filter(|index| Some(*index) != current)
        .collect();
    targets.sort_unstable_by(|a, b| b.cmp(a));
    targets.dedup();
    targets
        .into_iter()
        .map(|to| Planned {
            request: Request::Rollback { to },
            label: format!("Roll back {name} to snapshot #{to}"),
            diff: match (tip.rollback_changes)(to) {
                Some(changes) if changes.is_empty() => {
                    vec![format!(
                        "(snapshot #{to}'s spec is the tip's: nothing changes)"
                    )]
                }
                Some(changes) => changes,
                None => vec![format!(
                    "~ spec: the content of snapshot #{to} (metadata kept)"
                )],
            },
            command: format!("tollgate rollback {name} --to {to}"),
            branch: format!("tollgate/rollback-{name}-to-{to}"),
        })
        .collect()
}

fn pause_or_resume(name: &str, status: &PromotionStatus) -> Planned {
    match status.phase == Phase::Paused {
        true => Planned {
            request: Request::Resume,
            label: format!("Resume {name}"),
            diff: vec![format!("+ {PAUSED_ANNOTATION}: \"false\"")],
            command: format!("git: set {PAUSED_ANNOTATION}: \"false\" on {name}"),
            branch: format!("tollgate/resume-{name}"),
        },
        false => Planned {
            request: Request::Pause,
            label: format!("Pause {name}"),
            diff: vec![format!("+ {PAUSED_ANNOTATION}: \"true\"")],
            command: format!("git: set {PAUSED_ANNOTATION}: \"true\" on {name}"),
            branch: format!("tollgate/pause-{name}"),
        },
    }
}

/// Makes the commit of `request` on a new branch: `approve` and `rollback` are the CLI's own
/// edits; pause, resume and retry write one annotation through the same edit code.
pub fn commit(
    repo: &RepoTarget,
    name: &str,
    request: &Request,
    status: Option<&PromotionStatus>,
) -> Result<EditOutcome, EditError> {
    let target = repo.edit_target();
    match request {
        Request::Approve { stage } => {
            let snapshot = status
                .and_then(|s| s.snapshot_index)
                .map(|i| format!("#{i}"));
            edit::approve(&target, name, stage, snapshot.as_deref())
        }
        Request::Rollback { to } => edit::rollback(&target, name, *to),
        Request::Pause | Request::Resume => {
            let paused = *request == Request::Pause;
            let word = if paused { "Pause" } else { "Resume" };
            let branch = format!("tollgate/{}-{name}", word.to_ascii_lowercase());
            let message = format!("{word} {name}");
            let value = move |_: Option<&str>| paused.to_string();
            let annotation = AnnotationEdit {
                key: PAUSED_ANNOTATION,
                value: &value,
                branch: &branch,
                message: &message,
            };
            edit::annotate(&target, name, &annotation)
        }
        Request::Retry { stage } => {
            let request = RetryRequest {
                name,
                stage,
                n: None,
                direct: false,
            };
            edit_retry::retry(&target, &request)
        }
    }
}

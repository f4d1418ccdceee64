//! The buttons that act on a rollout, and what each one commits. An action never writes to the
//! management cluster: it makes the same git commit the CLI makes, on a new branch, and (with a
//! git host configured) opens a pull request with it. The preview shown next to each button is
//! computed here, from the engine's status, and names the equivalent CLI command.

use tollgate_engine::PromotionStatus;
use tollgate_engine::activity::StageActivity;
use tollgate_engine::{Phase, RunOutcome};
use tollgate_model::snapshot::{APPROVE_ANNOTATION_PREFIX, PAUSED_ANNOTATION};
use tollgate_source::edit::{self, AnnotationEdit, EditError, EditOutcome};
use tollgate_source::edit_retry::{self, RetryRequest};

use super::git_view::RepoTarget;

/// The prefix of the retry annotation (`tollgate retry NAME STAGE` writes it).
pub const RETRY_ANNOTATION_PREFIX: &str = "retry.tollgate.dev/";

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

/// The value a retry button shows: `<snapshot id>/<n>`, `n` one more than an earlier retry of
/// the same snapshot held (the commit itself is `tollgate retry`'s, `edit_retry::retry`).
pub fn retry_value(snapshot_id: &str, existing: Option<&str>) -> String {
    let id12 = &snapshot_id[..12.min(snapshot_id.len())];
    let n = existing
        .and_then(|value| value.split_once('/'))
        .filter(|(id, _)| *id == id12)
        .and_then(|(_, n)| n.parse::<u32>().ok())
        .map_or(1, |n| n.saturating_add(1));
    format!("{id12}/{n}")
}

/// Every action that applies to the promotion now, in the order the page shows them, each on the
/// branch its commit will take: its own name, or the first free one after it (`taken`: the
/// repository's branches), as `edit::branch_for` chooses when the button is pressed.
pub fn planned(name: &str, status: &PromotionStatus, taken: &dyn Fn(&str) -> bool) -> Vec<Planned> {
    let mut planned = offered(name, status);
    for action in &mut planned {
        action.branch = edit::fresh_branch_name(&action.branch, taken);
    }
    planned
}

/// [`planned`] on the branch names the actions want.
pub fn offered(name: &str, status: &PromotionStatus) -> Vec<Planned> {
    let id12 = status
        .snapshot_id
        .as_deref()
        .map(|id| id[..12.min(id.len())].to_string())
        .unwrap_or_default();
    let index = status.snapshot_index.unwrap_or_default();
    let mut planned = Vec::new();
    for view in status.pipeline() {
        let stage = view.name;
        match view.activity {
            StageActivity::AwaitingApproval | StageActivity::AnalysisInconclusive { .. }
                if !id12.is_empty() =>
            {
                planned.push(Planned {
                    request: Request::Approve {
                        stage: stage.to_string(),
                    },
                    label: format!("Approve {stage} for snapshot #{index}"),
                    diff: vec![format!("+ {APPROVE_ANNOTATION_PREFIX}{stage}: \"{id12}\"")],
                    command: format!("tollgate approve {name} {stage} --snapshot '#{index}'"),
                    branch: format!("tollgate/approve-{name}-{stage}-{id12}"),
                });
            }
            StageActivity::Failed { .. } if !id12.is_empty() => {
                let value = retry_value(&id12, None);
                planned.push(Planned {
                    request: Request::Retry {
                        stage: stage.to_string(),
                    },
                    label: format!("Retry {stage} with snapshot #{index}"),
                    diff: vec![format!("+ {RETRY_ANNOTATION_PREFIX}{stage}: \"{value}\"")],
                    command: format!("tollgate retry {name} {stage}"),
                    branch: retry_branch(name, stage, status, &value),
                });
            }
            _ => {}
        }
    }
    planned.extend(rollbacks(name, status));
    planned.push(pause_or_resume(name, status));
    planned
}

/// The branch `tollgate retry` makes for the run's snapshot and the counter of `value`
/// (`<snapshot id>/<n>`).
fn retry_branch(name: &str, stage: &str, status: &PromotionStatus, value: &str) -> String {
    let n = value
        .rsplit_once('/')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(1);
    let commit = status.snapshot_commit.as_deref().unwrap_or_default();
    edit_retry::retry_branch(name, stage, commit, n)
}

/// Rollback to each earlier snapshot that completed a run (only completed content is restored).
fn rollbacks(name: &str, status: &PromotionStatus) -> Vec<Planned> {
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
            diff: vec![format!(
                "~ spec: the content of snapshot #{to} (metadata kept)"
            )],
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_counts_up_for_the_same_snapshot_and_restarts_for_another() {
        let id = "0123456789abcdef0123";
        assert_eq!(retry_value(id, None), "0123456789ab/1");
        assert_eq!(retry_value(id, Some("0123456789ab/1")), "0123456789ab/2");
        assert_eq!(retry_value(id, Some("ffffffffffff/4")), "0123456789ab/1");
        assert_eq!(retry_value(id, Some("garbage")), "0123456789ab/1");
    }
}

//! `retry` as a git edit: writes `retry.tollgate.dev/<stage>: <snapshot id>/<n>` into the
//! promotion's manifest as of the branch tip, the way `approve` writes its annotation (the same
//! surgical edit, verification and signing), on a new branch or, with `direct`, on the tracked
//! branch itself. The controller re-drives the stage's failed clusters once per counter `n`.

use tollgate_manifest::snapshot::RETRY_ANNOTATION_PREFIX;
use tollgate_model::retry_value::counter_for;

use crate::edit::{
    AnnotationCommit, EditError, EditOutcome, Loaded, Target, commit_annotation, current_snapshot,
    load, signing_note,
};

/// What to retry.
#[derive(Clone, Debug)]
pub struct RetryRequest<'a> {
    pub name: &'a str,
    pub stage: &'a str,
    /// The counter; default: one more than the annotation's counter for the current snapshot.
    pub n: Option<u64>,
    /// Commit on the tracked branch itself.
    pub direct: bool,
}

/// Commits the retry annotation for the current snapshot of the promotion.
pub fn retry(target: &Target<'_>, request: &RetryRequest<'_>) -> Result<EditOutcome, EditError> {
    let Loaded { repo, source } = load(target)?;
    let name = request.name;
    let stage = request.stage;
    let current = current_snapshot(&source, name, target.branch)?;
    if current.promotion.stage(stage).is_none() {
        let stages: Vec<&str> = current
            .promotion
            .spec
            .stages
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        return Err(EditError::UnknownStage {
            name: name.to_string(),
            stage: stage.to_string(),
            stages: stages.join(", "),
        });
    }
    let key = format!("{RETRY_ANNOTATION_PREFIX}{stage}");
    let written = current.promotion.metadata.annotations.get(&key);
    let counter = written.and_then(|v| counter_for(v, current.id(), &current.commit.sha));
    let n = request.n.unwrap_or_else(|| counter.unwrap_or(0) + 1);
    let mut warnings = Vec::new();
    if let Some(counter) = counter.filter(|c| *c >= n) {
        warnings.push(format!(
            "{key} already holds counter {counter} for snapshot #{}: counter {n} is not above it, so the controller may have spent it already (a spent counter does nothing); omit --n to write {}",
            current.index,
            counter + 1
        ));
    }
    let value = retry_value(current.id(), n);
    let edit = AnnotationCommit {
        name,
        key: &key,
        value: &value,
        branch: retry_branch(name, stage, &current.commit.sha, n),
        message: format!(
            "Retry {name} stage {stage} of snapshot #{} ({}, retry {n})",
            current.index,
            current.hashes.short()
        ),
        direct: request.direct,
    };
    let mut outcome = commit_annotation(&repo, target, current, edit)?;
    outcome.notes = [format!(
        "wrote {key}: {value} (retry {n} of snapshot #{}); the controller re-drives the stage's failed and timed-out clusters once for this value",
        current.index
    )]
    .into_iter()
    .chain(signing_note(&repo)?)
    .collect();
    outcome.warnings.splice(0..0, warnings);
    Ok(outcome)
}

/// The branch a retry commits on, `tollgate/retry-<name>-<stage>-<commit>-<n>`: `<commit>` is the
/// short id of the commit that introduced the snapshot retried, so retries of two snapshots (each
/// counting from 1) never want the same branch. The web view previews its retry button with it.
pub fn retry_branch(name: &str, stage: &str, snapshot_commit: &str, n: u64) -> String {
    let commit = tollgate_manifest::snapshot::short_sha(snapshot_commit);
    format!("tollgate/retry-{name}-{stage}-{commit}-{n}")
}

/// The annotation value a retry writes: `<snapshot id, 12 characters>/<n>`.
pub fn retry_value(snapshot_id: &str, n: u64) -> String {
    format!("{}/{n}", &snapshot_id[..12.min(snapshot_id.len())])
}

/// The counter the next retry of a snapshot writes: one more than the counter `written` (the
/// annotation's value at the branch tip) holds for it, 1 when it holds none for this snapshot.
/// `retry` and the web view's Retry button both count with it.
pub fn next_retry_counter(written: Option<&str>, snapshot_id: &str, snapshot_commit: &str) -> u64 {
    written
        .and_then(|value| counter_for(value, snapshot_id, snapshot_commit))
        .map_or(1, |n| n.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::{next_retry_counter, retry_value};

    #[test]
    fn a_retry_counts_up_for_the_same_snapshot_and_restarts_for_another() {
        let (id, commit) = ("0123456789abcdef0123", "feedc0ffee");
        assert_eq!(retry_value(id, 1), "0123456789ab/1");
        assert_eq!(next_retry_counter(None, id, commit), 1);
        assert_eq!(next_retry_counter(Some("0123456789ab/1"), id, commit), 2);
        assert_eq!(next_retry_counter(Some("feedc0f/4"), id, commit), 5);
        assert_eq!(next_retry_counter(Some("ffffffffffff/4"), id, commit), 1);
        assert_eq!(next_retry_counter(Some("garbage"), id, commit), 1);
    }
}

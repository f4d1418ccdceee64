//! `rollback` as a git edit: an earlier snapshot's `spec` replaces the current one in the file the
//! promotion lives in now, the tip's metadata kept, committed on a new branch.

use git2::{Oid, Repository};
use tollgate_manifest::snapshot::PAUSED_ANNOTATION;
use tollgate_manifest::{ClusterPromotion, Snapshot, SpecHashes};

use super::annotation::{block_style_text, content_of};
use super::commit::{FileCommit, commit_on_new_branch, signing_note};
use super::document::{decode, find_promotion_document, reparse};
use super::spec::splice_spec;
use super::target::{Loaded, Target, load, read_file_at, select_snapshot, tip, unknown_promotion};
use super::{EditError, EditOutcome, git_error};
use crate::report::PromotionView;

/// Restores snapshot `index` of promotion `name`: its `spec` as of the snapshot's commit replaces
/// the current one (in the file it lives in now, metadata kept), committed on
/// `tollgate/rollback-<name>-to-<index>`.
pub fn rollback(target: &Target<'_>, name: &str, index: u64) -> Result<EditOutcome, EditError> {
    let Loaded { repo, source } = load(target)?;
    let history = source.history(name);
    if history.is_empty() {
        return Err(unknown_promotion(&source, name, target.branch));
    }
    let snapshot = select_snapshot(history, name, &format!("#{index}"))?;
    let view = source.promotion(name);
    let current = match view {
        Some(PromotionView::Valid { snapshot: current }) => Some(current),
        _ => None,
    };
    if current.is_some_and(|current| current.hashes == snapshot.hashes) {
        return Err(EditError::AlreadyAtSnapshot {
            name: name.to_string(),
            branch: target.branch.to_string(),
            index,
        });
    }
    let current_file = file_at_tip(view, snapshot);
    let old_text = snapshot_text(&repo, snapshot, name)?;
    let old_document = find_promotion_document(&old_text, &snapshot.file, name)?;
    let old_body = &old_text[old_document.body.clone()];

    let tip = tip(&repo, target.branch)?;
    let mut warnings = Vec::new();
    let at_tip = match read_file_at(&repo, &tip, &current_file)? {
        Some(bytes) => Some(decode(bytes, &current_file, name)?),
        None => None,
    };
    let edited = restored_text(
        at_tip.as_deref(),
        &current_file,
        name,
        old_body,
        &mut warnings,
    )?;
    let result = reparse(&edited, &current_file, name)?;
    let mut notes = verify_rollback(&result, snapshot, current, &current_file, target.branch)?;
    notes.extend(signing_note(&repo)?);
    let short_commit = tollgate_manifest::snapshot::short_sha(&snapshot.commit.sha);
    let branch = super::branch_for(
        &repo,
        target,
        format!("tollgate/rollback-{name}-to-{index}"),
    );
    let message = format!("Roll back {name} to snapshot #{index} ({short_commit})");
    let commit = commit_on_new_branch(
        &repo,
        &tip,
        &FileCommit {
            branch: &branch,
            direct: false,
            file: &current_file,
            content: edited.as_bytes(),
            message: &message,
        },
    )?;
    Ok(EditOutcome {
        branch,
        direct: false,
        commit: commit.to_string(),
        base: tip.id().to_string(),
        file: current_file,
        message,
        snapshot_index: index,
        snapshot_id: snapshot.id().to_string(),
        notes,
        warnings,
    })
}

/// The file at the tip (`at_tip`, `None` when it is gone) with promotion `name` restored to
/// `old_body` (its document at the snapshot): only the `spec` block is replaced when the tip still
/// defines the promotion, so the tip's metadata stays; otherwise the whole old document is used.
fn restored_text(
    at_tip: Option<&str>,
    file: &str,
    name: &str,
    old_body: &str,
    warnings: &mut Vec<String>,
) -> Result<String, EditError> {
    let Some(text) = at_tip else {
        return Ok(old_body.to_string());
    };
    match find_promotion_document(text, file, name) {
        Ok(document) => {
            let head_body = &text[document.body.clone()];
            let mut body = match splice_spec(head_body, old_body) {
                Some(body) => body,
                None => spec_under_tip_metadata(head_body, old_body, file, name, warnings),
            };
            if document.body.end < text.len() && !body.ends_with('\n') {
                body.push('\n');
            }
            Ok(format!(
                "{}{body}{}",
                &text[..document.body.start],
                &text[document.body.end..]
            ))
        }
        // Removed from a file that still exists: add it back as one more document.
        Err(EditError::DocumentNotFound { .. }) => {
            let separator = if text.is_empty() || text.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            Ok(format!("{text}{separator}---\n{old_body}"))
        }
        Err(other) => Err(other),
    }
}

/// The tip's document `head` with the spec of `old` when the spec cannot be spliced as lines (a
/// flow-style document): `old` itself when nothing else differs, otherwise the content written
/// again in block style (both said in `warnings`). `old` when either does not parse.
fn spec_under_tip_metadata(
    head: &str,
    old: &str,
    file: &str,
    name: &str,
    warnings: &mut Vec<String>,
) -> String {
    let restored = content_of(head)
        .zip(content_of(old))
        .map(|(mut head, old)| {
            head["spec"] = old["spec"].clone();
            (head, old)
        });
    let rewritten = match &restored {
        Some((expected, old)) if expected != old => block_style_text(expected),
        _ => None,
    };
    match rewritten {
        Some(text) => {
            warnings.push(format!(
                "{file}: the spec of {name:?} is not a block-style top-level `spec:` at the tip or in the snapshot; its document was written again in block style with the snapshot's spec under the tip's metadata (its comments and formatting are gone; the file's other documents are untouched)"
            ));
            text
        }
        None => {
            warnings.push(format!(
                "{file}: the spec of {name:?} is not a block-style top-level `spec:` at the tip or in the snapshot; restored the snapshot's whole document (its metadata is the tip's)"
            ));
            old.to_string()
        }
    }
}

/// The file the promotion lives in at the tip; where it was when it is gone from the branch.
fn file_at_tip(view: Option<&PromotionView>, snapshot: &Snapshot) -> String {
    match view {
        Some(PromotionView::Valid { snapshot: current }) => current.file.clone(),
        Some(PromotionView::Invalid { errors, last_good }) => errors
            .first()
            .map(|d| d.file.clone())
            .or_else(|| last_good.as_ref().map(|s| s.file.clone()))
            .unwrap_or_else(|| snapshot.file.clone()),
        None => snapshot.file.clone(),
    }
}

/// The text of the file `snapshot` was read from, as of the commit that introduced it.
fn snapshot_text(repo: &Repository, snapshot: &Snapshot, name: &str) -> Result<String, EditError> {
    let sha = &snapshot.commit.sha;
    let oid = Oid::from_str(sha).map_err(git_error(format!("parse commit {sha}")))?;
    let commit = repo
        .find_commit(oid)
        .map_err(git_error(format!("read commit {sha}")))?;
    let bytes = read_file_at(repo, &commit, &snapshot.file)?.ok_or_else(|| {
        EditError::DocumentNotFound {
            file: snapshot.file.clone(),
            name: name.to_string(),
        }
    })?;
    decode(bytes, &snapshot.file, name)
}

/// Checks that the rolled-back promotion has `snapshot`'s content and, when the tip has a valid
/// `current` one, its metadata; returns what to tell the user about it.
fn verify_rollback(
    result: &ClusterPromotion,
    snapshot: &Snapshot,
    current: Option<&std::sync::Arc<Snapshot>>,
    file: &str,
    branch: &str,
) -> Result<Vec<String>, EditError> {
    let index = snapshot.index;
    let verification = |problem: String| EditError::Verification {
        file: file.to_string(),
        name: result.metadata.name.clone(),
        problem,
    };
    if SpecHashes::of(result) != *snapshot.hashes {
        return Err(verification(format!(
            "does not have the content hashes of snapshot #{index}"
        )));
    }
    let Some(current) = current else {
        return Ok(Vec::new());
    };
    let metadata = &current.promotion.metadata;
    if result.metadata != *metadata {
        return Err(verification(
            "does not keep the metadata of the branch tip".to_string(),
        ));
    }
    let mut notes = vec![format!(
        "spec (profileSpec and stages, with their triggers) is snapshot #{index}'s; metadata (labels, annotations, approvals, pause) is kept from the tip of {branch}"
    )];
    if metadata
        .annotations
        .get(PAUSED_ANNOTATION)
        .map(String::as_str)
        == Some("true")
    {
        notes.push(format!(
            "{PAUSED_ANNOTATION}: \"true\" is kept: the rollback waits until the promotion is unpaused"
        ));
    }
    Ok(notes)
}

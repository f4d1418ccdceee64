//! Committing one annotation on a promotion, as of the branch tip: the text edit, its
//! verification (nothing but the annotation changes) and the commit. `approve`, `retry` and the web
//! view's Pause and Resume buttons go through it.

use git2::Repository;
use tollgate_manifest::{ClusterPromotion, Snapshot, SpecHashes};

use super::annotation::{rewritten_warning, set_annotation};
use super::commit::{FileCommit, commit_on_new_branch};
use super::document::{decode, find_promotion_document, reparse};
use super::target::{Loaded, Target, current_snapshot, load, read_file_at, tip};
use super::{EditError, EditOutcome};

/// One annotation to write into a promotion's manifest and commit (`approve`, `retry`, and the
/// web view's buttons through [`annotate`]).
pub(crate) struct AnnotationCommit<'a> {
    pub name: &'a str,
    pub key: &'a str,
    pub value: &'a str,
    /// The new branch (ignored with `direct`).
    pub branch: String,
    pub message: String,
    /// Commit on the tracked branch itself rather than on a new branch.
    pub direct: bool,
}

/// Writes `edit.key: edit.value` into the promotion as of the branch tip (nothing else changes,
/// which is verified) and commits it, signed as the git configuration says. The outcome names
/// `current`; the caller adds its notes.
pub(crate) fn commit_annotation(
    repo: &Repository,
    target: &Target<'_>,
    current: &Snapshot,
    edit: AnnotationCommit<'_>,
) -> Result<EditOutcome, EditError> {
    let name = edit.name;
    let tip = tip(repo, target.branch)?;
    let file = current.file.clone();
    let text = read_file_at(repo, &tip, &file)?.ok_or_else(|| EditError::DocumentNotFound {
        file: file.clone(),
        name: name.to_string(),
    })?;
    let text = decode(text, &file, name)?;
    let document = find_promotion_document(&text, &file, name)?;
    let annotated = set_annotation(
        &text[document.body.clone()],
        &file,
        name,
        edit.key,
        edit.value,
    )?;
    let mut body = annotated.text;
    if document.body.end < text.len() && !body.ends_with('\n') {
        body.push('\n');
    }
    let edited = format!(
        "{}{body}{}",
        &text[..document.body.start],
        &text[document.body.end..]
    );
    verify_annotated(
        &reparse(&edited, &file, name)?,
        current,
        (edit.key, edit.value),
        &file,
    )?;
    let warnings = match annotated.rewritten {
        true => vec![rewritten_warning(&file, name)],
        false => Vec::new(),
    };
    let branch = match edit.direct {
        true => target.branch.to_string(),
        false => super::branch_for(repo, target, edit.branch),
    };
    let commit = commit_on_new_branch(
        repo,
        &tip,
        &FileCommit {
            branch: &branch,
            direct: edit.direct,
            file: &file,
            content: edited.as_bytes(),
            message: &edit.message,
        },
    )?;
    Ok(EditOutcome {
        branch,
        direct: edit.direct,
        commit: commit.to_string(),
        base: tip.id().to_string(),
        file,
        message: edit.message,
        snapshot_index: current.index,
        snapshot_id: current.id().to_string(),
        notes: Vec::new(),
        warnings,
    })
}

/// One annotation to write on a promotion (pause, resume, retry): the key, a value computed from
/// the value it holds at the tip (`None`: absent), the new branch and the commit message.
pub struct AnnotationEdit<'a> {
    pub key: &'a str,
    pub value: &'a dyn Fn(Option<&str>) -> String,
    pub branch: &'a str,
    pub message: &'a str,
}

/// Writes `edit.key: <value>` into promotion `name` as of the branch tip and commits it on
/// `edit.branch` (through [`commit_annotation`], as `approve` and `retry` do); the content hashes
/// must not change (only metadata is touched). The web view's Pause and Resume buttons use it.
pub fn annotate(
    target: &Target<'_>,
    name: &str,
    edit: &AnnotationEdit<'_>,
) -> Result<EditOutcome, EditError> {
    let Loaded { repo, source } = load(target)?;
    let current = current_snapshot(&source, name, target.branch)?;
    let existing = current.promotion.metadata.annotations.get(edit.key);
    let value = (edit.value)(existing.map(String::as_str));
    let commit = AnnotationCommit {
        name,
        key: edit.key,
        value: &value,
        branch: edit.branch.to_string(),
        message: edit.message.to_string(),
        direct: false,
    };
    let mut outcome = commit_annotation(&repo, target, current, commit)?;
    outcome.notes = vec![format!("wrote {}: {value}", edit.key)];
    Ok(outcome)
}

/// The edit changed nothing but the annotation: same content hashes, and it carries `key: value`.
fn verify_annotated(
    result: &ClusterPromotion,
    current: &Snapshot,
    (key, value): (&str, &str),
    file: &str,
) -> Result<(), EditError> {
    let verification = |problem: String| EditError::Verification {
        file: file.to_string(),
        name: result.metadata.name.clone(),
        problem,
    };
    if SpecHashes::of(result) != *current.hashes {
        return Err(verification("has different content hashes".to_string()));
    }
    if result.metadata.annotations.get(key).map(String::as_str) != Some(value) {
        return Err(verification(format!("does not carry {key}: {value}")));
    }
    Ok(())
}

//! `approve` and `rollback` as git edits: change one promotion's manifest text surgically
//! (comments and formatting kept), check the result still parses to the intended content, and
//! commit it on a new branch built from the branch tip's tree. The working tree, the index and the
//! current checkout are never touched, and nothing is pushed.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use git2::build::TreeUpdateBuilder;
use git2::{Commit, FileMode, ObjectType, Oid, Repository};
use serde_json::Value;
use serde_saphyr::Spanned;
use tollgate_manifest::located::{self, Locations, Node, child_path};
use tollgate_manifest::parse::{Limits, parse_file};
use tollgate_manifest::snapshot::{APPROVE_ANNOTATION_PREFIX, PAUSED_ANNOTATION};
use tollgate_manifest::{ClusterPromotion, Snapshot, SpecHashes, Trigger};

use crate::config::SourceConfig;
use crate::error::SourceError;
use crate::report::PromotionView;
use crate::source::GitSource;

pub mod annotation;
pub mod policy;
pub mod retry;
pub mod seal;

#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("cannot read branch {branch:?} of {repo}: {source}")]
    Source {
        repo: String,
        branch: String,
        #[source]
        source: Box<SourceError>,
    },
    #[error("no ClusterPromotion named {name:?} on branch {branch:?} (known: {known})")]
    UnknownPromotion {
        name: String,
        branch: String,
        known: String,
    },
    #[error("ClusterPromotion {name:?} has no stage {stage:?} (stages: {stages})")]
    UnknownStage {
        name: String,
        stage: String,
        stages: String,
    },
    #[error("ClusterPromotion {name:?} has no snapshot {selector:?} (snapshots: #1..#{count})")]
    UnknownSnapshot {
        name: String,
        selector: String,
        count: usize,
    },
    #[error(
        "stage {stage:?} of ClusterPromotion {name:?} has {trigger}, not a manual one: there is no gate to approve"
    )]
    NotManualStage {
        name: String,
        stage: String,
        /// `an auto trigger` or `no trigger`.
        trigger: &'static str,
    },
    #[error("snapshot id prefix {selector:?} of ClusterPromotion {name:?} is ambiguous")]
    AmbiguousSnapshot { name: String, selector: String },
    #[error("ClusterPromotion {name:?} is invalid at the tip of {branch:?}: {errors}")]
    InvalidAtTip {
        name: String,
        branch: String,
        errors: String,
    },
    #[error(
        "ClusterPromotion {name:?} at the tip of {branch:?} already has the content of snapshot #{index}; nothing to roll back"
    )]
    AlreadyAtSnapshot {
        name: String,
        branch: String,
        index: u64,
    },
    #[error("{file}: no ClusterPromotion document named {name:?}")]
    DocumentNotFound { file: String, name: String },
    #[error("{file}: ClusterPromotion {name:?} is defined more than once")]
    DuplicateDocument { file: String, name: String },
    #[error("{file}: cannot read the YAML of ClusterPromotion {name:?}: {message}")]
    Yaml {
        file: String,
        name: String,
        message: String,
    },
    #[error(
        "{file}:{line}: `{field}` of ClusterPromotion {name:?} is not a block mapping (flow style or multi-line value); rewrite it in block style to edit it"
    )]
    NotBlockStyle {
        file: String,
        name: String,
        field: String,
        line: u32,
    },
    #[error(
        "{file}: after the edit, ClusterPromotion {name:?} {problem}; the edit was not committed"
    )]
    Verification {
        file: String,
        name: String,
        problem: String,
    },
    #[error(
        "git user.name and user.email must be set (git config user.name …; git config user.email …) to commit: {source}"
    )]
    NoIdentity {
        #[source]
        source: git2::Error,
    },
    #[error(
        "branch {branch:?} already exists; delete it (git branch -D {branch}) or push it as it is"
    )]
    BranchExists { branch: String },
    #[error(
        "cannot sign the commit with your git signing configuration (gpg.format, user.signingKey): {0}; nothing was committed"
    )]
    Signing(#[from] crate::sign::SignError),
    #[error(
        "the approval policy of stage {stage:?} requires signed approvals, and git signs nothing here: set user.signingKey (and gpg.format ssh for an SSH key); nothing was committed"
    )]
    SigningRequired { stage: String },
    #[error(
        "the tip of {branch:?} carries a commit the controller would not roll out: {refusal}. A commit made on top of it would sign for it; nothing was committed (sign or revert that commit first)"
    )]
    UnverifiedTip { branch: String, refusal: String },
    #[error(
        "an approval by the admins of RolloutPolicy {policy:?} counts only signed, and git signs nothing here: set user.signingKey (and gpg.format ssh for an SSH key); nothing was committed"
    )]
    AdminSignatureRequired { policy: String },
    #[error("no change waits for the admins of RolloutPolicy {policy:?}: nothing to approve")]
    NothingToApprove { policy: String },
    #[error(
        "a seal must be signed, and git signs nothing here: set user.signingKey (and gpg.format ssh for an SSH key); nothing was committed"
    )]
    SealUnsigned,
    #[error("a seal needs a one-line justification (why the history before it is vouched for)")]
    SealJustification,
    #[error(
        "{file} has uncommitted changes in the working tree or the index of the checked-out branch; commit or stash them first (nothing was committed)"
    )]
    UncommittedChanges { file: String },
    #[error("committed, but cannot update {file} in the working tree: {message}")]
    Checkout { file: String, message: String },
    #[error("git: cannot {what}: {source}")]
    Git {
        what: String,
        #[source]
        source: git2::Error,
    },
}

impl EditError {
    /// Whether the request itself is wrong (unknown name, stage or snapshot, invalid manifest),
    /// as opposed to a repository or environment problem.
    pub fn is_request_error(&self) -> bool {
        matches!(
            self,
            EditError::UnknownPromotion { .. }
                | EditError::UnknownStage { .. }
                | EditError::NotManualStage { .. }
                | EditError::UnknownSnapshot { .. }
                | EditError::AmbiguousSnapshot { .. }
                | EditError::InvalidAtTip { .. }
                | EditError::AlreadyAtSnapshot { .. }
                | EditError::SealJustification
                | EditError::NothingToApprove { .. }
        )
    }
}

pub(crate) fn git_error(what: impl Into<String>) -> impl FnOnce(git2::Error) -> EditError {
    let what = what.into();
    move |source| EditError::Git { what, source }
}

// ---------------------------------------------------------------------------------------------
// Documents of a multi-document file

/// One YAML document of a file: `range` covers all its lines, including a leading `---` marker
/// line; `body` the lines after that marker (the whole range when there is none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocumentSpan {
    pub range: Range<usize>,
    pub body: Range<usize>,
}

fn is_document_marker(line: &str) -> bool {
    line.strip_prefix("---")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
}

/// Splits a file at its `---` document markers (byte ranges, lines kept whole).
pub fn split_documents(text: &str) -> Vec<DocumentSpan> {
    let mut documents = Vec::new();
    let mut start = 0;
    let mut body_start = 0;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if is_document_marker(line) {
            if offset > 0 {
                documents.push(DocumentSpan {
                    range: start..offset,
                    body: body_start..offset,
                });
            }
            start = offset;
            body_start = offset + line.len();
        }
        offset += line.len();
    }
    documents.push(DocumentSpan {
        range: start..text.len(),
        body: body_start.min(text.len())..text.len(),
    });
    documents
}

/// The document of `text` that defines ClusterPromotion `name` (valid or not).
pub fn find_promotion_document(
    text: &str,
    file: &str,
    name: &str,
) -> Result<DocumentSpan, EditError> {
    let limits = Limits::default();
    let mut found = None;
    for document in split_documents(text) {
        let parsed = parse_file(file, text[document.body.clone()].as_bytes(), &limits);
        let count = parsed
            .promotions
            .iter()
            .filter(|p| p.name.as_deref() == Some(name))
            .count();
        if count > 1 || (count == 1 && found.is_some()) {
            return Err(EditError::DuplicateDocument {
                file: file.to_string(),
                name: name.to_string(),
            });
        }
        if count == 1 {
            found = Some(document);
        }
    }
    found.ok_or_else(|| EditError::DocumentNotFound {
        file: file.to_string(),
        name: name.to_string(),
    })
}

// ---------------------------------------------------------------------------------------------
// The annotation edit

/// Where a document's fields are written, for line-based edits.
struct LocatedDocument {
    json: Value,
    locations: Locations,
}

fn locate_document(body: &str) -> Result<LocatedDocument, String> {
    let root: Spanned<Node> = serde_saphyr::from_str(body).map_err(|e| e.to_string())?;
    let mut locations = Locations::default();
    let mut problems = Vec::new();
    let json = located::to_json(&root, &mut locations, &mut problems);
    match problems.first() {
        Some(problem) => Err(problem.message.clone()),
        None => Ok(LocatedDocument { json, locations }),
    }
}

pub use annotation::{Annotated, set_annotation};

/// Sets `metadata.annotations[key]` to the string `value` in one document's text written in block
/// style: replaces the annotation's line when present, otherwise inserts one line under
/// `annotations:` (creating that key under `metadata:` when absent). Every other line is kept byte
/// for byte. `NotBlockStyle` for a flow-style path ([`set_annotation`] edits any style).
pub(crate) fn set_block_annotation(
    body: &str,
    file: &str,
    name: &str,
    key: &str,
    value: &str,
) -> Result<String, EditError> {
    let document = locate_document(body).map_err(|message| EditError::Yaml {
        file: file.to_string(),
        name: name.to_string(),
        message,
    })?;
    let not_block = |field: &str, line: u32| EditError::NotBlockStyle {
        file: file.to_string(),
        name: name.to_string(),
        field: field.to_string(),
        line,
    };
    let newline = if body.contains("\r\n") { "\r\n" } else { "\n" };
    let mut lines: Vec<String> = body.split_inclusive('\n').map(str::to_string).collect();
    // The quotes keep an all-digit id a string.
    let entry = |indent: usize| format!("{}{key}: \"{value}\"{newline}", " ".repeat(indent));
    let indent_of = |column: u32| column.saturating_sub(1) as usize;
    let line_index = |line: u32| line.saturating_sub(1) as usize;

    let metadata = document
        .locations
        .get("metadata")
        .filter(|_| document.json.get("metadata").is_some_and(Value::is_object))
        .ok_or_else(|| not_block("metadata", 1))?;
    let metadata_key = metadata.key.unwrap_or(metadata.value);
    if metadata.value.line <= metadata_key.line {
        return Err(not_block("metadata", metadata_key.line));
    }
    let annotations_path = child_path("metadata", "annotations");
    let entry_path = child_path(&annotations_path, key);

    if let Some(existing) = document.locations.get(&entry_path) {
        let key_loc = existing.key.unwrap_or(existing.value);
        if existing.value.line != key_loc.line || existing.container {
            return Err(not_block(&entry_path, key_loc.line));
        }
        let index = line_index(key_loc.line);
        ensure_line(&lines, index).map_err(|l| not_block(&entry_path, l))?;
        lines[index] = ending_like(&entry(indent_of(key_loc.column)), &lines[index]);
        return Ok(lines.concat());
    }

    match (
        document.locations.get(&annotations_path),
        document.json.pointer("/metadata/annotations"),
    ) {
        (Some(annotations), Some(Value::Object(map))) if !map.is_empty() => {
            let key_loc = annotations.key.unwrap_or(annotations.value);
            if annotations.value.line <= key_loc.line {
                return Err(not_block(&annotations_path, key_loc.line));
            }
            let index = line_index(annotations.value.line);
            ensure_line(&lines, index).map_err(|l| not_block(&annotations_path, l))?;
            lines.insert(index, entry(indent_of(annotations.value.column)));
        }
        (Some(annotations), Some(Value::Object(_) | Value::Null)) => {
            // `annotations:`, `annotations: {}` or `annotations: ~`: rewrite that one line.
            let key_loc = annotations.key.unwrap_or(annotations.value);
            let index = line_index(key_loc.line);
            ensure_line(&lines, index).map_err(|l| not_block(&annotations_path, l))?;
            let indent = indent_of(key_loc.column);
            let header = format!("{}annotations:{newline}", " ".repeat(indent));
            lines[index] = header;
            lines.insert(index + 1, entry(indent + 2));
        }
        (Some(annotations), _) => {
            let line = annotations.key.unwrap_or(annotations.value).line;
            return Err(not_block(&annotations_path, line));
        }
        (None, _) => {
            let index = line_index(metadata.value.line);
            ensure_line(&lines, index).map_err(|l| not_block("metadata", l))?;
            let indent = indent_of(metadata.value.column);
            lines.insert(index, entry(indent + 2));
            lines.insert(
                index,
                format!("{}annotations:{newline}", " ".repeat(indent)),
            );
        }
    }
    Ok(lines.concat())
}

fn ensure_line(lines: &[String], index: usize) -> Result<(), u32> {
    if index < lines.len() {
        Ok(())
    } else {
        Err(u32::try_from(index + 1).unwrap_or(u32::MAX))
    }
}

/// `replacement` with the line ending `original` had (none for a last line without one).
fn ending_like(replacement: &str, original: &str) -> String {
    let content = replacement.trim_end_matches(['\r', '\n']);
    let ending = &original[original.trim_end_matches(['\r', '\n']).len()..];
    format!("{content}{ending}")
}

/// The lines of a document's top-level `key` block: from its key's line up to the next top-level
/// key, less the blank and column-1 comment lines just before that key (they introduce it).
fn top_level_block(body: &str, key: &str) -> Option<Range<usize>> {
    let document = locate_document(body).ok()?;
    let key_loc = document.locations.get(key)?.key?;
    // A block-style top-level key starts its line; anything else (a flow-style document) cannot
    // be cut into lines.
    if key_loc.column != 1 {
        return None;
    }
    let start_line = key_loc.line;
    let next_line = document
        .json
        .as_object()?
        .keys()
        .filter_map(|k| document.locations.get(&child_path("", k))?.key)
        .map(|loc| loc.line)
        .filter(|&line| line > start_line)
        .min();
    let mut offsets = Vec::new();
    let mut offset = 0;
    for line in body.split_inclusive('\n') {
        offsets.push((offset, line));
        offset += line.len();
    }
    let line_start = |line: u32| {
        offsets
            .get(line.saturating_sub(1) as usize)
            .map(|(o, _)| *o)
    };
    let start = line_start(start_line)?;
    let mut end = next_line.and_then(line_start).unwrap_or(body.len());
    // Give the trailing blank and column-1 comment lines back to what follows.
    for (line_offset, line) in offsets.iter().rev() {
        if *line_offset >= end {
            continue;
        }
        if *line_offset <= start || !(line.trim().is_empty() || line.starts_with('#')) {
            break;
        }
        end = *line_offset;
    }
    Some(start..end)
}

/// `head` (a document's text) with its top-level `spec` block replaced by `old`'s: the content of
/// an earlier snapshot under the current metadata (paused flag, approvals, labels, annotations).
/// `None` when either document has no block-style top-level `spec` to splice.
pub fn splice_spec(head: &str, old: &str) -> Option<String> {
    let head_spec = top_level_block(head, "spec")?;
    let old_spec = top_level_block(old, "spec")?;
    let mut spec = old[old_spec].to_string();
    if head_spec.end < head.len() && !spec.ends_with('\n') {
        spec.push('\n');
    }
    Some(format!(
        "{}{spec}{}",
        &head[..head_spec.start],
        &head[head_spec.end..]
    ))
}

// ---------------------------------------------------------------------------------------------
// Verification

/// Parses `text` and returns promotion `name`, which must be valid.
fn reparse(text: &str, file: &str, name: &str) -> Result<ClusterPromotion, EditError> {
    let problem = |problem: String| EditError::Verification {
        file: file.to_string(),
        name: name.to_string(),
        problem,
    };
    let parsed = parse_file(file, text.as_bytes(), &Limits::default());
    if let Some(error) = parsed.diagnostics.first() {
        return Err(problem(format!("does not parse: {error}")));
    }
    let mut matching = parsed
        .promotions
        .into_iter()
        .filter(|p| p.name.as_deref() == Some(name));
    let (Some(document), None) = (matching.next(), matching.next()) else {
        return Err(problem("is not defined exactly once".to_string()));
    };
    match document.promotion {
        Some(promotion) => Ok(promotion),
        None => {
            let errors: Vec<String> = document.diagnostics.iter().map(|d| d.to_string()).collect();
            Err(problem(format!("does not validate: {}", errors.join("; "))))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Git: read a file at a commit, commit one changed file on a new branch

/// The content of `path` at `commit`, `None` when there is no such file.
pub fn read_file_at(
    repo: &Repository,
    commit: &Commit<'_>,
    path: &str,
) -> Result<Option<Vec<u8>>, EditError> {
    let tree = commit
        .tree()
        .map_err(git_error(format!("read the tree of {}", commit.id())))?;
    let entry = match tree.get_path(Path::new(path)) {
        Ok(entry) => entry,
        Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(None),
        Err(e) => return Err(git_error(format!("find {path} at {}", commit.id()))(e)),
    };
    if entry.kind() != Some(ObjectType::Blob) {
        return Ok(None);
    }
    let blob = repo
        .find_blob(entry.id())
        .map_err(git_error(format!("read {path} at {}", commit.id())))?;
    Ok(Some(blob.content().to_vec()))
}

/// A one-file change to commit on a new branch.
pub struct FileCommit<'a> {
    /// The new branch; with `direct`, the existing branch whose tip `base` is, moved forward.
    pub branch: &'a str,
    pub direct: bool,
    pub file: &'a str,
    pub content: &'a [u8],
    pub message: &'a str,
}

/// Commits `change` on top of `base` and points the new branch `refs/heads/<branch>` at it. The
/// new tree is `base`'s tree with one blob replaced; no checkout, index or working tree is used.
pub fn commit_on_new_branch(
    repo: &Repository,
    base: &Commit<'_>,
    change: &FileCommit<'_>,
) -> Result<Oid, EditError> {
    let base_tree = base
        .tree()
        .map_err(git_error(format!("read the tree of {}", base.id())))?;
    let mode = match base_tree.get_path(Path::new(change.file)) {
        Ok(entry) if entry.filemode() == i32::from(FileMode::BlobExecutable) => {
            FileMode::BlobExecutable
        }
        _ => FileMode::Blob,
    };
    let blob = repo
        .blob(change.content)
        .map_err(git_error(format!("write the new {}", change.file)))?;
    let tree_id = TreeUpdateBuilder::new()
        .upsert(change.file, blob, mode)
        .create_updated(repo, &base_tree)
        .map_err(git_error("build the new tree"))?;
    let tree = repo
        .find_tree(tree_id)
        .map_err(git_error("read the new tree"))?;
    if !change.direct {
        return commit_tree(repo, base, &tree, change.branch, change.message);
    }
    // On the checked-out branch, the index and working tree follow the commit (as `git commit`
    // would have them); uncommitted changes to the file refuse it first.
    let checked_out = crate::checkout::is_checked_out(repo, change.branch);
    if checked_out {
        let base_blob = base_tree
            .get_path(Path::new(change.file))
            .ok()
            .map(|e| e.id());
        crate::checkout::ensure_unchanged(repo, change.file, base_blob)?;
    }
    let commit = commit_tree_on_tip(repo, base, &tree, change.branch, change.message)?;
    if checked_out {
        crate::checkout::follow(repo, change.file, change.content)?;
    }
    Ok(commit)
}

/// Commits `tree` on top of `base`, the tip of `branch`, and moves `branch` to it (refused when
/// the tip moved meanwhile).
fn commit_tree_on_tip(
    repo: &Repository,
    base: &Commit<'_>,
    tree: &git2::Tree<'_>,
    branch: &str,
    message: &str,
) -> Result<Oid, EditError> {
    let commit = create_commit(repo, base, tree, message)?;
    repo.reference_matching(
        &format!("refs/heads/{branch}"),
        commit,
        true,
        base.id(),
        message,
    )
    .map_err(git_error(format!("move branch {branch} to the new commit")))?;
    Ok(commit)
}

/// Commits `tree` on top of `base`, signed when the repository's git configuration signs
/// commits (see [`crate::sign`]), and points the new branch `refs/heads/<branch>` at it.
pub fn commit_tree(
    repo: &Repository,
    base: &Commit<'_>,
    tree: &git2::Tree<'_>,
    branch: &str,
    message: &str,
) -> Result<Oid, EditError> {
    let reference = format!("refs/heads/{branch}");
    if repo.find_reference(&reference).is_ok() {
        return Err(EditError::BranchExists {
            branch: branch.to_string(),
        });
    }
    let commit = create_commit(repo, base, tree, message)?;
    repo.reference(&reference, commit, false, message)
        .map_err(git_error(format!("create branch {branch}")))?;
    Ok(commit)
}

/// A statement commit to make: empty, on the branch tip, on a new branch.
pub(crate) struct Statement {
    pub branch: String,
    pub subject: String,
    pub message: String,
    /// What to tell the user.
    pub notes: Vec<String>,
}

/// Commits `statement` on `tip` (its tree unchanged: a statement commit, issue #44).
pub(crate) fn commit_statement(
    repo: &Repository,
    tip: &Commit<'_>,
    statement: Statement,
) -> Result<EditOutcome, EditError> {
    let tree = tip
        .tree()
        .map_err(git_error(format!("read the tree of {}", tip.id())))?;
    let commit = commit_tree(repo, tip, &tree, &statement.branch, &statement.message)?;
    Ok(EditOutcome {
        branch: statement.branch,
        direct: false,
        commit: commit.to_string(),
        base: tip.id().to_string(),
        file: String::new(),
        message: statement.subject,
        snapshot_index: 0,
        snapshot_id: String::new(),
        notes: statement.notes,
        warnings: Vec::new(),
    })
}

/// The commit object of `tree` on top of `base`, signed when the git configuration signs.
fn create_commit(
    repo: &Repository,
    base: &Commit<'_>,
    tree: &git2::Tree<'_>,
    message: &str,
) -> Result<Oid, EditError> {
    let signature = repo
        .signature()
        .map_err(|source| EditError::NoIdentity { source })?;
    let committer = format!(
        "{} <{}>",
        signature.name().unwrap_or_default(),
        signature.email().unwrap_or_default()
    );
    let commit = match crate::sign::Signing::from_config(repo, &committer)? {
        None => repo
            .commit(None, &signature, &signature, message, tree, &[base])
            .map_err(git_error("create the commit"))?,
        Some(signing) => {
            let buffer = repo
                .commit_create_buffer(&signature, &signature, message, tree, &[base])
                .map_err(git_error("create the commit"))?;
            let payload = buffer.as_str().map_err(|_| EditError::Git {
                what: "sign the commit".to_string(),
                source: git2::Error::from_str("the commit is not UTF-8"),
            })?;
            let armored = signing.sign(payload.as_bytes())?;
            repo.commit_signed(payload, &armored, None)
                .map_err(git_error("create the signed commit"))?
        }
    };
    Ok(commit)
}

/// How the repository's git configuration signs commits, in words (`None`: it does not).
pub(crate) fn signing_note(repo: &Repository) -> Result<Option<String>, EditError> {
    let committer = repo
        .signature()
        .map(|s| s.to_string())
        .map_err(|source| EditError::NoIdentity { source })?;
    Ok(
        crate::sign::Signing::from_config(repo, &committer)?.map(|signing| {
            let format = match signing.format {
                crate::sign::SigningFormat::OpenPgp => "OpenPGP",
                crate::sign::SigningFormat::Ssh => "SSH",
            };
            format!("signed with your {format} key {}", signing.key)
        }),
    )
}

// ---------------------------------------------------------------------------------------------
// approve / rollback

/// Where to read from: a local clone, its branch and the manifests' sub-path.
#[derive(Clone, Debug)]
pub struct Target<'a> {
    pub repo: &'a Path,
    pub branch: &'a str,
    pub path: &'a str,
    /// The controller's verification (issue #44): snapshots are numbered as the controller
    /// numbers them, and with a `--verify-commits` mode nothing is committed on a tip that
    /// carries a commit that would not verify (a signed commit on top would vouch for it).
    pub trust: Option<&'a crate::TrustConfig>,
}

/// A commit made on a new branch, for the CLI to report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditOutcome {
    /// The new branch, or the tracked branch itself when `direct`.
    pub branch: String,
    /// Committed on the tracked branch itself (`--commit`), not on a new branch.
    pub direct: bool,
    pub commit: String,
    /// The tip of the source branch the new commit sits on.
    pub base: String,
    pub file: String,
    pub message: String,
    pub snapshot_index: u64,
    pub snapshot_id: String,
    /// What was written and why, for the user (e.g. which form of approval value).
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
}

pub(crate) struct Loaded {
    pub repo: Repository,
    pub source: GitSource,
}

pub(crate) fn load(target: &Target<'_>) -> Result<Loaded, EditError> {
    let source_error = |source| EditError::Source {
        repo: target.repo.display().to_string(),
        branch: target.branch.to_string(),
        source: Box::new(source),
    };
    let repo_text = target.repo.to_string_lossy().into_owned();
    let repo = Repository::open(target.repo).map_err(|source| {
        source_error(SourceError::Open {
            repo: repo_text.clone(),
            source,
        })
    })?;
    // Local repositories are read in place: the cache directory is never used.
    let mut config = SourceConfig::new(repo_text, target.branch, target.path, std::env::temp_dir());
    if let Some(trust) = target.trust {
        config.trust = trust.clone();
    }
    let mut source = GitSource::open(config).map_err(source_error)?;
    source.sync().map_err(source_error)?;
    if let Some(refusal) = source.refusal() {
        return Err(EditError::UnverifiedTip {
            branch: target.branch.to_string(),
            refusal: refusal.message(),
        });
    }
    Ok(Loaded { repo, source })
}

pub(crate) fn tip<'r>(repo: &'r Repository, branch: &str) -> Result<Commit<'r>, EditError> {
    repo.find_reference(&format!("refs/heads/{branch}"))
        .and_then(|r| r.peel_to_commit())
        .map_err(git_error(format!("read the tip of branch {branch}")))
}

fn unknown_promotion(source: &GitSource, name: &str, branch: &str) -> EditError {
    let known: Vec<&str> = source.promotions().map(|(n, _)| n).collect();
    EditError::UnknownPromotion {
        name: name.to_string(),
        branch: branch.to_string(),
        known: if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        },
    }
}

/// `#N`, `N`, or a snapshot-id prefix.
fn select_snapshot<'s>(
    history: &'s [Snapshot],
    name: &str,
    selector: &str,
) -> Result<&'s Snapshot, EditError> {
    let unknown = || EditError::UnknownSnapshot {
        name: name.to_string(),
        selector: selector.to_string(),
        count: history.len(),
    };
    let number = selector.strip_prefix('#').unwrap_or(selector);
    if let Ok(index) = number.parse::<u64>()
        && (selector.starts_with('#') || number.len() < 12)
    {
        return history
            .iter()
            .find(|s| s.index == index)
            .ok_or_else(unknown);
    }
    let prefix = selector.to_ascii_lowercase();
    let mut matching = history.iter().filter(|s| s.id().starts_with(&prefix));
    match (matching.next(), matching.next()) {
        (Some(snapshot), None) => Ok(snapshot),
        (Some(_), Some(_)) => Err(EditError::AmbiguousSnapshot {
            name: name.to_string(),
            selector: selector.to_string(),
        }),
        (None, _) => Err(unknown()),
    }
}

fn decode(bytes: Vec<u8>, file: &str, name: &str) -> Result<String, EditError> {
    String::from_utf8(bytes).map_err(|_| EditError::Yaml {
        file: file.to_string(),
        name: name.to_string(),
        message: "file is not valid UTF-8".to_string(),
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
    if existing == Some(&id12) {
        let sha = chosen.commit.sha.clone();
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

/// The current snapshot of promotion `name` at the tip; an invalid or unknown promotion is a
/// request error.
pub(crate) fn current_snapshot<'s>(
    source: &'s GitSource,
    name: &str,
    branch: &str,
) -> Result<&'s Snapshot, EditError> {
    match source.promotion(name) {
        None => Err(unknown_promotion(source, name, branch)),
        Some(PromotionView::Invalid { errors, .. }) => {
            let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
            Err(EditError::InvalidAtTip {
                name: name.to_string(),
                branch: branch.to_string(),
                errors: errors.join("; "),
            })
        }
        Some(PromotionView::Valid { snapshot }) => Ok(snapshot),
    }
}

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
        branch: format!("tollgate/approve-{name}-{stage}-{value12}"),
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
        true => vec![annotation::rewritten_warning(&file, name)],
        false => Vec::new(),
    };
    let branch = match edit.direct {
        true => target.branch.to_string(),
        false => edit.branch,
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
    let trailer_for = policy.map(|p| p.min_approvals).filter(|min| *min > 1);
    Ok((trailer_for, signed))
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
    let branch = format!(
        "tollgate/approve-{name}-{stage}-{id12}-{}",
        approver_slug(repo)
    );
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
fn approver_slug(repo: &Repository) -> String {
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
    let restored = annotation::content_of(head)
        .zip(annotation::content_of(old))
        .map(|(mut head, old)| {
            head["spec"] = old["spec"].clone();
            (head, old)
        });
    let rewritten = match &restored {
        Some((expected, old)) if expected != old => {
            annotation::block_style_text(expected)
        }
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
    let branch = format!("tollgate/rollback-{name}-to-{index}");
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

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
# leading comment
apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata:
  name: app   # the name
  labels:
    team: a
spec:
  stages:
  - name: prod
    clusterSelector:
      matchLabels:
        env: prod
    trigger:
      manual: {}
";

    #[test]
    fn splits_documents_at_markers_only() {
        let text = "a: 1\n---\nb: 2\n--- # c\nc: |\n  ---x\n";
        let spans = split_documents(text);
        let bodies: Vec<&str> = spans.iter().map(|s| &text[s.body.clone()]).collect();
        assert_eq!(bodies, ["a: 1\n", "b: 2\n", "c: |\n  ---x\n"]);
        assert_eq!(&text[spans[1].range.clone()], "---\nb: 2\n");
        let leading = split_documents("---\na: 1\n");
        assert_eq!(leading.len(), 1);
        assert_eq!(leading[0].body, 4..9);
    }

    #[test]
    fn creates_annotations_under_metadata() {
        let edited = set_annotation(
            DOC,
            "f.yaml",
            "app",
            "approve.tollgate.dev/prod",
            "0123456789ab",
        )
        .expect("edit")
        .text;
        let expected = DOC.replace(
            "metadata:\n",
            "metadata:\n  annotations:\n    approve.tollgate.dev/prod: \"0123456789ab\"\n",
        );
        assert_eq!(edited, expected);
    }

    #[test]
    fn inserts_into_existing_annotations_and_replaces_existing_value() {
        let doc = DOC.replace(
            "  labels:\n",
            "  annotations:\n    note: x # why\n  labels:\n",
        );
        let added = set_annotation(
            &doc,
            "f.yaml",
            "app",
            "approve.tollgate.dev/prod",
            "111111111111",
        )
        .expect("insert")
        .text;
        assert_eq!(
            added,
            doc.replace(
                "    note: x",
                "    approve.tollgate.dev/prod: \"111111111111\"\n    note: x"
            )
        );
        let replaced = set_annotation(
            &added,
            "f.yaml",
            "app",
            "approve.tollgate.dev/prod",
            "222222222222",
        )
        .expect("replace")
        .text;
        assert_eq!(replaced, added.replace("111111111111", "222222222222"));
    }

    #[test]
    fn rewrites_empty_annotations() {
        let doc = DOC.replace("  labels:\n", "  annotations: {}\n  labels:\n");
        let edited = set_annotation(&doc, "f.yaml", "app", "k", "v")
            .expect("edit")
            .text;
        assert!(
            edited.contains("  annotations:\n    k: \"v\"\n  labels:\n"),
            "{edited}"
        );
    }

    #[test]
    fn edits_flow_style_metadata_in_place() {
        let doc = "apiVersion: v1\nkind: ClusterPromotion\nmetadata: {name: app} # c\nspec: {}\n";
        let edited = set_annotation(doc, "f.yaml", "app", "k", "v").expect("flow");
        assert_eq!(
            edited.text,
            doc.replace("{name: app}", "{annotations: {k: \"v\"}, name: app}")
        );
        assert!(!edited.rewritten);
    }

    #[test]
    fn finds_the_named_document() {
        let text = format!("{DOC}---\n{}", DOC.replace("name: app", "name: other"));
        let span = find_promotion_document(&text, "f.yaml", "other").expect("found");
        assert!(text[span.body.clone()].contains("name: other"));
        assert!(matches!(
            find_promotion_document(&text, "f.yaml", "none"),
            Err(EditError::DocumentNotFound { .. })
        ));
        let twice = format!("{DOC}---\n{DOC}");
        assert!(matches!(
            find_promotion_document(&twice, "f.yaml", "app"),
            Err(EditError::DuplicateDocument { .. })
        ));
    }

    #[test]
    fn splices_the_spec_block_and_keeps_everything_else() {
        let head = DOC.replace(
            "  labels:\n",
            "  annotations:\n    tollgate.dev/paused: \"true\"\n  labels:\n",
        ) + "# trailing comment\nstatus: {}\n";
        let old = DOC.replace("env: prod", "env: production") + "# old trailer\n";
        let spliced = splice_spec(&head, &old).expect("splice");
        let expected = head.replace("env: prod\n", "env: production\n");
        assert_eq!(spliced, expected);
        let whole_flow =
            "{apiVersion: v1, kind: ClusterPromotion, metadata: {name: app}, spec: {}}\n";
        assert_eq!(splice_spec(whole_flow, &old), None);
        assert_eq!(splice_spec(&head, whole_flow), None);
        let flow =
            "apiVersion: v1\nkind: ClusterPromotion\nmetadata:\n  name: app\nspec: {stages: []}\n";
        assert_eq!(
            splice_spec(flow, &old).as_deref(),
            Some(
                "apiVersion: v1\nkind: ClusterPromotion\nmetadata:\n  name: app\nspec:\n  stages:\n  - name: prod\n    clusterSelector:\n      matchLabels:\n        env: production\n    trigger:\n      manual: {}\n"
            )
        );
    }
}

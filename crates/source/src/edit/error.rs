//! What an edit command can fail with: the request itself (unknown name, stage or snapshot), the
//! manifest's text, or git (identity, signing, branches).

use crate::error::SourceError;

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

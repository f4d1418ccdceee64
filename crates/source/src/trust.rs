//! Which new commits may become snapshots (`--verify-commits Head|Strict`, issue #33,
//! docs/trust.md). The source indexes only *accepted* commits: the unverified commits between
//! two accepted ones fold into the later one (its diff covers theirs), and an unaccepted branch
//! tip leaves the last accepted commit running, with a [`Refusal`] that says why.

use std::path::PathBuf;

use git2::{Oid, Repository};
use tollgate_model::{SignatureCheck, Unverified};

use crate::trailers;
use crate::verify::CommitChecks;

/// `--verify-commits`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyCommits {
    /// A commit becomes a snapshot only if it is signed by a trusted key.
    Head,
    /// Every commit since the last verified one must be signed by a trusted key; a signed commit
    /// with a `Tollgate-Seal:` trailer vouches for the unsigned history before it.
    Strict,
}

impl VerifyCommits {
    pub fn as_str(self) -> &'static str {
        match self {
            VerifyCommits::Head => "Head",
            VerifyCommits::Strict => "Strict",
        }
    }
}

/// The source's trust configuration. Both off: every commit is accepted and nothing is checked.
#[derive(Clone, Debug, Default)]
pub struct TrustConfig {
    pub verify_commits: Option<VerifyCommits>,
    /// `--trusted-keys DIR`; also checks approval signatures when `verify_commits` is off.
    pub trusted_keys: Option<PathBuf>,
}

/// Why the branch tip is not running: the commit that failed verification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub mode: VerifyCommits,
    /// The commit that failed (the tip for `Head`; the first unverified one for `Strict`).
    pub commit: String,
    pub subject: String,
    pub author: String,
    pub reason: Unverified,
    pub detail: String,
    /// The branch tip.
    pub tip: String,
    /// The last accepted commit, which keeps running (`None`: none yet).
    pub running: Option<String>,
    /// The trusted keys changed and `commit`, which ran then, no longer verifies: it keeps
    /// running (a key change never rolls back) until a verified commit replaces it.
    pub kept: bool,
}

impl Refusal {
    /// One line for status, events and logs: which commit, why, and what keeps running.
    pub fn message(&self) -> String {
        let short = |sha: &str| tollgate_model::snapshot::short_sha(sha).to_string();
        let why = if self.detail.is_empty() {
            self.reason.to_string()
        } else {
            format!("{} ({})", self.reason, self.detail)
        };
        let position = match self.mode {
            VerifyCommits::Head => String::new(),
            VerifyCommits::Strict if self.commit == self.tip => " (Strict)".to_string(),
            VerifyCommits::Strict => format!(
                " (Strict: it is before the branch tip {}; a signed commit with a `Tollgate-Seal:` trailer vouches for it)",
                short(&self.tip)
            ),
        };
        if self.kept {
            return format!(
                "the trusted keys changed: commit {} ({:?} by {}) that runs no longer verifies: {why}; it keeps running (a key change never rolls content back) until a verified commit replaces it",
                short(&self.commit),
                self.subject,
                self.author
            );
        }
        let running = match &self.running {
            Some(sha) => format!("the last verified commit {} keeps running", short(sha)),
            None => "no commit is verified yet: nothing runs".to_string(),
        };
        format!(
            "commit {} ({:?} by {}) failed verification: {why}{position}; {running}",
            short(&self.commit),
            self.subject,
            self.author
        )
    }
}

/// The commits a first-parent commit brings into the branch: itself, then (for a merge) the
/// commits of its other parents not reachable from its first parent, newest first.
pub(crate) fn range_of(
    repo: &Repository,
    commit: &git2::Commit<'_>,
) -> Result<Vec<Oid>, git2::Error> {
    let mut range = vec![commit.id()];
    if commit.parent_count() < 2 {
        return Ok(range);
    }
    let mut walk = repo.revwalk()?;
    for parent in commit.parent_ids().skip(1) {
        walk.push(parent)?;
    }
    walk.hide(commit.parent_id(0)?)?;
    for oid in walk {
        range.push(oid?);
    }
    Ok(range)
}

/// `commits` (first-parent, oldest first, the first at `first_seq`) all accepted, each with its
/// range: how history is read when nothing is verified.
pub(crate) fn accept_all(
    repo: &Repository,
    commits: &[Oid],
    first_seq: u64,
) -> Result<Vec<crate::read::NewCommit>, (Oid, git2::Error)> {
    let mut accepted = Vec::with_capacity(commits.len());
    for (position, oid) in commits.iter().enumerate() {
        let range = repo
            .find_commit(*oid)
            .and_then(|commit| range_of(repo, &commit))
            .map_err(|e| (*oid, e))?;
        accepted.push(crate::read::NewCommit {
            oid: *oid,
            seq: first_seq + position as u64,
            accepted: true,
            range,
        });
    }
    Ok(accepted)
}

/// The verdict on a run of new first-parent commits (oldest first, after the last accepted one).
pub(crate) struct Screen {
    /// Per commit: accepted as a snapshot point.
    pub accepted: Vec<bool>,
    pub refusal: Option<Refusal>,
}

/// Screens `commits` (with their ranges) under `mode`. `running` is the last accepted commit.
/// `pinned` is accepted whatever its signature says: the commit that ran when the trusted keys
/// changed (a key change never rolls running content back; issue #44).
pub(crate) fn screen(
    repo: &Repository,
    commits: &[(Oid, Vec<Oid>)],
    mode: VerifyCommits,
    checks: &mut CommitChecks,
    (running, pinned): (Option<Oid>, Option<Oid>),
) -> Screen {
    let mut accepted = Vec::with_capacity(commits.len());
    // Strict: the first unverified commit since the last accepted one.
    let mut pending: Option<(Oid, SignatureCheck)> = None;
    let mut last_accepted = running;
    for (oid, range) in commits {
        let check = checks.check(repo, *oid);
        if Some(*oid) == pinned {
            pending = None;
            last_accepted = Some(*oid);
            accepted.push(true);
            continue;
        }
        let ok = match mode {
            VerifyCommits::Head => check.is_verified(),
            VerifyCommits::Strict => {
                let seal = check.is_verified() && is_seal(repo, *oid);
                if seal {
                    pending = None;
                } else if pending.is_none() {
                    pending = range
                        .iter()
                        .rev()
                        .map(|c| (*c, checks.check(repo, *c)))
                        .find(|(_, check)| !check.is_verified());
                }
                check.is_verified() && pending.is_none()
            }
        };
        if ok {
            last_accepted = Some(*oid);
        }
        accepted.push(ok);
    }
    let refusal = match (commits.last(), accepted.last()) {
        (Some((tip, _)), Some(false)) => {
            let (failed, check) = match pending {
                Some(pending) => pending,
                None => (*tip, checks.check(repo, *tip)),
            };
            Some(refusal(repo, mode, failed, &check, *tip, last_accepted))
        }
        _ => None,
    };
    Screen { accepted, refusal }
}

/// Whether `oid` is a seal: a statement commit (issue #44: a seal copied into a merge's or a
/// content commit's message vouches for nothing) whose message carries `Tollgate-Seal:`.
fn is_seal(repo: &Repository, oid: Oid) -> bool {
    let Ok(commit) = repo.find_commit(oid) else {
        return false;
    };
    if !commit.message().ok().is_some_and(trailers::is_seal) {
        return false;
    }
    let statement = crate::statement::is_statement(&commit);
    if !statement {
        tracing::warn!(commit = %oid, why = crate::statement::why_not(&commit), "Tollgate-Seal trailer ignored");
    }
    statement
}

fn refusal(
    repo: &Repository,
    mode: VerifyCommits,
    failed: Oid,
    check: &SignatureCheck,
    tip: Oid,
    running: Option<Oid>,
) -> Refusal {
    let commit = repo.find_commit(failed).ok();
    let (reason, detail) = match check {
        SignatureCheck::Unverified { reason, detail } => (*reason, detail.clone()),
        // A verified commit refused in Strict mode is refused for the one before it; this arm
        // is only reached when that one cannot be read.
        SignatureCheck::Verified { .. } => (Unverified::Unsigned, String::new()),
    };
    Refusal {
        mode,
        commit: failed.to_string(),
        subject: commit
            .as_ref()
            .and_then(|c| c.summary().ok().flatten().map(str::to_string))
            .unwrap_or_default(),
        author: commit
            .as_ref()
            .map(|c| {
                let a = c.author();
                format!(
                    "{} <{}>",
                    a.name().unwrap_or_default(),
                    a.email().unwrap_or_default()
                )
            })
            .unwrap_or_default(),
        reason,
        detail,
        tip: tip.to_string(),
        running: running.map(|oid| oid.to_string()),
        kept: false,
    }
}

/// The refusal of a pinned commit (see [`screen`]) that no longer verifies, if it does not.
pub(crate) fn kept_refusal(
    repo: &Repository,
    mode: VerifyCommits,
    checks: &mut CommitChecks,
    pinned: Oid,
    tip: Oid,
) -> Option<Refusal> {
    let check = checks.check(repo, pinned);
    if check.is_verified() {
        return None;
    }
    let mut refusal = refusal(repo, mode, pinned, &check, tip, Some(pinned));
    refusal.kept = true;
    Some(refusal)
}

/// One commit of a range and its signature check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitVerdict {
    pub sha: String,
    pub subject: String,
    pub check: SignatureCheck,
}

/// Whether a range (say a pull request) would verify: each commit `base..tip` brings (oldest
/// first), and what `Head` and `Strict` would do with the tip (`None`: it would roll out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeVerification {
    pub commits: Vec<CommitVerdict>,
    pub head: Option<Refusal>,
    pub strict: Option<Refusal>,
}

/// Verifies the commits of `base..tip` in `repo` against the keys of `keys_dir`, as the
/// controller would once `tip` is the branch tip and `base` runs.
pub fn verify_range(
    repo: &Repository,
    base: Oid,
    tip: Oid,
    keys_dir: &std::path::Path,
) -> Result<RangeVerification, crate::error::SourceError> {
    let keys = crate::verify::TrustedKeys::read_dir(keys_dir)?;
    let mut checks = CommitChecks::new(std::sync::Arc::new(keys));
    let read_error = |source| crate::error::SourceError::Read {
        repo: repo.path().display().to_string(),
        commit: tip.to_string(),
        what: "the commits of the range".to_string(),
        source,
    };
    let mut walk = repo.revwalk().map_err(read_error)?;
    walk.simplify_first_parent().map_err(read_error)?;
    walk.push(tip).map_err(read_error)?;
    walk.hide(base).map_err(read_error)?;
    let mut first_parent = walk.collect::<Result<Vec<Oid>, _>>().map_err(read_error)?;
    first_parent.reverse();
    let mut ranges = Vec::with_capacity(first_parent.len());
    for oid in &first_parent {
        let commit = repo.find_commit(*oid).map_err(read_error)?;
        ranges.push((*oid, range_of(repo, &commit).map_err(read_error)?));
    }
    let mut commits = Vec::new();
    for (_, range) in &ranges {
        for oid in range.iter().rev() {
            let subject = repo
                .find_commit(*oid)
                .ok()
                .and_then(|c| c.summary().ok().flatten().map(str::to_string))
                .unwrap_or_default();
            commits.push(CommitVerdict {
                sha: oid.to_string(),
                subject,
                check: checks.check(repo, *oid),
            });
        }
    }
    let mut verdict = |mode| screen(repo, &ranges, mode, &mut checks, (Some(base), None)).refusal;
    let head = verdict(VerifyCommits::Head);
    let strict = verdict(VerifyCommits::Strict);
    Ok(RangeVerification {
        commits,
        head,
        strict,
    })
}

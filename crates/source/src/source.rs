//! [`GitSource`]: the promotion index of one tracked branch, kept up to date by `sync`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use git2::Oid;
use tollgate_manifest::{ApprovalEvent, CommitInfo, Snapshot};
use tracing::{info, warn};

use crate::backoff::Backoff;
use crate::blob::{Diagnostic, Limits, ParsedBlob};
use crate::config::SourceConfig;
use crate::error::SourceError;
use crate::governance::{GovernanceIndex, Heads};
use crate::index::{HistoryIndex, Summary, change_between};
use crate::poker::Poker;
use crate::policies::{PolicyIndex, PolicySet};
use crate::read::{DeltaReader, IndexedHead, NewCommit, ReadResult};
use crate::repo::RepoAccess;
use crate::report::{Change, PromotionView, SyncReport};
use crate::rewind::Rewind;
use crate::trust::{Refusal, VerifyCommits, accept_all, screen};
use crate::verify::{CommitChecks, TrustedKeysDir};

pub struct GitSource {
    access: RepoAccess,
    /// Normalized sub-path (`""` = repository root).
    path: String,
    limits: Limits,
    index: HistoryIndex,
    policy_index: PolicyIndex,
    /// Which governed changes an admin approved (see [`crate::governance`]).
    governance: GovernanceIndex,
    /// The policies at head, as last built from `policy_index`.
    policies: PolicySet,
    head: Option<IndexedHead>,
    /// Parse results by blob id: a blob seen once is never parsed again (also across rebuilds).
    parsed_blobs: HashMap<Oid, Arc<ParsedBlob>>,
    backoff: Backoff,
    poker: Poker,
    /// The trusted keys and what is verified with them (`None`: nothing is checked).
    trust: Option<Trust>,
    /// The branch tip at the last sync (the indexed head is the last accepted commit).
    tip: Option<Oid>,
    /// Why the branch tip is not the indexed head, when verification refuses it.
    refusal: Option<Arc<Refusal>>,
    /// The trusted keys changed: the next sync re-indexes the whole history.
    rebuild_next: bool,
    /// The commit that ran when the trusted keys last changed: it stays accepted whatever the
    /// new keys say of it (a key change never rolls running content back), until a verified
    /// commit after it is accepted.
    pinned: Option<Oid>,
    /// The last rewrite of the branch that took out what ran, until the branch moves on.
    rewind: Option<Arc<Rewind>>,
}

/// Verification state: the keys, the mode, and the signature checks made with these keys.
struct Trust {
    mode: Option<VerifyCommits>,
    keys: TrustedKeysDir,
    checks: CommitChecks,
}

/// The commits to index and whether they extend the current index or replace it.
enum Plan {
    Extend(Vec<Oid>),
    Rebuild(Vec<Oid>),
}

/// What changed for each name between its summary in `prior` and now; names approved by this
/// sync change at least their trigger.
fn changes_since(
    prior: &BTreeMap<String, Summary>,
    index: &mut HistoryIndex,
) -> BTreeMap<String, Change> {
    let mut changes = BTreeMap::new();
    for name in index.names() {
        let after = index.summary(name);
        let change = match prior.get(name) {
            Some(before) => change_between(before, &after),
            None => change_between(&after, &after),
        };
        if let Some(change) = change {
            changes.insert(name.clone(), change);
        }
    }
    for (name, before) in prior {
        if !changes.contains_key(name)
            && let Some(change) = change_between(before, &index.summary(name))
        {
            changes.insert(name.clone(), change);
        }
    }
    for name in std::mem::take(&mut index.approved) {
        let change = changes.entry(name).or_insert(Change::TriggerOnly);
        if *change == Change::Unchanged {
            *change = Change::TriggerOnly;
        }
    }
    changes
}

impl GitSource {
    /// Opens the repository (or its cache clone). Nothing is read until the first [`Self::sync`].
    pub fn open(config: SourceConfig) -> Result<Self, SourceError> {
        let access = RepoAccess::open(&config)?;
        let trust = match &config.trust.trusted_keys {
            Some(dir) => {
                let keys = TrustedKeysDir::open(dir)?;
                let checks = CommitChecks::new(keys.keys().clone());
                Some(Trust {
                    mode: config.trust.verify_commits,
                    keys,
                    checks,
                })
            }
            None => None,
        };
        Ok(GitSource {
            access,
            path: config.normalized_path(),
            limits: config.limits,
            index: HistoryIndex::default(),
            policy_index: PolicyIndex::default(),
            governance: GovernanceIndex::default(),
            policies: PolicySet::default(),
            head: None,
            parsed_blobs: HashMap::new(),
            backoff: Backoff::default(),
            poker: Poker::new(),
            trust,
            tip: None,
            refusal: None,
            rebuild_next: false,
            pinned: None,
            rewind: None,
        })
    }

    /// Fetches (remote repositories), then brings the index up to the branch head. On error the
    /// previous index is kept and [`Self::retry_after`] grows.
    pub fn sync(&mut self) -> Result<SyncReport, SourceError> {
        let started = Instant::now();
        let mut result = self.sync_once(started);
        if let Err(error) = &result
            && self.access.is_remote()
            && error.is_corruption()
        {
            warn!(repo = %self.access.display(), %error, "sync failed on a damaged cache; re-cloning once");
            result = self
                .access
                .recreate_cache()
                .and_then(|()| self.sync_once(started));
        }
        match &result {
            Ok(_) => self.backoff.record_success(),
            Err(error) => {
                self.backoff.record_failure();
                // The one log line per failed sync (the controller only counts it): it says what
                // keeps running, and nothing does before the first sync.
                let retry_after_s = self.backoff.retry_after().map(|d| d.as_secs());
                match self.head.as_ref() {
                    Some(head) => {
                        let kept =
                            tollgate_model::snapshot::short_sha(&head.oid.to_string()).to_string();
                        warn!(repo = %self.access.display(), %error, retry_after_s, kept, "git sync failed; the last synced commit keeps running")
                    }
                    None => {
                        warn!(repo = %self.access.display(), %error, retry_after_s, "git sync failed; nothing synced yet")
                    }
                }
            }
        }
        result
    }

    fn sync_once(&mut self, started: Instant) -> Result<SyncReport, SourceError> {
        self.refresh_keys();
        let head_oid = self.access.refresh()?;
        if self.tip == Some(head_oid) && !self.rebuild_next {
            return Ok(self.unchanged_report(started));
        }
        let plan = self.plan(head_oid)?;
        let rebuilt = matches!(plan, Plan::Rebuild(_));
        let (Plan::Extend(planned) | Plan::Rebuild(planned)) = &plan;
        let planned = planned.len();
        let read = self.read_new(&plan, head_oid)?;
        let Some(new_head) = read.head else {
            return self.nothing_accepted(head_oid, started);
        };

        // Everything fallible is done: apply.
        // Each touched name's summary before this sync; on a rebuild, the old index's.
        let mut prior: BTreeMap<String, Summary> = BTreeMap::new();
        self.follow_rewind(rebuilt, head_oid);
        let (mut index, mut policy_index, mut governance) = self.take_indexes(rebuilt, &mut prior);
        for delta in &read.deltas {
            let touched = index.apply(delta, &mut prior);
            policy_index.apply(delta);
            let heads = Heads {
                promotions: &index,
                policies: &policy_index,
            };
            governance.apply(&heads, &delta.info, &touched, &delta.policy_approvals);
        }
        let policies = policy_index.set().with_governance(governance.view());
        self.governance = governance;
        let policies_changed = policies != self.policies;
        self.policy_index = policy_index;
        self.policies = policies;
        if rebuilt {
            let all: Vec<String> = index.names().cloned().collect();
            for name in &all {
                prior.entry(name.clone()).or_insert(Summary::Absent);
            }
            index.refresh_views(&all);
        } else {
            index.refresh_views(prior.keys());
        }
        let changes = changes_since(&prior, &mut index);
        self.index = index;
        self.head = Some(new_head);
        self.tip = Some(head_oid);
        self.rebuild_next = false;
        let path_missing = self.path_missing();
        if path_missing {
            warn!(repo = %self.access.display(), path = %self.path, "the tracked path does not exist at the branch head");
        }
        let changed = changes
            .values()
            .filter(|c| **c != Change::Unchanged)
            .count();
        info!(repo = %self.access.display(), head = %head_oid, rebuilt, commits = planned, changed, "git source synced");
        Ok(SyncReport {
            head: self.head().cloned(),
            head_moved: true,
            changes,
            path_missing,
            policies_changed,
            rebuilt,
            duration: started.elapsed(),
        })
    }

    /// The indexes a sync extends: the current ones, or empty ones for a rebuild (with each
    /// name's summary before it in `prior`).
    fn take_indexes(
        &mut self,
        rebuilt: bool,
        prior: &mut BTreeMap<String, Summary>,
    ) -> (HistoryIndex, PolicyIndex, GovernanceIndex) {
        if !rebuilt {
            return (
                std::mem::take(&mut self.index),
                std::mem::take(&mut self.policy_index),
                std::mem::take(&mut self.governance),
            );
        }
        for name in self.index.names() {
            prior.insert(name.clone(), self.index.summary(name));
        }
        (
            HistoryIndex::default(),
            PolicyIndex::default(),
            GovernanceIndex::default(),
        )
    }

    /// Notes a rewrite that took out what ran (a rebuild whose old tip is not in the new
    /// history), or forgets the last one once the branch moved on from it.
    fn follow_rewind(&mut self, rebuilt: bool, head: Oid) {
        let Some(from) = self.tip.filter(|_| rebuilt && !self.rebuild_next) else {
            if !rebuilt {
                self.rewind = None;
            }
            return;
        };
        let newest = self
            .index
            .promotions
            .iter()
            .filter_map(|(name, history)| {
                let last = history.snapshots.last()?;
                Some((name.clone(), (last.index, last.commit.sha.clone())))
            })
            .collect();
        let repo = self.access.repo();
        let rewind = crate::rewind::detect(repo, self.access.branch(), (from, head), newest);
        if let Some(rewind) = &rewind {
            warn!(repo = %self.access.display(), from = %rewind.from, to = %rewind.to, promotions = rewind.lost.len(), "branch rewritten: what ran is no longer in its history");
        }
        self.rewind = rewind.map(Arc::new);
    }

    /// The last rewrite of the branch that took out what ran, until the branch moves on.
    pub fn rewind(&self) -> Option<&Arc<Rewind>> {
        self.rewind.as_ref()
    }

    /// Walks first parents back from the new head until the indexed head: found means the
    /// branch moved forward (extend); not found means history was rewritten (rebuild).
    fn plan(&self, head: Oid) -> Result<Plan, SourceError> {
        let walk_error = |source| SourceError::Walk {
            repo: self.access.display().to_string(),
            commit: head.to_string(),
            source,
        };
        let repo = self.access.repo();
        let mut walk = repo.revwalk().map_err(walk_error)?;
        walk.simplify_first_parent().map_err(walk_error)?;
        walk.push(head).map_err(walk_error)?;
        let indexed = self
            .head
            .as_ref()
            .filter(|_| !self.rebuild_next)
            .map(|h| h.oid);
        let mut commits = Vec::new();
        for oid in walk {
            let oid = oid.map_err(walk_error)?;
            if Some(oid) == indexed {
                commits.reverse();
                return Ok(Plan::Extend(commits));
            }
            commits.push(oid);
        }
        commits.reverse();
        if indexed.is_some() {
            info!(repo = %self.access.display(), "branch history was rewritten; rebuilding the snapshot index");
        }
        Ok(Plan::Rebuild(commits))
    }

    /// Screens the plan's commits under the verification mode and reads the accepted ones.
    fn read_new(&mut self, plan: &Plan, head_oid: Oid) -> Result<ReadResult, SourceError> {
        let (oids, base_root, first_seq) = match plan {
            Plan::Extend(commits) => {
                let base = self.head.as_ref();
                (
                    commits,
                    base.and_then(|h| h.root),
                    base.map_or(0, |h| h.info.seq + 1),
                )
            }
            Plan::Rebuild(commits) => (commits, None, 0),
        };
        let running = match plan {
            Plan::Extend(_) => self.head.as_ref().map(|h| h.oid),
            Plan::Rebuild(_) => None,
        };
        let (commits, refusal) = self.screen(oids, first_seq, running, head_oid)?;
        let reader = DeltaReader {
            repo: self.access.repo(),
            display: self.access.display(),
            path: &self.path,
            limits: &self.limits,
        };
        let checks = self.trust.as_mut().map(|t| &mut t.checks);
        let read = reader.read(&mut self.parsed_blobs, &commits, base_root, checks)?;
        self.note_refusal(refusal);
        Ok(read)
    }

    /// No new commit is accepted (`--verify-commits`): what runs stays as it is, or, when
    /// nothing was ever verified, nothing runs.
    fn nothing_accepted(
        &mut self,
        head_oid: Oid,
        started: Instant,
    ) -> Result<SyncReport, SourceError> {
        if self.head.is_none() {
            return Err(SourceError::NothingVerified {
                repo: self.access.display().to_string(),
                branch: self.access.branch().to_string(),
                refusal: self
                    .refusal
                    .as_ref()
                    .map(|r| r.message())
                    .unwrap_or_default(),
            });
        }
        self.tip = Some(head_oid);
        self.rebuild_next = false;
        Ok(self.unchanged_report(started))
    }

    /// The report of a sync that indexed nothing new.
    fn unchanged_report(&self, started: Instant) -> SyncReport {
        SyncReport {
            head: self.head().cloned(),
            head_moved: false,
            changes: BTreeMap::new(),
            path_missing: self.path_missing(),
            policies_changed: false,
            rebuilt: false,
            duration: started.elapsed(),
        }
    }

    /// Re-reads the trusted keys when they changed; new keys re-verify the whole history.
    fn refresh_keys(&mut self) {
        if let Some(trust) = &mut self.trust
            && trust.keys.refresh()
        {
            trust.checks = CommitChecks::new(trust.keys.keys().clone());
            self.rebuild_next = true;
            if let Some(head) = &self.head {
                self.pinned = Some(head.oid);
            }
        }
    }

    /// The new first-parent commits with their ranges, and which are accepted under the
    /// verification mode (every one when it is off).
    fn screen(
        &mut self,
        oids: &[Oid],
        first_seq: u64,
        running: Option<Oid>,
        tip: Oid,
    ) -> Result<(Vec<NewCommit>, Option<Refusal>), SourceError> {
        let repo = self.access.repo();
        let mut commits =
            accept_all(repo, oids, first_seq).map_err(|(oid, source)| SourceError::Read {
                repo: self.access.display().to_string(),
                commit: oid.to_string(),
                what: "the commits it merges".to_string(),
                source,
            })?;
        let Some(trust) = self.trust.as_mut() else {
            return Ok((commits, None));
        };
        let Some(mode) = trust.mode else {
            return Ok((commits, None));
        };
        let ranges: Vec<(Oid, Vec<Oid>)> =
            commits.iter().map(|c| (c.oid, c.range.clone())).collect();
        let pinned = self.pinned.filter(|pin| *pin == running.unwrap_or(*pin));
        let in_range = pinned.filter(|pin| ranges.iter().any(|(oid, _)| oid == pin));
        let screen = screen(repo, &ranges, mode, &mut trust.checks, (running, in_range));
        for (commit, accepted) in commits.iter_mut().zip(&screen.accepted) {
            commit.accepted = *accepted;
        }
        // The pin holds while it is the newest accepted commit.
        let newest = commits.iter().rev().find(|c| c.accepted).map(|c| c.oid);
        self.pinned = pinned.filter(|pin| newest.is_none_or(|n| n == *pin));
        let refusal = screen
            .refusal
            .filter(|r| r.tip == tip.to_string())
            .or_else(|| {
                let pin = self.pinned?;
                crate::trust::kept_refusal(repo, mode, &mut trust.checks, pin, tip)
            });
        Ok((commits, refusal))
    }

    /// Records why the tip is refused (or that it no longer is), logging each new refusal once.
    fn note_refusal(&mut self, refusal: Option<Refusal>) {
        if self.refusal.as_deref() == refusal.as_ref() {
            return;
        }
        match &refusal {
            Some(refusal) => {
                warn!(repo = %self.access.display(), reason = %refusal.message(), "commit not verified; it does not roll out")
            }
            None if self.refusal.is_some() => {
                info!(repo = %self.access.display(), "the branch tip is verified again")
            }
            None => {}
        }
        self.refusal = refusal.map(Arc::new);
    }

    /// Why the branch tip does not run (`--verify-commits`), if it does not.
    pub fn refusal(&self) -> Option<&Arc<Refusal>> {
        self.refusal.as_ref()
    }

    pub fn head(&self) -> Option<&CommitInfo> {
        self.head.as_ref().map(|h| &*h.info)
    }

    /// Whether the tracked sub-path is missing at the indexed head.
    pub fn path_missing(&self) -> bool {
        self.head.as_ref().is_some_and(|h| h.root.is_none())
    }

    /// Promotions defined at head, by name.
    pub fn promotions(&self) -> impl Iterator<Item = (&str, &PromotionView)> {
        self.index
            .promotions
            .iter()
            .filter_map(|(name, history)| history.view.as_ref().map(|v| (name.as_str(), v)))
    }

    pub fn promotion(&self, name: &str) -> Option<&PromotionView> {
        self.index.promotions.get(name)?.view.as_ref()
    }

    /// The promotion's snapshots, in index order (also for a promotion removed since).
    pub fn history(&self, name: &str) -> &[Snapshot] {
        self.index
            .promotions
            .get(name)
            .map_or(&[], |h| h.snapshots.as_slice())
    }

    /// The promotion's approval events, in first-parent order.
    pub fn approvals(&self, name: &str) -> &[ApprovalEvent] {
        self.index
            .promotions
            .get(name)
            .map_or(&[], |h| h.approvals.as_slice())
    }

    /// `Tollgate-Approve` trailers naming the promotion that were ignored (no statement commit).
    pub fn ignored_statements(&self, name: &str) -> &[crate::IgnoredStatement] {
        self.index
            .promotions
            .get(name)
            .map_or(&[], |h| h.ignored.as_slice())
    }

    /// [`Self::history`], shared: a reference to the index's own copy, which the index copies
    /// only when the promotion's history changes while the returned one is alive. A reader that
    /// keeps every promotion's history (the controller) holds no copy of its own.
    pub fn shared_history(&self, name: &str) -> Arc<Vec<Snapshot>> {
        self.index
            .promotions
            .get(name)
            .map(|h| Arc::clone(&h.snapshots))
            .unwrap_or_default()
    }

    /// Promotions git no longer defines at head but did before, with their shared history (its
    /// last snapshot is the last good one: it says whether a removal keeps the profiles).
    pub fn retired(&self) -> impl Iterator<Item = (&str, Arc<Vec<Snapshot>>)> {
        self.index
            .promotions
            .iter()
            .filter(|(_, history)| history.view.is_none() && !history.snapshots.is_empty())
            .map(|(name, history)| (name.as_str(), Arc::clone(&history.snapshots)))
    }

    /// [`Self::approvals`], shared like [`Self::shared_history`].
    pub fn shared_approvals(&self, name: &str) -> Arc<Vec<ApprovalEvent>> {
        self.index
            .promotions
            .get(name)
            .map(|h| Arc::clone(&h.approvals))
            .unwrap_or_default()
    }

    /// Files at head with errors that belong to no promotion, by path.
    pub fn file_errors(&self) -> BTreeMap<&str, &[Diagnostic]> {
        self.index.file_errors()
    }

    /// The RolloutPolicies at head (each name's last valid version) and their errors.
    /// Where the block-style key path `keys` of promotion `name` is written in `file` at the
    /// indexed head (line, column), for a message that names it: read only when one is needed.
    pub fn place_at_head(&self, file: &str, name: &str, keys: &[&str]) -> Option<(u32, u32)> {
        let repo = self.access.repo();
        let head = repo.find_commit(self.head.as_ref()?.oid).ok()?;
        let entry = head
            .tree()
            .ok()?
            .get_path(std::path::Path::new(file))
            .ok()?;
        let blob = repo.find_blob(entry.id()).ok()?;
        let parsed = tollgate_manifest::parse::parse_file(file, blob.content(), &self.limits);
        let line = parsed
            .promotions
            .iter()
            .find(|p| p.name.as_deref() == Some(name))?
            .line;
        let text = std::str::from_utf8(blob.content()).ok()?;
        tollgate_manifest::key_position::key_position(text, line, keys)
    }

    pub fn policies(&self) -> PolicySet {
        self.policies.clone()
    }

    pub fn poker(&self) -> Poker {
        self.poker.clone()
    }

    /// After failed syncs, how long to wait before the next one (1 s doubling to 5 min); `None`
    /// after a success.
    pub fn retry_after(&self) -> Option<Duration> {
        self.backoff.retry_after()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The controller moves the source into `spawn_blocking`.
    fn assert_send<T: Send + 'static>() {}

    #[test]
    fn git_source_and_its_reports_can_cross_threads() {
        assert_send::<GitSource>();
        assert_send::<SyncReport>();
        assert_send::<Poker>();
    }
}

//! The repository the web view commits in (`--repo DIR`), read for what the cluster does not
//! hold: the ClusterPromotions' labels, the snapshot history with commit links, commit times.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tollgate_model::ClusterPromotion;
use tollgate_source::report::PromotionView;
use tollgate_source::{GitSource, PolicySet, SourceConfig};

use super::signed_gates::GatePolicies;

/// How old the facts read from git may be.
pub const RESYNC_AFTER: Duration = Duration::from_millis(500);

/// A local clone, its tracked branch and the manifests' sub-path.
#[derive(Clone, Debug)]
pub struct RepoTarget {
    pub dir: PathBuf,
    pub branch: String,
    pub path: String,
    /// The controller's verification (`run --ui`): the buttons number snapshots as it does and
    /// commit nothing on a tip that would not verify (issue #44).
    pub trust: Option<tollgate_source::TrustConfig>,
}

impl RepoTarget {
    /// What the clone says now of where and as whom an action commits: read at every render, as
    /// a press must show at once in the next preview (the facts below are cached).
    pub fn action_repo(&self) -> ActionRepo {
        let Ok(repo) = git2::Repository::open(&self.dir) else {
            return ActionRepo::default();
        };
        let mut branches = std::collections::BTreeSet::new();
        if let Ok(references) = repo.references_glob("refs/heads/tollgate/*") {
            for reference in references.filter_map(Result::ok) {
                let name = reference.name().ok();
                if let Some(name) = name.and_then(|n| n.strip_prefix("refs/heads/")) {
                    branches.insert(name.to_string());
                }
            }
        }
        ActionRepo {
            branches,
            approver: tollgate_source::edit::approver_slug(&repo),
        }
    }

    pub fn edit_target(&self) -> tollgate_source::edit::Target<'_> {
        tollgate_source::edit::Target {
            repo: &self.dir,
            branch: &self.branch,
            path: &self.path,
            trust: self.trust.as_ref(),
            fresh_branch: true,
        }
    }
}

/// The clone's action branches (under `tollgate/`) and its committer as a branch word.
#[derive(Clone, Debug, Default)]
pub struct ActionRepo {
    pub branches: std::collections::BTreeSet<String>,
    pub approver: String,
}

/// One snapshot of a promotion, as the history table shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct SnapshotRow {
    pub index: u64,
    pub sha: String,
    pub author: String,
    pub time: DateTime<Utc>,
    pub subject: String,
    pub same_content_as: Option<u64>,
}

impl GitFacts {
    /// What rolling back to snapshot `to` changes in the spec at the tip (`edit::rollback`
    /// restores that snapshot's spec under the tip's metadata), one line per field.
    pub fn rollback_changes(&self, to: u64) -> Option<Vec<String>> {
        let tip = serde_json::to_value(&self.at_tip.as_ref()?.spec).ok()?;
        let restored = serde_json::to_value(&self.by_snapshot.get(&to)?.spec).ok()?;
        let changes = crate::views::spec_changes::spec_changes("spec", &tip, &restored);
        Some(changes.iter().map(|change| format!("~ {change}")).collect())
    }
}

/// What the pages read from git, per promotion.
#[derive(Clone, Debug, Default)]
pub struct GitFacts {
    pub labels: BTreeMap<String, String>,
    /// Its annotations at the tip (what a retry counts on from).
    pub annotations: BTreeMap<String, String>,
    /// The promotion at the tip, and at each snapshot: what a rollback changes.
    pub at_tip: Option<Arc<ClusterPromotion>>,
    pub by_snapshot: BTreeMap<u64, Arc<ClusterPromotion>>,
    pub snapshots: Vec<SnapshotRow>,
    /// The RolloutPolicies that may govern its gates (whether an approval needs a signature).
    pub gates: GatePolicies,
}

/// Every promotion's facts, by name.
pub type Facts = Arc<BTreeMap<String, GitFacts>>;

/// The repository, synced on demand (a local clone: an incremental sync is cheap).
pub struct GitView {
    pub target: RepoTarget,
    source: Mutex<Option<GitSource>>,
    /// The facts of the last sync and when it was made: live updates ask often, git moves
    /// rarely, so a sync is made at most once per [`RESYNC_AFTER`].
    cached: Mutex<Option<(Instant, Facts)>>,
    /// `https://host/owner/repo/commit/` when the clone's `origin` is a web-hosted remote.
    pub commit_base: Option<String>,
}

impl GitView {
    pub fn new(target: RepoTarget) -> Self {
        let commit_base = commit_base(&target.dir);
        GitView {
            target,
            source: Mutex::new(None),
            cached: Mutex::new(None),
            commit_base,
        }
    }

    /// Every promotion's facts at the branch tip, synced at most once per [`RESYNC_AFTER`].
    pub fn facts(&self) -> Arc<BTreeMap<String, GitFacts>> {
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, facts)) = cached.as_ref()
            && at.elapsed() < RESYNC_AFTER
        {
            return facts.clone();
        }
        let facts = Arc::new(self.read_facts());
        *cached = Some((Instant::now(), facts.clone()));
        facts
    }

    /// Every promotion's facts at the branch tip; empty (with a warning) when git cannot be read.
    fn read_facts(&self) -> BTreeMap<String, GitFacts> {
        let mut guard = self.source.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            let config = SourceConfig::new(
                self.target.dir.to_string_lossy(),
                &self.target.branch,
                &self.target.path,
                std::env::temp_dir(),
            );
            match GitSource::open(config) {
                Ok(source) => *guard = Some(source),
                Err(error) => {
                    tracing::warn!(%error, "the web view cannot open the repository");
                    return BTreeMap::new();
                }
            }
        }
        let Some(source) = guard.as_mut() else {
            return BTreeMap::new();
        };
        if let Err(error) = source.sync() {
            tracing::warn!(%error, "the web view cannot read the repository");
        }
        let policies = source.policies();
        source
            .promotions()
            .map(|(name, view)| (name.to_string(), facts_of(source, &policies, name, view)))
            .collect()
    }

    /// The commit's page on the git host; only ever an https address (`links::https_only`).
    pub fn commit_url(&self, sha: &str) -> Option<String> {
        commit_url_of(self.commit_base.as_deref()?, sha)
    }
}

/// The web address of commits for the clone's `origin` (https or scp-like ssh), credentials
/// dropped; `None` for a local or unknown remote.
fn commit_base(dir: &std::path::Path) -> Option<String> {
    let repo = git2::Repository::open(dir).ok()?;
    let remote = repo.find_remote("origin").ok()?;
    web_base(remote.url().ok()?).map(|base| format!("{base}/commit/"))
}

/// One promotion's facts: its labels at the tip, its snapshots, the policies over its gates.
fn facts_of(
    source: &GitSource,
    policies: &PolicySet,
    name: &str,
    view: &PromotionView,
) -> GitFacts {
    let (labels, annotations) = match view {
        PromotionView::Valid { snapshot } => {
            let metadata = &snapshot.promotion.metadata;
            let labels = metadata.labels.clone().into_iter().collect();
            let annotations = metadata.annotations.clone().into_iter().collect();
            (labels, annotations)
        }
        PromotionView::Invalid { .. } => (BTreeMap::new(), BTreeMap::new()),
    };
    let snapshots = source
        .history(name)
        .iter()
        .map(|s| SnapshotRow {
            index: s.index,
            sha: s.commit.sha.clone(),
            author: s.commit.author.clone(),
            time: s.commit.time,
            subject: s.commit.subject.clone(),
            same_content_as: s.same_content_as,
        })
        .collect();
    let at_tip = match view {
        PromotionView::Valid { snapshot } => Some(Arc::clone(&snapshot.promotion)),
        PromotionView::Invalid { .. } => None,
    };
    let by_snapshot = source
        .history(name)
        .iter()
        .map(|s| (s.index, Arc::clone(&s.promotion)))
        .collect();
    GitFacts {
        labels,
        annotations,
        at_tip,
        by_snapshot,
        snapshots,
        gates: GatePolicies::read(policies, view),
    }
}

/// `base` + `sha` when that is a plain https address: a remote is text anyone with push access
/// to the clone's configuration wrote.
fn commit_url_of(base: &str, sha: &str) -> Option<String> {
    let url = format!("{base}{sha}");
    super::links::https_only(&url).map(str::to_string)
}

/// `https://host/owner/repo` for a remote URL.
pub fn web_base(url: &str) -> Option<String> {
    let url = url.trim_end_matches('/').trim_end_matches(".git");
    let (host, path) = if let Some(rest) = url.strip_prefix("https://") {
        rest.split_once('/')?
    } else if let Some(rest) = url.strip_prefix("ssh://") {
        let (host, path) = rest.split_once('/')?;
        (host.rsplit('@').next()?.split(':').next()?, path)
    } else if let Some((user_host, path)) = url.split_once(':') {
        if user_host.contains('/') || !user_host.contains('@') {
            return None;
        }
        (user_host.rsplit('@').next()?, path)
    } else {
        return None;
    };
    let host = host.rsplit('@').next()?;
    Some(format!("https://{host}/{path}"))
}

#[cfg(test)]
mod tests {
    use super::{commit_url_of, web_base};

    #[test]
    fn remote_urls_become_web_addresses_without_credentials() {
        assert_eq!(
            web_base("https://x-access-token:SECRET@github.com/acme/fleet.git").as_deref(),
            Some("https://github.com/acme/fleet")
        );
        assert_eq!(
            web_base("git@gitlab.com:acme/fleet.git").as_deref(),
            Some("https://gitlab.com/acme/fleet")
        );
        assert_eq!(
            web_base("ssh://git@gitea.example:2222/acme/fleet").as_deref(),
            Some("https://gitea.example/acme/fleet")
        );
        assert_eq!(web_base("/srv/git/fleet"), None);
        assert_eq!(web_base("file:///srv/git/fleet"), None);
        // Only https pages: a plain-http remote, or anything that is no remote, links nowhere.
        assert_eq!(web_base("http://git.example/acme/fleet.git"), None);
        assert_eq!(web_base("javascript:alert(1)"), None);
        assert_eq!(web_base("git://git.example/acme/fleet.git"), None);
    }

    #[test]
    fn a_commit_link_is_https_or_none() {
        let link = |remote: &str| {
            let base = format!("{}/commit/", web_base(remote)?);
            commit_url_of(&base, "0123456789ab")
        };
        assert_eq!(
            link("git@github.com:acme/fleet.git").as_deref(),
            Some("https://github.com/acme/fleet/commit/0123456789ab")
        );
        assert_eq!(link("git@evil\"onmouseover=alert(1):acme/fleet.git"), None);
        assert_eq!(link("https://git.example/acme/fleet x.git"), None);
        assert_eq!(link("http://git.example/acme/fleet.git"), None);
    }
}

//! Which commit made an approval (issue #44, docs/trust.md#attribution). The index finds
//! approvals by comparing a promotion before and after each *accepted* commit; when that commit
//! brings others too (the unverified commits `--verify-commits Head` folds into it, the commits a
//! merge brings), the approval belongs to the commit that introduced it, not to the one that
//! happened to bring it: an unsigned annotation folded into an approver's signed `docs: typo`
//! commit is the unsigned commit's, and never that approver's.
//!
//! The introducing commit of a fact (an `approve.tollgate.dev/<stage>` value, or `approved:
//! true` on a manual stage) is the newest brought commit that has the fact while none of its
//! parents has it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use git2::{Oid, Repository};
use tollgate_manifest::model::Trigger;
use tollgate_manifest::snapshot::APPROVE_ANNOTATION_PREFIX;
use tollgate_manifest::{ApprovalKind, ClusterPromotion, CommitInfo};

use crate::blob::{BlobContent, Limits, ParsedBlob, parse_blob};

/// An approval fact of one stage of one promotion, with the commit that introduced it.
#[derive(Clone, Debug)]
pub(crate) struct Attribution {
    pub promotion: String,
    pub stage: String,
    /// [`ApprovalKind::Field`] or [`ApprovalKind::Annotation`].
    pub kind: ApprovalKind,
    pub commit: Arc<CommitInfo>,
}

/// The approval facts a promotion carries: `(stage, kind)`.
pub(crate) fn facts_of(promotion: &ClusterPromotion) -> Vec<(String, ApprovalKind)> {
    let mut facts = Vec::new();
    for stage in &promotion.spec.stages {
        if let Some(Trigger::Manual(manual)) = &stage.trigger
            && manual.approved == Some(true)
        {
            facts.push((stage.name.clone(), ApprovalKind::Field));
        }
    }
    for (key, value) in &promotion.metadata.annotations {
        if let Some(stage) = key.strip_prefix(APPROVE_ANNOTATION_PREFIX)
            && !stage.is_empty()
        {
            let kind = ApprovalKind::Annotation {
                value: value.clone(),
            };
            facts.push((stage.to_string(), kind));
        }
    }
    facts
}

/// Whether `promotion` carries `stage`'s fact `kind`.
fn holds(promotion: &ClusterPromotion, stage: &str, kind: &ApprovalKind) -> bool {
    match kind {
        ApprovalKind::Field => promotion.stage(stage).is_some_and(|s| {
            matches!(&s.trigger, Some(Trigger::Manual(manual)) if manual.approved == Some(true))
        }),
        ApprovalKind::Annotation { value } => promotion
            .metadata
            .annotations
            .get(&format!("{APPROVE_ANNOTATION_PREFIX}{stage}"))
            == Some(value),
        ApprovalKind::Trailer { .. } => false,
    }
}

/// Reads promotions at arbitrary commits, parsing each blob once.
pub(crate) struct Attributor<'a> {
    pub repo: &'a Repository,
    pub limits: &'a Limits,
    pub parsed: &'a mut HashMap<Oid, Arc<ParsedBlob>>,
    /// Each (commit, file) looked up: every fact of a file asks about the same commits and
    /// their parents.
    pub read: HashMap<(Oid, String), Option<Arc<ParsedBlob>>>,
}

impl Attributor<'_> {
    /// Of `brought` (newest last), the commit that introduced `stage`'s `kind` in promotion
    /// `name` of `file`; `None` when no brought commit did (it came with an older one).
    pub fn introducer(
        &mut self,
        brought: &[Oid],
        file: &str,
        name: &str,
        (stage, kind): (&str, &ApprovalKind),
    ) -> Option<Oid> {
        for oid in brought.iter().rev() {
            let commit = self.repo.find_commit(*oid).ok()?;
            if !self.has(*oid, file, name, stage, kind) {
                continue;
            }
            let inherited = commit
                .parent_ids()
                .any(|parent| self.has(parent, file, name, stage, kind));
            if !inherited {
                return Some(*oid);
            }
        }
        None
    }

    /// Whether promotion `name` in `file` at `commit` carries the fact.
    fn has(
        &mut self,
        commit: Oid,
        file: &str,
        name: &str,
        stage: &str,
        kind: &ApprovalKind,
    ) -> bool {
        let Some(parsed) = self.parsed_at(commit, file) else {
            return false;
        };
        parsed
            .docs
            .iter()
            .filter(|doc| doc.name == name)
            .filter_map(|doc| doc.outcome.as_ref().ok())
            .any(|promotion| holds(promotion, stage, kind))
    }

    fn parsed_at(&mut self, commit: Oid, file: &str) -> Option<Arc<ParsedBlob>> {
        let key = (commit, file.to_string());
        if let Some(read) = self.read.get(&key) {
            return read.clone();
        }
        let read = self.read_at(commit, file);
        self.read.insert(key, read.clone());
        read
    }

    fn read_at(&mut self, commit: Oid, file: &str) -> Option<Arc<ParsedBlob>> {
        let tree = self.repo.find_commit(commit).ok()?.tree().ok()?;
        let blob = tree.get_path(Path::new(file)).ok()?.id();
        if let Some(parsed) = self.parsed.get(&blob) {
            return Some(Arc::clone(parsed));
        }
        let content = BlobContent::read(self.repo, blob, self.limits).ok()?;
        let parsed = Arc::new(parse_blob(file, &content, self.limits));
        self.parsed.insert(blob, Arc::clone(&parsed));
        Some(parsed)
    }
}

//! The labels of each ClusterPromotion in git, as the last sync read them: what the web view
//! filters by when it runs inside the controller (`run --ui`) without a clone of its own
//! (`--ui-repo`). The GitPromotion objects carry none, so without this a label filter matched
//! nothing under `run --ui` while `tollgate ui --repo` matched.

use std::collections::BTreeMap;
use std::sync::RwLock;

use super::git_task::GitUpdate;

/// Labels by promotion; promotions without labels are not kept.
#[derive(Debug, Default)]
pub struct GitLabels {
    labels: RwLock<BTreeMap<String, BTreeMap<String, String>>>,
}

impl GitLabels {
    /// Takes in a git sync: changed promotions, and the whole set on a complete listing.
    pub fn absorb(&self, update: &GitUpdate) {
        if update.error.is_some() {
            return;
        }
        let mut labels = self.labels.write().unwrap_or_else(|e| e.into_inner());
        if update.complete {
            labels.retain(|name, _| update.promotions.contains_key(name));
        }
        for (name, git) in &update.promotions {
            let current = git
                .as_ref()
                .and_then(|g| g.view.effective_snapshot())
                .map(|snapshot| &snapshot.promotion.metadata.labels)
                .filter(|l| !l.is_empty());
            match current {
                Some(current) => {
                    labels.insert(name.clone(), current.clone());
                }
                None => {
                    labels.remove(name);
                }
            }
        }
    }

    /// The labels of `name` in git (empty when it has none or is not in git).
    pub fn of(&self, name: &str) -> BTreeMap<String, String> {
        let labels = self.labels.read().unwrap_or_else(|e| e.into_inner());
        labels.get(name).cloned().unwrap_or_default()
    }
}

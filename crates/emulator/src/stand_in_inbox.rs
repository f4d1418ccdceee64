//! What changed since the Sveltos stand-in last looked: the write paths file every change of a
//! kind it reads here, so that it reconciles only the profiles concerned instead of the fleet.

/// A changed object the stand-in reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StandInChange {
    /// A ClusterProfile (cluster-scoped) by name.
    Profile(String),
    /// A ClusterSummary, with the profile label it carries now and carried before the change.
    Summary {
        namespace: String,
        name: String,
        profiles: Vec<String>,
    },
    /// A SveltosCluster.
    Cluster { namespace: String, name: String },
}

/// Changes waiting for the stand-in.
#[derive(Debug, Default)]
pub struct StandInInbox {
    /// Reconcile everything (a CRD or the fleet's behaviour changed, or the stand-in just started).
    pub everything: bool,
    /// Every feature still provisioning finishes on the next pass, whatever its latency: a
    /// harness's burst of stages that all complete in the same instant.
    pub finish_provisioning: bool,
    pub changes: Vec<StandInChange>,
}

impl StandInInbox {
    /// Everything filed so far; the inbox is empty afterwards.
    pub fn take(&mut self) -> StandInInbox {
        std::mem::take(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_empties_the_inbox() {
        let mut inbox = StandInInbox {
            everything: true,
            finish_provisioning: true,
            changes: vec![StandInChange::Profile("p".into())],
        };
        let taken = inbox.take();
        assert!(taken.everything && taken.finish_provisioning);
        assert_eq!(taken.changes, [StandInChange::Profile("p".into())]);
        assert!(!inbox.everything && !inbox.finish_provisioning && inbox.changes.is_empty());
    }
}

//! Errors of the controller, one variant per step of the pipeline
//! `fetch (git) → observe → plan (engine) → apply → update status`, each with its context.

use crate::cluster::errors::ClusterError;

/// Why a controller cannot start: only usage errors. What the management cluster answers is
/// waited out (see `controller::startup`).
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("opening the git source: {0}")]
    Source(#[from] tollgate_source::SourceError),
    #[error("starting the git thread: {0}")]
    GitThread(std::io::Error),
}

/// Why one promotion's step did not complete. Retried with backoff; the last one is logged and
/// counted, and the persisted status stays as it was (docs/architecture.md#the-engine-contract).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("applying ClusterProfile {name}: {source}")]
    Apply { name: String, source: ClusterError },
    #[error("deleting ClusterProfile {name}: {source}")]
    Delete { name: String, source: ClusterError },
    #[error("creating the GitPromotion state object: {0}")]
    EnsureState(ClusterError),
    #[error("persisting status: {0}")]
    PersistStatus(ClusterError),
    #[error("deleting the GitPromotion state object: {0}")]
    DeleteState(ClusterError),
    #[error("the step did not finish within {0:?}; cancelled (nothing persisted) and retried")]
    TimedOut(std::time::Duration),
}

impl ReconcileError {
    /// The failure's kind, as `tollgate_reconcile_errors_total{kind}` labels it (controller-rs'
    /// habit: one label value per variant, never the message).
    pub fn kind(&self) -> &'static str {
        match self {
            ReconcileError::Apply { .. } => "apply",
            ReconcileError::Delete { .. } => "delete",
            ReconcileError::EnsureState(_) => "ensure_state",
            ReconcileError::PersistStatus(_) => "persist_status",
            ReconcileError::DeleteState(_) => "delete_state",
            ReconcileError::TimedOut(_) => "timed_out",
        }
    }

    pub fn cluster_error(&self) -> Option<&ClusterError> {
        match self {
            ReconcileError::Apply { source, .. } | ReconcileError::Delete { source, .. } => {
                Some(source)
            }
            ReconcileError::EnsureState(e)
            | ReconcileError::PersistStatus(e)
            | ReconcileError::DeleteState(e) => Some(e),
            ReconcileError::TimedOut(_) => None,
        }
    }

    /// Whether retrying soon can succeed without a human.
    pub fn is_transient(&self) -> bool {
        self.cluster_error().is_none_or(ClusterError::is_transient)
    }
}

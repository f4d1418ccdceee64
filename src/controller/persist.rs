//! The `persist` step of a reconcile: the status the engine computed, written to the promotion's
//! GitPromotion (created first if needed) only when it changed.

use std::sync::Arc;

use tollgate_engine::PromotionStatus;
use tracing::debug;

use super::error::ReconcileError;
use super::reconcile::Context;
use crate::cluster::crd::GitPromotionSpec;
use crate::cluster::statuses::PersistedState;

/// Writes `status` if it differs from the persisted one; returns the state written (also
/// recorded in the status cache), `None` when nothing needed writing. `file` goes into the spec
/// of a GitPromotion created here.
pub async fn persist(
    ctx: &Context,
    name: &str,
    file: &str,
    persisted: Option<&PersistedState>,
    status: &Arc<PromotionStatus>,
) -> Result<Option<PersistedState>, ReconcileError> {
    if persisted.and_then(|p| p.status.as_ref()) == Some(status) {
        return Ok(None);
    }
    let (resource_version, uid, annotations) = match persisted {
        Some(p) if p.resource_version.is_some() || ctx.writer.dry_run() => (
            p.resource_version.clone(),
            p.uid.clone(),
            p.annotations.clone(),
        ),
        _ => {
            let created = create_state_object(ctx, name, file).await?;
            (
                created.metadata.resource_version.clone(),
                created.metadata.uid.clone(),
                created
                    .metadata
                    .annotations
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .collect(),
            )
        }
    };
    match ctx
        .writer
        .write_status(name, resource_version, &**status)
        .await
    {
        Ok(new_version) => {
            debug!(promotion = name, "status persisted");
            let written = PersistedState {
                resource_version: new_version,
                uid,
                annotations,
                status: Some(status.clone()),
            };
            ctx.statuses.record_own(name, written.clone());
            Ok(Some(written))
        }
        Err(error) => {
            // On a conflict someone else wrote: let the watched object be authoritative again.
            ctx.statuses.forget_own(name);
            Err(ReconcileError::PersistStatus(error))
        }
    }
}

async fn create_state_object(
    ctx: &Context,
    name: &str,
    file: &str,
) -> Result<crate::cluster::lean::LeanObject, ReconcileError> {
    let spec = GitPromotionSpec {
        repository: Some(ctx.origin.repository.clone()),
        branch: Some(ctx.origin.branch.clone()),
        path: Some(ctx.origin.path.clone()),
        file: Some(file.to_string()),
    };
    ctx.writer
        .ensure_state_object(name, spec)
        .await
        .map_err(ReconcileError::EnsureState)
}

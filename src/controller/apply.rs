//! The `apply` step of a reconcile: the engine's actions, each written through to the profile
//! cache so that the next step sees it even if the watch lags.

use tollgate_engine::Action;

use super::error::ReconcileError;
use super::reconcile::Context;
use crate::cluster::observe::convert_profile;

/// Executes `actions` in order and stops at the first failure: the engine's status may be
/// persisted only if every action succeeded (docs/architecture.md#the-engine-contract).
pub async fn apply(ctx: &Context, actions: &[Action]) -> Result<(), ReconcileError> {
    for action in actions {
        execute(ctx, action).await?;
    }
    Ok(())
}

async fn execute(ctx: &Context, action: &Action) -> Result<(), ReconcileError> {
    match action {
        Action::ApplyProfile { name, object } => {
            let applied = ctx
                .writer
                .apply_profile(name, object)
                .await
                .map_err(|source| ReconcileError::Apply {
                    name: name.clone(),
                    source,
                })?;
            if let Some((index, profile)) = convert_profile(&applied) {
                ctx.caches
                    .profiles
                    .upsert((String::new(), name.clone()), index, profile);
            }
        }
        Action::DeleteProfile { name } => {
            let remaining =
                ctx.writer
                    .delete_profile(name)
                    .await
                    .map_err(|source| ReconcileError::Delete {
                        name: name.clone(),
                        source,
                    })?;
            let key = (String::new(), name.clone());
            match remaining.as_ref().and_then(convert_profile) {
                Some((index, profile)) => {
                    ctx.caches.profiles.upsert(key, index, profile);
                }
                None => {
                    ctx.caches.profiles.remove(&key);
                }
            }
        }
    }
    Ok(())
}

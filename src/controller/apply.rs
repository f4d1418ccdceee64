//! The `apply` step of a reconcile: the engine's actions, each written through to the profile
//! cache so that the next step sees it even if the watch lags.

use tollgate_engine::Action;
use tollgate_engine::status::PromotionStatus;
use tollgate_render::stage_profile_name;

use super::error::ReconcileError;
use super::reconcile::Context;
use crate::cluster::observe::convert_profile;

/// Executes `actions` in order and stops at the first failure: the engine's status may be
/// persisted only if every action succeeded (docs/architecture.md#the-engine-contract).
/// Each action is a span of `promotion`'s trace, under the stage whose profile it writes (the
/// stage's entry time as `status`, the status the step will write, has it).
pub async fn apply(
    ctx: &Context,
    promotion: &str,
    status: &PromotionStatus,
    actions: &[Action],
) -> Result<(), ReconcileError> {
    for action in actions {
        let span = ctx.traces.enabled().then(|| {
            let stage = stage_of(promotion, status, action.profile_name());
            let name = match action {
                Action::ApplyProfile { .. } => "apply",
                Action::DeleteProfile { .. } => "delete",
            };
            ctx.traces.live(name, promotion, status, stage)
        });
        let result = execute(ctx, action).await;
        if let Some(span) = span {
            span.end(&result);
        }
        result?;
    }
    Ok(())
}

/// The stage of `status` whose generated profile is `profile`.
fn stage_of<'a>(promotion: &str, status: &'a PromotionStatus, profile: &str) -> Option<&'a str> {
    status
        .stages
        .iter()
        .find(|stage| stage_profile_name(promotion, &stage.name) == profile)
        .map(|stage| stage.name.as_str())
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

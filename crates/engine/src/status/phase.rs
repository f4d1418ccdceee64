//! The promotion's phase: one word for where its pipeline stands (the stage's activity makes it
//! while a stage runs; see `activity`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Phase {
    /// A stage is being provisioned.
    Progressing,
    /// Provisioned, waiting for a delay, a window or an approval.
    Waiting,
    /// `tollgate.dev/paused: "true"`.
    Paused,
    /// The last stage succeeded.
    Completed,
    /// The pipeline cannot go on without a fix: a foreign profile in the way, or a stage that
    /// failed under its RolloutPolicy (`onFailure: Halt`); nothing further is applied.
    Failed,
    /// A stage failed under its RolloutPolicy (`onFailure: Rollback`): the stages that got the
    /// rejected snapshot are being restored, the failing stage first.
    RollingBack,
    /// The rollback is done: the stages run what they ran before the rejected snapshot.
    RolledBack,
    /// HEAD's file is invalid; the last good snapshot keeps running.
    Invalid,
    /// A new snapshot waits because the RolloutPolicy governing the promotion cannot be resolved
    /// (a conflict, a missing or broken policy): nothing new starts until it is fixed; a run in
    /// progress goes on under its last valid policy.
    Held,
    /// Gone from git, but the blast-radius guard holds the removal: frozen until confirmed.
    RemovalHeld,
    /// Gone from git; generated profiles are being deleted.
    Removing,
    /// Gone from git; nothing left to do.
    Removed,
}

impl Phase {
    /// Whether a person has to look: the pipeline cannot go on by itself (failed, rolling back
    /// or rolled back, invalid at HEAD, held by its policy, a removal held, paused). Every view
    /// that singles promotions out reads this (the web overview lists them first, the live view
    /// shows their message).
    pub fn needs_attention(&self) -> bool {
        match self {
            Phase::Failed
            | Phase::RollingBack
            | Phase::RolledBack
            | Phase::Invalid
            | Phase::Held
            | Phase::RemovalHeld
            | Phase::Paused => true,
            Phase::Progressing
            | Phase::Waiting
            | Phase::Completed
            | Phase::Removing
            | Phase::Removed => false,
        }
    }

    /// The phase as the status spells it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Phase::Progressing => "Progressing",
            Phase::Waiting => "Waiting",
            Phase::Paused => "Paused",
            Phase::Completed => "Completed",
            Phase::Failed => "Failed",
            Phase::RollingBack => "RollingBack",
            Phase::RolledBack => "RolledBack",
            Phase::Invalid => "Invalid",
            Phase::Held => "Held",
            Phase::RemovalHeld => "RemovalHeld",
            Phase::Removing => "Removing",
            Phase::Removed => "Removed",
        }
    }
}

//! The engine's output: what to do, what to persist, what to tell, when to come back.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::measurement::MeasurementDue;
use crate::status::PromotionStatus;

#[derive(Clone, Debug, PartialEq)]
pub struct StepOutput {
    /// To be executed in order. Only if all succeed may `status` be persisted and `events` emitted.
    pub actions: Vec<Action>,
    pub status: PromotionStatus,
    pub events: Vec<EngineEvent>,
    /// The next instant at which a time-based condition changes; `None` = only input changes matter.
    pub wake_at: Option<DateTime<Utc>>,
    /// Analysis measurements due now, for the controller's analysis runner (asked again at every
    /// step until their result is recorded in status).
    pub measurements: Vec<MeasurementDue>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Server-side apply (field manager `tollgate`) of a whole ClusterProfile object.
    ApplyProfile {
        name: String,
        object: Value,
    },
    DeleteProfile {
        name: String,
    },
}

impl Action {
    pub fn profile_name(&self) -> &str {
        match self {
            Action::ApplyProfile { name, .. } | Action::DeleteProfile { name } => name,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// Declares [`EventReason`] and [`EventReason::ALL`] from one list of variants, so that the list
/// cannot miss one.
macro_rules! event_reasons {
    (
        $(#[$meta:meta])*
        pub enum EventReason { $($(#[$doc:meta])* $reason:ident,)* }
    ) => {
        $(#[$meta])*
        pub enum EventReason { $($(#[$doc])* $reason,)* }

        impl EventReason {
            /// Every reason, in declaration order (docs/operations.md#kubernetes-events lists them).
            pub const ALL: [EventReason; [$(stringify!($reason)),*].len()] =
                [$(EventReason::$reason),*];
        }
    };
}

event_reasons! {
    /// Why the engine tells something: a Kubernetes event's `reason` (the note carries upstream's
    /// text where there is one).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum EventReason {
        Provisioning,
        Provisioned,
        Rollback,
        ApprovalUsed,
        Paused,
        Resumed,
        Blocked,
        Removing,
        RemovalHeld,
        DriftCorrected,
        StageSkipped,
        StageFailed,
        BudgetExceeded,
        ClusterTimedOut,
        RollingBack,
        RolledBack,
        StageRestored,
        RollbackAcknowledged,
        /// A retry re-drove a halted stage's failed clusters (`retry.tollgate.dev/<stage>`).
        Retried,
        /// A retry annotation did nothing: another snapshot, a run not halted, a rolled-back one.
        RetryRefused,
        Blackout,
        WaveStarted,
        WaveCompleted,
        SnapshotsSuperseded,
        PolicyInvalid,
        /// A change that could lift a gate waits for an admin of the governing RolloutPolicy; the
        /// version in force governs the run, nothing new starts (issue #44).
        PolicyChangeUnapproved,
        /// The branch was rewritten: the promotion's newest snapshot is no longer in its history.
        BranchRewound,
        /// The branch tip failed commit verification; the last verified snapshot keeps running.
        CommitNotVerified,
        RejectedContentRecommitted,
        InvalidSpec,
        AnalysisFailed,
        AnalysisInconclusive,
        /// Told by the controller's notifier: a notice given up.
        NotificationFailed,
    }
}

impl EventReason {
    /// The reasons that announce a stage transition (a stage started, a wave, a stage
    /// provisioned or skipped, the run failed, a stage restored, the rollback done): told only by
    /// the engine's `run/transition_events`, from `transitions(before, after)`.
    pub const TRANSITIONS: [EventReason; 10] = [
        EventReason::Provisioning,
        EventReason::WaveStarted,
        EventReason::WaveCompleted,
        EventReason::Provisioned,
        EventReason::StageSkipped,
        EventReason::BudgetExceeded,
        EventReason::StageFailed,
        EventReason::RollingBack,
        EventReason::StageRestored,
        EventReason::RolledBack,
    ];

    /// The reason as the event spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            EventReason::Provisioning => "Provisioning",
            EventReason::Provisioned => "Provisioned",
            EventReason::Rollback => "Rollback",
            EventReason::ApprovalUsed => "ApprovalUsed",
            EventReason::Paused => "Paused",
            EventReason::Resumed => "Resumed",
            EventReason::Blocked => "Blocked",
            EventReason::Removing => "Removing",
            EventReason::RemovalHeld => "RemovalHeld",
            EventReason::DriftCorrected => "DriftCorrected",
            EventReason::StageSkipped => "StageSkipped",
            EventReason::StageFailed => "StageFailed",
            EventReason::BudgetExceeded => "BudgetExceeded",
            EventReason::ClusterTimedOut => "ClusterTimedOut",
            EventReason::RollingBack => "RollingBack",
            EventReason::RolledBack => "RolledBack",
            EventReason::StageRestored => "StageRestored",
            EventReason::RollbackAcknowledged => "RollbackAcknowledged",
            EventReason::Retried => "Retried",
            EventReason::RetryRefused => "RetryRefused",
            EventReason::Blackout => "Blackout",
            EventReason::WaveStarted => "WaveStarted",
            EventReason::WaveCompleted => "WaveCompleted",
            EventReason::SnapshotsSuperseded => "SnapshotsSuperseded",
            EventReason::PolicyInvalid => "PolicyInvalid",
            EventReason::PolicyChangeUnapproved => "PolicyChangeUnapproved",
            EventReason::CommitNotVerified => "CommitNotVerified",
            EventReason::BranchRewound => "BranchRewound",
            EventReason::RejectedContentRecommitted => "RejectedContentRecommitted",
            EventReason::InvalidSpec => "InvalidSpec",
            EventReason::AnalysisFailed => "AnalysisFailed",
            EventReason::AnalysisInconclusive => "AnalysisInconclusive",
            EventReason::NotificationFailed => "NotificationFailed",
        }
    }
}

impl std::fmt::Display for EventReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Lets tests and views compare a reason with its spelling.
impl PartialEq<&str> for EventReason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A Kubernetes event about the promotion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineEvent {
    pub event_type: EventType,
    pub reason: EventReason,
    pub note: String,
}

impl EngineEvent {
    pub fn normal(reason: EventReason, note: String) -> Self {
        EngineEvent {
            event_type: EventType::Normal,
            reason,
            note,
        }
    }
    pub fn warning(reason: EventReason, note: String) -> Self {
        EngineEvent {
            event_type: EventType::Warning,
            reason,
            note,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::EventReason;

    #[test]
    fn every_reason_is_listed_once_and_spelled_as_its_variant() {
        let mut names: Vec<&str> = EventReason::ALL.iter().map(|r| r.as_str()).collect();
        for reason in EventReason::ALL {
            assert_eq!(format!("{reason:?}"), reason.as_str());
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), EventReason::ALL.len());
    }
}

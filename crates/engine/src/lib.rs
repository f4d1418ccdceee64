//! The pure rollout engine: given a promotion's snapshot, its approval events, what the cluster
//! shows, the persisted status and `now`, decide which ClusterProfiles to apply or delete, the new
//! status, the events, and when to be woken next.
//!
//! No I/O, no clock reads, no randomness, no async: every rule is testable with a fake clock.
//!
//! The contract with the controller ([`step`]):
//! - execute [`StepOutput::actions`] in order; only if all succeed, persist
//!   [`StepOutput::status`] and emit [`StepOutput::events`]; otherwise call again later with the
//!   old status (this is how docs/architecture.md#d1-no-silently-skipped-restart and #d2-approvals-are-consumed-never-lost hold: state is persisted only with its apply);
//! - call again whenever an input changes, and at [`StepOutput::wake_at`];
//! - once the actions took effect, a step on the same input returns no actions and the same
//!   status: timestamps change on transitions only, so steady state writes nothing.
#![forbid(unsafe_code)]

// The engine's files by family (each a folder with its module file beside it); the modules other
// crates name are re-exported below at their old paths (`tollgate_engine::activity::…`).
pub mod depends_on;
mod effects;
mod failure;
pub mod features;
pub mod fleet;
mod gates;
pub mod input;
pub mod measurement;
pub mod messages;
pub mod observed;
mod observed_spec;
pub mod output;
pub mod preview;
mod run;
pub mod simulate;
mod stage;
pub mod status;
pub mod subset;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use failure::{fast_rollback, lineage};
pub use gates::{approval, approval_quorum, comparison, mann_whitney};
pub use run::{drift, step, write_hold};
pub use stage::{completion, retry};
pub use status::{
    activity, analysis_run, conditions, delivery, notices, paused_clusters, pipeline, progress,
    provisioning_history, quorum_view, run_history, trace_ids, trace_spans, transitions,
};

pub use depends_on::Dependency;
pub use input::{Desired, StepInput};
pub use notices::{Notice, notices};
pub use observed::{
    FeatureSummary, Observed, ObservedCluster, ObservedProfile, ObservedSpec, ObservedSummary,
};
pub use output::{Action, EngineEvent, EventReason, EventType, StepOutput};
pub use preview::{GateVerdict, Preview, PreviewInput, RunChange, preview};
pub use run::step::step;
pub use run_history::{RunHistory, RunOutcome, RunRecord, StageRecord};
pub use simulate::{Simulation, SimulationEnd, SimulationInput, simulate};
pub use status::{
    ApprovalReview, ApproverKind, ClusterCondition, ClusterState, Condition, Phase, PolicyRef,
    PromotionStatus, RestoredStage, RunFailure, StageAhead, StageStatus, WaveProgress,
};

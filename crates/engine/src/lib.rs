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

pub mod activity;
mod analysis;
mod analysis_end;
pub mod analysis_run;
pub mod approval;
pub mod approval_quorum;
mod clusters;
pub mod completion;
pub mod conditions;
mod counts;
pub mod delivery;
pub mod depends_on;
pub mod drift;
mod effects;
pub mod fast_rollback;
pub mod features;
pub mod fleet;
mod gate;
pub mod input;
pub mod lineage;
pub mod mann_whitney;
pub mod measurement;
pub mod messages;
mod never_valid;
mod new_snapshot;
mod notice;
pub mod notices;
pub mod observed;
mod observed_spec;
pub mod output;
pub mod paused_clusters;
mod phase;
pub mod pipeline;
pub mod preview;
pub mod progress;
pub mod quorum_view;
mod removal;
pub mod retry;
mod retry_state;
mod rollback;
mod rollback_mode;
pub mod run_history;
mod run_recording;
pub mod simulate;
mod stage;
mod stage_analysis;
mod stage_run;
mod stage_status;
pub mod status;
mod status_memory;
pub mod step;
pub mod subset;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod verdict;
mod waves;
pub mod write_hold;

pub use depends_on::Dependency;
pub use input::{Desired, StepInput};
pub use notices::{Notice, notices};
pub use observed::{
    FeatureSummary, Observed, ObservedCluster, ObservedProfile, ObservedSpec, ObservedSummary,
};
pub use output::{Action, EngineEvent, EventReason, EventType, StepOutput};
pub use preview::{GateVerdict, Preview, PreviewInput, RunChange, preview};
pub use run_history::{RunHistory, RunOutcome, RunRecord, StageRecord};
pub use simulate::{Simulation, SimulationEnd, SimulationInput, simulate};
pub use status::{
    ApprovalReview, ApproverKind, ClusterCondition, ClusterState, Condition, Phase, PolicyRef,
    PromotionStatus, RestoredStage, RunFailure, StageAhead, StageStatus, WaveProgress,
};
pub use step::step;

//! The gates: what lets a run or a stage go on. The start gate (`start_gate`) before a stage
//! starts, the gate at the end of a provisioned stage (`gate`, on the state the stage pipeline
//! shares with it: `stage_run`), and the rules they ask: approvals and their quorum, analyses,
//! `onNewSnapshot`; the rank test comparative analyses judge by (`mann_whitney`).

pub(crate) mod analysis;
pub mod approval;
pub mod approval_quorum;
pub(crate) mod cohorts;
pub mod comparison;
pub(crate) mod gate;
pub mod mann_whitney;
pub(crate) mod new_snapshot;
pub(crate) mod score;
pub(crate) mod stage_run;
pub(crate) mod start_gate;

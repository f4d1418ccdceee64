//! A run that failed, and what brings known-good content back: the rollback of a failed run
//! (`rollback`), its fast path (`fast_rollback`), and the rule that tells a rollback from a
//! forward change (`lineage`).

pub mod fast_rollback;
pub mod lineage;
pub(crate) mod rollback;

//! The ClusterProfile objects tollgate generates: names, labels, annotations and spec.
//!
//! Pure: every function turns a snapshot and a stage into a JSON object ready for server-side
//! apply. Deciding *when* to apply is the engine's job.
#![forbid(unsafe_code)]

pub mod keys;
pub mod names;
pub mod profile;

pub use keys::*;
pub use names::{preverification_profile_name, stage_profile_name};
pub use profile::{
    ClusterRef, render_preverification_profile, render_stage_profile, render_stage_profile_for,
    spec_hash, stage_profile_spec, stage_profile_spec_for,
};

//! tollgate: a git-driven controller for progressive, staged Sveltos rollouts.
//!
//! The library holds the I/O edges and their wiring; the rules live in the workspace crates
//! (`tollgate-model`, `tollgate-manifest`, `tollgate-engine`, `tollgate-render`, `tollgate-source`).
#![forbid(unsafe_code)]

pub mod analysis;
pub mod cli;
pub mod cluster;
pub mod controller;
pub mod fuzzing;
pub mod memory;
pub mod metrics;
pub mod notify;
pub mod outbound;
pub mod server;
pub mod signals;
pub mod traces;
pub mod views;
pub mod web;

//! Cluster I/O: the kube client edge. Reads via reflectors, writes via [`writer::ClusterWriter`].
//! Decides nothing: what to write comes from the engine.

pub mod cache;
pub mod crd;
pub mod errors;
pub mod events;
pub mod fetch_request;
pub mod leader;
pub mod lean;
pub mod observe;
pub mod resources;
pub mod statuses;
pub mod stored_status;
pub mod throttle;
pub mod user_agent;
pub mod watch;
pub mod writer;

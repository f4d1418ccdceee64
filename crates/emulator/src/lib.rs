#![forbid(unsafe_code)]
//! tollgate's embedded management cluster: a loopback HTTP(S) server speaking the Kubernetes REST
//! subset tollgate uses (discovery, CRUD, server-side apply, watches, status subresources), backed
//! by memory, plus a stand-in for Sveltos's addon-controller, a fleet file, and fault injection.
//!
//! A test double, not a product: it serves the built-in and Sveltos types (their CRDs vendored
//! under `crds/`) and the CRDs its caller passes in ([`EmulatorConfig::crds`]); it validates
//! custom resources with the validator tollgate's manifest checks use (`tollgate-schema`); what
//! kubectl alone needs is the optional [`kubectl`] module (cargo feature `kubectl`, default on).

pub mod api;
pub mod api_error;
pub mod failure_rules;
pub mod faults;
mod feature;
mod field_causes;
pub mod fleet;
pub mod kubeconfig;
pub mod kubectl;
pub mod managed_fields;
pub mod patch;
pub mod registry;
mod request;
mod schema_validation;
pub mod selector;
pub mod server;
mod shared;
pub mod stand_in_inbox;
pub mod standalone;
pub mod state;
pub mod store;
pub mod stored_json;
pub mod sveltos;
mod sveltos_tracking;
pub mod tls;
pub mod write_log;

pub use api_error::ApiError;
pub use failure_rules::{FailureRule, VersionGlob};
pub use fleet::{Feature, Fleet, FleetCluster, FleetError};
pub use server::{
    Emulator, EmulatorConfig, EmulatorError, EmulatorHandle, RequestCounts, Transport,
};
pub use standalone::{ServingFaults, StandaloneConfig, run_standalone, run_standalone_until};
pub use tls::{TlsAuthority, TlsCredentials};
pub use write_log::WriteRecord;

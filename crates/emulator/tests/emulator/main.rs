//! The emulator's integration tests, in one test binary: the API server against the Kubernetes API
//! conventions, as kube, kubectl and raw HTTP clients see it. One module per former
//! `tests/<name>.rs` (`cargo test -p tollgate-emulator --test emulator faults::`); one binary
//! because each file's binary linked the emulator and its HTTP stack again for a second of tests.

mod common;
mod raw_http;

// The modules under `cfg(feature = "kubectl")` need kubectl fidelity (protobuf, Tables, core/v1
// Events); `required-features` left them out the same way.
#[cfg(feature = "kubectl")]
mod api_core_events;
mod api_crud;
mod api_real_server;
mod api_ssa;
mod api_watch;
mod emulator_tls;
mod faults;
mod inflight_limit;
#[cfg(feature = "kubectl")]
mod kubectl;
#[cfg(feature = "kubectl")]
mod kubectl_real_server;
mod schema_validation;
mod standalone;
mod sveltos;

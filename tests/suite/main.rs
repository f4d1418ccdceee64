//! The root package's integration tests, in one test binary: the controller loop, the emulator,
//! the CLI and the server end to end, plus the checks of docs, deploy manifests and the fuzz
//! corpus. One module per former `tests/<name>.rs`, so `cargo test --test suite e2e_notify::`
//! runs what `--test e2e_notify` ran.
//!
//! One binary, not one per file: each binary linked the whole tollgate library (kube, axum, git2,
//! …) and compiled `support` again, and cargo runs binaries one after another, so one file's long
//! wait (a receiver outage, a soak) held up all the files behind it. Here the test threads take the
//! next test whatever module it is in.
//!
//! What is process-wide is shared by every module, so it is made once, the same way for all:
//! Prometheus and the browser are started at most once (`support::prometheus`,
//! `support::browser`), logs go through one subscriber (`support::init_logs`), and every source
//! fetching in-process uses `support::NETWORK_TIMEOUTS` (libgit2's timeouts are global, installed
//! by the first fetch). Nothing sets environment variables or the current directory.

mod chaos_support;
/// The loopback smart-HTTP git server of the source crate's tests.
#[path = "../../crates/source/tests/support/git_http_server.rs"]
mod git_http_server;
mod support;

// The modules under `cfg(feature = "embedded")` run the binary's embedded cluster (`run
// --embedded`, `tollgate emulator`); `required-features` left them out the same way.
mod chaos;
mod chaos_recovery;
mod chaos_trust;
mod ci_templates;
mod cli_approve_e2e;
mod cli_approve_rollback;
mod cli_approve_signed;
mod cli_concurrency;
mod cli_edit_corners;
#[cfg(feature = "embedded")]
mod cli_embedded;
mod cli_history;
mod cli_plan;
mod cli_plan_estimate;
mod cli_retry;
#[cfg(feature = "embedded")]
mod cli_robustness;
mod cli_rollback_e2e;
#[cfg(feature = "embedded")]
mod cli_run;
#[cfg(feature = "embedded")]
mod cli_run_leader;
mod cli_run_startup;
mod cli_status_watch;
mod cli_timeline;
mod cli_trust;
mod cli_validate;
mod deploy_manifests;
mod docs_cli;
mod docs_links;
mod docs_tables;
mod e2e_analysis;
mod e2e_analysis_corners;
mod e2e_comparison;
mod e2e_coordination;
mod e2e_delivery_once;
mod e2e_drift;
mod e2e_fail_closed;
mod e2e_failure_policy;
mod e2e_gates;
mod e2e_insider;
mod e2e_invalid_files;
mod e2e_leader;
mod e2e_lifecycle;
mod e2e_new_snapshot;
mod e2e_notify;
mod e2e_notify_corners;
mod e2e_recovery;
mod e2e_retry_and_fast_rollback;
mod e2e_rollout;
mod e2e_safety;
mod e2e_throttle;
mod e2e_traces;
mod e2e_trust;
mod e2e_trust_keys;
mod e2e_user_corners;
mod e2e_views_agree;
mod e2e_web;
mod e2e_web_framing;
#[cfg(feature = "embedded")]
mod e2e_web_hostile;
#[cfg(feature = "embedded")]
mod e2e_web_repeat;
mod e2e_web_signed;
mod e2e_write_economy;
mod emulator_failures;
#[cfg(feature = "embedded")]
mod emulator_tls_cli;
mod events_series;
mod function_lengths;
mod fuzz_corpus;
mod git_transports;
#[cfg(feature = "embedded")]
mod hardening_secrets;
mod module_layers;
#[cfg(feature = "embedded")]
mod monitoring_kit;
mod policy_schema;
mod projection_properties;
#[cfg(feature = "embedded")]
mod readme_walkthrough;
mod server_http;
mod server_webhooks;

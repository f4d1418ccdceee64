//! The source crate's integration tests, in one test binary: git history, approvals, policies,
//! signature verification, fetches and the filesystem watch, on repositories built with the `git`
//! CLI in temp dirs. One module per former `tests/<name>.rs`
//! (`cargo test -p tollgate-source --test source fetch::`). `fetch_timeout` stays a binary of its
//! own: libgit2's network timeouts are process-wide, and it needs short ones.

mod common;
/// The loopback smart-HTTP git server (the root package's tests use it too).
#[path = "../support/git_http_server.rs"]
mod git_http_server;

mod annotation_edit;
mod approvals;
mod fetch;
mod history;
mod policies;
mod signer_principals;
mod verify;
mod watch;

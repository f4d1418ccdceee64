//! Network timeouts for fetches. libgit2 has none by default: a remote that accepts the connection
//! and then says nothing would hang a sync forever (the transfer-progress deadline in `repo.rs`
//! only fires while data flows).
//!
//! libgit2 keeps them in two process-wide C integers, set through `unsafe` functions because the
//! write is unsynchronised. This is the crate's one `unsafe` block, and it is sound because:
//! libgit2 reads those integers only when it opens or reads a network stream; every network
//! operation in tollgate goes through `repo::fetch`, which calls [`apply_once`] first; and the
//! `OnceLock` makes the write happen-before any such read, on any thread.
#![allow(unsafe_code)]

use std::sync::OnceLock;
use std::time::Duration;

/// How long a fetch may wait to connect, and for each read or write on an open connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetworkTimeouts {
    pub connect: Duration,
    pub io: Duration,
}

impl Default for NetworkTimeouts {
    fn default() -> Self {
        NetworkTimeouts {
            connect: Duration::from_secs(30),
            io: Duration::from_secs(60),
        }
    }
}

static APPLIED: OnceLock<NetworkTimeouts> = OnceLock::new();

/// Installs `timeouts` in libgit2 unless some were installed already (they are process-wide: the
/// first source to fetch decides; tollgate runs one source per process). Returns those in force.
pub(crate) fn apply_once(timeouts: NetworkTimeouts) -> NetworkTimeouts {
    *APPLIED.get_or_init(|| {
        let millis = |d: Duration| i32::try_from(d.as_millis()).unwrap_or(i32::MAX).max(1);
        // SAFETY: see the module comment — no libgit2 network stream exists before this returns.
        unsafe {
            // Both setters only store an integer; their Result exists for other options.
            let _ =
                git2::opts::set_server_connect_timeout_in_milliseconds(millis(timeouts.connect));
            let _ = git2::opts::set_server_timeout_in_milliseconds(millis(timeouts.io));
        }
        timeouts
    })
}

//! The signals that end a long-running command, in one place: `run` and `status --watch` stop on
//! Ctrl-C or SIGTERM (what Kubernetes sends on pod shutdown); `ui`, a person's local view, on
//! Ctrl-C.

/// Ctrl-C, or SIGTERM.
pub async fn shutdown() {
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c() => {},
        _ = term => {},
    }
}

/// Ctrl-C alone (a SIGTERM ends the process as by default).
pub async fn ctrl_c() {
    let _ = tokio::signal::ctrl_c().await;
}

use std::net::SocketAddr;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot read the listening address: {0}")]
    LocalAddr(std::io::Error),
    #[error("HTTP server on {addr} failed: {source}")]
    Serve {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

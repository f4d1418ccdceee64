//! The one HTTPS client for what tollgate calls out to (notification receivers, analysis
//! providers, git hosts' APIs): rustls with the system's roots, plain HTTP allowed for
//! in-cluster endpoints.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// The client every outbound request goes through (cheap to clone: one connection pool).
pub type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// An HTTPS (and plain HTTP, for in-cluster receivers) client trusting the system's roots.
pub fn https_client() -> Result<HttpsClient, std::io::Error> {
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

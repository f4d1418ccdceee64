//! HTTPS and authentication, as a real API server has them: a CA generated at start, a server
//! certificate it signs, and two credentials a client may present (a bearer token, or a client
//! certificate signed by the CA). Nothing here is persisted: a restarted emulator has new ones and
//! writes a new kubeconfig.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::{IncomingStream, Listener};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};
use tokio_rustls::server::TlsStream;

/// A client that connects and never finishes its handshake is dropped after this long.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Paths a real API server serves to anyone (`system:public-info-viewer`).
const PUBLIC_PATHS: [&str; 4] = ["/version", "/healthz", "/livez", "/readyz"];
/// Common name of the client certificate; `system:masters` as a kind cluster's admin has.
const CLIENT_COMMON_NAME: &str = "tollgate-emulator-admin";

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("generating the emulator's certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("configuring TLS: {0}")]
    Rustls(#[from] tokio_rustls::rustls::Error),
    #[error("configuring client-certificate verification: {0}")]
    ClientVerifier(#[from] tokio_rustls::rustls::server::VerifierBuilderError),
    #[error("no secure random numbers for the bearer token")]
    Random,
    #[error("the kept CA certificate cannot be read: {0}")]
    Authority(String),
}

/// The CA (with its key) and the client credentials it issued: what clients hold on to through
/// their kubeconfig, so what a restarted emulator must keep (`tollgate emulator --state-file`
/// saves it beside the state file) for their kubeconfig to stay valid.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsAuthority {
    ca_name: String,
    ca_key_pem: String,
    ca_certificate_pem: String,
    client_certificate_pem: String,
    client_key_pem: String,
    token: String,
}

/// Never prints a key or the token.
impl fmt::Debug for TlsAuthority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsAuthority")
            .field("ca_name", &self.ca_name)
            .finish_non_exhaustive()
    }
}

/// The CA's parameters; rebuilt the same from its name when an authority is resumed.
fn ca_params(ca_name: &str) -> Result<CertificateParams, TlsError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.distinguished_name.push(DnType::CommonName, ca_name);
    Ok(params)
}

impl TlsAuthority {
    /// A new CA, a client certificate it signs, and a random token.
    pub fn generate() -> Result<Self, TlsError> {
        // A name of its own per authority (as kube-apiserver's `localhost-ca@<time>`): a client
        // holding another run's CA is told the issuer is unknown, not that a signature is bad.
        let ca_name = format!("tollgate-emulator-ca@{}", &random_token()?[..8]);
        let params = ca_params(&ca_name)?;
        let ca_key = KeyPair::generate()?;
        let ca_certificate = params.self_signed(&ca_key)?;
        let issuer = Issuer::new(params, ca_key);

        let mut client_params = CertificateParams::new(Vec::<String>::new())?;
        client_params
            .distinguished_name
            .push(DnType::CommonName, CLIENT_COMMON_NAME);
        client_params
            .distinguished_name
            .push(DnType::OrganizationName, "system:masters");
        client_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_key = KeyPair::generate()?;
        let client_certificate = client_params.signed_by(&client_key, &issuer)?;
        Ok(Self {
            ca_name,
            ca_key_pem: issuer.key().serialize_pem(),
            ca_certificate_pem: ca_certificate.pem(),
            client_certificate_pem: client_certificate.pem(),
            client_key_pem: client_key.serialize_pem(),
            token: random_token()?,
        })
    }
}

/// The authority and the server certificate it issued for one emulator run.
#[derive(Clone)]
pub struct TlsCredentials {
    authority: TlsAuthority,
    ca_certificate: CertificateDer<'static>,
    server_certificate: CertificateDer<'static>,
    server_key: Vec<u8>,
}

/// Never prints a key or the token (the config holding credentials is `Debug`).
impl fmt::Debug for TlsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsCredentials")
            .field("authority", &self.authority)
            .finish_non_exhaustive()
    }
}

impl TlsCredentials {
    /// New credentials; see [`Self::issue`].
    pub fn generate(server_ip: IpAddr) -> Result<Self, TlsError> {
        Self::issue(TlsAuthority::generate()?, server_ip)
    }

    /// A server certificate from `authority`, valid for `localhost`, `127.0.0.1`, `::1` and
    /// `server_ip` (the address the emulator is bound to); issued at every start, as the
    /// address may change.
    pub fn issue(authority: TlsAuthority, server_ip: IpAddr) -> Result<Self, TlsError> {
        let ca_key = KeyPair::from_pem(&authority.ca_key_pem)?;
        let issuer = Issuer::new(ca_params(&authority.ca_name)?, ca_key);
        let ca_certificate =
            CertificateDer::from_pem_slice(authority.ca_certificate_pem.as_bytes())
                .map_err(|error| TlsError::Authority(error.to_string()))?;

        let mut hosts = vec![
            "localhost".to_string(),
            Ipv4Addr::LOCALHOST.to_string(),
            Ipv6Addr::LOCALHOST.to_string(),
        ];
        if !hosts.contains(&server_ip.to_string()) {
            hosts.push(server_ip.to_string());
        }
        let mut server_params = CertificateParams::new(hosts)?;
        server_params
            .distinguished_name
            .push(DnType::CommonName, "tollgate-emulator");
        server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_key = KeyPair::generate()?;
        let server_certificate = server_params.signed_by(&server_key, &issuer)?;
        Ok(Self {
            authority,
            ca_certificate,
            server_certificate: server_certificate.der().clone(),
            server_key: server_key.serialize_der(),
        })
    }

    /// What a restart must keep (see [`TlsAuthority`]).
    pub fn authority(&self) -> &TlsAuthority {
        &self.authority
    }

    /// The CA certificate (PEM) clients must trust.
    pub fn ca_pem(&self) -> &str {
        &self.authority.ca_certificate_pem
    }

    /// A client certificate signed by the CA (PEM).
    pub fn client_certificate_pem(&self) -> &str {
        &self.authority.client_certificate_pem
    }

    /// The client certificate's private key (PKCS#8 PEM).
    pub fn client_key_pem(&self) -> &str {
        &self.authority.client_key_pem
    }

    /// The bearer token the server accepts.
    pub fn token(&self) -> &str {
        &self.authority.token
    }

    /// The rustls configuration: this server certificate, and client certificates optional but,
    /// when presented, verified against the CA (a wrong one fails the handshake).
    pub fn acceptor(&self) -> Result<TlsAcceptor, TlsError> {
        let provider = Arc::new(ring::default_provider());
        let mut roots = RootCertStore::empty();
        roots.add(self.ca_certificate.clone())?;
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                .allow_unauthenticated()
                .build()?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key.clone()));
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![self.server_certificate.clone()], key)?;
        // The server speaks HTTP/1.1 only (axum without its http2 feature).
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// 32 random bytes from the TLS provider's secure source, URL-safe base64.
fn random_token() -> Result<String, TlsError> {
    let mut bytes = [0u8; 32];
    ring::default_provider()
        .secure_random
        .fill(&mut bytes)
        .map_err(|_| TlsError::Random)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// Who is at the other end of a TLS connection.
#[derive(Debug, Clone)]
pub struct TlsPeer {
    pub address: SocketAddr,
    /// The client presented a certificate, and the handshake verified it against the CA.
    pub verified_certificate: bool,
}

impl axum::extract::connect_info::Connected<IncomingStream<'_, TlsListener>> for TlsPeer {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        stream.remote_addr().clone()
    }
}

type Handshake = Result<(TlsStream<TcpStream>, TlsPeer), (SocketAddr, std::io::Error)>;

/// A TCP listener that hands out connections once their TLS handshake has completed. Handshakes
/// run concurrently, so a slow or silent client does not hold up the others.
pub struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    handshakes: JoinSet<Handshake>,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> Self {
        Self {
            tcp,
            acceptor,
            handshakes: JoinSet::new(),
        }
    }

    fn start_handshake(&mut self, stream: TcpStream, address: SocketAddr) {
        let acceptor = self.acceptor.clone();
        self.handshakes.spawn(async move {
            let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream));
            let tls = match handshake.await {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => return Err((address, error)),
                Err(_) => {
                    let timed_out = std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "no TLS handshake in time",
                    );
                    return Err((address, timed_out));
                }
            };
            let verified_certificate = tls.get_ref().1.peer_certificates().is_some();
            let peer = TlsPeer {
                address,
                verified_certificate,
            };
            Ok((tls, peer))
        });
    }
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = TlsPeer;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                accepted = self.tcp.accept() => match accepted {
                    Ok((stream, address)) => self.start_handshake(stream, address),
                    // Out of file descriptors and the like: wait, as axum's own listener does.
                    Err(error) => {
                        tracing::warn!(%error, "emulator cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                Some(finished) = self.handshakes.join_next(), if !self.handshakes.is_empty() => {
                    match finished {
                        Ok(Ok(connection)) => return connection,
                        Ok(Err((address, error))) => {
                            tracing::debug!(%address, %error, "TLS handshake with the emulator failed");
                        }
                        Err(error) => tracing::warn!(%error, "TLS handshake task ended abnormally"),
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(TlsPeer {
            address: self.tcp.local_addr()?,
            verified_certificate: false,
        })
    }
}

/// What a request must carry to be let through.
#[derive(Clone)]
pub struct Authenticator {
    token: Arc<str>,
}

impl Authenticator {
    pub fn new(credentials: &TlsCredentials) -> Self {
        Self {
            token: Arc::from(credentials.token()),
        }
    }

    /// A verified client certificate, or `Authorization: Bearer <the token>`.
    fn admits(&self, request: &Request) -> bool {
        let certificate = request
            .extensions()
            .get::<ConnectInfo<TlsPeer>>()
            .is_some_and(|ConnectInfo(peer)| peer.verified_certificate);
        let bearer = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .is_some_and(|presented| constant_time_eq(presented.trim(), &self.token));
        certificate || bearer
    }
}

/// Compares without stopping at the first difference, so timing does not reveal a prefix.
fn constant_time_eq(presented: &str, expected: &str) -> bool {
    let (a, b) = (presented.as_bytes(), expected.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn is_public(request: &Request) -> bool {
    request.method() == Method::GET && PUBLIC_PATHS.contains(&request.uri().path())
}

/// Middleware: 401 with a Status body, as the real server answers, unless the request is
/// authenticated or asks for public information.
pub async fn authenticate(
    State(authenticator): State<Authenticator>,
    request: Request,
    next: Next,
) -> Response {
    if is_public(&request) || authenticator.admits(&request) {
        return next.run(request).await;
    }
    unauthorized()
}

fn unauthorized() -> Response {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Unauthorized", "reason": "Unauthorized", "code": 401,
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_differ_and_compare_only_when_equal() {
        let first = random_token().unwrap();
        let second = random_token().unwrap();
        assert_ne!(first, second);
        assert_eq!(first.len(), 43, "32 bytes, unpadded base64");
        assert!(constant_time_eq(&first, &first.clone()));
        assert!(!constant_time_eq(&first, &second));
        assert!(!constant_time_eq(&first, &first[..42]));
    }

    #[test]
    fn credentials_debug_shows_no_secret() {
        let credentials = TlsCredentials::generate(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
        let printed = format!("{credentials:?}");
        assert!(!printed.contains(credentials.token()));
        assert!(!printed.contains("PRIVATE KEY"));
        assert!(credentials.client_key_pem().contains("PRIVATE KEY"));
        assert!(credentials.ca_pem().contains("BEGIN CERTIFICATE"));
    }
}

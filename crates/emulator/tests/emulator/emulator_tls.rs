//! The emulator over TLS, as a real API server: clients must trust its CA and authenticate with
//! the bearer token or a client certificate the CA signed; anything else is refused (401, or a
//! failed handshake) before a request reaches the API.

use crate::common;

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use common::*;
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tollgate_emulator::kubeconfig::{CONTEXT_NAME, TOKEN_CONTEXT_NAME};
use tollgate_emulator::{
    Emulator, EmulatorConfig, EmulatorHandle, Fleet, FleetCluster, TlsCredentials, Transport,
};

const KUBECTL: &str = "/usr/bin/kubectl";

async fn start_tls() -> EmulatorHandle {
    let fleet = Fleet {
        clusters: vec![FleetCluster::new("fleet", "dev-1", &[("env", "dev")])],
        ..Fleet::default()
    };
    Emulator::start(EmulatorConfig {
        fleet,
        transport: Transport::Tls,
        ..common::config()
    })
    .await
    .expect("emulator starts")
}

/// A client from kubeconfig text, read the way `tollgate status` and kubectl read the file.
async fn client_from(yaml: &str, context: &str) -> Client {
    let kubeconfig = Kubeconfig::from_yaml(yaml).expect("kubeconfig parses");
    let options = KubeConfigOptions {
        context: Some(context.to_string()),
        ..KubeConfigOptions::default()
    };
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .expect("kubeconfig loads");
    config.default_retry = false;
    Client::try_from(config).expect("client")
}

/// A one-user kubeconfig for `url`: trusting `ca_pem` (or the system's roots), as `user` (YAML
/// lines under `user:`, or `{}`).
fn kubeconfig(url: &str, ca_pem: Option<&str>, user: &str) -> String {
    let ca = ca_pem
        .map(|pem| format!("    certificate-authority-data: {}\n", STANDARD.encode(pem)))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {url}\n{ca}\
         contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n\
         users:\n- name: u\n  user: {user}\n"
    )
}

fn certificate_user(credentials: &TlsCredentials) -> String {
    format!(
        "\n    client-certificate-data: {}\n    client-key-data: {}",
        STANDARD.encode(credentials.client_certificate_pem()),
        STANDARD.encode(credentials.client_key_pem())
    )
}

fn token_user(token: &str) -> String {
    format!("\n    token: \"{token}\"")
}

async fn list_clusters(client: &Client) -> Result<usize, kube::Error> {
    let clusters =
        kube::Api::<kube::api::DynamicObject>::all_with(client.clone(), &sveltos_cluster_type());
    Ok(clusters.list(&ListParams::default()).await?.items.len())
}

/// The error and its sources, for assertions on what went wrong.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(next) = source {
        text += &format!(": {next}");
        source = next.source();
    }
    text
}

fn assert_unauthorized(result: Result<usize, kube::Error>, what: &str) {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 401, "{what}: {status:?}");
            assert_eq!(status.reason, "Unauthorized", "{what}: {status:?}");
        }
        other => panic!("{what}: expected 401 Unauthorized, got {other:?}"),
    }
}

#[tokio::test]
async fn tls_written_kubeconfig_connects_unchanged_with_certificate_and_with_token() {
    let handle = start_tls().await;
    assert!(
        handle.url().starts_with("https://127.0.0.1:"),
        "{}",
        handle.url()
    );
    let yaml = handle.kubeconfig_yaml();
    for context in [CONTEXT_NAME, TOKEN_CONTEXT_NAME] {
        let client = client_from(&yaml, context).await;
        assert_eq!(list_clusters(&client).await.expect(context), 1, "{context}");
    }
    handle.shutdown().await;
}

#[tokio::test]
async fn tls_bearer_token_alone_authenticates() {
    let handle = start_tls().await;
    let credentials = handle.tls_credentials().expect("TLS credentials");
    let yaml = kubeconfig(
        &handle.url(),
        Some(credentials.ca_pem()),
        &token_user(credentials.token()),
    );
    let client = client_from(&yaml, "x").await;
    assert_eq!(list_clusters(&client).await.expect("token accepted"), 1);
    handle.shutdown().await;
}

#[tokio::test]
async fn tls_client_certificate_alone_authenticates() {
    let handle = start_tls().await;
    let credentials = handle.tls_credentials().expect("TLS credentials");
    let yaml = kubeconfig(
        &handle.url(),
        Some(credentials.ca_pem()),
        &certificate_user(credentials),
    );
    let client = client_from(&yaml, "x").await;
    assert_eq!(
        list_clusters(&client).await.expect("certificate accepted"),
        1
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn tls_request_without_or_with_wrong_credentials_gets_401() {
    let handle = start_tls().await;
    let credentials = handle.tls_credentials().expect("TLS credentials");
    let ca = Some(credentials.ca_pem());
    let anonymous = client_from(&kubeconfig(&handle.url(), ca, "{}"), "x").await;
    assert_unauthorized(list_clusters(&anonymous).await, "no credentials");
    let wrong = format!("{}x", credentials.token());
    let forged = client_from(&kubeconfig(&handle.url(), ca, &token_user(&wrong)), "x").await;
    assert_unauthorized(list_clusters(&forged).await, "a wrong token");
    assert_eq!(
        handle.request_counts().verb("list"),
        0,
        "refused requests never reach the API"
    );
    // Public information needs no credentials, as on a real server.
    let version = anonymous
        .apiserver_version()
        .await
        .expect("/version is public");
    assert!(!version.git_version.is_empty());
    handle.shutdown().await;
}

#[tokio::test]
async fn tls_client_not_trusting_the_ca_cannot_connect() {
    let handle = start_tls().await;
    let credentials = handle.tls_credentials().expect("TLS credentials");
    let stranger = TlsCredentials::generate(IpAddr::V4(Ipv4Addr::LOCALHOST)).expect("other CA");
    for (what, ca) in [
        ("the system's roots", None),
        ("another CA", Some(stranger.ca_pem())),
    ] {
        let yaml = kubeconfig(&handle.url(), ca, &token_user(credentials.token()));
        let error = list_clusters(&client_from(&yaml, "x").await)
            .await
            .expect_err(what);
        let text = chain(&error);
        assert!(
            text.contains("invalid peer certificate: UnknownIssuer"),
            "trusting {what}, the server certificate is refused: {text}"
        );
    }
    assert_eq!(handle.request_counts().verb("list"), 0);
    handle.shutdown().await;
}

#[tokio::test]
async fn tls_client_certificate_from_another_ca_is_refused() {
    let handle = start_tls().await;
    let credentials = handle.tls_credentials().expect("TLS credentials");
    let stranger = TlsCredentials::generate(IpAddr::V4(Ipv4Addr::LOCALHOST)).expect("other CA");
    let yaml = kubeconfig(
        &handle.url(),
        Some(credentials.ca_pem()),
        &certificate_user(&stranger),
    );
    let result = list_clusters(&client_from(&yaml, "x").await).await;
    assert!(
        result.is_err(),
        "a certificate the CA did not sign: {result:?}"
    );
    assert_eq!(
        handle.request_counts().verb("list"),
        0,
        "the handshake fails before any request"
    );
    handle.shutdown().await;
}

/// Handshakes run side by side: a client that connects and says nothing (a port scanner, a plain
/// HTTP client waiting for a response) does not hold up the others until its handshake times out.
#[tokio::test]
async fn tls_silent_connection_does_not_hold_up_other_clients() {
    use std::io::Read as _;
    let handle = start_tls().await;
    let silent = std::net::TcpStream::connect(handle.addr()).expect("connects");
    silent.set_nonblocking(true).expect("non-blocking");
    let client = client_from(&handle.kubeconfig_yaml(), CONTEXT_NAME).await;
    assert_eq!(list_clusters(&client).await.expect("served"), 1);
    // Served while the silent connection still waits for its handshake: not closed yet.
    let mut buffer = [0u8; 1];
    let read = (&silent).read(&mut buffer);
    assert!(
        matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the silent connection was dealt with first: {read:?}"
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn tls_plain_http_emulator_is_unchanged_by_default() {
    let (handle, client) = start(Fleet::default()).await;
    assert!(handle.url().starts_with("http://"), "{}", handle.url());
    assert!(handle.tls_credentials().is_none());
    assert!(!handle.kubeconfig_yaml().contains("token"));
    list_clusters(&client)
        .await
        .expect("no authentication over plain HTTP");
    handle.shutdown().await;
}

async fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> (bool, String) {
    let output = tokio::process::Command::new(KUBECTL)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .output()
        .await
        .expect("kubectl runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

#[tokio::test]
async fn tls_kubectl_connects_with_the_written_kubeconfig_both_ways() {
    if !Path::new(KUBECTL).exists() {
        println!("SKIP: {KUBECTL} not installed; kubectl over TLS not checked");
        return;
    }
    let handle = start_tls().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("kubeconfig");
    handle.write_kubeconfig(&path).expect("kubeconfig written");
    let cache = dir.path().join("cache");
    for context in [CONTEXT_NAME, TOKEN_CONTEXT_NAME] {
        let (ok, text) = kubectl(
            &path,
            &cache,
            &["--context", context, "get", "sveltosclusters", "-A"],
        )
        .await;
        assert!(ok && text.contains("dev-1"), "{context}: {text}");
    }
    handle.shutdown().await;
}

/// A real cluster keeps its CA across a restart; so does `tollgate emulator --state-file`: a
/// client built from the first run's kubeconfig still works after the restart.
#[tokio::test]
async fn tls_restarted_standalone_emulator_keeps_its_clients_credentials() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fleet = dir.path().join("fleet.yaml");
    std::fs::write(&fleet, "clusters:\n- name: dev-1\n  labels: {env: dev}\n").expect("fleet");
    let kubeconfig = dir.path().join("kubeconfig");
    let state = dir.path().join("state.json");
    let listen = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let mut first: Option<(String, Client)> = None;
    for round in 0..2 {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let standalone = tollgate_emulator::StandaloneConfig {
            fleet: fleet.clone(),
            crds: vec![common::git_promotion_crd()],
            listen: Some(listen),
            kubeconfig: kubeconfig.clone(),
            state_file: Some(state.clone()),
            transport: Transport::Tls,
            serving: Default::default(),
        };
        let server = tokio::spawn(tollgate_emulator::run_standalone_until(
            standalone,
            async move {
                let _ = stopped.await;
            },
        ));
        let written = eventually("kubeconfig written", || async {
            std::fs::read_to_string(&kubeconfig).ok()
        })
        .await;
        let (first_written, client) = match &first {
            None => {
                let client = client_from(&written, CONTEXT_NAME).await;
                first.insert((written.clone(), client))
            }
            Some(kept) => kept,
        };
        // Not assert_eq: a failure would print the credentials.
        assert!(
            written == *first_written,
            "round {round}: the kubeconfig changed"
        );
        let clusters = eventually("the first run's client is served", || async {
            list_clusters(client).await.ok()
        })
        .await;
        assert_eq!(clusters, 1, "round {round}");
        stop.send(()).expect("server running");
        server.await.expect("joined").expect("clean stop");
        std::fs::remove_file(&kubeconfig).expect("kubeconfig removed");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let kept = tollgate_emulator::standalone::authority_path(&state);
        let mode = std::fs::metadata(&kept)
            .expect("authority kept")
            .permissions();
        assert_eq!(mode.mode() & 0o777, 0o600, "the CA key is private");
    }
}

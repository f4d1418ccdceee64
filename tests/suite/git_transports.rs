//! The transports real git hosts use, end to end through the CLI: https with certificate
//! validation (a private CA trusted through `SSL_CERT_FILE`, refused without it), and ssh with a
//! deploy key and a known_hosts check (refused for an unknown host key) against a real `sshd`.

use crate::git_http_server;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use git_http_server::GitHttpServer;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tollgate_fixtures::git::git;
use tollgate_fixtures::{promotion, stage};

/// A bare repository holding one promotion, under `root/promos.git`; returns the commit SHA.
fn bare_repository(root: &Path) -> String {
    let work = root.join("work");
    std::fs::create_dir_all(&work).expect("work dir");
    git(&work, &["init", "-q", "-b", "main"]);
    let manifest = promotion("app")
        .chart("app", "1.0.0")
        .stage(stage("staging").selector("env", "staging").manual())
        .to_yaml();
    std::fs::write(work.join("app.yaml"), manifest).expect("manifest");
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "app"]);
    let sha = git(&work, &["rev-parse", "HEAD"]);
    let bare = root.join("promos.git");
    git(
        &work,
        &["clone", "-q", "--bare", ".", bare.to_str().expect("utf-8")],
    );
    sha
}

fn history(url: &str, cache: &Path, extra: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("tollgate"));
    command
        .args(["history", "app", "-o", "json", "--repo", url, "--cache-dir"])
        .arg(cache)
        .args(extra)
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("tollgate history runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Terminates TLS on a loopback port and forwards the plain bytes to `backend`.
fn tls_terminator(backend: SocketAddr, acceptor: TlsAcceptor) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            while let Ok((client, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that refuses our certificate ends the handshake: nothing to forward.
                    let Ok(mut tls) = acceptor.accept(client).await else {
                        return;
                    };
                    if let Ok(mut upstream) = tokio::net::TcpStream::connect(backend).await {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
                    }
                });
            }
        });
    });
    addr
}

#[test]
fn https_validates_the_server_certificate() {
    let root = tempfile::tempdir().expect("temp dir");
    let sha = bare_repository(root.path());
    let server = GitHttpServer::start(root.path().to_path_buf(), "x-access-token", "tls-tok");
    let backend: SocketAddr = server
        .base_url
        .trim_start_matches("http://")
        .parse()
        .expect("backend address");

    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
    let ca = root.path().join("ca.pem");
    std::fs::write(&ca, certified.cert.pem()).expect("ca file");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let config = ServerConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_no_client_auth()
    .with_single_cert(vec![certified.cert.der().clone()], key)
    .expect("server config");
    let tls = tls_terminator(backend, TlsAcceptor::from(Arc::new(config)));
    let url = format!("https://localhost:{}/promos.git", tls.port());
    let token = root.path().join("token");
    std::fs::write(&token, "tls-tok\n").expect("token");
    let token_flag = ["--git-token-file", token.to_str().expect("utf-8")];

    // An untrusted certificate is refused, credentials or not.
    let untrusted = history(&url, &root.path().join("cache-a"), &token_flag, &[]);
    assert_eq!(untrusted.status.code(), Some(2), "{}", stderr(&untrusted));
    assert!(
        stderr(&untrusted).to_lowercase().contains("certificate"),
        "{}",
        stderr(&untrusted)
    );

    // Trusted through SSL_CERT_FILE (as a mounted CA bundle would be): read over TLS.
    let trusted = history(
        &url,
        &root.path().join("cache-b"),
        &token_flag,
        &[("SSL_CERT_FILE", ca.as_path())],
    );
    assert_eq!(trusted.status.code(), Some(0), "{}", stderr(&trusted));
    assert!(String::from_utf8_lossy(&trusted.stdout).contains(&sha));
}

/// `sshd` on a loopback port, accepting one public key for the current user.
struct Sshd {
    child: Child,
    port: u16,
    host_public_key: String,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keygen(path: &Path) -> String {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "tollgate-test", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen runs");
    assert!(status.success(), "ssh-keygen failed");
    std::fs::read_to_string(path.with_extension("pub")).expect("public key")
}

impl Sshd {
    fn start(dir: &Path, authorized_key: &str) -> Sshd {
        let host_key = dir.join("host_key");
        let host_public_key = keygen(&host_key);
        let authorized = dir.join("authorized_keys");
        std::fs::write(&authorized, authorized_key).expect("authorized_keys");
        // sshd refuses to start as root without its privilege-separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let port = crate::support::free_port();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\n\
                 PidFile {}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nStrictModes no\n\
                 UsePAM no\nLogLevel VERBOSE\n",
                host_key.display(),
                authorized.display(),
                dir.join("sshd.pid").display(),
            ),
        )
        .expect("sshd_config");
        let child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sshd starts");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "sshd did not start listening");
            std::thread::sleep(Duration::from_millis(50));
        }
        Sshd {
            child,
            port,
            host_public_key,
        }
    }
}

fn current_user() -> String {
    let output = Command::new("id").arg("-un").output().expect("id runs");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

#[test]
fn ssh_uses_the_deploy_key_and_checks_the_host_key() {
    if !Path::new("/usr/sbin/sshd").exists() {
        // .ci/run installs openssh-server, so CI always runs this; a developer machine may not.
        assert!(
            std::env::var_os("CI").is_none(),
            "/usr/sbin/sshd is missing in CI: .ci/run must install openssh-server"
        );
        eprintln!("skipping: /usr/sbin/sshd is not installed (apt-get install openssh-server)");
        return;
    }
    let root = tempfile::tempdir().expect("temp dir");
    let sha = bare_repository(root.path());
    let client_key: PathBuf = root.path().join("deploy_key");
    let client_public = keygen(&client_key);
    let sshd = Sshd::start(root.path(), &client_public);
    let url = format!(
        "ssh://{}@127.0.0.1:{}{}",
        current_user(),
        sshd.port,
        root.path().join("promos.git").display()
    );
    let key_type_and_key = sshd
        .host_public_key
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let known_hosts = root.path().join("known_hosts");
    let key_flags = |known_hosts: &Path| -> Vec<String> {
        vec![
            "--ssh-key-file".into(),
            client_key.display().to_string(),
            "--ssh-known-hosts".into(),
            known_hosts.display().to_string(),
        ]
    };

    // The host is not in known_hosts: refused before any credential is offered.
    std::fs::write(&known_hosts, "").expect("known_hosts");
    let flags = key_flags(&known_hosts);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let unknown = history(&url, &root.path().join("cache-a"), &flags, &[]);
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr(&unknown));
    assert!(
        stderr(&unknown).contains("not listed in known_hosts"),
        "{}",
        stderr(&unknown)
    );

    // Listed: the deploy key reads the repository.
    std::fs::write(
        &known_hosts,
        format!("[127.0.0.1]:{} {key_type_and_key}\n", sshd.port),
    )
    .expect("known_hosts");
    let read = history(&url, &root.path().join("cache-b"), &flags, &[]);
    assert_eq!(read.status.code(), Some(0), "{}", stderr(&read));
    assert!(String::from_utf8_lossy(&read.stdout).contains(&sha));
}

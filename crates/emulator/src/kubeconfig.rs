//! A kubeconfig pointing at the emulator, for kubectl, `tollgate status` and kube clients.

use std::io::Write as _;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::tls::TlsCredentials;

/// Name used for the cluster, the default user (a client certificate with TLS) and the default
/// context.
pub const CONTEXT_NAME: &str = "tollgate-emulator";
/// With TLS, a second context and user that authenticate with the bearer token instead.
pub const TOKEN_CONTEXT_NAME: &str = "tollgate-emulator-token";

/// Kubeconfig YAML for the server at `url`. Without credentials (plain HTTP) the user is empty;
/// with them, the cluster carries the CA, the default user the client certificate and
/// [`TOKEN_CONTEXT_NAME`]'s user the token.
pub fn render(url: &str, credentials: Option<&TlsCredentials>) -> String {
    let mut text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {CONTEXT_NAME}\n  cluster:\n    server: {url}\n"
    );
    if let Some(credentials) = credentials {
        text += &format!(
            "    certificate-authority-data: {}\n",
            STANDARD.encode(credentials.ca_pem())
        );
    }
    text += "contexts:\n";
    text += &context(CONTEXT_NAME, CONTEXT_NAME);
    if credentials.is_some() {
        text += &context(TOKEN_CONTEXT_NAME, TOKEN_CONTEXT_NAME);
    }
    text += &format!("current-context: {CONTEXT_NAME}\nusers:\n");
    match credentials {
        None => text += &format!("- name: {CONTEXT_NAME}\n  user: {{}}\n"),
        Some(credentials) => {
            text += &format!(
                "- name: {CONTEXT_NAME}\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
                STANDARD.encode(credentials.client_certificate_pem()),
                STANDARD.encode(credentials.client_key_pem()),
            );
            // The token is URL-safe base64: quoted, it is a YAML string whatever its first character.
            text += &format!(
                "- name: {TOKEN_CONTEXT_NAME}\n  user:\n    token: \"{}\"\n",
                credentials.token()
            );
        }
    }
    text + "preferences: {}\n"
}

fn context(name: &str, user: &str) -> String {
    format!(
        "- name: {name}\n  context:\n    cluster: {CONTEXT_NAME}\n    user: {user}\n    namespace: default\n"
    )
}

/// Writes `text` to `path` through a temporary file renamed into place, so a reader sees the old
/// file or the whole new one; on Unix the file is readable by its owner only.
pub fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let mut temporary_name = path.file_name().unwrap_or_default().to_os_string();
    temporary_name.push(format!(".{}.tmp", std::process::id()));
    let temporary = path.with_file_name(temporary_name);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options
        .open(&temporary)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        // Best effort: the error that matters is the one returned.
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;

    #[test]
    fn kubeconfig_is_yaml_with_the_server() {
        let text = render("http://127.0.0.1:1234", None);
        let parsed: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(
            parsed["clusters"][0]["cluster"]["server"],
            "http://127.0.0.1:1234"
        );
        assert_eq!(parsed["current-context"], CONTEXT_NAME);
        assert_eq!(parsed["contexts"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn tls_kubeconfig_carries_the_ca_a_client_certificate_and_a_token_context() {
        let credentials = TlsCredentials::generate(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
        let text = render("https://127.0.0.1:1234", Some(&credentials));
        let parsed: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        let decode = |value: &serde_json::Value| {
            String::from_utf8(STANDARD.decode(value.as_str().unwrap()).unwrap()).unwrap()
        };
        let cluster = &parsed["clusters"][0]["cluster"];
        assert_eq!(
            decode(&cluster["certificate-authority-data"]),
            credentials.ca_pem()
        );
        let users = &parsed["users"];
        assert_eq!(users[0]["name"], CONTEXT_NAME);
        assert_eq!(
            decode(&users[0]["user"]["client-certificate-data"]),
            credentials.client_certificate_pem()
        );
        assert_eq!(
            decode(&users[0]["user"]["client-key-data"]),
            credentials.client_key_pem()
        );
        assert_eq!(users[1]["name"], TOKEN_CONTEXT_NAME);
        assert_eq!(users[1]["user"]["token"], credentials.token());
        assert_eq!(parsed["contexts"][1]["context"]["user"], TOKEN_CONTEXT_NAME);
    }

    #[cfg(unix)]
    #[test]
    fn written_kubeconfig_is_private_and_replaces_the_old_one() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("emulator.kubeconfig");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&path, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file left behind");
    }
}

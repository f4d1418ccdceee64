//! SSH keys (git's allowed-signers format) and SSHSIG verification in namespace `git`.

use ssh_key::{HashAlg, PublicKey, SshSig};
use tollgate_model::{SignatureCheck, Unverified};

use super::keys::KeyDirError;

/// The namespace git signs commits in (`ssh-keygen -Y sign -n git`).
const GIT_NAMESPACE: &str = "git";

#[derive(Debug)]
pub(crate) struct SshKey {
    key: PublicKey,
    principals: Vec<String>,
}

/// Splits a line into whitespace-separated tokens, keeping double-quoted parts together (an
/// option such as `namespaces="git,file"`).
fn tokens(line: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                current.push(c);
            }
            c if c.is_whitespace() && !quoted => {
                if !current.is_empty() {
                    tokens.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

fn is_key_type(token: &str) -> bool {
    token.starts_with("ssh-") || token.starts_with("ecdsa-sha2-") || token.starts_with("sk-")
}

/// Whether an option list allows signing git commits (`namespaces="…"` must name `git`).
fn allows_git(options: &str) -> bool {
    options
        .split(',')
        .all(|option| match option.strip_prefix("namespaces=") {
            Some(list) => list
                .trim_matches('"')
                .split(',')
                .any(|namespace| namespace.trim() == GIT_NAMESPACE),
            None => true,
        })
}

/// Reads an allowed-signers style file: each non-empty, non-comment line is
/// `[principal[,principal…]] [options] <key type> <base64> [comment]`. Without principals the
/// key's comment is its principal (its fingerprint when it has none).
pub(crate) fn read_allowed_signers(path: &str, text: &str) -> Result<Vec<SshKey>, KeyDirError> {
    let mut keys = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let error = |message: String| KeyDirError::Key {
            path: path.to_string(),
            line: number + 1,
            message,
        };
        let tokens = tokens(line);
        let Some(at) = tokens.iter().position(|t| is_key_type(t)) else {
            return Err(error(
                "no OpenSSH public key (expected `[principals] [options] ssh-ed25519 AAAA… [comment]`)"
                    .to_string(),
            ));
        };
        let (principals, options) = match &tokens[..at] {
            [] => (None, None),
            [principals] => (Some(principals.as_str()), None),
            [principals, options] => (Some(principals.as_str()), Some(options.as_str())),
            _ => {
                return Err(error(
                    "too many fields before the key: expected a principal list and an option list"
                        .to_string(),
                ));
            }
        };
        if options.is_some_and(|o| o.contains("cert-authority")) {
            return Err(error(
                "cert-authority keys are not supported: list each signer's key".to_string(),
            ));
        }
        if options.is_some_and(|o| !allows_git(o)) {
            // Trusted, but not for git: the key is not read at all.
            continue;
        }
        let key_text = tokens[at..].join(" ");
        let key = PublicKey::from_openssh(&key_text)
            .map_err(|e| error(format!("invalid OpenSSH public key: {e}")))?;
        let principals: Vec<String> = match principals {
            Some(list) => list
                .split(',')
                .filter(|p| !p.is_empty())
                .map(|p| p.to_ascii_lowercase())
                .collect(),
            None if !key.comment().trim().is_empty() => {
                vec![key.comment().trim().to_ascii_lowercase()]
            }
            None => vec![key.fingerprint(HashAlg::Sha256).to_string()],
        };
        keys.push(SshKey { key, principals });
    }
    Ok(keys)
}

/// Verifies an armored SSHSIG over `signed` against the trusted SSH keys.
pub(crate) fn check(keys: &[SshKey], signature: &[u8], signed: &[u8]) -> SignatureCheck {
    let signature = match SshSig::from_pem(signature) {
        Ok(signature) => signature,
        Err(e) => {
            return SignatureCheck::unverified(
                Unverified::BadSignature,
                format!("unreadable SSH signature: {e}"),
            );
        }
    };
    let signer = PublicKey::from(signature.public_key().clone());
    let fingerprint = signer.fingerprint(HashAlg::Sha256).to_string();
    let Some(trusted) = keys
        .iter()
        .find(|k| k.key.key_data() == signature.public_key())
    else {
        return SignatureCheck::unverified(Unverified::UnknownKey, fingerprint);
    };
    if signature.namespace() != GIT_NAMESPACE {
        return SignatureCheck::unverified(
            Unverified::BadSignature,
            format!(
                "signed in namespace {:?}, not {GIT_NAMESPACE:?}",
                signature.namespace()
            ),
        );
    }
    match trusted.key.verify(GIT_NAMESPACE, signed, &signature) {
        Ok(()) => SignatureCheck::Verified {
            principals: trusted.principals.clone(),
            key: fingerprint,
        },
        Err(e) => {
            SignatureCheck::unverified(Unverified::BadSignature, format!("{fingerprint}: {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHtH1/c4N9c8Lh2FJqt0QxkJ8/2O0jB4o1J8v6w4dY4L";

    #[test]
    fn principals_come_from_the_line_or_the_comment() {
        let text = format!(
            "# team\n\nAlice@Example.com,sre-lead {KEY}\n{KEY} bob@example.com\nops namespaces=\"file\" {KEY}\n"
        );
        let keys = read_allowed_signers("team.sshpub", &text).expect("reads");
        assert_eq!(keys.len(), 2, "the file-only key is not a git signer");
        assert_eq!(keys[0].principals, ["alice@example.com", "sre-lead"]);
        assert_eq!(keys[1].principals, ["bob@example.com"]);
    }

    #[test]
    fn a_bad_line_names_file_and_line() {
        let error = read_allowed_signers("team.sshpub", &format!("{KEY}\nalice not-a-key\n"))
            .expect_err("refused");
        assert_eq!(
            error.to_string(),
            "trusted keys: team.sshpub:2: no OpenSSH public key (expected `[principals] [options] ssh-ed25519 AAAA… [comment]`)"
        );
        let error = read_allowed_signers("t.sshpub", "alice ssh-ed25519 AAAAnot-base64")
            .expect_err("refused");
        assert!(
            error
                .to_string()
                .starts_with("trusted keys: t.sshpub:1: invalid OpenSSH public key"),
            "{error}"
        );
    }

    #[test]
    fn garbage_is_a_bad_signature_not_a_panic() {
        let check = check(
            &[],
            b"-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n",
            b"x",
        );
        assert!(
            matches!(
                check,
                SignatureCheck::Unverified {
                    reason: Unverified::BadSignature,
                    ..
                }
            ),
            "{check:?}"
        );
    }
}

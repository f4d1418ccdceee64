//! SSH keys (git's allowed-signers format) and SSHSIG verification in namespace `git`.

use ssh_key::{HashAlg, PublicKey, SshSig};
use tollgate_model::{SignatureCheck, Unverified};

use super::keys::KeyDirError;
use super::options::{self, Validity};

/// The namespace git signs commits in (`ssh-keygen -Y sign -n git`).
const GIT_NAMESPACE: &str = "git";

#[derive(Debug)]
pub(crate) struct SshKey {
    key: PublicKey,
    principals: Vec<String>,
    /// `valid-after` / `valid-before` of its line.
    validity: Validity,
    /// Where its line is (`team.sshpub:3`), for a refusal's detail.
    origin: String,
}

impl SshKey {
    /// This line's identity when it trusts `key`.
    pub(super) fn identity_of(&self, key: &PublicKey) -> Option<super::keys::SignerIdentity> {
        (self.key.key_data() == key.key_data()).then(|| super::keys::SignerIdentity {
            key: self.key.fingerprint(HashAlg::Sha256).to_string(),
            principals: self.principals.clone(),
        })
    }
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

/// Whether a lone field before the key is an option list rather than principals (tollgate, unlike
/// git, allows a line without principals). Principals are never quoted; every option with a
/// value is, and a restriction must not be mistaken for a principal.
fn is_option_list(field: &str) -> bool {
    field.contains('"') || field.split(',').any(|option| option == "cert-authority")
}

/// Whether a `namespaces=` list lets the key sign git commits, read as ssh-keygen reads it: a
/// list of patterns (`*` and `?` wildcards), one of which must match `git`, and none of the
/// negated ones (`!git`).
fn allows_git(patterns: &[String]) -> bool {
    let mut allowed = false;
    for pattern in patterns {
        match pattern.strip_prefix('!') {
            Some(negated) if wildcard_match(negated.as_bytes(), GIT_NAMESPACE.as_bytes()) => {
                return false;
            }
            Some(_) => {}
            None => allowed |= wildcard_match(pattern.as_bytes(), GIT_NAMESPACE.as_bytes()),
        }
    }
    allowed
}

/// `*` matches any run of characters, `?` any one; everything else itself.
fn wildcard_match(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|skip| wildcard_match(rest, &text[skip..])),
        Some((b'?', rest)) => !text.is_empty() && wildcard_match(rest, &text[1..]),
        Some((c, rest)) => text.first() == Some(c) && wildcard_match(rest, &text[1..]),
    }
}

/// Reads an allowed-signers style file: each non-empty, non-comment line is
/// `[principal[,principal…]] [options] <key type> <base64> [comment]`. Without principals the
/// key's comment is its principal (its fingerprint when it has none).
pub(crate) fn read_allowed_signers(path: &str, text: &str) -> Result<Vec<SshKey>, KeyDirError> {
    let file = std::path::Path::new(path).file_name().map_or_else(
        || path.to_string(),
        |name| name.to_string_lossy().into_owned(),
    );
    let mut keys = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let read = read_line(line, format!("{file}:{}", number + 1));
        match read.map_err(|message| KeyDirError::Key {
            path: path.to_string(),
            line: number + 1,
            message,
        })? {
            Some(key) => keys.push(key),
            // Trusted, but not for git: the key is not read at all.
            None => continue,
        }
    }
    Ok(keys)
}

/// One allowed-signers line; `None` when its namespaces exclude git.
fn read_line(line: &str, origin: String) -> Result<Option<SshKey>, String> {
    let tokens = tokens(line);
    let Some(at) = tokens.iter().position(|t| is_key_type(t)) else {
        return Err(
            "no OpenSSH public key (expected `[principals] [options] ssh-ed25519 AAAA… [comment]`)"
                .to_string(),
        );
    };
    let (principals, options) = match &tokens[..at] {
        [] => (None, None),
        [options] if is_option_list(options) => (None, Some(options.as_str())),
        [principals] => (Some(principals.as_str()), None),
        [principals, options] => (Some(principals.as_str()), Some(options.as_str())),
        _ => {
            return Err(
                "too many fields before the key: expected a principal list and an option list"
                    .to_string(),
            );
        }
    };
    let options = options.map(options::parse).transpose()?.unwrap_or_default();
    if options.cert_authority {
        return Err("cert-authority keys are not supported: list each signer's key".to_string());
    }
    if options
        .namespaces
        .as_ref()
        .is_some_and(|patterns| !allows_git(patterns))
    {
        return Ok(None);
    }
    let key_text = tokens[at..].join(" ");
    let key = PublicKey::from_openssh(&key_text)
        .map_err(|e| format!("invalid OpenSSH public key: {e}"))?;
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
    Ok(Some(SshKey {
        key,
        principals,
        validity: options.validity,
        origin,
    }))
}

/// Verifies an armored SSHSIG over `signed` against the trusted SSH keys, for a commit dated
/// `at` (its committer date): a line whose `valid-after`/`valid-before` window excludes that
/// date does not vouch for it, as with `git verify-commit`. A key listed on several lines is
/// trusted as the principals of every line valid then.
pub(crate) fn check(
    keys: &[SshKey],
    signature: &[u8],
    signed: &[u8],
    at: Option<i64>,
) -> SignatureCheck {
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
    let lines: Vec<&SshKey> = keys
        .iter()
        .filter(|k| k.key.key_data() == signature.public_key())
        .collect();
    let Some(first) = lines.first() else {
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
    if let Err(e) = first.key.verify(GIT_NAMESPACE, signed, &signature) {
        return SignatureCheck::unverified(Unverified::BadSignature, format!("{fingerprint}: {e}"));
    }
    let valid: Vec<&SshKey> = lines
        .iter()
        .copied()
        .filter(|line| line.validity.refusal(at).is_none())
        .collect();
    if valid.is_empty() {
        let why = first.validity.refusal(at).unwrap_or_default();
        return SignatureCheck::unverified(
            Unverified::BadSignature,
            format!("key {fingerprint} ({}) {why}", first.origin),
        );
    }
    let mut principals: Vec<String> = Vec::new();
    for principal in valid.iter().flat_map(|line| &line.principals) {
        if !principals.contains(principal) {
            principals.push(principal.clone());
        }
    }
    SignatureCheck::Verified {
        principals,
        key: fingerprint,
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

    /// The error of reading one allowed-signers line with `options` before the key.
    fn option_error(options: &str) -> String {
        read_allowed_signers("team.sshpub", &format!("{KEY} ok\nalice {options} {KEY}\n"))
            .expect_err("refused")
            .to_string()
    }

    #[test]
    fn malformed_validity_options_name_file_and_line() {
        for (options, why) in [
            (r#"valid-before="2026""#, "valid-before"),
            (r#"valid-before="20261301""#, "valid-before"),
            (r#"valid-after="20260230Z""#, "valid-after"),
            (r#"valid-after="202601011260""#, "valid-after"),
            (r#"valid-before="20260101T""#, "valid-before"),
            ("valid-before=20260101", "double quotes"),
            (r#"valid-before="20260101"x"#, "valid-before"),
            (
                r#"valid-after="20270101",valid-before="20260101""#,
                "not after",
            ),
            (
                r#"valid-after="20260101Z",valid-before="20260101Z""#,
                "not after",
            ),
            (r#"namespaces="git","#, "empty option"),
            ("cert-authority", "cert-authority keys are not supported"),
            (
                r#"cert-authority,valid-before="20300101Z""#,
                "cert-authority",
            ),
        ] {
            let error = option_error(options);
            assert!(
                error.starts_with("trusted keys: team.sshpub:2: ") && error.contains(why),
                "{options}: {error}"
            );
        }
    }

    #[test]
    fn an_unknown_option_is_an_error_not_ignored() {
        // It might restrict trust in a way tollgate does not know (or be a misspelt
        // `valid-before`): ignoring it would trust the key more than its line says.
        for options in [
            r#"valid_before="20260101""#,
            "no-touch-required",
            r#"foo="x""#,
        ] {
            let error = option_error(options);
            assert!(
                error.starts_with("trusted keys: team.sshpub:2: unknown option"),
                "{options}: {error}"
            );
        }
    }

    #[test]
    fn namespaces_may_list_git_anywhere() {
        let text = format!(
            "a namespaces=\"file,git\" {KEY}\nb namespaces=\"file\",valid-before=\"20300101Z\" {KEY}\n"
        );
        let keys = read_allowed_signers("team.sshpub", &text).expect("reads");
        assert_eq!(keys.len(), 1, "only the line whose namespaces include git");
        assert_eq!(keys[0].principals, ["a"]);
    }

    #[test]
    fn namespaces_are_patterns_as_ssh_keygen_reads_them() {
        // Each checked against `ssh-keygen -Y verify -n git` (OpenSSH 9.2).
        for (list, git) in [
            ("*", true),
            ("g?t", true),
            ("file,gi*", true),
            ("!git,*", false),
            ("*,!git", false),
            ("!file", false),
            ("GIT", false),
            ("file, git", false),
        ] {
            let patterns: Vec<String> = list.split(',').map(str::to_string).collect();
            assert_eq!(allows_git(&patterns), git, "namespaces=\"{list}\"");
        }
    }

    #[test]
    fn an_option_list_without_principals_is_read_as_options() {
        let text = format!("valid-before=\"20300101Z\" {KEY} bob@example.com\n");
        let keys = read_allowed_signers("team.sshpub", &text).expect("reads");
        assert_eq!(keys[0].principals, ["bob@example.com"]);
        let error = read_allowed_signers("t.sshpub", &format!("valid-before=\"x\" {KEY}\n"))
            .expect_err("a malformed option list is not a principal");
        assert!(error.to_string().contains("valid-before"), "{error}");
    }

    /// A key made for these tests only (`ssh-keygen -t ed25519`), to sign payloads in-process.
    const TEST_PRIVATE_KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW
QyNTUxOQAAACB+f1nZTOWlSuuqhTqdN04jvbK4S7/QqtwJt35LN/WlPgAAAJh+4fI7fuHy
OwAAAAtzc2gtZWQyNTUxOQAAACB+f1nZTOWlSuuqhTqdN04jvbK4S7/QqtwJt35LN/WlPg
AAAECV4enUbmAsZY5RK90NSQnaSKe8kWfjDgGjwKPvlors435/WdlM5aVK66qFOp03TiO9
srhLv9Cq3Am3fks39aU+AAAAEHRlc3RAZXhhbXBsZS5jb20BAgMEBQ==
-----END OPENSSH PRIVATE KEY-----
";
    const TEST_PUBLIC_KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH5/WdlM5aVK66qFOp03TiO9srhLv9Cq3Am3fks39aU+ test@example.com";

    /// The SSHSIG of `payload` by the test key, in namespace `git`.
    fn sign(payload: &[u8]) -> Vec<u8> {
        let key = ssh_key::PrivateKey::from_openssh(TEST_PRIVATE_KEY).expect("test key");
        key.sign(GIT_NAMESPACE, HashAlg::Sha512, payload)
            .and_then(|signature| signature.to_pem(ssh_key::LineEnding::LF))
            .expect("sign")
            .into_bytes()
    }

    #[test]
    fn a_key_on_several_lines_is_trusted_by_the_lines_valid_at_the_commit_date() {
        // Rotation as an allowed-signers file records it: the same key, one principal until
        // 2026, another from then on.
        let text = format!(
            "old-team valid-before=\"20260101Z\" {TEST_PUBLIC_KEY}\n\
             new-team valid-after=\"20260101Z\",valid-before=\"20270101Z\" {TEST_PUBLIC_KEY}\n"
        );
        let keys = read_allowed_signers("team.sshpub", &text).expect("reads");
        let payload = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n";
        let signature = sign(payload);
        let principals_at = |at: i64| match check(&keys, &signature, payload, Some(at)) {
            SignatureCheck::Verified { principals, .. } => principals,
            other => panic!("at {at}: {other:?}"),
        };
        assert_eq!(principals_at(1_700_000_000), ["old-team"]);
        assert_eq!(principals_at(1_767_225_600), ["old-team", "new-team"]);
        assert_eq!(principals_at(1_790_000_000), ["new-team"]);
        match check(&keys, &signature, payload, Some(1_800_000_000)) {
            SignatureCheck::Unverified {
                reason: Unverified::BadSignature,
                detail,
            } => assert!(
                detail.starts_with("key SHA256:")
                    && detail.contains("(team.sshpub:1) expired: valid-before 2026-01-01T00:00:00Z, the commit is dated 2027-01-15T08:00:00Z"),
                "{detail}"
            ),
            other => panic!("no line is valid in 2027: {other:?}"),
        }
        // A signature that does not verify says so, whatever the date.
        match check(&keys, &signature, b"forged", Some(1_800_000_000)) {
            SignatureCheck::Unverified {
                reason: Unverified::BadSignature,
                detail,
            } => assert!(!detail.contains("valid-before"), "{detail}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn garbage_is_a_bad_signature_not_a_panic() {
        let check = check(
            &[],
            b"-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n",
            b"x",
            None,
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

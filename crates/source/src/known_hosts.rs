//! ssh host-key verification against an OpenSSH `known_hosts` file. Unknown hosts and
//! mismatching keys are rejected: a GitOps source must not trust on first use.
//!
//! Supported: plain host patterns (comma-separated, `*`/`?` wildcards, `!` negation,
//! `[host]:port`), `@revoked`. Hashed entries (`|1|…`) and `@cert-authority` lines are skipped.

use base64::Engine as _;

/// `Ok(())` when `host` is listed with exactly `key` (the ssh wire-format public key).
pub(crate) fn verify_host_key(known_hosts: &str, host: &str, key: &[u8]) -> Result<(), String> {
    let mut host_listed = false;
    // Keep scanning after a match: a later `@revoked` line must still win.
    let mut accepted = false;
    for line in known_hosts.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_whitespace();
        let (marker, hosts) = match fields.next() {
            Some(m) if m.starts_with('@') => (Some(m), fields.next()),
            other => (None, other),
        };
        let (Some(hosts), Some(_key_type), Some(encoded)) = (hosts, fields.next(), fields.next())
        else {
            continue;
        };
        if !hosts_match(hosts, host) {
            continue;
        }
        let Ok(listed) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
            continue;
        };
        match marker {
            Some("@revoked") if listed == key => {
                return Err(format!("the host key of {host} is marked @revoked"));
            }
            Some(_) => continue,
            None => {
                host_listed = true;
                accepted |= listed == key;
            }
        }
    }
    if accepted {
        Ok(())
    } else if host_listed {
        Err(format!(
            "the host key of {host} does not match the one in known_hosts"
        ))
    } else {
        Err(format!("{host} is not listed in known_hosts"))
    }
}

fn hosts_match(patterns: &str, host: &str) -> bool {
    let mut matched = false;
    for pattern in patterns.split(',') {
        let (negated, pattern) = match pattern.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, pattern),
        };
        if pattern.starts_with('|') {
            continue;
        }
        let pattern = strip_port(pattern);
        if glob_match(pattern.as_bytes(), host.as_bytes()) {
            if negated {
                return false;
            }
            matched = true;
        }
    }
    matched
}

/// `[host]:port` → `host` (libgit2 reports the host name without its port).
fn strip_port(pattern: &str) -> &str {
    pattern
        .strip_prefix('[')
        .and_then(|rest| rest.split_once(']'))
        .map_or(pattern, |(host, _)| host)
}

fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|skip| glob_match(rest, &text[skip..])),
        Some((b'?', rest)) => !text.is_empty() && glob_match(rest, &text[1..]),
        Some((c, rest)) => text
            .split_first()
            .is_some_and(|(t, text_rest)| t.eq_ignore_ascii_case(c) && glob_match(rest, text_rest)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &[u8] = b"\x00\x00\x00\x0bssh-ed25519key-a";
    const KEY_B: &[u8] = b"\x00\x00\x00\x0bssh-ed25519key-b";

    fn line(hosts: &str, key: &[u8]) -> String {
        format!(
            "{hosts} ssh-ed25519 {}\n",
            base64::engine::general_purpose::STANDARD.encode(key)
        )
    }

    #[test]
    fn accepts_listed_key_and_rejects_unknown_or_mismatching() {
        let file = format!(
            "# comment\n{}{}",
            line("git.example.com,10.0.0.1", KEY_A),
            line("[other.example.com]:2222", KEY_B)
        );
        assert_eq!(verify_host_key(&file, "git.example.com", KEY_A), Ok(()));
        assert_eq!(verify_host_key(&file, "10.0.0.1", KEY_A), Ok(()));
        assert_eq!(verify_host_key(&file, "other.example.com", KEY_B), Ok(()));
        let mismatch = verify_host_key(&file, "git.example.com", KEY_B);
        assert!(mismatch.is_err_and(|e| e.contains("does not match")));
        let unknown = verify_host_key(&file, "evil.example.com", KEY_A);
        assert!(unknown.is_err_and(|e| e.contains("not listed")));
    }

    #[test]
    fn wildcards_negation_and_revocation() {
        let file = format!(
            "{}@revoked {}",
            line("*.example.com,!bad.example.com", KEY_A),
            line("old.example.com", KEY_A)
        );
        assert_eq!(verify_host_key(&file, "git.example.com", KEY_A), Ok(()));
        assert!(verify_host_key(&file, "bad.example.com", KEY_A).is_err());
        assert!(
            verify_host_key(&file, "old.example.com", KEY_A).is_err_and(|e| e.contains("revoked"))
        );
    }
}

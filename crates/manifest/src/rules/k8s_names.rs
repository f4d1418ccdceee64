//! Kubernetes name syntaxes (apimachinery `validation.go`), written out instead of regexes
//! because they run for every stage of every file.

/// The reason a name is not a DNS-1123 label, or `None` if it is one.
pub fn dns1123_label_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".into());
    }
    if name.len() > 63 {
        return Some(format!(
            "must be no more than 63 characters ({} given)",
            name.len()
        ));
    }
    if !is_label_like(name) {
        return Some(
            "must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
                .into(),
        );
    }
    None
}

fn is_label_like(part: &str) -> bool {
    let bytes = part.as_bytes();
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// The reason a name is not a DNS-1123 subdomain, or `None` if it is one.
pub fn dns1123_subdomain_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".into());
    }
    if name.len() > 253 {
        return Some(format!(
            "must be no more than 253 characters ({} given)",
            name.len()
        ));
    }
    if !name.split('.').all(is_label_like) {
        return Some(
            "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
                .into(),
        );
    }
    None
}

/// The reason a string is not a label value, or `None` if it is one. Empty is allowed.
pub fn label_value_problem(value: &str) -> Option<String> {
    if value.len() > 63 {
        return Some(format!(
            "must be no more than 63 characters ({} given)",
            value.len()
        ));
    }
    if value.is_empty() {
        return None;
    }
    if !is_name_token(value) {
        return Some(
            "a label value must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
                .into(),
        );
    }
    None
}

/// The character rule shared by label values and the name part of qualified names: alphanumerics,
/// `-`, `_` and `.`, starting and ending with an alphanumeric. `text` must not be empty.
fn is_name_token(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// The reason a key is not a qualified name (`[prefix/]name`), or `None` if it is one.
pub fn qualified_name_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if name.contains('/') {
            return Some("must have at most one '/'".into());
        }
        if let Some(problem) = dns1123_subdomain_problem(prefix) {
            return Some(format!("prefix part {problem}"));
        }
    }
    if name.is_empty() {
        return Some("name part must not be empty".into());
    }
    if name.len() > 63 {
        return Some(format!(
            "name part must be no more than 63 characters ({} given)",
            name.len()
        ));
    }
    if !is_name_token(name) {
        return Some(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
                .into(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_subdomains() {
        assert_eq!(dns1123_label_problem("prod-eu1"), None);
        assert!(dns1123_label_problem("Prod").is_some());
        assert!(dns1123_label_problem("-a").is_some());
        assert!(dns1123_label_problem(&"a".repeat(64)).is_some());
        assert_eq!(dns1123_subdomain_problem("a.b-c.d"), None);
        assert!(dns1123_subdomain_problem("a..b").is_some());
        assert!(dns1123_subdomain_problem("a_b").is_some());
    }

    #[test]
    fn label_keys_and_values() {
        assert_eq!(qualified_name_problem("app.kubernetes.io/name"), None);
        assert_eq!(qualified_name_problem("env"), None);
        assert!(qualified_name_problem("a/b/c").is_some());
        assert!(qualified_name_problem("Bad_Prefix/x").is_some());
        assert!(qualified_name_problem("-x").is_some());
        assert_eq!(label_value_problem(""), None);
        assert_eq!(label_value_problem("v1.2_3-x"), None);
        assert!(label_value_problem("a b").is_some());
        assert!(label_value_problem(&"a".repeat(64)).is_some());
    }
}

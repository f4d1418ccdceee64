//! The secret files an analysis names: `credentialsSecretFile` (Prometheus: a bearer token, or
//! `user:password` for basic auth) and `headersSecretFile` (web: `Name: value` lines). Read at
//! each measurement, so a rotated secret is used at once. Errors name the file and the line,
//! never its content.

use base64::Engine as _;

use super::observation::MeasureError;

/// How an error names the server a URL points at: its scheme, host and port only. The user
/// and password of `http://user:password@host`, a token in the path or the query
/// (`?access_token=…`) and the query itself are secret or noise, and never shown.
pub fn shown_origin(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(not a URL)".to_string();
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{host}")
}

/// Larger than any token or header set; a bound on what a wrong path could make us read.
const MAX_SECRET_BYTES: u64 = 64 * 1024;

fn read(path: &str, field: &str) -> Result<String, MeasureError> {
    let unreadable =
        |reason: String| MeasureError::Secret(format!("cannot read {field} {path}: {reason}"));
    let metadata = std::fs::metadata(path).map_err(|e| unreadable(e.kind().to_string()))?;
    if metadata.len() > MAX_SECRET_BYTES {
        return Err(unreadable(format!("larger than {MAX_SECRET_BYTES} bytes")));
    }
    std::fs::read_to_string(path).map_err(|e| unreadable(e.kind().to_string()))
}

/// The `Authorization` header value of a Prometheus `credentialsSecretFile`: its first non-empty
/// line, `user:password` as basic auth, anything else as a bearer token.
pub fn prometheus_authorization(path: &str) -> Result<String, MeasureError> {
    let text = read(path, "credentialsSecretFile")?;
    authorization(path, &text)
}

fn authorization(path: &str, text: &str) -> Result<String, MeasureError> {
    let Some(line) = text.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return Err(MeasureError::Secret(format!(
            "credentialsSecretFile {path} is empty: write a bearer token, or user:password"
        )));
    };
    if line.contains(char::is_whitespace) {
        return Err(MeasureError::Secret(format!(
            "credentialsSecretFile {path}: the credential holds a space; write a bearer token, or user:password"
        )));
    }
    Ok(match line.contains(':') {
        true => format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(line)
        ),
        false => format!("Bearer {line}"),
    })
}

/// The headers of a web check's `headersSecretFile`: one `Name: value` per line; blank lines
/// and `#` comments are skipped.
pub fn web_headers(path: &str) -> Result<Vec<(String, String)>, MeasureError> {
    let text = read(path, "headersSecretFile")?;
    parse_headers(path, &text)
}

fn parse_headers(path: &str, text: &str) -> Result<Vec<(String, String)>, MeasureError> {
    let mut headers = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parsed = line.split_once(':').and_then(|(name, value)| {
            let name = name.trim();
            let valid = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
            valid.then(|| (name.to_string(), value.trim().to_string()))
        });
        match parsed {
            Some(header) => headers.push(header),
            None => {
                return Err(MeasureError::Secret(format!(
                    "headersSecretFile {path}: line {} is not `Name: value`",
                    index + 1
                )));
            }
        }
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_is_named_by_its_origin_without_credentials_path_or_query() {
        for (url, shown) in [
            (
                "http://alice:s3cret@prom.monitoring:9090/api/v1/query?query=up",
                "http://prom.monitoring:9090",
            ),
            (
                "https://smoke.example.com/t0ken/check?access_token=s3cret",
                "https://smoke.example.com",
            ),
            ("https://bob@h?x=1", "https://h"),
            ("http://[::1]:9090", "http://[::1]:9090"),
            ("p:9090", "(not a URL)"),
        ] {
            assert_eq!(shown_origin(url), shown, "{url}");
        }
    }

    #[test]
    fn user_and_password_is_basic_auth_anything_else_a_bearer_token() {
        assert_eq!(
            authorization("f", "\n  alice:s3cret \n"),
            Ok("Basic YWxpY2U6czNjcmV0".to_string())
        );
        assert_eq!(
            authorization("f", "tok3n\n"),
            Ok("Bearer tok3n".to_string())
        );
        let empty = authorization("/run/prom", " \n").expect_err("empty");
        assert!(empty.to_string().contains("/run/prom"), "{empty}");
        let spaced = authorization("/run/prom", "s3cret value").expect_err("spaced");
        assert!(!spaced.to_string().contains("s3cret"), "{spaced}");
    }

    #[test]
    fn header_lines_are_read_and_a_bad_line_is_named_by_number_not_content() {
        let headers = parse_headers("f", "# smoke\nAuthorization: Bearer t0k\n\nX-Env:prod\n")
            .expect("headers");
        assert_eq!(
            headers,
            vec![
                ("Authorization".to_string(), "Bearer t0k".to_string()),
                ("X-Env".to_string(), "prod".to_string())
            ]
        );
        let bad = parse_headers("/run/h", "X-Ok: 1\ns3cret-without-colon\n").expect_err("bad");
        assert_eq!(
            bad.to_string(),
            "headersSecretFile /run/h: line 2 is not `Name: value`"
        );
        let missing = web_headers("/nonexistent/tollgate-headers").expect_err("missing");
        assert!(
            missing
                .to_string()
                .contains("cannot read headersSecretFile"),
            "{missing}"
        );
    }
}

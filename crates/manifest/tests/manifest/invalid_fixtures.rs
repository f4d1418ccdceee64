//! Every file in `fixtures/invalid/` is rejected with exactly the diagnostics its header states:
//! `# expect: <severity> <code> at <line>:<column> <path or -> : <message substring>`.
//! Plus the cases that are generated rather than committed: an oversized file and non-UTF-8 bytes.

use std::path::PathBuf;

use tollgate_manifest::{Diagnostic, Limits, Severity, parse_file};

#[derive(Debug)]
struct Expectation {
    severity: Severity,
    code: String,
    line: u32,
    column: u32,
    path: String,
    message: String,
}

fn parse_expectation(line: &str) -> Option<Expectation> {
    let rest = line.strip_prefix("# expect: ")?;
    let (severity, rest) = rest.split_once(' ')?;
    let (code, rest) = rest.split_once(" at ")?;
    let (position, rest) = rest.split_once(' ')?;
    let (line_no, column) = position.split_once(':')?;
    let (path, message) = rest.split_once(": ")?;
    Some(Expectation {
        severity: match severity {
            "error" => Severity::Error,
            "warning" => Severity::Warning,
            _ => return None,
        },
        code: code.to_string(),
        line: line_no.parse().ok()?,
        column: column.parse().ok()?,
        path: if path == "-" {
            String::new()
        } else {
            path.to_string()
        },
        message: message.to_string(),
    })
}

fn matches(expectation: &Expectation, diagnostic: &Diagnostic) -> bool {
    expectation.severity == diagnostic.severity
        && expectation.code == diagnostic.code
        && expectation.line == diagnostic.line
        && expectation.column == diagnostic.column
        && expectation.path == diagnostic.path
        && diagnostic.message.contains(&expectation.message)
}

fn render(d: &Diagnostic) -> String {
    let path = if d.path.is_empty() { "-" } else { &d.path };
    format!(
        "# expect: {} {} at {}:{} {}: {}",
        d.severity.as_str(),
        d.code,
        d.line,
        d.column,
        path,
        d.message
    )
}

fn fixture_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/invalid");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixtures/invalid")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_invalid_fixture_is_rejected_where_its_header_says() {
    let files = fixture_files();
    assert!(files.len() >= 40, "only {} invalid fixtures", files.len());
    let mut failures = Vec::new();
    for path in files {
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        let bytes = std::fs::read(&path).expect("read fixture");
        let text = String::from_utf8_lossy(&bytes).to_string();
        let expectations: Vec<Expectation> = text
            .lines()
            .take_while(|l| l.starts_with('#'))
            .filter_map(parse_expectation)
            .collect();
        let parsed = parse_file(&name, &bytes, &Limits::default());
        let diagnostics = parsed.all_diagnostics();
        let mut problems = Vec::new();
        if expectations.is_empty() {
            problems.push("no `# expect:` line".to_string());
        }
        if !parsed.has_errors() {
            problems.push("accepted".to_string());
        }
        if parsed
            .promotions
            .iter()
            .any(|p| p.promotion.is_some() && p.diagnostics.iter().any(Diagnostic::is_error))
        {
            problems.push("a promotion with errors still produced a model".to_string());
        }
        for expectation in &expectations {
            if !diagnostics.iter().any(|d| matches(expectation, d)) {
                problems.push(format!("missing {expectation:?}"));
            }
        }
        for diagnostic in diagnostics.iter().filter(|d| d.is_error()) {
            if !expectations.iter().any(|e| matches(e, diagnostic)) {
                problems.push(format!("unexpected {}", render(diagnostic)));
            }
        }
        if !problems.is_empty() {
            let actual: Vec<String> = diagnostics.iter().map(render).collect();
            failures.push(format!(
                "{name}:\n  {}\n  actual:\n  {}",
                problems.join("\n  "),
                actual.join("\n  ")
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn a_file_over_the_size_limit_is_rejected_before_parsing() {
    let valid = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/valid/02-explicit-defaults.yaml"),
    )
    .expect("valid fixture");
    let mut padded = valid.clone();
    // Comments keep the YAML valid: only the size is wrong.
    while padded.len() <= 1024 * 1024 {
        padded.extend_from_slice(b"# padding padding padding padding padding padding padding\n");
    }
    let parsed = parse_file("big.yaml", &padded, &Limits::default());
    assert_eq!(parsed.diagnostics.len(), 1);
    let d = &parsed.diagnostics[0];
    assert_eq!((d.code, d.line, d.column), ("file-too-large", 1, 1));
    assert!(
        d.message.contains("more than the limit of 1048576 bytes"),
        "{}",
        d.message
    );
    assert!(parsed.promotions.is_empty());
    // The same content under the limit is fine.
    assert!(!parse_file("small.yaml", &valid, &Limits::default()).has_errors());
}

#[test]
fn non_utf8_is_one_clear_error_at_the_bad_byte() {
    let mut bytes = b"apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\nmetadata:\n  name: caf".to_vec();
    bytes.extend_from_slice(&[0xE9, b'\n']); // Latin-1 "é"
    let parsed = parse_file("latin1.yaml", &bytes, &Limits::default());
    assert_eq!(parsed.diagnostics.len(), 1);
    let d = &parsed.diagnostics[0];
    assert_eq!((d.code, d.line, d.column), ("not-utf8", 4, 12));
    assert!(d.message.contains("not valid UTF-8"), "{}", d.message);
}

#[test]
fn limits_are_configurable() {
    let yaml = b"apiVersion: v1\nkind: ConfigMap\n---\napiVersion: v1\nkind: ConfigMap\n";
    let limits = Limits {
        max_documents: 1,
        ..Limits::default()
    };
    let parsed = parse_file("two.yaml", yaml, &limits);
    assert_eq!(parsed.diagnostics[0].code, "yaml-too-many-documents");
    assert!(
        parsed.diagnostics[0]
            .message
            .contains("more than 1 documents")
    );
}

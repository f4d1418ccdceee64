//! The RolloutPolicy's published JSON Schema (`deploy/rolloutpolicy.schema.json`, what `tollgate
//! schema rolloutpolicy` prints, derived from the model `validate` reads policies into) against
//! the policies the repository holds: every valid one under `tests/` and `docs/` validates against
//! it, read by an independent JSON Schema implementation (`jsonschema`, as an editor's would),
//! and the invalid ones are refused by `validate` at the same file and line as before, the
//! structural ones by the schema too.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tollgate::cli::schema::{SchemaKind, schema_text};
use tollgate_manifest::{Limits, parse_file};

use crate::support::tollgate_binary;

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn published() -> String {
    std::fs::read_to_string(repository().join("deploy/rolloutpolicy.schema.json"))
        .expect("deploy/rolloutpolicy.schema.json")
}

fn validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(&published()).expect("the schema is JSON");
    jsonschema::validator_for(&schema).expect("a valid JSON Schema")
}

#[test]
fn the_published_schema_is_what_the_command_prints() {
    let output = tollgate_binary()
        .args(["schema", "rolloutpolicy"])
        .output()
        .expect("tollgate runs");
    assert_eq!(output.status.code(), Some(0));
    let printed = String::from_utf8(output.stdout).expect("UTF-8");
    assert_eq!(printed, schema_text(SchemaKind::Rolloutpolicy));
    assert!(
        published() == printed,
        "deploy/rolloutpolicy.schema.json is not `tollgate schema rolloutpolicy`'s output; \
         regenerate it: tollgate schema rolloutpolicy > deploy/rolloutpolicy.schema.json"
    );
}

/// `(where, text)` of each RolloutPolicy document in the repository's tests and docs: YAML files,
/// fenced `yaml` blocks of the docs, and the suite's policies written as string literals.
fn policies_in_the_repository() -> Vec<(String, String)> {
    let mut found = Vec::new();
    for dir in ["tests", "docs"] {
        let mut files = Vec::new();
        walk(&repository().join(dir), &mut files);
        for file in files {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let name = file
                .strip_prefix(repository())
                .unwrap_or(&file)
                .display()
                .to_string();
            let texts = match file.extension().and_then(|e| e.to_str()) {
                Some("yaml" | "yml") => vec![text],
                Some("md") => fenced_yaml(&text),
                Some("rs") => string_literals(&text),
                _ => Vec::new(),
            };
            for text in texts
                .into_iter()
                .filter(|t| t.contains("kind: RolloutPolicy"))
            {
                found.push((name.clone(), text));
            }
        }
    }
    found
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, files);
        } else {
            files.push(path);
        }
    }
}

fn fenced_yaml(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_start()) {
            (None, "```yaml") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

/// The Rust string literals of `source` that start a RolloutPolicy (`"apiVersion: tollgate.dev…`),
/// unescaped; templates (`format!`'s `{name}`) are among them and are left out by the caller as
/// documents `validate` does not accept.
fn string_literals(source: &str) -> Vec<String> {
    let mut literals = Vec::new();
    let start = "\"apiVersion: tollgate.dev/v1alpha1\\nkind: RolloutPolicy";
    let mut rest = source;
    while let Some(at) = rest.find(start) {
        let body = &rest[at + 1..];
        let mut text = String::new();
        let mut chars = body.char_indices();
        let mut end = body.len();
        while let Some((index, c)) = chars.next() {
            match c {
                '"' => {
                    end = index;
                    break;
                }
                '\\' => match chars.next().map(|(_, e)| e) {
                    Some('n') => text.push('\n'),
                    Some('t') => text.push('\t'),
                    Some(other) => text.push(other),
                    None => {}
                },
                other => text.push(other),
            }
        }
        literals.push(text);
        rest = &body[end..];
    }
    literals
}

#[test]
fn every_valid_policy_in_tests_and_docs_validates_against_the_published_schema() {
    let validator = validator();
    let mut valid = 0;
    let mut problems = Vec::new();
    for (place, text) in policies_in_the_repository() {
        let parsed = parse_file(&place, text.as_bytes(), &Limits::default());
        if parsed.has_errors() || parsed.policies.len() != 1 {
            continue; // a template or an intentionally invalid policy
        }
        valid += 1;
        let document: Value = serde_saphyr::from_str(&text).expect("YAML");
        let errors: Vec<String> = validator
            .iter_errors(&document)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        if !errors.is_empty() {
            problems.push(format!("{place}: {errors:?}\n{text}"));
        }
    }
    assert!(valid >= 15, "only {valid} valid policies found");
    assert!(problems.is_empty(), "{problems:#?}");
}

/// A spec, the `(line, column, code)` of each error, whether the schema refuses it too.
type InvalidCase = (&'static str, &'static [(u32, u32, &'static str)], bool);

/// Invalid policies of the suite (`cli_validate`) and of the manifest crate's tests: the spec
/// (after the 5-line head), the `(line, column, code)` of each error `validate` reports, and
/// whether the problem is structural (refused by the schema too) or a rule beyond it.
const INVALID: [InvalidCase; 8] = [
    (
        "  progressDeadline: 10 minutes\n",
        &[(6, 21, "invalid-duration")],
        false,
    ),
    (
        "  stages:\n    a:\n      maxFailures: \"150%\"\n",
        &[(8, 20, "invalid-max-failures")],
        false,
    ),
    ("  maxFailure: 1\n", &[(6, 3, "unknown-field")], true),
    ("  onFailure: halt\n", &[(6, 14, "unsupported-value")], true),
    ("  rollback: Fast\n", &[(6, 13, "wrong-type")], true),
    (
        "  blackouts:\n  - {to: \"2026-12-21\", when: x}\n",
        &[(7, 5, "required"), (7, 24, "unknown-field")],
        true,
    ),
    (
        "  notify:\n  - name: chat\n    type: teams\n    addressSecretFile: /s\n    events: []\n",
        &[(8, 11, "unsupported-value"), (10, 5, "required-value")],
        true,
    ),
    (
        "  stages:\n    production:\n      waves: {canary: -1, size: 1}\n",
        &[(8, 23, "wrong-type")],
        true,
    ),
];

#[test]
fn invalid_policies_are_refused_at_the_same_place_the_structural_ones_by_the_schema_too() {
    let validator = validator();
    for (spec, expected, structural) in INVALID {
        let text = format!(
            "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: fleet\nspec:\n{spec}"
        );
        let parsed = parse_file("fleet.yaml", text.as_bytes(), &Limits::default());
        let found: Vec<(u32, u32, &str)> = parsed
            .all_diagnostics()
            .iter()
            .map(|d| (d.line, d.column, d.code))
            .collect();
        assert_eq!(found, expected, "{spec}");
        assert!(
            parsed
                .all_diagnostics()
                .iter()
                .all(|d| d.file == "fleet.yaml")
        );
        let document: Value = serde_saphyr::from_str(&text).expect("YAML");
        assert_eq!(!validator.is_valid(&document), structural, "{spec}");
    }
}

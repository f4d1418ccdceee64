//! Parsing one file: size and UTF-8 checks, YAML with budgets (bombs, depth, document count),
//! selection of ClusterPromotion documents, then validation of each document on its own.
//!
//! YAML is read by the crate's private fast reader (`fast_yaml`) when the file keeps to the plain
//! manifest subset it reads (the usual case), and by serde-saphyr otherwise; every YAML error and
//! limit comes from serde-saphyr. Field locations are turned into paths only when a finding
//! needs one.
//!
//! Pure: the caller reads the file. Each call is independent, so one bad file never affects
//! another; inside a file, a bad promotion never hides the others.

use serde_saphyr::{Budget, Options, Spanned};

use crate::diagnostic::{Diagnostic, Finding, Severity};
use crate::fast_yaml;
use crate::loc_tree::DocumentLocations;
use crate::located::{self, ConversionProblem, Locations, Node};
use crate::model::{API_GROUP, API_VERSION, ClusterPromotion, KIND};
use crate::policy::{self, ParsedPolicy};
use crate::validate::{self, ValidationContext};

// `locate` is re-exported for callers of its former home.
pub use crate::diagnostic::locate;
pub use crate::limits::Limits;

#[derive(Clone, Debug, PartialEq)]
pub struct ParsedFile {
    pub file: String,
    pub promotions: Vec<ParsedPromotion>,
    /// `RolloutPolicy` documents (tollgate.dev), see [`crate::policy`].
    pub policies: Vec<ParsedPolicy>,
    /// File-level problems: size, UTF-8, YAML syntax, limits.
    pub diagnostics: Vec<Diagnostic>,
    pub ignored: Vec<IgnoredDocument>,
}

impl ParsedFile {
    /// File-level and per-promotion diagnostics, in file order.
    pub fn all_diagnostics(&self) -> Vec<Diagnostic> {
        let mut all: Vec<Diagnostic> = self.diagnostics.clone();
        for promotion in &self.promotions {
            all.extend(promotion.diagnostics.iter().cloned());
        }
        for policy in &self.policies {
            all.extend(policy.diagnostics.iter().cloned());
        }
        all.sort_by_key(|d| (d.line, d.column));
        all
    }

    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
            || self
                .promotions
                .iter()
                .any(|p| p.diagnostics.iter().any(Diagnostic::is_error))
            || self
                .policies
                .iter()
                .any(|p| p.diagnostics.iter().any(Diagnostic::is_error))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ParsedPromotion {
    pub name: Option<String>,
    /// Line of the document's first node.
    pub line: u32,
    /// `None` iff there is an error diagnostic.
    pub promotion: Option<ClusterPromotion>,
    pub diagnostics: Vec<Diagnostic>,
}

/// A document of another kind, skipped on purpose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnoredDocument {
    /// 0-based index among the file's non-empty documents.
    pub index: usize,
    pub line: u32,
    pub api_version: Option<String>,
    pub kind: Option<String>,
}

fn file_diagnostic(
    file: &str,
    code: &'static str,
    line: u32,
    column: u32,
    message: String,
) -> Diagnostic {
    Diagnostic {
        severity: Severity::Error,
        code,
        file: file.to_string(),
        line,
        column,
        path: String::new(),
        message,
    }
}

fn yaml_options(limits: &Limits) -> Options {
    let mut budget = Budget::default();
    budget.max_depth = limits.max_depth;
    budget.max_nodes = limits.max_nodes;
    budget.max_aliases = limits.max_aliases;
    budget.max_documents = limits.max_documents;
    let mut options = Options::default();
    options.budget = Some(budget);
    options.with_snippet = false;
    // Comments are never read: skip building their events (still validated as YAML syntax).
    options.emit_comments = false;
    // Alias replay is what a "billion laughs" document multiplies; stop it well before the node
    // budget so the message can name the cause.
    options.alias_limits.max_total_replayed_events = limits.max_nodes / 2;
    options
}

/// Turns a serde-saphyr error into a code and a message that names the limit.
fn describe_yaml_error(error: &serde_saphyr::Error, limits: &Limits) -> (&'static str, String) {
    use serde_saphyr::budget::BudgetBreach;
    match error {
        serde_saphyr::Error::Budget { breach, .. } => match breach {
            BudgetBreach::Depth { .. } => (
                "yaml-too-deep",
                format!("nesting deeper than {} levels", limits.max_depth),
            ),
            BudgetBreach::Nodes { .. } => (
                "yaml-too-many-nodes",
                format!(
                    "more than {} YAML nodes (alias expansion limit exceeded? YAML bomb?)",
                    limits.max_nodes
                ),
            ),
            BudgetBreach::Aliases { .. } => (
                "yaml-too-many-aliases",
                format!("more than {} aliases (YAML bomb?)", limits.max_aliases),
            ),
            BudgetBreach::Documents { .. } => (
                "yaml-too-many-documents",
                format!("more than {} documents in one file", limits.max_documents),
            ),
            other => (
                "yaml-limit-exceeded",
                format!("YAML limit exceeded: {other:?}"),
            ),
        },
        serde_saphyr::Error::AliasReplayLimitExceeded { .. }
        | serde_saphyr::Error::AliasExpansionLimitExceeded { .. }
        | serde_saphyr::Error::AliasReplayStackDepthExceeded { .. } => (
            "yaml-alias-bomb",
            "alias expansion limit exceeded (YAML bomb?)".to_string(),
        ),
        serde_saphyr::Error::DuplicateMappingKey { .. } => {
            ("duplicate-key", strip_location(&error.to_string()))
        }
        other => {
            let message = other.to_string();
            // Alias errors can arrive wrapped (with the alias and anchor locations attached).
            if message.contains("alias replay") || message.contains("alias expansion") {
                (
                    "yaml-alias-bomb",
                    "alias expansion limit exceeded (YAML bomb?)".to_string(),
                )
            } else {
                ("yaml-syntax", strip_location(&message))
            }
        }
    }
}

/// serde-saphyr appends " at line L, column C"; the diagnostic carries those separately.
fn strip_location(message: &str) -> String {
    let cut = message.find(" at line ").unwrap_or(message.len());
    let text = &message[..cut];
    text.strip_suffix(", set DuplicateKeyPolicy in Options if acceptable")
        .unwrap_or(text)
        .to_string()
}

/// Line and column (1-based) of byte `offset`.
fn position_of(bytes: &[u8], offset: usize) -> (u32, u32) {
    let before = &bytes[..offset.min(bytes.len())];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&before[line_start..])
        .chars()
        .count()
        + 1;
    (
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(column).unwrap_or(u32::MAX),
    )
}

fn deserialize_documents(
    text: &str,
    limits: &Limits,
) -> Result<Vec<Spanned<Node>>, serde_saphyr::Error> {
    serde_saphyr::from_multiple_with_options::<Spanned<Node>>(text, yaml_options(limits))
}

/// One document as JSON, with where its nodes were written.
struct ReadDocument<'a> {
    value: serde_json::Value,
    line: u32,
    locations: DocumentLocations<'a>,
    problems: Vec<ConversionProblem>,
}

/// The fast reader when it can read the file, serde-saphyr otherwise (and for every error).
fn read_documents<'a>(
    text: &'a str,
    limits: &Limits,
) -> Result<Vec<ReadDocument<'a>>, serde_saphyr::Error> {
    if let Ok(documents) = fast_yaml::read(text, limits) {
        return Ok(documents
            .into_iter()
            .map(|document| ReadDocument {
                value: document.value,
                line: document.tree.root().line,
                locations: DocumentLocations::from_tree(document.tree, text),
                problems: Vec::new(),
            })
            .collect());
    }
    let documents = deserialize_documents(text, limits)?;
    Ok(documents
        .iter()
        .map(|document| {
            let mut locations = Locations::default();
            let mut problems = Vec::new();
            let value = located::to_json(document, &mut locations, &mut problems);
            ReadDocument {
                value,
                line: located::Loc::of(document).line,
                locations: DocumentLocations::Map(locations),
                problems,
            }
        })
        .collect())
}

/// What parsing a file of `size` bytes, over `limits.max_file_bytes`, gives. Lets a reader that
/// knows the size up front (a git blob header) refuse the file without loading it.
pub fn oversized_file(file: &str, size: usize, limits: &Limits) -> ParsedFile {
    ParsedFile {
        file: file.to_string(),
        promotions: Vec::new(),
        policies: Vec::new(),
        diagnostics: vec![file_diagnostic(
            file,
            "file-too-large",
            1,
            1,
            format!(
                "file is {size} bytes, more than the limit of {} bytes",
                limits.max_file_bytes
            ),
        )],
        ignored: Vec::new(),
    }
}

pub fn parse_file(file: &str, bytes: &[u8], limits: &Limits) -> ParsedFile {
    let mut parsed = ParsedFile {
        file: file.to_string(),
        promotions: Vec::new(),
        policies: Vec::new(),
        diagnostics: Vec::new(),
        ignored: Vec::new(),
    };
    if bytes.len() > limits.max_file_bytes {
        return oversized_file(file, bytes.len(), limits);
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            parsed.diagnostics.push(not_utf8(file, bytes, &e));
            return parsed;
        }
    };
    let documents = match read_documents(text, limits) {
        Ok(documents) => documents,
        Err(error) => {
            parsed
                .diagnostics
                .push(unreadable_yaml(file, &error, limits));
            return parsed;
        }
    };
    for (index, document) in documents.into_iter().enumerate() {
        let api_version = document.value.get("apiVersion").and_then(|v| v.as_str());
        let kind = document.value.get("kind").and_then(|v| v.as_str());
        let group = api_version.and_then(|v| v.split_once('/')).map(|(g, _)| g);
        if policy::is_policy_document(api_version, kind) {
            let ReadDocument {
                value,
                line,
                locations,
                problems,
            } = document;
            let read = policy::read_policy(file, value, line, &locations, problems);
            parsed.policies.push(read);
        } else if kind != Some(KIND) || group != Some(API_GROUP) {
            parsed.ignored.push(IgnoredDocument {
                index,
                line: document.line,
                api_version: api_version.map(str::to_string),
                kind: kind.map(str::to_string),
            });
        } else {
            let promotion = read_promotion(file, text, document, limits);
            parsed.promotions.push(promotion);
        }
    }
    parsed
}

fn not_utf8(file: &str, bytes: &[u8], error: &std::str::Utf8Error) -> Diagnostic {
    let (line, column) = position_of(bytes, error.valid_up_to());
    file_diagnostic(
        file,
        "not-utf8",
        line,
        column,
        format!(
            "file is not valid UTF-8 (invalid byte at offset {}); YAML manifests must be UTF-8",
            error.valid_up_to()
        ),
    )
}

fn unreadable_yaml(file: &str, error: &serde_saphyr::Error, limits: &Limits) -> Diagnostic {
    let (code, message) = describe_yaml_error(error, limits);
    let (line, column) = error
        .location()
        .map(|l| {
            (
                u32::try_from(l.line()).unwrap_or(u32::MAX).max(1),
                u32::try_from(l.column()).unwrap_or(u32::MAX).max(1),
            )
        })
        .unwrap_or((1, 1));
    file_diagnostic(file, code, line, column, message)
}

/// A ClusterPromotion document, validated; the promotion only when no error was found.
fn read_promotion(
    file: &str,
    text: &str,
    document: ReadDocument<'_>,
    limits: &Limits,
) -> ParsedPromotion {
    let ReadDocument {
        value: json,
        line,
        locations,
        problems,
    } = document;
    let api_version = json.get("apiVersion").and_then(|v| v.as_str());
    let name = json
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(|v| v.as_str())
        .map(str::to_string);
    let mut findings: Vec<Finding> = problems
        .into_iter()
        .map(|p| Finding::error("yaml-value", p.path, p.message).at(p.loc.line, p.loc.column))
        .collect();
    if api_version != Some(API_VERSION) {
        findings.push(Finding::error(
            "unsupported-api-version",
            "apiVersion",
            format!(
                "Unsupported value: {:?}: supported values: {API_VERSION:?}",
                api_version.unwrap_or_default()
            ),
        ));
    }
    let context = ValidationContext {
        source: text,
        locations: &locations,
        limits,
    };
    let (promotion, more) = validate::validate_document(json, &context);
    findings.extend(more);
    let diagnostics = if findings.is_empty() {
        Vec::new()
    } else {
        locate_all(file, &findings, locations.map())
    };
    let promotion = if diagnostics.iter().any(Diagnostic::is_error) {
        None
    } else {
        promotion
    };
    ParsedPromotion {
        name,
        line,
        promotion,
        diagnostics,
    }
}

fn locate_all(file: &str, findings: &[Finding], locations: &Locations) -> Vec<Diagnostic> {
    let mut diagnostics: Vec<Diagnostic> = findings
        .iter()
        .map(|f| locate(file, f, locations))
        .collect();
    diagnostics.sort_by_key(|d| (d.line, d.column, d.severity));
    diagnostics
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::located::{FieldLoc, Loc};

    #[test]
    fn positions_count_characters_not_bytes() {
        let text = b"a: 1\nname: caf\xc3\xa9\xff";
        assert_eq!(position_of(text, 0), (1, 1));
        assert_eq!(position_of(text, 5), (2, 1));
        assert_eq!(position_of(text, 16), (2, 11));
    }

    #[test]
    fn saphyr_locations_are_stripped_from_messages() {
        assert_eq!(
            strip_location(
                "duplicate mapping key: a, set DuplicateKeyPolicy in Options if acceptable at line 3, column 1"
            ),
            "duplicate mapping key: a"
        );
        assert_eq!(
            strip_location("unclosed bracket '['"),
            "unclosed bracket '['"
        );
    }

    #[test]
    fn findings_are_placed_at_key_value_or_nearest_ancestor() {
        let mut locations = Locations::default();
        let loc = |line, column| Loc { line, column };
        locations.insert(
            "spec".into(),
            FieldLoc {
                key: Some(loc(3, 1)),
                value: loc(4, 3),
                container: true,
            },
        );
        locations.insert(
            "spec.delay".into(),
            FieldLoc {
                key: Some(loc(4, 3)),
                value: loc(4, 10),
                container: false,
            },
        );
        let at = |finding: Finding| {
            let d = locate("f.yaml", &finding, &locations);
            (d.line, d.column)
        };
        assert_eq!(at(Finding::error("c", "spec.delay", "m")), (4, 10));
        assert_eq!(at(Finding::error("c", "spec.delay", "m").at_key()), (4, 3));
        assert_eq!(
            at(Finding::error("c", "spec", "m")),
            (3, 1),
            "containers at their key"
        );
        assert_eq!(
            at(Finding::error("c", "spec.missing", "m")),
            (3, 1),
            "missing: parent key"
        );
        assert_eq!(at(Finding::error("c", "other", "m")), (1, 1));
        assert_eq!(at(Finding::error("c", "spec", "m").at(9, 2)), (9, 2));
    }
}

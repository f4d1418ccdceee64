//! Turning one manifest blob into named promotions or diagnostics. The only place this crate
//! touches the manifest format; everything else sees [`ParsedBlob`].

use std::sync::Arc;

use tollgate_spec::ClusterPromotion;
use tollgate_spec::parse::parse_file;

pub use tollgate_spec::diagnostic::{Diagnostic, Severity};
pub use tollgate_spec::parse::Limits;

/// One `ClusterPromotion` document of a file.
#[derive(Clone, Debug)]
pub(crate) struct ParsedDoc {
    pub name: String,
    pub outcome: Result<Arc<ClusterPromotion>, Vec<Diagnostic>>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct ParsedBlob {
    pub docs: Vec<ParsedDoc>,
    /// Errors that belong to no named promotion (YAML syntax, a promotion without a name…).
    pub file_errors: Vec<Diagnostic>,
}

impl ParsedBlob {
    /// The diagnostics as they would read for a blob at `file` (a blob is parsed once, under the
    /// first path it was seen at; the same content may later sit at another path).
    pub fn relocate(diagnostics: &[Diagnostic], file: &str) -> Vec<Diagnostic> {
        diagnostics
            .iter()
            .map(|d| {
                let mut d = d.clone();
                d.file = file.to_string();
                d
            })
            .collect()
    }
}

/// Parses one blob with the spec crate's parser. Documents of other kinds are skipped there;
/// a promotion document without a name cannot be attributed, so its diagnostics become file-level.
pub(crate) fn parse_blob(file: &str, bytes: &[u8], limits: &Limits) -> ParsedBlob {
    let parsed = parse_file(file, bytes, limits);
    let mut blob = ParsedBlob {
        docs: Vec::with_capacity(parsed.promotions.len()),
        file_errors: parsed.diagnostics,
    };
    for document in parsed.promotions {
        match (document.name, document.promotion) {
            (Some(name), Some(promotion)) => blob.docs.push(ParsedDoc {
                name,
                outcome: Ok(Arc::new(promotion)),
            }),
            (Some(name), None) => blob.docs.push(ParsedDoc {
                name,
                outcome: Err(document.diagnostics),
            }),
            (None, _) => blob.file_errors.extend(document.diagnostics),
        }
    }
    blob
}

/// The error for a name defined more than once at one commit (in two files, or twice in one).
pub(crate) fn duplicate_name_diagnostic(name: &str, files: &[&str]) -> Diagnostic {
    let file = files.first().copied().unwrap_or_default();
    let message = match files {
        [a, b] if a == b => format!("ClusterPromotion {name:?} is defined more than once in {a}"),
        _ => format!(
            "ClusterPromotion {name:?} is defined in more than one file: {}",
            files.join(", ")
        ),
    };
    Diagnostic {
        severity: Severity::Error,
        code: "duplicate-promotion-name",
        file: file.to_string(),
        line: 1,
        column: 1,
        path: "metadata.name".to_string(),
        message,
    }
}

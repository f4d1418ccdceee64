//! A promotion's document in a manifest file: finding it among the file's `---` documents,
//! reading it with the places its fields are written, and parsing an edited file back to check it.

use std::ops::Range;

use serde_json::Value;
use serde_saphyr::Spanned;
use tollgate_manifest::ClusterPromotion;
use tollgate_manifest::located::{self, Locations, Node};
use tollgate_manifest::parse::{Limits, parse_file};

use super::EditError;

/// One YAML document of a file: `range` covers all its lines, including a leading `---` marker
/// line; `body` the lines after that marker (the whole range when there is none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocumentSpan {
    pub range: Range<usize>,
    pub body: Range<usize>,
}

fn is_document_marker(line: &str) -> bool {
    line.strip_prefix("---")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
}

/// Splits a file at its `---` document markers (byte ranges, lines kept whole).
pub fn split_documents(text: &str) -> Vec<DocumentSpan> {
    let mut documents = Vec::new();
    let mut start = 0;
    let mut body_start = 0;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if is_document_marker(line) {
            if offset > 0 {
                documents.push(DocumentSpan {
                    range: start..offset,
                    body: body_start..offset,
                });
            }
            start = offset;
            body_start = offset + line.len();
        }
        offset += line.len();
    }
    documents.push(DocumentSpan {
        range: start..text.len(),
        body: body_start.min(text.len())..text.len(),
    });
    documents
}

/// The document of `text` that defines ClusterPromotion `name` (valid or not).
pub fn find_promotion_document(
    text: &str,
    file: &str,
    name: &str,
) -> Result<DocumentSpan, EditError> {
    let limits = Limits::default();
    let mut found = None;
    for document in split_documents(text) {
        let parsed = parse_file(file, text[document.body.clone()].as_bytes(), &limits);
        let count = parsed
            .promotions
            .iter()
            .filter(|p| p.name.as_deref() == Some(name))
            .count();
        if count > 1 || (count == 1 && found.is_some()) {
            return Err(EditError::DuplicateDocument {
                file: file.to_string(),
                name: name.to_string(),
            });
        }
        if count == 1 {
            found = Some(document);
        }
    }
    found.ok_or_else(|| EditError::DocumentNotFound {
        file: file.to_string(),
        name: name.to_string(),
    })
}

pub(super) fn decode(bytes: Vec<u8>, file: &str, name: &str) -> Result<String, EditError> {
    String::from_utf8(bytes).map_err(|_| EditError::Yaml {
        file: file.to_string(),
        name: name.to_string(),
        message: "file is not valid UTF-8".to_string(),
    })
}

/// A document parsed with where its fields are written: its node tree (byte spans, for flow
/// edits), its JSON and its field locations (for line-based edits).
pub(super) struct LocatedDocument {
    pub root: Spanned<Node>,
    pub json: Value,
    pub locations: Locations,
}

pub(super) fn locate_document(body: &str) -> Result<LocatedDocument, String> {
    let root: Spanned<Node> = serde_saphyr::from_str(body).map_err(|e| e.to_string())?;
    let mut locations = Locations::default();
    let mut problems = Vec::new();
    let json = located::to_json(&root, &mut locations, &mut problems);
    match problems.first() {
        Some(problem) => Err(problem.message.clone()),
        None => Ok(LocatedDocument {
            root,
            json,
            locations,
        }),
    }
}

/// Parses `text` and returns promotion `name`, which must be valid.
pub(super) fn reparse(text: &str, file: &str, name: &str) -> Result<ClusterPromotion, EditError> {
    let problem = |problem: String| EditError::Verification {
        file: file.to_string(),
        name: name.to_string(),
        problem,
    };
    let parsed = parse_file(file, text.as_bytes(), &Limits::default());
    if let Some(error) = parsed.diagnostics.first() {
        return Err(problem(format!("does not parse: {error}")));
    }
    let mut matching = parsed
        .promotions
        .into_iter()
        .filter(|p| p.name.as_deref() == Some(name));
    let (Some(document), None) = (matching.next(), matching.next()) else {
        return Err(problem("is not defined exactly once".to_string()));
    };
    match document.promotion {
        Some(promotion) => Ok(promotion),
        None => {
            let errors: Vec<String> = document.diagnostics.iter().map(|d| d.to_string()).collect();
            Err(problem(format!("does not validate: {}", errors.join("; "))))
        }
    }
}

//! Writing one annotation into a promotion's document, whatever style it is written in (issue
//! #45): the line edit for block style ([`block::set_block_annotation`]), the offset edit
//! for flow style ([`flow`]). Either must give text that parses to exactly the old
//! document plus the annotation; when neither can (a shape such as an alias for `metadata`), the
//! document is written again in block style from that content, so the command still works, and
//! the caller says the document's comments are gone.

use serde_json::{Map, Value};
use serde_saphyr::Spanned;
use tollgate_manifest::located::Node;

use crate::edit::EditError;
use flow::{is_flow_edit, set_flow_annotation};

mod block;
mod flow;

/// A document's text with the annotation written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Annotated {
    pub text: String,
    /// The document could not be edited in place and was written again in block style (its
    /// comments and formatting are gone; the file's other documents are untouched).
    pub rewritten: bool,
}

/// Sets `metadata.annotations[key]` to the string `value` in one document's text (`body`), every
/// other byte kept when the document's shape allows it (see the module doc).
pub fn set_annotation(
    body: &str,
    file: &str,
    name: &str,
    key: &str,
    value: &str,
) -> Result<Annotated, EditError> {
    let yaml_error = |message: String| EditError::Yaml {
        file: file.to_string(),
        name: name.to_string(),
        message,
    };
    let (root, document) = parse(body).map_err(yaml_error)?;
    let expected = with_annotation(&document, key, value)
        .ok_or_else(|| yaml_error("`metadata` is not a mapping".to_string()))?;
    let edited = match is_flow_edit(body, &root) {
        true => set_flow_annotation(body, &root, key, value),
        false => block::set_block_annotation(body, file, name, key, value).ok(),
    };
    if let Some(text) = edited.filter(|text| parses_to(text, &expected)) {
        return Ok(Annotated {
            text,
            rewritten: false,
        });
    }
    let text = block_style_text(&expected).ok_or_else(|| EditError::Verification {
        file: file.to_string(),
        name: name.to_string(),
        problem: "cannot be written with the annotation".to_string(),
    })?;
    Ok(Annotated {
        text,
        rewritten: true,
    })
}

/// `content` written as a block-style YAML document, checked to parse back to it.
pub(crate) fn block_style_text(content: &Value) -> Option<String> {
    let text = serde_saphyr::to_string(content).ok()?;
    parses_to(&text, content).then_some(text)
}

/// The content of a document's text, `None` when it does not parse.
pub(crate) fn content_of(body: &str) -> Option<Value> {
    parse(body).ok().map(|(_, json)| json)
}

/// What to tell the user when the document was written again (see [`Annotated::rewritten`]).
pub fn rewritten_warning(file: &str, name: &str) -> String {
    format!(
        "{file}: the YAML of ClusterPromotion {name:?} has a shape that cannot be edited in place (e.g. an alias); its document was written again in block style with the same content: its comments and formatting are gone, the file's other documents are untouched"
    )
}

/// The document's located tree and its content as JSON.
fn parse(body: &str) -> Result<(Spanned<Node>, Value), String> {
    super::document::locate_document(body).map(|document| (document.root, document.json))
}

/// Whether `text` parses to exactly `expected`.
fn parses_to(text: &str, expected: &Value) -> bool {
    parse(text).is_ok_and(|(_, json)| json == *expected)
}

/// `document` with `metadata.annotations[key] = value` (`annotations` created when absent or
/// null); `None` when `metadata` or `annotations` is not a mapping.
pub fn with_annotation(document: &Value, key: &str, value: &str) -> Option<Value> {
    let mut expected = document.clone();
    let metadata = expected.get_mut("metadata")?.as_object_mut()?;
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if annotations.is_null() {
        *annotations = Value::Object(Map::new());
    }
    annotations
        .as_object_mut()?
        .insert(key.to_string(), Value::String(value.to_string()));
    Some(expected)
}

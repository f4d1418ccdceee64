//! The annotation edit for a document written in block style: one line replaced or inserted,
//! every other line kept byte for byte.

use serde_json::Value;
use tollgate_manifest::located::{FieldLoc, child_path};

use crate::edit::EditError;
use crate::edit::document::{LocatedDocument, locate_document};

/// Sets `metadata.annotations[key]` to the string `value` in one document's text written in block
/// style: replaces the annotation's line when present, otherwise inserts one line under
/// `annotations:` (creating that key under `metadata:` when absent). Every other line is kept byte
/// for byte. `NotBlockStyle` for a flow-style path ([`super::set_annotation`] edits any style).
pub(super) fn set_block_annotation(
    body: &str,
    file: &str,
    name: &str,
    key: &str,
    value: &str,
) -> Result<String, EditError> {
    let document = locate_document(body).map_err(|message| EditError::Yaml {
        file: file.to_string(),
        name: name.to_string(),
        message,
    })?;
    let edit = LineEdit {
        file,
        name,
        key,
        value,
        newline: if body.contains("\r\n") { "\r\n" } else { "\n" },
    };
    let mut lines: Vec<String> = body.split_inclusive('\n').map(str::to_string).collect();

    let metadata = document
        .locations
        .get("metadata")
        .filter(|_| document.json.get("metadata").is_some_and(Value::is_object))
        .ok_or_else(|| edit.not_block("metadata", 1))?;
    let metadata_key = metadata.key.unwrap_or(metadata.value);
    if metadata.value.line <= metadata_key.line {
        return Err(edit.not_block("metadata", metadata_key.line));
    }
    let entry_path = child_path(&child_path("metadata", "annotations"), key);

    if let Some(existing) = document.locations.get(&entry_path) {
        let key_loc = existing.key.unwrap_or(existing.value);
        if existing.value.line != key_loc.line || existing.container {
            return Err(edit.not_block(&entry_path, key_loc.line));
        }
        let index = line_index(key_loc.line);
        ensure_line(&lines, index).map_err(|l| edit.not_block(&entry_path, l))?;
        lines[index] = ending_like(&edit.entry(indent_of(key_loc.column)), &lines[index]);
        return Ok(lines.concat());
    }
    edit.insert_entry(&document, metadata, &mut lines)?;
    Ok(lines.concat())
}

/// What the line edit writes (`key: "value"` lines ending as the document's lines do) and into
/// whose document (for its errors).
struct LineEdit<'a> {
    file: &'a str,
    name: &'a str,
    key: &'a str,
    value: &'a str,
    newline: &'static str,
}

impl LineEdit<'_> {
    fn not_block(&self, field: &str, line: u32) -> EditError {
        EditError::NotBlockStyle {
            file: self.file.to_string(),
            name: self.name.to_string(),
            field: field.to_string(),
            line,
        }
    }

    /// The annotation's line at `indent`. The quotes keep an all-digit id a string.
    fn entry(&self, indent: usize) -> String {
        let (key, value, newline) = (self.key, self.value, self.newline);
        format!("{}{key}: \"{value}\"{newline}", " ".repeat(indent))
    }

    /// An `annotations:` key line at `indent`.
    fn header(&self, indent: usize) -> String {
        format!("{}annotations:{}", " ".repeat(indent), self.newline)
    }

    /// Inserts the annotation's line when `metadata.annotations` has no such key yet: first under
    /// a non-empty `annotations:`, under an empty one rewritten as a block key, or under a new
    /// `annotations:` key first under `metadata:`.
    fn insert_entry(
        &self,
        document: &LocatedDocument,
        metadata: FieldLoc,
        lines: &mut Vec<String>,
    ) -> Result<(), EditError> {
        let annotations_path = child_path("metadata", "annotations");
        match (
            document.locations.get(&annotations_path),
            document.json.pointer("/metadata/annotations"),
        ) {
            (Some(annotations), Some(Value::Object(map))) if !map.is_empty() => {
                let key_loc = annotations.key.unwrap_or(annotations.value);
                if annotations.value.line <= key_loc.line {
                    return Err(self.not_block(&annotations_path, key_loc.line));
                }
                let index = line_index(annotations.value.line);
                ensure_line(lines, index).map_err(|l| self.not_block(&annotations_path, l))?;
                lines.insert(index, self.entry(indent_of(annotations.value.column)));
            }
            (Some(annotations), Some(Value::Object(_) | Value::Null)) => {
                // `annotations:`, `annotations: {}` or `annotations: ~`: rewrite that one line.
                let key_loc = annotations.key.unwrap_or(annotations.value);
                let index = line_index(key_loc.line);
                ensure_line(lines, index).map_err(|l| self.not_block(&annotations_path, l))?;
                let indent = indent_of(key_loc.column);
                lines[index] = self.header(indent);
                lines.insert(index + 1, self.entry(indent + 2));
            }
            (Some(annotations), _) => {
                let line = annotations.key.unwrap_or(annotations.value).line;
                return Err(self.not_block(&annotations_path, line));
            }
            (None, _) => {
                let index = line_index(metadata.value.line);
                ensure_line(lines, index).map_err(|l| self.not_block("metadata", l))?;
                let indent = indent_of(metadata.value.column);
                lines.insert(index, self.entry(indent + 2));
                lines.insert(index, self.header(indent));
            }
        }
        Ok(())
    }
}

/// The indentation (in spaces) of a value written at 1-based `column`.
fn indent_of(column: u32) -> usize {
    column.saturating_sub(1) as usize
}

/// The index in the document's lines of 1-based `line`.
fn line_index(line: u32) -> usize {
    line.saturating_sub(1) as usize
}

fn ensure_line(lines: &[String], index: usize) -> Result<(), u32> {
    if index < lines.len() {
        Ok(())
    } else {
        Err(u32::try_from(index + 1).unwrap_or(u32::MAX))
    }
}

/// `replacement` with the line ending `original` had (none for a last line without one).
fn ending_like(replacement: &str, original: &str) -> String {
    let content = replacement.trim_end_matches(['\r', '\n']);
    let ending = &original[original.trim_end_matches(['\r', '\n']).len()..];
    format!("{content}{ending}")
}

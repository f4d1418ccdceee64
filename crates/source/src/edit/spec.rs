//! Splicing a promotion's `spec` block: `rollback` puts an earlier snapshot's spec under the
//! tip's metadata by cutting the document's text at its top-level keys.

use std::ops::Range;

use tollgate_manifest::located::child_path;

use super::document::locate_document;

/// The lines of a document's top-level `key` block: from its key's line up to the next top-level
/// key, less the blank and column-1 comment lines just before that key (they introduce it).
fn top_level_block(body: &str, key: &str) -> Option<Range<usize>> {
    let document = locate_document(body).ok()?;
    let key_loc = document.locations.get(key)?.key?;
    // A block-style top-level key starts its line; anything else (a flow-style document) cannot
    // be cut into lines.
    if key_loc.column != 1 {
        return None;
    }
    let start_line = key_loc.line;
    let next_line = document
        .json
        .as_object()?
        .keys()
        .filter_map(|k| document.locations.get(&child_path("", k))?.key)
        .map(|loc| loc.line)
        .filter(|&line| line > start_line)
        .min();
    let mut offsets = Vec::new();
    let mut offset = 0;
    for line in body.split_inclusive('\n') {
        offsets.push((offset, line));
        offset += line.len();
    }
    let line_start = |line: u32| {
        offsets
            .get(line.saturating_sub(1) as usize)
            .map(|(o, _)| *o)
    };
    let start = line_start(start_line)?;
    let mut end = next_line.and_then(line_start).unwrap_or(body.len());
    // Give the trailing blank and column-1 comment lines back to what follows.
    for (line_offset, line) in offsets.iter().rev() {
        if *line_offset >= end {
            continue;
        }
        if *line_offset <= start || !(line.trim().is_empty() || line.starts_with('#')) {
            break;
        }
        end = *line_offset;
    }
    Some(start..end)
}

/// `head` (a document's text) with its top-level `spec` block replaced by `old`'s: the content of
/// an earlier snapshot under the current metadata (paused flag, approvals, labels, annotations).
/// `None` when either document has no block-style top-level `spec` to splice.
pub fn splice_spec(head: &str, old: &str) -> Option<String> {
    let head_spec = top_level_block(head, "spec")?;
    let old_spec = top_level_block(old, "spec")?;
    let mut spec = old[old_spec].to_string();
    if head_spec.end < head.len() && !spec.ends_with('\n') {
        spec.push('\n');
    }
    Some(format!(
        "{}{spec}{}",
        &head[..head_spec.start],
        &head[head_spec.end..]
    ))
}

//! The annotation edit where the path to it is written in flow style: a whole document in flow
//! style (`{apiVersion: …, metadata: {…}}`), `metadata: {name: web}`, or `annotations: {a: b}`.
//! Such text cannot be cut into lines, so the edit works on byte offsets that the parser reports:
//! an entry is inserted right after the `{` that opens its mapping (no need to find the closing
//! brace or a trailing comma) and an existing value is replaced within its own span. Every other
//! byte is kept; the caller checks the result parses to the intended content.

use serde_saphyr::Spanned;
use tollgate_manifest::located::Node;

/// Whether the edit of `metadata.annotations` in `root` (the parsed document `body`) is one for
/// [`set_flow_annotation`]: the document, its `metadata` or a non-empty `annotations` is a flow
/// mapping. (An empty `annotations: {}` under block metadata is left to the line edit, which
/// turns it into a block.)
pub(crate) fn is_flow_edit(body: &str, root: &Spanned<Node>) -> bool {
    let metadata = value_of(root, "metadata");
    let annotations = metadata.and_then(|m| value_of(m, "annotations"));
    let non_empty = |node: &&Spanned<Node>| matches!(&node.value, Node::Map(e) if !e.is_empty());
    is_flow_map(body, root)
        || metadata.is_some_and(|m| is_flow_map(body, m))
        || annotations
            .filter(non_empty)
            .is_some_and(|a| is_flow_map(body, a))
}

/// `body` with `metadata.annotations[key]` set to the string `value`; `None` when the shape is
/// not one this edit knows (the caller falls back).
pub(crate) fn set_flow_annotation(
    body: &str,
    root: &Spanned<Node>,
    key: &str,
    value: &str,
) -> Option<String> {
    // The quotes keep an all-digit id a string.
    let quoted = format!("\"{value}\"");
    let entry = format!("{key}: {quoted}");
    let metadata = value_of(root, "metadata")?;
    let Some(annotations) = value_of(metadata, "annotations") else {
        return insert_first(body, metadata, &format!("annotations: {{{entry}}}"));
    };
    match &annotations.value {
        Node::Map(_) => match value_of(annotations, key) {
            Some(existing) => replace_scalar(body, existing, &quoted),
            None => insert_first(body, annotations, &entry),
        },
        // `annotations: ~` or `annotations: null` in a flow mapping.
        Node::Null => replace_scalar(body, annotations, &format!("{{{entry}}}")),
        _ => None,
    }
}

/// The value of `key` in the mapping `node`.
fn value_of<'n>(node: &'n Spanned<Node>, key: &str) -> Option<&'n Spanned<Node>> {
    let Node::Map(entries) = &node.value else {
        return None;
    };
    entries
        .iter()
        .find(|(k, _)| matches!(&k.value, Node::Str(s) if s == key))
        .map(|(_, v)| v)
}

/// Where `node` starts in the text it was parsed from, and how many bytes it spans.
fn byte_span(node: &Spanned<Node>) -> Option<(usize, usize)> {
    let span = node.referenced.span();
    let offset = usize::try_from(span.byte_offset()?).ok()?;
    let len = usize::try_from(span.byte_len()?).ok()?;
    Some((offset, len))
}

/// A mapping written `{…}`: the parser locates it at its opening brace (a block mapping is
/// located at its first key).
fn is_flow_map(body: &str, node: &Spanned<Node>) -> bool {
    matches!(node.value, Node::Map(_))
        && byte_span(node).is_some_and(|(offset, _)| body.as_bytes().get(offset) == Some(&b'{'))
}

/// `body` with `entry` as the first entry of the flow mapping `map`.
fn insert_first(body: &str, map: &Spanned<Node>, entry: &str) -> Option<String> {
    if !is_flow_map(body, map) {
        return None;
    }
    let Node::Map(entries) = &map.value else {
        return None;
    };
    let (open, _) = byte_span(map)?;
    let separator = if entries.is_empty() { "" } else { ", " };
    let at = open + 1;
    Some(format!("{}{entry}{separator}{}", &body[..at], &body[at..]))
}

/// `body` with the scalar `node` replaced by `replacement`; `None` for a collection. (A block
/// scalar's span covers its content, not its `|` header: the caller's check of the result
/// catches that shape.)
fn replace_scalar(body: &str, node: &Spanned<Node>, replacement: &str) -> Option<String> {
    if matches!(node.value, Node::Map(_) | Node::Seq(_)) {
        return None;
    }
    let (offset, len) = byte_span(node)?;
    body.get(offset..offset + len)?;
    Some(format!(
        "{}{replacement}{}",
        &body[..offset],
        &body[offset + len..]
    ))
}

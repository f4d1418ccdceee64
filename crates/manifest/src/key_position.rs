//! Where a key path is written in a manifest's text: for messages about a field the parsed
//! model no longer locates (a promotion's annotation named by a policy problem). Block style
//! only; `None` for flow style, and the caller points at the document instead.

/// Line and column of the block-style key path `keys` (each key nested in the one before) in
/// the document starting at `first_line` (1-based); `None` when it is not written that way.
pub fn key_position(text: &str, first_line: u32, keys: &[&str]) -> Option<(u32, u32)> {
    let skip = first_line.saturating_sub(1) as usize;
    let mut lines = text
        .lines()
        .enumerate()
        .skip(skip)
        .take_while(|(index, line)| *index == skip || !line.starts_with("---"));
    let mut found = None;
    let mut parent_indent: Option<usize> = None;
    for key in keys {
        // Only the direct children of the previous key (or top-level keys, for the first).
        let mut child_indent = None;
        let (index, indent) = loop {
            let (index, line) = lines.next()?;
            let content = line.trim_start();
            if content.is_empty() || content.starts_with('#') {
                continue;
            }
            let indent = line.len() - content.len();
            if parent_indent.is_some_and(|parent| indent <= parent) {
                return None;
            }
            let children =
                *child_indent.get_or_insert(if parent_indent.is_some() { indent } else { 0 });
            if indent == children && is_key_line(content, key) {
                break (index, indent);
            }
        };
        parent_indent = Some(indent);
        found = Some((
            u32::try_from(index + 1).ok()?,
            u32::try_from(indent + 1).ok()?,
        ));
    }
    found
}

/// Whether `line` (without indentation) starts with `key:`, the key plain or quoted.
fn is_key_line(line: &str, key: &str) -> bool {
    let unquoted = line.strip_prefix(['"', '\'']).unwrap_or(line);
    unquoted
        .strip_prefix(key)
        .map(|rest| rest.strip_prefix(['"', '\'']).unwrap_or(rest))
        .is_some_and(|rest| rest.starts_with(':'))
}

#[cfg(test)]
mod tests {
    use super::key_position;

    #[test]
    fn key_paths_are_found_in_block_style() {
        let text = "a: 1\n---\nmetadata:\n  name: x\n  annotations:\n    \"tollgate.dev/policy\": p\nspec:\n  stages:\n    prod: {}\n";
        assert_eq!(key_position(text, 3, &["metadata", "name"]), Some((4, 3)));
        let annotation = ["metadata", "annotations", "tollgate.dev/policy"];
        assert_eq!(key_position(text, 3, &annotation), Some((6, 5)));
        assert_eq!(
            key_position(text, 3, &["spec", "stages", "prod"]),
            Some((9, 5))
        );
        assert_eq!(key_position(text, 3, &["spec", "name"]), None);
        assert_eq!(key_position(text, 1, &["metadata"]), None, "other document");
        let labelled = "metadata:\n  labels:\n    name: label\n  name: x\n";
        assert_eq!(
            key_position(labelled, 1, &["metadata", "name"]),
            Some((4, 3))
        );
    }
}

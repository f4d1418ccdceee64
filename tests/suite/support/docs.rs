//! Reading the reference pages under `docs/` for the tests that hold them to the code: a page's
//! sections, the rows of a table, the code spans of a cell.

/// The text of `docs/{page}`.
pub fn page(page: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(page);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The body under the heading line `heading` (`## Run flags`, `# CLI reference`), up to the next
/// `## ` heading: its `###` subsections included.
pub fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let heading = format!("{heading}\n");
    let start = text
        .find(&heading)
        .unwrap_or_else(|| panic!("no heading {heading}"));
    let body = &text[start + heading.len()..];
    &body[..body.find("\n## ").unwrap_or(body.len())]
}

/// The rows (cells) of the first table of `body`, without its header and rule.
pub fn rows(body: &str) -> Vec<Vec<String>> {
    body.lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            let cells = l.trim().trim_matches('|').split(" | ");
            cells.map(|c| c.trim().to_string()).collect()
        })
        .collect()
}

/// The rows of the table under the heading `## {section}`.
pub fn table(text: &str, section_name: &str) -> Vec<Vec<String>> {
    rows(section(text, &format!("## {section_name}")))
}

/// The code spans of a cell: `` `--a`, `--b` `` → `--a`, `--b`.
pub fn spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

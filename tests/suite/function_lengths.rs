//! No production function over 80 lines without a comment saying why it reads better whole
//! (issue #46): a long function hides its steps, so it is split into named ones, unless it is one
//! match or one state machine that a reader follows better in one piece, and its comment says so.

use std::path::Path;

use tollgate_fixtures::function_lengths::long_functions;

const LIMIT: usize = 80;

#[test]
fn no_production_function_is_over_80_lines_without_saying_why_it_reads_better_whole() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut roots = vec![workspace.join("src")];
    for entry in std::fs::read_dir(workspace.join("crates")).expect("crates/") {
        let crate_dir = entry.expect("a crate").path();
        // The fixtures are test code of every crate.
        if !crate_dir.ends_with("fixtures") {
            roots.push(crate_dir.join("src"));
        }
    }
    assert!(roots.len() >= 8, "the crates were not read: {roots:?}");
    let unexplained: Vec<String> = roots
        .iter()
        .flat_map(|root| long_functions(root, LIMIT))
        .filter(|function| !function.explains_why_whole())
        .map(|function| {
            let file = function
                .file
                .strip_prefix(workspace)
                .unwrap_or(&function.file);
            format!(
                "{}:{} fn {} ({} lines)",
                file.display(),
                function.line,
                function.name,
                function.lines
            )
        })
        .collect();
    assert!(
        unexplained.is_empty(),
        "split these into named steps, or say above each why it reads better whole:\n{}",
        unexplained.join("\n")
    );
}

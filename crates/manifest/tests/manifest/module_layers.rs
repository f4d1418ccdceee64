//! The crate's modules form layers (listed at the top of `src/lib.rs`): a module uses only
//! modules below it, so the module graph has no import circle, and the fast YAML reader is
//! private behind one entry point, `check_fast_reader`.
//!
//! Only code outside `#[cfg(test)]` counts: a unit test may drive a module through the entry
//! point above it without that being an import circle of the library.

use std::path::Path;

use tollgate_fixtures::module_layers::{find_circle, module_graph};

#[test]
fn modules_form_layers_without_import_circles() {
    let graph = module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        graph.len() > 10 && graph["parse"].contains("validate"),
        "the graph was not read: {graph:#?}"
    );
    if let Some(circle) = find_circle(&graph) {
        panic!(
            "import circle: {}; move what both sides need into a module below them",
            circle.join(" → ")
        );
    }
}

#[test]
fn the_fast_reader_is_private_behind_one_entry_point() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("src/lib.rs");
    let declarations: Vec<&str> = lib
        .lines()
        .map(str::trim)
        .filter(|line| line.contains("fast_yaml") && !line.starts_with("//"))
        .collect();
    assert_eq!(
        declarations,
        [
            "mod fast_yaml;",
            "mod fast_yaml_check;",
            "pub use fast_yaml_check::check_fast_reader;"
        ]
    );
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n";
    assert_eq!(tollgate_manifest::check_fast_reader(manifest), Ok(()));
    // Anchors are left to serde-saphyr: declining is not a disagreement.
    assert_eq!(
        tollgate_manifest::check_fast_reader("a: &x 1\nb: *x\n"),
        Ok(())
    );
}

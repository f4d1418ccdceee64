//! The crate's modules form layers (listed at the top of `src/lib.rs`): a module uses only
//! modules below it, so the module graph has no import circle, and the fast YAML reader is
//! private behind one entry point, `check_fast_reader`.
//!
//! Only code outside `#[cfg(test)]` counts: a unit test may drive a module through the entry
//! point above it without that being an import circle of the library.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The source of every file under `src/`, by the top-level module it belongs to.
fn sources_by_module() -> BTreeMap<String, Vec<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut by_module: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut pending = vec![src.clone()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("src/ is readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let relative = path.strip_prefix(&src).expect("under src/");
            let first = relative.components().next().expect("a component");
            let module = first.as_os_str().to_string_lossy();
            let module = module.trim_end_matches(".rs").to_string();
            let text = std::fs::read_to_string(&path).expect("a source file");
            by_module.entry(module).or_default().push(text);
        }
    }
    by_module.remove("lib");
    by_module
}

/// The text before the first `#[cfg(test)]`, without `//` comments (doc links are not uses).
fn library_code(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    code.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Module → the sibling modules its library code names through `crate::`.
fn module_graph() -> Graph {
    let sources = sources_by_module();
    let modules: BTreeSet<String> = sources.keys().cloned().collect();
    let mut graph = Graph::new();
    for (module, texts) in &sources {
        let uses = graph.entry(module.clone()).or_default();
        for text in texts {
            let code = library_code(text);
            for (index, _) in code.match_indices("crate::") {
                let rest = &code[index + "crate::".len()..];
                let names = match rest.strip_prefix('{') {
                    Some(group) => group.split('}').next().unwrap_or_default(),
                    None => rest,
                };
                for name in names.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                    if modules.contains(name) && name != module {
                        uses.insert(name.to_string());
                    }
                    if rest.starts_with(name) {
                        break;
                    }
                }
            }
        }
    }
    graph
}

/// A circle of modules, first module repeated at the end, if the graph has one.
fn find_circle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        module: &str,
        graph: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|m| m == module) {
            let mut circle = path[start..].to_vec();
            circle.push(module.to_string());
            return Some(circle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_string());
        for next in graph.get(module).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(module.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|module| visit(module, graph, &mut Vec::new(), &mut done))
}

#[test]
fn modules_form_layers_without_import_circles() {
    let graph = module_graph();
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
fn the_circle_finder_finds_a_circle() {
    let graph: Graph = [("a", "b"), ("b", "c"), ("c", "a")]
        .into_iter()
        .map(|(from, to)| (from.to_string(), BTreeSet::from([to.to_string()])))
        .collect();
    assert_eq!(
        find_circle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
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

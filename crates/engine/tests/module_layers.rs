//! The engine's modules form layers: a module uses only modules below it, so the module graph
//! has no import circle (data types below the rules that read them: `status` below `lineage`,
//! `pipeline` and `run_recording`; `stage_run` below `gate` below `stage`).

use std::path::Path;

use tollgate_fixtures::module_layers::{find_circle, module_graph};

#[test]
fn modules_form_layers_without_import_circles() {
    let graph = module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        graph.len() > 20 && graph["step"].contains("stage"),
        "the graph was not read: {graph:#?}"
    );
    if let Some(circle) = find_circle(&graph) {
        panic!(
            "import circle: {}; move what both sides need into a module below them",
            circle.join(" → ")
        );
    }
}

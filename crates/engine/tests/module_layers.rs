//! The engine's modules form layers: a module uses only modules below it, so the module graph
//! has no import circle, neither between its folders (the families `run/` above `failure/` above
//! `stage/` above `gates/` above `status/`, and the files beside them) nor between its files (data
//! types below the rules that read them: `status` below `status/pipeline` and
//! `run/run_recording`; `gates/stage_run` below `gates/gate` below `stage`).

use std::path::Path;

use tollgate_fixtures::module_layers::{Graph, file_graph, find_circle, module_graph};

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn assert_no_circle(graph: &Graph, level: &str) {
    if let Some(circle) = find_circle(graph) {
        panic!(
            "import circle between {level}: {}; move what both sides need into a module below them",
            circle.join(" → ")
        );
    }
}

#[test]
fn folders_form_layers_without_import_circles() {
    let graph = module_graph(&src());
    assert!(
        graph["run"].contains("stage") && graph["stage"].contains("gates"),
        "the folder graph was not read: {graph:#?}"
    );
    assert_no_circle(&graph, "folders");
}

#[test]
fn files_form_layers_without_import_circles() {
    let graph = file_graph(&src());
    assert!(
        graph.len() > 50 && graph["run/step"].contains("gates/new_snapshot"),
        "the file graph was not read: {graph:#?}"
    );
    assert_no_circle(&graph, "files");
}

#[test]
fn the_families_hold_the_engine_files() {
    let graph = file_graph(&src());
    for family in ["run", "stage", "gates", "failure", "status"] {
        let members = graph
            .keys()
            .filter(|file| file.starts_with(&format!("{family}/")))
            .count();
        assert!(members >= 3, "family {family} has {members} files");
    }
}

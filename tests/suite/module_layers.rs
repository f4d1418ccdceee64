//! The binary's modules (issue #46): `outbound` (the HTTPS client, endpoint secret files, HMAC)
//! is a leaf that every front end may use and that uses none of them; `views` (stage words,
//! relative times, the status parser, the timeline picture) sits below the CLI and the web view,
//! and the web view no longer reaches into the CLI for them.

use std::path::Path;

use tollgate_fixtures::module_layers::module_graph;

#[test]
fn outbound_is_a_leaf_the_front_ends_use() {
    let graph = module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        graph.len() > 8 && graph["notify"].contains("outbound"),
        "the graph was not read: {graph:#?}"
    );
    assert!(
        graph["outbound"].is_empty(),
        "outbound uses {:?}: it must stay below every module that talks out",
        graph["outbound"]
    );
    for module in ["analysis", "notify", "server", "web"] {
        assert!(
            !graph[module].contains("notify") || module == "notify",
            "{module} reaches into notify for what outbound offers: {:?}",
            graph[module]
        );
    }
}

#[test]
fn views_sit_below_the_cli_and_the_web_view() {
    let graph = module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        graph["web"].contains("views") && graph["cli"].contains("views"),
        "the graph was not read: {graph:#?}"
    );
    for front_end in ["cli", "web"] {
        assert!(
            !graph["views"].contains(front_end),
            "views uses {front_end}: {:?}",
            graph["views"]
        );
    }
    assert!(
        !graph["web"].contains("cli"),
        "the web view reaches into the CLI: move what both render into views"
    );
}

/// The binary has no import circle among its modules (the engine and manifest crates test
/// theirs; the source crate still has `governance` ↔ `policies`, the emulator `api` ↔ `kubectl`).
#[test]
fn the_binary_modules_form_layers() {
    let graph = module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(graph.len() > 8, "the graph was not read: {graph:#?}");
    if let Some(circle) = tollgate_fixtures::module_layers::find_circle(&graph) {
        panic!(
            "import circle {}; move what both sides need into a module below them",
            circle.join(" → ")
        );
    }
}

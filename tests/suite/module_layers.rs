//! The binary's modules (issue #46): `outbound` (the HTTPS client, endpoint secret files, HMAC)
//! is a leaf that every front end may use and that uses none of them; `views` (stage words,
//! relative times, the status parser, the timeline picture) sits below the CLI and the web view,
//! and the web view no longer reaches into the CLI for them. No module of the binary, of the
//! source crate or of the emulator imports another that imports it back.

use std::path::Path;

use tollgate_fixtures::module_layers::{find_circle, module_graph};

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

/// Panics naming the import circle among the modules of the crate whose sources are under
/// `src` (relative to the workspace), if it has one.
fn assert_layers(src: &str) {
    let graph = module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join(src));
    assert!(
        graph.len() > 8,
        "the graph of {src} was not read: {graph:#?}"
    );
    if let Some(circle) = find_circle(&graph) {
        panic!(
            "import circle in {src}: {}; move what both sides need into a module below them",
            circle.join(" → ")
        );
    }
}

/// The binary has no import circle among its modules: no two of them import each other, nor
/// reach each other through others (the engine and manifest crates test theirs).
#[test]
fn the_binary_modules_form_layers() {
    assert_layers("src");
}

/// The source crate: what governance leaves waiting (`unapproved`) sits below both
/// `governance`, which finds it, and `policies`, whose set carries it.
#[test]
fn the_source_crate_modules_form_layers() {
    assert_layers("crates/source/src");
}

/// The emulator: a resource request (`request`: its path, reply, body and query parsing, watch
/// streams) sits below both kubectl fidelity (`kubectl`) and the HTTP front (`api`).
#[test]
fn the_emulator_modules_form_layers() {
    assert_layers("crates/emulator/src");
}

//! The binary's modules (issue #46): `outbound` (the HTTPS client, endpoint secret files, HMAC)
//! is a leaf that every front end may use and that uses none of them; and, of the import circles
//! the binary still has, none goes through it.

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

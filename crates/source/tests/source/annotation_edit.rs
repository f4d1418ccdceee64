//! The annotation edit of `approve`, `retry` and the web view's buttons, over generated shapes of
//! a promotion (block or flow metadata, block or flow or empty or null or absent annotations, a
//! whole-document flow style, the key already written or not): the result parses to exactly the
//! old document plus the annotation, in place (not written again), comments kept.

use proptest::prelude::*;
use serde_json::Value;
use tollgate_source::edit::set_annotation;
use tollgate_source::edit_annotation::with_annotation;

const SPEC: &str =
    "spec:\n  stages:\n  - name: staging\n    clusterSelector: {matchLabels: {env: staging}}\n";

#[derive(Clone, Debug)]
enum Annotations {
    Absent,
    Null,
    EmptyFlow,
    Block(Vec<(String, String)>),
    Flow(Vec<(String, String)>),
}

#[derive(Clone, Debug)]
struct Shape {
    flow_metadata: bool,
    whole_flow: bool,
    annotations: Annotations,
    key: String,
    value: String,
}

/// A YAML double-quoted scalar (JSON's escapes are YAML's).
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string")
}

fn entries() -> impl Strategy<Value = Vec<(String, String)>> {
    // A map: a key written twice is not YAML a promotion can have.
    prop::collection::btree_map(
        "[a-z]{1,6}(\\.dev/[a-z]{1,6})?",
        "[a-z0-9 ,:#'\"{}]{0,10}",
        1..4,
    )
    .prop_map(|entries| entries.into_iter().collect())
}

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "retry.tollgate.dev/staging",
        "approve.tollgate.dev/prod",
        "tollgate.dev/paused",
    ])
    .prop_map(str::to_string)
}

fn shape() -> impl Strategy<Value = Shape> {
    let annotations = prop_oneof![
        Just(Annotations::Absent),
        Just(Annotations::Null),
        Just(Annotations::EmptyFlow),
        entries().prop_map(Annotations::Block),
        entries().prop_map(Annotations::Flow),
    ];
    (
        any::<bool>(),
        any::<bool>(),
        annotations,
        key(),
        "[0-9a-f]{12}(/[1-9][0-9]{0,2})?",
        any::<bool>(),
    )
        .prop_map(
            |(flow_metadata, whole_flow, mut annotations, key, value, has_key)| {
                if let Annotations::Block(e) | Annotations::Flow(e) = &mut annotations
                    && has_key
                {
                    e.push((key.clone(), "0123456789ab/1".to_string()));
                }
                Shape {
                    flow_metadata,
                    whole_flow,
                    annotations,
                    key,
                    value,
                }
            },
        )
}

fn flow_map(entries: &[(String, String)]) -> String {
    let items: Vec<String> = entries
        .iter()
        .map(|(k, v)| format!("{k}: {}", quoted(v)))
        .collect();
    format!("{{{}}}", items.join(", "))
}

/// The document's text: comments around it, metadata as the shape says.
fn document(shape: &Shape) -> String {
    let annotations_flow = match &shape.annotations {
        Annotations::Absent => None,
        Annotations::Null => Some("~".to_string()),
        Annotations::EmptyFlow => Some("{}".to_string()),
        Annotations::Block(e) | Annotations::Flow(e) => Some(flow_map(e)),
    };
    let metadata = match (&shape.annotations, shape.flow_metadata) {
        (_, true) => {
            let extra = annotations_flow.map_or(String::new(), |a| format!(", annotations: {a}"));
            format!("metadata: {{name: web{extra}}}   # flow metadata\n")
        }
        (Annotations::Block(e), false) => {
            let lines: String = e
                .iter()
                .map(|(k, v)| format!("    {k}: {}   # why\n", quoted(v)))
                .collect();
            format!("metadata:\n  name: web\n  annotations:\n{lines}")
        }
        (_, false) => {
            let extra = annotations_flow.map_or(String::new(), |a| format!("  annotations: {a}\n"));
            format!("metadata:\n  name: web\n{extra}")
        }
    };
    let block = format!(
        "# before\napiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\n{metadata}{SPEC}# after\n"
    );
    match shape.whole_flow {
        false => block,
        true => {
            let content: Value = serde_saphyr::from_str(&block).expect("block yaml");
            format!(
                "# before\n{}\n# after\n",
                serde_json::to_string_pretty(&content).expect("json")
            )
        }
    }
}

proptest! {
    #[test]
    fn the_edit_adds_exactly_the_annotation_in_place(shape in shape()) {
        let text = document(&shape);
        let old: Value = serde_saphyr::from_str(&text).expect("the shape parses");
        let edited = set_annotation(&text, "f.yaml", "web", &shape.key, &shape.value)
            .expect("edited");
        let new: Value = serde_saphyr::from_str(&edited.text).expect("the edit parses");
        let expected = with_annotation(&old, &shape.key, &shape.value).expect("metadata");
        prop_assert_eq!(new, expected, "{}\n---\n{}", text, edited.text);
        prop_assert!(!edited.rewritten, "written again:\n{}", text);
        prop_assert!(
            edited.text.starts_with("# before\n") && edited.text.ends_with("# after\n"),
            "{}", edited.text
        );
    }
}

#[test]
fn an_alias_for_metadata_is_written_again_with_the_same_content() {
    let text =
        "# c\napiVersion: v1\nkind: ClusterPromotion\nx: &m {name: web}\nmetadata: *m\nspec: {}\n";
    let old: Value = serde_saphyr::from_str(text).expect("parses");
    let edited = set_annotation(text, "f.yaml", "web", "k", "v").expect("edited");
    let new: Value = serde_saphyr::from_str(&edited.text).expect("the edit parses");
    assert_eq!(new, with_annotation(&old, "k", "v").expect("metadata"));
    assert!(edited.rewritten, "{}", edited.text);
}

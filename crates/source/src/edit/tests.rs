//! The text surgery: documents of a file, the annotation edit, the spec splice.

use super::*;

const DOC: &str = "\
# leading comment
apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata:
  name: app   # the name
  labels:
    team: a
spec:
  stages:
  - name: prod
    clusterSelector:
      matchLabels:
        env: prod
    trigger:
      manual: {}
";

#[test]
fn splits_documents_at_markers_only() {
    let text = "a: 1\n---\nb: 2\n--- # c\nc: |\n  ---x\n";
    let spans = split_documents(text);
    let bodies: Vec<&str> = spans.iter().map(|s| &text[s.body.clone()]).collect();
    assert_eq!(bodies, ["a: 1\n", "b: 2\n", "c: |\n  ---x\n"]);
    assert_eq!(&text[spans[1].range.clone()], "---\nb: 2\n");
    let leading = split_documents("---\na: 1\n");
    assert_eq!(leading.len(), 1);
    assert_eq!(leading[0].body, 4..9);
}

#[test]
fn creates_annotations_under_metadata() {
    let edited = set_annotation(
        DOC,
        "f.yaml",
        "app",
        "approve.tollgate.dev/prod",
        "0123456789ab",
    )
    .expect("edit")
    .text;
    let expected = DOC.replace(
        "metadata:\n",
        "metadata:\n  annotations:\n    approve.tollgate.dev/prod: \"0123456789ab\"\n",
    );
    assert_eq!(edited, expected);
}

#[test]
fn inserts_into_existing_annotations_and_replaces_existing_value() {
    let doc = DOC.replace(
        "  labels:\n",
        "  annotations:\n    note: x # why\n  labels:\n",
    );
    let added = set_annotation(
        &doc,
        "f.yaml",
        "app",
        "approve.tollgate.dev/prod",
        "111111111111",
    )
    .expect("insert")
    .text;
    assert_eq!(
        added,
        doc.replace(
            "    note: x",
            "    approve.tollgate.dev/prod: \"111111111111\"\n    note: x"
        )
    );
    let replaced = set_annotation(
        &added,
        "f.yaml",
        "app",
        "approve.tollgate.dev/prod",
        "222222222222",
    )
    .expect("replace")
    .text;
    assert_eq!(replaced, added.replace("111111111111", "222222222222"));
}

#[test]
fn rewrites_empty_annotations() {
    let doc = DOC.replace("  labels:\n", "  annotations: {}\n  labels:\n");
    let edited = set_annotation(&doc, "f.yaml", "app", "k", "v")
        .expect("edit")
        .text;
    assert!(
        edited.contains("  annotations:\n    k: \"v\"\n  labels:\n"),
        "{edited}"
    );
}

#[test]
fn edits_flow_style_metadata_in_place() {
    let doc = "apiVersion: v1\nkind: ClusterPromotion\nmetadata: {name: app} # c\nspec: {}\n";
    let edited = set_annotation(doc, "f.yaml", "app", "k", "v").expect("flow");
    assert_eq!(
        edited.text,
        doc.replace("{name: app}", "{annotations: {k: \"v\"}, name: app}")
    );
    assert!(!edited.rewritten);
}

#[test]
fn finds_the_named_document() {
    let text = format!("{DOC}---\n{}", DOC.replace("name: app", "name: other"));
    let span = find_promotion_document(&text, "f.yaml", "other").expect("found");
    assert!(text[span.body.clone()].contains("name: other"));
    assert!(matches!(
        find_promotion_document(&text, "f.yaml", "none"),
        Err(EditError::DocumentNotFound { .. })
    ));
    let twice = format!("{DOC}---\n{DOC}");
    assert!(matches!(
        find_promotion_document(&twice, "f.yaml", "app"),
        Err(EditError::DuplicateDocument { .. })
    ));
}

#[test]
fn splices_the_spec_block_and_keeps_everything_else() {
    let head = DOC.replace(
        "  labels:\n",
        "  annotations:\n    tollgate.dev/paused: \"true\"\n  labels:\n",
    ) + "# trailing comment\nstatus: {}\n";
    let old = DOC.replace("env: prod", "env: production") + "# old trailer\n";
    let spliced = splice_spec(&head, &old).expect("splice");
    let expected = head.replace("env: prod\n", "env: production\n");
    assert_eq!(spliced, expected);
    let whole_flow = "{apiVersion: v1, kind: ClusterPromotion, metadata: {name: app}, spec: {}}\n";
    assert_eq!(splice_spec(whole_flow, &old), None);
    assert_eq!(splice_spec(&head, whole_flow), None);
    let flow =
        "apiVersion: v1\nkind: ClusterPromotion\nmetadata:\n  name: app\nspec: {stages: []}\n";
    assert_eq!(
        splice_spec(flow, &old).as_deref(),
        Some(
            "apiVersion: v1\nkind: ClusterPromotion\nmetadata:\n  name: app\nspec:\n  stages:\n  - name: prod\n    clusterSelector:\n      matchLabels:\n        env: production\n    trigger:\n      manual: {}\n"
        )
    );
}

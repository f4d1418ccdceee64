//! Corners of the commands that write to git (issue #45), through the built binary on real
//! repositories: `retry`, `approve` and `rollback` edit a promotion written in flow style (as
//! `validate` accepts it) keeping every other byte of the file; retry branches name the snapshot
//! they retry; a retry of a run that is not halted says which phase the run is really in.

use crate::support;

use std::process::Output;

use serde_json::Value;
use support::{TestRepo, World, fleet_yaml, tollgate_binary};
use tollgate_fixtures::{promotion, stage};

const WEB: &str = "web";

/// `web` in block style: auto `dev` and `staging`, a manual `prod`.
fn web_block(chart: &str) -> String {
    promotion(WEB)
        .chart("web", chart)
        .stage(stage("dev").selector("env", "dev").auto())
        .stage(stage("staging").selector("env", "staging").auto())
        .stage(stage("prod").selector("env", "prod").manual())
        .to_yaml()
}

/// The shapes of `web` the edits must handle, named for the assertion messages; `labelled` adds
/// `labels: {team: web}` to the metadata.
fn shapes(chart: &str, labelled: bool) -> Vec<(&'static str, String)> {
    let block = web_block(chart);
    let spec = &block[block.find("spec:").expect("a spec")..];
    let head = "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\n";
    let (flow_labels, block_labels) = match labelled {
        true => (", labels: {team: web}", "  labels: {team: web}\n"),
        false => ("", ""),
    };
    let flow_metadata = format!("{head}metadata: {{name: web{flow_labels}}}   # flow\n{spec}");
    let flow_annotations = format!(
        "{head}metadata:\n  name: web\n  annotations: {{team: a, 'note': \"x, y\"}}\n{block_labels}{spec}"
    );
    let as_json: Value = serde_saphyr::from_str(&flow_annotations).expect("yaml");
    vec![
        ("flow metadata", flow_metadata),
        ("flow annotations", flow_annotations),
        (
            "whole-document flow",
            serde_json::to_string_pretty(&as_json).expect("json") + "\n",
        ),
    ]
}

/// A file of three documents with `web` in the middle: (text, byte range of web's document).
fn multi_document(web: &str) -> (String, std::ops::Range<usize>) {
    let before = "# the web team's promotions\n---\n".to_string()
        + &promotion("api")
            .chart("api", "1.0.0")
            .stage(stage("dev").selector("env", "dev").auto())
            .to_yaml()
        + "---\n";
    let after = "---\n# keep me\n".to_string()
        + &promotion("docs")
            .chart("docs", "2.0.0")
            .stage(stage("dev").selector("env", "dev").auto())
            .to_yaml();
    let text = format!("{before}{web}{after}");
    (text, before.len()..before.len() + web.len())
}

fn tollgate(repo: &TestRepo, args: &[&str]) -> Output {
    tollgate_binary()
        .args(args)
        .arg("--repo")
        .arg(repo.path())
        .env_remove("KUBECONFIG")
        .output()
        .expect("tollgate runs")
}

fn succeeded(output: &Output) -> bool {
    output.status.success()
}

fn printed(output: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The one branch `tollgate/<prefix>*`, which must exist.
fn only_branch(repo: &TestRepo, prefix: &str) -> String {
    let list = repo.git(&["branch", "--list", &format!("tollgate/{prefix}*")]);
    let branches: Vec<&str> = list
        .lines()
        .map(|l| l.trim_start_matches(['*', ' ']))
        .collect();
    assert_eq!(branches.len(), 1, "{list}");
    branches[0].to_string()
}

/// The file at `rev`, checked against the original: the bytes around web's document are the
/// same; returns web's document as JSON.
fn web_at(repo: &TestRepo, rev: &str, original: &str, web: &std::ops::Range<usize>) -> Value {
    let text = repo.git(&["show", &format!("{rev}:promotions.yaml")]) + "\n";
    assert!(
        text.starts_with(&original[..web.start]),
        "the documents before web are kept:\n{text}"
    );
    assert!(
        text.ends_with(&original[web.end..]),
        "the documents after web are kept:\n{text}"
    );
    let end = text.len() - (original.len() - web.end);
    serde_saphyr::from_str(&text[web.start..end]).expect("web's document parses")
}

/// `document` plus `metadata.annotations[key]` as `edited` holds it (which must be a string).
fn plus_annotation(document: &Value, edited: &Value, key: &str) -> Value {
    let value = edited["metadata"]["annotations"][key].clone();
    assert!(value.is_string(), "{key} is written: {edited}");
    let mut expected = document.clone();
    let metadata = expected["metadata"].as_object_mut().expect("metadata");
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Default::default()));
    annotations
        .as_object_mut()
        .expect("annotations")
        .insert(key.to_string(), value);
    expected
}

#[test]
fn retry_and_approve_edit_a_flow_style_promotion_keeping_the_rest_of_the_file() {
    for (shape, web) in shapes("1.0.0", false) {
        let repo = TestRepo::new();
        let (text, range) = multi_document(&web);
        repo.write("promotions.yaml", &text);
        let head = repo.commit("three promotions");
        let original: Value = serde_saphyr::from_str(&web).expect("web parses");
        let validate = tollgate_binary()
            .args(["validate"])
            .arg(repo.path().join("promotions.yaml"))
            .output()
            .expect("validate runs");
        assert!(succeeded(&validate), "{shape}: {}", printed(&validate));

        let retry = tollgate(&repo, &["retry", WEB, "staging"]);
        assert!(succeeded(&retry), "{shape}: {}", printed(&retry));
        assert!(
            !printed(&retry).contains("written again"),
            "{shape}: edited in place"
        );
        let branch = only_branch(&repo, "retry-");
        let retried = web_at(&repo, &branch, &text, &range);
        let key = "retry.tollgate.dev/staging";
        assert_eq!(
            retried,
            plus_annotation(&original, &retried, key),
            "{shape}"
        );
        assert!(
            retried["metadata"]["annotations"][key]
                .as_str()
                .is_some_and(|v| v.ends_with("/1")),
            "{shape}: {retried}"
        );

        let approve = tollgate(&repo, &["approve", WEB, "prod"]);
        assert!(succeeded(&approve), "{shape}: {}", printed(&approve));
        assert!(
            !printed(&approve).contains("written again"),
            "{shape}: edited in place"
        );
        let branch = only_branch(&repo, "approve-");
        let approved = web_at(&repo, &branch, &text, &range);
        let key = "approve.tollgate.dev/prod";
        assert_eq!(
            approved,
            plus_annotation(&original, &approved, key),
            "{shape}"
        );
        assert_eq!(
            repo.git(&["rev-parse", "HEAD"]),
            head,
            "{shape}: main untouched"
        );
    }
}

#[test]
fn a_flow_style_annotation_already_written_is_replaced_in_place() {
    for (shape, web) in shapes("1.0.0", false) {
        let repo = TestRepo::new();
        let (text, range) = multi_document(&web);
        repo.write("promotions.yaml", &text);
        repo.commit("three promotions");
        let first = tollgate(&repo, &["retry", WEB, "staging", "--commit"]);
        assert!(succeeded(&first), "{shape}: {}", printed(&first));
        let once = repo.git(&["show", "HEAD:promotions.yaml"]) + "\n";
        let second = tollgate(&repo, &["retry", WEB, "staging", "--commit"]);
        assert!(succeeded(&second), "{shape}: {}", printed(&second));
        let web_once = range.start..once.len() - (text.len() - range.end);
        let twice = web_at(&repo, "HEAD", &once, &web_once);
        assert!(
            twice["metadata"]["annotations"]["retry.tollgate.dev/staging"]
                .as_str()
                .is_some_and(|v| v.ends_with("/2")),
            "{shape}: {twice}"
        );
    }
}

#[test]
fn rollback_restores_the_spec_of_a_flow_style_promotion_under_the_tips_metadata() {
    for (shape, web) in shapes("1.0.0", false) {
        let repo = TestRepo::new();
        let (text, _) = multi_document(&web);
        repo.write("promotions.yaml", &text);
        repo.commit("web 1.0.0");
        let v1: Value = serde_saphyr::from_str(&web).expect("v1 parses");
        // 1.1.0, and metadata that changed since: the rollback keeps the tip's.
        let (_, web2) = shapes("1.1.0", true)
            .into_iter()
            .find(|(s, _)| *s == shape)
            .expect("same shape");
        let (text2, range2) = multi_document(&web2);
        repo.write("promotions.yaml", &text2);
        repo.commit("web 1.1.0");
        let v2: Value = serde_saphyr::from_str(&web2).expect("v2 parses");
        assert!(v2["metadata"]["labels"].is_object(), "{shape}: {web2}");

        let rollback = tollgate(&repo, &["rollback", WEB, "--to", "1"]);
        assert!(succeeded(&rollback), "{shape}: {}", printed(&rollback));
        let branch = only_branch(&repo, "rollback-");
        let restored = web_at(&repo, &branch, &text2, &range2);
        let mut expected = v2.clone();
        expected["spec"] = v1["spec"].clone();
        assert_eq!(restored, expected, "{shape}");
    }
}

fn commit_count(repo: &TestRepo) -> String {
    repo.git(&["rev-list", "--count", "--all"])
}

#[test]
fn retries_of_two_snapshots_go_on_two_branches_named_for_their_commits() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web_block("1.0.0"));
    let first_commit = repo.commit("web 1.0.0");
    let first = tollgate(&repo, &["retry", WEB, "staging"]);
    assert!(succeeded(&first), "{}", printed(&first));
    repo.write("web.yaml", &web_block("1.1.0"));
    let second_commit = repo.commit("web 1.1.0");
    let before = commit_count(&repo);
    let second = tollgate(&repo, &["retry", WEB, "staging"]);
    assert!(succeeded(&second), "{}", printed(&second));
    assert_ne!(commit_count(&repo), before, "the second retry committed");
    let list = repo.git(&["branch", "--list", "tollgate/retry-*"]);
    let short = |sha: &str| sha[..7].to_string();
    for (commit, output) in [(&first_commit, &first), (&second_commit, &second)] {
        let branch = format!("tollgate/retry-web-staging-{}-1", short(commit));
        assert!(list.contains(&branch), "{branch} in {list}");
        assert!(printed(output).contains(&branch), "{}", printed(output));
    }
}

async fn retry_condition(world: &World) -> Value {
    world
        .eventually("the retry refused", || async {
            let status = world.status(WEB).await?;
            let retry = status["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Retry")?
                .clone();
            (retry["status"] == "False").then_some(retry)
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_of_a_completed_run_is_refused_naming_the_completed_phase() {
    let repo = TestRepo::new();
    let web = promotion(WEB)
        .chart("web", "1.0.0")
        .stage(stage("dev").selector("env", "dev").auto())
        .stage(stage("staging").selector("env", "staging").auto())
        .to_yaml();
    repo.write("web.yaml", &web);
    repo.commit("web");
    let world = World::start(repo, &fleet_yaml(1, "50ms")).await;
    world.wait_phase(WEB, "Completed").await;

    // With the cluster named, the CLI reads the run's phase and commits nothing.
    let head = world.repo.git(&["rev-parse", "HEAD"]);
    let output = tollgate_binary()
        .args(["retry", WEB, "staging", "--repo"])
        .arg(world.repo.path())
        .arg("--kubeconfig")
        .arg(world.kubeconfig())
        .output()
        .expect("tollgate retry runs");
    let said = printed(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(
        said.contains("Completed") && !said.contains("Progressing"),
        "names the run's real phase: {said}"
    );
    assert!(said.contains("nothing to retry"), "{said}");
    assert_eq!(world.repo.git(&["rev-parse", "HEAD"]), head);
    assert_eq!(world.repo.git(&["branch", "--list", "tollgate/*"]), "");

    // Without the cluster, git alone decides: the annotation is committed, and the controller
    // refuses it naming the phase the run was in, not the one it passes through to look.
    let output = tollgate(&world.repo, &["retry", WEB, "staging", "--commit"]);
    assert!(succeeded(&output), "{}", printed(&output));
    world.poke();
    let refused = retry_condition(&world).await;
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("phase Completed") && !message.contains("Progressing"),
        "{message}"
    );
    assert_eq!(
        world.wait_phase(WEB, "Completed").await["phase"],
        "Completed"
    );
}

//! `tollgate timeline NAME`: the picture of a real rollout on the emulator, read by the real binary
//! from the GitPromotion's status, and parsed as XML: lanes per stage, a bar per activity the
//! engine recorded (waves, pauses, a blackout's hold), snapshot labels that never overlap,
//! rollback markers, superseded runs. Then the unhappy paths: an unknown promotion, one without
//! runs, a malformed `--since`.

use crate::support;

use std::path::Path;

use roxmltree::{Document, Node};
use support::{TestRepo, World, tollgate_binary};
use tollgate_fixtures::{cluster, fleet, policy, promotion, stage};

const WEB: &str = "web";

/// dev soaks for `dev_delay`, staging follows, prod waits for an approval.
fn web(chart: &str, dev_delay: &str, prod_approved: bool) -> String {
    promotion(WEB)
        .chart("web", chart)
        .stage(stage("dev").selector("env", "dev").delay(dev_delay))
        .stage(stage("staging").selector("env", "staging").auto())
        .stage(
            stage("prod")
                .selector("env", "prod")
                .approved(prod_approved),
        )
        .to_yaml()
}

/// One cluster per env; charts 9.9.* fail on staging.
fn fleet_rejecting_9_9() -> String {
    let mut fleet = fleet().default_latency("50ms");
    for env in ["dev", "staging", "prod"] {
        fleet = fleet.cluster(cluster(&format!("{env}-1")).ns("fleet").label("env", env));
    }
    fleet
        .failure(
            "9.9.*",
            &[("env", "staging")],
            "Helm",
            "values: bad replicas",
        )
        .to_yaml()
}

async fn wait_run(world: &World, index: u64, phase: &str) {
    world
        .eventually(&format!("snapshot #{index} {phase}"), || async {
            let status = world.status(WEB).await?;
            (status["snapshotIndex"] == index && status["phase"] == phase).then_some(())
        })
        .await;
}

fn timeline(world: &World, name: &str, extra: &[&str]) -> std::process::Output {
    tollgate_binary()
        .args(["timeline", name, "--kubeconfig"])
        .arg(world.kubeconfig())
        .args(extra)
        .output()
        .expect("tollgate timeline runs")
}

fn classes<'a>(node: &Node<'a, '_>) -> Vec<&'a str> {
    node.attribute("class")
        .map(|c| c.split(' ').collect())
        .unwrap_or_default()
}

fn text<'a>(node: &Node<'a, '_>) -> &'a str {
    node.text().map(str::trim).unwrap_or_default()
}

/// `(stage, kind, snapshot)` of every bar.
fn bars<'a>(doc: &'a Document<'a>) -> Vec<(&'a str, &'a str, &'a str)> {
    doc.descendants()
        .filter(|n| classes(n).contains(&"bar"))
        .map(|n| {
            (
                n.attribute("data-stage").unwrap_or_default(),
                classes(&n)[1],
                n.attribute("data-snapshot").unwrap_or_default(),
            )
        })
        .collect()
}

/// The rollout: #1 superseded while dev soaks, #2 waits for prod's approval and completes, #3
/// fails on staging and is rolled back to #2, #4 reverts #3 (a rollback to #2's content).
async fn four_runs() -> (World, Vec<String>) {
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0", "1h", false));
    repo.write(
        "policy.yaml",
        &policy("fleet-defaults")
            .max_failures("0")
            .on_failure("Rollback")
            .to_yaml(),
    );
    let mut commits = vec![repo.commit("web 1.0.0")];
    let world = World::start(repo, &fleet_rejecting_9_9()).await;
    world
        .eventually("dev provisioned with #1", || async {
            let status = world.status(WEB).await?;
            status.pointer("/stages/0/provisionedAt").map(|_| ())
        })
        .await;
    world.repo.write("web.yaml", &web("1.5.0", "1s", false));
    commits.push(world.repo.commit("web 1.5.0"));
    world.poke();
    world
        .eventually("#2 waiting for prod's approval", || async {
            let status = world.status(WEB).await?;
            (status["snapshotIndex"] == 2)
                .then(|| {
                    status
                        .pointer("/stages/2/awaitingApprovalSince")
                        .map(|_| ())
                })
                .flatten()
        })
        .await;
    // An approval changes no hash: the same run goes on.
    world.repo.write("web.yaml", &web("1.5.0", "1s", true));
    world.repo.commit("approve prod");
    world.poke();
    wait_run(&world, 2, "Completed").await;
    world.repo.write("web.yaml", &web("9.9.1", "1s", true));
    commits.push(world.repo.commit("web 9.9.1"));
    world.poke();
    wait_run(&world, 3, "RolledBack").await;
    commits.push(world.repo.revert_head());
    world.poke();
    world
        .eventually("#4 reached prod", || async {
            let status = world.status(WEB).await?;
            (status["snapshotIndex"] == 4)
                .then(|| status.pointer("/stages/2").map(|_| ()))
                .flatten()
        })
        .await;
    (world, commits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeline_of_a_real_rollout_shows_lanes_bars_labels_and_rollbacks() {
    let (world, commits) = four_runs().await;
    let output = timeline(&world, WEB, &["-o", "svg"]);
    let svg = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let doc = Document::parse(&svg).unwrap_or_else(|e| panic!("invalid SVG: {e}\n{svg}"));

    let lanes: Vec<&str> = doc
        .descendants()
        .filter(|n| classes(n).contains(&"lane"))
        .filter_map(|n| n.attribute("data-stage"))
        .collect();
    assert_eq!(lanes, ["dev", "staging", "prod"]);

    let bars = bars(&doc);
    for expected in [
        ("dev", "provisioning", "1"),
        ("dev", "soak", "1"),
        ("dev", "provisioning", "2"),
        ("prod", "provisioning", "2"),
        ("prod", "approval", "2"),
        ("staging", "provisioning", "3"),
        ("staging", "failed", "3"),
        ("staging", "rollback", "3"),
        ("dev", "rollback", "3"),
        ("prod", "provisioning", "4"),
    ] {
        assert!(bars.contains(&expected), "no {expected:?} in {bars:?}");
    }
    assert!(
        !bars.contains(&("staging", "provisioning", "1")),
        "#1 never left dev: {bars:?}"
    );
    assert!(
        !bars.contains(&("prod", "provisioning", "3")),
        "#3 never reached prod: {bars:?}"
    );
    let restored_to: Vec<&str> = doc
        .descendants()
        .filter(|n| classes(n).contains(&"rollback") && classes(n).contains(&"bar"))
        .filter_map(|n| n.attribute("data-restored-to"))
        .collect();
    assert_eq!(restored_to, ["2", "2"], "dev and staging back on #2");

    // Every run is named on top, and no two texts of the picture overlap.
    let labels: Vec<&str> = doc
        .descendants()
        .filter(|n| classes(n).contains(&"run-label"))
        .map(|n| text(&n))
        .collect();
    for (index, sha) in commits.iter().enumerate() {
        let label = format!("#{} {}", index + 1, &sha[..7]);
        assert!(
            labels.iter().any(|l| l.starts_with(&label)),
            "no {label} in {labels:?}"
        );
    }
    assert_no_text_overlaps(&doc);

    let run = |index: &str| {
        doc.descendants()
            .find(|n| classes(n).contains(&"run") && n.attribute("data-snapshot") == Some(index))
            .unwrap_or_else(|| panic!("no run #{index}"))
    };
    let outcomes: Vec<&str> = ["1", "2", "3"]
        .iter()
        .filter_map(|i| run(i).attribute("data-outcome"))
        .collect();
    assert_eq!(outcomes, ["Superseded", "Completed", "RolledBack"]);
    // #1 was replaced by #2 while dev soaked: faded, hatched, and it says by which run.
    let superseded = run("1");
    assert!(classes(&superseded).contains(&"superseded"));
    assert_eq!(superseded.attribute("data-superseded-by"), Some("2"));
    let superseded_label = format!("#1 {} superseded by #2", &commits[0][..7]);
    assert!(
        superseded
            .descendants()
            .any(|n| text(&n) == superseded_label),
        "no {superseded_label:?}"
    );
    assert!(
        doc.descendants()
            .filter(|n| classes(n).contains(&"bar") && n.attribute("data-snapshot") == Some("1"))
            .all(|n| classes(&n).contains(&"superseded")),
        "every bar of #1 is marked superseded"
    );
    assert!(!classes(&run("2")).contains(&"superseded"));
    let revert = run("4");
    assert!(classes(&revert).contains(&"rollback-run"));
    assert_eq!(revert.attribute("data-rollback-of"), Some("2"));
    assert!(
        revert
            .descendants()
            .any(|n| classes(&n).contains(&"rollback-marker"))
    );
    // The revert runs under the policy's default fast rollback (issue #34): the timeline says so.
    assert_eq!(revert.attribute("data-rollback"), Some("Fast"));
    let revert_label = format!("#4 {} fast rollback to #2", &commits[3][..7]);
    assert!(
        revert.descendants().any(|n| text(&n) == revert_label),
        "no {revert_label:?}"
    );
    assert!(classes(&run("3")).contains(&"rollback-run"));
    assert!(!classes(&run("2")).contains(&"rollback-run"));
    assert!(
        doc.descendants()
            .filter(|n| classes(n).contains(&"tick"))
            .count()
            >= 2
    );

    // The same picture as PNG, at the SVG's size.
    let dir = tempfile::tempdir().expect("temp dir");
    let png = dir.path().join("web.png");
    let output = timeline(
        &world,
        WEB,
        &[
            "-o",
            "png",
            "--output-file",
            png.to_str().unwrap_or_default(),
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let root = doc.root_element();
    let size = |attribute: &str| {
        root.attribute(attribute)
            .and_then(|v| v.parse::<u32>().ok())
    };
    assert_eq!(png_size(&png), (size("width"), size("height")));
}

/// No two texts of the picture overlap: each text's box from its position, anchor and font size,
/// at a generous 0.62 em per character.
fn assert_no_text_overlaps(doc: &Document<'_>) {
    let number = |node: &Node<'_, '_>, name: &str| -> Option<f64> {
        node.attribute(name).and_then(|v| v.parse().ok())
    };
    let boxes: Vec<(&str, [f64; 4])> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| {
            let size = n
                .ancestors()
                .find_map(|a| number(&a, "font-size"))
                .unwrap_or(11.0);
            let width = text(&n).chars().count() as f64 * size * 0.62;
            let (x, y) = (
                number(&n, "x").unwrap_or(0.0),
                number(&n, "y").unwrap_or(0.0),
            );
            let x0 = match n.attribute("text-anchor") {
                Some("end") => x - width,
                Some("middle") => x - width / 2.0,
                _ => x,
            };
            (text(&n), [x0, y - size, x0 + width, y])
        })
        .collect();
    for (i, (a, [ax0, ay0, ax1, ay1])) in boxes.iter().enumerate() {
        for (b, [bx0, by0, bx1, by1]) in &boxes[i + 1..] {
            let apart = ax1 <= bx0 || bx1 <= ax0 || ay1 <= by0 || by1 <= ay0;
            assert!(apart, "{a:?} and {b:?} overlap");
        }
    }
}

/// `prod` of promotion `fleet`: three clusters ordered by label; dev has one.
fn three_prod_clusters() -> String {
    let mut fleet = fleet()
        .default_latency("50ms")
        .cluster(cluster("dev-1").ns("fleet").label("env", "dev"));
    for i in 1..=3 {
        fleet = fleet.cluster(
            cluster(&format!("prod-{i}"))
                .ns("fleet")
                .label("env", "prod")
                .label("order", &i.to_string()),
        );
    }
    fleet.to_yaml()
}

/// dev waits for an approval; prod follows.
fn gated_fleet(dev_approved: bool) -> String {
    promotion("fleet")
        .chart("web", "1.0.0")
        .stage(stage("dev").selector("env", "dev").approved(dev_approved))
        .stage(stage("prod").selector("env", "prod"))
        .to_yaml()
}

/// prod goes out one cluster at a time with a 1s pause; `blackout` adds one in force now.
fn waves_policy(blackout: bool) -> String {
    let mut text = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: waves\nspec:\n  stages:\n    prod:\n      waves:\n        sortingLabelKey: order\n        size: 1\n        pause: 1s\n".to_string();
    if blackout {
        let now = chrono::Utc::now();
        let at =
            |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        text.push_str(&format!(
            "  blackouts:\n  - from: \"{}\"\n    to: \"{}\"\n    reason: change freeze\n",
            at(now - chrono::Duration::hours(1)),
            at(now + chrono::Duration::hours(1))
        ));
    }
    text
}

/// A blackout holds prod's start (dev is approved in the commit that adds it, so the hold is
/// certain), then is lifted; prod goes out in three waves with pauses. The picture shows the
/// held start, each wave and each pause, and no two labels overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waves_pauses_and_a_held_start_are_drawn_from_a_real_rollout() {
    let repo = TestRepo::new();
    repo.write("fleet.yaml", &gated_fleet(false));
    repo.write("policy.yaml", &waves_policy(false));
    repo.commit("fleet 1.0.0, dev gated");
    let world = World::start(repo, &three_prod_clusters()).await;
    world
        .eventually("dev waits for its approval", || async {
            let status = world.status("fleet").await?;
            status
                .pointer("/stages/0/awaitingApprovalSince")
                .map(|_| ())
        })
        .await;
    world.repo.write("fleet.yaml", &gated_fleet(true));
    world.repo.write("policy.yaml", &waves_policy(true));
    world.repo.commit("approve dev during a freeze");
    world.poke();
    world
        .eventually("prod's start held by the freeze", || async {
            let status = world.status("fleet").await?;
            let held = status.pointer("/runs/0/heldStarts/0/stage")?;
            (held == "prod").then_some(())
        })
        .await;
    world.repo.write("policy.yaml", &waves_policy(false));
    world.repo.commit("lift the freeze");
    world.poke();
    world.wait_phase("fleet", "Completed").await;

    let output = timeline(&world, "fleet", &[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let svg = String::from_utf8_lossy(&output.stdout);
    let doc = Document::parse(&svg).unwrap_or_else(|e| panic!("invalid SVG: {e}\n{svg}"));
    let prod: Vec<Node<'_, '_>> = doc
        .descendants()
        .filter(|n| classes(n).contains(&"bar") && n.attribute("data-stage") == Some("prod"))
        .collect();
    let held = prod
        .iter()
        .find(|n| classes(n).contains(&"held-start"))
        .unwrap_or_else(|| panic!("no held start in prod: {svg}"));
    assert!(classes(held).contains(&"blackout"));
    let waves = |kind: &str| -> Vec<&str> {
        prod.iter()
            .filter(|n| classes(n).contains(&kind))
            .filter_map(|n| n.attribute("data-wave"))
            .collect()
    };
    assert_eq!(waves("provisioning"), ["1/3", "2/3", "3/3"], "{svg}");
    assert_eq!(waves("wave-pause"), ["1/3", "2/3"], "{svg}");
    // Each bar starts where the one before it ended (the engine's spans, in order).
    let instants: Vec<(&str, &str)> = prod
        .iter()
        .filter_map(|n| Some((n.attribute("data-start")?, n.attribute("data-end")?)))
        .collect();
    for pair in instants.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "bars out of order: {instants:?}");
    }
    assert_no_text_overlaps(&doc);
}

/// Width and height from a PNG's IHDR chunk, after checking its signature.
fn png_size(path: &Path) -> (Option<u32>, Option<u32>) {
    let bytes = std::fs::read(path).expect("PNG written");
    assert_eq!(bytes.get(..8), Some(&b"\x89PNG\r\n\x1a\n"[..]), "not a PNG");
    assert_eq!(bytes.get(12..16), Some(&b"IHDR"[..]));
    let word = |at: usize| {
        bytes
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_be_bytes)
    };
    (word(16), word(20))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_promotion_fails_and_one_without_runs_gets_an_empty_picture_saying_so() {
    let repo = TestRepo::new();
    // A delay that is no duration: the promotion is never valid, so it never runs.
    let broken = promotion("broken")
        .chart("web", "1.0.0")
        .stage(stage("dev").selector("env", "dev").delay("soon"))
        .to_yaml();
    repo.write("broken.yaml", &broken);
    repo.commit("a promotion that was never valid");
    let world = World::start(repo, &fleet_rejecting_9_9()).await;
    world.wait_phase("broken", "Invalid").await;

    let output = timeline(&world, "nope", &[]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no promotion named \"nope\""), "{stderr}");
    assert!(
        output.stdout.is_empty(),
        "no picture for an unknown promotion"
    );

    let output = timeline(&world, "broken", &["--since", "2h"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let svg = String::from_utf8_lossy(&output.stdout);
    let doc = Document::parse(&svg).unwrap_or_else(|e| panic!("invalid SVG: {e}\n{svg}"));
    let empty: Vec<&str> = doc
        .descendants()
        .filter(|n| classes(n).contains(&"empty"))
        .map(|n| text(&n))
        .collect();
    assert_eq!(empty, ["No runs recorded for broken yet."]);
    assert!(bars(&doc).is_empty());
}

#[test]
fn a_malformed_since_is_a_clear_error() {
    for (since, expected) in [
        ("5x", "unknown unit \"x\""),
        ("soon", "invalid value 'soon' for '--since"),
        ("0s", "the period must be longer than 0s"),
    ] {
        let output = tollgate_binary()
            .args(["timeline", WEB, "--since", since])
            .output()
            .expect("tollgate timeline runs");
        assert_eq!(output.status.code(), Some(2), "--since {since}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "--since {since}: {stderr}");
    }
}

#[test]
fn the_help_names_the_bars_and_the_formats() {
    let output = tollgate_binary()
        .args(["timeline", "--help"])
        .output()
        .expect("tollgate timeline --help runs");
    let help = String::from_utf8_lossy(&output.stdout);
    for expected in [
        "--since",
        "--output-file",
        "svg",
        "png",
        "waiting for a promotion window",
    ] {
        assert!(help.contains(expected), "no {expected:?} in:\n{help}");
    }
}

/// A PNG is bytes, not text: written to a terminal it would garble the screen.
#[test]
fn a_png_is_never_written_to_a_terminal() {
    let binary = assert_cmd::cargo::cargo_bin("tollgate");
    // `script` (util-linux) runs the command on a pseudo-terminal, as a person's shell would.
    let output = std::process::Command::new("script")
        .args(["-qec"])
        .arg(format!("'{}' timeline {WEB} -o png", binary.display()))
        .arg("/dev/null")
        .output()
        .expect("script (util-linux) runs");
    let screen = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{screen}");
    assert!(
        screen.contains("refusing to write a PNG to a terminal: give --output-file FILE"),
        "{screen}"
    );
    assert!(!screen.contains("PNG\r\n"), "PNG bytes on the terminal");
}

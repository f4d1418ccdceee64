//! End to end: a new promotion file that does not parse (a YAML syntax error, an alias bomb) is
//! never silent. It gets a GitPromotion in phase Invalid, named after its readable
//! `metadata.name` or else after the file, with file:line:column in `status.invalidSpec` and a
//! Warning event; other promotions run on. Fixing the file turns it into the real promotion, and
//! a GitPromotion named after the file goes away (never held by the blast-radius guard: nothing
//! was ever applied for it).

use crate::support;

use serde_json::Value;
use support::{TestRepo, World, fleet_yaml, seed, str_at};

const GOOD: &str = "kyverno-rollout-auto";

/// A billion-laughs document; its name is in flow style, so it cannot be read without parsing.
const ALIAS_BOMB: &str = "apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata: {name: core-payment-processor-ci}
spec:
  a0: &a0 [x, x, x, x, x, x, x, x, x]
  a1: &a1 [*a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0]
  a2: &a2 [*a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1]
  a3: &a3 [*a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2]
  a4: &a4 [*a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3]
  a5: &a5 [*a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4]
  a6: &a6 [*a5, *a5, *a5, *a5, *a5, *a5, *a5, *a5, *a5]
  a7: &a7 [*a6, *a6, *a6, *a6, *a6, *a6, *a6, *a6, *a6]
  a8: &a8 [*a7, *a7, *a7, *a7, *a7, *a7, *a7, *a7, *a7]
";

/// Whether `text` names `file` as `file:LINE:COLUMN:`.
fn names_file_line_column(text: &str, file: &str) -> bool {
    text.match_indices(&format!("{file}:")).any(|(at, found)| {
        let mut parts = text[at + found.len()..].splitn(3, ':');
        let number = |part: Option<&str>| {
            part.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        };
        number(parts.next()) && number(parts.next()) && parts.next().is_some()
    })
}

/// The notes of the Warning events `InvalidSpec` created about `promotion`.
fn invalid_spec_events(world: &World, promotion: &str) -> Vec<String> {
    world
        .emulator
        .write_log()
        .iter()
        .filter(|w| w.resource == "events.events.k8s.io" && w.verb == "create")
        .filter(|w| w.object["reason"] == "InvalidSpec" && w.object["type"] == "Warning")
        .filter(|w| w.object["regarding"]["name"] == promotion)
        .filter_map(|w| w.object["note"].as_str().map(str::to_string))
        .collect()
}

/// Waits for `promotion` to be Invalid with an error at `file:line:column`, and its event.
async fn wait_invalid_at(world: &World, promotion: &str, file: &str) -> String {
    let status = world.wait_phase(promotion, "Invalid").await;
    let error = str_at(&status, "/invalidSpec")
        .unwrap_or_else(|| panic!("{promotion} has an invalidSpec: {status}"))
        .to_string();
    assert!(names_file_line_column(&error, file), "{promotion}: {error}");
    assert!(
        world.profiles_of(promotion).await.is_empty(),
        "nothing applied for {promotion}"
    );
    let notes = world
        .eventually(
            &format!("an InvalidSpec Warning event for {promotion}"),
            || async {
                let notes = invalid_spec_events(world, promotion);
                (!notes.is_empty()).then_some(notes)
            },
        )
        .await;
    assert!(
        notes.iter().all(|note| *note == error),
        "{notes:?} vs {error}"
    );
    error
}

async fn assert_good_unaffected(world: &World) {
    let status = world.status(GOOD).await.expect("good promotion status");
    assert_eq!(status["phase"], "Completed", "{status}");
    assert_eq!(status["snapshotIndex"], 1, "{status}");
    assert!(status.get("invalidSpec").is_none(), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_file_that_does_not_parse_gets_an_invalid_promotion_named_after_the_file() {
    let repo = TestRepo::new();
    repo.write("good.yaml", &seed("05-kyverno-rollout-auto-v1.yaml", "1s"));
    repo.commit("A good promotion");
    let world = World::start(repo, &fleet_yaml(1, "100ms")).await;
    world.wait_phase(GOOD, "Completed").await;

    // An unclosed flow sequence where the name is: neither parses nor has a readable name.
    let syntax_fixed = seed("02-test-kyverno-rollout-auto.yaml", "1s");
    let syntax_broken = syntax_fixed.replacen(
        "name: test-kyverno-rollout",
        "name: [test-kyverno-rollout",
        1,
    );
    world.repo.write("apps/syntax.yaml", &syntax_broken);
    world.repo.write("apps/bomb.yaml", ALIAS_BOMB);
    world.repo.commit("Two files that do not parse");
    world.poke();

    let syntax = "invalid-file-apps-syntax-yaml";
    let bomb = "invalid-file-apps-bomb-yaml";
    let syntax_error = wait_invalid_at(&world, syntax, "apps/syntax.yaml").await;
    let bomb_error = wait_invalid_at(&world, bomb, "apps/bomb.yaml").await;
    assert!(bomb_error.contains("alias"), "{bomb_error}");
    assert!(!syntax_error.contains("alias"), "{syntax_error}");
    assert_good_unaffected(&world).await;

    // Fixing both in one commit: the real promotions run, and the file-named ones go away at
    // once (two of the three known promotions, but nothing was ever applied for them).
    world.repo.write("apps/syntax.yaml", &syntax_fixed);
    world.repo.write(
        "apps/bomb.yaml",
        &seed("01-core-payment-processor-ci.yaml", "1s"),
    );
    world.repo.commit("Fix both");
    world.poke();
    for name in [syntax, bomb] {
        world
            .eventually(&format!("{name} is removed"), || async {
                world.git_promotion(name).await.is_none().then_some(())
            })
            .await;
    }
    for real in ["test-kyverno-rollout", "core-payment-processor-ci"] {
        let status = world.wait_phase(real, "Completed").await;
        assert!(status.get("invalidSpec").is_none(), "{real}: {status}");
    }
    assert_good_unaffected(&world).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_file_that_does_not_parse_is_invalid_under_its_readable_name_until_fixed() {
    let repo = TestRepo::new();
    repo.write("good.yaml", &seed("05-kyverno-rollout-auto-v1.yaml", "1s"));
    repo.commit("A good promotion");
    let world = World::start(repo, &fleet_yaml(1, "100ms")).await;
    world.wait_phase(GOOD, "Completed").await;

    let fixed = seed("02-test-kyverno-rollout-auto.yaml", "1s");
    let broken = fixed.replacen("  stages:", "  stages: x: y", 1);
    assert_ne!(broken, fixed);
    world.repo.write("test.yaml", &broken);
    world.repo.commit("A promotion with a YAML syntax error");
    world.poke();
    let name = "test-kyverno-rollout";
    let error = wait_invalid_at(&world, name, "test.yaml").await;
    assert!(error.contains("mapping values"), "{error}");
    let uid = world
        .git_promotion(name)
        .await
        .and_then(|o| o.metadata.uid)
        .expect("uid");
    assert_good_unaffected(&world).await;

    world.repo.write("test.yaml", &fixed);
    world.repo.commit("Fix the syntax");
    world.poke();
    let status = world.wait_phase(name, "Completed").await;
    assert!(status.get("invalidSpec").is_none(), "{status}");
    let same = world.git_promotion(name).await.and_then(|o| o.metadata.uid);
    assert_eq!(same.as_deref(), Some(uid.as_str()), "the same GitPromotion");
    let status: Value = world.status(GOOD).await.expect("good");
    assert_eq!(status["phase"], "Completed");
}

/// After a restart the controller knows the file-named promotion only from its GitPromotion: it
/// records no run and owns no profiles, so removing it is not held either, although it is every
/// promotion the controller knew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_never_valid_promotion_fixed_while_the_controller_is_down_is_removed_at_start() {
    let repo = TestRepo::new();
    let fixed = seed("02-test-kyverno-rollout-auto.yaml", "1s");
    repo.write(
        "only.yaml",
        &fixed.replacen(
            "name: test-kyverno-rollout",
            "name: [test-kyverno-rollout",
            1,
        ),
    );
    repo.commit("The only promotion does not parse");
    let mut world = World::start(repo, &fleet_yaml(1, "100ms")).await;
    let synthetic = "invalid-file-only-yaml";
    wait_invalid_at(&world, synthetic, "only.yaml").await;

    world.stop_controller().await;
    world.repo.write("only.yaml", &fixed);
    world.repo.commit("Fix it");
    world.start_controller().await;
    world
        .eventually(&format!("{synthetic} is removed"), || async {
            world.git_promotion(synthetic).await.is_none().then_some(())
        })
        .await;
    world.wait_phase("test-kyverno-rollout", "Completed").await;
}

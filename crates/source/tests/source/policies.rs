//! RolloutPolicies at the branch head, read from real repositories built with the git CLI.

use crate::common;

use common::{Manifest, SourceRepo, TestRepo};
use tollgate_source::{GitSource, PolicySet, PromotionView};

fn policy(name: &str, selector: &str, deadline: &str) -> String {
    format!(
        "apiVersion: tollgate.dev/v1alpha1
kind: RolloutPolicy
metadata:
  name: {name}
spec:
  selector: {selector}
  progressDeadline: {deadline}
  maxFailures: \"10%\"
  onFailure: Rollback
"
    )
}

/// `(name, file, progressDeadline in seconds)` of every policy in force.
fn in_force(set: &PolicySet) -> Vec<(String, String, u64)> {
    set.policies()
        .map(|(policy, file)| {
            let deadline = policy.spec.progress_deadline.as_ref();
            let seconds = deadline.map_or(0, |d| d.value.as_secs());
            (policy.name().to_string(), file.to_string(), seconds)
        })
        .collect()
}

fn sync_policies(source: &mut GitSource) -> (bool, PolicySet) {
    let report = source.sync().expect("sync");
    (report.policies_changed, source.policies())
}

fn app_promotion(source: &GitSource) -> tollgate_manifest::ClusterPromotion {
    match source.promotion("app") {
        Some(PromotionView::Valid { snapshot }) => (*snapshot.promotion).clone(),
        other => panic!("app should be valid, got {other:?}"),
    }
}

#[test]
fn a_policy_added_changed_broken_fixed_and_removed_across_commits() {
    let repo = TestRepo::with_fixed_identity();
    repo.write("app.yaml", &Manifest::new("app", "1.0.0").yaml());
    repo.commit("app");
    let mut source = repo.source();
    let (changed, set) = sync_policies(&mut source);
    assert!(!changed && set.is_empty(), "no policy: nothing changes");

    repo.write("policies/fleet.yaml", &policy("fleet", "{}", "10m"));
    repo.commit("add policy");
    let (changed, set) = sync_policies(&mut source);
    assert!(changed);
    assert_eq!(
        in_force(&set),
        [("fleet".into(), "policies/fleet.yaml".into(), 600)]
    );
    let chosen = set
        .choose(&app_promotion(&source), "app.yaml")
        .expect("no conflict");
    assert_eq!(chosen.map(|p| p.name().to_string()), Some("fleet".into()));

    repo.write("app.yaml", &Manifest::new("app", "1.1.0").yaml());
    repo.commit("bump app only");
    let (changed, _) = sync_policies(&mut source);
    assert!(!changed, "a promotion change is not a policy change");

    repo.write("policies/fleet.yaml", &policy("fleet", "{}", "30m"));
    repo.commit("longer deadline");
    let (changed, set) = sync_policies(&mut source);
    assert!(changed);
    assert_eq!(in_force(&set)[0].2, 1800);

    // A typo keeps the last valid version in force, with the error reported where it is.
    repo.write("policies/fleet.yaml", &policy("fleet", "{}", "30 minutes"));
    repo.commit("typo");
    let (changed, set) = sync_policies(&mut source);
    assert!(changed, "an error is a change");
    assert_eq!(in_force(&set)[0].2, 1800, "last valid version kept");
    let error = set.errors().first().expect("an error").to_string();
    assert!(
        error.starts_with("policies/fleet.yaml:7:21: spec.progressDeadline: "),
        "{error}"
    );

    repo.write("policies/fleet.yaml", &policy("fleet", "{}", "5m"));
    repo.commit("fixed");
    let (changed, set) = sync_policies(&mut source);
    assert!(changed && set.errors().is_empty());
    assert_eq!(in_force(&set)[0].2, 300);

    repo.remove("policies/fleet.yaml");
    repo.commit("remove policy");
    let (changed, set) = sync_policies(&mut source);
    assert!(changed && set.is_empty());
    assert_eq!(set.choose(&app_promotion(&source), "app.yaml"), Ok(None));
}

#[test]
fn a_policy_file_that_stops_parsing_keeps_its_policy_and_claims_no_promotion() {
    let repo = TestRepo::with_fixed_identity();
    repo.write("fleet.yaml", &policy("fleet", "{}", "10m"));
    repo.commit("policy");
    let mut source = repo.source();
    source.sync().expect("sync");

    repo.write("fleet.yaml", "apiVersion: tollgate.dev/v1alpha1\nkind: [\n");
    repo.commit("broken YAML");
    let (changed, set) = sync_policies(&mut source);
    assert!(changed);
    assert_eq!(in_force(&set), [("fleet".into(), "fleet.yaml".into(), 600)]);
    assert_eq!(set.errors()[0].code, "yaml-syntax");
    assert_eq!(
        source.promotions().count(),
        0,
        "the policy file's errors are the policy's, not an invalid-file promotion"
    );

    repo.write("fleet.yaml", &policy("fleet", "{}", "1m"));
    repo.commit("fixed");
    let (_, set) = sync_policies(&mut source);
    assert!(set.errors().is_empty());
    assert_eq!(in_force(&set)[0].2, 60);
}

#[test]
fn one_policy_name_in_two_files_is_an_error_naming_both_files() {
    let repo = TestRepo::with_fixed_identity();
    repo.write("a.yaml", &policy("fleet", "{}", "10m"));
    repo.commit("first definition");
    let mut source = repo.source();
    source.sync().expect("sync");

    repo.write("b.yaml", &policy("fleet", "{}", "1m"));
    repo.commit("second definition");
    let (changed, set) = sync_policies(&mut source);
    assert!(changed);
    assert_eq!(
        in_force(&set),
        [("fleet".into(), "a.yaml".into(), 600)],
        "last valid kept"
    );
    let errors: Vec<String> = set.errors().iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    for (error, file) in errors.iter().zip(["a.yaml", "b.yaml"]) {
        assert!(
            error.starts_with(&format!("{file}:1:1: metadata.name: ")),
            "{error}"
        );
        assert!(error.contains("a.yaml:1, b.yaml:1"), "{error}");
    }

    repo.remove("a.yaml");
    repo.commit("one left");
    let (_, set) = sync_policies(&mut source);
    assert!(set.errors().is_empty());
    assert_eq!(in_force(&set), [("fleet".into(), "b.yaml".into(), 60)]);
}

#[test]
fn two_selecting_policies_conflict_by_file_and_the_annotation_resolves_it() {
    let repo = TestRepo::with_fixed_identity();
    repo.write("policies/a.yaml", &policy("a", "{}", "10m"));
    repo.write(
        "policies/b.yaml",
        &policy(
            "b",
            "{matchExpressions: [{key: tier, operator: DoesNotExist}]}",
            "1m",
        ),
    );
    repo.write("app.yaml", &Manifest::new("app", "1.0.0").yaml());
    repo.commit("two policies select app");
    let mut source = repo.source();
    let (_, set) = sync_policies(&mut source);
    let conflict = set
        .choose(&app_promotion(&source), "app.yaml")
        .expect_err("conflict")
        .message;
    assert!(
        conflict.starts_with(
            "RolloutPolicies \"a\" (policies/a.yaml:6) and \"b\" (policies/b.yaml:6) both select this promotion (app.yaml): "
        ),
        "{conflict}"
    );

    let named = Manifest::new("app", "1.0.0").annotation("tollgate.dev/policy", "b");
    repo.write("app.yaml", &named.yaml());
    repo.commit("name b");
    let (_, set) = sync_policies(&mut source);
    let chosen = set
        .choose(&app_promotion(&source), "app.yaml")
        .expect("annotation wins");
    assert_eq!(chosen.map(|p| p.name().to_string()), Some("b".into()));

    let missing = Manifest::new("app", "1.0.0").annotation("tollgate.dev/policy", "c");
    repo.write("app.yaml", &missing.yaml());
    repo.commit("name c");
    let (_, set) = sync_policies(&mut source);
    let error = set
        .choose(&app_promotion(&source), "app.yaml")
        .expect_err("missing")
        .message;
    assert!(
        error.contains("app.yaml: annotation tollgate.dev/policy names RolloutPolicy \"c\", which no file defines: add it, or correct the annotation"),
        "{error}"
    );
}

#[test]
fn a_new_policy_file_that_does_not_parse_reports_with_the_policies() {
    let repo = TestRepo::with_fixed_identity();
    repo.write("app.yaml", &Manifest::new("app", "1.0.0").yaml());
    repo.write(
        "policies/new.yaml",
        "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: new\nspec: [\n",
    );
    repo.commit("a broken policy");
    let mut source = repo.source();
    let (changed, set) = sync_policies(&mut source);
    assert!(changed, "an error is a change");
    assert_eq!(set.policies().count(), 0);
    let error = set.errors().first().expect("an error");
    assert_eq!(
        (error.code, error.file.as_str()),
        ("yaml-syntax", "policies/new.yaml")
    );
    let names: Vec<&str> = source.promotions().map(|(name, _)| name).collect();
    assert_eq!(
        names,
        ["app"],
        "no invalid-file promotion for a policy file"
    );
}

#[test]
fn a_policy_change_beside_a_promotion_is_no_new_snapshot() {
    let repo = TestRepo::with_fixed_identity();
    let app = Manifest::new("app", "1.0.0").yaml();
    repo.write(
        "app.yaml",
        &format!("{app}---\n{}", policy("app", "{}", "10m")),
    );
    repo.commit("promotion and its policy in one file");
    let mut source = repo.source();
    source.sync().expect("sync");

    repo.write(
        "app.yaml",
        &format!("{app}---\n{}", policy("app", "{}", "20m")),
    );
    repo.commit("longer deadline");
    let report = source.sync().expect("sync");
    assert!(report.policies_changed);
    assert_eq!(
        report.changes.get("app"),
        Some(&tollgate_source::Change::Unchanged)
    );
    assert_eq!(source.history("app").len(), 1, "not a restart");
    assert_eq!(in_force(&source.policies())[0].2, 1200);
}

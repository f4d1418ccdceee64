//! Every seed manifest users have validates without errors, with exactly the expected warnings.

use std::path::PathBuf;

use tollgate_manifest::{Limits, Severity, parse_file};

fn seeds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/seeds")
}

fn seed_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(seeds_dir())
        .expect("seeds directory")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        // The fleet inventory beside the seeds is not a manifest.
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()))
        })
        .collect();
    files.sort();
    files
}

#[test]
fn every_seed_validates() {
    let files = seed_files();
    assert!(files.len() >= 8, "expected the seeds, found {files:?}");
    for path in files {
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        let bytes = std::fs::read(&path).expect("read seed");
        let parsed = parse_file(&name, &bytes, &Limits::default());
        let diagnostics = parsed.all_diagnostics();
        let errors: Vec<_> = diagnostics.iter().filter(|d| d.is_error()).collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
        assert!(!parsed.promotions.is_empty(), "{name}: no promotion found");
        for promotion in &parsed.promotions {
            assert!(promotion.promotion.is_some(), "{name}: {promotion:?}");
        }
        let warnings: Vec<&str> = diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .map(|d| d.code)
            .collect();
        let expected: &[&str] = if name.starts_with("04-") {
            &["lua-never-sets-healthy"]
        } else {
            &[]
        };
        assert_eq!(warnings, expected, "{name}: {diagnostics:#?}");
    }
}

#[test]
fn seed_04_config_map_is_ignored_and_warning_points_into_the_script() {
    let bytes =
        std::fs::read(seeds_dir().join("04-cert-manager-rollout-auto.yaml")).expect("seed 04");
    let parsed = parse_file("04.yaml", &bytes, &Limits::default());
    assert_eq!(parsed.ignored.len(), 1);
    assert_eq!(parsed.ignored[0].kind.as_deref(), Some("ConfigMap"));
    let warning = &parsed.promotions[0].diagnostics[0];
    assert_eq!(
        warning.path,
        "spec.stages[0].trigger.auto.postDelayHealthChecks[0].script"
    );
    assert_eq!((warning.line, warning.column), (60, 13));
}

fn valid_fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/valid")
            .join(name),
    )
    .expect("valid fixture")
}

#[test]
fn every_valid_fixture_validates_without_warnings() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/valid");
    let mut count = 0;
    for entry in std::fs::read_dir(dir).expect("fixtures/valid") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        let parsed = parse_file(
            &name,
            &std::fs::read(&path).expect("read"),
            &Limits::default(),
        );
        assert_eq!(parsed.all_diagnostics(), vec![], "{name}");
        assert!(
            parsed.promotions.iter().all(|p| p.promotion.is_some()),
            "{name}"
        );
        count += 1;
    }
    assert!(count >= 5);
}

#[test]
fn other_kinds_and_empty_documents_are_ignored() {
    let parsed = parse_file(
        "multi.yaml",
        &valid_fixture("01-multi-document-other-kinds.yaml"),
        &Limits::default(),
    );
    let names: Vec<Option<&str>> = parsed
        .promotions
        .iter()
        .map(|p| p.name.as_deref())
        .collect();
    assert_eq!(names, vec![Some("first"), Some("second")]);
    let ignored: Vec<(usize, Option<&str>)> = parsed
        .ignored
        .iter()
        .map(|d| (d.line as usize, d.kind.as_deref()))
        .collect();
    assert_eq!(
        ignored,
        vec![(3, Some("ConfigMap")), (24, Some("ClusterProfile"))]
    );
}

#[test]
fn defaults_are_applied_and_unknown_profile_fields_preserved() {
    let parsed = parse_file(
        "flow.yaml",
        &valid_fixture("05-flow-style.yaml"),
        &Limits::default(),
    );
    let promotion = parsed.promotions[0].promotion.as_ref().expect("valid");
    let profile = &promotion.spec.profile_spec;
    assert_eq!(profile.sync_mode(), "Continuous");
    assert_eq!(profile.tier(), 100);
    assert_eq!(profile.get("maxUpdate"), Some(serde_json::json!(3)));
    assert_eq!(
        profile.get("stopMatchingBehavior"),
        Some(serde_json::json!("WithdrawPolicies"))
    );
    // The policy ref gets its own defaults (deploymentType) as the API server would.
    assert_eq!(
        profile.policy_refs()[0].get("deploymentType"),
        Some(&serde_json::json!("Remote"))
    );
}

#[test]
fn warnings_for_empty_selectors_and_consumed_approvals() {
    let yaml = br#"
apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata:
  name: warn
spec:
  stages:
  - name: nothing
    clusterSelector: {}
    trigger:
      manual:
        approved: true
"#;
    let parsed = parse_file("warn.yaml", yaml, &Limits::default());
    let diagnostics = &parsed.promotions[0].diagnostics;
    let codes: Vec<(&str, u32, u32)> = diagnostics
        .iter()
        .map(|d| (d.code, d.line, d.column))
        .collect();
    assert_eq!(
        codes,
        vec![
            ("empty-cluster-selector", 9, 5),
            ("approval-consumed-by-one-run", 12, 19)
        ]
    );
    assert!(diagnostics[1].message.contains("tollgate approve"));
    assert!(
        parsed.promotions[0].promotion.is_some(),
        "warnings keep the promotion valid"
    );
}

//! Rendered profiles for the seed manifests users already have: insta snapshots, validation
//! against the real ClusterProfile CRD schema, and "parse → render loses no profileSpec field".

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tollgate_manifest::hash::SpecHashes;
use tollgate_manifest::model::ClusterPromotion;
use tollgate_manifest::parse::{Limits, parse_file};
use tollgate_manifest::snapshot::{CommitInfo, Snapshot};
use tollgate_render::{render_preverification_profile, render_stage_profile};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures")
}

/// Every ClusterPromotion of every seed file, parsed by the spec crate's full parser (which
/// applies CRD defaults), with the raw document it came from.
fn seeds() -> Vec<(String, Value, ClusterPromotion)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures().join("seeds"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let parsed = parse_file(&name, text.as_bytes(), &Limits::default());
        let raw_docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        for parsed in parsed.promotions {
            let promotion = parsed
                .promotion
                .unwrap_or_else(|| panic!("{name}: {:?}", parsed.diagnostics));
            let raw = raw_docs
                .iter()
                .find(|d| {
                    d["kind"] == "ClusterPromotion" && d["metadata"]["name"] == promotion.name()
                })
                .unwrap()
                .clone();
            let stem = file.file_stem().unwrap().to_string_lossy().to_string();
            out.push((stem, raw, promotion));
        }
    }
    assert!(
        out.len() >= 8,
        "expected the seed promotions, found {}",
        out.len()
    );
    out
}

fn snapshot_of(promotion: ClusterPromotion) -> Snapshot {
    let time: DateTime<Utc> = DateTime::parse_from_rfc3339("2025-10-07T10:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    Snapshot {
        index: 3,
        hashes: std::sync::Arc::new(SpecHashes::of(&promotion)),
        commit: CommitInfo {
            sha: "0123456789abcdef0123456789abcdef01234567".to_string(),
            seq: 7,
            author: "Ada".to_string(),
            author_email: "ada@example.com".to_string(),
            committer: "Ada".to_string(),
            committer_email: "ada@example.com".to_string(),
            time,
            committed: time,
            subject: "roll out".to_string(),
            signature: None,
        }
        .into(),
        same_content_as: None,
        promotion: Arc::new(promotion),
        file: "promotions.yaml".to_string(),
        contributors: std::sync::Arc::from([]),
    }
}

/// Every profile the seeds can produce: each stage's main profile (with its post-delay checks
/// appended, as after its delay) and, where configured, its pre-verification profile.
fn rendered() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (file, _, promotion) in seeds() {
        let snapshot = snapshot_of(promotion);
        for stage in &snapshot.promotion.spec.stages {
            let name = format!("{file}__{}", stage.name);
            out.push((name.clone(), render_stage_profile(&snapshot, stage, &[])));
            if let Some(trigger) = &stage.trigger {
                let checks = trigger.post_delay_health_checks();
                if !checks.is_empty() {
                    out.push((
                        format!("{name}__post_delay"),
                        render_stage_profile(&snapshot, stage, checks),
                    ));
                }
                if !trigger.pre_health_check_deployment().is_empty() {
                    out.push((
                        format!("{name}__preverification"),
                        render_preverification_profile(&snapshot, stage),
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn rendered_seed_profiles() {
    for (name, object) in rendered() {
        insta::assert_json_snapshot!(name, object);
    }
}

#[test]
fn every_rendered_profile_validates_against_the_cluster_profile_crd() {
    let crd_text = std::fs::read_to_string(
        fixtures().join("crds/config.projectsveltos.io_clusterprofiles.yaml"),
    )
    .unwrap();
    let crd: Value = serde_saphyr::from_str(&crd_text).unwrap();
    let version = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "v1beta1")
        .unwrap();
    let schema = version["schema"]["openAPIV3Schema"].clone();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut all = rendered();
    // Also a pre-verification profile, which no seed configures.
    let (_, _, promotion) = seeds().remove(1);
    let mut promotion = promotion;
    if let Some(tollgate_manifest::model::Trigger::Auto(auto)) =
        &mut promotion.spec.stages[0].trigger
    {
        auto.pre_health_check_deployment =
            vec![json!({"kind": "ConfigMap", "namespace": "default", "name": "validation-job"})];
    }
    let snapshot = snapshot_of(promotion);
    all.push((
        "synthetic preverification".to_string(),
        render_preverification_profile(&snapshot, &snapshot.promotion.spec.stages[0]),
    ));
    for (name, object) in &all {
        let errors: Vec<String> = validator
            .iter_errors(object)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
    }
    // The schema is really enforced: a wrong type is rejected.
    let mut broken = all[0].1.clone();
    broken["spec"]["tier"] = json!("high");
    assert!(!validator.is_valid(&broken));
}

#[test]
fn parse_then_render_loses_no_profile_spec_field() {
    for (file, doc, promotion) in seeds() {
        let raw = doc["spec"]["profileSpec"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let snapshot = snapshot_of(promotion);
        for stage in &snapshot.promotion.spec.stages {
            let object = render_stage_profile(&snapshot, stage, &[]);
            let spec = object["spec"].as_object().unwrap();
            for (field, value) in &raw {
                let rendered = spec.get(field);
                assert!(
                    rendered.is_some_and(|r| keeps(value, r)),
                    "{file}: {field} lost or changed: {value} became {rendered:?}"
                );
            }
            assert_eq!(
                spec["clusterSelector"],
                doc["spec"]["stages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|s| s["name"] == stage.name.as_str())
                    .unwrap()["clusterSelector"]
            );
            // Exactly the parsed profileSpec (with its CRD defaults) and the selector.
            let mut expected = snapshot.promotion.spec.profile_spec.to_map();
            expected.insert(
                "clusterSelector".to_string(),
                spec["clusterSelector"].clone(),
            );
            assert_eq!(
                spec, &expected,
                "{file}: rendered spec is not profileSpec + selector"
            );
        }
    }
}

/// Whether `rendered` keeps everything written in `written` (CRD defaults may add fields to
/// objects; nothing written may be dropped or changed, and list order is kept).
fn keeps(written: &Value, rendered: &Value) -> bool {
    match (written, rendered) {
        (Value::Object(w), Value::Object(r)) => w
            .iter()
            .all(|(k, v)| r.get(k).is_some_and(|rv| keeps(v, rv))),
        (Value::Array(w), Value::Array(r)) => {
            w.len() == r.len() && w.iter().zip(r).all(|(a, b)| keeps(a, b))
        }
        _ => written == rendered,
    }
}

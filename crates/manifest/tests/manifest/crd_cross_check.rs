//! Cross-check with the real CRD schema: every fixture the plain JSON-Schema part of
//! `openAPIV3Schema` can judge gets the same accept/reject verdict from tollgate, except the
//! deliberate differences listed below (tollgate is stricter, never looser).

use std::path::{Path, PathBuf};

use serde_json::Value;
use tollgate_manifest::{Limits, parse_file};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn shared_crd(name: &str) -> PathBuf {
    manifest_dir()
        .join("../../../shared/fixtures/crds")
        .join(name)
}

const PROMOTION_CRD: &str = "config.projectsveltos.io_clusterpromotions.yaml";
const PROFILE_CRD: &str = "config.projectsveltos.io_clusterprofiles.yaml";

/// Why tollgate rejects what the JSON-Schema validator accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Difference {
    /// `x-kubernetes-validations` (CEL) rules, which a JSON-Schema validator ignores.
    CelRule,
    /// Unknown fields are rejected like `kubectl apply --validate=strict`; JSON Schema without
    /// `additionalProperties: false` allows them.
    StrictUnknownFields,
    /// `x-kubernetes-list-type: map` key uniqueness (duplicate stage names).
    ListMapKeys,
    /// tollgate's own rules: names, durations, windows, selectors, Lua, CEL, annotations,
    /// metadata (the CRD says only `type: object`), the served apiVersion.
    TollgateRule,
}

const DELIBERATE_DIFFERENCES: &[(&str, &[Difference])] = {
    use Difference::*;
    &[
        (
            "08-unknown-trigger-key.yaml",
            &[StrictUnknownFields, CelRule],
        ),
        ("09-empty-trigger.yaml", &[CelRule]),
        ("10-auto-and-manual.yaml", &[CelRule]),
        ("12-duplicate-stage-names.yaml", &[ListMapKeys]),
        ("16-bad-cron.yaml", &[TollgateRule]),
        ("17-never-firing-cron.yaml", &[TollgateRule]),
        ("18-bad-time-zone.yaml", &[TollgateRule]),
        ("19-cron-six-fields.yaml", &[TollgateRule]),
        ("20-every-in-words.yaml", &[TollgateRule]),
        ("21-delay-in-words.yaml", &[TollgateRule]),
        ("22-delay-without-unit.yaml", &[TollgateRule]),
        ("24-delay-in-days.yaml", &[TollgateRule]),
        ("25-bad-lua.yaml", &[TollgateRule]),
        ("26-cel-uses-self.yaml", &[TollgateRule]),
        ("27-job-check-with-script.yaml", &[CelRule]),
        ("29-generated-name-too-long.yaml", &[TollgateRule]),
        ("30-uppercase-stage-name.yaml", &[TollgateRule]),
        ("31-invalid-promotion-name.yaml", &[TollgateRule]),
        ("32-missing-metadata-name.yaml", &[TollgateRule]),
        ("33-bad-selector-operator.yaml", &[TollgateRule]),
        ("34-bad-selector-key.yaml", &[TollgateRule]),
        ("35-bad-selector-value.yaml", &[TollgateRule]),
        ("36-in-without-values.yaml", &[TollgateRule]),
        ("37-exists-with-values.yaml", &[TollgateRule]),
        ("39-helm-http-without-chart-version.yaml", &[CelRule]),
        (
            "40-helm-chart-version-typo.yaml",
            &[StrictUnknownFields, CelRule],
        ),
        ("41-remote-url-and-kind.yaml", &[CelRule]),
        ("42-bad-paused-annotation.yaml", &[TollgateRule]),
        ("45-unsupported-api-version.yaml", &[TollgateRule]),
        ("46-label-value-not-string.yaml", &[TollgateRule]),
        ("51-second-promotion-bad.yaml", &[TollgateRule]),
        ("52-preverification-name-too-long.yaml", &[TollgateRule]),
    ]
};

fn open_api_schema() -> Value {
    let text = std::fs::read_to_string(shared_crd(PROMOTION_CRD)).expect("shared CRD");
    let crd: Value = serde_saphyr::from_str(&text).expect("CRD YAML");
    crd.pointer("/spec/versions/0/schema/openAPIV3Schema")
        .cloned()
        .expect("openAPIV3Schema")
}

/// The ClusterPromotion documents of a file, as the JSON an API server would receive.
fn promotion_documents(bytes: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(bytes).expect("UTF-8 fixture");
    let documents: Vec<Value> = serde_saphyr::from_multiple(text).expect("YAML fixture");
    documents
        .into_iter()
        .filter(|d| d.get("kind").and_then(Value::as_str) == Some("ClusterPromotion"))
        .collect()
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("fixture directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()))
        })
        .collect();
    files.sort();
    files
}

fn header_verdict(bytes: &[u8]) -> Option<bool> {
    let text = String::from_utf8_lossy(bytes);
    text.lines()
        .take_while(|l| l.starts_with('#'))
        .find_map(|l| l.strip_prefix("# crd-schema: "))
        .map(|v| match v.trim() {
            "accept" => true,
            "reject" => false,
            other => panic!("bad crd-schema verdict {other:?}"),
        })
}

#[test]
fn tollgate_and_the_crd_schema_agree_except_for_listed_differences() {
    let schema = open_api_schema();
    let validator = jsonschema::draft4::new(&schema).expect("openAPIV3Schema compiles");
    let fixtures = manifest_dir().join("../../fixtures");
    let mut judged = 0;
    let mut failures = Vec::new();
    let groups = [
        (fixtures.join("invalid"), true),
        (fixtures.join("valid"), false),
        (manifest_dir().join("../../../shared/fixtures/seeds"), false),
    ];
    for (dir, header_required) in groups {
        for path in yaml_files(&dir) {
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .to_string();
            let bytes = std::fs::read(&path).expect("read");
            let declared = header_verdict(&bytes);
            if header_required && declared.is_none() {
                // Rejected by the YAML layer (syntax, limits) before any schema could look at it.
                continue;
            }
            judged += 1;
            let schema_accepts = promotion_documents(&bytes)
                .iter()
                .all(|d| validator.is_valid(d));
            let tollgate_accepts = !parse_file(&name, &bytes, &Limits::default()).has_errors();
            if let Some(declared) = declared
                && declared != schema_accepts
            {
                failures.push(format!(
                    "{name}: header says crd-schema {declared}, the schema says {schema_accepts}"
                ));
            }
            let listed = DELIBERATE_DIFFERENCES.iter().any(|(n, _)| *n == name);
            match (schema_accepts, tollgate_accepts) {
                (false, true) => failures.push(format!("{name}: schema rejects, tollgate accepts")),
                (true, false) if !listed => failures.push(format!(
                    "{name}: tollgate rejects what the schema accepts, and it is not a listed difference"
                )),
                (true, true) | (false, false) if listed => failures.push(format!(
                    "{name}: listed as a difference, but both say {tollgate_accepts}"
                )),
                _ => {}
            }
        }
    }
    assert!(judged >= 50, "only {judged} fixtures judged");
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn vendored_crds_equal_the_shared_copies() {
    for name in [PROMOTION_CRD, PROFILE_CRD] {
        let shared = std::fs::read(shared_crd(name)).expect("shared CRD");
        let vendored = std::fs::read(manifest_dir().join("crds").join(name)).expect("vendored CRD");
        assert!(
            shared == vendored,
            "crates/manifest/crds/{name} differs from the shared copy"
        );
    }
}

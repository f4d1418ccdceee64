//! The canonical hashes of every seed, pinned: a change to parsing, defaulting or the hash scheme
//! that moves any of them would restart every running pipeline on upgrade (docs/architecture.md#d5-order-is-content).
//! Plus what must and must not change a hash.

use std::path::PathBuf;

use tollgate_manifest::{ClusterPromotion, Limits, SpecHashes, parse_file};

fn seed(name: &str) -> Vec<u8> {
    std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/fixtures/seeds")
            .join(name),
    )
    .expect("seed")
}

fn promotions(yaml: &[u8]) -> Vec<ClusterPromotion> {
    let parsed = parse_file("test.yaml", yaml, &Limits::default());
    assert!(!parsed.has_errors(), "{:#?}", parsed.all_diagnostics());
    parsed
        .promotions
        .into_iter()
        .filter_map(|p| p.promotion)
        .collect()
}

fn hashes(yaml: &str) -> SpecHashes {
    let mut all = promotions(yaml.as_bytes());
    assert_eq!(all.len(), 1);
    SpecHashes::of(&all.remove(0))
}

/// (seed file, promotion name, profileSpec hash, stages hash, snapshot id).
const GOLDEN: &[(&str, &str, &str, &str, &str)] = &[
    (
        "01-core-payment-processor-ci.yaml",
        "core-payment-processor-ci",
        "T5fZcCqltCawj3C/M1GX4U1njuMYvyX5UM8P7VVNLZY=",
        "JDU0tHQmcThHqJEPoTjo6jV320U+ywur09yYgnujNbY=",
        "06cb7dcbb6bffb9f3bb479498db51a879d64e71c7e047422277d3e1ec1e0b4f0",
    ),
    (
        "02-test-kyverno-rollout-auto.yaml",
        "test-kyverno-rollout",
        "1B6DjLcGB3GznsiOZCbQJ7TVDikrF1rNZJ7DwqynTck=",
        "A+9Bwg9U1F6dcm5Hkk8czndUQ8UliAmXt/Y6D2KRjvY=",
        "0f8da8aeff5df251f1ebd323e008ee43d57a619b5a1dda84c23115146e7c7531",
    ),
    (
        "03-test-kyverno-rollout-manual.yaml",
        "test-kyverno-rollout",
        "1B6DjLcGB3GznsiOZCbQJ7TVDikrF1rNZJ7DwqynTck=",
        "A+9Bwg9U1F6dcm5Hkk8czndUQ8UliAmXt/Y6D2KRjvY=",
        "0f8da8aeff5df251f1ebd323e008ee43d57a619b5a1dda84c23115146e7c7531",
    ),
    (
        "04-cert-manager-rollout-auto.yaml",
        "cert-manager-rollout-auto",
        "e3/VVAevxxol8Kcc2jURE+b63cmxvJMtSAWSEnqAIQw=",
        "oaDUScNabGLbGgwHly0R+E81PVfcBeDitVR/8Wcw5i0=",
        "7bce759f3877328778a22d6f3c3983f5e17a64b6476d36452c7ad07586c6eb5e",
    ),
    (
        "05-kyverno-rollout-auto-v1.yaml",
        "kyverno-rollout-auto",
        "1B6DjLcGB3GznsiOZCbQJ7TVDikrF1rNZJ7DwqynTck=",
        "ONkp0oY6r/N2T5J48AX+wS6hoL5W4S3tSz3mdrM6Slc=",
        "7c95d7c39298e4bf58bea6a0e7a005e06a35b3b14e058aa5be46db739fff41a2",
    ),
    (
        "06-kyverno-rollout-auto-v2.yaml",
        "kyverno-rollout-auto",
        "9NhHm/aghYop/ygadWd89cUaKyBbxOVI+VG3JgJZVTM=",
        "ONkp0oY6r/N2T5J48AX+wS6hoL5W4S3tSz3mdrM6Slc=",
        "37f6dffbab48a82292c347793b30a2aaf00620b91d464520066603c4e92ea116",
    ),
    (
        "07-kyverno-rollout-auto-broken.yaml",
        "kyverno-rollout-auto",
        "lCQfk+4RHomiwV4A93MN+928wqdanYDLR3vxnPZ+sAs=",
        "ONkp0oY6r/N2T5J48AX+wS6hoL5W4S3tSz3mdrM6Slc=",
        "adebe4e94fd2ce2b61c2949c6a279be6a52663ffab0e5e43612802f67cd772a0",
    ),
    (
        "08-kyverno-rollout-manual.yaml",
        "kyverno-prog-rollout-man",
        "9NhHm/aghYop/ygadWd89cUaKyBbxOVI+VG3JgJZVTM=",
        "ONkp0oY6r/N2T5J48AX+wS6hoL5W4S3tSz3mdrM6Slc=",
        "37f6dffbab48a82292c347793b30a2aaf00620b91d464520066603c4e92ea116",
    ),
];

#[test]
fn seed_hashes_are_pinned() {
    let mut actual = Vec::new();
    for file in [
        "01-core-payment-processor-ci.yaml",
        "02-test-kyverno-rollout-auto.yaml",
        "03-test-kyverno-rollout-manual.yaml",
        "04-cert-manager-rollout-auto.yaml",
        "05-kyverno-rollout-auto-v1.yaml",
        "06-kyverno-rollout-auto-v2.yaml",
        "07-kyverno-rollout-auto-broken.yaml",
        "08-kyverno-rollout-manual.yaml",
    ] {
        for promotion in promotions(&seed(file)) {
            let h = SpecHashes::of(&promotion);
            actual.push(format!(
                "    ({file:?}, {:?}, {:?}, {:?}, {:?}),",
                promotion.name(),
                h.profile_spec,
                h.stages,
                h.snapshot_id
            ));
        }
    }
    let expected: Vec<String> = GOLDEN
        .iter()
        .map(|(f, n, p, s, id)| format!("    ({f:?}, {n:?}, {p:?}, {s:?}, {id:?}),"))
        .collect();
    assert_eq!(actual, expected, "\nactual:\n{}", actual.join("\n"));
}

const BASE: &str = r#"
apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata:
  name: demo
spec:
  profileSpec:
    helmCharts:
    - repositoryURL: https://kyverno.github.io/kyverno/
      repositoryName: kyverno
      chartName: kyverno/kyverno
      chartVersion: 3.3.3
      releaseName: kyverno-latest
      releaseNamespace: kyverno
      values: |
        replicas: 2
    - repositoryURL: https://charts.jetstack.io
      repositoryName: jetstack
      chartName: jetstack/cert-manager
      chartVersion: v1.19.1
      releaseName: cert-manager
      releaseNamespace: cert-manager
  stages:
  - name: staging
    clusterSelector:
      matchLabels: {env: staging}
    trigger:
      auto:
        delay: 5m
  - name: production
    clusterSelector:
      matchLabels: {env: production}
"#;

#[test]
fn presentation_and_spelled_out_defaults_do_not_change_hashes() {
    let base = hashes(BASE);
    let restyled = r#"# a comment
{apiVersion: config.projectsveltos.io/v1beta1, kind: ClusterPromotion, metadata: {name: demo},
 spec: {stages: [{clusterSelector: {matchLabels: {env: staging}}, name: staging, trigger: {auto: {delay: 5m}}},
                 {name: production, clusterSelector: {matchLabels: {env: "production"}}}],
   profileSpec: {syncMode: Continuous, tier: 100,
     helmCharts: [{releaseNamespace: kyverno, releaseName: kyverno-latest, chartVersion: "3.3.3", chartName: kyverno/kyverno,
                   repositoryName: kyverno, repositoryURL: "https://kyverno.github.io/kyverno/", values: "replicas: 2\n",
                   helmChartAction: Install},
                  {repositoryURL: https://charts.jetstack.io, repositoryName: jetstack, chartName: jetstack/cert-manager,
                   chartVersion: v1.19.1, releaseName: cert-manager, releaseNamespace: cert-manager}]}}}
"#;
    assert_eq!(hashes(restyled), base);
}

#[test]
fn content_changes_change_the_right_hash() {
    let base = hashes(BASE);
    let version = hashes(&BASE.replace("chartVersion: 3.3.3", "chartVersion: 3.3.4"));
    assert_ne!(version.profile_spec, base.profile_spec);
    assert_eq!(version.stages, base.stages);
    let values = hashes(&BASE.replace("replicas: 2", "replicas: 3"));
    assert_ne!(values.profile_spec, base.profile_spec);
    let selector = hashes(&BASE.replace("{env: production}", "{env: prod}"));
    assert_ne!(selector.stages, base.stages);
    assert_eq!(selector.profile_spec, base.profile_spec);
    assert_ne!(selector.snapshot_id, base.snapshot_id);
    let trigger = hashes(&BASE.replace("delay: 5m", "delay: 10m"));
    assert_eq!(trigger, base, "a trigger edit changes neither hash");
}

#[test]
fn list_order_is_content() {
    let base = hashes(BASE);
    let kyverno = &BASE[BASE
        .find("    - repositoryURL: https://kyverno")
        .expect("kyverno")
        ..BASE
            .find("    - repositoryURL: https://charts")
            .expect("jetstack")];
    let jetstack_end = BASE.find("  stages:").expect("stages");
    let jetstack = &BASE[BASE
        .find("    - repositoryURL: https://charts")
        .expect("jetstack")..jetstack_end];
    let swapped = BASE.replace(
        &format!("{kyverno}{jetstack}"),
        &format!("{jetstack}{kyverno}"),
    );
    assert_ne!(swapped, BASE);
    assert_ne!(hashes(&swapped).profile_spec, base.profile_spec);
}

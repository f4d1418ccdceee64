//! `clusterSelector.matchLabels` from YAML to model, hashes and matching: a repeated key is a
//! located YAML error, key order as written does not matter, and matching is by every label.

use std::collections::BTreeMap;

use tollgate_manifest::model::LabelSelector;
use tollgate_manifest::{ClusterPromotion, Limits, SpecHashes, parse_file};

fn document(match_labels: &str) -> String {
    format!(
        "apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata:
  name: demo
spec:
  stages:
  - name: staging
    clusterSelector:
      matchLabels:{match_labels}
    trigger:
      auto: {{}}
"
    )
}

fn valid(yaml: &str) -> ClusterPromotion {
    let parsed = parse_file("test.yaml", yaml.as_bytes(), &Limits::default());
    assert!(!parsed.has_errors(), "{:#?}", parsed.all_diagnostics());
    parsed
        .promotions
        .into_iter()
        .find_map(|p| p.promotion)
        .expect("one promotion")
}

fn labels(promotion: &ClusterPromotion) -> Vec<(&str, &str)> {
    promotion.spec.stages[0]
        .cluster_selector
        .match_labels
        .iter()
        .collect()
}

#[test]
fn a_repeated_label_key_is_a_duplicate_key_error_at_the_repeat() {
    for (match_labels, line, column) in [
        ("\n        env: a\n        tier: x\n        env: b", 12, 9),
        (" {env: a, env: b}", 9, 29),
    ] {
        let yaml = document(match_labels);
        let parsed = parse_file("test.yaml", yaml.as_bytes(), &Limits::default());
        let diagnostics = parsed.all_diagnostics();
        assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
        let diagnostic = &diagnostics[0];
        assert_eq!(diagnostic.code, "duplicate-key", "{yaml}");
        assert_eq!(diagnostic.message, "duplicate mapping key: env");
        assert_eq!(
            (diagnostic.line, diagnostic.column),
            (line, column),
            "{yaml}"
        );
        assert!(parsed.promotions.iter().all(|p| p.promotion.is_none()));
    }
}

#[test]
fn labels_are_held_in_key_order_whatever_order_they_were_written_in() {
    let written = valid(&document(
        "\n        zone: eu\n        env: prod\n        Tier: \"1\"",
    ));
    let sorted = valid(&document(
        "\n        Tier: \"1\"\n        env: prod\n        zone: eu",
    ));
    assert_eq!(
        labels(&written),
        [("Tier", "1"), ("env", "prod"), ("zone", "eu")]
    );
    assert_eq!(written, sorted);
    assert_eq!(SpecHashes::of(&written), SpecHashes::of(&sorted));
    let selector = serde_json::to_string(&written.spec.stages[0].cluster_selector).unwrap();
    assert_eq!(
        selector,
        r#"{"matchLabels":{"Tier":"1","env":"prod","zone":"eu"}}"#
    );
}

#[test]
fn the_model_round_trips_through_json_with_the_same_hashes() {
    let promotion = valid(&document(" {zone: eu, env: prod}"));
    let json = serde_json::to_string(&promotion).unwrap();
    let again: ClusterPromotion = serde_json::from_str(&json).unwrap();
    assert_eq!(again, promotion);
    assert_eq!(SpecHashes::of(&again), SpecHashes::of(&promotion));
}

#[test]
fn a_selector_matches_clusters_carrying_every_label() {
    let selector: LabelSelector = serde_json::from_value(serde_json::json!({
        "matchLabels": {"env": "prod", "zone": "eu"},
        "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["0"]}],
    }))
    .unwrap();
    let cluster = |labels: &[(&str, &str)]| -> BTreeMap<String, String> {
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert!(selector.matches(&cluster(&[("env", "prod"), ("zone", "eu")])));
    assert!(selector.matches(&cluster(&[("zone", "eu"), ("env", "prod"), ("x", "y")])));
    assert!(!selector.matches(&cluster(&[("env", "prod")])));
    assert!(!selector.matches(&cluster(&[("env", "prod"), ("zone", "us")])));
    assert!(!selector.matches(&cluster(&[("env", "prod"), ("zone", "eu"), ("tier", "0")])));
    assert!(!LabelSelector::default().matches(&cluster(&[("env", "prod")])));
}

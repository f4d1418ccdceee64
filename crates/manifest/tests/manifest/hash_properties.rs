//! Property tests: the canonical hashes depend on content only. Random promotions printed in
//! block style (with comments) and in flow style with reversed key order hash the same; changing
//! one scalar changes the hash.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use tollgate_manifest::{Limits, SpecHashes, parse_file};

fn label_value() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9]{0,6}"
}

fn chart() -> impl Strategy<Value = Value> {
    (
        label_value(),
        "[0-9]\\.[0-9]{1,2}\\.[0-9]",
        "[a-z]{1,8}: [0-9]{1,3}\n",
    )
        .prop_map(|(name, version, values)| {
            json!({
                "repositoryURL": format!("https://charts.example.com/{name}"),
                "repositoryName": name,
                "chartName": format!("{name}/{name}"),
                "chartVersion": version,
                "releaseName": name,
                "releaseNamespace": name,
                "values": values,
            })
        })
}

fn promotion() -> impl Strategy<Value = Value> {
    (
        label_value(),
        prop::collection::vec(chart(), 0..3),
        prop::option::of(prop::sample::select(vec!["Continuous", "OneTime", "DryRun"])),
        prop::collection::btree_set("[a-z]{2,8}", 1..4),
        prop::collection::vec((label_value(), label_value()), 1..4),
    )
        .prop_map(|(name, charts, sync_mode, stage_names, labels)| {
            let mut profile = Map::new();
            if let Some(mode) = sync_mode {
                profile.insert("syncMode".into(), json!(mode));
            }
            if !charts.is_empty() {
                profile.insert("helmCharts".into(), Value::Array(charts));
            }
            let stages: Vec<Value> = stage_names
                .iter()
                .enumerate()
                .map(|(i, stage)| {
                    let (key, value) = &labels[i % labels.len()];
                    json!({"name": stage, "clusterSelector": {"matchLabels": {key.clone(): value.clone()}},
                           "trigger": {"auto": {"delay": format!("{}m", i + 1)}}})
                })
                .collect();
            json!({
                "apiVersion": "config.projectsveltos.io/v1beta1",
                "kind": "ClusterPromotion",
                "metadata": {"name": name},
                "spec": {"profileSpec": Value::Object(profile), "stages": stages},
            })
        })
}

fn scalar(value: &Value) -> String {
    // JSON scalars are valid YAML flow scalars (double-quoted strings).
    value.to_string()
}

/// Block style with a comment before every mapping.
fn block(value: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push_str(&format!("{pad}# {} keys\n", map.len()));
            for (key, child) in map {
                match child {
                    Value::Object(m) if !m.is_empty() => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        block(child, indent + 2, out);
                    }
                    Value::Array(a) if !a.is_empty() => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        block(child, indent, out);
                    }
                    _ => out.push_str(&format!("{pad}{key}: {}\n", flow(child))),
                }
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                out.push_str(&format!("{pad}-\n"));
                block(item, indent + 2, out);
            }
        }
        other => out.push_str(&format!("{pad}{}\n", flow(other))),
    }
}

/// Flow style with every mapping's keys reversed.
fn flow(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .rev()
                .map(|(k, v)| format!("{k}: {}", flow(v)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(flow).collect::<Vec<_>>().join(", ")
        ),
        other => scalar(other),
    }
}

fn hash_of(yaml: &str) -> SpecHashes {
    let parsed = parse_file("prop.yaml", yaml.as_bytes(), &Limits::default());
    let diagnostics = parsed.all_diagnostics();
    let promotion = parsed
        .promotions
        .into_iter()
        .next()
        .and_then(|p| p.promotion)
        .unwrap_or_else(|| panic!("invalid generated promotion:\n{yaml}\n{diagnostics:#?}"));
    SpecHashes::of(&promotion)
}

fn block_yaml(value: &Value) -> String {
    let mut out = String::from("# generated\n");
    block(value, 0, &mut out);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn style_key_order_and_comments_do_not_change_hashes(promotion in promotion()) {
        let block_text = block_yaml(&promotion);
        let flow_text = flow(&promotion);
        prop_assert_eq!(hash_of(&block_text), hash_of(&flow_text));
    }

    #[test]
    fn changing_one_scalar_changes_a_hash(promotion in promotion(), pick in any::<prop::sample::Index>()) {
        let base = hash_of(&block_yaml(&promotion));
        // Candidate scalars that are content: chart versions and values, selector label values.
        let mut targets: Vec<Vec<String>> = Vec::new();
        if let Some(charts) = promotion.pointer("/spec/profileSpec/helmCharts").and_then(Value::as_array) {
            for i in 0..charts.len() {
                targets.push(vec!["spec".into(), "profileSpec".into(), "helmCharts".into(), i.to_string(), "chartVersion".into()]);
                targets.push(vec!["spec".into(), "profileSpec".into(), "helmCharts".into(), i.to_string(), "values".into()]);
            }
        }
        let stages = promotion.pointer("/spec/stages").and_then(Value::as_array).map_or(0, Vec::len);
        for i in 0..stages {
            targets.push(vec!["spec".into(), "stages".into(), i.to_string(), "clusterSelector".into(), "matchLabels".into()]);
        }
        let target = pick.get(&targets).clone();
        let mut mutated = promotion.clone();
        let pointer = format!("/{}", target.join("/"));
        match mutated.pointer_mut(&pointer) {
            Some(Value::String(s)) => s.push('x'),
            Some(Value::Object(labels)) => {
                for value in labels.values_mut() {
                    if let Value::String(s) = value { s.push('x'); }
                }
            }
            other => prop_assert!(false, "unexpected target {pointer}: {other:?}"),
        }
        let changed = hash_of(&block_yaml(&mutated));
        prop_assert_ne!(changed.snapshot_id, base.snapshot_id);
        if target[1] == "stages" {
            prop_assert_ne!(changed.stages, base.stages);
            prop_assert_eq!(changed.profile_spec, base.profile_spec);
        } else {
            prop_assert_ne!(changed.profile_spec, base.profile_spec);
            prop_assert_eq!(changed.stages, base.stages);
        }
    }
}

//! Forms that deploy the same content hash the same (docs/architecture.md#d5-order-is-content).

use tollgate_manifest::{Limits, SpecHashes, parse_file};

fn hashes(profile_spec: &str) -> SpecHashes {
    let yaml = format!(
        "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\n\
         metadata: {{name: p}}\nspec:\n{profile_spec}  stages:\n  - name: s\n    \
         clusterSelector: {{matchLabels: {{env: s}}}}\n    trigger: {{manual: {{}}}}\n"
    );
    let parsed = parse_file("p.yaml", yaml.as_bytes(), &Limits::default());
    let promotion = parsed.promotions[0]
        .promotion
        .as_ref()
        .unwrap_or_else(|| panic!("{yaml}\n{:?}", parsed.all_diagnostics()));
    SpecHashes::of(promotion)
}

#[test]
fn absent_null_empty_and_spelled_out_default_profile_specs_hash_the_same() {
    let absent = hashes("");
    assert_eq!(hashes("  profileSpec: null\n"), absent);
    assert_eq!(hashes("  profileSpec: {}\n"), absent);
    assert_eq!(hashes("  profileSpec: {syncMode: Continuous}\n"), absent);
    assert_ne!(hashes("  profileSpec: {syncMode: OneTime}\n"), absent);
}

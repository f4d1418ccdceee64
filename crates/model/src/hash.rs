//! Canonical content hashes (docs/architecture.md#d5-order-is-content).
//!
//! Hash = SHA-256 of the canonical JSON of the object with CRD defaults applied, object keys
//! sorted, list order kept, stored as standard base64 with padding (44 characters), the same wire
//! form as upstream's `[]byte` status fields. Unlike upstream, list order is content: Sveltos
//! deploys in list order, so reordering charts or refs is a change that must reach the profiles.
//!
//! The scheme is versioned ([`HASH_SCHEME`]) and pinned by golden tests: changing it would restart
//! every running pipeline on upgrade (upstream quirk Q8), so it must never change silently.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::model::{ClusterPromotion, LabelSelector, ProfileSpec, Stage};

/// Version of the canonical-hash scheme, persisted beside every stored hash.
pub const HASH_SCHEME: u32 = 1;

/// The two hashes that identify a promotion's content, plus the derived snapshot id.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecHashes {
    /// Base64 SHA-256 of the canonical profileSpec.
    pub profile_spec: String,
    /// Base64 SHA-256 of `[{name, clusterSelector}]` in stage order (triggers excluded).
    pub stages: String,
    /// Hex SHA-256 of `profile_spec || "\n" || stages`: one stable id for the pair, used in
    /// approval annotations (a prefix of 12+ characters names a snapshot).
    pub snapshot_id: String,
}

impl SpecHashes {
    pub fn of(promotion: &ClusterPromotion) -> Self {
        let profile_spec = profile_spec_hash(&promotion.spec.profile_spec);
        let stages = stages_hash(&promotion.spec.stages);
        let snapshot_id = snapshot_id(&profile_spec, &stages);
        SpecHashes {
            profile_spec,
            stages,
            snapshot_id,
        }
    }

    /// A short form for humans: the first 12 characters of the snapshot id.
    pub fn short(&self) -> &str {
        &self.snapshot_id[..12.min(self.snapshot_id.len())]
    }
}

pub fn profile_spec_hash(spec: &ProfileSpec) -> String {
    let mut canonical = Vec::with_capacity(4096);
    write_canonical_object(&spec.to_map(), &mut canonical);
    digest_base64(&canonical)
}

/// Names and selectors only, in order. Triggers are excluded, as upstream: editing a trigger
/// (approving, changing a delay) must not restart the pipeline.
pub fn stages_hash(stages: &[Stage]) -> String {
    let mut canonical = Vec::new();
    write_canonical_stages(stages, &mut canonical);
    digest_base64(&canonical)
}

/// The canonical JSON of `[{"name", "clusterSelector"}]` written straight from the model: the
/// same bytes as building that JSON value (serde's form of the selector, which drops empty
/// `matchLabels`/`matchExpressions`, so `{}` and an omitted selector hash alike) and writing it
/// canonically, which a test checks.
fn write_canonical_stages(stages: &[Stage], out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, stage) in stages.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"clusterSelector\":");
        write_canonical_selector(&stage.cluster_selector, out);
        out.extend_from_slice(b",\"name\":");
        write_json(&stage.name, out);
        out.push(b'}');
    }
    out.push(b']');
}

/// Keys in canonical (byte) order: `matchExpressions` < `matchLabels`; `key` < `operator` <
/// `values`. `matchLabels` is a [`crate::label_map::LabelMap`], already in byte order.
fn write_canonical_selector(selector: &LabelSelector, out: &mut Vec<u8>) {
    out.push(b'{');
    let mut first = true;
    if !selector.match_expressions.is_empty() {
        out.extend_from_slice(b"\"matchExpressions\":[");
        for (i, requirement) in selector.match_expressions.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"key\":");
            write_json(&requirement.key, out);
            out.extend_from_slice(b",\"operator\":");
            write_json(&requirement.operator, out);
            if !requirement.values.is_empty() {
                out.extend_from_slice(b",\"values\":");
                write_json(&requirement.values, out);
            }
            out.push(b'}');
        }
        out.push(b']');
        first = false;
    }
    if !selector.match_labels.is_empty() {
        if !first {
            out.push(b',');
        }
        out.extend_from_slice(b"\"matchLabels\":");
        write_json(&selector.match_labels, out);
    }
    out.push(b'}');
}

pub fn snapshot_id(profile_spec_hash: &str, stages_hash: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(profile_spec_hash.as_bytes());
    hasher.update(b"\n");
    hasher.update(stages_hash.as_bytes());
    hex(&hasher.finalize())
}

/// Base64 SHA-256 of the canonical JSON of `value`.
pub fn hash_value(value: &Value) -> String {
    let mut canonical = Vec::new();
    write_canonical(value, &mut canonical);
    digest_base64(&canonical)
}

/// [`hash_value`] of the value whose [`canonical_json`] is `canonical`.
pub fn hash_canonical_text(canonical: &str) -> String {
    digest_base64(canonical.as_bytes())
}

fn digest_base64(canonical: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(canonical))
}

/// Canonical JSON: object keys sorted by their UTF-8 bytes, no whitespace, list order kept,
/// strings and numbers as serde_json writes them.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    into_string(out)
}

/// serde_json writes UTF-8; the lossy path only guards the type (and copied every time).
fn into_string(out: Vec<u8>) -> String {
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => write_canonical_object(map, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => write_json(scalar, out),
    }
}

fn write_canonical_object(map: &Map<String, Value>, out: &mut Vec<u8>) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_canonical_field(key, value, out);
    }
    out.push(b'}');
}

/// One field of a canonical object, `"key":value`: a canonical object is `{`, its fields in key
/// order joined by `,`, and `}`.
pub fn canonical_field(key: &str, value: &Value) -> String {
    let mut out = Vec::new();
    write_canonical_field(key, value, &mut out);
    into_string(out)
}

fn write_canonical_field(key: &str, value: &Value, out: &mut Vec<u8>) {
    write_json(key, out);
    out.push(b':');
    write_canonical(value, out);
}

/// serde_json's compact form of a string or scalar, as `Value`'s `Display` writes it.
fn write_json<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    // Writing a string or a scalar into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 0xf) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::LabelSelectorRequirement;

    /// The definition the direct writer must match: the JSON value, written canonically.
    fn stages_via_value(stages: &[Stage]) -> String {
        let list: Vec<Value> = stages
            .iter()
            .map(|s| {
                let selector = serde_json::to_value(&s.cluster_selector).unwrap_or(Value::Null);
                json!({"name": s.name, "clusterSelector": selector})
            })
            .collect();
        canonical_json(&Value::Array(list))
    }

    fn stage(name: &str, labels: &[(&str, &str)], expressions: &[(&str, &str, &[&str])]) -> Stage {
        Stage {
            name: name.to_string(),
            cluster_selector: LabelSelector {
                match_labels: labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                match_expressions: expressions
                    .iter()
                    .map(|(key, operator, values)| LabelSelectorRequirement {
                        key: key.to_string(),
                        operator: operator.to_string(),
                        values: values.iter().map(|v| v.to_string()).collect(),
                    })
                    .collect(),
            },
            trigger: None,
        }
    }

    #[test]
    fn direct_stage_writer_matches_the_json_definition() {
        let cases = vec![
            vec![],
            vec![stage("dev", &[], &[])],
            vec![stage("dev", &[("env", "dev"), ("a.b/c", "x\"y")], &[])],
            vec![
                stage(
                    "a",
                    &[],
                    &[("tier", "In", &["1", "2"]), ("zone", "Exists", &[])],
                ),
                stage(
                    "b\u{e9}",
                    &[("z", ""), ("A", "1")],
                    &[("k", "NotIn", &["\n"])],
                ),
            ],
        ];
        for stages in cases {
            let mut direct = Vec::new();
            write_canonical_stages(&stages, &mut direct);
            assert_eq!(String::from_utf8_lossy(&direct), stages_via_value(&stages));
        }
    }
}

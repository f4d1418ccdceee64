//! Canonical content hashes (DESIGN D5).
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
use serde_json::{Value, json};
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
    hash_value(&Value::Object(spec.0.clone()))
}

/// Names and selectors only, in order. Triggers are excluded, as upstream: editing a trigger
/// (approving, changing a delay) must not restart the pipeline.
pub fn stages_hash(stages: &[Stage]) -> String {
    let list: Vec<Value> = stages
        .iter()
        .map(|s| json!({"name": s.name, "clusterSelector": selector_value(&s.cluster_selector)}))
        .collect();
    hash_value(&Value::Array(list))
}

fn selector_value(selector: &LabelSelector) -> Value {
    // Serialization already drops empty matchLabels/matchExpressions, so `{}` and an omitted
    // selector hash alike.
    serde_json::to_value(selector).unwrap_or(Value::Null)
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
    let mut canonical = String::new();
    write_canonical(value, &mut canonical);
    let digest = Sha256::digest(canonical.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(digest)
}

/// Canonical JSON: object keys sorted by their UTF-8 bytes, no whitespace, list order kept,
/// strings and numbers as serde_json writes them.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
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

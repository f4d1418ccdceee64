//! A stored version's JSON, with the sizeable subtrees it shares with other versions kept once.
//!
//! At fleet scale most of a ClusterSummary's bytes repeat across objects: its annotations,
//! owner references and `clusterProfileSpec` are its profile's, its managedFields' FieldsV1 are
//! every summary's, its status mostly its neighbours'. Every object and list found two levels
//! below the root (`metadata.labels`, `spec.clusterProfileSpec`, `status.featureSummaries`, …)
//! is serialised apart and interned in a [`ChunkTable`]; the version keeps its own bytes and
//! pointers to those chunks. Readers get the same bytes `serde_json::to_vec` gives.

use std::collections::HashSet;
use std::sync::Arc;

use axum::body::Bytes;
use serde_json::Value;

/// Subtrees at this depth (the root's children are at depth 1) are interned.
const CHUNK_DEPTH: usize = 2;

/// Smaller subtrees stay inline: a chunk's pointer and table slot cost about this much.
const MIN_CHUNK_LENGTH: usize = 64;

/// One version's JSON: its own bytes, with interned chunks spliced in at given offsets.
/// Cloning shares it (store, history and every watcher hold the same pieces).
#[derive(Debug, Clone)]
pub struct StoredJson(Arc<Pieces>);

#[derive(Debug)]
struct Pieces {
    own: Box<[u8]>,
    /// (offset into `own`, chunk), offsets ascending.
    chunks: Box<[(u32, Arc<[u8]>)]>,
    length: usize,
}

impl StoredJson {
    /// Bytes kept as they are, sharing nothing (status bodies, restored objects' fallbacks).
    pub fn plain(bytes: Vec<u8>) -> Self {
        let length = bytes.len();
        Self(Arc::new(Pieces {
            own: bytes.into_boxed_slice(),
            chunks: Box::new([]),
            length,
        }))
    }

    /// Serialises `object` like `serde_json::to_vec`, interning its chunks in `table`.
    pub fn encode(object: &Value, table: &mut ChunkTable) -> Self {
        let mut encoder = Encoder {
            own: Vec::with_capacity(512),
            chunks: Vec::new(),
            scratch: std::mem::take(&mut table.scratch),
            table,
        };
        encoder.node(object, 0);
        let Encoder {
            own,
            chunks,
            scratch,
            table,
        } = encoder;
        table.scratch = scratch;
        let length = own.len() + chunks.iter().map(|(_, c)| c.len()).sum::<usize>();
        Self(Arc::new(Pieces {
            own: own.into_boxed_slice(),
            chunks: chunks.into_boxed_slice(),
            length,
        }))
    }

    pub fn len(&self) -> usize {
        self.0.length
    }

    pub fn is_empty(&self) -> bool {
        self.0.length == 0
    }

    /// Appends the whole JSON to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        out.reserve(self.0.length);
        let mut start = 0;
        for (offset, chunk) in self.0.chunks.iter() {
            let offset = *offset as usize;
            out.extend_from_slice(&self.0.own[start..offset]);
            out.extend_from_slice(chunk);
            start = offset;
        }
        out.extend_from_slice(&self.0.own[start..]);
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.0.length);
        self.write_to(&mut out);
        out
    }

    pub fn to_bytes(&self) -> Bytes {
        Bytes::from(self.to_vec())
    }

    /// The JSON parsed. It was serialised from a Value, so it parses back.
    pub fn parse(&self) -> Value {
        serde_json::from_slice(&self.to_vec()).unwrap_or_default()
    }

    /// Whether both are the same pieces (not merely equal bytes).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The interned chunks, for tests that check sharing.
    pub fn chunks(&self) -> impl Iterator<Item = &Arc<[u8]>> {
        self.0.chunks.iter().map(|(_, chunk)| chunk)
    }
}

struct Encoder<'t> {
    own: Vec<u8>,
    chunks: Vec<(u32, Arc<[u8]>)>,
    scratch: Vec<u8>,
    table: &'t mut ChunkTable,
}

impl Encoder<'_> {
    /// Writes `value` as `serde_json`'s compact serialiser does (writing strings, numbers and
    /// Values into memory cannot fail).
    fn node(&mut self, value: &Value, depth: usize) {
        match value {
            Value::Object(_) | Value::Array(_) if depth >= CHUNK_DEPTH => self.chunk(value),
            Value::Object(map) => {
                self.own.push(b'{');
                for (index, (key, child)) in map.iter().enumerate() {
                    if index > 0 {
                        self.own.push(b',');
                    }
                    let _ = serde_json::to_writer(&mut self.own, key);
                    self.own.push(b':');
                    self.node(child, depth + 1);
                }
                self.own.push(b'}');
            }
            Value::Array(items) => {
                self.own.push(b'[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        self.own.push(b',');
                    }
                    self.node(item, depth + 1);
                }
                self.own.push(b']');
            }
            scalar => {
                let _ = serde_json::to_writer(&mut self.own, scalar);
            }
        }
    }

    fn chunk(&mut self, value: &Value) {
        self.scratch.clear();
        let _ = serde_json::to_writer(&mut self.scratch, value);
        if self.scratch.len() < MIN_CHUNK_LENGTH {
            self.own.extend_from_slice(&self.scratch);
            return;
        }
        let chunk = self.table.intern(&self.scratch);
        // Objects over 4 GiB are not kept by this emulator; such an offset would only misplace
        // the chunk, never read out of bounds.
        let offset = u32::try_from(self.own.len()).unwrap_or(u32::MAX);
        self.chunks.push((offset, chunk));
    }
}

/// The interned chunks. A chunk nobody else holds any more is dropped by the next sweep, which
/// runs whenever the table has doubled since the last one (so its cost stays proportional to
/// the interning done).
#[derive(Debug, Default)]
pub struct ChunkTable {
    chunks: HashSet<Arc<[u8]>>,
    live_after_sweep: usize,
    scratch: Vec<u8>,
}

/// The table is swept no more often than once per this many chunks.
const MIN_SWEEP_INTERVAL: usize = 4_096;

impl ChunkTable {
    pub fn intern(&mut self, bytes: &[u8]) -> Arc<[u8]> {
        if let Some(chunk) = self.chunks.get(bytes) {
            return Arc::clone(chunk);
        }
        if self.chunks.len() >= 2 * self.live_after_sweep + MIN_SWEEP_INTERVAL {
            self.sweep();
        }
        let chunk: Arc<[u8]> = Arc::from(bytes);
        self.chunks.insert(Arc::clone(&chunk));
        chunk
    }

    /// Drops the chunks only the table holds. A count of 1 cannot rise behind the table's back:
    /// chunks are handed out only here, under `&mut self`.
    pub fn sweep(&mut self) {
        self.chunks.retain(|chunk| Arc::strong_count(chunk) > 1);
        self.live_after_sweep = self.chunks.len();
    }

    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn summary(name: &str, cluster: &str) -> Value {
        json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
            "metadata": {"name": name, "namespace": "fleet", "uid": name,
                "labels": {"projectsveltos.io/cluster-name": cluster, "projectsveltos.io/cluster-profile-name": "p1-s0"},
                "annotations": {"tollgate.dev/snapshot-id": "06cb7dcbb6bffb9f3bb479498db51a879d64e71c7e047422277d3e1ec1e0b4f0"},
                "managedFields": [{"manager": "addon-controller", "operation": "Update", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:clusterName": {}, "f:clusterProfileSpec": {"f:helmCharts": {}}}}}]},
            "spec": {"clusterName": cluster, "clusterProfileSpec": {"helmCharts": [{"chartName": "example/app",
                "chartVersion": "1.0.0", "releaseName": "app", "releaseNamespace": "app"}], "tier": 100},
                "empty": {}, "list": [1, "two", null, {"three": 3.5}]},
            "status": {"escaped": "quote \" backslash \\ newline \n unicode é \u{1}"}})
    }

    #[test]
    fn the_bytes_are_what_serde_json_writes() {
        let mut table = ChunkTable::default();
        for object in [
            summary("a", "c1"),
            json!({}),
            json!([]),
            json!("x"),
            json!({"k": [[{"deep": {"deeper": [1, 2, 3]}}]]}),
        ] {
            let stored = StoredJson::encode(&object, &mut table);
            let expected = serde_json::to_vec(&object).unwrap();
            assert_eq!(
                String::from_utf8(stored.to_vec()).unwrap(),
                String::from_utf8(expected.clone()).unwrap()
            );
            assert_eq!(stored.len(), expected.len());
            assert_eq!(stored.parse(), object);
        }
    }

    #[test]
    fn equal_subtrees_of_different_objects_are_kept_once() {
        let mut table = ChunkTable::default();
        let first = StoredJson::encode(&summary("a", "c1"), &mut table);
        let second = StoredJson::encode(&summary("b", "c2"), &mut table);
        let shared: Vec<&Arc<[u8]>> = first
            .chunks()
            .filter(|chunk| second.chunks().any(|other| Arc::ptr_eq(chunk, other)))
            .collect();
        let text = |chunk: &Arc<[u8]>| String::from_utf8_lossy(chunk).into_owned();
        let shared: Vec<String> = shared.into_iter().map(text).collect();
        assert!(
            shared.iter().any(|c| c.contains("snapshot-id")),
            "{shared:?}"
        );
        assert!(
            shared.iter().any(|c| c.contains("f:clusterName")),
            "{shared:?}"
        );
        assert!(
            shared.iter().any(|c| c.contains("chartVersion")),
            "{shared:?}"
        );
        assert!(
            !shared.iter().any(|c| c.contains("cluster-name")),
            "labels differ by cluster: {shared:?}"
        );
    }

    #[test]
    fn chunks_nobody_holds_are_swept() {
        let mut table = ChunkTable::default();
        let kept = StoredJson::encode(&summary("a", "c1"), &mut table);
        let dropped = StoredJson::encode(&summary("b", "c2"), &mut table);
        let before = table.len();
        drop(dropped);
        table.sweep();
        assert_eq!(table.len(), before - 1, "only b's labels were b's own");
        assert_eq!(kept.parse(), summary("a", "c1"));
        // What a's version still holds stays interned: a new version shares it again.
        let again = StoredJson::encode(&summary("a", "c1"), &mut table);
        assert!(
            kept.chunks()
                .zip(again.chunks())
                .all(|(a, b)| Arc::ptr_eq(a, b))
        );
        assert_eq!(table.len(), before - 1);
    }
}

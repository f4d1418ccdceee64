//! The protobuf request bodies kubectl sends. Its typed clients post built-in kinds as
//! `application/vnd.kubernetes.protobuf` (`kubectl create namespace x` does), and a real server
//! decodes them. Only the kinds kubectl creates among the types the emulator serves are decoded,
//! into the JSON the rest of the emulator works with; anything else is refused by name (415).
//!
//! Wire format: the magic `k8s\0`, then a `runtime.Unknown` message (1: TypeMeta {1: apiVersion,
//! 2: kind}, 2: raw object bytes), where the raw bytes are the object's own message.

use serde_json::{Map, Value, json};

const MAGIC: &[u8] = b"k8s\0";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    #[error("protobuf body does not start with the k8s magic prefix")]
    NoMagic,
    #[error("malformed protobuf body: {0}")]
    Malformed(&'static str),
    #[error(
        "the tollgate emulator decodes protobuf bodies only for v1 Namespace, not {api_version} {kind}; send JSON"
    )]
    UnsupportedKind { api_version: String, kind: String },
}

/// One field's value. Only length-delimited ones are read: the decoded fields are all strings or
/// messages; varint and fixed-width fields are skipped.
enum Wire<'a> {
    Bytes(&'a [u8]),
    Skipped,
}

/// Iterates over the (field number, value) pairs of one message.
struct Fields<'a> {
    bytes: &'a [u8],
}

impl<'a> Fields<'a> {
    fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self
                .bytes
                .split_first()
                .ok_or(ProtobufError::Malformed("truncated varint"))?;
            self.bytes = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProtobufError::Malformed("varint longer than 64 bits"))
    }

    fn take(&mut self, length: u64) -> Result<&'a [u8], ProtobufError> {
        let length = usize::try_from(length)
            .ok()
            .filter(|l| *l <= self.bytes.len())
            .ok_or(ProtobufError::Malformed("field longer than the body"))?;
        let (taken, rest) = self.bytes.split_at(length);
        self.bytes = rest;
        Ok(taken)
    }

    fn next_field(&mut self) -> Result<Option<(u64, Wire<'a>)>, ProtobufError> {
        if self.bytes.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let wire = match key & 7 {
            0 => self.varint().map(|_| Wire::Skipped)?,
            1 => self.take(8).map(|_| Wire::Skipped)?,
            2 => {
                let length = self.varint()?;
                Wire::Bytes(self.take(length)?)
            }
            5 => self.take(4).map(|_| Wire::Skipped)?,
            _ => return Err(ProtobufError::Malformed("unknown wire type")),
        };
        Ok(Some((key >> 3, wire)))
    }
}

/// Calls `visit` with every (field number, length-delimited value) of a message.
fn each_bytes_field<'a>(
    message: &'a [u8],
    mut visit: impl FnMut(u64, &'a [u8]) -> Result<(), ProtobufError>,
) -> Result<(), ProtobufError> {
    let mut fields = Fields { bytes: message };
    while let Some((number, wire)) = fields.next_field()? {
        match wire {
            Wire::Bytes(bytes) => visit(number, bytes)?,
            Wire::Skipped => {}
        }
    }
    Ok(())
}

fn text(bytes: &[u8]) -> Result<String, ProtobufError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| ProtobufError::Malformed("string is not UTF-8"))
}

/// A `map<string, string>` entry (1: key, 2: value).
fn map_entry(entry: &[u8]) -> Result<(String, String), ProtobufError> {
    let (mut key, mut value) = (String::new(), String::new());
    each_bytes_field(entry, |number, bytes| {
        match number {
            1 => key = text(bytes)?,
            2 => value = text(bytes)?,
            _ => {}
        }
        Ok(())
    })?;
    Ok((key, value))
}

/// The client-settable part of ObjectMeta; server-set fields (uid, timestamps, versions) are
/// ignored as the server ignores them on create.
fn object_meta(message: &[u8]) -> Result<Value, ProtobufError> {
    let mut metadata = Map::new();
    let (mut labels, mut annotations, mut finalizers) = (Map::new(), Map::new(), Vec::new());
    each_bytes_field(message, |number, bytes| {
        match number {
            1..=3 => {
                let value = text(bytes)?;
                let name = match number {
                    1 => "name",
                    2 => "generateName",
                    _ => "namespace",
                };
                if !value.is_empty() {
                    metadata.insert(name.into(), Value::from(value));
                }
            }
            11 | 12 => {
                let (key, value) = map_entry(bytes)?;
                let map = if number == 11 {
                    &mut labels
                } else {
                    &mut annotations
                };
                map.insert(key, Value::from(value));
            }
            14 => finalizers.push(Value::from(text(bytes)?)),
            _ => {}
        }
        Ok(())
    })?;
    for (name, values) in [("labels", labels), ("annotations", annotations)] {
        if !values.is_empty() {
            metadata.insert(name.into(), Value::Object(values));
        }
    }
    if !finalizers.is_empty() {
        metadata.insert("finalizers".into(), Value::Array(finalizers));
    }
    Ok(Value::Object(metadata))
}

/// core/v1 Namespace: 1 metadata, 2 spec {1: finalizers}; the status is the server's.
fn namespace(message: &[u8]) -> Result<Value, ProtobufError> {
    let mut object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {}});
    each_bytes_field(message, |number, bytes| {
        match number {
            1 => object["metadata"] = object_meta(bytes)?,
            2 => {
                let mut finalizers = Vec::new();
                each_bytes_field(bytes, |field, value| {
                    if field == 1 {
                        finalizers.push(Value::from(text(value)?));
                    }
                    Ok(())
                })?;
                if !finalizers.is_empty() {
                    object["spec"] = json!({"finalizers": finalizers});
                }
            }
            _ => {}
        }
        Ok(())
    })?;
    Ok(object)
}

/// Decodes a protobuf request body into the JSON object it stands for.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let unknown = body.strip_prefix(MAGIC).ok_or(ProtobufError::NoMagic)?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), None);
    each_bytes_field(unknown, |number, bytes| {
        match number {
            1 => each_bytes_field(bytes, |field, value| {
                match field {
                    1 => api_version = text(value)?,
                    2 => kind = text(value)?,
                    _ => {}
                }
                Ok(())
            })?,
            2 => raw = Some(bytes),
            _ => {}
        }
        Ok(())
    })?;
    match (api_version.as_str(), kind.as_str(), raw) {
        ("v1", "Namespace", Some(raw)) => namespace(raw),
        ("v1", "Namespace", None) => Err(ProtobufError::Malformed("no object in the body")),
        _ => Err(ProtobufError::UnsupportedKind { api_version, kind }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `kubectl create namespace x` (v1.33) posts, from `kubectl -v=9`.
    const KUBECTL_CREATE_NAMESPACE_X: &[u8] = &[
        0x6b, 0x38, 0x73, 0x00, 0x0a, 0x0f, 0x0a, 0x02, 0x76, 0x31, 0x12, 0x09, 0x4e, 0x61, 0x6d,
        0x65, 0x73, 0x70, 0x61, 0x63, 0x65, 0x12, 0x19, 0x0a, 0x11, 0x0a, 0x01, 0x78, 0x12, 0x00,
        0x1a, 0x00, 0x22, 0x00, 0x2a, 0x00, 0x32, 0x00, 0x38, 0x00, 0x42, 0x00, 0x12, 0x00, 0x1a,
        0x02, 0x0a, 0x00, 0x1a, 0x00, 0x22, 0x00,
    ];

    #[test]
    fn decodes_kubectls_namespace() {
        assert_eq!(
            decode(KUBECTL_CREATE_NAMESPACE_X),
            Ok(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}))
        );
    }

    #[test]
    fn labels_annotations_and_finalizers_are_kept() {
        // metadata {name "n", labels {a: b}, finalizers ["f"]}, spec {finalizers ["kubernetes"]}
        let meta = [
            &[0x0a, 0x01, b'n'][..],
            &[0x5a, 0x06, 0x0a, 0x01, b'a', 0x12, 0x01, b'b'],
            &[0x72, 0x01, b'f'],
        ]
        .concat();
        let spec = [&[0x0a, 0x0a][..], b"kubernetes"].concat();
        let object = [
            &[0x0a, meta.len() as u8][..],
            &meta,
            &[0x12, spec.len() as u8],
            &spec,
        ]
        .concat();
        let type_meta = [&[0x0a, 0x02][..], b"v1", &[0x12, 0x09], b"Namespace"].concat();
        let body = [
            MAGIC,
            &[0x0a, type_meta.len() as u8],
            &type_meta,
            &[0x12, object.len() as u8],
            &object,
        ]
        .concat();
        assert_eq!(
            decode(&body),
            Ok(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "n", "labels": {"a": "b"}, "finalizers": ["f"]},
                "spec": {"finalizers": ["kubernetes"]}}))
        );
    }

    #[test]
    fn other_kinds_and_broken_bodies_are_refused_by_name() {
        let configmap = [
            MAGIC,
            &[0x0a, 0x0f, 0x0a, 0x02],
            b"v1",
            &[0x12, 0x09],
            b"ConfigMap",
        ]
        .concat();
        assert_eq!(
            decode(&configmap).map_err(|e| e.to_string()),
            Err("the tollgate emulator decodes protobuf bodies only for v1 Namespace, not v1 ConfigMap; send JSON".into())
        );
        assert_eq!(decode(b"{}"), Err(ProtobufError::NoMagic));
        assert!(matches!(
            decode(&KUBECTL_CREATE_NAMESPACE_X[..20]),
            Err(ProtobufError::Malformed(_))
        ));
    }
}

//! A YAML tree in which every node (map keys included) carries the line and column it was written
//! at, and its conversion to JSON plus a map from field path to location.
//!
//! serde-saphyr fills in [`Spanned`] locations for any `Deserialize` type, so the tree is just an
//! enum whose children are `Spanned<Node>`. This is the path for files the fast reader leaves to
//! serde-saphyr (the fast reader records a `loc_tree` instead; both write the location types of
//! [`crate::location`], re-exported here for callers that read serde-saphyr trees).

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use serde_saphyr::Spanned;

pub use crate::location::{FieldLoc, Loc, Locations, child_path, item_path, parent_path};

/// One YAML node with located children.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<Node>, Spanned<Node>)>),
}

/// Stack left before a nested node grows the stack, and the size of each extension. The
/// deserializer recurses a few frames per nesting level, and up to `Limits::max_depth` (64)
/// levels need more than a 2 MiB thread stack in a debug build.
const STACK_RED_ZONE: usize = 256 * 1024;
const STACK_EXTENSION: usize = 4 * 1024 * 1024;

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Node, D::Error> {
        // Every nesting level passes through here, so growing on demand lets the depth budget,
        // not the caller's stack size, bound nesting, at no cost for shallow documents.
        stacker::maybe_grow(STACK_RED_ZONE, STACK_EXTENSION, || {
            deserializer.deserialize_any(NodeVisitor)
        })
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
        Ok(match i64::try_from(v) {
            Ok(v) => Node::Int(v),
            Err(_) => Node::UInt(v),
        })
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Node, E> {
        i64::try_from(v)
            .map(Node::Int)
            .map_err(|_| E::custom(format!("integer {v} is too large")))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Node, E> {
        u64::try_from(v)
            .map(|v| self.visit_u64::<E>(v))
            .map_err(|_| E::custom(format!("integer {v} is too large")))?
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Node>>()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<Node>>()? {
            let value = map.next_value::<Spanned<Node>>()?;
            entries.push((key, value));
        }
        Ok(Node::Map(entries))
    }
}

/// A problem found while turning the tree into JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversionProblem {
    pub path: String,
    pub loc: Loc,
    pub message: String,
}

/// Converts a located tree into JSON (key order kept) and records every field's location.
pub fn to_json(
    root: &Spanned<Node>,
    locations: &mut Locations,
    problems: &mut Vec<ConversionProblem>,
) -> Value {
    locations.insert(
        String::new(),
        FieldLoc {
            key: None,
            value: Loc::of(root),
            container: is_container(&root.value),
        },
    );
    convert(root, "", locations, problems)
}

fn convert(
    node: &Spanned<Node>,
    path: &str,
    locations: &mut Locations,
    problems: &mut Vec<ConversionProblem>,
) -> Value {
    match &node.value {
        Node::Null => Value::Null,
        Node::Bool(b) => Value::Bool(*b),
        Node::Int(i) => Value::Number(Number::from(*i)),
        Node::UInt(u) => Value::Number(Number::from(*u)),
        Node::Float(f) => match Number::from_f64(*f) {
            Some(n) => Value::Number(n),
            None => {
                problems.push(ConversionProblem {
                    path: path.to_string(),
                    loc: Loc::of(node),
                    message: format!("{f} is not a finite number"),
                });
                Value::Null
            }
        },
        Node::Str(s) => Value::String(s.clone()),
        Node::Seq(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(index, item)| {
                    let item_path = item_path(path, index);
                    locations.insert(
                        item_path.clone(),
                        FieldLoc {
                            key: None,
                            value: Loc::of(item),
                            container: is_container(&item.value),
                        },
                    );
                    convert(item, &item_path, locations, problems)
                })
                .collect(),
        ),
        Node::Map(entries) => {
            let mut object = Map::with_capacity(entries.len());
            for (key, value) in entries {
                let Some(key_text) = key_text(&key.value) else {
                    problems.push(ConversionProblem {
                        path: path.to_string(),
                        loc: Loc::of(key),
                        message: "mapping keys must be scalars (strings)".to_string(),
                    });
                    continue;
                };
                let field_path = child_path(path, &key_text);
                locations.insert(
                    field_path.clone(),
                    FieldLoc {
                        key: Some(Loc::of(key)),
                        value: Loc::of(value),
                        container: is_container(&value.value),
                    },
                );
                let converted = convert(value, &field_path, locations, problems);
                object.insert(key_text, converted);
            }
            Value::Object(object)
        }
    }
}

fn is_container(node: &Node) -> bool {
    matches!(node, Node::Seq(_) | Node::Map(_))
}

/// Scalar keys become strings, as `sigs.k8s.io/yaml` does when it turns YAML into JSON.
fn key_text(key: &Node) -> Option<String> {
    match key {
        Node::Str(s) => Some(s.clone()),
        Node::Bool(b) => Some(b.to_string()),
        Node::Int(i) => Some(i.to_string()),
        Node::UInt(u) => Some(u.to_string()),
        Node::Float(f) => Some(f.to_string()),
        Node::Null => Some("null".to_string()),
        Node::Seq(_) | Node::Map(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(child_path("", "spec"), "spec");
        assert_eq!(child_path("spec", "stages"), "spec.stages");
        assert_eq!(item_path("spec.stages", 1), "spec.stages[1]");
        assert_eq!(
            child_path("metadata.labels", "app.kubernetes.io/name"),
            "metadata.labels[app.kubernetes.io/name]"
        );
        assert_eq!(parent_path("spec.stages[1]"), "spec.stages");
        assert_eq!(parent_path("metadata.labels[a.b/c]"), "metadata.labels");
        assert_eq!(parent_path("spec.stages"), "spec");
        assert_eq!(parent_path("spec"), "");
    }

    #[test]
    fn every_node_is_located() {
        let yaml = "a:\n  b: [1, x]\n  c: |\n    text\n";
        let root: Spanned<Node> = serde_saphyr::from_str(yaml).expect("yaml");
        let mut locations = Locations::default();
        let mut problems = Vec::new();
        let json = to_json(&root, &mut locations, &mut problems);
        assert!(problems.is_empty());
        assert_eq!(
            json,
            serde_json::json!({"a": {"b": [1, "x"], "c": "text\n"}})
        );
        let b = locations.get("a.b").expect("a.b");
        assert_eq!(b.key, Some(Loc { line: 2, column: 3 }));
        assert_eq!(
            locations.get("a.b[1]").map(|l| l.value),
            Some(Loc {
                line: 2,
                column: 10
            })
        );
        assert_eq!(
            locations.get("a.c").map(|l| l.value.line),
            Some(4),
            "a block scalar is located at its first content line"
        );
        assert_eq!(
            locations.nearest("a.b[7].zzz").map(|(p, _)| p),
            Some("a.b".to_string())
        );
    }
}

//! Where every node of one document was written, recorded in document order while the document
//! is read, and turned into a field-path map only when a diagnostic needs one: a valid
//! promotion never formats a path.

use std::cell::OnceCell;

use crate::location::{FieldLoc, Loc, Locations, child_path, item_path};

/// The text of a mapping key: a slice of the source when it is written as it reads, owned when
/// the reader had to unescape or resolve it (`"a\"b"`, `yes` → `true`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyText {
    Source { start: u32, end: u32 },
    Owned(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeShape {
    Scalar,
    /// A sequence or mapping with this many direct children (which follow it in pre-order).
    Container {
        children: u32,
    },
}

/// One node: its own location, and the key it is the value of (for mapping values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocNode {
    pub key: Option<(Loc, KeyText)>,
    pub value: Loc,
    pub shape: NodeShape,
}

/// The nodes of one document in pre-order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocTree {
    pub nodes: Vec<LocNode>,
}

impl LocTree {
    /// Line and column of the document's root node.
    pub fn root(&self) -> Loc {
        self.nodes.first().map(|n| n.value).unwrap_or_default()
    }

    /// The path → location map [`crate::located::to_json`] builds, from this tree.
    pub fn locations(&self, source: &str) -> Locations {
        let mut locations = Locations::default();
        if let Some(root) = self.nodes.first() {
            locations.insert(
                String::new(),
                FieldLoc {
                    key: None,
                    value: root.value,
                    container: matches!(root.shape, NodeShape::Container { .. }),
                },
            );
            self.insert_children(0, "", source, &mut locations);
        }
        locations
    }

    /// Records the children of node `index` under `path`; returns the index after its subtree.
    fn insert_children(
        &self,
        index: usize,
        path: &str,
        source: &str,
        locations: &mut Locations,
    ) -> usize {
        let Some(node) = self.nodes.get(index) else {
            return index + 1;
        };
        let NodeShape::Container { children } = node.shape else {
            return index + 1;
        };
        let mut next = index + 1;
        for item in 0..children as usize {
            let Some(child) = self.nodes.get(next) else {
                break;
            };
            let child_path = match &child.key {
                Some((_, text)) => child_path(path, key_str(text, source)),
                None => item_path(path, item),
            };
            locations.insert(
                child_path.clone(),
                FieldLoc {
                    key: child.key.as_ref().map(|(loc, _)| *loc),
                    value: child.value,
                    container: matches!(child.shape, NodeShape::Container { .. }),
                },
            );
            next = self.insert_children(next, &child_path, source, locations);
        }
        next
    }
}

fn key_str<'a>(text: &'a KeyText, source: &'a str) -> &'a str {
    match text {
        KeyText::Source { start, end } => source.get(*start as usize..*end as usize).unwrap_or(""),
        KeyText::Owned(text) => text,
    }
}

/// A document's locations: already a map (documents read by serde-saphyr), or a tree turned
/// into one on first use.
#[derive(Debug)]
pub enum DocumentLocations<'a> {
    Map(Locations),
    Tree {
        tree: LocTree,
        source: &'a str,
        map: OnceCell<Locations>,
    },
}

impl<'a> DocumentLocations<'a> {
    pub fn from_tree(tree: LocTree, source: &'a str) -> Self {
        DocumentLocations::Tree {
            tree,
            source,
            map: OnceCell::new(),
        }
    }

    pub fn map(&self) -> &Locations {
        match self {
            DocumentLocations::Map(map) => map,
            DocumentLocations::Tree { tree, source, map } => {
                map.get_or_init(|| tree.locations(source))
            }
        }
    }

    pub fn get(&self, path: &str) -> Option<FieldLoc> {
        self.map().get(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_built_from_keys_and_indexes() {
        let loc = |line, column| Loc { line, column };
        let source = "a:\n- x\n";
        let tree = LocTree {
            nodes: vec![
                LocNode {
                    key: None,
                    value: loc(1, 1),
                    shape: NodeShape::Container { children: 1 },
                },
                LocNode {
                    key: Some((loc(1, 1), KeyText::Source { start: 0, end: 1 })),
                    value: loc(2, 1),
                    shape: NodeShape::Container { children: 1 },
                },
                LocNode {
                    key: None,
                    value: loc(2, 3),
                    shape: NodeShape::Scalar,
                },
            ],
        };
        let locations = DocumentLocations::from_tree(tree, source);
        assert_eq!(
            locations.get("a"),
            Some(FieldLoc {
                key: Some(loc(1, 1)),
                value: loc(2, 1),
                container: true
            })
        );
        assert_eq!(locations.get("a[0]").map(|l| l.value), Some(loc(2, 3)));
        assert_eq!(locations.get("").map(|l| l.container), Some(true));
        assert_eq!(locations.get("b"), None);
    }
}

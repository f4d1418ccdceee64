//! Field paths: built on the stack while an object is walked (nothing is allocated for a valid
//! object), and made into an owned [`SchemaPath`] only for a violation. How a path is written
//! out (`spec.stages[0].name`, `metadata.labels[app.kubernetes.io/name]`) is the caller's
//! spelling, from the segments.

/// One step of a path: a field (or map key) name, or a list index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathSegment {
    Key(String),
    Index(usize),
}

/// A path from the object's root; empty for the root itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SchemaPath {
    segments: Vec<PathSegment>,
}

impl SchemaPath {
    pub fn segments(&self) -> &[PathSegment] {
        &self.segments
    }

    /// This path with one more field.
    pub fn child(&self, key: &str) -> SchemaPath {
        let mut segments = self.segments.clone();
        segments.push(PathSegment::Key(key.to_string()));
        SchemaPath { segments }
    }

    /// The path one step up (the root's parent is the root).
    pub fn parent(&self) -> SchemaPath {
        let mut segments = self.segments.clone();
        segments.pop();
        SchemaPath { segments }
    }

    /// Whether the path is exactly these field names (no indices).
    pub fn is_fields(&self, names: &[&str]) -> bool {
        self.segments.len() == names.len()
            && self
                .segments
                .iter()
                .zip(names)
                .all(|(segment, name)| matches!(segment, PathSegment::Key(key) if key == name))
    }
}

/// The path of the value being walked, borrowed from its parents' frames.
#[derive(Clone, Copy, Debug)]
pub(crate) enum FieldPath<'a> {
    Root,
    Key(&'a FieldPath<'a>, &'a str),
    Index(&'a FieldPath<'a>, usize),
}

impl<'a> FieldPath<'a> {
    pub fn key(&'a self, key: &'a str) -> FieldPath<'a> {
        FieldPath::Key(self, key)
    }

    pub fn index(&'a self, index: usize) -> FieldPath<'a> {
        FieldPath::Index(self, index)
    }

    pub fn is_root(&self) -> bool {
        matches!(self, FieldPath::Root)
    }

    pub fn to_path(self) -> SchemaPath {
        let mut segments = Vec::new();
        let mut current = &self;
        loop {
            match current {
                FieldPath::Root => break,
                FieldPath::Key(parent, key) => {
                    segments.push(PathSegment::Key((*key).to_string()));
                    current = parent;
                }
                FieldPath::Index(parent, index) => {
                    segments.push(PathSegment::Index(*index));
                    current = parent;
                }
            }
        }
        segments.reverse();
        SchemaPath { segments }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walked_path_becomes_its_segments() {
        let root = FieldPath::Root;
        let spec = root.key("spec");
        let stages = spec.key("stages");
        let first = stages.index(1);
        let owned = first.key("name").to_path();
        assert_eq!(
            owned.segments(),
            [
                PathSegment::Key("spec".into()),
                PathSegment::Key("stages".into()),
                PathSegment::Index(1),
                PathSegment::Key("name".into())
            ]
        );
        assert!(root.to_path().segments().is_empty());
        assert!(spec.to_path().is_fields(&["spec"]));
        assert!(!owned.is_fields(&["spec", "stages"]));
        assert!(owned.parent().parent().is_fields(&["spec", "stages"]));
    }
}

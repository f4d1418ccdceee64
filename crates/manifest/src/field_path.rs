//! A field path built on the stack while a document is walked and written out (in the
//! [`crate::location::child_path`] / [`crate::location::item_path`] form) only when a finding
//! needs it, so walking a valid document formats nothing.

use crate::location::{child_path, item_path};

#[derive(Clone, Copy, Debug)]
pub enum FieldPath<'a> {
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

    pub fn render(&self) -> String {
        match self {
            FieldPath::Root => String::new(),
            FieldPath::Key(parent, key) => child_path(&parent.render(), key),
            FieldPath::Index(parent, index) => item_path(&parent.render(), *index),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_the_path_helpers() {
        let root = FieldPath::Root;
        let spec = root.key("spec");
        let stages = spec.key("stages");
        let first = stages.index(1);
        let label = first.key("app.kubernetes.io/name");
        assert_eq!(root.render(), "");
        assert_eq!(first.render(), "spec.stages[1]");
        assert_eq!(label.render(), "spec.stages[1][app.kubernetes.io/name]");
        assert!(root.is_root() && !spec.is_root());
    }
}

//! Source positions and field paths: where a field of a document was written (`Loc`, `FieldLoc`),
//! the map from field path to location (`Locations`), and the path spelling every diagnostic
//! uses (`spec.stages[0].name`, `metadata.labels[app.kubernetes.io/name]`). A leaf: both YAML
//! readers (`located` for serde-saphyr, `loc_tree` for the fast reader) and every rule use it.

use std::collections::HashMap;

use serde_saphyr::Spanned;

/// A 1-based source position.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Loc {
    pub line: u32,
    pub column: u32,
}

impl Loc {
    pub fn of<T>(spanned: &Spanned<T>) -> Loc {
        Loc {
            line: u32::try_from(spanned.referenced.line()).unwrap_or(u32::MAX),
            column: u32::try_from(spanned.referenced.column()).unwrap_or(u32::MAX),
        }
    }
}

/// Where a field was written: its key (absent for list items and the root) and its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldLoc {
    pub key: Option<Loc>,
    pub value: Loc,
    /// The value is a mapping or a sequence (problems with it are best shown at its key).
    pub container: bool,
}

/// Field path (as produced by [`child_path`] / [`item_path`]) → location.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Locations {
    map: HashMap<String, FieldLoc>,
}

impl Locations {
    pub fn insert(&mut self, path: String, loc: FieldLoc) {
        self.map.insert(path, loc);
    }

    pub fn get(&self, path: &str) -> Option<FieldLoc> {
        self.map.get(path).copied()
    }

    /// Every recorded path and its location, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &FieldLoc)> {
        self.map.iter().map(|(path, loc)| (path.as_str(), loc))
    }

    /// The location of `path`, or of its nearest written ancestor (for fields that are missing).
    pub fn nearest(&self, path: &str) -> Option<(String, FieldLoc)> {
        let mut current = path;
        loop {
            if let Some(loc) = self.map.get(current) {
                return Some((current.to_string(), *loc));
            }
            if current.is_empty() {
                return None;
            }
            current = parent_path(current);
        }
    }
}

/// Whether a map key can be written as `.key` in a path (otherwise `[key]`).
fn is_plain_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// `parent.key`, or `parent[key]` for keys with dots, slashes and the like (label keys).
pub fn child_path(parent: &str, key: &str) -> String {
    if is_plain_key(key) {
        if parent.is_empty() {
            key.to_string()
        } else {
            format!("{parent}.{key}")
        }
    } else {
        format!("{parent}[{key}]")
    }
}

pub fn item_path(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

/// The path one level up (`a.b[2]` → `a.b`, `a.b` → `a`, `a` → ``).
pub fn parent_path(path: &str) -> &str {
    if path.ends_with(']')
        && let Some(open) = path.rfind('[')
    {
        return &path[..open];
    }
    match path.rfind('.') {
        Some(dot) => &path[..dot],
        None => "",
    }
}

//! A minimal tree diff restricted to manifest files. Git trees are sorted, so two trees are
//! merge-joined entry by entry and unchanged subtrees are skipped by object id: a commit that
//! touches one file costs one pass over the directories on its path, with no allocation per
//! unchanged entry (much cheaper than a general diff with rename detection we do not need).

use std::cmp::Ordering;

use git2::{ObjectType, Oid, Repository, TreeEntry};

/// What the tracked path is at one commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Root {
    Tree(Oid),
    /// The tracked path names a single manifest file.
    File(Oid),
}

/// A manifest file that was added, changed (`new` is its new blob) or deleted (`new` is `None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileChange {
    /// Path from the repository root.
    pub path: String,
    pub new: Option<Oid>,
}

pub(crate) fn is_manifest(name: &str) -> bool {
    name.ends_with(".yaml") || name.ends_with(".yml")
}

/// The tracked path at a commit's root tree: `None` when it does not exist (or is neither a tree
/// nor a regular file).
pub(crate) fn resolve_root(
    repo: &Repository,
    commit_tree: Oid,
    path: &str,
) -> Result<Option<Root>, git2::Error> {
    if path.is_empty() {
        return Ok(Some(Root::Tree(commit_tree)));
    }
    let tree = repo.find_tree(commit_tree)?;
    let entry = match tree.get_path(std::path::Path::new(path)) {
        Ok(entry) => entry,
        Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(match entry.kind() {
        Some(ObjectType::Tree) => Some(Root::Tree(entry.id())),
        Some(ObjectType::Blob) if is_regular_file(&entry) && is_manifest(path) => {
            Some(Root::File(entry.id()))
        }
        _ => None,
    })
}

/// Appends to `out` every manifest that differs between `old` and `new` roots of `path`.
pub(crate) fn diff_roots(
    repo: &Repository,
    path: &str,
    old: Option<Root>,
    new: Option<Root>,
    out: &mut Vec<FileChange>,
) -> Result<(), git2::Error> {
    if old == new {
        return Ok(());
    }
    let old_tree = match old {
        Some(Root::Tree(id)) => Some(id),
        Some(Root::File(_)) => {
            if !matches!(new, Some(Root::File(_))) {
                out.push(FileChange {
                    path: path.to_string(),
                    new: None,
                });
            }
            None
        }
        None => None,
    };
    let new_tree = match new {
        Some(Root::Tree(id)) => Some(id),
        Some(Root::File(id)) => {
            out.push(FileChange {
                path: path.to_string(),
                new: Some(id),
            });
            None
        }
        None => None,
    };
    if old_tree.is_some() || new_tree.is_some() {
        diff_trees(repo, path, old_tree, new_tree, out)?;
    }
    Ok(())
}

fn diff_trees(
    repo: &Repository,
    prefix: &str,
    old: Option<Oid>,
    new: Option<Oid>,
    out: &mut Vec<FileChange>,
) -> Result<(), git2::Error> {
    if old == new {
        return Ok(());
    }
    let old_tree = old.map(|id| repo.find_tree(id)).transpose()?;
    let new_tree = new.map(|id| repo.find_tree(id)).transpose()?;
    let mut old_iter = old_tree.iter().flat_map(|t| t.iter()).peekable();
    let mut new_iter = new_tree.iter().flat_map(|t| t.iter()).peekable();
    loop {
        let order = match (old_iter.peek(), new_iter.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(a), Some(b)) => git_entry_order(a, b),
        };
        match order {
            Ordering::Less => {
                if let Some(entry) = old_iter.next() {
                    entry_changed(repo, prefix, Some(&entry), None, out)?;
                }
            }
            Ordering::Greater => {
                if let Some(entry) = new_iter.next() {
                    entry_changed(repo, prefix, None, Some(&entry), out)?;
                }
            }
            Ordering::Equal => {
                let (a, b) = (old_iter.next(), new_iter.next());
                if let (Some(a), Some(b)) = (a, b)
                    && (a.id() != b.id() || a.filemode() != b.filemode())
                {
                    entry_changed(repo, prefix, Some(&a), Some(&b), out)?;
                }
            }
        }
    }
    Ok(())
}

/// One name present on either or both sides with different content. Both sides, when present,
/// have the same kind (trees and blobs of one name sort apart).
fn entry_changed(
    repo: &Repository,
    prefix: &str,
    old: Option<&TreeEntry<'_>>,
    new: Option<&TreeEntry<'_>>,
    out: &mut Vec<FileChange>,
) -> Result<(), git2::Error> {
    let Some(any) = new.or(old) else {
        return Ok(());
    };
    let name = String::from_utf8_lossy(any.name_bytes());
    let path = if prefix.is_empty() {
        name.into_owned()
    } else {
        format!("{prefix}/{name}")
    };
    if any.kind() == Some(ObjectType::Tree) {
        return diff_trees(
            repo,
            &path,
            old.map(TreeEntry::id),
            new.map(TreeEntry::id),
            out,
        );
    }
    if !is_manifest(&path) {
        return Ok(());
    }
    let old_file = old.filter(|e| is_regular_file(e)).map(TreeEntry::id);
    let new_file = new.filter(|e| is_regular_file(e)).map(TreeEntry::id);
    if old_file != new_file {
        out.push(FileChange {
            path,
            new: new_file,
        });
    }
    Ok(())
}

fn is_regular_file(entry: &TreeEntry<'_>) -> bool {
    entry.kind() == Some(ObjectType::Blob) && (entry.filemode() & 0o170000) == 0o100000
}

/// Git's tree order: names compare bytewise, with a tree's name followed by an implicit `/`.
fn git_entry_order(a: &TreeEntry<'_>, b: &TreeEntry<'_>) -> Ordering {
    git_name_order(
        a.name_bytes(),
        a.kind() == Some(ObjectType::Tree),
        b.name_bytes(),
        b.kind() == Some(ObjectType::Tree),
    )
}

fn git_name_order(a: &[u8], a_tree: bool, b: &[u8], b_tree: bool) -> Ordering {
    let common = a.len().min(b.len());
    match a[..common].cmp(&b[..common]) {
        Ordering::Equal => {}
        other => return other,
    }
    let terminator = |tree: bool| if tree { b'/' } else { 0 };
    let next_a = a.get(common).copied().unwrap_or(terminator(a_tree));
    let next_b = b.get(common).copied().unwrap_or(terminator(b_tree));
    next_a.cmp(&next_b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_names_sort_as_if_followed_by_slash() {
        assert_eq!(
            git_name_order(b"a", false, b"a.yaml", false),
            Ordering::Less
        );
        // "a/" sorts after "a.yaml" because '/' > '.'.
        assert_eq!(
            git_name_order(b"a", true, b"a.yaml", false),
            Ordering::Greater
        );
        assert_eq!(git_name_order(b"a", true, b"a", true), Ordering::Equal);
        assert_ne!(git_name_order(b"a", true, b"a", false), Ordering::Equal);
    }

    fn blob(repo: &Repository, text: &str) -> Oid {
        repo.blob(text.as_bytes()).expect("blob")
    }

    fn tree(repo: &Repository, entries: &[(&str, Oid, i32)]) -> Oid {
        let mut builder = repo.treebuilder(None).expect("treebuilder");
        for (name, id, mode) in entries {
            builder.insert(name, *id, *mode).expect("insert");
        }
        builder.write().expect("write tree")
    }

    #[test]
    fn diff_reports_manifest_adds_changes_and_deletes_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init_bare(dir.path()).expect("init");
        let (a1, a2, b, c, readme) = (
            blob(&repo, "a1"),
            blob(&repo, "a2"),
            blob(&repo, "b"),
            blob(&repo, "c"),
            blob(&repo, "readme"),
        );
        let sub_old = tree(&repo, &[("x.yml", b, 0o100644)]);
        let sub_new = tree(&repo, &[("x.yml", c, 0o100644)]);
        let old = tree(
            &repo,
            &[
                ("a.yaml", a1, 0o100644),
                ("gone.yaml", b, 0o100644),
                ("README.md", readme, 0o100644),
                ("sub", sub_old, 0o040000),
            ],
        );
        let new = tree(
            &repo,
            &[
                ("a.yaml", a2, 0o100644),
                ("new.yaml", c, 0o100644),
                ("README.md", blob(&repo, "changed"), 0o100644),
                ("sub", sub_new, 0o040000),
            ],
        );
        let mut changes = Vec::new();
        diff_roots(
            &repo,
            "",
            Some(Root::Tree(old)),
            Some(Root::Tree(new)),
            &mut changes,
        )
        .expect("diff");
        changes.sort_by(|x, y| x.path.cmp(&y.path));
        let expected = vec![
            FileChange {
                path: "a.yaml".into(),
                new: Some(a2),
            },
            FileChange {
                path: "gone.yaml".into(),
                new: None,
            },
            FileChange {
                path: "new.yaml".into(),
                new: Some(c),
            },
            FileChange {
                path: "sub/x.yml".into(),
                new: Some(c),
            },
        ];
        assert_eq!(changes, expected);

        let mut from_nothing = Vec::new();
        diff_roots(
            &repo,
            "p",
            None,
            Some(Root::Tree(sub_old)),
            &mut from_nothing,
        )
        .expect("diff");
        assert_eq!(
            from_nothing,
            vec![FileChange {
                path: "p/x.yml".into(),
                new: Some(b)
            }]
        );
    }
}

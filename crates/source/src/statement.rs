//! Statement commits (issue #44): the only commits whose `Tollgate-Approve:` and
//! `Tollgate-Seal:` trailers count. A statement has exactly one parent and the same tree as that
//! parent: it says something and changes nothing. Any other commit can carry such a trailer
//! without its author meaning it (`git merge` copies a tag's message into the merge's; a squash
//! copies every squashed message), so there a trailer is text, not a statement.

use git2::Commit;

/// Whether `commit` is a statement commit: one parent, and the parent's tree.
pub(crate) fn is_statement(commit: &Commit<'_>) -> bool {
    commit.parent_count() == 1
        && commit
            .parent(0)
            .is_ok_and(|parent| parent.tree_id() == commit.tree_id())
}

/// Why a commit's trailers are ignored: for `history` and the log.
pub(crate) fn why_not(commit: &Commit<'_>) -> &'static str {
    match commit.parent_count() {
        0 => "it is a root commit, not a statement commit (an empty commit on one parent)",
        1 => "it changes files: only an empty commit on one parent is a statement",
        _ => {
            "it is a merge (a merge copies messages it did not write): only an empty commit on one parent is a statement"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signature() -> git2::Signature<'static> {
        git2::Signature::now("A", "a@example.com").expect("signature")
    }

    #[test]
    fn only_an_empty_commit_on_one_parent_is_a_statement() {
        let dir = tempfile::tempdir().expect("temp dir");
        let repo = git2::Repository::init(dir.path()).expect("init");
        let empty = repo
            .find_tree(repo.treebuilder(None).unwrap().write().unwrap())
            .unwrap();
        let mut builder = repo.treebuilder(None).unwrap();
        builder
            .insert("f", repo.blob(b"x").unwrap(), 0o100644)
            .unwrap();
        let full = repo.find_tree(builder.write().unwrap()).unwrap();
        let sig = signature();
        let commit = |tree: &git2::Tree<'_>, parents: &[&Commit<'_>]| {
            let oid = repo.commit(None, &sig, &sig, "m", tree, parents).unwrap();
            repo.find_commit(oid).unwrap()
        };
        let root = commit(&empty, &[]);
        let same = commit(&empty, &[&root]);
        let changed = commit(&full, &[&root]);
        let merge = commit(&empty, &[&same, &changed]);
        assert!(!is_statement(&root), "{}", why_not(&root));
        assert!(is_statement(&same));
        assert!(!is_statement(&changed), "{}", why_not(&changed));
        assert!(!is_statement(&merge), "{}", why_not(&merge));
        assert!(why_not(&merge).contains("merge"));
    }
}

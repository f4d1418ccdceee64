//! The name of the new branch an edit commits on. The command line names one branch per edit and
//! refuses to reuse it (an existing branch may hold work not yet pushed: the user decides). The
//! web view presses the same buttons again (a second Pause before the first is merged, a second
//! approver's Approve under the server's one git identity), so it asks for a fresh name: the
//! first of `wanted`, `wanted-2`, `wanted-3`, … that no branch has. The page previews the same
//! name with [`fresh_branch_name`] over the branches it read.

use git2::Repository;

use super::Target;

/// The first of `wanted`, `wanted-2`, `wanted-3`, … for which `taken` is false.
pub fn fresh_branch_name(wanted: &str, taken: impl Fn(&str) -> bool) -> String {
    if !taken(wanted) {
        return wanted.to_string();
    }
    (2u64..)
        .map(|n| format!("{wanted}-{n}"))
        .find(|candidate| !taken(candidate))
        .expect("an unbounded sequence has a name no finite repository holds")
}

/// The branch an edit of `target` commits on: `wanted`, or with `target.fresh_branch` the first
/// free name after it.
pub(crate) fn branch_for(repo: &Repository, target: &Target<'_>, wanted: String) -> String {
    if !target.fresh_branch {
        return wanted;
    }
    fresh_branch_name(&wanted, |name| {
        repo.find_reference(&format!("refs/heads/{name}")).is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::fresh_branch_name;

    #[test]
    fn a_taken_name_gets_the_first_free_number() {
        let taken = ["tollgate/pause-web", "tollgate/pause-web-2"];
        let fresh = |wanted| fresh_branch_name(wanted, |name| taken.contains(&name));
        assert_eq!(fresh("tollgate/resume-web"), "tollgate/resume-web");
        assert_eq!(fresh("tollgate/pause-web"), "tollgate/pause-web-3");
    }
}

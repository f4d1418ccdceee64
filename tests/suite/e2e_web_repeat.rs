//! A web action pressed again (issue #47 item 1): a second Pause before the first was merged, or a
//! second approver's Approve, is a new commit on a fresh branch (`…-2`, `…-3`), never an HTTP 500
//! "branch already exists"; and the page names, before the press, the branch the commit will use.

use crate::support;

use support::TestRepo;
use support::web_attack::{FORM, UiRun, branches, request};
use tollgate_fixtures::{promotion, stage};

fn one_stage(name: &str) -> String {
    promotion(name)
        .chart(name, "1.0.0")
        .stage(stage("dev").selector("env", "dev").auto())
        .to_yaml()
}

/// The branch the page's `action` form says it commits on.
fn previewed_branch(page: &str, action: &str) -> Option<String> {
    let form = page.split(&format!("data-action=\"{action}\"")).nth(1)?;
    let after = form.split("Commit on branch <code>").nth(1)?;
    Some(after.split("</code>").next()?.to_string())
}

#[test]
fn a_repeated_pause_commits_on_a_fresh_branch_the_page_names_before_the_press() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &one_stage("web"));
    repo.commit("web");
    let ui = UiRun::spawn(repo.path(), &[]);
    let addr = ui.addr();
    ui.wait_for_action(&addr, "web", "pause");
    let own = format!("http://{addr}");
    let headers = [("Origin", own.as_str()), FORM];
    let path = "/ui/promotions/web/actions";
    let page = |addr: &str| {
        request(addr, addr, "GET", "/ui/promotions/web", &[], b"")
            .expect("page")
            .body
    };
    assert_eq!(
        previewed_branch(&page(&addr), "pause").as_deref(),
        Some("tollgate/pause-web")
    );
    for (press, branch) in [
        (1, "tollgate/pause-web"),
        (2, "tollgate/pause-web-2"),
        (3, "tollgate/pause-web-3"),
    ] {
        let answer =
            request(&addr, &addr, "POST", path, &headers, b"action=pause").expect("answer");
        assert_eq!(answer.status, 200, "press {press}: {}", answer.body);
        assert!(
            answer.body.contains(&format!("data-branch=\"{branch}\"")),
            "press {press} did not commit on {branch}: {}",
            answer.body
        );
        let next = format!("tollgate/pause-web-{}", press + 1);
        assert_eq!(
            previewed_branch(&page(&addr), "pause").as_deref(),
            Some(next.as_str()),
            "after press {press}, the page previews another branch than the next press takes"
        );
    }
    let made = branches(&repo.path().join(".git"));
    for branch in [
        "tollgate/pause-web",
        "tollgate/pause-web-2",
        "tollgate/pause-web-3",
    ] {
        assert!(made.iter().any(|b| b == branch), "{made:?}");
    }
}

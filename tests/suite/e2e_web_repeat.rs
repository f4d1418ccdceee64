//! A web action pressed again (issue #47 item 1): a second Pause before the first was merged, or a
//! second approver's Approve, is a new commit on a fresh branch (`…-2`, `…-3`), never an HTTP 500
//! "branch already exists"; and the page names, before the press, the branch the commit will use.

use crate::support;

use support::web_attack::{FORM, UiRun, branches, request};
use support::web_page::{serve_in_process, until};
use support::{TestRepo, World};
use tollgate_fixtures::{cluster, fleet, policy, promotion, stage};

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

/// The Retry button counts as `tollgate retry` does: after a first retry is merged (and the
/// stage fails again), the form previews `<id>/2` on the `…-2` branch, and the press commits
/// exactly that (it previewed `/1` and committed `/2` before: two counters).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_form_previews_the_counter_and_branch_its_commit_takes() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &one_stage("web"));
    repo.write(
        "policy.yaml",
        &policy("halt")
            .max_failures("0")
            .on_failure("Halt")
            .to_yaml(),
    );
    repo.commit("web with a halting policy");
    let fleet = fleet()
        .default_latency("50ms")
        .cluster(
            cluster("dev-1")
                .ns("fleet")
                .label("env", "dev")
                .fail_feature("Helm", "values: replicas must be an integer"),
        )
        .to_yaml();
    let world = World::start(repo, &fleet).await;
    let status = world.wait_phase("web", "Failed").await;
    let commit = status["snapshotCommit"]
        .as_str()
        .expect("a commit")
        .to_string();
    let id12 = status["snapshotId"].as_str().expect("an id")[..12].to_string();
    let addr = serve_in_process(&world, None).await.to_string();
    for n in [1, 2] {
        let branch = format!("tollgate/retry-web-dev-{}-{n}", &commit[..7]);
        let value = format!("retry.tollgate.dev/dev: &quot;{id12}/{n}&quot;");
        let page = until(&format!("the form to preview retry {n}"), || {
            let addr = addr.clone();
            let (branch, value) = (branch.clone(), value.clone());
            async move {
                let page = get(&addr, "/ui/promotions/web")?;
                let form = page.split("data-action=\"retry\"").nth(1)?.to_string();
                (form.contains(&branch) && form.contains(&value)).then_some(page)
            }
        })
        .await;
        assert!(page.contains("Retry dev"), "{page}");
        let own = format!("http://{addr}");
        let headers = [("Origin", own.as_str()), FORM];
        let path = "/ui/promotions/web/actions";
        let answer = request(
            &addr,
            &addr,
            "POST",
            path,
            &headers,
            b"action=retry&stage=dev",
        )
        .expect("answer");
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert!(
            answer.body.contains(&format!("data-branch=\"{branch}\"")),
            "{}",
            answer.body
        );
        let committed = world.repo.git(&["show", &format!("{branch}:web.yaml")]);
        assert!(committed.contains(&format!("{id12}/{n}")), "{committed}");
        world.repo.git(&["merge", "--ff-only", &branch]);
    }
}

fn get(addr: &str, path: &str) -> Option<String> {
    let answer = request(addr, addr, "GET", path, &[], b"")?;
    (answer.status == 200).then_some(answer.body)
}

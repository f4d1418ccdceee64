//! A web action pressed again (issue #47 item 1): a second Pause before the first was merged, or a
//! second approver's Approve, is a new commit on a fresh branch (`…-2`, `…-3`), never an HTTP 500
//! "branch already exists"; and the page names, before the press, the branch the commit will use.

use crate::support;

use support::web_attack::{FORM, UiRun, branches, request};
use support::web_page::{page_body, serve_in_process, serve_without_repo, until};
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
                let page = page_body(&addr, "/ui/promotions/web").await?;
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

/// A button pressed on the web view's own page: the answer, which must be 200.
async fn press(addr: &str, form: &str) -> support::web_attack::Answer {
    let (addr, body) = (addr.to_string(), form.to_string());
    let answer = tokio::task::spawn_blocking(move || {
        let own = format!("http://{addr}");
        let headers = [("Origin", own.as_str()), FORM];
        let path = "/ui/promotions/web/actions";
        request(&addr, &addr, "POST", path, &headers, body.as_bytes())
    })
    .await
    .expect("the request")
    .expect("an answer");
    assert_eq!(answer.status, 200, "{form}: {}", answer.body);
    answer
}

const TWO_APPROVERS: &str = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: gates\nspec:\n  approvals:\n    prod:\n      approvers: [alice@example.com, bob@example.com]\n      minApprovals: 2\n";

/// Under `minApprovals: 2`, Approve previews and commits what `tollgate approve` writes there: a
/// `Tollgate-Approve` trailer on an empty commit, on the approver's branch (it previewed the
/// annotation and committed a trailer before); pressed again, on a fresh branch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_under_two_approvers_previews_and_commits_the_trailer() {
    let repo = TestRepo::new();
    let gated = promotion("web")
        .chart("web", "1.0.0")
        .stage(stage("dev").selector("env", "dev").auto())
        .stage(stage("prod").selector("env", "prod").manual())
        .to_yaml();
    repo.write("web.yaml", &gated);
    repo.write("policy.yaml", TWO_APPROVERS);
    repo.commit("web, its prod gate wanting two approvers");
    let world = World::start(repo, &support::fleet_yaml(1, "50ms")).await;
    let status = world
        .eventually("prod to await approval", || async {
            let status = world.status("web").await?;
            let prod = status["stages"]
                .as_array()?
                .iter()
                .find(|s| s["name"] == "prod")?
                .clone();
            (prod["activity"]["kind"] == "AwaitingApproval").then_some(status)
        })
        .await;
    let id12 = status["snapshotId"].as_str().expect("an id")[..12].to_string();
    let addr = serve_in_process(&world, None).await.to_string();
    let page = page_body(&addr, "/ui/promotions/web")
        .await
        .expect("the page");
    let form = page
        .split("data-action=\"approve\"")
        .nth(1)
        .expect("an Approve form");
    let trailer = format!("Tollgate-Approve: web/prod@{id12}");
    assert!(form.contains(&format!("+ trailer {trailer}")), "{form}");
    assert!(
        !form.contains("approve.tollgate.dev/prod"),
        "the annotation is previewed: {form}"
    );
    // One branch per approver: the web view's committer (the clone's user.email) names it.
    let first = previewed_branch(&page, "approve").expect("a previewed branch");
    assert!(
        first.starts_with(&format!("tollgate/approve-web-prod-{id12}-")),
        "{first}"
    );
    for branch in [first.clone(), format!("{first}-2")] {
        let page = page_body(&addr, "/ui/promotions/web")
            .await
            .expect("the page");
        assert_eq!(
            previewed_branch(&page, "approve").as_deref(),
            Some(branch.as_str())
        );
        let answer = press(&addr, "action=approve&stage=prod").await;
        assert!(
            answer.body.contains(&format!("data-branch=\"{branch}\"")),
            "{}",
            answer.body
        );
        let message = world.repo.git(&["log", "-1", "--format=%B", &branch]);
        assert!(message.contains(&trailer), "{message}");
        let changed = world.repo.git(&["diff", "--name-only", "main", &branch]);
        assert!(
            changed.trim().is_empty(),
            "the approval changed files: {changed}"
        );
    }
}

/// Roll back previews the change it commits, field by field (`chartVersion: "1.1.0" → "1.0.0"`),
/// not "the content of snapshot #1", and the commit changes exactly that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_previews_the_fields_its_commit_changes() {
    let repo = TestRepo::new();
    repo.write("web.yaml", &one_stage("web"));
    repo.commit("web 1.0.0");
    let world = World::start(repo, &support::fleet_yaml(1, "50ms")).await;
    world.wait_phase("web", "Completed").await;
    let newer = promotion("web")
        .chart("web", "1.1.0")
        .stage(stage("dev").selector("env", "dev").auto())
        .to_yaml();
    world.repo.write("web.yaml", &newer);
    world.repo.commit("web 1.1.0");
    world
        .eventually("#2 to complete", || async {
            let status = world.status("web").await?;
            (status["phase"] == "Completed" && status["snapshotIndex"] == 2).then_some(())
        })
        .await;
    let addr = serve_in_process(&world, None).await.to_string();
    let page = page_body(&addr, "/ui/promotions/web")
        .await
        .expect("the page");
    let form = page
        .split("data-action=\"rollback\"")
        .nth(1)
        .expect("a Rollback form")
        .split("</form>")
        .next()
        .unwrap_or_default()
        .to_string();
    let change =
        "~ spec.profileSpec.helmCharts[0].chartVersion: &quot;1.1.0&quot; → &quot;1.0.0&quot;";
    assert!(form.contains(change), "{form}");
    assert!(!form.contains("the content of snapshot"), "{form}");
    assert_eq!(
        form.matches("~ spec.").count(),
        1,
        "one field changes: {form}"
    );
    let answer = press(&addr, "action=rollback&to=1").await;
    assert!(
        answer
            .body
            .contains("data-branch=\"tollgate/rollback-web-to-1\""),
        "{}",
        answer.body
    );
    let diff = world
        .repo
        .git(&["diff", "-U0", "main", "tollgate/rollback-web-to-1"]);
    let changed: Vec<&str> = diff
        .lines()
        .filter(|l| {
            (l.starts_with('-') || l.starts_with('+'))
                && !l.starts_with("---")
                && !l.starts_with("+++")
        })
        .collect();
    assert_eq!(changed.len(), 2, "{diff}");
    assert!(
        changed[0].contains("1.1.0") && changed[1].contains("1.0.0"),
        "{diff}"
    );
}

/// Under `run --ui` without `--ui-repo` the labels come from the controller's own git sync (the
/// GitPromotions carry none): the filter found nothing there, and everything under `tollgate ui
/// --repo`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_label_filter_without_a_repository_reads_the_labels_in_git() {
    let repo = TestRepo::new();
    for (name, team) in [("web", "shop"), ("api", "core")] {
        let labelled = promotion(name)
            .label("team", team)
            .chart(name, "1.0.0")
            .stage(stage("dev").selector("env", "dev").auto())
            .to_yaml();
        repo.write(&format!("{name}.yaml"), &labelled);
    }
    repo.commit("web and api");
    let world = World::start(repo, &support::fleet_yaml(1, "50ms")).await;
    world.wait_phase("web", "Completed").await;
    world.wait_phase("api", "Completed").await;
    let addr = serve_without_repo(&world).await.to_string();
    let page = page_body(&addr, "/ui?label=team%3Dcore")
        .await
        .expect("the overview");
    assert!(page.contains("data-name=\"api\""), "{page}");
    assert!(!page.contains("data-name=\"web\""), "{page}");
    // A label changed in git is what the filter reads next.
    let relabelled = promotion("web")
        .label("team", "core")
        .chart("web", "1.0.0")
        .stage(stage("dev").selector("env", "dev").auto())
        .to_yaml();
    world.repo.write("web.yaml", &relabelled);
    world.repo.commit("web moves to core");
    world.poke();
    until("web to be listed under team=core", || {
        let addr = addr.clone();
        async move {
            let page = page_body(&addr, "/ui?label=team%3Dcore").await?;
            page.contains("data-name=\"web\"").then_some(())
        }
    })
    .await;
}

//! End to end: the web view (issue #35) in a real headless Chromium, driven through WebDriver.
//! Real rollouts through the controller on the embedded management cluster, from real git
//! repositories: the overview lists the promotions, a stage's bar moves live while the test
//! commits (no reload), the Approve button on a waiting gate yields a branch whose merge opens
//! the gate (and the web view writes nothing to the cluster), a failed stage shows its clusters'
//! messages, and Pause opens a pull request on an emulated git host. Screenshots of the overview
//! and a promotion page at 1280×800 land in `target/screenshots/`.

use crate::support;
use crate::support::browser;

use std::path::Path;
use std::sync::{Arc, Mutex};

use browser::{screenshot, with_browser};
use fantoccini::Locator;
use serde_json::{Value, json};
use support::web_page::{attr, serve_in_process, text, until};
use support::{KillOnDrop, TestRepo, World, tollgate_binary};
use tollgate::web::pull_request::{GitHost, PullRequests};
use tollgate_fixtures::{cluster, fleet, policy, promotion, stage};

const WEB: &str = "web";
const API: &str = "api";
const HELM_ERROR: &str = "values: replicas must be an integer";

fn two_stages(name: &str, chart: &str, prod_manual: bool) -> String {
    let prod = stage("prod").selector("env", "prod");
    let prod = if prod_manual {
        prod.manual()
    } else {
        prod.auto()
    };
    promotion(name)
        .label("team", name)
        .chart(name, chart)
        .stage(stage("dev").selector("env", "dev").auto())
        .stage(prod)
        .to_yaml()
}

/// dev-1, and prod-1..3 provisioning at different speeds (so a bar has steps to show).
fn fleet_yaml() -> String {
    fleet()
        .default_latency("50ms")
        .cluster(cluster("dev-1").ns("fleet").label("env", "dev"))
        .cluster(
            cluster("prod-1")
                .ns("fleet")
                .label("env", "prod")
                .latency("600ms"),
        )
        .cluster(
            cluster("prod-2")
                .ns("fleet")
                .label("env", "prod")
                .latency("1500ms"),
        )
        .cluster(
            cluster("prod-3")
                .ns("fleet")
                .label("env", "prod")
                .latency("2500ms"),
        )
        .to_yaml()
}

#[test]
fn the_overview_lists_the_rollout_and_a_bar_moves_live_while_the_test_commits() {
    with_browser(|client| async move {
        let repo = TestRepo::new();
        repo.write("web.yaml", &two_stages(WEB, "1.0.0", false));
        repo.write("api.yaml", &two_stages(API, "1.0.0", false));
        repo.commit("web and api");
        let world = World::start(repo, &fleet_yaml()).await;
        world.wait_phase(WEB, "Completed").await;
        world.wait_phase(API, "Completed").await;
        let addr = serve_in_process(&world, None).await;

        client
            .goto(&format!("http://{addr}/ui"))
            .await
            .expect("overview");
        for name in [API, WEB] {
            let phase = attr(
                &client,
                &format!("li[data-name='{name}'] [data-phase]"),
                "data-phase",
            )
            .await;
            assert_eq!(
                phase.as_deref(),
                Some("Completed"),
                "{name} on the overview"
            );
        }
        // Filtering by a git label (query parameters, no script needed).
        client
            .goto(&format!("http://{addr}/ui?label=team%3Dapi"))
            .await
            .expect("filtered");
        assert!(
            client
                .find(Locator::Css("li[data-name='api']"))
                .await
                .is_ok()
        );
        assert!(
            client
                .find(Locator::Css("li[data-name='web']"))
                .await
                .is_err(),
            "web filtered out"
        );
        client
            .goto(&format!("http://{addr}/ui"))
            .await
            .expect("overview");
        screenshot(&client, "web-overview").await;

        client
            .goto(&format!("http://{addr}/ui/promotions/{WEB}"))
            .await
            .expect("promotion page");
        // The page records every state its prod bar goes through (a DOM observer), so a slow
        // WebDriver poll on a loaded machine cannot miss the states in between. The observer is
        // held by `window`: one only the observed nodes hold was collected mid-run under load.
        client
            .execute(
                "window.notReloaded = true; window.prodStates = [];\
                 const record = () => {\
                   const stage = document.getElementById('stage-prod');\
                   const bar = stage && stage.querySelector('.bar');\
                   const shown = stage && stage.querySelector('.muted');\
                   const state = (stage ? stage.getAttribute('data-activity') : '') + ':'\
                     + (bar ? bar.getAttribute('aria-valuenow') : '') + ':'\
                     + (shown ? shown.textContent.replace('runs snapshot ', '') : '');\
                   const states = window.prodStates;\
                   if (states[states.length - 1] !== state) { states.push(state); }\
                 };\
                 record();\
                 window.prodObserver = new MutationObserver(record);\
                 window.prodObserver.observe(document.body,\
                   { subtree: true, childList: true, attributes: true });",
                vec![],
            )
            .await
            .expect("mark the page and observe the bar");
        world
            .repo
            .write("web.yaml", &two_stages(WEB, "2.0.0", false));
        world.repo.commit("web 2.0.0");
        world.poke();

        // One read of the three (the observer's record): three WebDriver reads straddled a swap
        // and saw the old bar's `Completed`/3 beside the new `#2`.
        until("the prod bar to fill with snapshot #2", || {
            let client = client.clone();
            async move {
                let states = client
                    .execute("return window.prodStates;", vec![])
                    .await
                    .ok()?;
                let states: Vec<String> = serde_json::from_value(states).ok()?;
                states
                    .iter()
                    .any(|state| state == "Completed:3:#2")
                    .then_some(())
            }
        })
        .await;
        let seen: Vec<String> = client
            .execute("return window.prodStates;", vec![])
            .await
            .ok()
            .and_then(|states| serde_json::from_value(states).ok())
            .unwrap_or_default();
        // Before the commit the bar was full (#1); the page then showed the new run going (the
        // observer's record) and, as the poll above saw, full again with #2, without a reload.
        assert_eq!(seen.first().map(String::as_str), Some("Completed:3:#1"));
        assert!(
            seen.iter().any(|s| s.starts_with("Provisioning:")),
            "the bar did not move through the run: {seen:?}"
        );
        let kept = client
            .execute("return window.notReloaded === true;", vec![])
            .await
            .expect("script");
        assert_eq!(
            kept,
            Value::Bool(true),
            "the page was reloaded; it must update in place"
        );
        screenshot(&client, "web-promotion").await;
        // Every control has an accessible name, and at phone width nothing scrolls sideways.
        let unnamed = client
            .execute(
                "return [...document.querySelectorAll('a, button, select, input:not([type=hidden])')]\
                 .filter(e => !(e.getAttribute('aria-label') || e.textContent.trim())).length;",
                vec![],
            )
            .await
            .expect("script");
        assert_eq!(unnamed, json!(0), "controls without an accessible name");
        client.set_window_size(390, 844).await.expect("phone width");
        client.refresh().await.expect("reload at phone width");
        let overflow = client
            .execute(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth;",
                vec![],
            )
            .await
            .expect("script");
        assert!(
            overflow.as_i64().is_some_and(|o| o <= 0),
            "the page scrolls sideways by {overflow}px at 390px"
        );
        // The delivery figures: on the page, and as metrics.
        let deployments = text(&client, "#delivery tr[data-figures='prod'] td").await;
        if deployments.as_deref() != Some("2") {
            // Seen twice under a loaded full suite, never alone: show the runs the figures read.
            let status = world.status(WEB).await.unwrap_or_default();
            let runs: Vec<String> = status["runs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|run| {
                    let stages: Vec<String> = run["stages"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|s| format!("{}: succeeded {}", s["name"], s["succeededAt"]))
                        .collect();
                    format!(
                        "#{} {} [{}]",
                        run["snapshotIndex"],
                        run["outcome"],
                        stages.join(", ")
                    )
                })
                .collect();
            let stages: Vec<String> = status["stages"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| format!("{} #{} {}", s["name"], s["snapshotIndex"], s["succeededAt"]))
                .collect();
            panic!(
                "prod deployed #1 and #2, the page says {deployments:?}; runs: {runs:?}; stages: {stages:?}; phase {} snapshot {}; the page's prod went {seen:?}",
                status["phase"], status["snapshotIndex"]
            );
        }
        let metrics = world.metrics.encode();
        assert!(
            metrics.contains("tollgate_delivery_deployments{promotion=\"web\",stage=\"prod\"} 2"),
            "{metrics}"
        );
    });
}

/// The writes a `tollgate ui` process made to the management cluster (its user agent).
fn ui_writes(world: &World) -> Vec<String> {
    world
        .emulator
        .write_log()
        .iter()
        .filter(|w| w.user_agent.starts_with("tollgate-ui"))
        .map(|w| format!("{} {} {}", w.verb, w.resource, w.name))
        .collect()
}

#[test]
fn approve_on_a_waiting_gate_commits_a_branch_whose_merge_opens_the_gate() {
    with_browser(|client| async move {
        let repo = TestRepo::new();
        repo.write("web.yaml", &two_stages(WEB, "1.0.0", true));
        repo.commit("web with a manual prod gate");
        let world = World::start(repo, &fleet_yaml()).await;
        world
            .eventually("prod to await approval", || async {
                let status = world.status(WEB).await?;
                let prod = status["stages"]
                    .as_array()?
                    .iter()
                    .find(|s| s["name"] == "prod")?
                    .clone();
                (prod["activity"]["kind"] == "AwaitingApproval").then_some(())
            })
            .await;

        // `tollgate ui` as a user runs it: its own process, reading the cluster by kubeconfig.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port();
        let listen = format!("127.0.0.1:{port}");
        let kubeconfig = world.kubeconfig();
        let _ui = KillOnDrop(
            tollgate_binary()
                .args(["ui", "--listen", &listen, "--kubeconfig"])
                .arg(&kubeconfig)
                .arg("--repo")
                .arg(world.repo.path())
                .spawn()
                .expect("tollgate ui starts"),
        );
        let page = format!("http://{listen}/ui/promotions/{WEB}");
        // The button and the diff are read in one attempt: a live update may replace the form
        // between two reads (a stale element), and the next attempt reads the new one.
        // The button, the diff and the branch are read in one attempt: a live update may
        // replace the form between two reads (a stale element), and the next attempt reads the
        // new one.
        let (diff, command) = until(
            "tollgate ui to serve the promotion and its approval",
            || {
                let (client, page) = (client.clone(), page.clone());
                async move {
                    client.goto(&page).await.ok()?;
                    client
                        .find(Locator::Css("form[data-action='approve'] button"))
                        .await
                        .ok()?;
                    let diff = text(&client, "form[data-action='approve'] pre").await?;
                    let command = text(&client, "form[data-action='approve'] code").await?;
                    Some((diff, command))
                }
            },
        )
        .await;
        assert!(diff.contains("approve.tollgate.dev/prod:"), "{diff}");
        assert!(
            command.starts_with("tollgate/approve-web-prod-"),
            "the branch is named: {command}"
        );
        let button = client
            .find(Locator::Css("form[data-action='approve'] button"))
            .await
            .expect("button");
        assert!(
            button
                .attr("aria-label")
                .await
                .expect("label")
                .is_some_and(|l| l.starts_with("Approve prod"))
        );
        button.click().await.expect("press Approve");

        let branch = until("the page to show the new branch", || {
            let client = client.clone();
            async move { attr(&client, "#committed", "data-branch").await }
        })
        .await;
        world
            .repo
            .git(&["rev-parse", "--verify", &format!("refs/heads/{branch}")]);
        assert_eq!(
            world.status(WEB).await.expect("status")["phase"],
            "Waiting",
            "the commit alone opens nothing"
        );
        assert!(
            ui_writes(&world).is_empty(),
            "the web view wrote to the cluster: {:?}",
            ui_writes(&world)
        );

        world.repo.git(&["merge", "--ff-only", &branch]);
        world.poke();
        world.wait_phase(WEB, "Completed").await;
        assert!(
            ui_writes(&world).is_empty(),
            "the web view wrote to the cluster: {:?}",
            ui_writes(&world)
        );
    });
}

/// Each create-PR request: (repository, Authorization header, body).
type PullRequestsSeen = Arc<Mutex<Vec<(String, String, Value)>>>;

/// A loopback stand-in for a git host's create-PR endpoint (GitHub's), recording each request.
async fn emulated_github() -> (String, PullRequestsSeen) {
    use axum::extract::State;
    use axum::http::HeaderMap;
    let seen: PullRequestsSeen = Arc::default();
    let app = axum::Router::new()
        .route(
            "/repos/{owner}/{repo}/pulls",
            axum::routing::post(
                |State(seen): State<PullRequestsSeen>,
                 axum::extract::Path((owner, repo)): axum::extract::Path<(String, String)>,
                 headers: HeaderMap,
                 axum::Json(body): axum::Json<Value>| async move {
                    let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
                    seen.lock().expect("lock").push((format!("{owner}/{repo}"), auth, body));
                    (axum::http::StatusCode::CREATED, axum::Json(json!({"number": 7, "html_url": "https://git.example/acme/fleet/pull/7"})))
                },
            ),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, seen)
}

#[test]
fn a_failed_stage_shows_its_clusters_messages_and_pause_opens_a_pull_request() {
    with_browser(|client| async move {
        let repo = TestRepo::new();
        repo.write("web.yaml", &two_stages(WEB, "1.0.0", false));
        repo.write(
            "policy.yaml",
            &policy("halt")
                .max_failures("0")
                .on_failure("Halt")
                .to_yaml(),
        );
        repo.commit("web with a halting policy");
        let remote = tempfile::tempdir().expect("remote dir");
        let bare = remote.path().join("fleet.git");
        std::process::Command::new("git")
            .args(["init", "-q", "--bare"])
            .arg(&bare)
            .status()
            .expect("git init");
        repo.git(&["remote", "add", "origin", &bare.to_string_lossy()]);
        let fleet = fleet()
            .default_latency("50ms")
            .cluster(cluster("dev-1").ns("fleet").label("env", "dev"))
            .cluster(cluster("prod-1").ns("fleet").label("env", "prod"))
            .cluster(
                cluster("prod-2")
                    .ns("fleet")
                    .label("env", "prod")
                    .fail_feature("Helm", HELM_ERROR),
            )
            .to_yaml();
        let world = World::start(repo, &fleet).await;
        world.wait_phase(WEB, "Failed").await;

        let (api_url, seen) = emulated_github().await;
        let token_file = world.cache.path().join("git-host-token");
        std::fs::write(&token_file, "ghp-web-view-test-token\n").expect("token file");
        let pull_requests = PullRequests {
            host: GitHost::Github,
            api_url,
            repository: "acme/fleet".to_string(),
            token_file,
            remote: "origin".to_string(),
        };
        let addr = serve_in_process(&world, Some(pull_requests)).await;

        client
            .goto(&format!("http://{addr}/ui"))
            .await
            .expect("overview");
        let failing = attr(&client, "li.failing", "data-name").await;
        assert_eq!(
            failing.as_deref(),
            Some(WEB),
            "a failed promotion is listed first, marked failing"
        );
        client
            .goto(&format!("http://{addr}/ui/promotions/{WEB}"))
            .await
            .expect("page");
        let message = text(
            &client,
            "#clusters tr[data-cluster='fleet/prod-2'] td.message",
        )
        .await;
        assert!(
            message.as_deref().is_some_and(|m| m.contains(HELM_ERROR)),
            "{message:?}"
        );
        let state = attr(
            &client,
            "#clusters tr[data-cluster='fleet/prod-2']",
            "data-state",
        )
        .await;
        assert_eq!(state.as_deref(), Some("Failed"));
        assert_eq!(
            attr(&client, "#stage-prod", "data-activity")
                .await
                .as_deref(),
            Some("Failed")
        );
        let retry = text(&client, "form[data-action='retry']")
            .await
            .unwrap_or_default();
        assert!(
            retry.contains("tollgate retry web prod") && retry.contains("retry.tollgate.dev/prod:"),
            "{retry}"
        );

        client
            .find(Locator::Css("form[data-action='pause'] button"))
            .await
            .expect("Pause")
            .click()
            .await
            .expect("press Pause");
        let link = until("the pull request link", || {
            let client = client.clone();
            async move { text(&client, "#pull-request").await }
        })
        .await;
        assert_eq!(link, "https://git.example/acme/fleet/pull/7");
        let requests = seen.lock().expect("lock").clone();
        assert_eq!(requests.len(), 1, "{requests:?}");
        let (repository, auth, body) = &requests[0];
        assert_eq!(repository, "acme/fleet");
        assert_eq!(auth, "Bearer ghp-web-view-test-token");
        assert_eq!(body["head"], "tollgate/pause-web");
        assert_eq!(body["base"], "main");
        // The branch reached the remote, with the pause annotation.
        let shown = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&bare)
            .args(["show", "tollgate/pause-web:web.yaml"])
            .output()
            .expect("git show");
        let manifest = String::from_utf8_lossy(&shown.stdout);
        assert!(
            manifest.contains("tollgate.dev/paused: \"true\"")
                || manifest.contains("tollgate.dev/paused: 'true'")
                || manifest.contains("tollgate.dev/paused: true"),
            "{manifest}"
        );
        let _ = Path::new(&bare);
        // At phone width Sveltos' message is on screen, not in a column scrolled off it.
        client.set_window_size(390, 844).await.expect("phone width");
        client
            .goto(&format!("http://{addr}/ui/promotions/{WEB}"))
            .await
            .expect("the page at phone width");
        let off_screen = client
            .execute(
                "const cell = document.querySelector(\"#clusters tr[data-cluster='fleet/prod-2'] td.message\");\
                 const wrap = document.querySelector('#clusters .table-wrap');\
                 const box = cell.getBoundingClientRect();\
                 return Math.max(box.right - document.documentElement.clientWidth,\
                   wrap.scrollWidth - wrap.clientWidth);",
                vec![],
            )
            .await
            .expect("script");
        assert!(
            off_screen.as_f64().is_some_and(|o| o <= 0.0),
            "the message's right edge is {off_screen}px past the screen at 390px"
        );
    });
}

/// prod in waves of one with a long pause between them: the stage column's countdown changes
/// every second, so the live view swaps the pipeline fragment every second.
fn waved_policy() -> String {
    "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: waves\nspec:\n  \
     selector: {}\n  stages:\n    prod:\n      waves:\n        sortingLabelKey: order\n        \
     size: 1\n        pause: 10m\n"
        .to_string()
}

#[test]
fn a_waves_list_the_user_opened_stays_open_while_the_page_updates_live() {
    with_browser(|client| async move {
        let repo = TestRepo::new();
        repo.write("web.yaml", &two_stages(WEB, "1.0.0", false));
        repo.write("policy.yaml", &waved_policy());
        repo.commit("web in waves");
        let fleet = fleet()
            .default_latency("50ms")
            .cluster(cluster("dev-1").ns("fleet").label("env", "dev"))
            .cluster(
                cluster("prod-1")
                    .ns("fleet")
                    .label("env", "prod")
                    .label("order", "1"),
            )
            .cluster(
                cluster("prod-2")
                    .ns("fleet")
                    .label("env", "prod")
                    .label("order", "2"),
            )
            .to_yaml();
        let world = World::start(repo, &fleet).await;
        world
            .eventually("prod's first wave to pause", || async {
                let status = world.status(WEB).await?;
                let prod = status["stages"]
                    .as_array()?
                    .iter()
                    .find(|s| s["name"] == "prod")?;
                (prod["waves"]["reached"] == 1).then_some(())
            })
            .await;
        let addr = serve_in_process(&world, None).await;
        client
            .goto(&format!("http://{addr}/ui/promotions/{WEB}"))
            .await
            .expect("page");
        // Open the list, and mark the element: a swapped-in fragment does not carry the mark.
        client
            .execute(
                "const list = document.querySelector('#stage-prod details');\
                 list.open = true; list.dataset.before = 'swap';",
                vec![],
            )
            .await
            .expect("open the waves list");
        until("the pipeline to be swapped by a live update", || {
            let client = client.clone();
            async move {
                let swapped = client
                    .execute(
                        "const list = document.querySelector('#stage-prod details');\
                         return list !== null && list.dataset.before === undefined;",
                        vec![],
                    )
                    .await
                    .ok()?;
                (swapped == Value::Bool(true)).then_some(())
            }
        })
        .await;
        let open = client
            .execute(
                "return document.querySelector('#stage-prod details').open;",
                vec![],
            )
            .await
            .expect("script");
        assert_eq!(
            open,
            Value::Bool(true),
            "the live update closed the waves list"
        );
    });
}

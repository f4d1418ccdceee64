//! The web view in a real headless Chromium against a page on another origin (issue #44 item 9):
//! that page cannot frame it (the browser refuses to render it inside the frame, so a click on
//! the framing page cannot land on a button), and under the web view's Content-Security-Policy
//! the live updates still arrive, with no violation in the browser's console.

use crate::support;
use crate::support::browser;

use browser::{console_log, with_browser};
use serde_json::{Value, json};
use support::web_attack::request;
use support::web_page::{serve_in_process, text, until};
use support::{TestRepo, World, fleet_yaml};
use tollgate_fixtures::{promotion, stage};

fn one_stage(chart: &str) -> String {
    promotion("web")
        .chart("web", chart)
        .stage(stage("dev").selector("env", "dev").auto())
        .stage(stage("prod").selector("env", "prod").auto())
        .to_yaml()
}

/// A page on another origin (another port) framing `victim`; it records the frame's load.
async fn framing_page(victim: &str) -> String {
    let html = format!(
        "<!DOCTYPE html><html><body><h1>Win a prize: click the button</h1>\
         <iframe id=\"victim\" src=\"{victim}\" width=\"1200\" height=\"700\"></iframe>\
         <script>document.getElementById('victim').addEventListener('load', \
         function () {{ window.framed = true; }});</script></body></html>"
    );
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || async move { axum::response::Html(html) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

#[test]
fn a_page_on_another_origin_cannot_frame_the_web_view() {
    with_browser(|client| async move {
        let repo = TestRepo::new();
        repo.write("web.yaml", &one_stage("1.0.0"));
        repo.commit("web");
        let world = World::start(repo, &fleet_yaml(1, "50ms")).await;
        world.wait_phase("web", "Completed").await;
        let addr = serve_in_process(&world, None).await;
        let victim = format!("http://{addr}/ui/promotions/web");

        client
            .goto(&framing_page(&victim).await)
            .await
            .expect("the framing page");
        until("the frame to finish loading", || {
            let client = client.clone();
            async move {
                let framed = client.execute("return window.framed === true;", vec![]);
                (framed.await.ok()? == json!(true)).then_some(())
            }
        })
        .await;
        client.enter_frame(0).await.expect("into the frame");
        let inside = client
            .execute(
                "return {href: location.href, \
                 ui: document.querySelector('header.top, main, form') !== null};",
                vec![],
            )
            .await
            .expect("read the frame");
        client.enter_parent_frame().await.expect("out of the frame");
        assert_eq!(
            inside["ui"],
            Value::Bool(false),
            "the web view rendered inside another origin's frame: {inside}"
        );
    });
}

#[test]
fn live_updates_arrive_under_the_content_security_policy_without_a_violation() {
    with_browser(|client| async move {
        let repo = TestRepo::new();
        repo.write("web.yaml", &one_stage("1.0.0"));
        repo.commit("web 1.0.0");
        let world = World::start(repo, &fleet_yaml(1, "50ms")).await;
        world.wait_phase("web", "Completed").await;
        let addr = serve_in_process(&world, None).await.to_string();
        let page = tokio::task::spawn_blocking({
            let addr = addr.clone();
            move || request(&addr, &addr, "GET", "/ui/promotions/web", &[], b"")
        })
        .await
        .expect("blocking read")
        .expect("the page");
        let policy = page.header("content-security-policy").unwrap_or_default();
        for directive in [
            "default-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(policy.contains(directive), "{directive} in {policy:?}");
        }

        console_log(&client).await; // what earlier tests left in the shared browser's console
        client
            .goto(&format!("http://{addr}/ui/promotions/web"))
            .await
            .expect("promotion page");
        client
            .execute(
                "window.notReloaded = true; window.violations = [];\
                 document.addEventListener('securitypolicyviolation', function (e) {\
                   window.violations.push(e.violatedDirective + ' ' + e.blockedURI); });",
                vec![],
            )
            .await
            .expect("listen for violations");
        world.repo.write("web.yaml", &one_stage("2.0.0"));
        world.repo.commit("web 2.0.0");
        world.poke();
        until("snapshot #2 to reach the page live", || {
            let client = client.clone();
            async move {
                let summary = text(&client, "#summary").await?;
                summary.contains("Snapshot #2").then_some(())
            }
        })
        .await;
        let state = client
            .execute(
                "return {reloaded: window.notReloaded !== true, violations: window.violations,\
                 inlineStyles: document.querySelectorAll('[style]').length};",
                vec![],
            )
            .await
            .expect("page state");
        assert_eq!(
            state,
            json!({"reloaded": false, "violations": [], "inlineStyles": 0}),
            "the live update under the policy"
        );
        // A message of our own proves the console is read at all.
        client
            .execute("console.error('tollgate-console-marker');", vec![])
            .await
            .expect("a console message");
        let console = console_log(&client).await;
        assert!(
            console
                .iter()
                .any(|m| m.contains("tollgate-console-marker")),
            "the browser console was not read: {console:#?}"
        );
        assert!(
            !console
                .iter()
                .any(|m| m.contains("Content Security Policy") || m.contains("Refused to")),
            "the browser refused something on the page: {console:#?}"
        );
    });
}

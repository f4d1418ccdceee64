//! Delivery figures are computed once (issue #47 item 1): the engine's run history records when
//! the snapshot's commit was made, and the web page and `tollgate_delivery_lead_time_seconds`
//! both read the same lead time, from that commit (DORA's definition), not one from the commit
//! and the other from the run's start.

use crate::support;

use support::web_page::serve_in_process;
use support::{TestRepo, World, fleet_yaml};
use tollgate_fixtures::{promotion, stage};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_the_metric_count_lead_time_from_the_commit() {
    let repo = TestRepo::new();
    let web = promotion("web")
        .chart("web", "1.0.0")
        .stage(stage("dev").selector("env", "dev").auto())
        .to_yaml();
    repo.write("web.yaml", &web);
    repo.git(&["add", "-A"]);
    // Committed two hours before the controller sees it.
    let two_hours_ago = (chrono::Utc::now() - chrono::Duration::hours(2)).to_rfc3339();
    repo.git(&["commit", "-q", "-m", "web", "--date", &two_hours_ago]);
    let world = World::start(repo, &fleet_yaml(1, "50ms")).await;
    world.wait_phase("web", "Completed").await;

    let lead_time = |scraped: &str| {
        support::exposition::parse_exposition(scraped)
            .expect("a valid scrape")
            .value(
                "tollgate_delivery_lead_time_seconds",
                &[("promotion", "web"), ("stage", "dev")],
            )
    };
    let scraped = world
        .scrape_when("the stage's lead time scraped", |s| lead_time(s).is_some())
        .await;
    let seconds = lead_time(&scraped);
    assert!(
        seconds.is_some_and(|s| (7200.0..7300.0).contains(&s)),
        "the metric's lead time is not from the commit: {seconds:?}"
    );
    let addr = serve_in_process(&world, None).await.to_string();
    let page = tokio::task::spawn_blocking(move || {
        support::web_attack::request(&addr, &addr, "GET", "/ui/promotions/web", &[], b"")
    })
    .await
    .expect("request")
    .expect("the page");
    let row = page
        .body
        .split("data-figures=\"dev\"")
        .nth(1)
        .and_then(|r| r.split("</tr>").next())
        .expect("the dev row")
        .to_string();
    assert!(row.contains("<td>1</td>"), "one deployment: {row}");
    assert!(
        row.contains("2h"),
        "the page's lead time is not the metric's 2h: {row}"
    );
}

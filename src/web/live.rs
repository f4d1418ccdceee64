//! Live updates: server-sent events carrying the page fragments that changed, as a JSON object
//! from element id to its new HTML (the page's script swaps them in). The sources are in memory
//! (the controller's status cache, or the `ui` command's watch), so each stream reads them a few
//! times a second and sends only what changed: a status change reaches the page well within a
//! second.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use chrono::Utc;
use futures::Stream;

use super::overview::{self, Filter};
use super::{Web, WebState};

/// How often a stream reads the source.
const TICK: Duration = Duration::from_millis(250);

type Fragments = BTreeMap<String, String>;

/// A stream of the fragments `render` makes whenever one of them changes.
fn changes(
    web: WebState,
    render: impl Fn(&Web) -> Option<Fragments> + Send + Sync + 'static,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let render = std::sync::Arc::new(render);
    futures::stream::unfold(Fragments::new(), move |mut sent| {
        let (web, render) = (web.clone(), render.clone());
        async move {
            loop {
                let (web, render) = (web.clone(), render.clone());
                let now = tokio::task::spawn_blocking(move || render(&web))
                    .await
                    .ok()
                    .flatten();
                if let Some(now) = now {
                    let changed: Fragments = now
                        .iter()
                        .filter(|(id, html)| sent.get(*id) != Some(*html))
                        .map(|(id, html)| (id.clone(), html.clone()))
                        .collect();
                    if !changed.is_empty() {
                        sent = now;
                        let data = serde_json::to_string(&changed).unwrap_or_default();
                        let event = Event::default().event("fragments").data(data);
                        return Some((Ok(event), sent));
                    }
                }
                tokio::time::sleep(TICK).await;
            }
        }
    })
}

pub(super) async fn overview(
    State(web): State<WebState>,
    Query(filter): Query<Filter>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stream = changes(web, move |web| {
        let (listed, _) = web.read();
        let selected = overview::select(listed, &filter);
        let html = overview::list(&selected, Utc::now()).into_string();
        Some(Fragments::from([("promotions".to_string(), html)]))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

pub(super) async fn promotion(
    State(web): State<WebState>,
    Path(name): Path<String>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stream = changes(web, move |web| {
        let fragments = super::handlers::promotion_fragments(web, &name).ok()?;
        Some(
            fragments
                .into_iter()
                .map(|(id, html)| (id.to_string(), html.into_string()))
                .collect(),
        )
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

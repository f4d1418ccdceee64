//! Live updates: server-sent events carrying the page fragments that changed, as a JSON object
//! from element id to its new HTML (the page's script swaps them in). One renderer per stream
//! reads the in-memory source (the controller's status cache, or the `ui` command's watch) a few
//! times a second and publishes to every viewer of it ([`super::broadcast`]); each connection
//! sends only what changed: a status change reaches the page well within a second. The page names the fragments it was rendered with (`seen`, a fingerprint each), so a
//! stream's first event carries only what changed since: a fragment swapped in needlessly
//! replaces the button a user is about to press, or closes a list they opened.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use chrono::Utc;
use futures::Stream;

use super::broadcast::{Broadcast, Fragments, Published, fingerprint};
use super::overview::{self, Filter};
use super::{Web, WebState};

/// Each fragment's fingerprint, by element id.
type Fingerprints = BTreeMap<String, u64>;

/// The query a page's events URL carries: the fragments it was rendered with.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct Seen {
    #[serde(default)]
    seen: Option<String>,
}

impl Seen {
    /// `id:fingerprint,…` (the form [`seen_query`] writes); what does not parse is not seen.
    fn fingerprints(&self) -> Fingerprints {
        self.seen
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .filter_map(|pair| {
                let (id, print) = pair.split_once(':')?;
                Some((id.to_string(), u64::from_str_radix(print, 16).ok()?))
            })
            .collect()
    }
}

/// The `seen=…` query parameter for a page rendered with `fragments` (id, HTML).
pub(super) fn seen_query<'a>(fragments: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let value: Vec<String> = fragments
        .into_iter()
        .map(|(id, html)| format!("{id}:{:x}", fingerprint(html)))
        .collect();
    form_urlencoded::Serializer::new(String::new())
        .append_pair("seen", &value.join(","))
        .finish()
}

/// A stream of the fragments the stream `key` publishes whenever one of them differs from what
/// the page has (`seen`, then what this stream sent). The rendering is shared (see
/// [`Broadcast`]); a connection only compares fingerprints.
fn changes(
    web: WebState,
    key: String,
    seen: Fingerprints,
    render: impl Fn(&Web) -> Option<Fragments> + Send + Sync + 'static,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let published = Broadcast::subscribe(&web, key, render);
    futures::stream::unfold((published, seen), |(mut published, mut sent)| async move {
        loop {
            let now: Arc<Published> = published.borrow_and_update().clone();
            if let Some(data) = now.event_for(&sent) {
                sent = now.prints();
                let event = Event::default().event("fragments").data(&*data);
                return Some((Ok(event), (published, sent)));
            }
            // The renderer stopped (the server is going away): the stream ends.
            published.changed().await.ok()?;
        }
    })
}

pub(super) async fn overview(
    State(web): State<WebState>,
    Query(filter): Query<Filter>,
    Query(seen): Query<Seen>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let key = format!("overview?{}", filter.query());
    let stream = changes(web, key, seen.fingerprints(), move |web| {
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
    Query(seen): Query<Seen>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let key = format!("promotion/{name}");
    let stream = changes(web, key, seen.fingerprints(), move |web| {
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

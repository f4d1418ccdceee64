//! One renderer per live stream, whatever the number of viewers: the first viewer of a stream
//! (the overview under one filter, or one promotion's page) starts a task that renders its
//! fragments every tick and publishes them when one changed; every later viewer subscribes to
//! what it publishes. Each connection then only compares fingerprints, so 200 viewers of the
//! overview cost one render per tick, not 200 (they each re-rendered and re-read the status). The
//! task ends with the last viewer.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::{Web, WebState};

/// How often a stream's renderer reads the source.
pub const TICK: Duration = Duration::from_millis(250);

/// Fragment HTML by element id.
pub type Fragments = BTreeMap<String, String>;

/// What one render published: each fragment's HTML and fingerprint, by element id, and the event
/// a viewer that has the previous publication needs, made once for all of them.
#[derive(Debug, Default)]
pub struct Published {
    pub fragments: BTreeMap<String, (String, u64)>,
    /// The fingerprints of the previous publication.
    pub previous: BTreeMap<String, u64>,
    /// The fragments that differ from the previous publication, as the event's JSON.
    pub delta: Arc<str>,
}

impl Published {
    /// `fragments` (HTML and fingerprint, by id) published after `previous`.
    fn new(fragments: BTreeMap<String, (String, u64)>, previous: &Published) -> Published {
        let previous = previous.prints();
        let delta = changed_since(&fragments, &previous);
        Published {
            fragments,
            previous,
            delta: delta.map_or_else(|| Arc::from(""), Arc::from),
        }
    }

    /// The fingerprints of this publication.
    pub fn prints(&self) -> BTreeMap<String, u64> {
        self.fragments
            .iter()
            .map(|(id, (_, print))| (id.clone(), *print))
            .collect()
    }

    /// The event for a viewer that has `sent`: `None` when it has everything.
    pub fn event_for(&self, sent: &BTreeMap<String, u64>) -> Option<Arc<str>> {
        if *sent == self.previous {
            return (!self.delta.is_empty()).then(|| self.delta.clone());
        }
        changed_since(&self.fragments, sent).map(Arc::from)
    }
}

/// The JSON object of the fragments whose fingerprint differs from `sent` (`None`: none does).
fn changed_since(
    fragments: &BTreeMap<String, (String, u64)>,
    sent: &BTreeMap<String, u64>,
) -> Option<String> {
    let changed: BTreeMap<&str, &str> = fragments
        .iter()
        .filter(|(id, (_, print))| sent.get(*id) != Some(print))
        .map(|(id, (html, _))| (id.as_str(), html.as_str()))
        .collect();
    (!changed.is_empty()).then(|| serde_json::to_string(&changed).unwrap_or_default())
}

type Render = Arc<dyn Fn(&Web) -> Option<Fragments> + Send + Sync>;

/// The running renderers, by stream key.
#[derive(Default)]
pub struct Broadcast {
    streams: Mutex<HashMap<String, Arc<watch::Sender<Arc<Published>>>>>,
}

impl Broadcast {
    /// What the stream `key` publishes; starts its renderer (`render`) if none runs.
    pub fn subscribe(
        web: &WebState,
        key: String,
        render: impl Fn(&Web) -> Option<Fragments> + Send + Sync + 'static,
    ) -> watch::Receiver<Arc<Published>> {
        let mut streams = web.broadcast.streams();
        if let Some(sender) = streams.get(&key) {
            return sender.subscribe();
        }
        let (sender, receiver) = watch::channel(Arc::new(Published::default()));
        let sender = Arc::new(sender);
        streams.insert(key.clone(), sender.clone());
        tokio::spawn(render_while_watched(
            web.clone(),
            key,
            sender,
            Arc::new(render),
        ));
        receiver
    }

    fn streams(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, Arc<watch::Sender<Arc<Published>>>>> {
        self.streams.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many renderers run.
    #[cfg(test)]
    fn renderers(&self) -> usize {
        self.streams().len()
    }
}

/// Renders `key`'s fragments every tick, publishing those that changed, until nobody watches.
async fn render_while_watched(
    web: WebState,
    key: String,
    sender: Arc<watch::Sender<Arc<Published>>>,
    render: Render,
) {
    loop {
        let (reader, render_now) = (web.clone(), render.clone());
        let rendered = tokio::task::spawn_blocking(move || render_now(&reader))
            .await
            .ok()
            .flatten();
        if let Some(fragments) = rendered {
            publish_if_changed(&sender, fragments);
        }
        tokio::time::sleep(TICK).await;
        // Checked and removed under the lock a new viewer subscribes under: none is left behind
        // on a renderer that is about to stop.
        let mut streams = web.broadcast.streams();
        if sender.receiver_count() == 0 {
            streams.remove(&key);
            return;
        }
    }
}

fn publish_if_changed(sender: &watch::Sender<Arc<Published>>, fragments: Fragments) {
    // Each fragment fingerprinted once, for the comparison and the publication alike.
    let fragments: BTreeMap<String, (String, u64)> = fragments
        .into_iter()
        .map(|(id, html)| {
            let print = fingerprint(&html);
            (id, (html, print))
        })
        .collect();
    sender.send_if_modified(|current| {
        let same = current.fragments.len() == fragments.len()
            && current
                .fragments
                .iter()
                .zip(&fragments)
                .all(|((a, (_, pa)), (b, (_, pb)))| a == b && pa == pb);
        if !same {
            *current = Arc::new(Published::new(fragments, current));
        }
        !same
    });
}

/// The fingerprint of one fragment's HTML. Deterministic within the process that renders the
/// page and serves its stream (the only place both are compared).
pub fn fingerprint(html: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    html.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn web() -> WebState {
        Arc::new(Web {
            source: Arc::new(Vec::new),
            git: None,
            token: None,
            pull_requests: None,
            allowed_hosts: Vec::new(),
            commit_lock: tokio::sync::Mutex::new(()),
            broadcast: Broadcast::default(),
        })
    }

    /// 200 viewers of one stream cost one render per tick; a change reaches each of them; the
    /// renderer stops with the last viewer.
    #[tokio::test(start_paused = true)]
    async fn many_viewers_share_one_renderer_that_stops_with_the_last() {
        let web = web();
        let renders = Arc::new(AtomicUsize::new(0));
        let version = Arc::new(AtomicUsize::new(1));
        let render = |renders: Arc<AtomicUsize>, version: Arc<AtomicUsize>| {
            move |_: &Web| {
                renders.fetch_add(1, Ordering::SeqCst);
                let html = format!("<ul>{}</ul>", version.load(Ordering::SeqCst));
                Some(Fragments::from([("promotions".to_string(), html)]))
            }
        };
        let mut viewers: Vec<_> = (0..200)
            .map(|_| {
                let render = render(renders.clone(), version.clone());
                Broadcast::subscribe(&web, "overview?".to_string(), render)
            })
            .collect();
        assert_eq!(web.broadcast.renderers(), 1);
        for _ in 0..8 {
            tokio::time::sleep(TICK).await;
        }
        let rendered = renders.load(Ordering::SeqCst);
        assert!(
            (1..=10).contains(&rendered),
            "{rendered} renders in 8 ticks"
        );

        version.store(2, Ordering::SeqCst);
        for viewer in &mut viewers {
            viewer.borrow_and_update();
        }
        for viewer in &mut viewers {
            viewer.changed().await.expect("the change");
            let now = viewer.borrow_and_update().clone();
            assert_eq!(now.fragments["promotions"].0, "<ul>2</ul>");
        }

        drop(viewers);
        tokio::time::sleep(TICK * 3).await;
        assert_eq!(
            web.broadcast.renderers(),
            0,
            "the renderer outlived its viewers"
        );
    }
}

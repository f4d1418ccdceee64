//! What each endpoint is done with, so that nothing is told twice: across a drift correction that
//! takes a promotion out of Completed and back, across restarts and across leader changes.
//!
//! A notice is settled for an endpoint when it was delivered, given up on (`NotificationFailed`),
//! or dropped as an older state of its stage. The key is `<endpoint>:<notice id>`. Settled keys
//! are kept in memory and recorded on the GitPromotion in the annotation `tollgate.dev/notified`
//! (newest last, the last [`KEYS_KEPT`]), written by the leader only (the writer is lease-gated):
//! one merge patch for every key settled while the previous patch was on its way. A new process
//! or a new leader reads the annotation from its watch cache and skips what is recorded there.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::{debug, warn};

use crate::cluster::errors::ClusterError;
use crate::cluster::statuses::StatusCache;
use crate::cluster::writer::ClusterWriter;

/// The annotation recording settled notifications (comma-separated keys, newest last).
pub const NOTIFIED_ANNOTATION: &str = "tollgate.dev/notified";

/// Keys kept per promotion: a run tells a handful per stage and endpoint.
pub const KEYS_KEPT: usize = 200;

/// Attempts at recording a key when the object changed under us (409).
const RECORD_ATTEMPTS: u32 = 5;

pub fn key(endpoint: &str, notice_id: &str) -> String {
    format!("{endpoint}:{notice_id}")
}

pub struct SettledLog {
    writer: ClusterWriter,
    statuses: Arc<StatusCache>,
    settled: Mutex<HashMap<String, VecDeque<String>>>,
    /// Serialises the annotation's read-modify-write across endpoint workers.
    recording: tokio::sync::Mutex<()>,
}

impl SettledLog {
    pub fn new(writer: ClusterWriter, statuses: Arc<StatusCache>) -> Self {
        SettledLog {
            writer,
            statuses,
            settled: Mutex::new(HashMap::new()),
            recording: tokio::sync::Mutex::new(()),
        }
    }

    fn settled(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<String>>> {
        self.settled.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `key` is settled, by this process or as recorded on the GitPromotion.
    pub fn contains(&self, promotion: &str, key: &str) -> bool {
        if self
            .settled()
            .get(promotion)
            .is_some_and(|keys| keys.iter().any(|k| k == key))
        {
            return true;
        }
        self.statuses
            .annotations(promotion)
            .is_some_and(|annotations| recorded(&annotations).any(|k| k == key))
    }

    /// What is settled for `promotion` now, read once (for checking many keys).
    pub fn view(&self, promotion: &str) -> SettledView {
        let mut keys: HashSet<String> = self
            .settled()
            .get(promotion)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default();
        if let Some(annotations) = self.statuses.annotations(promotion) {
            keys.extend(recorded(&annotations).map(str::to_string));
        }
        SettledView { keys }
    }

    /// Remembers a settled notice, in memory only: [`SettledLog::flush`] records it.
    pub fn remember(&self, promotion: &str, key: &str) {
        let mut settled = self.settled();
        let keys = settled.entry(promotion.to_string()).or_default();
        keys.push_back(key.to_string());
        if keys.len() > KEYS_KEPT {
            keys.pop_front();
        }
    }

    /// Remembers a settled notice and records it on the GitPromotion at once.
    pub async fn record(&self, promotion: &str, key: &str) {
        self.remember(promotion, key);
        self.flush(promotion).await;
    }

    /// Records every key of `promotion` remembered and not yet on the GitPromotion, in one patch
    /// (best effort: a failure to record is logged; the in-memory log still prevents a repeat
    /// within this process).
    pub async fn flush(&self, promotion: &str) {
        let _one_at_a_time = self.recording.lock().await;
        for attempt in 1..=RECORD_ATTEMPTS {
            match self.write(promotion).await {
                Ok(()) => return,
                Err(ClusterError::Conflict { .. }) if attempt < RECORD_ATTEMPTS => {
                    // Our own status write (or the watch) moved the object: re-read and retry.
                    tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
                }
                Err(ClusterError::NotLeader) => {
                    debug!(promotion, "not leading: settled notification not recorded");
                    return;
                }
                Err(error) => {
                    warn!(promotion, %error, "cannot record a settled notification; a new leader may repeat it");
                    return;
                }
            }
        }
    }

    async fn write(&self, promotion: &str) -> Result<(), ClusterError> {
        let Some(mut state) = self.statuses.get(promotion) else {
            return Ok(()); // no GitPromotion (yet): nothing to annotate
        };
        let mut keys: Vec<String> = recorded(&state.annotations).map(str::to_string).collect();
        // Every key settled and not yet recorded, in one write: the notices of one pass and
        // deliveries finishing together (one per endpoint) cost one patch, not one each.
        let pending: Vec<String> = self
            .settled()
            .get(promotion)
            .map(|settled| {
                settled
                    .iter()
                    .filter(|k| !keys.contains(k))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        if pending.is_empty() {
            return Ok(()); // a write waiting before ours recorded them with its own
        }
        keys.extend(pending);
        let excess = keys.len().saturating_sub(KEYS_KEPT);
        keys.drain(..excess);
        let value = keys.join(",");
        let version = self
            .writer
            .annotate_state_object(
                promotion,
                state.resource_version.clone(),
                NOTIFIED_ANNOTATION,
                &value,
            )
            .await?;
        // Our write is the newest: the next status write must be conditional on it.
        state.resource_version = version;
        state
            .annotations
            .insert(NOTIFIED_ANNOTATION.to_string(), value);
        self.statuses.record_own(promotion, state);
        Ok(())
    }
}

/// The keys settled for one promotion at one moment.
pub struct SettledView {
    keys: HashSet<String>,
}

impl SettledView {
    pub fn contains(&self, endpoint: &str, notice_id: &str) -> bool {
        self.keys.contains(&key(endpoint, notice_id))
    }
}

fn recorded(annotations: &BTreeMap<String, String>) -> impl Iterator<Item = &str> {
    annotations
        .get(NOTIFIED_ANNOTATION)
        .map(String::as_str)
        .unwrap_or_default()
        .split(',')
        .filter(|k| !k.is_empty())
}

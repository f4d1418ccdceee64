//! A promotion's persisted status as the controller keeps it between steps: its JSON, deflated.
//!
//! The controller keeps every promotion's last status (issue #49's budget: 10,000 promotions in
//! under 200 MiB). Parsed, a status of four stages is ~6.4 KB of heap in ~45 allocations, ~13 KB
//! in ~120 with one analysis per stage; deflated it is ~1.4 KB and ~2 KB in one. A step reads
//! one status (inflate and parse: ~30 µs) and a write keeps one (serialize and deflate: ~40 µs),
//! small beside the step's API requests. Level 1: level 6 saves a fifth more for twice the time.

use std::io::{Read, Write};
use std::sync::Arc;

use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use tollgate_engine::PromotionStatus;

/// A status at rest. Equal statuses make equal bytes (serialization and deflate are both
/// deterministic), so two records of one status can share one copy.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredStatus {
    deflated: Arc<[u8]>,
}

impl std::fmt::Debug for StoredStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoredStatus({} bytes deflated)", self.deflated.len())
    }
}

impl StoredStatus {
    pub fn keep(status: &PromotionStatus) -> Self {
        let json = serde_json::to_vec(status).expect("a status always serializes");
        let mut encoder =
            DeflateEncoder::new(Vec::with_capacity(json.len() / 3), Compression::fast());
        encoder.write_all(&json).expect("writing to memory");
        let deflated = encoder.finish().expect("writing to memory");
        StoredStatus {
            deflated: deflated.into(),
        }
    }

    /// The status again. It was serialized by this very type, so it reads back; a failure would
    /// be a bug, answered as "no status" (the next step starts over) rather than a panic.
    pub fn read(&self) -> Option<PromotionStatus> {
        let mut json = Vec::with_capacity(self.deflated.len() * 5);
        DeflateDecoder::new(&self.deflated[..])
            .read_to_end(&mut json)
            .ok()?;
        serde_json::from_slice(&json).ok()
    }

    /// Whether both hold one copy.
    pub fn shares(&self, other: &StoredStatus) -> bool {
        Arc::ptr_eq(&self.deflated, &other.deflated)
    }
}

/// Statuses read back, by promotion, read again only when their bytes change: for a reader of
/// every promotion several times a second (the web view's live streams under `run --ui` read all
/// of them every 250 ms; reading 10,000 back each time would take a core). It holds what it read
/// for as long as it lives, which is what keeping statuses deflated saves: only such a reader
/// keeps one.
#[derive(Default)]
pub struct ReadBack {
    read: std::sync::Mutex<std::collections::HashMap<String, (StoredStatus, Arc<PromotionStatus>)>>,
}

impl ReadBack {
    /// `stored`, read back (from the memo when these very bytes were read before).
    pub fn read(&self, name: &str, stored: &StoredStatus) -> Option<Arc<PromotionStatus>> {
        let mut read = self.read.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((bytes, status)) = read.get(name)
            && bytes == stored
        {
            return Some(status.clone());
        }
        let status = Arc::new(stored.read()?);
        read.insert(name.to_string(), (stored.clone(), status.clone()));
        Some(status)
    }

    /// Forgets every promotion but `kept` (those gone since).
    pub fn keep_only(&self, kept: &std::collections::HashSet<&str>) {
        let mut read = self.read.lock().unwrap_or_else(|e| e.into_inner());
        read.retain(|name, _| kept.contains(name.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status() -> PromotionStatus {
        serde_json::from_value(serde_json::json!({
            "hashScheme": 1, "phase": "Progressing", "message": "rolling out",
            "stages": [{"name": "dev", "snapshotIndex": 1, "appliedAt": "2025-10-07T10:00:00Z",
                        "appliedSpecHash": "h", "members": ["fleet/c1", "fleet/c2"]}],
        }))
        .expect("a status")
    }

    #[test]
    fn a_kept_status_reads_back_the_same() {
        let kept = StoredStatus::keep(&status());
        assert_eq!(kept.read(), Some(status()));
    }

    /// A rolled-out promotion of four stages, as the scale harness's are (stage texts and times).
    fn rolled_out() -> PromotionStatus {
        let at = "2026-12-06T18:47:19.089104418Z";
        let stages: Vec<_> = (0..4)
            .map(|i| serde_json::json!({
                "name": format!("s{i}"), "activity": {"kind": "Completed"}, "activitySince": at,
                "lastSuccessfulAppliedTime": at, "lastStatusCheckTime": at,
                "currentStatusDescription": "Successfully provisioned (2026-12-06T18:47:19Z)",
                "snapshotIndex": 1, "appliedAt": at,
                "appliedSpecHash": "w/OUaKsRctlVQKFgw1SrrzltmLPdLVM0wnb/G/Q4XZg=",
                "freshFeatures": ["Helm"], "provisionedAt": at,
                "provisionedMessage": "All matching clusters are successfully deployed.",
                "succeededAt": at,
                "counts": {"members": 10, "matchingClusters": 10, "summaries": 10, "provisioned": 10, "failed": 0},
            }))
            .collect();
        serde_json::from_value(serde_json::json!({
            "hashScheme": 1, "phase": "Completed", "snapshotIndex": 1, "stages": stages,
            "message": "Rolled out to every stage",
        }))
        .expect("a status")
    }

    #[test]
    fn a_kept_status_is_a_fraction_of_its_json() {
        let status = rolled_out();
        let json = serde_json::to_vec(&status).expect("json").len();
        let kept = StoredStatus::keep(&status);
        let bytes = kept.deflated.len();
        assert!(bytes * 3 < json, "{bytes} bytes kept of {json}");
        assert_eq!(kept.read(), Some(status));
    }

    #[test]
    fn equal_statuses_make_equal_bytes() {
        assert_eq!(StoredStatus::keep(&status()), StoredStatus::keep(&status()));
        let mut other = status();
        other.message = Some("done".into());
        assert_ne!(StoredStatus::keep(&status()), StoredStatus::keep(&other));
    }

    #[test]
    fn a_memo_reads_each_status_once_until_its_bytes_change() {
        let memo = ReadBack::default();
        let kept = StoredStatus::keep(&status());
        let first = memo.read("p", &kept).expect("read");
        let again = memo
            .read("p", &StoredStatus::keep(&status()))
            .expect("read");
        assert!(Arc::ptr_eq(&first, &again), "same bytes: not read again");
        let mut changed = status();
        changed.message = Some("done".into());
        let read = memo.read("p", &StoredStatus::keep(&changed)).expect("read");
        assert_eq!(*read, changed);
        memo.keep_only(&std::collections::HashSet::new());
        let after = memo.read("p", &StoredStatus::keep(&changed)).expect("read");
        assert!(!Arc::ptr_eq(&read, &after), "forgotten, so read again");
    }

    #[test]
    fn damaged_bytes_read_as_no_status() {
        let damaged = StoredStatus {
            deflated: Arc::from(&b"not deflate"[..]),
        };
        assert_eq!(damaged.read(), None);
    }
}

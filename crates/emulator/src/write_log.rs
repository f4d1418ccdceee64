//! Every successful mutating request, so tests can check invariants after the fact.

use std::collections::VecDeque;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;

/// One successful write.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteRecord {
    pub time: DateTime<Utc>,
    /// `create`, `update`, `patch`, `apply`, `delete`.
    pub verb: String,
    /// `plural.group` of the type.
    pub resource: String,
    /// Whether the write went through `/status`.
    pub status_subresource: bool,
    pub namespace: String,
    pub name: String,
    pub field_manager: String,
    /// The `User-Agent` of the request that wrote; empty for the emulator's own writes (the
    /// Sveltos stand-in, fleet changes) and for clients that send none.
    pub user_agent: String,
    pub resource_version: u64,
    /// The object after the write (for deletes: as it was removed).
    pub object: Value,
}

/// A write as the log keeps it: the object is the committed version itself, shared with the
/// store (committed versions are immutable), so logging a write copies nothing.
#[derive(Debug, Clone)]
pub struct LoggedWrite {
    pub time: DateTime<Utc>,
    pub verb: &'static str,
    pub resource: String,
    pub status_subresource: bool,
    pub field_manager: String,
    /// Shared by the writes of one request.
    pub user_agent: Option<Arc<str>>,
    pub resource_version: u64,
    pub object: Arc<Value>,
}

impl LoggedWrite {
    pub fn to_record(&self) -> WriteRecord {
        let metadata = &self.object["metadata"];
        WriteRecord {
            time: self.time,
            verb: self.verb.to_string(),
            resource: self.resource.clone(),
            status_subresource: self.status_subresource,
            namespace: metadata["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            name: metadata["name"].as_str().unwrap_or_default().to_string(),
            field_manager: self.field_manager.clone(),
            user_agent: self.user_agent.as_deref().unwrap_or_default().to_string(),
            resource_version: self.resource_version,
            object: Value::clone(&self.object),
        }
    }
}

/// The write log; `capacity` None keeps everything, otherwise the newest `capacity` records.
#[derive(Debug, Clone, Default)]
pub struct WriteLog {
    capacity: Option<usize>,
    records: VecDeque<LoggedWrite>,
}

impl WriteLog {
    pub fn new(capacity: Option<usize>) -> Self {
        Self {
            capacity,
            records: VecDeque::new(),
        }
    }

    pub fn push(&mut self, record: LoggedWrite) {
        self.records.push_back(record);
        if let Some(capacity) = self.capacity {
            while self.records.len() > capacity {
                self.records.pop_front();
            }
        }
    }

    /// Every kept write, oldest first (copies the objects: for tests and tools, not hot paths).
    pub fn records(&self) -> Vec<WriteRecord> {
        self.records.iter().map(LoggedWrite::to_record).collect()
    }

    /// Every kept write, oldest first, sharing the objects: cheap enough to take under the
    /// server's lock, and copied with [`LoggedWrite::to_record`] outside it.
    pub fn shared(&self) -> Vec<LoggedWrite> {
        self.records.iter().cloned().collect()
    }

    /// Visits every kept write, oldest first.
    pub fn scan(&self, visit: impl FnMut(&LoggedWrite)) {
        self.records.iter().for_each(visit);
    }

    /// The newest kept write that `matches`.
    pub fn newest(&self, matches: impl FnMut(&&LoggedWrite) -> bool) -> Option<&LoggedWrite> {
        self.records.iter().rev().find(matches)
    }

    /// The newest write, if any.
    pub fn last(&self) -> Option<WriteRecord> {
        self.records.back().map(LoggedWrite::to_record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(version: u64) -> LoggedWrite {
        LoggedWrite {
            time: Utc::now(),
            verb: "create",
            resource: "things".into(),
            status_subresource: false,
            field_manager: "m".into(),
            user_agent: None,
            resource_version: version,
            object: Arc::new(serde_json::json!({"metadata": {"name": "a", "namespace": "ns"}})),
        }
    }

    #[test]
    fn bounded_log_keeps_the_newest() {
        let mut log = WriteLog::new(Some(2));
        for version in 1..=3 {
            log.push(record(version));
        }
        let versions: Vec<u64> = log.records().iter().map(|r| r.resource_version).collect();
        assert_eq!(versions, [2, 3]);
        let last = log.last().unwrap();
        assert_eq!(
            (
                last.name.as_str(),
                last.namespace.as_str(),
                last.verb.as_str()
            ),
            ("a", "ns", "create")
        );
        let mut unbounded = WriteLog::new(None);
        (1..=3).for_each(|v| unbounded.push(record(v)));
        assert_eq!(unbounded.records().len(), 3);
    }

    #[test]
    fn the_shared_log_copies_no_object_and_converts_to_the_same_records() {
        let mut log = WriteLog::new(None);
        log.push(record(1));
        let shared = log.shared();
        assert!(Arc::ptr_eq(&shared[0].object, &log.records[0].object));
        let converted: Vec<WriteRecord> = shared.iter().map(LoggedWrite::to_record).collect();
        assert_eq!(converted, log.records());
    }
}

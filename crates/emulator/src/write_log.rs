//! Every successful mutating request, so tests can check invariants after the fact.

use std::collections::VecDeque;

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
    pub resource_version: u64,
    /// The object after the write (for deletes: as it was removed).
    pub object: Value,
}

/// The write log; `capacity` None keeps everything, otherwise the newest `capacity` records.
#[derive(Debug, Clone, Default)]
pub struct WriteLog {
    capacity: Option<usize>,
    records: VecDeque<WriteRecord>,
}

impl WriteLog {
    pub fn new(capacity: Option<usize>) -> Self {
        Self {
            capacity,
            records: VecDeque::new(),
        }
    }

    pub fn push(&mut self, record: WriteRecord) {
        self.records.push_back(record);
        if let Some(capacity) = self.capacity {
            while self.records.len() > capacity {
                self.records.pop_front();
            }
        }
    }

    pub fn records(&self) -> Vec<WriteRecord> {
        self.records.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(version: u64) -> WriteRecord {
        WriteRecord {
            time: Utc::now(),
            verb: "create".into(),
            resource: "things".into(),
            status_subresource: false,
            namespace: String::new(),
            name: "a".into(),
            field_manager: "m".into(),
            resource_version: version,
            object: Value::Null,
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
        let mut unbounded = WriteLog::new(None);
        (1..=3).for_each(|v| unbounded.push(record(v)));
        assert_eq!(unbounded.records().len(), 3);
    }
}

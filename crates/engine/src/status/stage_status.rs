//! Transition helpers on a stage's status: they write a timestamp only when something changes,
//! so that a step at steady state reproduces the persisted status exactly.

use chrono::{DateTime, Utc};

use crate::messages::{with_time, without_time};
use crate::status::StageStatus;

impl StageStatus {
    /// Set `currentStatusDescription` to `text`, stamped with `now` only if the text changed.
    pub(crate) fn describe(&mut self, text: &str, now: DateTime<Utc>) {
        let unchanged = self
            .current_status_description
            .as_deref()
            .is_some_and(|d| without_time(d) == text);
        if !unchanged {
            self.current_status_description = Some(with_time(text, now));
        }
    }

    /// Set `failureMessage`; `lastStatusCheckTime` records when the check outcome last changed.
    pub(crate) fn set_failure(&mut self, message: Option<String>, now: DateTime<Utc>) {
        if self.failure_message != message {
            self.failure_message = message;
            self.last_status_check_time = Some(now);
        }
    }
}

//! Wake-ups: the engine says when a time-based condition next changes (a delay ends, a window
//! opens); the loop sleeps until the earliest one. One pending wake-up per promotion, the latest
//! request replacing the earlier one.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};

#[derive(Default)]
pub struct Timers {
    by_time: BTreeSet<(DateTime<Utc>, String)>,
    by_name: HashMap<String, DateTime<Utc>>,
}

impl Timers {
    pub fn set(&mut self, name: &str, at: Option<DateTime<Utc>>) {
        if let Some(previous) = self.by_name.remove(name) {
            self.by_time.remove(&(previous, name.to_string()));
        }
        if let Some(at) = at {
            self.by_time.insert((at, name.to_string()));
            self.by_name.insert(name.to_string(), at);
        }
    }

    pub fn next(&self) -> Option<DateTime<Utc>> {
        self.by_time.first().map(|(at, _)| *at)
    }

    /// Removes and returns every promotion due at `now`.
    pub fn take_due(&mut self, now: DateTime<Utc>) -> Vec<String> {
        let mut due = Vec::new();
        while let Some((at, name)) = self.by_time.first().cloned() {
            if at > now {
                break;
            }
            self.by_time.remove(&(at, name.clone()));
            self.by_name.remove(&name);
            due.push(name);
        }
        due
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn latest_request_replaces_and_due_ones_come_out_in_order() {
        let t = |s| Utc.timestamp_opt(s, 0).single().expect("valid time");
        let mut timers = Timers::default();
        timers.set("a", Some(t(30)));
        timers.set("b", Some(t(10)));
        timers.set("a", Some(t(20)));
        assert_eq!(timers.next(), Some(t(10)));
        assert_eq!(timers.take_due(t(25)), vec!["b", "a"]);
        assert!(timers.is_empty());
        timers.set("c", Some(t(5)));
        timers.set("c", None);
        assert_eq!(timers.next(), None);
    }
}

//! What the runner holds between steps: per promotion, the results taken and not yet seen
//! recorded in a persisted status, and the measurements in flight (one at a time per key).

use std::collections::HashMap;

use tokio::task::AbortHandle;
use tollgate_engine::measurement::{Measurement, MeasurementDue, MeasurementKey};

#[derive(Default)]
pub struct Store {
    results: HashMap<String, Vec<Measurement>>,
    in_flight: HashMap<(String, MeasurementKey), AbortHandle>,
}

impl Store {
    pub fn results(&self, promotion: &str) -> Vec<Measurement> {
        self.results.get(promotion).cloned().unwrap_or_default()
    }

    /// Whether `due` is measured already or being measured.
    pub fn has(&self, promotion: &str, key: &MeasurementKey) -> bool {
        self.in_flight
            .contains_key(&(promotion.to_string(), key.clone()))
            || self
                .results
                .get(promotion)
                .is_some_and(|r| r.iter().any(|m| &m.key == key))
    }

    pub fn start(&mut self, promotion: &str, key: MeasurementKey, task: AbortHandle) {
        self.in_flight.insert((promotion.to_string(), key), task);
    }

    /// The measurement ended: with a result to keep, or without (not leading any more).
    pub fn finish(&mut self, promotion: &str, key: &MeasurementKey, taken: Option<Measurement>) {
        self.in_flight.remove(&(promotion.to_string(), key.clone()));
        if let Some(measurement) = taken {
            self.results
                .entry(promotion.to_string())
                .or_default()
                .push(measurement);
        }
    }

    /// After a step whose status is persisted: the results it was given and no longer asks for
    /// are recorded (or their run moved on); results taken during the step stay for the next.
    pub fn settle(&mut self, promotion: &str, given: &[Measurement], still_due: &[MeasurementDue]) {
        let Some(results) = self.results.get_mut(promotion) else {
            return;
        };
        results.retain(|m| {
            let was_given = given.iter().any(|g| g.key == m.key);
            !was_given || still_due.iter().any(|d| d.key() == m.key)
        });
        if results.is_empty() {
            self.results.remove(promotion);
        }
    }

    pub fn forget(&mut self, promotion: &str) {
        self.results.remove(promotion);
    }

    /// Stops every measurement in flight (the controller stops).
    pub fn abort_all(&mut self) {
        for (_, task) in self.in_flight.drain() {
            task.abort();
        }
    }
}

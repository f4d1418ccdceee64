//! What the runner holds between steps: per promotion, the results taken and not yet seen
//! recorded in a persisted status, the measurements in flight (one at a time per key), and the
//! steps waiting for those in flight to end.

use std::collections::HashMap;

use tokio::sync::oneshot;
use tokio::task::AbortHandle;
use tollgate_engine::measurement::{Measurement, MeasurementDue, MeasurementKey};

#[derive(Default)]
pub struct Store {
    results: HashMap<String, Vec<Measurement>>,
    in_flight: HashMap<String, HashMap<MeasurementKey, AbortHandle>>,
    /// Told when the promotion has nothing in flight any more.
    waiters: HashMap<String, Vec<oneshot::Sender<()>>>,
}

/// What a step waiting for its promotion's measurements gets.
pub enum Wait {
    /// Nothing in flight, and no result the step was not given: nothing to wait for.
    Nothing,
    /// Nothing in flight, but results are there (taken since the step read them).
    Ready,
    /// Told once every measurement in flight has ended.
    Pending(oneshot::Receiver<()>),
}

impl Store {
    pub fn results(&self, promotion: &str) -> Vec<Measurement> {
        self.results.get(promotion).cloned().unwrap_or_default()
    }

    /// Whether `due` is measured already or being measured.
    pub fn has(&self, promotion: &str, key: &MeasurementKey) -> bool {
        self.in_flight
            .get(promotion)
            .is_some_and(|keys| keys.contains_key(key))
            || self
                .results
                .get(promotion)
                .is_some_and(|r| r.iter().any(|m| &m.key == key))
    }

    /// No measurement in flight, of any promotion.
    pub fn is_idle(&self) -> bool {
        self.in_flight.is_empty()
    }

    pub fn start(&mut self, promotion: &str, key: MeasurementKey, task: AbortHandle) {
        self.in_flight
            .entry(promotion.to_string())
            .or_default()
            .insert(key, task);
    }

    /// A step that `given` these results waits for the promotion's measurements in flight.
    pub fn wait(&mut self, promotion: &str, given: &[Measurement]) -> Wait {
        if !self.in_flight.contains_key(promotion) {
            let taken = self.results.get(promotion).map_or(&[][..], Vec::as_slice);
            let new = taken.iter().any(|m| !given.iter().any(|g| g.key == m.key));
            return if new { Wait::Ready } else { Wait::Nothing };
        }
        let (tell, told) = oneshot::channel();
        let waiters = self.waiters.entry(promotion.to_string()).or_default();
        waiters.push(tell);
        Wait::Pending(told)
    }

    /// The measurement ended: with a result to keep, or without (not leading any more). Whether
    /// a waiting step took the news (then it steps with the result; nobody else needs telling).
    pub fn finish(
        &mut self,
        promotion: &str,
        key: &MeasurementKey,
        taken: Option<Measurement>,
    ) -> bool {
        if let Some(keys) = self.in_flight.get_mut(promotion) {
            keys.remove(key);
            if keys.is_empty() {
                self.in_flight.remove(promotion);
            }
        }
        if let Some(measurement) = taken {
            self.results
                .entry(promotion.to_string())
                .or_default()
                .push(measurement);
        }
        if self.in_flight.contains_key(promotion) {
            return false;
        }
        let waiters = self.waiters.remove(promotion).unwrap_or_default();
        // `|` rather than `any`: every waiter is told, not only the first that listens.
        waiters
            .into_iter()
            .fold(false, |told, waiter| waiter.send(()).is_ok() | told)
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
        for task in self
            .in_flight
            .drain()
            .flat_map(|(_, keys)| keys.into_values())
        {
            task.abort();
        }
        self.waiters.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_model::analysis::MeasurementVerdict;

    fn key(index: u32) -> MeasurementKey {
        MeasurementKey {
            stage: "canary".into(),
            analysis: "error-rate".into(),
            cluster: None,
            index,
            snapshot_index: 1,
            wave: None,
        }
    }

    fn result(index: u32) -> Measurement {
        Measurement {
            key: key(index),
            taken_at: chrono::DateTime::UNIX_EPOCH,
            value: Some("0".into()),
            verdict: MeasurementVerdict::Successful,
            error: None,
            comparison: None,
        }
    }

    fn in_flight(store: &mut Store, index: u32) {
        let task = tokio::spawn(std::future::pending::<()>());
        store.start("p", key(index), task.abort_handle());
    }

    #[tokio::test]
    async fn a_waiting_step_is_told_once_the_last_measurement_in_flight_ends_and_takes_its_news() {
        let mut store = Store::default();
        in_flight(&mut store, 0);
        in_flight(&mut store, 1);
        let Wait::Pending(mut told) = store.wait("p", &[]) else {
            panic!("two measurements are in flight");
        };
        assert!(
            !store.finish("p", &key(0), Some(result(0))),
            "one still in flight"
        );
        assert!(
            told.try_recv().is_err(),
            "not told before the last one ends"
        );
        assert!(
            store.finish("p", &key(1), Some(result(1))),
            "the step takes the news"
        );
        assert!(told.try_recv().is_ok());
        assert_eq!(store.results("p").len(), 2);
        store.abort_all();
    }

    #[tokio::test]
    async fn a_result_nobody_waits_for_any_more_is_not_taken_so_it_pokes() {
        let mut store = Store::default();
        in_flight(&mut store, 0);
        let Wait::Pending(mut told) = store.wait("p", &[]) else {
            panic!("a measurement is in flight");
        };
        told.close();
        assert!(
            !store.finish("p", &key(0), Some(result(0))),
            "the step stopped waiting: its promotion must be poked"
        );
        assert_eq!(store.results("p").len(), 1, "the result is kept");
    }

    #[test]
    fn with_nothing_in_flight_a_step_waits_only_for_results_it_was_not_given() {
        let mut store = Store::default();
        assert!(matches!(store.wait("p", &[]), Wait::Nothing));
        store.finish("p", &key(0), Some(result(0)));
        assert!(matches!(store.wait("p", &[]), Wait::Ready));
        assert!(matches!(store.wait("p", &[result(0)]), Wait::Nothing));
    }
}

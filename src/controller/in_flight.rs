//! The steps the loop has handed out and not yet seen end: waiting for a slot, or running. At
//! most one step per promotion at a time; a promotion the scheduler hands out again while its
//! step runs is stepped once more after it (something changed during the step), and one
//! handed out again while it waits keeps its place with the newer hand-out.
//!
//! A continuous pipeline, as a work queue: a slot that frees takes the next promotion at once.
//! The loop used to step batches and wait for the slowest step of each before looking at what
//! changed meanwhile, so a stage completing during a batch waited for the whole batch (issue
//! #49: 1,000 stages completing in the same instant).

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;

use futures::stream::FuturesUnordered;

use super::scheduler::Step;

/// A running step's future: its promotion and how it ended.
pub type Running<T> = Pin<Box<dyn Future<Output = (String, T)> + Send>>;

pub struct InFlight<T> {
    running: FuturesUnordered<Running<T>>,
    running_names: HashSet<String>,
    /// Promotions waiting for a slot, in the order they were handed out.
    waiting: VecDeque<String>,
    /// Their newest hand-out (its presence in git as of then).
    waiting_steps: HashMap<String, Step>,
    /// Handed out again while running: stepped once more when the running step ends.
    again: HashSet<String>,
}

impl<T> Default for InFlight<T> {
    fn default() -> Self {
        InFlight {
            running: FuturesUnordered::new(),
            running_names: HashSet::new(),
            waiting: VecDeque::new(),
            waiting_steps: HashMap::new(),
            again: HashSet::new(),
        }
    }
}

impl<T> InFlight<T> {
    /// Takes in the steps the scheduler handed out.
    pub fn hand(&mut self, steps: Vec<Step>) {
        for step in steps {
            if self.running_names.contains(&step.name) {
                self.again.insert(step.name);
            } else if let Some(waiting) = self.waiting_steps.get_mut(&step.name) {
                *waiting = step;
            } else {
                self.waiting.push_back(step.name.clone());
                self.waiting_steps.insert(step.name.clone(), step);
            }
        }
    }

    /// Starts waiting steps, oldest first, until `slots` run.
    pub fn fill(&mut self, slots: usize, mut start: impl FnMut(Step) -> Running<T>) {
        while self.running.len() < slots.max(1) {
            let Some(name) = self.waiting.pop_front() else {
                return;
            };
            let Some(step) = self.waiting_steps.remove(&name) else {
                continue;
            };
            self.running_names.insert(name);
            self.running.push(start(step));
        }
    }

    /// The running steps, as a stream of their ends (empty: never yields).
    pub fn running(&mut self) -> &mut FuturesUnordered<Running<T>> {
        &mut self.running
    }

    pub fn is_running(&self) -> bool {
        !self.running.is_empty()
    }

    /// `name`'s step ended: whether it must be stepped once more.
    pub fn ended(&mut self, name: &str) -> bool {
        self.running_names.remove(name);
        self.again.remove(name)
    }

    /// Nothing waiting and nothing running.
    pub fn is_empty(&self) -> bool {
        self.running.is_empty() && self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::controller::desired::GitPresence;

    fn step(name: &str) -> Step {
        Step {
            name: name.to_string(),
            presence: GitPresence::Removed { last: None },
        }
    }

    fn ends(name: &str) -> Running<()> {
        let name = name.to_string();
        Box::pin(async move { (name, ()) })
    }

    fn started(flight: &mut InFlight<()>, slots: usize) -> Vec<String> {
        let mut names = Vec::new();
        flight.fill(slots, |step| {
            names.push(step.name.clone());
            ends(&step.name)
        });
        names
    }

    #[test]
    fn steps_start_in_the_order_handed_out_as_slots_free() {
        let mut flight = InFlight::default();
        flight.hand(vec![step("c"), step("a"), step("b")]);
        assert_eq!(started(&mut flight, 2), ["c", "a"]);
        assert!(started(&mut flight, 2).is_empty(), "both slots taken");
        let (name, ()) = futures::executor::block_on(flight.running().next()).expect("ends");
        assert!(!flight.ended(&name));
        assert_eq!(
            started(&mut flight, 2),
            ["b"],
            "a freed slot takes the next at once"
        );
    }

    #[test]
    fn a_promotion_never_has_two_steps_at_once_and_is_stepped_again_after_a_touch_mid_step() {
        let mut flight = InFlight::default();
        flight.hand(vec![step("a")]);
        assert_eq!(started(&mut flight, 4), ["a"]);
        flight.hand(vec![step("a")]);
        assert!(started(&mut flight, 4).is_empty(), "not twice at once");
        assert!(flight.ended("a"), "handed out while running: once more");
        assert!(!flight.ended("a"), "only once more");
    }

    #[test]
    fn a_waiting_promotion_handed_out_again_keeps_its_place_with_the_newer_hand_out() {
        let mut flight = InFlight::default();
        flight.hand(vec![step("a"), step("b")]);
        let newer = Step {
            name: "a".into(),
            presence: GitPresence::RemovalHeld {
                last: None,
                reason: "newer".into(),
            },
        };
        flight.hand(vec![newer]);
        let mut seen = Vec::new();
        flight.fill(1, |step| {
            seen.push(step.presence.clone());
            ends(&step.name)
        });
        assert!(
            matches!(&seen[..], [GitPresence::RemovalHeld { reason, .. }] if reason == "newer")
        );
        assert_eq!(started(&mut flight, 2), ["b"]);
    }
}

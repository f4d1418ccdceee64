//! Every promotion with series, and `tollgate_stage_transitions_total` counted beside it.
//!
//! A promotion's name is shared by all its series rather than copied into each. The stage
//! transition counts live here too: a counter `Family` held one allocated atomic per series under
//! a hashed copy of its labels, ~5 MB at 10,000 promotions of four stages. They are written at
//! scrape time instead; what a scrape shows is the same.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;

use super::StageLabels;

/// Per promotion (by its shared name): the stages it started, each with how often.
pub type Series = HashMap<Arc<str>, Vec<(Arc<str>, u64)>>;

#[derive(Clone, Debug, Default)]
pub struct PromotionSeries(Arc<Mutex<Series>>);

impl PromotionSeries {
    pub fn lock(&self) -> MutexGuard<'_, Series> {
        // Plain counts: a panic cannot leave the map half-updated in a way that matters.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The promotion's name as its series share it, registering the promotion if it has none yet.
pub fn shared_name(series: &mut Series, promotion: &str) -> Arc<str> {
    if let Some((shared, _)) = series.get_key_value(promotion) {
        return shared.clone();
    }
    let shared: Arc<str> = Arc::from(promotion);
    series.insert(shared.clone(), Vec::new());
    shared
}

/// Counts one start of `stage` of `promotion`.
pub fn count_transition(series: &mut Series, promotion: &str, stage: &str) {
    let promotion = shared_name(series, promotion);
    let stages = series.entry(promotion).or_default();
    match stages.iter_mut().find(|(known, _)| **known == *stage) {
        Some((_, count)) => *count += 1,
        None => stages.push((Arc::from(stage), 1)),
    }
}

impl Collector for PromotionSeries {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "stage_transitions",
            "Stages started, by promotion and stage",
            None,
            MetricType::Counter,
        )?;
        let series = self.lock();
        let mut counts: Vec<(&Arc<str>, &Arc<str>, u64)> = series
            .iter()
            .flat_map(|(promotion, stages)| {
                stages
                    .iter()
                    .map(move |(stage, count)| (promotion, stage, *count))
            })
            .collect();
        counts.sort_unstable();
        for (promotion, stage, count) in counts {
            let labels = StageLabels {
                promotion: promotion.clone(),
                stage: stage.clone(),
            };
            ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

//! `tollgate_stage_activity`: one series per stage of each promotion, 1, labelled with what the
//! engine says the stage is doing (its `StageActivity` kind) — the same answer every view reads
//! from `PromotionStatus::pipeline()`. Written at scrape time from one kind per stage, so a stage
//! moving on leaves no stale series behind.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use tollgate_engine::PromotionStatus;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActivityLabels {
    promotion: Arc<str>,
    stage: Arc<str>,
    activity: &'static str,
}

/// A promotion's stages, in pipeline order, each with the kind of its activity.
type Pipeline = Vec<(Arc<str>, &'static str)>;

/// Each promotion's pipeline.
#[derive(Clone, Debug, Default)]
pub struct StageActivities(Arc<Mutex<BTreeMap<Arc<str>, Pipeline>>>);

impl StageActivities {
    fn stages(&self) -> MutexGuard<'_, BTreeMap<Arc<str>, Pipeline>> {
        // Plain values: a panic cannot leave the map half-updated in a way that matters.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn set(&self, promotion: &Arc<str>, status: &PromotionStatus) {
        let mut stages = self.stages();
        let kept = stages.entry(promotion.clone()).or_default();
        let pipeline = status.pipeline();
        let same_names = kept.len() == pipeline.len()
            && kept.iter().zip(&pipeline).all(|((n, _), v)| **n == *v.name);
        if same_names {
            for ((_, kind), view) in kept.iter_mut().zip(&pipeline) {
                *kind = view.activity.kind();
            }
        } else {
            *kept = pipeline
                .iter()
                .map(|view| (Arc::from(view.name), view.activity.kind()))
                .collect();
        }
    }

    pub fn remove(&self, promotion: &str) {
        self.stages().remove(promotion);
    }
}

impl Collector for StageActivities {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "stage_activity",
            "1 per stage, labelled with what the engine says the stage is doing (the activity every view shows)",
            None,
            MetricType::Gauge,
        )?;
        for (promotion, stages) in self.stages().iter() {
            for (stage, activity) in stages {
                let labels = ActivityLabels {
                    promotion: promotion.clone(),
                    stage: stage.clone(),
                    activity,
                };
                ConstGauge::new(1).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

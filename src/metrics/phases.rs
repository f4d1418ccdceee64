//! `tollgate_promotion_phase`: one series per promotion and phase, 1 for the phase it is in.
//!
//! Eleven gauges per promotion (each an allocated atomic under an 11-fold copy of its label
//! set) weighed ~10 MB at 10,000 promotions. The series are written at scrape time from one
//! phase per promotion instead; what a scrape shows is the same.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use tollgate_engine::Phase;

use super::{ALL_PHASES, PhaseLabels, phase_name};

/// The phase of every promotion with series, by its name as the series share it.
#[derive(Clone, Debug, Default)]
pub struct PhaseGauges(Arc<Mutex<BTreeMap<Arc<str>, Phase>>>);

impl PhaseGauges {
    fn phases(&self) -> MutexGuard<'_, BTreeMap<Arc<str>, Phase>> {
        // Plain values: a panic cannot leave the map half-updated in a way that matters.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn set(&self, promotion: &Arc<str>, phase: &Phase) {
        self.phases().insert(promotion.clone(), phase.clone());
    }

    pub fn remove(&self, promotion: &str) {
        self.phases().remove(promotion);
    }
}

impl Collector for PhaseGauges {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "promotion_phase",
            "1 for the phase a promotion is in, 0 for every other phase",
            None,
            MetricType::Gauge,
        )?;
        for (promotion, current) in self.phases().iter() {
            for phase in &ALL_PHASES {
                let labels = PhaseLabels {
                    promotion: promotion.clone(),
                    phase: phase_name(phase),
                };
                ConstGauge::new(i64::from(phase == current))
                    .encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

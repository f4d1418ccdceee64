//! `tollgate_delivery_*`: delivery figures per promotion and stage (the whole pipeline has
//! `stage=""`), computed by the engine (`tollgate_engine::delivery`) from the run history each
//! promotion's status keeps, when the status is observed. Only the gauges' values are kept: a run
//! history per promotion weighed ~24 MB at 10,000 promotions once statuses were no longer
//! shared (they are kept deflated, see `cluster::stored_status`), and collecting every row at
//! scrape time grew an 8 MB vector per scrape. A row is its shared stage name and five plain
//! values, NaN for "no series" (an `Option<f64>` is twice an `f64`, and each row's own copy of
//! its stage name was another allocation: ~3.5 MB together at 10,000 promotions of four stages,
//! by their sizes).
//! Lead time counts from the run's start: the metrics have no git access to read commit times.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use tollgate_engine::PromotionStatus;
use tollgate_engine::delivery::{Figures, figures};
use tollgate_engine::status::run_history::RunRecord;

use super::shared_names::SharedNames;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    promotion: Arc<str>,
    stage: Arc<str>,
}

/// One row: its `stage` label and each of [`GAUGES`]' values (NaN: no series).
type Row = (Arc<str>, [f64; GAUGES.len()]);

/// Per promotion: the whole pipeline's row, then each stage's in pipeline order.
type Kept = Vec<Row>;

#[derive(Debug, Default)]
struct Delivery {
    by_promotion: BTreeMap<Arc<str>, Kept>,
    /// Every stage name a row carries, once.
    stages: SharedNames,
}

#[derive(Clone, Debug, Default)]
pub struct DeliverySeries(Arc<Mutex<Delivery>>);

impl DeliverySeries {
    fn kept(&self) -> MutexGuard<'_, Delivery> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn set(&self, promotion: &Arc<str>, status: &PromotionStatus) {
        let runs: &[RunRecord] = &status.runs;
        let whole = std::iter::once(("", None));
        let stages = status
            .pipeline()
            .into_iter()
            .map(|view| (view.name, Some(view.name)));
        let values: Vec<(&str, [f64; GAUGES.len()])> = whole
            .chain(stages)
            .map(|(label, stage)| {
                let figures = figures(runs, stage);
                (
                    label,
                    GAUGES.map(|gauge| (gauge.value)(&figures).unwrap_or(f64::NAN)),
                )
            })
            .collect();
        let mut kept = self.kept();
        let rows = values
            .into_iter()
            .map(|(label, values)| (kept.stages.get(label), values))
            .collect();
        kept.by_promotion.insert(promotion.clone(), rows);
    }

    pub fn remove(&self, promotion: &str) {
        let mut kept = self.kept();
        if kept.by_promotion.remove(promotion).is_some() {
            kept.stages.prune();
        }
    }
}

/// One gauge family: `name`, `help`, and the value per figures (`None`: no series).
struct Gauge {
    name: &'static str,
    help: &'static str,
    value: fn(&Figures) -> Option<f64>,
}

const GAUGES: [Gauge; 5] = [
    Gauge {
        name: "delivery_deployments",
        help: "Runs of the kept history in which the stage (stage=\"\": the pipeline) completed",
        value: |f| Some(f64::from(f.deployments)),
    },
    Gauge {
        name: "delivery_runs_ended",
        help: "Runs of the kept history that reached the stage and ended",
        value: |f| Some(f64::from(f.runs_ended)),
    },
    Gauge {
        name: "delivery_change_failure_ratio",
        help: "Runs halted or rolled back of the runs that reached the stage and ended",
        value: Figures::change_failure_rate,
    },
    Gauge {
        name: "delivery_lead_time_seconds",
        help: "Lead time of the newest deployment: from the run's start to the stage completed",
        value: |f| f.lead_time_last.map(seconds),
    },
    Gauge {
        name: "delivery_time_to_restore_seconds",
        help: "Mean time from a failed run's failure to its rollback restored or the next completed run",
        value: |f| f.time_to_restore_mean.map(seconds),
    },
];

fn seconds(duration: chrono::Duration) -> f64 {
    duration.num_milliseconds() as f64 / 1000.0
}

impl Collector for DeliverySeries {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let kept = self.kept();
        for (index, gauge) in GAUGES.iter().enumerate() {
            let mut family =
                encoder.encode_descriptor(gauge.name, gauge.help, None, MetricType::Gauge)?;
            for (promotion, rows) in &kept.by_promotion {
                for (stage, values) in rows {
                    let value = values[index];
                    if value.is_nan() {
                        continue;
                    }
                    let labels = StageLabels {
                        promotion: promotion.clone(),
                        stage: stage.clone(),
                    };
                    ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        Ok(())
    }
}

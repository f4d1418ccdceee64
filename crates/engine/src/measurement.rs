//! Measurements of analysis gates across the I/O edge: the engine asks for one
//! ([`MeasurementDue`], with its resolved query) and the controller's analysis runner feeds back
//! what it measured ([`Measurement`]), which the next step records in status and judges.

use chrono::{DateTime, Utc};
use tollgate_model::analysis::MeasurementVerdict;

use crate::status::comparison_record::{ComparisonDue, ComparisonSummary};

/// A measurement the engine asks for. Asked again at every step until its result is recorded
/// (the runner deduplicates by [`MeasurementDue::key`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeasurementDue {
    pub stage: String,
    pub analysis: String,
    /// `namespace/name` of the cluster measured (`scope: Cluster`).
    pub cluster: Option<String>,
    /// Which measurement of the analysis run (0-based).
    pub index: u32,
    /// The run's snapshot: a result for another run is never recorded.
    pub snapshot_index: u64,
    /// The wave whose provisioning started the run (a waved stage analyses each wave).
    pub wave: Option<u32>,
    pub due_at: DateTime<Utc>,
    /// The query or URL with its templates rendered (for a comparison: for the test cohort).
    pub query: String,
    /// A comparative analysis (issue #48): the cohorts and the baseline's query.
    pub comparison: Option<Box<ComparisonDue>>,
}

impl MeasurementDue {
    /// Identifies the measurement across steps, restarts and replicas.
    pub fn key(&self) -> MeasurementKey {
        MeasurementKey {
            stage: self.stage.clone(),
            analysis: self.analysis.clone(),
            cluster: self.cluster.clone(),
            index: self.index,
            snapshot_index: self.snapshot_index,
            wave: self.wave,
        }
    }
}

/// Which measurement a result is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MeasurementKey {
    pub stage: String,
    pub analysis: String,
    pub cluster: Option<String>,
    pub index: u32,
    pub snapshot_index: u64,
    pub wave: Option<u32>,
}

/// A measurement taken by the analysis runner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Measurement {
    pub key: MeasurementKey,
    pub taken_at: DateTime<Utc>,
    /// The measured value as text (a number, a list, JSON), when there was one.
    pub value: Option<String>,
    pub verdict: MeasurementVerdict,
    /// Why it errored (or why there was no data).
    pub error: Option<String>,
    /// A comparative analysis: what the comparison measured (cohorts, medians, p-value).
    pub comparison: Option<Box<ComparisonSummary>>,
}

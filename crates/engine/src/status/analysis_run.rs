//! The runs of a stage's analyses as kept in its status: per analysis (and cluster, for
//! `scope: Cluster`) the measurements taken, bounded, with their values and verdicts, and where
//! the run stands. Persisted with the step, so a restart or a new leader neither loses nor repeats
//! a measurement.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tollgate_model::analysis::MeasurementVerdict;

use crate::status::comparison_record::{ComparisonDue, ComparisonSummary};

/// Measurements kept per run (the newest); the counts cover all of them.
pub const MEASUREMENTS_KEPT: usize = 10;

/// One analysis of a stage (for one cluster, under `scope: Cluster`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisRun {
    pub name: String,
    /// `namespace/name` of the cluster (`scope: Cluster`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// The wave whose provisioning started it (waved stages: each wave is analysed before the
    /// next one starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave: Option<u32>,
    /// Between waves an approval through git let this inconclusive run pass: the approving
    /// commit (consumed then, so it never passes another run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// Measured and shown, never decides.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// The query or URL, its templates rendered (a comparison's: for the test cohort).
    pub query: String,
    /// A comparative analysis: its cohorts and the baseline's query (issue #48).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Box<ComparisonDue>>,
    /// When the first measurement is due: the stage's provisioning plus `initialDelay`.
    pub started_at: DateTime<Utc>,
    /// Measurements needed, and taken so far.
    pub count: u32,
    #[serde(default)]
    pub taken: u32,
    #[serde(default)]
    pub successful: u32,
    #[serde(default)]
    pub failed: u32,
    #[serde(default)]
    pub inconclusive: u32,
    #[serde(default)]
    pub errors: u32,
    #[serde(default)]
    pub consecutive_errors: u32,
    pub phase: AnalysisPhase,
    /// Why it ended as it did (the limit passed, the last value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The newest measurements, at most [`MEASUREMENTS_KEPT`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measurements: Vec<MeasurementRecord>,
}

/// Where an analysis run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AnalysisPhase {
    /// Measurements remain to be taken.
    Running,
    /// `count` measurements taken within the limits.
    Successful,
    /// More failed measurements than `failureLimit`, or errors in a row over
    /// `consecutiveErrorLimit`.
    Failed,
    /// More inconclusive measurements than `inconclusiveLimit`: held like a manual gate.
    Inconclusive,
    /// Its stage ended before it did (the stage completed, or the run failed): nothing more is
    /// measured. The message says why.
    Cancelled,
}

impl AnalysisPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            AnalysisPhase::Running => "Running",
            AnalysisPhase::Successful => "Successful",
            AnalysisPhase::Failed => "Failed",
            AnalysisPhase::Inconclusive => "Inconclusive",
            AnalysisPhase::Cancelled => "Cancelled",
        }
    }
}

/// One measurement as status keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MeasurementRecord {
    pub index: u32,
    pub at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[schemars(with = "VerdictSchema")]
    pub verdict: MeasurementVerdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A comparative analysis: the cohorts that answered, their medians, the effect, U and
    /// the p-value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Box<ComparisonSummary>>,
}

/// The schema of [`MeasurementVerdict`] (the model crate has no schema derive).
#[derive(JsonSchema)]
#[allow(dead_code)]
enum VerdictSchema {
    Successful,
    Failed,
    Inconclusive,
    Error,
}

impl AnalysisRun {
    /// The run's newest comparison with its verdict, as the live view and the run history show
    /// it: `latency: prod-1, prod-2 (median 0.26) vs OtherWaves … p=0.0012 (Failed)`.
    pub fn newest_comparison(&self) -> Option<String> {
        let newest = self.measurements.iter().max_by_key(|m| m.index)?;
        let compared = newest.comparison.as_deref()?;
        Some(format!(
            "{}: {} ({})",
            self.name,
            compared.describe(),
            newest.verdict.as_str()
        ))
    }
}

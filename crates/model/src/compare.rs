//! A comparative analysis (issue #48): instead of a threshold, the clusters that took the new
//! snapshot are compared with clusters still on the previous one, by a rank test. This is the
//! `compare:` block of a RolloutPolicy analysis (names fixed by the issue).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which clusters the test cohort (the stage's updated clusters) is compared with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Baseline {
    /// The stage's waves not yet reached (still on the previous snapshot), at the same instants.
    #[default]
    OtherWaves,
    /// The next stage's clusters, which run the previous snapshot until it starts.
    NextStage,
    /// The same clusters over the same length of time just before the stage was applied.
    Before,
}

/// The statistical test.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RankTestKind {
    /// Mann-Whitney U, tie corrected; exact for small cohorts.
    #[default]
    MannWhitneyU,
}

/// Which direction of difference is a regression.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Worse {
    /// Higher is worse (latency, error rate).
    #[default]
    Higher,
    /// Lower is worse (throughput, success rate).
    Lower,
    /// Any difference is.
    Either,
}

/// How many samples one cluster gives a measurement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Samples {
    /// One sample per cluster: the instant query's value.
    #[default]
    Instant,
    /// Every point of a range query over the analysis's `interval` up to the measurement (for
    /// `Before`: up to the stage's apply).
    Range,
}

/// `confidence` when a comparison sets none.
pub const DEFAULT_CONFIDENCE: f64 = 0.95;
/// `minClusters` when a comparison sets none.
pub const DEFAULT_MIN_CLUSTERS: u32 = 3;

/// The `compare:` block.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Compare {
    #[serde(default)]
    pub baseline: Baseline,
    #[serde(default)]
    pub test: RankTestKind,
    #[serde(default)]
    pub worse: Worse,
    /// Reject "no difference" at this level (strictly between 0 and 1); default
    /// [`DEFAULT_CONFIDENCE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Only a difference of the medians at least this large is a regression: a percentage of the
    /// baseline's median (`"10%"`); default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_effect: Option<String>,
    /// Fewer samples in either cohort is no data; default [`DEFAULT_MIN_CLUSTERS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_clusters: Option<u32>,
    /// One sample per cluster (`Instant`), or every point of a range query (`Range`).
    #[serde(default, skip_serializing_if = "Samples::is_instant")]
    pub samples: Samples,
}

impl Samples {
    fn is_instant(&self) -> bool {
        *self == Samples::Instant
    }
}

impl Compare {
    pub fn confidence(&self) -> f64 {
        self.confidence.unwrap_or(DEFAULT_CONFIDENCE)
    }

    pub fn min_clusters(&self) -> usize {
        self.min_clusters.unwrap_or(DEFAULT_MIN_CLUSTERS) as usize
    }

    /// `minEffect` as a fraction (`"10%"` → 0.1); 0 when unset; `None` when not a percentage.
    pub fn min_effect(&self) -> Option<f64> {
        match &self.min_effect {
            None => Some(0.0),
            Some(text) => parse_percent(text),
        }
    }
}

/// `"12.5%"` → 0.125; `None` for anything else (negative, missing `%`, not a number).
pub fn parse_percent(text: &str) -> Option<f64> {
    let number: f64 = text.trim().strip_suffix('%')?.trim().parse().ok()?;
    (number.is_finite() && number >= 0.0).then_some(number / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_percentages() {
        let compare: Compare = serde_json::from_str(r#"{"worse": "Lower", "minEffect": "10%"}"#)
            .expect("a compare block");
        assert_eq!(compare.baseline, Baseline::OtherWaves);
        assert_eq!(compare.worse, Worse::Lower);
        assert_eq!((compare.confidence(), compare.min_clusters()), (0.95, 3));
        assert_eq!(compare.min_effect(), Some(0.1));
        assert_eq!(parse_percent("ten"), None);
        assert_eq!(parse_percent("-5%"), None);
        let unknown = serde_json::from_str::<Compare>(r#"{"baseline": "Yesterday"}"#);
        assert!(unknown.is_err());
    }
}

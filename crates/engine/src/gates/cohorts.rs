//! The cohorts of a comparative analysis (issue #48): the test cohort is the stage's updated
//! clusters (the waves reached); the baseline, by `compare.baseline`:
//! - `OtherWaves`: the clusters of the stage's waves not reached yet (still on the previous
//!   snapshot), measured at the same instants. Once the last of several waves is reached none
//!   is left: its run ends at once, successful (the earlier waves' comparisons decided); a
//!   stage of one wave has no baseline at all, which is no data (`onNoData`);
//! - `NextStage`: the clusters the next stage selects (it runs the previous snapshot until it
//!   starts), less any of the stage's own;
//! - `Before`: the same clusters, measured up to the instant the stage was applied.
//!
//! Fixed when the run starts, as its query is.

use chrono::{DateTime, Utc};
use tollgate_model::analysis::Analysis;
use tollgate_model::compare::{Baseline, Compare, Samples};

use crate::gates::comparison::ComparisonDue;
use crate::status::WaveProgress;

/// What the cohorts are chosen from.
pub(crate) struct CohortSources<'a> {
    /// The clusters analysed: the stage's members, or the waves reached.
    pub members: &'a [String],
    pub waves: Option<&'a WaveProgress>,
    /// The clusters the next stage selects (`namespace/name`, sorted); empty in the last stage.
    pub next_stage: &'a [String],
    /// When the stage's profile was applied.
    pub applied_at: DateTime<Utc>,
}

/// The cohorts of `analysis`'s comparison, its baseline query still to be rendered
/// (`baseline_query` empty).
pub(crate) fn cohorts(
    analysis: &Analysis,
    compare: &Compare,
    sources: &CohortSources<'_>,
) -> ComparisonDue {
    let test_clusters = sources.members.to_vec();
    let (baseline_clusters, baseline_until) = match compare.baseline {
        Baseline::OtherWaves => (not_reached(sources.waves), None),
        Baseline::NextStage => {
            let others = sources
                .next_stage
                .iter()
                .filter(|c| !sources.members.contains(c))
                .cloned()
                .collect();
            (others, None)
        }
        Baseline::Before => (test_clusters.clone(), Some(sources.applied_at)),
    };
    let range_seconds = (compare.samples == Samples::Range).then(|| analysis.interval().as_secs());
    ComparisonDue {
        baseline: compare.baseline,
        test_clusters,
        baseline_clusters,
        baseline_query: String::new(),
        baseline_until,
        range_seconds: range_seconds.map(|s| s.max(1)),
    }
}

/// Why a comparison needs no measurement: an `OtherWaves` baseline in the last of several waves,
/// where no cluster is left on the previous snapshot and the earlier waves were compared.
pub(crate) fn nothing_left_to_compare(
    due: &ComparisonDue,
    waves: Option<&WaveProgress>,
) -> Option<String> {
    let last_of_several = waves.is_some_and(|w| w.total() > 1 && w.reached >= w.total());
    (due.baseline == Baseline::OtherWaves && due.baseline_clusters.is_empty() && last_of_several)
        .then(|| {
            "the last wave: no wave is left on the previous snapshot to compare with (the earlier waves' comparisons decided)".to_string()
        })
}

/// The clusters of the waves not reached, sorted.
fn not_reached(waves: Option<&WaveProgress>) -> Vec<String> {
    let Some(waves) = waves else {
        return Vec::new();
    };
    let reached = usize::try_from(waves.reached).unwrap_or(usize::MAX);
    let mut clusters: Vec<String> = waves
        .clusters
        .iter()
        .skip(reached)
        .flatten()
        .cloned()
        .collect();
    clusters.sort();
    clusters
}

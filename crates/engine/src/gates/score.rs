//! `stages.<stage>.score` (issue #48, as Kayenta scores a canary): the stage's deciding
//! analyses are judged together rather than each on its own. Once every one of the wave's runs
//! has ended, the percentage that succeeded (an inconclusive run approved through git counts
//! as passed) is the score: at least `pass` lets the stage go on, at least `marginal` holds it
//! like an inconclusive analysis (until approved through git), less fails it. Until then no
//! single run fails or holds the stage. `scope: Cluster` failures still count against the
//! failure budget, cluster by cluster.

use tollgate_model::policy::{Score, ScoreBand};

use crate::status::analysis_run::{AnalysisPhase, AnalysisRun};

/// What the score says of the stage.
#[derive(Debug, PartialEq)]
pub(crate) enum ScoreVerdict {
    /// A run is still measuring (or none decides): nothing yet.
    Pending,
    Pass,
    /// Held like an inconclusive analysis: why.
    Marginal(String),
    /// The stage fails: why.
    Fail(String),
}

/// The score of the wave's deciding `scope: Stage` runs.
pub(crate) fn judge_together(
    runs: &[AnalysisRun],
    wave: Option<u32>,
    score: Score,
) -> ScoreVerdict {
    let deciding: Vec<&AnalysisRun> = runs
        .iter()
        .filter(|r| !r.dry_run && r.wave == wave && r.cluster.is_none())
        .collect();
    if deciding.is_empty() || deciding.iter().any(|r| r.phase == AnalysisPhase::Running) {
        return ScoreVerdict::Pending;
    }
    let passed = deciding.iter().filter(|r| passes(r)).count();
    let percent = passed * 100 / deciding.len();
    let names = |pass: bool| {
        deciding
            .iter()
            .filter(|r| passes(r) == pass)
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let why = format!(
        "score {percent}% ({passed} of {} analyses passed; not: {}), pass {}%, marginal {}%",
        deciding.len(),
        names(false),
        score.pass,
        score.marginal
    );
    match score.band(passed, deciding.len()) {
        ScoreBand::Pass => ScoreVerdict::Pass,
        ScoreBand::Marginal => ScoreVerdict::Marginal(format!("marginal {why}")),
        ScoreBand::Fail => ScoreVerdict::Fail(format!("failed {why}")),
    }
}

fn passes(run: &AnalysisRun) -> bool {
    match run.phase {
        AnalysisPhase::Successful => true,
        AnalysisPhase::Inconclusive => run.approved_by.is_some(),
        AnalysisPhase::Running | AnalysisPhase::Failed | AnalysisPhase::Cancelled => false,
    }
}

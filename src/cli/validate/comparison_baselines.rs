//! Whether the baseline a stage's comparative analysis names exists (issue #48): `NextStage`
//! compares with the next stage's clusters, so the stage must not be the last stage of a
//! promotion the policy governs. Only the promotions say which stage comes next; the policy's
//! own rules (`OtherWaves` needs waves) are the manifest reader's.

use tollgate_manifest::located::child_path;
use tollgate_manifest::model::ClusterPromotion;
use tollgate_manifest::{Diagnostic, RolloutPolicy, Severity};
use tollgate_model::compare::Baseline;

use super::policies::key_position;

/// One error per stage override and `NextStage` analysis whose stage is last in a governed
/// promotion, naming those promotions.
pub fn diagnostics<'t>(
    policy: &RolloutPolicy,
    file: &str,
    line: u32,
    promotions: &[&ClusterPromotion],
    text_of: &impl Fn(&str) -> Option<&'t str>,
) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    for stage in policy.spec.stages.keys() {
        let last_in: Vec<&str> = promotions
            .iter()
            .filter(|p| p.spec.stages.last().is_some_and(|s| &s.name == stage))
            .map(|p| p.name())
            .collect();
        if last_in.is_empty() {
            continue;
        }
        let (line, column) = text_of(file)
            .and_then(|text| key_position(text, line, &["spec", "stages", stage, "analyses"]))
            .unwrap_or((line, 1));
        let next_stage_analyses = policy
            .for_stage(stage)
            .analyses
            .into_iter()
            .filter(|a| a.compare.as_ref().map(|c| c.baseline) == Some(Baseline::NextStage));
        for analysis in next_stage_analyses {
            diagnostics.push(Diagnostic {
                severity: Severity::Error,
                code: "compare-baseline",
                file: file.to_string(),
                line,
                column,
                path: child_path(&child_path("spec.stages", stage), "analyses"),
                message: format!(
                    "Invalid value: {:?} compares with baseline NextStage, the next stage's clusters, but stage {stage} is the last stage of ClusterPromotion {}: use baseline Before (the same clusters before the stage was applied)",
                    analysis.name,
                    last_in.join(", "),
                ),
            });
        }
    }
    diagnostics
}

//! The gates of each stage of a changed promotion (issue #32): what must hold before the stage
//! completes besides provisioning and its soak. A manual trigger's approval, and each analysis
//! its governing policy names for the stage, with its provider, `count × interval` and by how
//! much it extends the soak. A stage whose only gate is a manual approval has no row: its
//! `approval` row already says whether that approval is given.

use tollgate_manifest::RolloutPolicy;
use tollgate_manifest::model::ClusterPromotion;
use tollgate_model::duration::format_go_duration;
use tollgate_model::model::Trigger;

use crate::cli::analysis_gates::{describe, extends_soak_by, format_soak, soak_of};

/// One `gates` row per stage with analyses: `production: manual approval, analysis error-rate
/// (prometheus, 6 × 30s after 30s; extends the 1m0s soak by 2m0s)`.
pub fn rows(
    promotion: &ClusterPromotion,
    policy: Option<&RolloutPolicy>,
) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    for stage in &promotion.spec.stages {
        let analyses = policy.map_or_else(Vec::new, |p| p.for_stage(&stage.name).analyses);
        if analyses.is_empty() {
            continue;
        }
        let mut gates = Vec::new();
        if matches!(stage.trigger, Some(Trigger::Manual(_))) {
            gates.push("manual approval".to_string());
        }
        let soak = soak_of(stage);
        for analysis in &analyses {
            let extends = extends_soak_by(analysis, soak).map_or(String::new(), |by| {
                format!(
                    "; extends the {} soak by {}",
                    format_soak(soak),
                    format_go_duration(by)
                )
            });
            gates.push(format!(
                "analysis {} ({}{extends})",
                analysis.name,
                describe(analysis)
            ));
        }
        rows.push(("gates", format!("{}: {}", stage.name, gates.join(", "))));
    }
    rows
}

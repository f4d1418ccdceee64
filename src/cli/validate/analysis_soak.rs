//! Whether a stage's analyses fit its soak (issue #32): an analysis measures from provisioning
//! for `initialDelay + (count - 1) × interval`; the stage's trigger `delay` (0 without one) is its
//! soak. A longer analysis is allowed but holds the stage past the soak, which a reader of the
//! promotion alone would not expect: a warning at the policy's stage override says by how much.

use std::collections::BTreeMap;
use std::time::Duration;

use tollgate_manifest::located::child_path;
use tollgate_manifest::model::ClusterPromotion;
use tollgate_manifest::{Diagnostic, RolloutPolicy, Severity};
use tollgate_model::duration::format_go_duration;

use super::policies::key_position;
use crate::cli::analysis_gates::{extends_soak_by, format_soak, soak_of};

/// One warning per stage override, analysis and soak that the analysis outlasts.
pub fn diagnostics<'t>(
    policy: &RolloutPolicy,
    file: &str,
    line: u32,
    promotions: &[&ClusterPromotion],
    text_of: &impl Fn(&str) -> Option<&'t str>,
) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    for stage in policy.spec.stages.keys() {
        let analyses = policy.for_stage(stage).analyses;
        if analyses.is_empty() {
            continue;
        }
        // Promotions with the same soak share one warning.
        let mut by_soak: BTreeMap<Duration, Vec<&str>> = BTreeMap::new();
        for promotion in promotions {
            if let Some(stage) = promotion.stage(stage) {
                by_soak
                    .entry(soak_of(stage))
                    .or_default()
                    .push(promotion.name());
            }
        }
        let (line, column) = text_of(file)
            .and_then(|text| {
                key_position(text, line, &["spec", "stages", stage, "analyses"])
                    .or_else(|| key_position(text, line, &["spec", "stages", stage]))
            })
            .unwrap_or((line, 1));
        for analysis in &analyses {
            let takes = analysis.duration();
            let extended = by_soak
                .iter()
                .filter_map(|(soak, names)| Some((soak, extends_soak_by(analysis, *soak)?, names)));
            for (soak, by, names) in extended {
                diagnostics.push(Diagnostic {
                    severity: Severity::Warning,
                    code: "analysis-extends-soak",
                    file: file.to_string(),
                    line,
                    column,
                    path: child_path(&child_path("spec.stages", stage), "analyses"),
                    message: format!(
                        "analysis {:?} takes {} (initialDelay {} + (count {} - 1) × interval {}), longer than stage {stage}'s {} soak: it extends the soak by {} (ClusterPromotion {})",
                        analysis.name,
                        format_go_duration(takes),
                        format_go_duration(analysis.initial_delay()),
                        analysis.count(),
                        format_go_duration(analysis.interval()),
                        format_soak(*soak),
                        format_go_duration(by),
                        names.join(", "),
                    ),
                });
            }
        }
    }
    diagnostics
}

//! Whether an approval policy (`spec.approvals.<stage>`, issue #33) governs a gate: it applies
//! where an approval is asked for, a manual trigger or a stage its analyses gate (an inconclusive
//! analysis is approved like a manual gate). On any other stage it never applies, which a reader of
//! the policy alone would not expect: a warning names the promotions whose stage has no gate.

use tollgate_manifest::located::child_path;
use tollgate_manifest::model::{ClusterPromotion, Trigger};
use tollgate_manifest::{Diagnostic, RolloutPolicy, Severity};

use super::policies::key_position;

/// One warning per approval policy whose stage has no gate in some promotion it governs.
pub fn diagnostics<'t>(
    policy: &RolloutPolicy,
    file: &str,
    line: u32,
    promotions: &[&ClusterPromotion],
    text_of: &impl Fn(&str) -> Option<&'t str>,
) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    for stage in policy.spec.approvals.keys() {
        if !policy.for_stage(stage).analyses.is_empty() {
            continue;
        }
        let ungated: Vec<&str> = promotions
            .iter()
            .filter(|p| {
                p.stage(stage)
                    .is_some_and(|s| !matches!(s.trigger, Some(Trigger::Manual(_))))
            })
            .map(|p| p.name())
            .collect();
        if ungated.is_empty() {
            continue;
        }
        let (line, column) = text_of(file)
            .and_then(|text| key_position(text, line, &["spec", "approvals", stage]))
            .unwrap_or((line, 1));
        diagnostics.push(Diagnostic {
            severity: Severity::Warning,
            code: "approval-policy-no-gate",
            file: file.to_string(),
            line,
            column,
            path: child_path("spec.approvals", stage),
            message: format!(
                "approval policy for stage {stage:?} of RolloutPolicy {:?} never applies to ClusterPromotion {}: that stage has no manual trigger and no analyses, so nothing asks for an approval",
                policy.name(),
                ungated.join(", ")
            ),
        });
    }
    diagnostics
}

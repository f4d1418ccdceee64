//! User-facing texts. Upstream's where they are right (docs/architecture.md#status-fields-and-messages), ours where upstream's
//! mislead (docs/architecture.md#d10-honest-messages).

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use tollgate_model::duration::format_go_duration;

pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Upstream suffixes every description with the time it was written.
pub fn with_time(text: &str, now: DateTime<Utc>) -> String {
    format!("{text} ({})", timestamp(now))
}

/// The text of a description without its time suffix.
pub fn without_time(description: &str) -> &str {
    match description.rfind(" (") {
        Some(at) if description.ends_with(')') => &description[..at],
        _ => description,
    }
}

pub const CLUSTERS_BEING_PROVISIONED: &str = "Clusters are being provisioned";
pub const ALL_DEPLOYED: &str = "All matching clusters are successfully deployed.";
pub const RUNNING_POST_PROMOTION_CHECKS: &str = "Running Post-Promotion Health Checks";
pub const AWAITING_HEALTH_CHECKS: &str = "Awaiting Health Checks to Pass";
pub const AWAITING_APPROVAL: &str = "Paused: Awaiting Manual Approval";
pub const SUCCESSFULLY_PROVISIONED: &str = "Successfully provisioned";

pub fn no_matching_clusters(profile: &str) -> String {
    format!(
        "No matching clusters found for ClusterProfile {profile}. Deployment considered complete."
    )
}

/// D10: upstream says "Waiting for Time Window" for what is a plain delay.
pub fn delayed(delay: Duration, ends_at: DateTime<Utc>) -> String {
    format!(
        "Delayed: waiting for the {} delay to end at {}",
        format_go_duration(delay),
        timestamp(ends_at)
    )
}

pub fn window_closed(opens_at: DateTime<Utc>) -> String {
    format!(
        "Window Closed: Waiting for Next Schedule ({}).",
        timestamp(opens_at)
    )
}

pub fn not_in_sync(field: &str, summary: &str) -> String {
    match field {
        "helmCharts" => format!("ClusterSummary HelmCharts {summary} is not in sync."),
        "policyRefs" => format!("ClusterSummary PolicyRefs {summary} is not in sync."),
        // Upstream's text, missing space included, so that existing alerts keep matching.
        "kustomizationRefs" => format!("ClusterSummaryKustomizationRefs {summary} is not in sync."),
        other => format!(
            "ClusterSummary {summary} is not in sync: {other} differs from the applied spec."
        ),
    }
}

pub fn not_yet_provisioned(summary: &str) -> String {
    format!("ClusterSummary {summary} is not yet provisioned.")
}

pub fn waiting_for_summaries(missing: usize) -> String {
    format!("waiting for Sveltos to create ClusterSummaries for {missing} matching clusters")
}

pub fn waiting_for_profile(profile: &str) -> String {
    format!("waiting for ClusterProfile {profile} to show the spec tollgate applied")
}

pub fn foreign_profile(profile: &str) -> String {
    format!(
        "ClusterProfile {profile} exists and is not managed by tollgate; refusing to take it over (delete or rename it)"
    )
}

pub fn provisioning_stage(stage: &str) -> String {
    format!("Provisioning stage {stage}")
}

pub fn provisioning_stage_restart(stage: &str) -> String {
    format!("Provisioning stage {stage} (Restart)")
}

pub fn stage_skipped(stage: &str) -> String {
    format!("Stage {stage} Skipped: no matching clusters")
}

pub fn stage_provisioned(stage: &str) -> String {
    format!("Stage {stage} provisioned")
}

/// `text` with its first letter upper-case (a status message as an event note).
pub fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_suffix_round_trips() {
        let now = DateTime::parse_from_rfc3339("2025-10-07T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let text = with_time(ALL_DEPLOYED, now);
        assert_eq!(
            text,
            "All matching clusters are successfully deployed. (2025-10-07T10:00:00Z)"
        );
        assert_eq!(without_time(&text), ALL_DEPLOYED);
    }
}

//! A RolloutPolicy's settings, listed for `plan`. What they do to a run (when it starts, what a
//! blackout holds) is the engine's to say (`tollgate_engine::preview::RunStart`).

use tollgate_model::policy::{OnNewSnapshot, RolloutPolicy};

/// The settings of a RolloutPolicy: (label, text) rows.
pub fn describe_policy(policy: &RolloutPolicy) -> Vec<(&'static str, String)> {
    let spec = &policy.spec;
    let on_new_snapshot = match spec.on_new_snapshot {
        OnNewSnapshot::Restart => String::new(),
        other => format!(", onNewSnapshot {}", other.as_str()),
    };
    let mut rows = vec![(
        "policy",
        format!(
            "{}: onFailure {}, maxFailures {}{}{on_new_snapshot}",
            policy.name(),
            spec.on_failure.as_str(),
            spec.max_failures.map_or("0".to_string(), |b| b.to_string()),
            spec.progress_deadline
                .as_ref()
                .map_or(String::new(), |d| format!(", progressDeadline {}", d.text))
        ),
    )];
    for blackout in &spec.blackouts {
        let when = match blackout.interval() {
            Ok((from, to)) => format!(
                "{} → {}",
                from.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                to.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
            Err(error) => format!("unreadable: {error}"),
        };
        let reason = blackout
            .reason
            .as_ref()
            .map_or(String::new(), |r| format!(" ({r})"));
        rows.push(("blackout", format!("{when}{reason}")));
    }
    for (stage, over) in &spec.stages {
        let Some(waves) = &over.waves else {
            continue;
        };
        let mut text = format!("{stage}: ");
        if let Some(canary) = waves.canary {
            text.push_str(&format!("canary of {canary} (no failure tolerated), then "));
        }
        text.push_str(&format!("waves of {}", waves.size));
        if let Some(label) = &waves.sorting_label_key {
            text.push_str(&format!(", ordered by label {label}"));
        }
        if let Some(pause) = &waves.pause {
            text.push_str(&format!(", {} pause between waves", pause.text));
        }
        rows.push(("waves", text));
    }
    rows
}

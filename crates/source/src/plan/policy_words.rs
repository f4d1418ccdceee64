//! A RolloutPolicy's effects on a run, in words for `plan` (the rules themselves are the engine's).

use tollgate_model::policy::RolloutPolicy;

/// What a RolloutPolicy does to a run: (label, text) rows.
pub fn describe_policy(policy: &RolloutPolicy) -> Vec<(&'static str, String)> {
    use tollgate_model::policy::OnNewSnapshot;
    let spec = &policy.spec;
    let mut rows = vec![(
        "policy",
        format!(
            "{}: onFailure {}, maxFailures {}{}",
            policy.name(),
            spec.on_failure.as_str(),
            spec.max_failures.map_or("0".to_string(), |b| b.to_string()),
            spec.progress_deadline
                .as_ref()
                .map_or(String::new(), |d| format!(", progressDeadline {}", d.text))
        ),
    )];
    let new_commits = match spec.on_new_snapshot {
        OnNewSnapshot::Restart => None,
        OnNewSnapshot::FinishCurrent => Some(
            "FinishCurrent: a run in progress completes with its snapshot first; then the newest starts (snapshots in between are superseded)",
        ),
        OnNewSnapshot::Queue => Some(
            "Queue: a run in progress completes first; then every newer snapshot runs in commit order",
        ),
    };
    if let Some(text) = new_commits {
        rows.push(("new commits", text.to_string()));
    }
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
        rows.push((
            "blackout",
            format!("{when}{reason}: no stage or wave starts"),
        ));
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

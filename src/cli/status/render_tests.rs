//! `status` and `status NAME` as plain text, JSON and YAML.

use serde_json::{Value, json};

use super::*;

fn object(name: &str, status: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "tollgate.dev/v1alpha1", "kind": "GitPromotion",
        "metadata": {"name": name}, "status": status
    }))
    .expect("object")
}

fn counts(members: u32, provisioned: u32, failed: u32) -> Value {
    json!({"members": members, "matchingClusters": members, "summaries": members,
           "provisioned": provisioned, "failed": failed})
}

fn sample() -> DynamicObject {
    object(
        "kyverno",
        json!({
            "hashScheme": 1, "phase": "Waiting", "currentStageName": "staging", "snapshotIndex": 3,
            "snapshotCommit": "0123456789abcdef", "rollbackOf": 1,
            "message": "stage staging: Paused: Awaiting Manual Approval",
            "stages": [
                {"name": "dev", "snapshotIndex": 3, "appliedAt": "2026-11-20T10:00:00Z",
                 "appliedSpecHash": "a", "counts": counts(2, 2, 0),
                 "activity": {"kind": "Completed"}, "activitySince": "2026-11-20T10:01:00Z",
                 "currentStatusDescription": "Successfully provisioned"},
                {"name": "staging", "snapshotIndex": 3, "appliedAt": "2026-11-20T10:00:00Z",
                 "appliedSpecHash": "b", "counts": counts(1, 1, 0),
                 "activity": {"kind": "AwaitingApproval"}, "activitySince": "2026-11-20T10:02:00Z",
                 "currentStatusDescription": "Paused: Awaiting Manual Approval",
                 "waitingReason": "an approval",
                 "approver": {"kind": "Field", "sha": "fedcba9876543210", "author": "Ada"}}
            ],
            "stagesAhead": [{"name": "production-eu-west", "snapshotIndex": 1}]
        }),
    )
}

/// prod's canary failed: the run was rolled back; dev and prod run #3 again, nothing reached
/// the last stage.
fn rolled_back() -> DynamicObject {
    object(
        "web",
        json!({
            "hashScheme": 1, "phase": "RolledBack", "snapshotIndex": 4,
            "snapshotCommit": "0123456789abcdef0123456789abcdef01234567",
            "currentStageName": "prod",
            "policy": {"name": "fleet-defaults", "version": "abc"},
            "stages": [
                {"name": "dev", "snapshotIndex": 4, "appliedAt": "2026-11-20T10:00:00Z",
                 "appliedSpecHash": "a", "counts": counts(1, 1, 0), "replacedSnapshot": 3,
                 "activity": {"kind": "Restored", "snapshot": 3},
                 "activitySince": "2026-11-20T10:02:30Z",
                 "currentStatusDescription": "Successfully provisioned"},
                {"name": "prod", "snapshotIndex": 4, "appliedAt": "2026-11-20T10:00:00Z",
                 "appliedSpecHash": "a", "allowedFailures": 0, "replacedSnapshot": 3,
                 "deadline": "2026-11-20T10:05:00Z",
                 "activity": {"kind": "Restored", "snapshot": 3},
                 "activitySince": "2026-11-20T10:02:00Z",
                 "currentStatusDescription": "Successfully provisioned",
                 "counts": counts(7, 0, 1),
                 "notProvisioned": [{"cluster": "fleet/prod-1", "state": "Failed",
                     "message": "values: replicas must be an integer",
                     "since": "2026-11-20T10:01:00Z"}]}],
            "stagesAhead": [{"name": "edge", "snapshotIndex": 3}],
            "failure": {"stage": "prod", "snapshotIndex": 4,
                "reason": "1 of 7 clusters failed (the canary's budget 0)",
                "at": "2026-11-20T10:01:00Z", "onFailure": "Rollback",
                "clusters": [{"cluster": "fleet/prod-1", "state": "Failed",
                    "message": "values: replicas must be an integer",
                    "since": "2026-11-20T10:01:00Z"}],
                "rollback": [{"name": "prod", "toSnapshot": 3, "restoredAt": "2026-11-20T10:02:00Z"},
                             {"name": "dev", "toSnapshot": 3, "restoredAt": "2026-11-20T10:02:30Z"}]}
        }),
    )
}

/// The text without table borders, its words separated by single spaces: a cell wrapped over
/// lines reads as one (the columns beside it are empty on its continuation lines).
fn flat(text: &str) -> String {
    text.split(|c: char| c.is_whitespace() || "│┆".contains(c))
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The row of `stage` in the stage table: its cells, trimmed, a cell wrapped over lines joined.
fn row(text: &str, stage: &str) -> Vec<String> {
    let cells = |line: &str| -> Vec<String> {
        line.trim_matches('│')
            .split('┆')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let mut lines = text
        .lines()
        .skip_while(|line| !line.starts_with(&format!("│ {stage} ")));
    let mut row = cells(
        lines
            .next()
            .unwrap_or_else(|| panic!("no row for {stage} in\n{text}")),
    );
    for line in lines {
        let more = cells(line);
        if !line.starts_with('│') || !more[0].is_empty() {
            break;
        }
        for (cell, more) in row.iter_mut().zip(more) {
            if !more.is_empty() {
                cell.push(' ');
                cell.push_str(&more);
            }
        }
    }
    row
}

#[test]
fn overview_shows_phase_stage_snapshot_and_rollback() {
    let text = render(&[sample()], false, Output::Table, 120).expect("render");
    for expected in [
        "kyverno",
        "Waiting",
        "staging",
        "#3 0123456 (rollback to #1)",
    ] {
        assert!(text.contains(expected), "{expected:?} missing in\n{text}");
    }
}

#[test]
fn detail_shows_every_stage_of_the_pipeline_with_its_activity_and_the_approver() {
    let text = render(&[sample()], true, Output::Table, 120).expect("render");
    assert_eq!(
        row(&text, "dev"),
        [
            "dev",
            "#3",
            "2/2 provisioned",
            "completed at 2026-11-20T10:01:00Z"
        ]
    );
    assert_eq!(
        row(&text, "staging"),
        [
            "staging",
            "#3",
            "1/1 provisioned",
            "awaiting approval since 2026-11-20T10:02:00Z"
        ]
    );
    // A stage the run has not reached: the snapshot it still runs, no counts.
    assert_eq!(
        row(&text, "production-eu-west"),
        ["production-eu-west", "#1", "", "pending"]
    );
    assert!(
        text.contains("Approved:     staging by Ada (Field, fedcba9)"),
        "{text}"
    );
    // The engine's activity is shown, not Sveltos' description of the last apply.
    assert!(!text.contains("Successfully provisioned"), "{text}");
}

#[test]
fn detail_after_a_rollback_shows_the_restored_snapshot_without_the_rejected_runs_counts() {
    let text = render(&[rolled_back()], true, Output::Table, 80).expect("renders");
    assert!(
        !text.contains("failed, "),
        "no counts of the rejected run: {text}"
    );
    // No stage has counts to show: the CLUSTERS column is left out, not shown empty.
    assert!(!text.contains("CLUSTERS"), "{text}");
    assert_eq!(row(&text, "dev"), ["dev", "#3", "restored to #3"]);
    assert_eq!(row(&text, "prod"), ["prod", "#3", "restored to #3"]);
    assert_eq!(row(&text, "edge"), ["edge", "#3", "pending"]);
    for expected in [
        "FAILED: stage prod with snapshot #4",
        "1 of 7 clusters failed",
        "git revert 0123456",
        "fleet/prod-1",
        "values: replicas must be an integer",
        "fleet-defaults",
    ] {
        assert!(
            flat(&text).contains(expected),
            "missing {expected:?} in\n{text}"
        );
    }
    // Nothing of the rejected run's stage as if it were live: no stale deadline, no counts.
    assert!(!text.contains("deadline"), "{text}");
    assert!(!text.contains("Stage prod:"), "{text}");
    assert!(!text.contains("Successfully provisioned"), "{text}");
}

#[test]
fn detail_fits_80_columns_and_never_breaks_a_word() {
    for width in [80, 100] {
        let text = render(&[rolled_back(), sample()], true, Output::Table, width).expect("render");
        for line in text.lines() {
            assert!(
                line.chars().count() <= width,
                "wider than {width}: {line:?}\n{text}"
            );
        }
        assert!(text.contains("│ production-eu-west ┆"), "{text}");
    }
}

#[test]
fn an_overview_too_narrow_for_every_column_leaves_out_the_wake_up_not_half_a_word() {
    let mut object = sample();
    object.metadata.name = Some("kyverno-prog-rollout-man".into());
    object.data["status"]["nextWakeUp"] = json!("2026-11-20T10:05:00Z");
    let narrow = render(std::slice::from_ref(&object), false, Output::Table, 80).expect("render");
    assert!(narrow.lines().all(|l| l.chars().count() <= 80), "{narrow}");
    assert!(!narrow.contains('…'), "{narrow}");
    assert!(!narrow.contains("WAKE-UP"), "{narrow}");
    assert!(narrow.contains("│ kyverno-prog-rollout-man ┆"), "{narrow}");
    let wide = render(&[object], false, Output::Table, 160).expect("render");
    assert!(wide.contains("2026-11-20T10:05:00Z"), "{wide}");
}

#[test]
fn a_first_run_held_before_its_first_stage_names_the_held_stage_and_no_snapshot() {
    let held = object(
        "billing",
        json!({"hashScheme": 1, "phase": "Waiting",
            "message": "blackout until 2026-11-24T18:14:00Z (incident 42): snapshot #1 waits to start",
            "blackoutUntil": "2026-11-24T18:14:00Z",
            "stagesAhead": [
                {"name": "dev", "activity": {"kind": "Blackout", "until": "2026-11-24T18:14:00Z",
                    "reason": "incident 42"}, "activitySince": "2026-11-24T17:40:00Z"},
                {"name": "prod"}]}),
    );
    let text = render(std::slice::from_ref(&held), true, Output::Table, 80).expect("render");
    assert!(text.contains("Stage:        dev\n"), "{text}");
    assert!(text.contains("Snapshot:     none running yet\n"), "{text}");
    // Nothing runs and nothing is counted yet: only the stages and what they do.
    assert_eq!(
        row(&text, "dev"),
        ["dev", "blackout until 2026-11-24T18:14:00Z (incident 42)"]
    );
    let overview = render(&[held], false, Output::Table, 120).expect("render");
    assert!(overview.contains("┆ dev "), "{overview}");
}

#[test]
fn a_status_this_version_cannot_read_is_said_not_hidden() {
    let odd = || object("odd", json!({"phase": 7}));
    let text = render(&[odd()], false, Output::Table, 80).expect("render");
    assert!(text.contains("unreadable status"), "{text}");
    let text = render(&[odd()], true, Output::Table, 80).expect("render");
    assert!(text.contains("unreadable status"), "{text}");
}

#[test]
fn timestamps_read_as_rfc3339_seconds_never_nanoseconds() {
    let mut object = sample();
    object.data["status"]["nextWakeUp"] = json!("2026-11-20T10:05:00.123456789Z");
    for detail in [false, true] {
        let text =
            render(std::slice::from_ref(&object), detail, Output::Table, 200).expect("render");
        assert!(text.contains("2026-11-20T10:05:00Z"), "{text}");
        assert!(!text.contains("123456789"), "{text}");
    }
}

#[test]
fn json_and_yaml_carry_the_whole_status() {
    let json_text = render(&[sample()], false, Output::Json, 80).expect("json");
    let parsed: Value = serde_json::from_str(&json_text).expect("valid json");
    assert_eq!(parsed[0]["status"]["rollbackOf"], 1);
    let yaml = render(&[sample()], false, Output::Yaml, 80).expect("yaml");
    assert!(yaml.contains("rollbackOf: 1"), "{yaml}");
}

#[test]
fn one_named_promotion_is_one_object_not_a_list_of_one() {
    let json_text = render(&[sample()], true, Output::Json, 80).expect("json");
    let parsed: Value = serde_json::from_str(&json_text).expect("valid json");
    assert_eq!(parsed["name"], "kyverno", "{json_text}");
    assert_eq!(parsed["status"]["rollbackOf"], 1);
    let yaml = render(&[sample()], true, Output::Yaml, 80).expect("yaml");
    assert!(yaml.starts_with("name: kyverno"), "{yaml}");
    // The overview stays a list.
    let all = render(&[sample()], false, Output::Json, 80).expect("json");
    assert!(
        serde_json::from_str::<Value>(&all)
            .expect("json")
            .is_array()
    );
}

/// A promotion as a newcomer meets it: a long name, a gate whose message names the snapshot id
/// to copy, a wake-up; beside it one that completed and has no wake-up.
fn newcomer_fleet() -> Vec<DynamicObject> {
    let gate = object(
        "core-payments-gateway-eu",
        json!({
            "hashScheme": 1, "phase": "Waiting", "phaseSince": "2026-12-06T02:50:00Z",
            "currentStageName": "production", "snapshotIndex": 3, "snapshotCommit": "37f6dffbab1200aa", "rollbackOf": 2,
            "rollback": "Fast",
            "message": "stage production: waiting for approval: run `tollgate approve core-payments-gateway-eu production`, or annotate approve.tollgate.dev/production: 37f6dffbab12",
            "nextWakeUp": "2026-12-06T02:56:00Z",
            "stages": [
                {"name": "staging-eu-west-1", "snapshotIndex": 3,
                 "appliedAt": "2026-12-06T02:40:00Z", "appliedSpecHash": "a",
                 "counts": counts(12, 12, 0), "activity": {"kind": "Completed"},
                 "activitySince": "2026-12-06T02:45:00Z"},
                {"name": "production", "snapshotIndex": 3,
                 "appliedAt": "2026-12-06T02:45:00Z", "appliedSpecHash": "b",
                 "counts": counts(7, 7, 0), "activity": {"kind": "AwaitingApproval"},
                 "activitySince": "2026-12-06T02:50:00Z",
                 "approvals": [], "approvalsNeeded": 2}]
        }),
    );
    let done = object(
        "ingress",
        json!({"hashScheme": 1, "phase": "Completed", "currentStageName": "prod",
            "snapshotIndex": 7, "snapshotCommit": "fedcba9876543210",
            "message": "all stages completed",
            "stages": [{"name": "prod", "snapshotIndex": 7, "appliedAt": "2026-12-06T01:00:00Z",
                "appliedSpecHash": "c", "counts": counts(2, 2, 0),
                "activity": {"kind": "Completed"}, "activitySince": "2026-12-06T01:05:00Z"}]}),
    );
    vec![gate, done]
}

/// Every line of `text` at most `width` wide, no `…` (nothing cut), and the ids whole.
fn assert_whole(text: &str, width: usize) {
    for line in text.lines() {
        assert!(
            line.chars().count() <= width,
            "wider than {width}: {line:?}\n{text}"
        );
    }
    assert!(!text.contains('…'), "{text}");
    // The wake-up is left out where it does not fit (`status NAME` has it), never cut.
    let wake_up = text.contains("WAKE-UP").then_some("2026-12-06T02:56:00Z");
    for id in ["37f6dffbab12", "core-payments-gateway-eu"]
        .into_iter()
        .chain(wake_up)
    {
        assert!(
            text.split(|c: char| c.is_whitespace() || "│┆`".contains(c))
                .any(|word| word == id),
            "{id} is not whole in\n{text}"
        );
    }
}

#[test]
fn the_overview_at_80_and_120_columns_cuts_no_word() {
    let fleet = newcomer_fleet();
    let narrow = render(&fleet, false, Output::Table, 80).expect("render");
    assert_whole(&narrow, 80);
    insta::assert_snapshot!("overview_80", narrow);
    let wide = render(&fleet, false, Output::Table, 120).expect("render");
    assert_whole(&wide, 120);
    insta::assert_snapshot!("overview_120", wide);
}

#[test]
fn the_detail_at_80_and_120_columns_cuts_no_word() {
    let fleet = newcomer_fleet();
    let narrow = render(&fleet[..1], true, Output::Table, 80).expect("render");
    assert_whole(&narrow, 80);
    // Since when it waits, as the live view counts it.
    assert!(
        narrow.contains("Phase:        Waiting since 2026-12-06T02:50:00Z\n"),
        "{narrow}"
    );
    insta::assert_snapshot!("detail_80", narrow);
    let wide = render(&fleet[..1], true, Output::Table, 120).expect("render");
    assert_whole(&wide, 120);
    insta::assert_snapshot!("detail_120", wide);
}

#[test]
fn an_empty_next_wake_up_column_is_never_shown() {
    let fleet = newcomer_fleet();
    for width in [80, 120, 200] {
        let text = render(&fleet[1..], false, Output::Table, width).expect("render");
        assert!(!text.contains("WAKE-UP"), "{text}");
    }
    let text = render(&fleet, false, Output::Table, 200).expect("render");
    assert!(text.contains("NEXT WAKE-UP"), "{text}");
}

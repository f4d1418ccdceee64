//! Frames of the live view at a fixed `now`, pinned as snapshots (80×40 unless said).

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use super::*;

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-24T17:40:00Z")
        .expect("valid")
        .with_timezone(&Utc)
}

/// `now` minus `seconds`, as status writes it.
fn ago(seconds: i64) -> String {
    (now() - Duration::seconds(seconds)).to_rfc3339()
}

fn promotion(name: &str, status: Value) -> Shown {
    Shown {
        name: name.to_string(),
        status: Ok(Some(
            serde_json::from_value(status).expect("a status the engine writes"),
        )),
    }
}

fn counts(matching: u32, provisioned: u32, failed: u32) -> Value {
    json!({"matchingClusters": matching, "summaries": matching,
           "provisioned": provisioned, "failed": failed})
}

fn stage(name: &str, snapshot: u64, extra: Value) -> Value {
    let mut stage = json!({"name": name, "snapshotIndex": snapshot, "appliedAt": ago(600),
                           "appliedSpecHash": "h", "counts": counts(2, 2, 0)});
    if let (Some(stage), Some(extra)) = (stage.as_object_mut(), extra.as_object()) {
        stage.extend(extra.clone());
    }
    stage
}

/// dev soaks with snapshot #2 while staging and production keep #1.
fn new_run_soaking() -> Shown {
    promotion(
        "kyverno",
        json!({"hashScheme": 1, "phase": "Waiting", "snapshotIndex": 2,
            "snapshotCommit": "a1b2c3d4e5f6a7b8", "currentStageName": "dev",
            "lastPromotionTime": ago(150),
            "stages": [stage("dev", 2, json!({"provisionedAt": ago(48),
                "delayEndsAt": (now() + Duration::seconds(72)).to_rfc3339(),
                "waitingReason": "delayed"}))],
            "stagesAhead": [{"name": "staging", "snapshotIndex": 1},
                            {"name": "production", "snapshotIndex": 1}],
            "nextWakeUp": (now() + Duration::seconds(72)).to_rfc3339()}),
    )
}

/// dev provisioning #2 with one cluster failed; the later stages keep #1.
fn new_run_provisioning() -> Shown {
    promotion(
        "cert-manager",
        json!({"hashScheme": 1, "phase": "Progressing", "snapshotIndex": 2,
            "snapshotCommit": "0f0e0d0c0b0a0908", "currentStageName": "dev",
            "lastPromotionTime": ago(20),
            "stages": [stage("dev", 2, json!({"counts": {"matchingClusters": 3, "summaries": 3,
                "provisioned": 1, "failed": 1}}))],
            "stagesAhead": [{"name": "production", "snapshotIndex": 1}]}),
    )
}

fn manual_gate() -> Shown {
    promotion(
        "kyverno-manual",
        json!({"hashScheme": 1, "phase": "Waiting", "snapshotIndex": 1,
            "snapshotCommit": "1234567890abcdef", "currentStageName": "staging",
            "lastPromotionTime": ago(180),
            "stages": [
                stage("dev", 1, json!({"provisionedAt": ago(400), "delayEndsAt": ago(300),
                    "succeededAt": ago(300)})),
                stage("staging", 1, json!({"provisionedAt": ago(190),
                    "awaitingApprovalSince": ago(180), "waitingReason": "an approval"}))],
            "stagesAhead": [{"name": "production"}]}),
    )
}

fn failed_stage() -> Shown {
    promotion(
        "web",
        json!({"hashScheme": 1, "phase": "RolledBack", "snapshotIndex": 4,
            "snapshotCommit": "89abcdef01234567", "currentStageName": "prod",
            "message": "snapshot #4 rejected: stage prod failed: 2 of 3 clusters failed or timed out; rolled back",
            "stages": [
                stage("dev", 4, json!({"succeededAt": ago(900), "provisionedAt": ago(950)})),
                stage("prod", 4, json!({"counts": {"matchingClusters": 3, "summaries": 3,
                    "provisioned": 1, "failed": 1, "timedOut": 1}}))],
            "failure": {"stage": "prod", "snapshotIndex": 4, "at": ago(120),
                "reason": "2 of 3 clusters failed or timed out", "onFailure": "Rollback",
                "rollback": [{"name": "prod", "toSnapshot": 3, "restoredAt": ago(60)},
                             {"name": "dev", "toSnapshot": 3}]}}),
    )
}

fn completed() -> Shown {
    promotion(
        "ingress-nginx",
        json!({"hashScheme": 1, "phase": "Completed", "snapshotIndex": 7,
            "snapshotCommit": "fedcba9876543210", "currentStageName": "prod",
            "stages": [
                stage("dev", 7, json!({"provisionedAt": ago(4000), "succeededAt": ago(3900)})),
                stage("prod", 7, json!({"provisionedAt": ago(3700), "succeededAt": ago(3600)}))]}),
    )
}

/// A waved stage between waves, a blackout holding the next stage, a snapshot queued.
fn waves_and_blackout() -> Shown {
    promotion(
        "fleet-agent",
        json!({"hashScheme": 1, "phase": "Waiting", "snapshotIndex": 5,
            "snapshotCommit": "00112233445566778899", "currentStageName": "prod",
            "lastPromotionTime": ago(600), "queuedSnapshot": 6,
            "nextWakeUp": (now() + Duration::seconds(65)).to_rfc3339(),
            "stages": [
                stage("dev", 5, json!({"provisionedAt": ago(900), "succeededAt": ago(800)})),
                stage("prod", 5, json!({"counts": counts(9, 3, 0), "waves": {
                    "clusters": [["a/1"], ["a/2", "a/3"], ["a/4", "a/5", "a/6", "a/7", "a/8", "a/9"]],
                    "reached": 2, "canary": true, "waveStartedAt": ago(300),
                    "waveDoneAt": ago(60)}}))]}),
    )
}

fn blackout_holds_the_next_stage() -> Shown {
    promotion(
        "payments",
        json!({"hashScheme": 1, "phase": "Waiting", "snapshotIndex": 2,
            "snapshotCommit": "99887766554433221100", "currentStageName": "dev",
            "lastPromotionTime": ago(600),
            "blackoutUntil": (now() + Duration::seconds(1800)).to_rfc3339(),
            "nextWakeUp": (now() + Duration::seconds(1800)).to_rfc3339(),
            "stages": [stage("dev", 2, json!({"provisionedAt": ago(500), "succeededAt": ago(400)}))],
            "stagesAhead": [{"name": "prod", "snapshotIndex": 1}]}),
    )
}

fn draw(promotions: &[Shown], columns: usize, rows: usize) -> String {
    let clock = Clock {
        now: now(),
        updated: Some(now() - Duration::seconds(3)),
        problem: None,
    };
    let lines = frame(
        promotions,
        &clock,
        Size {
            columns,
            rows: Some(rows),
        },
    );
    assert!(lines.len() <= rows, "{} lines", lines.len());
    for line in &lines {
        assert!(
            line.chars().count() <= columns,
            "wider than {columns}: {line:?}"
        );
    }
    lines.join("\n") + "\n"
}

#[test]
fn a_new_run_shows_the_later_stages_still_on_the_older_snapshot() {
    let text = draw(&[new_run_soaking()], 80, 40);
    insta::assert_snapshot!(text);
    assert!(text.contains("soak ends in 1m12s"), "{text}");
}

#[test]
fn a_manual_gate_says_how_long_it_has_waited() {
    let text = draw(&[manual_gate()], 80, 40);
    insta::assert_snapshot!(text);
    assert!(text.contains("waiting for approval 3m"), "{text}");
    assert!(text.contains("done 5m ago"), "{text}");
}

#[test]
fn a_failed_stage_shows_its_failures_distinctly_and_the_rollback() {
    let text = draw(&[failed_stage(), new_run_provisioning()], 80, 40);
    insta::assert_snapshot!(text);
    assert!(text.contains("✗2"), "{text}");
    assert!(text.contains("failed: budget exceeded"), "{text}");
}

#[test]
fn waves_blackouts_and_a_queued_snapshot_are_said_in_words() {
    let text = draw(
        &[waves_and_blackout(), blackout_holds_the_next_stage()],
        80,
        40,
    );
    insta::assert_snapshot!(text);
    assert!(text.contains("wave 2/3 done, next in 1m05s"), "{text}");
    assert!(text.contains("held by a blackout for 30m00s"), "{text}");
    assert!(text.contains("snapshot #6 is queued"), "{text}");
}

#[test]
fn long_names_are_cut_with_an_ellipsis_never_wrapped() {
    let mut long = manual_gate();
    long.name = "platform-observability-prometheus-stack-with-a-very-long-name".to_string();
    if let Ok(Some(status)) = &mut long.status {
        status.stages[1].name = "staging-eu-west-1-canary".to_string();
    }
    let text = draw(&[long], 80, 40);
    insta::assert_snapshot!(text);
    assert!(text.contains("staging-eu-we…"), "{text}");
}

#[test]
fn four_promotions_fit_an_80_by_40_terminal() {
    let text = draw(
        &[
            new_run_provisioning(),
            completed(),
            new_run_soaking(),
            manual_gate(),
        ],
        80,
        40,
    );
    insta::assert_snapshot!(text);
    assert!(text.lines().count() <= 25, "{text}");
}

#[test]
fn columns_keep_their_width_when_the_content_changes() {
    let column = |text: &str, marker: &str| {
        text.lines()
            .find(|l| l.contains(marker))
            .and_then(|l| l.chars().position(|c| c == '#'))
    };
    let before = draw(&[new_run_provisioning()], 80, 40);
    let mut later = new_run_provisioning();
    if let Ok(Some(status)) = &mut later.status {
        status.stages[0].counts.matching_clusters = 120;
        status.stages[0].counts.provisioned = 100;
        status.stages[0].counts.failed = 0;
    }
    let after = draw(&[later], 80, 40);
    assert_eq!(
        column(&before, "  dev"),
        column(&after, "  dev"),
        "{before}{after}"
    );
}

#[test]
fn a_frame_taller_than_the_terminal_says_what_it_left_out() {
    let many: Vec<Shown> = (0..10).map(|_| manual_gate()).collect();
    let text = draw(&many, 80, 12);
    assert!(text.contains("more lines"), "{text}");
}

#[test]
fn a_narrow_terminal_gets_lines_no_wider_than_itself() {
    draw(&[new_run_soaking(), failed_stage()], 50, 40);
    draw(&[new_run_soaking(), failed_stage()], 120, 40);
}

#[test]
fn a_watch_problem_is_shown_under_the_clock() {
    let clock = Clock {
        now: now(),
        updated: None,
        problem: Some("watch error (retrying): connection refused".to_string()),
    };
    let size = Size {
        columns: 80,
        rows: None,
    };
    let lines = frame(&[], &clock, size);
    assert!(lines[0].contains("not read yet"), "{lines:?}");
    assert_eq!(lines[1], "! watch error (retrying): connection refused");
}

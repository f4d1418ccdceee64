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

/// `now` plus `seconds`, as status writes it.
fn later(seconds: i64) -> String {
    (now() + Duration::seconds(seconds)).to_rfc3339()
}

fn counts(members: u32, provisioned: u32, failed: u32) -> Value {
    json!({"members": members, "matchingClusters": members, "summaries": members,
           "provisioned": provisioned, "failed": failed})
}

/// A stage of the current run doing `activity` since `since` seconds ago.
fn stage(name: &str, snapshot: u64, activity: Value, since: i64, extra: Value) -> Value {
    let mut stage = json!({"name": name, "snapshotIndex": snapshot, "appliedAt": ago(600),
                           "appliedSpecHash": "h", "counts": counts(2, 2, 0),
                           "activity": activity, "activitySince": ago(since)});
    if let (Some(stage), Some(extra)) = (stage.as_object_mut(), extra.as_object()) {
        stage.extend(extra.clone());
    }
    stage
}

fn completed_stage(name: &str, snapshot: u64, since: i64) -> Value {
    stage(
        name,
        snapshot,
        json!({"kind": "Completed"}),
        since,
        json!({}),
    )
}

/// dev soaks with snapshot #2 while staging and production keep #1.
fn new_run_soaking() -> Shown {
    promotion(
        "kyverno",
        json!({"hashScheme": 1, "phase": "Waiting", "snapshotIndex": 2,
            "snapshotCommit": "a1b2c3d4e5f6a7b8", "currentStageName": "dev",
            "phaseSince": ago(150),
            "lastPromotionTime": ago(150),
            "stages": [stage("dev", 2, json!({"kind": "Soaking", "until": later(72)}), 150,
                json!({}))],
            "stagesAhead": [{"name": "staging", "snapshotIndex": 1},
                            {"name": "production", "snapshotIndex": 1}],
            "nextWakeUp": later(72)}),
    )
}

/// dev provisioning #2 with one cluster failed; the later stages keep #1.
fn new_run_provisioning() -> Shown {
    promotion(
        "cert-manager",
        json!({"hashScheme": 1, "phase": "Progressing", "snapshotIndex": 2,
            "snapshotCommit": "0f0e0d0c0b0a0908", "currentStageName": "dev",
            "phaseSince": ago(20),
            "lastPromotionTime": ago(20),
            "stages": [stage("dev", 2, json!({"kind": "Provisioning"}), 20,
                json!({"counts": counts(3, 1, 1)}))],
            "stagesAhead": [{"name": "production", "snapshotIndex": 1}]}),
    )
}

fn manual_gate() -> Shown {
    promotion(
        "kyverno-manual",
        json!({"hashScheme": 1, "phase": "Waiting", "snapshotIndex": 1,
            "snapshotCommit": "1234567890abcdef", "currentStageName": "staging",
            "phaseSince": ago(180),
            "lastPromotionTime": ago(180),
            "stages": [
                completed_stage("dev", 1, 300),
                stage("staging", 1, json!({"kind": "AwaitingApproval"}), 180, json!({}))],
            "stagesAhead": [{"name": "production"}]}),
    )
}

/// prod failed; its rollback restored prod and is restoring dev.
fn failed_stage() -> Shown {
    promotion(
        "web",
        json!({"hashScheme": 1, "phase": "RollingBack", "snapshotIndex": 4,
            "snapshotCommit": "89abcdef01234567", "currentStageName": "prod",
            "phaseSince": ago(120),
            "message": "snapshot #4 rejected: stage prod failed: 2 of 3 clusters failed or timed out; rolling back",
            "stages": [
                stage("dev", 4, json!({"kind": "RollingBack", "snapshot": 3}), 120,
                    json!({"replacedSnapshot": 3})),
                stage("prod", 4, json!({"kind": "Restored", "snapshot": 3}), 60,
                    json!({"replacedSnapshot": 3, "counts": {"members": 3,
                        "matchingClusters": 3, "summaries": 3,
                        "provisioned": 1, "failed": 1, "timedOut": 1}}))],
            "failure": {"stage": "prod", "snapshotIndex": 4, "at": ago(120),
                "reason": "2 of 3 clusters failed or timed out", "onFailure": "Rollback",
                "rollback": [{"name": "prod", "toSnapshot": 3, "restoredAt": ago(60)},
                             {"name": "dev", "toSnapshot": 3}]}}),
    )
}

/// dev halted: over its failure budget.
fn halted() -> Shown {
    promotion(
        "api",
        json!({"hashScheme": 1, "phase": "Failed", "snapshotIndex": 9,
            "snapshotCommit": "abcdefabcdefabcd", "currentStageName": "dev",
            "phaseSince": ago(30),
            "stages": [stage("dev", 9,
                json!({"kind": "Failed", "reason": "2 of 3 clusters failed: over maxFailures 1"}),
                30, json!({"counts": {"members": 3, "matchingClusters": 3, "summaries": 3,
                    "provisioned": 1, "failed": 1, "timedOut": 1}}))]}),
    )
}

fn completed() -> Shown {
    promotion(
        "ingress-nginx",
        json!({"hashScheme": 1, "phase": "Completed", "snapshotIndex": 7,
            "snapshotCommit": "fedcba9876543210", "currentStageName": "prod",
            "phaseSince": ago(3600),
            "stages": [completed_stage("dev", 7, 3900), completed_stage("prod", 7, 3600)]}),
    )
}

/// A waved stage of 9 members between waves (its second wave had a failure, tolerated), a
/// snapshot queued.
fn waves_and_a_queued_snapshot() -> Shown {
    promotion(
        "fleet-agent",
        json!({"hashScheme": 1, "phase": "Waiting", "snapshotIndex": 5,
            "snapshotCommit": "00112233445566778899", "currentStageName": "prod",
            "lastPromotionTime": ago(600), "queuedSnapshot": 6, "phaseSince": ago(60),
            "nextWakeUp": later(65),
            "stages": [
                completed_stage("dev", 5, 800),
                stage("prod", 5,
                    json!({"kind": "WavePause", "wave": {"wave": 2, "of": 3}, "until": later(65)}),
                    60, json!({"counts": {"members": 9, "laterWaves": 6, "matchingClusters": 3,
                        "summaries": 3, "provisioned": 2, "failed": 1}}))]}),
    )
}

/// The third of four waves held by a blackout; a stage start held by another.
fn blackouts() -> Shown {
    promotion(
        "payments",
        json!({"hashScheme": 1, "phase": "Waiting", "snapshotIndex": 2, "phaseSince": ago(300),
            "snapshotCommit": "99887766554433221100", "currentStageName": "prod",
            "lastPromotionTime": ago(600),
            "nextWakeUp": later(2040),
            "stages": [
                completed_stage("dev", 2, 400),
                stage("prod", 2, json!({"kind": "Blackout", "until": later(2040),
                    "reason": "year-end freeze", "wave": {"wave": 3, "of": 4}}), 300,
                    json!({"counts": {"members": 7, "laterWaves": 4, "matchingClusters": 3,
                        "summaries": 3, "provisioned": 3, "failed": 0}}))],
            "stagesAhead": [{"name": "edge", "snapshotIndex": 1}]}),
    )
}

/// The first run held before its first stage: nothing runs yet.
fn held_first_run() -> Shown {
    promotion(
        "billing",
        json!({"hashScheme": 1, "phase": "Waiting", "phaseSince": ago(10),
            "message": "blackout until 2026-11-24T18:14:00Z (incident 42): snapshot #1 waits to start",
            "blackoutUntil": later(2040), "nextWakeUp": later(2040),
            "stagesAhead": [
                {"name": "dev", "activity": {"kind": "Blackout", "until": later(2040),
                    "reason": "incident 42"}, "activitySince": ago(10)},
                {"name": "prod"}]}),
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
    assert!(text.contains("soaking, ends in 1m12s"), "{text}");
    // Wider, the end's clock time too.
    let wide = draw(&[new_run_soaking()], 120, 40);
    assert!(wide.contains("soaking, ends 17:41:12 (in 1m12s)"), "{wide}");
}

#[test]
fn a_manual_gate_says_how_long_it_has_waited() {
    let text = draw(&[manual_gate()], 80, 40);
    insta::assert_snapshot!(text);
    assert!(text.contains("awaiting approval for 3m"), "{text}");
    assert!(text.contains("completed 5m ago"), "{text}");
}

#[test]
fn a_failed_stage_shows_its_failures_distinctly_and_the_rollback() {
    let text = draw(&[failed_stage(), halted(), new_run_provisioning()], 80, 40);
    insta::assert_snapshot!(text);
    assert!(text.contains("✗2"), "{text}");
    assert!(text.contains("failed: 2 of 3 clusters failed"), "{text}");
    assert!(text.contains("rolling back to #3"), "{text}");
    assert!(text.contains("restored to #3"), "{text}");
}

#[test]
fn waves_count_every_member_and_blackouts_say_until_when_and_why() {
    let text = draw(
        &[waves_and_a_queued_snapshot(), blackouts(), held_first_run()],
        80,
        40,
    );
    insta::assert_snapshot!(text);
    let prod = text
        .lines()
        .find(|l| l.contains("wave 2/3 done"))
        .unwrap_or_else(|| panic!("a pause between waves: {text}"));
    // Two of nine members provisioned, one failed: the bar is not full after the first waves.
    assert!(prod.contains("2/9 ✗1"), "{prod}");
    assert!(prod.contains("██✗✗░"), "{prod}");
    assert!(prod.contains("next in 1m05s"), "{prod}");
    assert!(text.contains("wave 3/4: blackout, 34m00s left"), "{text}");
    assert!(text.contains("snapshot #6 is queued"), "{text}");
    // At the start of a held first run: the stage held, and no snapshot running yet.
    let held = text
        .lines()
        .find(|l| l.starts_with("  dev") && l.contains("blackout"))
        .unwrap_or_else(|| panic!("the held first stage: {text}"));
    assert!(held.contains("–"), "{held}");
}

#[test]
fn a_wide_terminal_gets_the_clock_time_and_the_reason() {
    let text = draw(&[blackouts()], 120, 40);
    assert!(
        text.contains("wave 3/4 held: blackout until 18:14:00 (year-end freeze), 34m00s left"),
        "{text}"
    );
}

#[test]
fn long_names_get_a_line_of_their_own_never_cut() {
    let mut long = manual_gate();
    long.name = "platform-observability-prometheus-stack-with-a-very-long-name".to_string();
    if let Ok(Some(status)) = &mut long.status {
        status.stages[1].name = "staging-eu-west-1-canary".to_string();
    }
    let text = draw(&[long], 80, 40);
    insta::assert_snapshot!(text);
    assert!(!text.contains('…'), "{text}");
    assert!(
        text.contains("\nplatform-observability-prometheus-stack-with-a-very-long-name\n"),
        "{text}"
    );
    assert!(text.contains("\n  staging-eu-west-1-canary\n"), "{text}");
}

/// Snapshot #3 restored #2 fast: `status NAME` says `(rollback to #2, fast)`.
fn fast_rollback() -> Shown {
    promotion(
        "checkout",
        json!({"hashScheme": 1, "phase": "Progressing", "snapshotIndex": 13,
            "snapshotCommit": "37f6dffbab12cdef", "rollbackOf": 12, "rollback": "Fast",
            "currentStageName": "prod", "phaseSince": ago(40),
            "stages": [completed_stage("dev", 13, 30),
                stage("prod", 13, json!({"kind": "Provisioning"}), 20, json!({}))]}),
    )
}

#[test]
fn a_fast_rollback_says_fast_at_every_width() {
    for columns in [64, 80, 120] {
        let text = draw(&[fast_rollback()], columns, 40);
        assert!(text.contains("#13 37f6dff ↶#12 fast"), "{text}");
        assert!(!text.contains('…'), "{text}");
    }
}

/// Waiting since dev began to soak 10 minutes ago; staging has soaked for one.
fn waiting_across_stages() -> Shown {
    promotion(
        "kyverno",
        json!({"hashScheme": 1, "phase": "Waiting", "snapshotIndex": 2,
            "snapshotCommit": "a1b2c3d4e5f6a7b8", "currentStageName": "staging",
            "phaseSince": ago(600),
            "stages": [completed_stage("dev", 2, 60),
                stage("staging", 2, json!({"kind": "Soaking", "until": later(240)}), 60,
                    json!({}))]}),
    )
}

#[test]
fn the_header_counts_the_time_in_the_phase_not_in_the_stages_activity() {
    let text = draw(&[waiting_across_stages()], 80, 40);
    let header = text
        .lines()
        .find(|l| l.starts_with("kyverno "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        header.ends_with("Waiting     #2 a1b2c3d            for 10m"),
        "{header:?}"
    );
    // A status written before `phaseSince`: no time rather than the activity's.
    let mut old = waiting_across_stages();
    if let Ok(Some(status)) = &mut old.status {
        status.phase_since = None;
    }
    let text = draw(&[old], 80, 40);
    assert!(
        !text.lines().nth(2).unwrap_or_default().contains("for"),
        "{text}"
    );
}

#[test]
fn a_gate_under_a_quorum_says_how_many_approvals_it_has_of_how_many() {
    let mut gate = manual_gate();
    if let Ok(Some(status)) = &mut gate.status {
        status.stages[1].approvals = Some(Box::default());
        status.stages[1].approvals_needed = Some(2);
    }
    let text = draw(&[gate], 80, 40);
    assert!(text.contains("awaiting approval, 0 of 2 for 3m"), "{text}");
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
        status.stages[0].counts.members = 120;
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

#[test]
fn the_live_view_at_80_and_120_columns_cuts_no_word() {
    let mut long = manual_gate();
    long.name = "platform-observability-prometheus-stack-with-a-very-long-name".to_string();
    let promotions = [fast_rollback(), failed_stage(), blackouts(), long];
    let narrow = draw(&promotions, 80, 40);
    assert!(!narrow.contains('…'), "{narrow}");
    insta::assert_snapshot!("live_80", narrow);
    let wide = draw(&promotions, 120, 40);
    assert!(!wide.contains('…'), "{wide}");
    insta::assert_snapshot!("live_120", wide);
}

/// A comparative analysis (issue #48): the live view says, under its stage, which clusters were
/// compared with which, their medians, the effect, the p-value and the verdict.
#[test]
fn a_comparison_is_told_under_its_stage() {
    let analyses = json!({"analyses": [
        {"name": "latency", "query": "lat", "wave": 1, "startedAt": ago(60), "count": 3,
         "taken": 1, "phase": "Running",
         "measurements": [
            {"index": 0, "at": ago(30), "value": "p=0.0015 effect=+30%", "verdict": "Failed",
             "comparison": {"baseline": "OtherWaves",
                "testCohort": ["prod-1", "prod-2"], "baselineCohort": ["prod-3", "prod-4"],
                "record": {"testSize": 2, "baselineSize": 2, "testMedian": 0.26,
                    "baselineMedian": 0.2, "u": 4.0, "pValue": 0.0015, "effect": 0.3}}}]}]});
    let shown = promotion(
        "web",
        json!({"hashScheme": 1, "phase": "Progressing", "snapshotIndex": 2,
               "snapshotCommit": "0123456789abcdef", "currentStageName": "prod",
               "stages": [stage("prod", 2, json!({"kind": "Analyzing"}), 60, analyses)]}),
    );
    let text = draw(&[shown], 80, 40);
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        joined.contains(
            "latency: prod-1, prod-2 (median 0.26) vs OtherWaves prod-3, prod-4 (median 0.2): \
             effect +30%, p=0.0015 (Failed)"
        ),
        "{text}"
    );
}

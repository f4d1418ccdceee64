//! Each activity in words, as the table (absolute) and the live view (relative, short) say it.

use chrono::{DateTime, Duration, Utc};
use tollgate_engine::activity::{StageActivity, WaveOf};
use tollgate_engine::pipeline::StageView;
use tollgate_engine::status::StageCounts;

use super::{Times, activity as activity_words, members};

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-24T17:40:00Z")
        .expect("valid")
        .with_timezone(&Utc)
}

fn view<'s>(activity: &'s StageActivity, counts: Option<&'s StageCounts>) -> StageView<'s> {
    StageView {
        name: "prod",
        activity,
        since: Some(now() - Duration::minutes(5)),
        snapshot: Some(2),
        counts,
        status: None,
    }
}

/// (absolute, relative, countdown) of `activity`.
fn worded(activity: StageActivity, counts: Option<&StageCounts>) -> [String; 3] {
    let view = view(&activity, counts);
    [
        activity_words(&view, Times::Absolute),
        activity_words(&view, Times::Relative(now())),
        activity_words(&view, Times::Countdown(now())),
    ]
}

#[test]
fn each_activity_has_its_words_in_each_kind_of_time() {
    let until = now() + Duration::seconds(72);
    let wave = |wave, of| WaveOf { wave, of };
    let cases: Vec<(StageActivity, [&str; 3])> = vec![
        (StageActivity::Pending, ["pending"; 3]),
        (
            StageActivity::Provisioning {
                wave: Some(wave(2, 4)),
            },
            ["wave 2/4: provisioning"; 3],
        ),
        (
            StageActivity::WavePause {
                wave: wave(1, 4),
                until,
            },
            [
                "wave 1/4 done, wave 2 starts 2026-11-24T17:41:12Z",
                "wave 1/4 done, wave 2 starts 17:41:12 (in 1m12s)",
                "wave 1/4 done, next in 1m12s",
            ],
        ),
        (
            StageActivity::Soaking { until },
            [
                "soaking, ends 2026-11-24T17:41:12Z",
                "soaking, ends 17:41:12 (in 1m12s)",
                "soaking, ends in 1m12s",
            ],
        ),
        (
            StageActivity::AwaitingWindow {
                until: now() + Duration::days(1),
            },
            [
                "awaiting the promotion window, opens 2026-11-25T17:40:00Z",
                "awaiting the promotion window, opens 2026-11-25 17:40 (in 1d00h)",
                "awaiting window, opens in 1d00h",
            ],
        ),
        (
            StageActivity::Analyzing { until: Some(until) },
            [
                "analyzing, next measurement 2026-11-24T17:41:12Z",
                "analyzing, next measurement 17:41:12 (in 1m12s)",
                "analyzing, next in 1m12s",
            ],
        ),
        (
            StageActivity::AnalysisInconclusive {
                reason: "error-rate: 2 inconclusive\nmore".into(),
            },
            [
                "analysis inconclusive, awaiting approval since 2026-11-24T17:35:00Z: error-rate: 2 inconclusive",
                "analysis inconclusive, awaiting approval for 5m: error-rate: 2 inconclusive",
                "analysis inconclusive, awaiting approval for 5m: error-rate: 2 inconclusive",
            ],
        ),
        (
            StageActivity::AwaitingApproval,
            [
                "awaiting approval since 2026-11-24T17:35:00Z",
                "awaiting approval for 5m",
                "awaiting approval for 5m",
            ],
        ),
        (
            StageActivity::Blackout {
                until: now() + Duration::minutes(34),
                reason: Some("year-end freeze".into()),
                wave: Some(wave(3, 4)),
            },
            [
                "wave 3/4 held: blackout until 2026-11-24T18:14:00Z (year-end freeze)",
                "wave 3/4 held: blackout until 18:14:00 (year-end freeze), 34m00s left",
                "wave 3/4: blackout, 34m00s left (year-end freeze)",
            ],
        ),
        (
            StageActivity::Paused,
            [
                "paused since 2026-11-24T17:35:00Z",
                "paused for 5m",
                "paused for 5m",
            ],
        ),
        (StageActivity::Skipped, ["skipped: no matching clusters"; 3]),
        (
            StageActivity::Failed {
                reason: "2 of 7 clusters failed\nfleet/prod-1: Helm".into(),
            },
            ["failed: 2 of 7 clusters failed"; 3],
        ),
        (
            StageActivity::Restored { snapshot: Some(1) },
            ["restored to #1"; 3],
        ),
    ];
    for (activity, expected) in cases {
        assert_eq!(worded(activity.clone(), None), expected, "{activity:?}");
    }
}

#[test]
fn a_completed_stage_says_how_many_failures_it_tolerated() {
    let clean = StageCounts {
        members: 7,
        provisioned: 7,
        ..StageCounts::default()
    };
    assert_eq!(
        worded(StageActivity::Completed, Some(&clean)),
        [
            "completed at 2026-11-24T17:35:00Z",
            "completed 5m ago",
            "completed 5m ago"
        ]
    );
    let tolerated = StageCounts {
        members: 7,
        provisioned: 6,
        failed: 1,
        ..StageCounts::default()
    };
    assert_eq!(
        worded(StageActivity::Completed, Some(&tolerated)),
        [
            "completed at 2026-11-24T17:35:00Z, 1 failure tolerated",
            "completed 5m ago, 1 failure tolerated",
            "completed, 1 failure tolerated"
        ]
    );
}

#[test]
fn a_restored_or_restoring_stage_shows_no_counts_of_the_rejected_snapshot() {
    let counts = StageCounts {
        members: 7,
        failed: 1,
        ..StageCounts::default()
    };
    for (activity, shown) in [
        (StageActivity::Restored { snapshot: Some(1) }, false),
        (StageActivity::RollingBack { snapshot: Some(1) }, false),
        (StageActivity::Failed { reason: "x".into() }, true),
        (StageActivity::Completed, true),
    ] {
        let view = view(&activity, Some(&counts));
        assert_eq!(super::counts(&view).is_some(), shown, "{activity:?}");
    }
}

#[test]
fn members_count_every_wave_and_a_status_without_them_counts_the_matching_clusters() {
    let waved = StageCounts {
        members: 7,
        later_waves: 6,
        matching_clusters: 1,
        provisioned: 1,
        ..StageCounts::default()
    };
    assert_eq!(members(&waved), 7);
    let older = StageCounts {
        matching_clusters: 3,
        ..StageCounts::default()
    };
    assert_eq!(members(&older), 3);
}

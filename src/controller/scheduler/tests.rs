//! The scheduler driven synchronously on a fake clock, with the cluster's answers from plain sets
//! (as kube-runtime's scheduler tests drive it with a paused clock): readiness, wake-ups,
//! touches, the removal guard, restarts, lease loss and retries.

use std::collections::{BTreeMap, BTreeSet};

use chrono::TimeZone;
use serde_json::json;
use tollgate_engine::testing::{commit, promotion, snapshot};
use tollgate_source::PromotionView;

use super::*;

fn t(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + seconds, 0)
        .single()
        .expect("valid time")
}

/// A promotion git shows as valid (it has a blast radius), with snapshot `index`.
fn valid(name: &str, index: u64) -> Arc<PromotionGit> {
    let p = promotion(json!({
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {"profileSpec": {}, "stages": [{"name": "dev", "clusterSelector": {}}]}
    }));
    let snapshot = Arc::new(snapshot(p, index, commit(index)));
    Arc::new(PromotionGit {
        view: PromotionView::Valid { snapshot },
        approvals: Arc::default(),
        history: Arc::default(),
        policy: Ok(None),
        unverified: None,
        rewound: None,
    })
}

/// A promotion whose file never was valid (no blast radius).
fn never_valid() -> Arc<PromotionGit> {
    Arc::new(PromotionGit {
        view: PromotionView::Invalid {
            errors: Vec::new(),
            last_good: None,
        },
        approvals: Arc::default(),
        history: Arc::default(),
        policy: Ok(None),
        unverified: None,
        rewound: None,
    })
}

fn sync(complete: bool, promotions: &[(&str, Option<Arc<PromotionGit>>)]) -> GitUpdate {
    GitUpdate {
        head: None,
        path_missing: false,
        promotions: promotions
            .iter()
            .map(|(name, git)| (name.to_string(), git.clone()))
            .collect(),
        complete,
        retired: BTreeMap::new(),
        error: None,
        duration: Duration::ZERO,
        refused: false,
    }
}

/// The history git keeps of a promotion it no longer defines: snapshots #1..=#last.
fn history(name: &str, last: u64) -> Arc<Vec<Snapshot>> {
    let snapshots = (1..=last).map(|index| match &valid(name, index).view {
        PromotionView::Valid { snapshot } => (**snapshot).clone(),
        PromotionView::Invalid { .. } => unreachable!("valid"),
    });
    Arc::new(snapshots.collect())
}

fn all_valid(names: &[&str]) -> GitUpdate {
    let promotions: Vec<(&str, Option<Arc<PromotionGit>>)> =
        names.iter().map(|n| (*n, Some(valid(n, 1)))).collect();
    sync(true, &promotions)
}

fn removal_of(names: &[&str]) -> GitUpdate {
    let gone: Vec<(&str, Option<Arc<PromotionGit>>)> = names.iter().map(|n| (*n, None)).collect();
    sync(false, &gone)
}

/// The management cluster as the watches show it.
#[derive(Default)]
struct FakeCluster {
    state_objects: BTreeSet<String>,
    /// Promotions whose status records a run or whose profiles exist.
    runs: BTreeSet<String>,
    confirmed: BTreeSet<String>,
    profiles: BTreeMap<String, String>,
}

impl FakeCluster {
    /// State objects with a run for each of `names` (as a previous process left them).
    fn ran(names: &[&str]) -> Self {
        let names: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
        FakeCluster {
            state_objects: names.clone(),
            runs: names,
            ..FakeCluster::default()
        }
    }
}

impl ClusterView for FakeCluster {
    fn state_objects(&self) -> Vec<String> {
        self.state_objects.iter().cloned().collect()
    }
    fn shows_a_run(&self, name: &str) -> bool {
        self.runs.contains(name)
    }
    fn confirms_prune(&self, name: &str) -> bool {
        self.confirmed.contains(name)
    }
    fn promotion_of_profile(&self, profile: &str) -> Option<String> {
        self.profiles.get(profile).cloned()
    }
}

fn names(steps: &[Step]) -> Vec<&str> {
    steps.iter().map(|s| s.name.as_str()).collect()
}

/// What each step's presence is, by name: "present", "removed" or "held".
fn kinds(steps: &[Step]) -> Vec<(&str, &'static str)> {
    steps
        .iter()
        .map(|s| {
            let kind = match &s.presence {
                GitPresence::Present(_) => "present",
                GitPresence::Removed { .. } => "removed",
                GitPresence::RemovalHeld { .. } => "held",
            };
            (s.name.as_str(), kind)
        })
        .collect()
}

/// Every promotion stepped once after a ready start as leader, each done with no wake-up.
fn started(promotions: &[&str], cluster: &FakeCluster) -> Scheduler {
    let mut scheduler = Scheduler::new(PruneGuard::default());
    scheduler.on_git(&all_valid(promotions), cluster);
    scheduler.on_watches_listed();
    scheduler.on_lease(true);
    for step in scheduler.due(t(0)) {
        scheduler.on_step_done(&step.name, StepDone::Stepped { wake_at: None }, t(0));
    }
    scheduler
}

fn settle(scheduler: &mut Scheduler, now: DateTime<Utc>) -> Vec<Step> {
    let steps = scheduler.due(now);
    for step in &steps {
        let done = match step.presence {
            GitPresence::Removed { .. } => StepDone::Forgotten,
            _ => StepDone::Stepped { wake_at: None },
        };
        scheduler.on_step_done(&step.name, done, now);
    }
    steps
}

#[test]
fn nothing_is_stepped_before_git_and_every_watch_listed_then_everything_once() {
    let cluster = FakeCluster::default();
    let mut scheduler = Scheduler::new(PruneGuard::default());
    assert_eq!(
        scheduler.on_lease(true),
        vec![Command::TrustWatchedStatuses]
    );
    assert!(
        scheduler
            .on_git(&all_valid(&["a", "b"]), &cluster)
            .is_empty()
    );
    assert!(
        scheduler.due(t(0)).is_empty(),
        "the watches have not listed"
    );
    assert_eq!(
        scheduler.on_watches_listed(),
        vec![Command::AnnounceReady { promotions: 2 }]
    );
    assert!(scheduler.on_watches_listed().is_empty(), "said once");
    assert_eq!(names(&settle(&mut scheduler, t(0))), ["a", "b"]);
    assert!(scheduler.due(t(0)).is_empty(), "each once");
    assert!(scheduler.is_idle());
}

#[test]
fn a_failed_git_sync_changes_nothing_and_does_not_make_the_controller_ready() {
    let cluster = FakeCluster::default();
    let mut scheduler = Scheduler::new(PruneGuard::default());
    scheduler.on_watches_listed();
    scheduler.on_lease(true);
    let mut failed = all_valid(&["a"]);
    failed.error = Some("fetch failed".into());
    assert!(scheduler.on_git(&failed, &cluster).is_empty());
    assert!(!scheduler.is_ready());
    assert!(scheduler.due(t(0)).is_empty());
}

#[test]
fn an_engine_wake_up_steps_its_promotion_at_its_instant_and_not_before() {
    let cluster = FakeCluster::default();
    let mut scheduler = started(&["a", "b"], &cluster);
    scheduler.on_step_done(
        "a",
        StepDone::Stepped {
            wake_at: Some(t(30)),
        },
        t(1),
    );
    scheduler.on_step_done(
        "b",
        StepDone::Stepped {
            wake_at: Some(t(20)),
        },
        t(1),
    );
    // The latest request replaces the earlier one.
    scheduler.on_step_done(
        "b",
        StepDone::Stepped {
            wake_at: Some(t(40)),
        },
        t(2),
    );
    assert_eq!(scheduler.next_wake(), Some(t(30)));
    assert!(!scheduler.is_idle());
    assert!(scheduler.due(t(29)).is_empty());
    assert_eq!(names(&scheduler.due(t(30))), ["a"]);
    assert_eq!(scheduler.next_wake(), Some(t(40)));
    scheduler.on_step_done("b", StepDone::Stepped { wake_at: None }, t(31));
    assert_eq!(
        scheduler.next_wake(),
        None,
        "a step without a wake-up clears it"
    );
}

#[test]
fn quiescent_only_with_nothing_marked_and_nothing_due_and_it_says_when_it_wakes() {
    let cluster = FakeCluster::default();
    let unsynced = Scheduler::new(PruneGuard::default());
    assert_eq!(unsynced.quiescence(t(0)), None, "not synced yet");
    let mut scheduler = started(&["a"], &cluster);
    let idle = Quiescence { next_wake_at: None };
    assert_eq!(scheduler.quiescence(t(1)), Some(idle));
    scheduler.on_touch(Touch::Promotions(vec!["a".into()]), &cluster);
    assert_eq!(scheduler.quiescence(t(1)), None, "touched: to step");
    let wake_at = Some(t(30));
    for step in scheduler.due(t(1)) {
        scheduler.on_step_done(&step.name, StepDone::Stepped { wake_at }, t(1));
    }
    let quiet = scheduler.quiescence(t(1));
    assert_eq!(
        quiet,
        Some(Quiescence {
            next_wake_at: wake_at
        })
    );
    assert_eq!(scheduler.quiescence(t(30)), None, "the wake-up is due");
    scheduler.on_lease(false);
    scheduler.on_lease(true);
    assert_eq!(scheduler.quiescence(t(1)), None, "a new leader steps all");
}

#[test]
fn a_touch_steps_only_the_promotions_it_concerns() {
    let mut cluster = FakeCluster::default();
    cluster.profiles.insert("a-dev".into(), "a".into());
    let mut scheduler = started(&["a", "b", "c"], &cluster);
    scheduler.on_touch(
        Touch::Profiles(vec!["a-dev".into(), "foreign".into()]),
        &cluster,
    );
    scheduler.on_touch(Touch::Promotions(vec!["c".into()]), &cluster);
    assert_eq!(names(&settle(&mut scheduler, t(1))), ["a", "c"]);
    scheduler.on_touch(Touch::Clusters, &cluster);
    assert_eq!(
        names(&settle(&mut scheduler, t(2))),
        ["a", "b", "c"],
        "the inventory changed: every promotion"
    );
}

#[test]
fn a_removal_within_the_guards_share_is_stepped_removed_with_its_last_snapshot_then_forgotten() {
    let cluster = FakeCluster::ran(&["a", "b", "c"]);
    let mut scheduler = started(&["a", "b", "c"], &cluster);
    scheduler.on_git(&removal_of(&["a"]), &cluster);
    let steps = scheduler.due(t(1));
    assert_eq!(kinds(&steps), [("a", "removed")]);
    match &steps[0].presence {
        GitPresence::Removed { last } => {
            assert_eq!(
                last.as_ref().map(|s| s.index),
                Some(1),
                "preserve is read from it"
            );
        }
        other => panic!("{other:?}"),
    }
    scheduler.on_step_done("a", StepDone::Forgotten, t(1));
    scheduler.on_touch(Touch::Clusters, &cluster);
    assert_eq!(names(&scheduler.due(t(2))), ["b", "c"], "forgotten");
}

#[test]
fn a_mass_removal_is_held_and_stepped_frozen_until_confirmed_by_annotation() {
    let mut cluster = FakeCluster::ran(&["a", "b"]);
    let mut scheduler = started(&["a", "b"], &cluster);
    scheduler.on_git(&removal_of(&["a", "b"]), &cluster);
    let steps = scheduler.due(t(1));
    assert_eq!(kinds(&steps), [("a", "held"), ("b", "held")]);
    match &steps[0].presence {
        GitPresence::RemovalHeld { last, reason } => {
            assert!(
                reason.starts_with("the commit removes all 2 promotions"),
                "{reason}"
            );
            assert!(
                reason.contains("tollgate.dev/confirm-prune=true"),
                "{reason}"
            );
            assert!(
                last.is_some(),
                "its last snapshot names the profiles it owns"
            );
        }
        other => panic!("{other:?}"),
    }
    // Whatever wakes it (the cluster, a touch, a wake-up), it is stepped as held: frozen.
    scheduler.on_step_done(
        "a",
        StepDone::Stepped {
            wake_at: Some(t(5)),
        },
        t(1),
    );
    scheduler.on_touch(Touch::Clusters, &cluster);
    assert_eq!(kinds(&scheduler.due(t(2))), [("a", "held"), ("b", "held")]);
    assert_eq!(kinds(&scheduler.due(t(5))), [("a", "held")]);
    // A touch without the annotation releases nothing.
    scheduler.on_touch(Touch::Promotions(vec!["a".into()]), &cluster);
    assert_eq!(kinds(&scheduler.due(t(6))), [("a", "held")]);
    cluster.confirmed.insert("a".into());
    scheduler.on_touch(Touch::Promotions(vec!["a".into()]), &cluster);
    assert_eq!(kinds(&scheduler.due(t(7))), [("a", "removed")]);
    scheduler.on_touch(Touch::Clusters, &cluster);
    assert_eq!(
        kinds(&scheduler.due(t(8))),
        [("a", "removed"), ("b", "held")],
        "one confirmation releases one promotion"
    );
}

#[test]
fn a_held_removal_confirmed_without_a_touch_is_released_on_the_next_turn() {
    let mut cluster = FakeCluster::ran(&["a", "b"]);
    let mut scheduler = started(&["a", "b"], &cluster);
    scheduler.on_git(&removal_of(&["a", "b"]), &cluster);
    assert_eq!(
        kinds(&settle(&mut scheduler, t(1))),
        [("a", "held"), ("b", "held")]
    );
    scheduler.on_turn(&cluster);
    assert!(scheduler.due(t(2)).is_empty(), "nothing confirmed yet");
    // The annotation is there, but the touch that carried it was handled before the status
    // cache showed it: the next turn releases it all the same.
    cluster.confirmed.insert("a".into());
    scheduler.on_turn(&cluster);
    assert_eq!(kinds(&scheduler.due(t(3))), [("a", "removed")]);
}

#[test]
fn a_held_promotion_back_in_git_runs_again() {
    let cluster = FakeCluster::ran(&["a"]);
    let mut scheduler = started(&["a"], &cluster);
    scheduler.on_git(&removal_of(&["a"]), &cluster);
    assert_eq!(kinds(&settle(&mut scheduler, t(1))), [("a", "held")]);
    scheduler.on_git(&sync(false, &[("a", Some(valid("a", 2)))]), &cluster);
    assert_eq!(kinds(&settle(&mut scheduler, t(2))), [("a", "present")]);
}

#[test]
fn a_vanished_path_holds_even_one_removal_and_confirm_prune_holds_nothing() {
    let cluster = FakeCluster::ran(&["a", "b", "c", "d"]);
    let mut vanished = removal_of(&["a"]);
    vanished.path_missing = true;
    let mut scheduler = started(&["a", "b", "c", "d"], &cluster);
    scheduler.on_git(&vanished, &cluster);
    assert_eq!(kinds(&scheduler.due(t(1))), [("a", "held")]);

    let mut confirmed = Scheduler::new(PruneGuard {
        confirmed: true,
        ..PruneGuard::default()
    });
    confirmed.on_git(&all_valid(&["a", "b"]), &cluster);
    confirmed.on_watches_listed();
    confirmed.on_lease(true);
    settle(&mut confirmed, t(0));
    confirmed.on_git(&vanished, &cluster);
    assert_eq!(kinds(&confirmed.due(t(1))), [("a", "removed")]);
}

#[test]
fn a_promotion_that_never_was_valid_is_neither_held_nor_counted() {
    let cluster = FakeCluster::ran(&["a"]);
    let mut scheduler = Scheduler::new(PruneGuard::default());
    scheduler.on_git(
        &sync(
            true,
            &[("a", Some(valid("a", 1))), ("broken", Some(never_valid()))],
        ),
        &cluster,
    );
    scheduler.on_watches_listed();
    scheduler.on_lease(true);
    settle(&mut scheduler, t(0));
    // 1 of 2 known, but only `a` could withdraw anything: removing `broken` is not a mass removal.
    scheduler.on_git(&removal_of(&["broken"]), &cluster);
    assert_eq!(kinds(&scheduler.due(t(1))), [("broken", "removed")]);
}

/// A previous process left state objects for four; git now defines three of them. The fourth is
/// removed with the last snapshot git's history has of it: it says whether the removal keeps
/// its profiles (`preserveClusterProfilesOnDelete`). Before, this process knew no snapshot of
/// it, and a removal that should have kept the profiles deleted them.
#[test]
fn a_restart_steps_every_promotion_and_removes_those_gone_while_it_was_down() {
    let cluster = FakeCluster::ran(&["a", "b", "c", "gone"]);
    let mut scheduler = Scheduler::new(PruneGuard::default());
    let mut listing = all_valid(&["a", "b", "c"]);
    listing.retired.insert("gone".into(), history("gone", 2));
    scheduler.on_git(&listing, &cluster);
    scheduler.on_watches_listed();
    scheduler.on_lease(true);
    let steps = scheduler.due(t(0));
    assert_eq!(
        kinds(&steps),
        [
            ("a", "present"),
            ("b", "present"),
            ("c", "present"),
            ("gone", "removed")
        ]
    );
    match &steps[3].presence {
        GitPresence::Removed { last } => {
            assert_eq!(
                last.as_ref().map(|s| s.index),
                Some(2),
                "its newest snapshot"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// A removal held at start (git lost every promotion while the controller was down) must be
/// stepped, so that its status says it is held: before, a held name git never showed this
/// process had no presence and was never stepped, its status silent about the hold.
#[test]
fn a_removal_held_at_a_restart_is_stepped_as_held() {
    let mut cluster = FakeCluster::ran(&["a", "b"]);
    let mut scheduler = Scheduler::new(PruneGuard::default());
    let mut listing = sync(true, &[]);
    listing.retired.insert("a".into(), history("a", 1));
    scheduler.on_git(&listing, &cluster);
    scheduler.on_watches_listed();
    scheduler.on_lease(true);
    let steps = scheduler.due(t(0));
    assert_eq!(kinds(&steps), [("a", "held"), ("b", "held")]);
    let lasts: Vec<Option<u64>> = steps
        .iter()
        .map(|step| match &step.presence {
            GitPresence::RemovalHeld { last, reason } => {
                assert!(reason.contains("removes all 2 promotions"), "{reason}");
                last.as_ref().map(|s| s.index)
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        lasts,
        [Some(1), None],
        "b's history is unknown: frozen all the same"
    );
    cluster.confirmed.insert("a".into());
    scheduler.on_touch(Touch::Promotions(vec!["a".into()]), &cluster);
    match &scheduler.due(t(1))[..] {
        [
            Step {
                presence: GitPresence::Removed { last: Some(last) },
                ..
            },
        ] => {
            assert_eq!(last.index, 1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_replica_that_loses_its_lease_steps_nothing_until_it_leads_again_then_everything() {
    let cluster = FakeCluster::default();
    let mut scheduler = started(&["a", "b", "c"], &cluster);
    scheduler.on_step_done(
        "a",
        StepDone::Stepped {
            wake_at: Some(t(5)),
        },
        t(0),
    );
    assert!(scheduler.on_lease(false).is_empty());
    scheduler.on_touch(Touch::Promotions(vec!["b".into()]), &cluster);
    assert!(scheduler.due(t(10)).is_empty(), "a follower steps nothing");
    assert_eq!(
        scheduler.next_wake(),
        None,
        "the due wake-up is kept as a step to do"
    );
    assert!(scheduler.on_lease(false).is_empty());
    assert_eq!(
        scheduler.on_lease(true),
        vec![Command::TrustWatchedStatuses],
        "another replica may have written meanwhile"
    );
    assert_eq!(names(&settle(&mut scheduler, t(11))), ["a", "b", "c"]);
    assert!(
        scheduler.on_lease(true).is_empty(),
        "still leading: nothing new"
    );
}

#[test]
fn a_step_cut_off_by_the_lease_is_retried_soon() {
    let cluster = FakeCluster::default();
    let mut scheduler = started(&["a"], &cluster);
    // The writer refused (not leading): transient, nothing persisted.
    let retry = scheduler.on_step_done(
        "a",
        StepDone::Failed {
            transient: true,
            hold_off: Duration::ZERO,
        },
        t(0),
    );
    assert_eq!(
        retry,
        Some(Retry {
            attempt: 1,
            after: Duration::from_millis(200)
        })
    );
    let at = t(0) + chrono::Duration::milliseconds(200);
    assert_eq!(scheduler.next_wake(), Some(at));
    assert_eq!(names(&scheduler.due(at)), ["a"]);
}

#[test]
fn a_failed_step_is_not_retried_before_the_server_allows_whatever_touches_it() {
    let cluster = FakeCluster::default();
    let mut scheduler = started(&["a", "b"], &cluster);
    let hold_off = Duration::from_secs(3);
    let failed = StepDone::Failed {
        transient: true,
        hold_off,
    };
    let retry = scheduler.on_step_done("a", failed, t(0));
    assert_eq!(retry.map(|r| r.after), Some(hold_off));
    scheduler.on_touch(Touch::Clusters, &cluster);
    assert_eq!(names(&scheduler.due(t(1))), ["b"], "a is held off");
    assert_eq!(scheduler.next_wake(), Some(t(3)));
    assert_eq!(names(&scheduler.due(t(3))), ["a"]);
    scheduler.on_step_done("a", StepDone::Stepped { wake_at: None }, t(3));
    scheduler.on_touch(Touch::Promotions(vec!["a".into()]), &cluster);
    assert_eq!(
        names(&scheduler.due(t(3))),
        ["a"],
        "a success lifts the hold"
    );
}

/// A complete listing (a history rebuild) that shows a removal again must not lose what this
/// process knew of it: its last snapshot decides whether its profiles are kept.
#[test]
fn a_removal_listed_again_keeps_its_last_snapshot() {
    let cluster = FakeCluster::ran(&["a", "b", "c"]);
    let mut scheduler = started(&["a", "b", "c"], &cluster);
    scheduler.on_git(&removal_of(&["a"]), &cluster);
    // Its step has not finished (the API is down, say) when git's history is rebuilt.
    scheduler.on_git(&all_valid(&["b", "c"]), &cluster);
    let steps = scheduler.due(t(1));
    match &steps[..] {
        [
            Step {
                name,
                presence: GitPresence::Removed { last: Some(last) },
            },
            ..,
        ] => assert_eq!((name.as_str(), last.index), ("a", 1)),
        other => panic!("{other:?}"),
    }
}

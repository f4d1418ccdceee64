//! The start gate: may the run go on, may this stage start? One ordered list of the holds on a
//! start ([`START_HOLDS`]: `paused → blackout → dependency → unstartable`), each a pure rule
//! returning the [`StartHold`] that stops it. The run asks once per start (a new run's first
//! stage, the next stage of the run in progress) and keeps the answer: it says so in status
//! ([`StartHold::record`]) and the stages ahead show it ([`StartHold::shown_ahead`]), so that no
//! view rebuilds it.
//!
//! What holds every new run, whichever snapshot it is (a policy problem, a change no admin
//! approved, a rewritten branch under `onRewind: Hold`: [`new_runs_held`]), decides which snapshot
//! runs (`new_snapshot`) and is said of the snapshot that waits; `onNewSnapshot` likewise.
//!
//! A new hold is one rule here and one entry in [`START_HOLDS`].

use chrono::{DateTime, Utc};
use tollgate_model::blackout::{self, ActiveBlackout};
use tollgate_model::policy::OnRewind;
use tollgate_model::snapshot::{DEPENDS_ON_ANNOTATION, PAUSED_ANNOTATION, Snapshot};
use tollgate_render::stage_profile_name;

use crate::depends_on;
use crate::effects::Effects;
use crate::input::StepInput;
use crate::messages::{self, capitalized};
use crate::output::{EngineEvent, EventReason};
use crate::status::activity::{self, StageActivity};
use crate::status::{HeldStart, Phase, PromotionStatus};

/// A start the run asks about.
pub(crate) struct Start<'i, 'a> {
    pub input: &'i StepInput<'a>,
    /// The snapshot of the run.
    pub snapshot: &'a Snapshot,
    /// The newest snapshot in git: its annotations (pause) hold whichever snapshot runs.
    pub newest: &'a Snapshot,
    pub starting: Starting<'a>,
    /// The run restores known-good content (see `lineage`): no blackout holds it.
    pub rollback: bool,
}

/// What would start.
#[derive(Clone, Copy)]
pub(crate) enum Starting<'a> {
    /// Nothing: the run in progress goes on (only a pause holds it).
    Nothing,
    /// A new run, at its first stage (`None`: the promotion has no stages).
    Run { first: Option<&'a str> },
    /// The next stage of the run in progress.
    Stage(&'a str),
}

/// Why a start waits: what the held stage does meanwhile, the promotion's phase and message, when
/// the hold ends by itself, and the event that tells it when it is new.
#[derive(Clone, Debug)]
pub(crate) struct StartHold {
    pub activity: StageActivity,
    pub phase: Phase,
    pub message: String,
    /// `None`: an input change lifts it (the controller steps again then).
    pub wake_at: Option<DateTime<Utc>>,
    pub event: Option<EngineEvent>,
    /// The stage it holds (`None`: the run in progress, or a promotion without stages).
    pub stage: Option<String>,
    pub shown_on: ShownOn,
}

/// Which stage shows a hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShownOn {
    /// The current stage, in its status: a pause holds the stage in progress.
    CurrentStage,
    /// The first stage ahead: a blackout holds whatever starts next.
    NextStageAhead,
    /// The stage it holds, when that stage is ahead.
    HeldStage,
    /// No stage: the promotion's phase and message say it (a run that cannot start at all).
    Nowhere,
}

type HoldRule = fn(&Start<'_, '_>) -> Option<StartHold>;

/// The holds on a start, in the order they are asked: the first that holds answers.
const START_HOLDS: [HoldRule; 4] = [paused, blackout_hold, dependency, unstartable];

/// The first hold on `start`, if one holds it.
pub(crate) fn ask(start: &Start<'_, '_>) -> Option<StartHold> {
    START_HOLDS.iter().find_map(|rule| rule(start))
}

/// `tollgate.dev/paused` on the newest snapshot holds everything where it is: no stage starts,
/// and the stage in progress does not go on.
fn paused(start: &Start<'_, '_>) -> Option<StartHold> {
    let annotations = &start.newest.promotion.metadata.annotations;
    if annotations
        .get(PAUSED_ANNOTATION)
        .is_none_or(|v| v != "true")
    {
        return None;
    }
    let message = match start.starting {
        Starting::Run { .. } => format!(
            "paused by tollgate.dev/paused; restart pending for snapshot #{}",
            start.snapshot.index
        ),
        _ => "paused by tollgate.dev/paused".to_string(),
    };
    let told = start.input.status.is_some_and(|s| s.paused_since.is_some());
    Some(StartHold {
        activity: StageActivity::Paused,
        phase: Phase::Paused,
        message,
        wake_at: None,
        event: (!told).then(|| {
            EngineEvent::normal(
                EventReason::Paused,
                "Pipeline paused by tollgate.dev/paused".to_string(),
            )
        }),
        stage: None,
        shown_on: ShownOn::CurrentStage,
    })
}

/// The blackout in force now, if it holds this run's starts (a rollback's are not held:
/// restoring known-good content is what a freeze is for). Also what holds a stage's next wave.
pub(crate) fn blackout(input: &StepInput<'_>, rollback: bool) -> Option<ActiveBlackout> {
    if rollback {
        return None;
    }
    let policy = input.policy?;
    blackout::active_at(&policy.spec.blackouts, input.now)
}

/// A blackout holds a start until it ends.
fn blackout_hold(start: &Start<'_, '_>) -> Option<StartHold> {
    // A new run's held start is shown on its first stage (by `pipeline()` when that stage is
    // not ahead: it still runs the older snapshot), never on the stage after the current run's.
    let (stage, waits, shown_on) = match start.starting {
        Starting::Nothing => return None,
        Starting::Run { first } => (
            first,
            format!("snapshot #{} waits to start", start.snapshot.index),
            ShownOn::HeldStage,
        ),
        Starting::Stage(next) => (
            Some(next),
            format!("stage {next} waits to start"),
            ShownOn::NextStageAhead,
        ),
    };
    let blackout = blackout(start.input, start.rollback)?;
    let told = start
        .input
        .status
        .is_some_and(|s| s.blackout_until == Some(blackout.until));
    let event = (!told).then(|| {
        EngineEvent::normal(
            EventReason::Blackout,
            format!("{}: {waits}", capitalized(&blackout.describe())),
        )
    });
    Some(StartHold {
        message: format!("{}: {waits}", blackout.describe()),
        activity: StageActivity::Blackout {
            until: blackout.until,
            reason: blackout.reason,
            wave: None,
        },
        phase: Phase::Waiting,
        wake_at: Some(blackout.until),
        event,
        stage: stage.map(str::to_string),
        shown_on,
    })
}

/// The promotions this one depends on (`tollgate.dev/depends-on`) hold a stage's start until
/// their stage of that name completed its current run; a refused annotation (a cycle, an unknown
/// name) holds every start. The controller steps again when one of them changes.
fn dependency(start: &Start<'_, '_>) -> Option<StartHold> {
    let (stage, run) = match start.starting {
        Starting::Nothing => return None,
        Starting::Run { first } => (
            first?,
            format!(" (snapshot #{} waits to start)", start.snapshot.index),
        ),
        Starting::Stage(next) => (next, String::new()),
    };
    let input = start.input;
    let (phase, message, dependency) = match input.dependency_problem {
        Some(problem) => (
            Phase::Held,
            format!(
                "stage {stage} does not start{run}: {DEPENDS_ON_ANNOTATION} refused: {problem}"
            ),
            "a fix of tollgate.dev/depends-on".to_string(),
        ),
        None => {
            let waits = depends_on::waits_for(input.dependencies, stage);
            if waits.is_empty() {
                return None;
            }
            let text = depends_on::waits_for_text(&waits);
            (
                Phase::Waiting,
                format!("stage {stage} {text}{run}"),
                waits.join(", "),
            )
        }
    };
    let told = input.status.and_then(|s| s.message.as_deref()) == Some(message.as_str());
    let event = (phase == Phase::Held && !told)
        .then(|| EngineEvent::warning(EventReason::Blocked, message.clone()));
    Some(StartHold {
        activity: StageActivity::AwaitingDependency { dependency },
        phase,
        message,
        wake_at: None,
        event,
        stage: Some(stage.to_string()),
        shown_on: ShownOn::HeldStage,
    })
}

/// A new run cannot start at all: its promotion has no stages, or someone else's ClusterProfile
/// holds its first stage's name (never applied over). The previous run's state is kept, so the
/// start is tried again.
fn unstartable(start: &Start<'_, '_>) -> Option<StartHold> {
    let Starting::Run { first } = start.starting else {
        return None;
    };
    let reason = match first {
        None => "the promotion has no stages".to_string(),
        Some(first) => {
            let promotion = start.snapshot.promotion.name();
            let profile = stage_profile_name(promotion, first);
            let foreign = start
                .input
                .observed
                .profiles
                .get(&profile)
                .is_some_and(|p| !p.is_owned_by(promotion));
            if !foreign {
                return None;
            }
            format!(
                "cannot start snapshot #{}: {}",
                start.snapshot.index,
                messages::foreign_profile(&profile)
            )
        }
    };
    let told = start.input.status.and_then(|s| s.message.as_deref()) == Some(reason.as_str());
    Some(StartHold {
        activity: StageActivity::Failed {
            reason: reason.clone(),
        },
        phase: Phase::Failed,
        event: (!told).then(|| EngineEvent::warning(EventReason::Blocked, reason.clone())),
        message: reason,
        wake_at: None,
        stage: first.map(str::to_string),
        shown_on: ShownOn::Nowhere,
    })
}

impl StartHold {
    /// Says so: the event when the hold is new, the phase and message, the wake-up. A pause
    /// marks the stage in progress Paused (since when it began); a blackout records its end and
    /// the start it holds (`blackoutUntil`, `blackoutHolds`).
    pub(crate) fn record(
        &self,
        start: &Start<'_, '_>,
        status: &mut PromotionStatus,
        effects: &mut Effects,
    ) {
        let now = start.input.now;
        effects.events.extend(self.event.clone());
        status.phase = self.phase.clone();
        status.message = Some(self.message.clone());
        if let Some(at) = self.wake_at {
            effects.wake(at);
        }
        if self.shown_on == ShownOn::CurrentStage {
            status.paused_since.get_or_insert(now);
            if let Some(current) = status.current_stage_name.clone()
                && let Some(st) = status.stage_mut(&current)
                && !st.activity.is_final()
            {
                let (activity, since) = (&mut st.activity, &mut st.activity_since);
                activity::set(activity, since, self.activity.clone(), now);
            }
        }
        if let StageActivity::Blackout { until, .. } = &self.activity {
            status.blackout_until = Some(*until);
            status.blackout_holds = self.stage.clone().map(|stage| {
                // The same hold of the same start keeps its beginning.
                let since = start
                    .input
                    .status
                    .and_then(|s| s.blackout_holds.as_deref())
                    .filter(|held| {
                        held.stage == stage
                            && held.snapshot_index == start.snapshot.index
                            && held.activity.same_kind(&self.activity)
                    })
                    .and_then(|held| held.since)
                    .unwrap_or(now);
                Box::new(HeldStart {
                    stage,
                    snapshot_index: start.snapshot.index,
                    snapshot_commit: start.snapshot.commit.sha.clone(),
                    activity: self.activity.clone(),
                    since: Some(since),
                })
            });
        }
    }

    /// Whether the stage ahead at `position` (after the current stage), `name`, shows the hold.
    pub(crate) fn shown_ahead(&self, position: usize, name: &str) -> bool {
        match self.shown_on {
            ShownOn::NextStageAhead => position == 0,
            ShownOn::HeldStage => self.stage.as_deref() == Some(name),
            ShownOn::CurrentStage | ShownOn::Nowhere => false,
        }
    }

    /// A pause holds the run in progress where it is (rather than a start).
    pub(crate) fn is_pause(&self) -> bool {
        self.shown_on == ShownOn::CurrentStage
    }
}

/// A pause that ended: the pipeline resumed (told once).
pub(crate) fn note_resumed(status: &mut PromotionStatus, effects: &mut Effects) {
    if status.paused_since.take().is_some() {
        effects.events.push(EngineEvent::normal(
            EventReason::Resumed,
            "Pipeline resumed: tollgate.dev/paused removed".to_string(),
        ));
    }
}

/// Why no new run may start now, whichever snapshot: the governing policy cannot be resolved
/// (or a change waits for an admin), or the branch was rewritten under `onRewind: Hold`. The run
/// in progress goes on; the snapshot that waits says so.
pub(crate) fn new_runs_held<'a>(input: &StepInput<'a>) -> Option<NewRunsHeld<'a>> {
    if let Some(problem) = input.policy_problem {
        return Some(NewRunsHeld {
            why: problem,
            kind: match input.policy_unapproved {
                true => NewRunsHeldKind::Unapproved,
                false => NewRunsHeldKind::Policy,
            },
        });
    }
    let hold = input
        .policy
        .is_some_and(|p| p.spec.on_rewind == OnRewind::Hold);
    input.rewound.filter(|_| hold).map(|why| NewRunsHeld {
        why,
        kind: NewRunsHeldKind::Rewound,
    })
}

/// Why nothing new starts (see [`new_runs_held`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NewRunsHeld<'a> {
    pub why: &'a str,
    pub kind: NewRunsHeldKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NewRunsHeldKind {
    Policy,
    Unapproved,
    Rewound,
}

impl NewRunsHeld<'_> {
    /// What lifts it, for "snapshot #N is held until …".
    pub fn until(&self) -> &'static str {
        match self.kind {
            NewRunsHeldKind::Policy => "the RolloutPolicy is fixed",
            NewRunsHeldKind::Unapproved => "an admin approves the change",
            NewRunsHeldKind::Rewound => {
                "the branch moves on from its rewritten tip (onRewind: Hold)"
            }
        }
    }
}

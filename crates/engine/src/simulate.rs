//! `simulate`: the engine run on a fake clock, for estimates (`tollgate plan`'s timeline). It calls
//! the same [`step`] the controller calls, from a snapshot, the RolloutPolicy, the live status (when
//! known), the fleet (when known) and `now`, with Sveltos played by a stand-in that provisions every
//! cluster a fixed latency after an apply; the clock jumps to each instant the engine asks to be
//! woken at (a soak's end, a wave pause's, a blackout's, a window's opening) or a deploy finishes.
//! So blackouts in force, windows, waves and their pauses and `onNewSnapshot` take exactly the
//! time the controller gives them: the estimate cannot disagree with the controller.
//!
//! A manual gate waits for a person: the simulation notes each gate it reaches and, for the rest
//! of the estimate, assumes the approval comes the moment it is asked. An analysis gate's
//! measurements are taken when due and pass (the estimate is of a rollout that goes well).
//!
//! Pure, like `step`: no I/O, no clock reads.

mod fleet;
mod latency;
mod sveltos;

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use tollgate_model::analysis::MeasurementVerdict;
use tollgate_model::blackout;
use tollgate_model::policy::RolloutPolicy;
use tollgate_model::snapshot::{
    APPROVE_ANNOTATION_PREFIX, ApprovalEvent, ApprovalKind, CommitInfo, Snapshot,
};
use tollgate_render::stage_profile_name;

pub use fleet::ASSUMED_NAMESPACE;
pub use latency::ProvisioningLatency;

use crate::input::{Desired, StepInput};
use crate::measurement::{Measurement, MeasurementDue};
use crate::observed::{Observed, ObservedCluster};
use crate::output::StepOutput;
use crate::run::step::step;
use crate::status::activity::StageActivity;
use crate::status::run_history::{HeldStart, RunRecord};
use crate::status::{Phase, PromotionStatus};
use sveltos::SimulatedSveltos;

/// Steps a simulation takes at most unless told otherwise: a stage takes a handful, a wave two.
pub const DEFAULT_MAX_STEPS: usize = 5_000;

#[derive(Clone, Copy, Debug)]
pub struct SimulationInput<'a> {
    /// The promotion as git shows it now (its newest snapshot).
    pub snapshot: &'a Snapshot,
    /// Every approval event of the promotion in git, in first-parent order.
    pub approvals: &'a [ApprovalEvent],
    /// The promotion's snapshots in git, oldest first: the running run's snapshot must be among
    /// them for `onNewSnapshot` to keep it going (`snapshot` is added when missing).
    pub history: &'a [Snapshot],
    /// The RolloutPolicy governing the promotion.
    pub policy: Option<&'a RolloutPolicy>,
    /// Why the governing policy cannot be resolved (nothing new starts until it is fixed).
    pub policy_problem: Option<&'a str>,
    /// The live status; `None`: nothing ran (the run of `snapshot` starts from scratch).
    pub status: Option<&'a PromotionStatus>,
    /// The management cluster's clusters; `None`: unknown, and the clusters each stage's selector
    /// asks for are assumed (one per stage; a waved stage one per wave, see [`ASSUMED_NAMESPACE`]).
    pub fleet: Option<&'a [ObservedCluster]>,
    pub now: DateTime<Utc>,
    /// How long Sveltos takes to provision a stage's clusters after an apply (also after the
    /// post-delay health checks are appended): a `Duration` `.into()` for every stage alike.
    pub provisioning_latency: ProvisioningLatency<'a>,
    /// The simulation stops after this many steps ([`SimulationEnd::StepLimit`]).
    pub max_steps: usize,
}

/// What the rollout would do from `now`.
#[derive(Clone, Debug, PartialEq)]
pub struct Simulation {
    /// The runs going on at `now` or started since, oldest first, as the run history records
    /// them: per stage its activity spans. A run whose first stage a blackout held carries that
    /// hold in `held_starts`.
    pub runs: Vec<RunRecord>,
    /// The manual gates reached, each approval assumed the moment it was asked.
    pub assumed_approvals: Vec<AssumedApproval>,
    /// The clusters simulated: the fleet given, or the one assumed.
    pub fleet: Vec<ObservedCluster>,
    /// Whether `fleet` was assumed (the management cluster was not read).
    pub fleet_assumed: bool,
    pub end: SimulationEnd,
    pub steps: usize,
}

/// A manual gate the simulation reached: the run of `snapshot` waits at `stage` from `at`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssumedApproval {
    pub snapshot: u64,
    pub stage: String,
    pub at: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimulationEnd {
    /// The run of the newest snapshot completed.
    Completed { at: DateTime<Utc> },
    /// The run of the newest snapshot failed (the stand-in Sveltos never fails: a progress
    /// deadline shorter than the latency does, and a stage that cannot go on without a fix).
    Failed { at: DateTime<Utc>, reason: String },
    /// Nothing would change by itself any more (paused, held by a policy problem): why.
    Stuck { at: DateTime<Utc>, reason: String },
    /// `max_steps` were taken first (`at`: the last one's instant).
    StepLimit { at: DateTime<Utc> },
}

impl SimulationEnd {
    pub fn at(&self) -> DateTime<Utc> {
        match self {
            SimulationEnd::Completed { at }
            | SimulationEnd::Failed { at, .. }
            | SimulationEnd::Stuck { at, .. }
            | SimulationEnd::StepLimit { at } => *at,
        }
    }
}

impl Simulation {
    /// The simulated run of snapshot `index` (the last one, if it ran more than once).
    pub fn run_of(&self, index: u64) -> Option<&RunRecord> {
        self.runs.iter().rev().find(|r| r.snapshot_index == index)
    }
}

pub fn simulate(input: &SimulationInput<'_>) -> Simulation {
    let mut simulator = Simulator::new(input);
    let mut now = input.now;
    simulator.seed(now);
    let mut stepped_at = now;
    for steps in 1..=input.max_steps {
        stepped_at = now;
        let output = simulator.step(now);
        let acted = !output.actions.is_empty();
        let wake_at = output.wake_at;
        let measured = simulator.measure(&output.measurements, now);
        simulator.persist(output, now);
        if let Some(end) = simulator.end(now) {
            return simulator.finish(end, steps);
        }
        if measured || simulator.assume_approval(now) {
            continue;
        }
        if acted {
            simulator.play(now);
            continue;
        }
        match [wake_at, simulator.sveltos.next_due()]
            .into_iter()
            .flatten()
            .min()
        {
            Some(at) => {
                now = now.max(at);
                simulator.play(now);
            }
            None => {
                let reason = simulator.stuck_reason();
                return simulator.finish(SimulationEnd::Stuck { at: now, reason }, steps);
            }
        }
    }
    simulator.finish(SimulationEnd::StepLimit { at: stepped_at }, input.max_steps)
}

/// Per stage profile of the status, the content applied and when its deploy finished: when the
/// stage was provisioned, or a latency after the apply (a later apply appended the post-delay
/// checks, or it is still provisioning).
fn deployed_before(
    status: &PromotionStatus,
    promotion: &str,
    latency: ProvisioningLatency<'_>,
) -> HashMap<String, (String, DateTime<Utc>)> {
    status
        .stages
        .iter()
        .map(|st| {
            let done = match st.provisioned_at {
                Some(at) if at >= st.applied_at => at,
                _ => st.applied_at + latency.of_stage(&st.name),
            };
            let profile = stage_profile_name(promotion, &st.name);
            (profile, (st.applied_spec_hash.clone(), done))
        })
        .collect()
}

/// Per stage profile of the promotion's snapshots, its stage's provisioning latency.
fn stage_latencies(input: &SimulationInput<'_>, history: &[Snapshot]) -> HashMap<String, Duration> {
    let promotion = input.snapshot.promotion.name();
    let stages = std::iter::once(input.snapshot)
        .chain(history)
        .flat_map(|s| s.promotion.spec.stages.iter().map(|st| st.name.as_str()));
    input.provisioning_latency.by_profile(promotion, stages)
}

/// The simulated world: git as the simulation sees it, the management cluster, the persisted
/// status, and the runs seen.
struct Simulator<'i> {
    input: &'i SimulationInput<'i>,
    desired: Snapshot,
    history: Vec<Snapshot>,
    approvals: Vec<ApprovalEvent>,
    /// The analysis runner's part: every measurement asked for, taken when due.
    measurements: Vec<Measurement>,
    observed: Observed,
    sveltos: SimulatedSveltos,
    status: Option<PromotionStatus>,
    runs: Vec<RunRecord>,
    /// Per run (snapshot, start): a blackout hold of its first stage, before the run existed.
    start_holds: HashMap<(u64, DateTime<Utc>), HeldStart>,
    /// A blackout holding the start of a run not recorded yet.
    pending_start_hold: Option<HeldStart>,
    assumed_approvals: Vec<AssumedApproval>,
    fleet_assumed: bool,
    /// The policy the simulation steps under: the input's, without its approval policies, since
    /// every gate is assumed approved at once (one assumed approval could not meet a quorum).
    policy: Option<RolloutPolicy>,
}

impl<'i> Simulator<'i> {
    fn new(input: &'i SimulationInput<'i>) -> Self {
        let promotion = &input.snapshot.promotion;
        let (fleet, fleet_assumed) = match input.fleet {
            Some(fleet) => (fleet.to_vec(), false),
            None => (fleet::assumed(promotion, input.policy), true),
        };
        let observed = Observed {
            clusters: Arc::new(fleet.into()),
            ..Observed::default()
        };
        let mut history = input.history.to_vec();
        if !history.iter().any(|s| s.index == input.snapshot.index) {
            history.push(input.snapshot.clone());
        }
        let latency_by_profile = stage_latencies(input, &history);
        let deployed_before = input
            .status
            .map(|status| deployed_before(status, promotion.name(), input.provisioning_latency))
            .unwrap_or_default();
        Simulator {
            input,
            desired: input.snapshot.clone(),
            history,
            approvals: input.approvals.to_vec(),
            measurements: Vec::new(),
            observed,
            sveltos: SimulatedSveltos::new(
                input.provisioning_latency.default,
                latency_by_profile,
                deployed_before,
            ),
            status: input.status.cloned(),
            runs: Vec::new(),
            start_holds: HashMap::new(),
            pending_start_hold: None,
            assumed_approvals: Vec::new(),
            fleet_assumed,
            policy: input.policy.map(|policy| {
                let mut policy = policy.clone();
                policy.spec_mut().approvals.clear();
                policy
            }),
        }
    }

    /// The management cluster the status describes (the simulation reads no cluster): a step's
    /// applies, executed and deployed, its status discarded.
    fn seed(&mut self, now: DateTime<Utc>) {
        if self.status.is_none() {
            return;
        }
        let output = self.step(now);
        for action in &output.actions {
            self.sveltos.execute(&mut self.observed, action);
        }
        self.play(now);
    }

    fn step(&self, now: DateTime<Utc>) -> StepOutput {
        step(&StepInput {
            desired: Desired::Snapshot {
                current: &self.desired,
                invalid: None,
            },
            approvals: &self.approvals,
            measurements: &self.measurements,
            observed: &self.observed,
            status: self.status.as_ref(),
            now,
            policy: self.policy.as_ref(),
            policy_problem: self.input.policy_problem,
            policy_unapproved: false,
            history: &self.history,
            watch_problem: None,
            unverified: None,
            rewound: None,
            dependencies: &[],
            dependency_problem: None,
        })
    }

    /// The analysis runner's part: each measurement due by `now` and not taken yet is taken,
    /// successful. Whether one was (the next step records it).
    fn measure(&mut self, due: &[MeasurementDue], now: DateTime<Utc>) -> bool {
        let mut measured = false;
        for due in due.iter().filter(|d| d.due_at <= now) {
            let key = due.key();
            if self.measurements.iter().any(|m| m.key == key) {
                continue;
            }
            self.measurements.push(Measurement {
                key,
                taken_at: now,
                value: None,
                verdict: MeasurementVerdict::Successful,
                error: None,
                comparison: None,
            });
            measured = true;
        }
        measured
    }

    /// The controller's part: execute the actions (they all succeed here), persist the status.
    fn persist(&mut self, output: StepOutput, now: DateTime<Utc>) {
        for action in &output.actions {
            self.sveltos.execute(&mut self.observed, action);
        }
        // Runs first: a hold seen in this step belongs to a run that starts in a later one.
        self.note_runs(&output.status);
        self.note_start_hold(&output.status, now);
        self.status = Some(output.status);
    }

    fn play(&mut self, now: DateTime<Utc>) {
        self.sveltos.play(&mut self.observed, now);
    }

    /// A blackout holding the start of a run (before its first stage, so before the run has a
    /// record to hold it): kept until the run starts.
    fn note_start_hold(&mut self, status: &PromotionStatus, now: DateTime<Utc>) {
        let Some(until) = status.blackout_until else {
            return;
        };
        let recorded = status
            .runs
            .last()
            .is_some_and(|run| run.held_starts.iter().any(|h| h.until == until));
        let wave_held = status
            .stages
            .iter()
            .any(|st| matches!(st.activity, StageActivity::Blackout { .. }));
        if recorded || wave_held || self.pending_start_hold.is_some() {
            return;
        }
        let reason = self
            .input
            .policy
            .and_then(|p| blackout::active_at(&p.spec.blackouts, now))
            .and_then(|b| b.reason);
        self.pending_start_hold = Some(HeldStart {
            stage: String::new(),
            since: now,
            until,
            reason,
        });
    }

    /// Keeps the runs going on at the simulation's start or started since (the status keeps only
    /// the last few).
    fn note_runs(&mut self, status: &PromotionStatus) {
        let start = self.input.now;
        for run in status.runs.iter() {
            if run.started_at < start && run.ended_at.is_some_and(|end| end < start) {
                continue;
            }
            let key = (run.snapshot_index, run.started_at);
            let known = self
                .runs
                .iter()
                .position(|r| (r.snapshot_index, r.started_at) == key);
            match known {
                Some(at) => self.runs[at] = run.clone(),
                None => {
                    if let Some(mut hold) = self.pending_start_hold.take() {
                        hold.stage = run
                            .stages
                            .first()
                            .map(|s| s.name.clone())
                            .unwrap_or_default();
                        self.start_holds.insert(key, hold);
                    }
                    self.runs.push(run.clone());
                }
            }
        }
    }

    /// How the simulation ends, if it does now.
    fn end(&self, now: DateTime<Utc>) -> Option<SimulationEnd> {
        let status = self.status.as_ref()?;
        if status.snapshot_index != Some(self.desired.index) || status.queued_snapshot.is_some() {
            return None;
        }
        let ended = status.runs.last().and_then(|r| r.ended_at).unwrap_or(now);
        match status.phase {
            Phase::Completed => Some(SimulationEnd::Completed { at: ended }),
            Phase::Failed | Phase::RolledBack => Some(SimulationEnd::Failed {
                at: ended,
                reason: status.message.clone().unwrap_or_default(),
            }),
            _ => None,
        }
    }

    /// At a manual gate: note it and approve as a person would (an annotation naming the run's
    /// snapshot, in a commit after the run's start). Once per gate and run: a gate that still
    /// waits after it is a gate the simulation cannot open.
    fn assume_approval(&mut self, now: DateTime<Utc>) -> bool {
        let Some(status) = &self.status else {
            return false;
        };
        let waiting = status
            .current_stage_name
            .as_deref()
            .and_then(|name| status.stage(name))
            .filter(|st| st.activity == StageActivity::AwaitingApproval);
        let (Some(st), Some(index)) = (waiting, status.snapshot_index) else {
            return false;
        };
        let stage = st.name.clone();
        let asked = self
            .assumed_approvals
            .iter()
            .any(|a| a.snapshot == index && a.stage == stage);
        let Some(commit) = self
            .history
            .iter()
            .find(|s| s.index == index)
            .map(|s| s.commit.clone())
        else {
            return false;
        };
        if asked {
            return false;
        }
        let key = format!("{APPROVE_ANNOTATION_PREFIX}{stage}");
        for snapshot in std::iter::once(&mut self.desired).chain(self.history.iter_mut()) {
            Arc::make_mut(&mut snapshot.promotion)
                .metadata
                .annotations
                .insert(key.clone(), commit.sha.clone());
        }
        let approving = self.approving_commit(now);
        self.approvals.push(ApprovalEvent {
            stage: stage.clone(),
            kind: ApprovalKind::Annotation {
                value: commit.sha.clone(),
            },
            commit: Arc::new(approving),
        });
        self.assumed_approvals.push(AssumedApproval {
            snapshot: index,
            stage,
            at: now,
        });
        true
    }

    /// A commit after every commit git has, approving on the simulation's behalf.
    fn approving_commit(&self, now: DateTime<Utc>) -> CommitInfo {
        let newest = self
            .history
            .iter()
            .map(|s| s.commit.seq)
            .chain(self.approvals.iter().map(|a| a.commit.seq))
            .max()
            .unwrap_or(0);
        let n = self.assumed_approvals.len() + 1;
        CommitInfo {
            sha: format!("{n:040x}"),
            seq: newest + 1,
            author: "assumed approval".to_string(),
            author_email: String::new(),
            committer: "assumed approval".to_string(),
            committer_email: String::new(),
            time: now,
            committed: now,
            subject: "approval assumed by the simulation".to_string(),
            signature: None,
        }
    }

    fn stuck_reason(&self) -> String {
        self.status
            .as_ref()
            .and_then(|s| s.message.clone())
            .unwrap_or_else(|| "nothing would change by itself".to_string())
    }

    fn finish(self, end: SimulationEnd, steps: usize) -> Simulation {
        let mut runs = self.runs;
        for run in &mut runs {
            if let Some(hold) = self.start_holds.get(&(run.snapshot_index, run.started_at)) {
                run.held_starts.insert(0, hold.clone());
            }
        }
        Simulation {
            runs,
            assumed_approvals: self.assumed_approvals,
            fleet: self.observed.clusters.to_vec(),
            fleet_assumed: self.fleet_assumed,
            end,
            steps,
        }
    }
}

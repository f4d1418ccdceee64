//! `PromotionStatus`: the only state the engine persists, and the status users read.
//!
//! It mirrors upstream's ClusterPromotion status (stages[], hashes, currentStageName,
//! lastPromotionTime) and adds what tollgate knows beyond it. Timestamps change only on
//! transitions, never because time passed, so a step at steady state writes nothing.
//!
//! Its folder holds the data it is made of (activities, phases, the run history, verdicts …)
//! and what is read from it alone (the pipeline every view shows, conditions, notices,
//! delivery figures): nothing there uses the rules above it.

pub mod activity;
pub mod analysis_run;
pub mod comparison_record;
pub mod conditions;
pub(crate) mod counts;
pub mod delivery;
pub(crate) mod notice;
pub mod notices;
pub mod paused_clusters;
pub(crate) mod phase;
pub mod pipeline;
pub mod progress;
pub mod provisioning_history;
pub mod quorum_view;
pub(crate) mod retry_state;
pub(crate) mod rollback_mode;
pub mod run_history;
pub(crate) mod stage_status;
pub(crate) mod status_memory;
pub mod trace_ids;
pub mod trace_spans;
pub mod transitions;
pub(crate) mod verdict;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tollgate_model::hash::HASH_SCHEME;
use tollgate_model::policy::OnFailure;

use crate::status::activity::StageActivity;
use crate::status::analysis_run::AnalysisRun;
pub use crate::status::counts::StageCounts;
use crate::status::notice::Notice;
pub use crate::status::paused_clusters::PausedTime;
pub use crate::status::phase::Phase;
use crate::status::run_history::RunHistory;

/// Newest consumed approvals kept in status; older ones belong to runs long gone.
pub const CONSUMED_APPROVALS_KEPT: usize = 32;

/// Run state and status, owned by the tollgate engine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromotionStatus {
    /// Version of the hash scheme the hashes below were computed with.
    pub hash_scheme: u32,
    pub phase: Phase,
    /// Since when the promotion has been in `phase` (the step that changed the phase; absent
    /// in a status written before this field, until the phase next changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_since: Option<DateTime<Utc>>,
    /// Hashes of the snapshot the current run is rolling out (persisted only once its stage-1
    /// apply succeeded: docs/architecture.md#d1-no-silently-skipped-restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_spec_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_index: Option<u64>,
    /// Full SHA of the commit that introduced the current run's snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
    /// Set when the current run rolls back to the content of an earlier snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_of: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_stage_name: Option<String>,
    /// As upstream: the time the current stage was started (not the completion time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_promotion_time: Option<DateTime<Utc>>,
    /// The stages started in the current run, in the order started.
    #[serde(default)]
    pub stages: Vec<StageStatus>,
    /// What the promotion is doing or waiting for, in plain words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_wake_up: Option<DateTime<Utc>>,
    /// The error at HEAD, while the last good snapshot keeps running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_spec: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_since: Option<DateTime<Utc>>,
    /// Approvals used, newest last; an approval recorded here for one run never serves another.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consumed_approvals: Vec<ConsumedApproval>,
    /// The RolloutPolicy governing the run at the last step (it may change within a run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyRef>,
    /// Set when a stage of the current run failed under its policy: the run is halted or rolled
    /// back, and its snapshot is never applied again (a new commit starts a new run).
    // Boxed, as are a stage's `preverification` and `waves`: rarely set, and inline they made
    // every status a third larger (10,000 promotions keep theirs in memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Box<RunFailure>>,
    /// Conditions the controller reports through the engine (see `conditions`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The newest snapshot, waiting for the running run to finish (`onNewSnapshot:
    /// FinishCurrent` or `Queue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_snapshot: Option<u64>,
    /// With `queuedSnapshot`, under `onNewSnapshot: Queue`: every snapshot after the running one
    /// up to it runs, in commit order. Otherwise only `queuedSnapshot` runs next and the ones in
    /// between are skipped (views say which will run: `lineage::snapshot_run`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub queued_in_order: bool,
    /// Snapshots skipped because a newer one started after the run they waited for
    /// (`onNewSnapshot: FinishCurrent`), most recent last, at most [`SUPERSEDED_KEPT`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub superseded_snapshots: Vec<u64>,
    /// While a blackout holds the next stage start: when it ends (the engine wakes then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blackout_until: Option<DateTime<Utc>>,
    /// While a blackout holds a stage start: the stage and the snapshot it would run.
    // Boxed, as `pending_notices`: rarely set, 8 bytes where it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blackout_holds: Option<Box<HeldStart>>,
    /// The recent runs, newest last, bounded (see `run_history`): what `tollgate timeline` draws.
    #[serde(default, skip_serializing_if = "RunHistory::is_empty")]
    pub runs: RunHistory,
    /// The stages the current run has not reached yet, in spec order, with the snapshot their
    /// profile still carries: a new run leaves later stages on the older snapshot until it
    /// reaches them, and `stages` lists only the stages started in the current run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages_ahead: Vec<StageAhead>,
    /// What each recent content did when it ran here (completed or rejected), newest last,
    /// bounded: only completed content is restored as a rollback (see `lineage`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verdicts: Vec<crate::status::verdict::ContentVerdict>,
    /// Notices owed to the RolloutPolicy's notify endpoints, oldest first: written by the
    /// controller with the transition that produced them, before they are sent, so a restart or a
    /// new leader sends them. A notice stays until every endpoint listening to it has it (or gave
    /// up on it), and goes at a later status write; bounded.
    // Boxed (8 bytes where unset, as for most promotions); never an empty list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_notices: Option<Box<Vec<Notice>>>,
    /// The highest retry counter consumed per stage and snapshot (`retry.tollgate.dev/<stage>:
    /// <snapshot>/<n>`), newest last, bounded: a value is acted on (or refused) once, also after
    /// a restart or by a new leader.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retries: Vec<crate::status::retry_state::ConsumedRetry>,
    /// Set on a run that restores content known good (a rollback) under a RolloutPolicy: `Fast`
    /// (stages where that content completed skip their gates) or `Staged`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<crate::status::rollback_mode::RollbackMode>,
}

/// A stage the current run has not reached yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageAhead {
    pub name: String,
    /// The snapshot its ClusterProfile carries (from an earlier run); `None`: it has none yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_index: Option<u64>,
    /// `Pending`, or `Blackout` when a blackout holds its start.
    #[serde(default)]
    pub activity: StageActivity,
    /// Since when (a blackout's start of the hold); `None` for `Pending`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity_since: Option<DateTime<Utc>>,
}

fn epoch() -> DateTime<Utc> {
    DateTime::<Utc>::UNIX_EPOCH
}

/// How many superseded snapshot numbers the status keeps.
pub const SUPERSEDED_KEPT: usize = 20;

/// A Kubernetes-style condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    pub last_transition_time: DateTime<Utc>,
}

/// Which RolloutPolicy governs a run: its name and version (a hash of its spec).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRef {
    pub name: String,
    pub version: String,
}

/// A stage of the run failed under its policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunFailure {
    pub stage: String,
    /// The rejected snapshot (the run's).
    pub snapshot_index: u64,
    /// Why, in plain words (budget, counts, the first failing clusters).
    pub reason: String,
    pub at: DateTime<Utc>,
    /// What the policy said to do: halt, or roll back.
    #[schemars(with = "OnFailureSchema")]
    pub on_failure: OnFailure,
    /// The stage's clusters that failed or timed out (the first ones, with Sveltos' messages).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<ClusterCondition>,
    /// The stages being restored, in restore order (the failing stage first); empty for a halt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rollback: Vec<RestoredStage>,
}

impl RunFailure {
    /// What the promotion runs once its rollback is done, in words: "running #M" or "its
    /// profiles are withdrawn".
    pub fn running_after(&self) -> String {
        match self.rollback.last().and_then(|r| r.to_snapshot) {
            Some(index) => format!("running #{index}"),
            None => "its profiles are withdrawn".to_string(),
        }
    }

    /// The rollback's last restore is done (the last stage in restore order restored).
    pub fn rollback_done(&self) -> bool {
        self.rollback
            .last()
            .is_some_and(|r| r.restored_at.is_some())
    }

    /// "Snapshot #N rolled back after stage S failed; running #M": the Event and the notice.
    pub fn rolled_back_words(&self) -> String {
        format!(
            "Snapshot #{} rolled back after stage {} failed; {}",
            self.snapshot_index,
            self.stage,
            self.running_after()
        )
    }
}

/// The schema of [`OnFailure`] (the model crate has no schema derive).
#[derive(JsonSchema)]
#[allow(dead_code)]
enum OnFailureSchema {
    Halt,
    Rollback,
}

/// `Feature:hash` of what an apply's fresh features reported just before it (`None`: nothing).
pub type HashesBeforeApply = Option<Box<Vec<String>>>;

/// One stage restored by a rollback.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoredStage {
    pub name: String,
    /// The snapshot it is restored to; `None`: it had no profile before the run, so its
    /// profiles are withdrawn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_snapshot: Option<u64>,
    /// When its restore was applied (`None`: not started yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_at: Option<DateTime<Utc>>,
    /// `tollgate.dev/spec-hash` of the restored profile (empty for a withdrawal).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub spec_hash: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fresh_features: Vec<String>,
    /// As [`StageStatus::hashes_before_apply`], for the restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hashes_before_apply: HashesBeforeApply,
    /// When its clusters were seen provisioned with the restored content (or the profile gone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_at: Option<DateTime<Utc>>,
}

impl PromotionStatus {
    pub(crate) fn empty() -> Self {
        PromotionStatus {
            hash_scheme: HASH_SCHEME,
            phase: Phase::Progressing,
            phase_since: None,
            profile_spec_hash: None,
            stages_hash: None,
            snapshot_index: None,
            snapshot_commit: None,
            snapshot_id: None,
            rollback_of: None,
            current_stage_name: None,
            last_promotion_time: None,
            stages: Vec::new(),
            message: None,
            next_wake_up: None,
            invalid_spec: None,
            paused_since: None,
            consumed_approvals: Vec::new(),
            policy: None,
            failure: None,
            conditions: Vec::new(),
            queued_snapshot: None,
            queued_in_order: false,
            superseded_snapshots: Vec::new(),
            blackout_until: None,
            blackout_holds: None,
            runs: RunHistory::default(),
            stages_ahead: Vec::new(),
            verdicts: Vec::new(),
            pending_notices: None,
            retries: Vec::new(),
            rollback: None,
        }
    }

    pub fn stage(&self, name: &str) -> Option<&StageStatus> {
        self.stages.iter().find(|s| s.name == name)
    }

    /// The notices owed to notify endpoints (see `pending_notices`), oldest first.
    pub fn pending_notices(&self) -> &[Notice] {
        self.pending_notices.as_deref().map_or(&[], Vec::as_slice)
    }

    /// Sets the notices owed; an empty list is no list.
    pub fn set_pending_notices(&mut self, notices: Vec<Notice>) {
        self.pending_notices = (!notices.is_empty()).then(|| Box::new(notices));
    }

    pub(crate) fn stage_mut(&mut self, name: &str) -> Option<&mut StageStatus> {
        self.stages.iter_mut().find(|s| s.name == name)
    }

    pub(crate) fn record_consumed(&mut self, approval: ConsumedApproval) {
        self.consumed_approvals.push(approval);
        let excess = self
            .consumed_approvals
            .len()
            .saturating_sub(CONSUMED_APPROVALS_KEPT);
        self.consumed_approvals.drain(..excess);
    }
}

/// The restart rule (docs/architecture.md#the-restart-rule, #d5-order-is-content): a run goes on while the snapshot's content hashes are
/// the ones it runs; any other content starts a new run at stage 1.
pub fn runs_content_of(
    profile_spec_hash: Option<&str>,
    stages_hash: Option<&str>,
    snapshot: &tollgate_model::Snapshot,
) -> bool {
    profile_spec_hash == Some(snapshot.hashes.profile_spec.as_str())
        && stages_hash == Some(snapshot.hashes.stages.as_str())
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageStatus {
    pub name: String,
    /// What the stage is doing now (named by the engine; every view reads this).
    #[serde(default)]
    pub activity: StageActivity,
    /// Since when it does that.
    #[serde(default = "epoch")]
    pub activity_since: DateTime<Utc>,
    /// When the stage was started in this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_reconciled_time: Option<DateTime<Utc>>,
    /// When the stage was first seen provisioned; overwritten when it succeeds (as upstream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_applied_time: Option<DateTime<Utc>>,
    /// When the outcome of the provisioning check last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status_check_time: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_status_description: Option<String>,

    /// Index of the snapshot this stage's profile carries.
    pub snapshot_index: u64,
    /// The `now` of the step that emitted the latest apply of the stage's main profile.
    pub applied_at: DateTime<Utc>,
    /// `tollgate.dev/spec-hash` of that apply.
    pub applied_spec_hash: String,
    /// Features whose inputs that apply changed: their ClusterSummary status must be newer than
    /// `applied_at` (Sveltos does not redeploy a feature whose inputs did not change).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fresh_features: Vec<String>,
    /// `Feature:hash` of what those features reported just before that apply (Sveltos' feature
    /// `hash` changes with what it deploys): a status still carrying one is from before the
    /// apply, even when stamped in the apply's second (Kubernetes times are whole seconds, and
    /// Sveltos writes a summary's new spec and its new status in separate writes). Boxed: most
    /// applies have none to record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hashes_before_apply: HashesBeforeApply,
    /// When the stage was first seen fully provisioned in this run; delays count from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned_at: Option<DateTime<Utc>>,
    /// When the trigger's delay (the soak after provisioning) ends: `provisioned_at` + delay,
    /// set once the delay is reached; the trigger is not in status, so nobody else can tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ends_at: Option<DateTime<Utc>>,
    /// The completion text at `provisioned_at` (for example "No matching clusters found …"),
    /// kept after later descriptions replace it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned_message: Option<String>,
    /// The post-delay health checks have been appended to the profile's `validateHealths`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub post_delay_checks_applied: bool,
    /// The pre-verification profile apply, once the delay has passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preverification: Option<Box<AppliedProfile>>,
    /// When the stage's trigger held and the pipeline moved on (or, for the last stage, finished).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub counts: StageCounts,
    /// Boxed: set on approved stages only, and inline it would make every stage status 30 %
    /// larger (10,000 promotions keep theirs in memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<Box<Approver>>,
    /// A waved stage whose analyses were inconclusive: the approval that let each wave pass, in
    /// wave order (`approver` keeps the first). Boxed like `approver`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave_approvers: Option<Box<Vec<WaveApprover>>>,
    /// Under an approval policy (`spec.approvals.<stage>`): each approval of this run the gate
    /// looked at, whether it counts, and why not (issue #33). Boxed like `approver`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<Box<Vec<ApprovalReview>>>,
    /// Under an approval policy: the distinct approvers the gate needs (`minApprovals`), so
    /// every view shows the quorum (`1 of 2`) with the reviews (issue #44).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals_needed: Option<u16>,
    /// What the stage waits for, in plain words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_reason: Option<String>,
    /// Since when its manual gate has waited for an approval (cleared once it passes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting_approval_since: Option<DateTime<Utc>>,
    /// Since when its auto gate has waited for the promotion window to open (cleared once it
    /// passes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting_window_since: Option<DateTime<Utc>>,
    /// The snapshot the stage's profile carried when this run entered the stage (what a
    /// rollback restores); `None`: there was no profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced_snapshot: Option<u64>,
    /// The clusters matching when the stage started ("namespace/name", sorted), kept while a
    /// RolloutPolicy governs the run: deadlines and budgets judge these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<String>>,
    /// Failed + timed-out clusters the policy tolerates in this stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_failures: Option<u32>,
    /// When clusters not Provisioned by then are TimedOut (the stage's apply + progressDeadline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DateTime<Utc>>,
    /// Members that were paused during this run of the stage: the time is not charged against
    /// their deadline (docs/rollout-policy.md#paused-clusters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_clusters: Option<Box<Vec<PausedTime>>>,
    /// The clusters that are not Provisioned, first ones by namespace/name, with why and since when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_provisioned: Vec<ClusterCondition>,
    /// How many more are not Provisioned than listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_provisioned_unlisted: u32,
    /// Set when the stage had no matching cluster: it completed as "Skipped: no matching clusters".
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skipped: bool,
    /// A waved stage (RolloutPolicy `stages.<name>.waves`): its waves and how far they got.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waves: Option<Box<WaveProgress>>,
    /// The stage's analysis runs (RolloutPolicy `stages.<name>.analyses`), once its clusters are
    /// provisioned: measurements, values, verdicts.
    // Shared: every step copies the status, and only the stage being analysed changes its runs
    // (copied then, on write).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analyses: Option<std::sync::Arc<Vec<AnalysisRun>>>,
    /// A retry re-drives the stage's failed and timed-out clusters (`tollgate retry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Box<crate::status::retry_state::StageRetry>>,
    /// A fast rollback: the stage restores content that completed here, so it only waits for
    /// its clusters (no soak, checks, window, approval, analyses or waves).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fast_rollback: bool,
}

/// A stage start a blackout holds: which stage, with which snapshot (a new run's, when the hold
/// is at its start).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeldStart {
    pub stage: String,
    pub snapshot_index: u64,
    /// Full SHA of the commit that introduced that snapshot.
    pub snapshot_commit: String,
    /// The hold as the held stage shows it (a `Blackout`): the stage of a new run's start still
    /// runs the older snapshot, and every view says its start is held (`pipeline()`).
    #[serde(default)]
    pub activity: StageActivity,
    /// Since when the hold holds that start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
}

/// The waves of a stage, fixed when it started, and how far they got.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaveProgress {
    /// `namespace/name` of the clusters of each wave, in order (the first is the canary when
    /// `canary` is set).
    pub clusters: Vec<Vec<String>>,
    /// Waves started so far (at least 1).
    pub reached: u32,
    /// The first wave is a canary: it tolerates no failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub canary: bool,
    /// Members that are Cluster API `Cluster`s (the rest are SveltosClusters).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capi_clusters: Vec<String>,
    /// When the latest wave started.
    pub wave_started_at: DateTime<Utc>,
    /// When the latest wave's clusters were all provisioned: the pause runs from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave_done_at: Option<DateTime<Utc>>,
}

impl WaveProgress {
    pub fn total(&self) -> u32 {
        u32::try_from(self.clusters.len()).unwrap_or(u32::MAX)
    }

    /// Waves remain to be started: the profile targets the reached clusters only.
    pub fn in_progress(&self) -> bool {
        self.reached < self.total()
    }

    /// The clusters of the waves reached so far, sorted.
    pub fn reached_clusters(&self) -> Vec<String> {
        let reached = usize::try_from(self.reached).unwrap_or(usize::MAX);
        let mut keys: Vec<String> = self
            .clusters
            .iter()
            .take(reached)
            .flatten()
            .cloned()
            .collect();
        keys.sort();
        keys
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Not-Provisioned clusters listed per stage.
pub const CLUSTERS_LISTED: usize = 50;

/// The state of one cluster in a stage, derived from its ClusterSummary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ClusterState {
    /// Sveltos has no ClusterSummary for it yet.
    Pending,
    Provisioning,
    Provisioned,
    /// A feature failed (Sveltos' message is kept).
    Failed,
    /// Not Provisioned by the stage's deadline.
    TimedOut,
    /// Matches the stage but joined after it started: reported, not judged.
    Joined,
    /// Was a member when the stage started and no longer matches (or is no longer ready).
    Vanished,
    /// A member Sveltos pauses (`spec.paused`, or outside its `activeWindow`): waits for its
    /// maintenance window; never counted failed or timed out while paused.
    Paused,
}

impl ClusterState {
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterState::Pending => "Pending",
            ClusterState::Provisioning => "Provisioning",
            ClusterState::Provisioned => "Provisioned",
            ClusterState::Failed => "Failed",
            ClusterState::TimedOut => "TimedOut",
            ClusterState::Joined => "Joined",
            ClusterState::Vanished => "Vanished",
            ClusterState::Paused => "Paused",
        }
    }
}

/// One cluster that is not Provisioned in a stage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCondition {
    /// `namespace/name`.
    pub cluster: String,
    pub state: ClusterState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When it was first seen in this state.
    pub since: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedProfile {
    pub applied_at: DateTime<Utc>,
    pub spec_hash: String,
}

/// Who approved a manual stage: the author and committer of the approving commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Approver {
    /// How the approval was given.
    pub kind: ApproverKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<DateTime<Utc>>,
}

/// The approval that let one wave of a stage past its inconclusive analyses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaveApprover {
    pub wave: u32,
    #[serde(flatten)]
    pub approver: Approver,
}

/// One approval the gate of a stage with an approval policy looked at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalReview {
    pub kind: ApproverKind,
    /// The approving commit.
    pub sha: String,
    /// Who approved: the verified signer's principal, else the author's e-mail address.
    pub approver: String,
    /// `verified (principal, key)` or why the commit is not verified.
    pub signature: String,
    pub counts: bool,
    /// Why it does not count: unsigned, not an approver, self-approval, for another snapshot,
    /// duplicate approver, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// How a manual stage was approved in git.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ApproverKind {
    /// `spec.stages[i].trigger.manual.approved: true`.
    Field,
    /// The annotation `approve.tollgate.dev/<stage>: <snapshot id>`.
    Annotation,
    /// A commit with the trailer `Tollgate-Approve: <promotion>/<stage>@<snapshot id>`.
    Trailer,
}

impl ApproverKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ApproverKind::Field => "Field",
            ApproverKind::Annotation => "Annotation",
            ApproverKind::Trailer => "Trailer",
        }
    }
}

impl std::fmt::Display for ApproverKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One approval event used by one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConsumedApproval {
    pub stage: String,
    /// SHA of the approving commit.
    pub commit: String,
    /// Index of the snapshot whose run used it.
    pub run: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 10,000 promotions keep their statuses in memory: the rare parts stay boxed.
    #[test]
    fn rare_parts_of_a_status_are_boxed() {
        // 504 since stages carry their activity (+64 bytes: 2.5 MB at 10,000 promotions of 4 stages).
        // 520 with the boxed approval reviews (+8 bytes: 320 KB at 10,000 promotions of 4
        // stages).
        // 528 with the boxed retry and the fast-rollback flag (issue #34); 544 with the paused
        // clusters (a box, and their count: +16 bytes, 640 KB at 10,000 promotions of 4 stages).
        // 552 with the boxed approvers of each wave (issue #45: +8 bytes, 320 KB); 560 with the
        // boxed hashes from before an apply (+8 bytes, 320 KB).
        let stage = std::mem::size_of::<StageStatus>();
        assert!(stage <= 560, "{stage}");
        // 496 with the verdicts (a vector) and the two boxed notify fields.
        // 520 with the consumed retries and the rollback mode (issue #34); 536 with the
        // phase's start (issue #47: every promotion has one, so not boxed; 160 KB at 10,000).
        let promotion = std::mem::size_of::<PromotionStatus>();
        assert!(promotion <= 536, "{promotion}");
    }
}

//! `RolloutPolicy` (`tollgate.dev/v1alpha1`): what a rollout does when clusters fail or stall.
//!
//! Policies live in git beside the promotions, as their own kind, so ClusterPromotion manifests
//! stay exactly upstream's format. A promotion is governed by the policy its annotation
//! `tollgate.dev/policy` names, else by the one policy whose selector matches its labels; none =
//! wait forever (upstream's behaviour). The reader (`tollgate-manifest`) validates a document
//! before it is deserialized into these types.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::analysis::Analysis;
use crate::approval_policy::ApprovalPolicy;
use crate::blackout::Blackout;
use crate::hash::hash_value;
use crate::model::{GoDuration, LabelSelector, Metadata};

pub const POLICY_API_VERSION: &str = "tollgate.dev/v1alpha1";
pub const POLICY_KIND: &str = "RolloutPolicy";
/// Annotation on a ClusterPromotion naming its policy; wins over selectors.
pub const POLICY_ANNOTATION: &str = "tollgate.dev/policy";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPolicy {
    #[schemars(extend("const" = POLICY_API_VERSION))]
    pub api_version: String,
    #[schemars(extend("const" = POLICY_KIND))]
    pub kind: String,
    pub metadata: Metadata,
    /// Change it through [`RolloutPolicy::spec_mut`], which forgets the computed version.
    #[serde(default)]
    pub spec: RolloutPolicySpec,
    /// [`RolloutPolicy::version`], computed once: every step of every promotion the policy
    /// governs records it, and hashing the spec each time was a measurable share of a step.
    #[serde(skip)]
    version: VersionMemo,
}

/// The memo of a policy's version. Invisible to equality: two policies with equal specs have
/// equal versions, whether or not either was computed yet.
#[derive(Clone, Debug, Default)]
struct VersionMemo(std::sync::OnceLock<String>);

impl PartialEq for VersionMemo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct RolloutPolicySpec {
    /// On ClusterPromotion `metadata.labels`; `{}` (or absent) selects every promotion.
    #[serde(default)]
    pub selector: LabelSelector,
    /// A cluster of a stage not Provisioned this long after the stage's apply is TimedOut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline: Option<GoDuration>,
    /// Failed + timed-out clusters tolerated before the stage fails; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failures: Option<FailureBudget>,
    #[serde(default)]
    pub on_failure: OnFailure,
    /// Per-stage overrides, by stage name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stages: BTreeMap<String, StageOverride>,
    /// What a commit that lands mid-rollout does to the running run.
    #[serde(default, skip_serializing_if = "OnNewSnapshot::is_restart")]
    pub on_new_snapshot: OnNewSnapshot,
    /// Intervals in which no stage starts (a running stage keeps going).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blackouts: Vec<Blackout>,
    /// Where to tell people about the rollouts this policy governs (issue #19). Skipped when
    /// empty, so the version (hash) of a policy without it is what it was before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notify: Vec<NotifyEndpoint>,
    /// Named checks stages run over their soak (`stages.<stage>.analyses`); skipped when empty,
    /// so the version of a policy without any is what it was before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub analyses: Vec<Analysis>,
    /// Approval policies of manual gates, by stage name (issue #33); skipped when empty, so the
    /// version of a policy without any is what it was before.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub approvals: BTreeMap<String, ApprovalPolicy>,
    /// Who approves a change of this policy, or of the gated stages of the promotions it governs
    /// (principals from the trusted keys, issue #44): such a change takes effect only once one
    /// of them signs a `Tollgate-Approve-Policy` statement. Empty: changes take effect as
    /// committed. Skipped when empty, so the version of a policy without it is what it was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admins: Vec<String>,
    /// What a branch rewritten so that the running snapshot is no longer in its history does
    /// (issue #44); skipped at its default.
    #[serde(default, skip_serializing_if = "OnRewind::is_follow")]
    pub on_rewind: OnRewind,
    /// How a rollback (content that already completed in a stage) goes through the stages
    /// (issue #34); skipped at its default, so the version of a policy without it is what it was
    /// before.
    #[serde(default, skip_serializing_if = "RollbackSpec::is_default")]
    pub rollback: RollbackSpec,
}

/// `spec.rollback`: how a rollback to content that already completed in a stage goes through it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct RollbackSpec {
    #[serde(default)]
    pub strategy: RollbackStrategy,
}

impl RollbackSpec {
    fn is_default(&self) -> bool {
        *self == RollbackSpec::default()
    }
}

/// `spec.rollback.strategy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RollbackStrategy {
    /// A stage restored to content that completed there skips its soak, post-delay checks,
    /// window, approval, analyses and waves: it only waits for its clusters.
    #[default]
    Fast,
    /// A rollback goes through every stage with its gates, like any other change.
    Staged,
}

impl RollbackStrategy {
    pub const VALUES: [&'static str; 2] = ["Fast", "Staged"];

    pub fn as_str(self) -> &'static str {
        match self {
            RollbackStrategy::Fast => "Fast",
            RollbackStrategy::Staged => "Staged",
        }
    }
}

/// `onRewind`: what a rewritten branch (the running snapshot no longer in its history) does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum OnRewind {
    /// Roll out what the branch now says (a Warning event and a `BranchRewound` notice say so).
    #[default]
    Follow,
    /// Hold: nothing new starts until the branch again has the running snapshot in its history.
    Hold,
}

impl OnRewind {
    pub const VALUES: [&'static str; 2] = ["Follow", "Hold"];

    pub fn as_str(self) -> &'static str {
        match self {
            OnRewind::Follow => "Follow",
            OnRewind::Hold => "Hold",
        }
    }

    fn is_follow(&self) -> bool {
        *self == OnRewind::Follow
    }
}

/// `onNewSnapshot`: what a new snapshot does while a run is in progress. A rollback (content
/// equal to an earlier snapshot) takes effect at once whatever this says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum OnNewSnapshot {
    /// The new snapshot restarts the pipeline at stage 1 (upstream's behaviour).
    #[default]
    Restart,
    /// The running run completes every stage with its snapshot, then the newest starts;
    /// snapshots in between are superseded.
    FinishCurrent,
    /// Every snapshot runs to completion, in commit order.
    Queue,
}

impl OnNewSnapshot {
    pub const VALUES: [&'static str; 3] = ["Restart", "FinishCurrent", "Queue"];

    pub fn as_str(self) -> &'static str {
        match self {
            OnNewSnapshot::Restart => "Restart",
            OnNewSnapshot::FinishCurrent => "FinishCurrent",
            OnNewSnapshot::Queue => "Queue",
        }
    }

    fn is_restart(&self) -> bool {
        *self == OnNewSnapshot::Restart
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct StageOverride {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline: Option<GoDuration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failures: Option<FailureBudget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<OnFailure>,
    /// Order and pace inside the stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waves: Option<Waves>,
    /// Names of `spec.analyses` the stage must pass before it completes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub analyses: Vec<String>,
    /// Whether the stage waits for clusters Sveltos pauses (maintenance windows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_clusters: Option<PausedClusters>,
    /// The stage's analyses judged together, as Kayenta scores a canary (issue #48).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<Score>,
}

/// `stages.<name>.score`: the percentage of the stage's analyses that passed decides. At least
/// `pass` passes the stage; at least `marginal` holds it like an inconclusive analysis (until
/// approved through git); less fails it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Score {
    /// Percent (0–100).
    #[schemars(range(max = 100))]
    pub pass: u32,
    /// Percent (0–100), at most `pass`.
    #[schemars(range(max = 100))]
    pub marginal: u32,
}

/// Where a stage's score puts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScoreBand {
    Pass,
    Marginal,
    Fail,
}

impl Score {
    /// The band of `passed` analyses out of `judged`.
    pub fn band(&self, passed: usize, judged: usize) -> ScoreBand {
        let percent = match judged {
            0 => 100.0,
            n => passed as f64 * 100.0 / n as f64,
        };
        if percent >= f64::from(self.pass) {
            ScoreBand::Pass
        } else if percent >= f64::from(self.marginal) {
            ScoreBand::Marginal
        } else {
            ScoreBand::Fail
        }
    }
}

/// `stages.<name>.pausedClusters`: what a stage does with member clusters Sveltos pauses
/// (`SveltosCluster.spec.paused`, or a closed `spec.activeWindow`). Either way they never count
/// against the deadline or the failure budget while paused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PausedClusters {
    /// The stage completes only once its paused clusters unpaused and got the release.
    #[default]
    Wait,
    /// The stage completes without its paused clusters.
    Skip,
}

impl PausedClusters {
    pub fn as_str(self) -> &'static str {
        match self {
            PausedClusters::Wait => "Wait",
            PausedClusters::Skip => "Skip",
        }
    }
}

/// `stages.<name>.waves`: the stage's clusters go out in ordered waves. Membership and order are
/// fixed when the stage starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Waves {
    /// Clusters are ordered by this label: numerically when every value is an integer, else
    /// lexically; clusters without it last; ties by namespace/name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sorting_label_key: Option<String>,
    /// Clusters per wave: a count or a percentage of the stage's clusters (rounded up, at least 1).
    pub size: FailureBudget,
    /// An optional first wave of this many clusters that tolerates no failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<u32>,
    /// Soak between waves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<GoDuration>,
}

impl Waves {
    /// Clusters per wave (after the canary) in a stage of `members` clusters.
    pub fn wave_size(&self, members: usize) -> usize {
        let size = match self.size {
            FailureBudget::Count(n) => usize::try_from(n).unwrap_or(usize::MAX),
            FailureBudget::Percent(p) => (members * p.min(100) as usize).div_ceil(100),
        };
        size.max(1)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum OnFailure {
    /// The run stops at the failed stage; nothing further is applied.
    #[default]
    Halt,
    /// The stages that got the failed snapshot are restored to what each ran before, backwards.
    Rollback,
}

impl OnFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Halt => "Halt",
            OnFailure::Rollback => "Rollback",
        }
    }
}

impl std::fmt::Display for OnFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `maxFailures`: a count, or a percentage (`"10%"`) of the stage's clusters at stage start,
/// rounded down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureBudget {
    Count(u32),
    Percent(u32),
}

impl FailureBudget {
    /// Failures tolerated in a stage of `members` clusters.
    pub fn allowed(self, members: u32) -> u32 {
        match self {
            FailureBudget::Count(n) => n,
            FailureBudget::Percent(p) => {
                u32::try_from(u64::from(members) * u64::from(p.min(100)) / 100).unwrap_or(u32::MAX)
            }
        }
    }

    /// Parses `3` or `"3"` or `"10%"`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let bad = || {
            format!(
                "invalid maxFailures {text:?}: expected a count such as 2 or a percentage such as \"10%\""
            )
        };
        match text.strip_suffix('%') {
            Some(percent) => {
                let p: u32 = percent.trim().parse().map_err(|_| bad())?;
                if p > 100 {
                    return Err(format!("maxFailures {text:?} is over 100%"));
                }
                Ok(FailureBudget::Percent(p))
            }
            None => text.parse().map(FailureBudget::Count).map_err(|_| bad()),
        }
    }
}

impl std::fmt::Display for FailureBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FailureBudget::Count(n) => write!(f, "{n}"),
            FailureBudget::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl Serialize for FailureBudget {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            FailureBudget::Count(n) => s.serialize_u32(*n),
            FailureBudget::Percent(_) => s.serialize_str(&self.to_string()),
        }
    }
}

/// A count or a percentage: an integer or a string, as Kubernetes' int-or-string (how a string
/// must read is a rule of the reader, which says why it does not).
impl JsonSchema for FailureBudget {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "FailureBudget".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "x-kubernetes-int-or-string": true,
            "anyOf": [
                {"type": "integer", "minimum": 0, "maximum": 4294967295u64},
                {"type": "string", "pattern": "^\\s*\\+?[0-9]+\\s*%\\s*$"}
            ],
            "description": "A count such as 2, or a percentage of the stage's clusters such as \"10%\"."
        })
    }
}

impl<'de> Deserialize<'de> for FailureBudget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(FailureBudget::Count)
                .ok_or_else(|| serde::de::Error::custom(format!("invalid maxFailures {n}"))),
            Value::String(s) => FailureBudget::parse(&s).map_err(serde::de::Error::custom),
            other => Err(serde::de::Error::custom(format!(
                "invalid maxFailures {other}: expected a count or a percentage"
            ))),
        }
    }
}

/// What governs one stage, with the overrides applied.
#[derive(Clone, Debug, PartialEq)]
pub struct StagePolicy {
    pub progress_deadline: Option<std::time::Duration>,
    pub max_failures: FailureBudget,
    pub on_failure: OnFailure,
    pub waves: Option<Waves>,
    /// The analyses the stage runs, in the order it names them (names that resolve).
    pub analyses: Vec<Analysis>,
    /// `spec.approvals.<stage>`: who may open the stage's manual gate (issue #33).
    pub approvals: Option<ApprovalPolicy>,
    /// `stages.<name>.pausedClusters` (default `Wait`).
    pub paused_clusters: PausedClusters,
    /// `stages.<name>.score`: the analyses judged together (issue #48).
    pub score: Option<Score>,
}

impl RolloutPolicy {
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// Whether `identity` (a verified signer's principal) is one of the admins; case-insensitive.
    pub fn lists_admin(&self, identity: &str) -> bool {
        self.spec
            .admins
            .iter()
            .any(|admin| admin.eq_ignore_ascii_case(identity))
    }

    /// The stages this policy gates: named under `approvals`, or with analyses.
    pub fn gated_stages(&self) -> impl Iterator<Item = &str> {
        let approvals = self.spec.approvals.keys().map(String::as_str);
        let analyzed = self
            .spec
            .stages
            .iter()
            .filter(|(_, over)| !over.analyses.is_empty())
            .map(|(name, _)| name.as_str());
        approvals.chain(analyzed)
    }

    /// Whether the policy's selector picks a promotion with these labels (`{}` picks every one).
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        let selector = &self.spec.selector;
        selector.is_empty() || selector.matches(labels)
    }

    /// The policy for `stage`, its override (if any) over the policy-wide values.
    pub fn for_stage(&self, stage: &str) -> StagePolicy {
        let spec = &self.spec;
        let over = spec.stages.get(stage);
        let deadline = over
            .and_then(|o| o.progress_deadline.as_ref())
            .or(spec.progress_deadline.as_ref());
        StagePolicy {
            progress_deadline: deadline.map(|d| d.value),
            max_failures: over
                .and_then(|o| o.max_failures)
                .or(spec.max_failures)
                .unwrap_or(FailureBudget::Count(0)),
            on_failure: over.and_then(|o| o.on_failure).unwrap_or(spec.on_failure),
            waves: over.and_then(|o| o.waves.clone()),
            analyses: over
                .map(|o| {
                    o.analyses
                        .iter()
                        .filter_map(|name| spec.analyses.iter().find(|a| &a.name == name))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default(),
            approvals: spec.approvals.get(stage).cloned(),
            paused_clusters: over.and_then(|o| o.paused_clusters).unwrap_or_default(),
            score: over.and_then(|o| o.score),
        }
    }

    /// The policy's version: a short hash of its spec, recorded in the status of the runs it
    /// governs.
    pub fn version(&self) -> String {
        self.version
            .0
            .get_or_init(|| {
                let spec = serde_json::to_value(&self.spec).unwrap_or(Value::Null);
                hash_value(&spec).chars().take(12).collect()
            })
            .clone()
    }

    /// The spec, to change: the version is computed again from the changed spec.
    pub fn spec_mut(&mut self) -> &mut RolloutPolicySpec {
        self.version = VersionMemo::default();
        &mut self.spec
    }
}

/// One `spec.notify` entry: an endpoint that hears about the rollout's events.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct NotifyEndpoint {
    /// Unique in the policy; the `endpoint` label of the notification metrics.
    pub name: String,
    #[serde(rename = "type")]
    pub kind: NotifyType,
    /// A file holding the URL and credentials (docs/notifications.md#secret-file: first line the URL, then the
    /// token or HMAC secret). Read at delivery time, never stored in git.
    pub address_secret_file: String,
    #[schemars(length(min = 1))]
    pub events: Vec<NotifyEvent>,
    /// Link for commit statuses and messages (e.g. a dashboard).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "targetURL")]
    pub target_url: Option<String>,
    /// Per-request timeout (Go duration); default 10s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<GoDuration>,
    /// How long a notice is retried (with backoff) after the transition it tells, before it is
    /// given up as `NotificationFailed` (Go duration); default [`DEFAULT_RETRY_FOR`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_for: Option<GoDuration>,
}

/// `retryFor` when the endpoint sets none.
pub const DEFAULT_RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(3600);

impl NotifyEndpoint {
    /// How long a notice is retried after its transition.
    pub fn retry_for(&self) -> std::time::Duration {
        self.retry_for
            .as_ref()
            .map_or(DEFAULT_RETRY_FOR, |d| d.value)
    }
}

/// How a notification is delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NotifyType {
    /// Slack incoming webhook (`{"text": …}`).
    Slack,
    /// Generic JSON (`deploy/notification.schema.json`), signed with `X-Tollgate-Signature`.
    Webhook,
    /// GitHub commit status API.
    Github,
    /// GitLab commit status API.
    Gitlab,
    /// Gitea (and Forgejo) commit status API.
    Gitea,
}

impl NotifyType {
    pub const ALL: [NotifyType; 5] = [
        NotifyType::Slack,
        NotifyType::Webhook,
        NotifyType::Github,
        NotifyType::Gitlab,
        NotifyType::Gitea,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NotifyType::Slack => "slack",
            NotifyType::Webhook => "webhook",
            NotifyType::Github => "github",
            NotifyType::Gitlab => "gitlab",
            NotifyType::Gitea => "gitea",
        }
    }

    /// Posts commit statuses (one context per stage) rather than messages.
    pub fn is_commit_status(self) -> bool {
        matches!(
            self,
            NotifyType::Github | NotifyType::Gitlab | NotifyType::Gitea
        )
    }
}

/// What a rollout tells: the names users list in `events`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum NotifyEvent {
    StageStarted,
    StageCompleted,
    StageFailed,
    RolledBack,
    ApprovalNeeded,
    Completed,
    /// A wave of a waved stage started (the first wave starts with its stage).
    WaveStarted,
    /// Every cluster of a wave is provisioned (the last wave: with its stage).
    WaveCompleted,
    /// A blackout holds a stage start or a stage's next wave.
    BlackoutHeld,
    /// An analysis of a stage failed (over its failureLimit or consecutiveErrorLimit).
    AnalysisFailed,
    /// An analysis of a stage is inconclusive: the stage is held until approved.
    AnalysisInconclusive,
    /// The branch was rewritten: the promotion's newest snapshot is no longer in its history.
    BranchRewound,
}

impl NotifyEvent {
    pub const ALL: [NotifyEvent; 12] = [
        NotifyEvent::StageStarted,
        NotifyEvent::StageCompleted,
        NotifyEvent::StageFailed,
        NotifyEvent::RolledBack,
        NotifyEvent::ApprovalNeeded,
        NotifyEvent::Completed,
        NotifyEvent::WaveStarted,
        NotifyEvent::WaveCompleted,
        NotifyEvent::BlackoutHeld,
        NotifyEvent::AnalysisFailed,
        NotifyEvent::AnalysisInconclusive,
        NotifyEvent::BranchRewound,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::StageStarted => "StageStarted",
            NotifyEvent::StageCompleted => "StageCompleted",
            NotifyEvent::StageFailed => "StageFailed",
            NotifyEvent::RolledBack => "RolledBack",
            NotifyEvent::ApprovalNeeded => "ApprovalNeeded",
            NotifyEvent::Completed => "Completed",
            NotifyEvent::WaveStarted => "WaveStarted",
            NotifyEvent::WaveCompleted => "WaveCompleted",
            NotifyEvent::BlackoutHeld => "BlackoutHeld",
            NotifyEvent::AnalysisFailed => "AnalysisFailed",
            NotifyEvent::AnalysisInconclusive => "AnalysisInconclusive",
            NotifyEvent::BranchRewound => "BranchRewound",
        }
    }
}

/// Why no policy could be chosen for a promotion.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyChoiceError {
    #[error("annotation {POLICY_ANNOTATION} names RolloutPolicy {0:?}, which does not exist")]
    Missing(String),
    #[error(
        "RolloutPolicies {first:?} and {second:?} both select this promotion: name one with the annotation {POLICY_ANNOTATION}, or narrow a selector"
    )]
    Conflict { first: String, second: String },
}

/// The one rule choosing a promotion's policy: its annotation, else the only selecting policy.
pub fn choose_policy<'p>(
    promotion: &Metadata,
    policies: impl IntoIterator<Item = &'p RolloutPolicy>,
) -> Result<Option<&'p RolloutPolicy>, PolicyChoiceError> {
    let mut policies = policies.into_iter();
    if let Some(wanted) = promotion.annotations.get(POLICY_ANNOTATION) {
        return policies
            .find(|p| p.name() == wanted)
            .map(Some)
            .ok_or_else(|| PolicyChoiceError::Missing(wanted.clone()));
    }
    let mut selecting = policies.filter(|p| p.selects(&promotion.labels));
    let first = selecting.next();
    match (first, selecting.next()) {
        (Some(first), Some(second)) => Err(PolicyChoiceError::Conflict {
            first: first.name().to_string(),
            second: second.name().to_string(),
        }),
        (first, None) => Ok(first),
        (None, Some(_)) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(spec: Value) -> RolloutPolicy {
        serde_json::from_value(serde_json::json!({
            "apiVersion": POLICY_API_VERSION, "kind": POLICY_KIND,
            "metadata": {"name": "p"}, "spec": spec,
        }))
        .expect("valid policy")
    }

    #[test]
    fn a_percentage_budget_rounds_down_on_the_stage_size() {
        assert_eq!(FailureBudget::parse("10%").map(|b| b.allowed(25)), Ok(2));
        assert_eq!(FailureBudget::parse("3").map(|b| b.allowed(1)), Ok(3));
        assert!(FailureBudget::parse("101%").is_err());
        assert!(FailureBudget::parse("-1").is_err());
        assert!(FailureBudget::parse("ten").is_err());
    }

    #[test]
    fn a_stage_override_wins_over_the_policy_wide_values() {
        let p = policy(serde_json::json!({
            "progressDeadline": "10m", "maxFailures": "10%", "onFailure": "Rollback",
            "stages": {"production": {"maxFailures": 0, "progressDeadline": "30m"}},
        }));
        let prod = p.for_stage("production");
        assert_eq!(prod.max_failures, FailureBudget::Count(0));
        assert_eq!(
            prod.progress_deadline,
            Some(std::time::Duration::from_secs(1800))
        );
        assert_eq!(prod.on_failure, OnFailure::Rollback);
        let staging = p.for_stage("staging");
        assert_eq!(staging.max_failures, FailureBudget::Percent(10));
        assert_eq!(
            staging.progress_deadline,
            Some(std::time::Duration::from_secs(600))
        );
    }

    #[test]
    fn an_empty_selector_selects_every_promotion() {
        let p = policy(serde_json::json!({}));
        assert!(p.selects(&BTreeMap::new()));
        assert_eq!(p.for_stage("x").on_failure, OnFailure::Halt);
        let q = policy(serde_json::json!({"selector": {"matchLabels": {"tier": "critical"}}}));
        assert!(!q.selects(&BTreeMap::new()));
        assert_ne!(p.version(), q.version());
    }

    #[test]
    fn the_annotation_wins_and_two_selecting_policies_conflict() {
        let mut all = policy(serde_json::json!({}));
        all.metadata.name = "all".into();
        let mut critical =
            policy(serde_json::json!({"selector": {"matchLabels": {"tier": "critical"}}}));
        critical.metadata.name = "critical".into();
        let mut promotion = Metadata::default();
        let policies = [all.clone(), critical.clone()];
        assert_eq!(choose_policy(&promotion, &policies), Ok(Some(&policies[0])));
        promotion.labels.insert("tier".into(), "critical".into());
        assert!(matches!(
            choose_policy(&promotion, &policies),
            Err(PolicyChoiceError::Conflict { .. })
        ));
        promotion
            .annotations
            .insert(POLICY_ANNOTATION.into(), "critical".into());
        assert_eq!(choose_policy(&promotion, &policies), Ok(Some(&policies[1])));
        promotion
            .annotations
            .insert(POLICY_ANNOTATION.into(), "nope".into());
        assert_eq!(
            choose_policy(&promotion, &policies),
            Err(PolicyChoiceError::Missing("nope".into()))
        );
    }

    #[test]
    fn the_version_is_computed_once_and_again_after_the_spec_is_changed() {
        let mut p = policy(serde_json::json!({"onFailure": "Halt"}));
        let fresh = policy(serde_json::json!({"onFailure": "Halt"}));
        let version = p.version();
        assert_eq!(p, fresh, "a computed version does not change equality");
        assert_eq!(p.clone().version(), version);
        p.spec_mut().on_failure = OnFailure::Rollback;
        let changed = policy(serde_json::json!({"onFailure": "Rollback"}));
        assert_ne!(p.version(), version, "a changed spec has another version");
        assert_eq!(p.version(), changed.version());
    }
}

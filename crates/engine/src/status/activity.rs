//! What a stage is doing, named by the engine: one value per stage, with since when and, where
//! it has one, until when. The step sets it where it decides (entering a stage, each hold of the
//! stage pipeline, passing the gate, failing, rolling back); every view (`status`, the live view,
//! `timeline`, metrics, notifications, the web view) reads it and none derives it from the other
//! status fields.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::status::phase::Phase;

/// A wave of a waved stage: the wave reached (1-based) of how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaveOf {
    pub wave: u32,
    pub of: u32,
}

/// What a stage is doing. On the wire a flat object: `kind` and the fields its kind has (the
/// schema is written by hand: the API server's structural schemas cannot express a tagged enum).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum StageActivity {
    /// The current run has not reached the stage: it runs an older snapshot, or nothing.
    #[default]
    Pending,
    /// Its clusters (of the waves reached, for a waved stage) are being provisioned.
    Provisioning {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wave: Option<WaveOf>,
    },
    /// A wave is provisioned; the next one starts at `until`.
    WavePause { wave: WaveOf, until: DateTime<Utc> },
    /// Provisioned; the trigger's delay (the soak) ends at `until`.
    Soaking { until: DateTime<Utc> },
    /// Provisioned; waiting for health checks (post-delay checks, pre-verification, re-check).
    HealthChecks,
    /// The promotion window is closed; it opens at `until`.
    AwaitingWindow { until: DateTime<Utc> },
    /// The manual gate waits for an approval.
    AwaitingApproval,
    /// Provisioned and soaked; analyses still measure (the next measurement at `until`, when it
    /// is not already being taken).
    Analyzing {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<DateTime<Utc>>,
    },
    /// An analysis was inconclusive: held like a manual gate until approved through git (or
    /// replaced by a new commit).
    AnalysisInconclusive { reason: String },
    /// A blackout holds the stage's start (or its next wave's) until `until`.
    Blackout {
        until: DateTime<Utc>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The wave held, for a waved stage.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wave: Option<WaveOf>,
    },
    /// Its start waits for the same stage of the promotions it depends on
    /// (`tollgate.dev/depends-on`): `dependency` names them, `cert-manager/staging`.
    AwaitingDependency { dependency: String },
    /// The promotion is paused (`tollgate.dev/paused`).
    Paused,
    /// The trigger held: the stage is done for this run (tolerated failures show in its counts).
    Completed,
    /// No cluster matched: done at once.
    Skipped,
    /// The stage failed under the run's policy, or cannot go on without a fix.
    Failed { reason: String },
    /// A failure rollback is restoring the stage (its restore applied, its clusters not yet
    /// provisioned with it) to `snapshot` (`None`: its profiles are being withdrawn).
    RollingBack {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        snapshot: Option<u64>,
    },
    /// A failure rollback restored the stage to `snapshot` (`None`: its profiles were withdrawn).
    Restored {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        snapshot: Option<u64>,
    },
}

/// Every `kind`, in declaration order.
const KINDS: [&str; 17] = [
    "Pending",
    "Provisioning",
    "WavePause",
    "Soaking",
    "HealthChecks",
    "AwaitingWindow",
    "AwaitingApproval",
    "Analyzing",
    "AnalysisInconclusive",
    "Blackout",
    "AwaitingDependency",
    "Paused",
    "Completed",
    "Skipped",
    "Failed",
    "RollingBack",
    "Restored",
];

impl JsonSchema for StageActivity {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "StageActivity".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let wave = generator.subschema_for::<WaveOf>();
        schemars::json_schema!({
            "description": "What the stage is doing: `kind`, and the fields that kind has.",
            "type": "object",
            "required": ["kind"],
            "properties": {
                "kind": {"type": "string", "enum": KINDS},
                "until": {
                    "description": "When it ends by itself (WavePause, Soaking, AwaitingWindow, Blackout) or the next measurement is due (Analyzing).",
                    "type": "string", "format": "date-time"
                },
                "wave": wave,
                "reason": {
                    "description": "Why (Failed, AnalysisInconclusive; Blackout, the blackout's reason).",
                    "type": "string"
                },
                "dependency": {
                    "description": "What the start waits for, `promotion/stage` (AwaitingDependency).",
                    "type": "string"
                },
                "snapshot": {
                    "description": "The snapshot a rollback restores (RollingBack) or restored (Restored).",
                    "type": "integer", "format": "uint64", "minimum": 0
                }
            }
        })
    }
}

impl StageActivity {
    /// The activity's name, as the status spells it (`kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            StageActivity::Pending => "Pending",
            StageActivity::Provisioning { .. } => "Provisioning",
            StageActivity::WavePause { .. } => "WavePause",
            StageActivity::Soaking { .. } => "Soaking",
            StageActivity::HealthChecks => "HealthChecks",
            StageActivity::AwaitingWindow { .. } => "AwaitingWindow",
            StageActivity::AwaitingApproval => "AwaitingApproval",
            StageActivity::Analyzing { .. } => "Analyzing",
            StageActivity::AnalysisInconclusive { .. } => "AnalysisInconclusive",
            StageActivity::Blackout { .. } => "Blackout",
            StageActivity::AwaitingDependency { .. } => "AwaitingDependency",
            StageActivity::Paused => "Paused",
            StageActivity::Completed => "Completed",
            StageActivity::Skipped => "Skipped",
            StageActivity::Failed { .. } => "Failed",
            StageActivity::RollingBack { .. } => "RollingBack",
            StageActivity::Restored { .. } => "Restored",
        }
    }

    /// When the activity ends by itself, if it has a known end.
    pub fn until(&self) -> Option<DateTime<Utc>> {
        match self {
            StageActivity::WavePause { until, .. }
            | StageActivity::Soaking { until }
            | StageActivity::AwaitingWindow { until }
            | StageActivity::Blackout { until, .. } => Some(*until),
            StageActivity::Analyzing { until } => *until,
            _ => None,
        }
    }

    /// The wave the activity is about, for a waved stage.
    pub fn wave(&self) -> Option<WaveOf> {
        match self {
            StageActivity::Provisioning { wave } | StageActivity::Blackout { wave, .. } => *wave,
            StageActivity::WavePause { wave, .. } => Some(*wave),
            _ => None,
        }
    }

    /// The promotion's phase while its current stage does this.
    pub fn phase(&self) -> Phase {
        match self {
            StageActivity::Pending
            | StageActivity::Provisioning { .. }
            | StageActivity::HealthChecks => Phase::Progressing,
            StageActivity::WavePause { .. }
            | StageActivity::Soaking { .. }
            | StageActivity::AwaitingWindow { .. }
            | StageActivity::AwaitingApproval
            | StageActivity::Analyzing { .. }
            | StageActivity::Blackout { .. }
            | StageActivity::AwaitingDependency { .. } => Phase::Waiting,
            StageActivity::Paused | StageActivity::AnalysisInconclusive { .. } => Phase::Paused,
            StageActivity::Completed | StageActivity::Skipped => Phase::Completed,
            StageActivity::Failed { .. } => Phase::Failed,
            StageActivity::RollingBack { .. } => Phase::RollingBack,
            StageActivity::Restored { .. } => Phase::RolledBack,
        }
    }

    /// The stage is done with this run (completed, skipped, failed or restored).
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            StageActivity::Completed
                | StageActivity::Skipped
                | StageActivity::Failed { .. }
                | StageActivity::Restored { .. }
        )
    }

    /// The same activity, ignoring when it ends: a soak whose end moved is still the soak.
    pub fn same_kind(&self, other: &StageActivity) -> bool {
        self.kind() == other.kind() && self.wave() == other.wave()
    }
}

/// Sets `activity` on a stage, keeping `since` when it only continues what was going on.
pub(crate) fn set(
    slot: &mut StageActivity,
    since: &mut DateTime<Utc>,
    activity: StageActivity,
    now: DateTime<Utc>,
) {
    if !slot.same_kind(&activity) {
        *since = now;
    }
    *slot = activity;
}

//! The typed `ClusterPromotion` model (Sveltos `config.projectsveltos.io/v1beta1`).
//!
//! Only what tollgate interprets is typed. The `profileSpec` is kept as the JSON object it was
//! written as (with CRD defaults applied by the manifest reader, `tollgate_manifest::parse`), so that nothing tollgate does not
//! interpret is lost between parse and render. Typed values are built from documents that already
//! passed schema validation, so their own deserialization never sees a wrong type.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::label_map::LabelMap;
pub use crate::profile_spec::ProfileSpec;

pub const API_GROUP: &str = "config.projectsveltos.io";
pub const API_VERSION: &str = "config.projectsveltos.io/v1beta1";
pub const KIND: &str = "ClusterPromotion";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPromotion {
    pub api_version: String,
    pub kind: String,
    pub metadata: Metadata,
    pub spec: ClusterPromotionSpec,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPromotionSpec {
    #[serde(default)]
    pub profile_spec: ProfileSpec,
    pub stages: Vec<Stage>,
    #[serde(default)]
    pub preserve_cluster_profiles_on_delete: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    pub name: String,
    #[serde(default)]
    pub cluster_selector: LabelSelector,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
}

/// A Kubernetes label selector. An empty selector matches no cluster (Sveltos semantics).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct LabelSelector {
    /// A sorted slice rather than a `BTreeMap`: one label would otherwise cost a whole B-tree
    /// leaf in every stage of every promotion.
    #[serde(default, skip_serializing_if = "LabelMap::is_empty")]
    pub match_labels: LabelMap,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

impl LabelSelector {
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// Whether a cluster with these labels is selected. An empty selector selects nothing.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        if self.is_empty() {
            return false;
        }
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k).map(String::as_str) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct LabelSelectorRequirement {
    pub key: String,
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl LabelSelectorRequirement {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator.as_str() {
            "In" => value.is_some_and(|v| self.values.contains(v)),
            "NotIn" => value.is_none_or(|v| !self.values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            // Validation rejects other operators before a selector is ever evaluated.
            _ => false,
        }
    }
}

/// `trigger` is `{auto: …}` or `{manual: …}`; the CRD's CEL rule forbids both and neither.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Trigger {
    Auto(AutoTrigger),
    Manual(ManualTrigger),
}

impl Trigger {
    pub fn delay(&self) -> Option<&GoDuration> {
        match self {
            Trigger::Auto(a) => a.delay.as_ref(),
            Trigger::Manual(m) => m.delay.as_ref(),
        }
    }
    pub fn pre_health_check_deployment(&self) -> &[Value] {
        match self {
            Trigger::Auto(a) => &a.pre_health_check_deployment,
            Trigger::Manual(m) => &m.pre_health_check_deployment,
        }
    }
    pub fn post_delay_health_checks(&self) -> &[Value] {
        match self {
            Trigger::Auto(a) => &a.post_delay_health_checks,
            Trigger::Manual(m) => &m.post_delay_health_checks,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoTrigger {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<GoDuration>,
    /// PolicyRefs deployed by the `preverification-<p>-<s>` profile once the delay has passed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pre_health_check_deployment: Vec<Value>,
    /// ValidateHealth checks appended to the stage profile's `validateHealths` after the delay.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub post_delay_health_checks: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion_window: Option<TimeWindow>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManualTrigger {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<GoDuration>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pre_health_check_deployment: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub post_delay_health_checks: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
    /// CRD default `true`. In tollgate it means "an approval is consumed by one run" (docs/architecture.md#d2-approvals-are-consumed-never-lost).
    #[serde(default = "default_true")]
    pub automatic_reset: bool,
}

fn default_true() -> bool {
    true
}

impl Default for ManualTrigger {
    fn default() -> Self {
        ManualTrigger {
            delay: None,
            pre_health_check_deployment: Vec::new(),
            post_delay_health_checks: Vec::new(),
            approved: None,
            automatic_reset: true,
        }
    }
}

/// `promotionWindow`: two cron expressions; the window is open strictly between a firing of
/// `from` and the next firing of `to` (see [`crate::window`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeWindow {
    pub from: String,
    pub to: String,
}

/// A Go `time.Duration` string (`5m`, `1h30m`, `300ms`), kept as written for round-trips.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoDuration {
    pub text: String,
    pub value: Duration,
}

impl GoDuration {
    pub fn parse(text: &str) -> Result<Self, crate::duration::DurationError> {
        Ok(GoDuration {
            text: text.to_string(),
            value: crate::duration::parse_go_duration(text)?,
        })
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

/// A string: whether it is a Go duration is a rule of the reader, which says why it is not.
impl JsonSchema for GoDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "GoDuration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A Go duration such as \"30s\", \"10m\" or \"1h30m\"."
        })
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        GoDuration::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl ClusterPromotion {
    pub fn name(&self) -> &str {
        &self.metadata.name
    }
    pub fn stage(&self, name: &str) -> Option<&Stage> {
        self.spec.stages.iter().find(|s| s.name == name)
    }
}

//! A ClusterSummary as the summary watch decodes it: only the fields the controller reads.
//!
//! A `DynamicObject` decodes every field of every watch event (managed fields, deployed
//! resources, status details) into `serde_json::Value` trees only for most of it to be dropped
//! again; at fleet scale summary events are the bulk of the controller's decoding work and of
//! its short-lived allocations. Here the decoder skips what is not read.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;

#[derive(Clone, Debug, Default, Deserialize)]
pub struct SummaryObject {
    #[serde(deserialize_with = "crate::cluster::lean::lean_metadata")]
    pub metadata: ObjectMeta,
    pub spec: Option<SummarySpec>,
    pub status: Option<SummaryStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SummarySpec {
    pub cluster_name: Option<String>,
    pub cluster_profile_spec: Option<Value>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SummaryStatus {
    pub feature_summaries: Option<Vec<FeatureEntry>>,
    pub failure_message: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeatureEntry {
    #[serde(rename = "featureID")]
    pub feature_id: Option<String>,
    pub status: Option<String>,
    pub last_applied_time: Option<String>,
    pub failure_message: Option<String>,
    pub hash: Option<String>,
}

crate::cluster::lean::runtime_typed_resource!(SummaryObject);

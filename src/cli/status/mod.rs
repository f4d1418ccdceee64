//! `tollgate status [NAME]`: what the controller is doing, read from the GitPromotion objects in the
//! management cluster: stage, phase, snapshot, per-stage progress, waiting reason, next wake-up,
//! approver. `--watch` follows the changes: a live view on a terminal, plain frames otherwise.
//!
//! Everything shown is read from the engine's typed status; this module only lays it out.

mod bar;
mod follow;
pub mod live;
mod relative;
mod screen;
mod table;

use std::process::ExitCode;

use anyhow::Context as _;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde::Deserialize;
use serde_json::Value;
use tollgate_engine::PromotionStatus;

use super::connect::{self, ClusterArgs};
use crate::cluster::errors::{ClusterError, classify};
use crate::cluster::resources;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// One promotion (default: all of them).
    pub name: Option<String>,
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    pub output: Output,
    /// Keep watching. On a terminal (table output): a live view redrawn in place every second,
    /// one block per promotion with a progress bar, the snapshot and the state of each stage
    /// ("soak ends in 1m12s", "waiting for approval 3m"). Piped, or with `-o json|yaml`: the
    /// output again on every change (piped: plain text, frames separated by `---`).
    #[arg(long, short = 'w')]
    pub watch: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Table,
    Yaml,
    Json,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::block_on(run_async(args))
}

async fn run_async(args: Args) -> anyhow::Result<ExitCode> {
    let connection = connect::connect(&args.cluster).await?;
    let target = connection.target;
    let api: Api<DynamicObject> = Api::all_with(connection.client, &resources::git_promotion());
    if !args.watch {
        let objects = fetch(&api, args.name.as_deref())
            .await
            .with_context(|| format!("reading GitPromotions from {target}"))?;
        if let Some(name) = &args.name
            && objects.is_empty()
        {
            eprintln!(
                "no promotion named {name:?} (is the controller running against this cluster?)"
            );
            return Ok(ExitCode::from(1));
        }
        super::write_stdout(&render(&objects, args.name.is_some(), args.output)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut config = watcher::Config::default();
    if let Some(name) = &args.name {
        config = config.fields(&format!("metadata.name={name}"));
    }
    // Backoff: a cluster that is down is retried calmly, not in a tight loop.
    let events = watcher::watcher(api.clone(), config)
        .default_backoff()
        .boxed();
    let watched = follow::Watched {
        api: &api,
        name: args.name.as_deref(),
        target: &target,
    };
    follow::watch(&watched, args.output, events).await
}

/// The GitPromotions to show. Errors are classified as `run`'s start-up check does, so a missing CRD
/// or a forbidden verb reads as a plain hint, not as a raw API error.
pub(super) async fn fetch(
    api: &Api<DynamicObject>,
    name: Option<&str>,
) -> Result<Vec<DynamicObject>, ClusterError> {
    match name {
        Some(name) => match api.get(name).await {
            Ok(object) => Ok(vec![object]),
            // A 404 naming the object: the type is served, this promotion is not there.
            Err(kube::Error::Api(status))
                if status.code == 404
                    && status.details.as_ref().is_some_and(|d| !d.name.is_empty()) =>
            {
                Ok(Vec::new())
            }
            Err(error) => Err(classify(error, "get", "gitpromotions", name)),
        },
        None => {
            let mut items = api
                .list(&ListParams::default())
                .await
                .map_err(|error| classify(error, "list", "gitpromotions", ""))?
                .items;
            items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            Ok(items)
        }
    }
}

pub fn render(objects: &[DynamicObject], detail: bool, output: Output) -> anyhow::Result<String> {
    let documents: Vec<Value> = objects
        .iter()
        .map(|o| {
            serde_json::json!({
                "name": o.metadata.name,
                "status": o.data.get("status").cloned().unwrap_or(Value::Null),
            })
        })
        .collect();
    match output {
        // The whole status as stored, whatever version of tollgate wrote it.
        Output::Json => Ok(serde_json::to_string_pretty(&documents)? + "\n"),
        Output::Yaml => Ok(serde_saphyr::to_string(&documents)?),
        Output::Table => {
            let shown: Vec<Shown> = objects.iter().map(Shown::of).collect();
            Ok(if detail {
                shown.iter().map(table::render_detail).collect()
            } else {
                table::render_overview(&shown)
            })
        }
    }
}

/// A GitPromotion as the views show it: its name and the engine's typed status.
#[derive(Debug, PartialEq)]
pub struct Shown {
    pub name: String,
    pub status: Result<Option<PromotionStatus>, String>,
}

impl Shown {
    pub fn of(object: &DynamicObject) -> Self {
        let status = match object.data.get("status") {
            None | Some(Value::Null) => Ok(None),
            Some(value) => PromotionStatus::deserialize(value)
                .map(Some)
                .map_err(|error| format!("unreadable status: {error}")),
        };
        Shown {
            name: object.metadata.name.clone().unwrap_or_default(),
            status,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(name: &str, status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "tollgate.dev/v1alpha1", "kind": "GitPromotion",
            "metadata": {"name": name}, "status": status
        }))
        .expect("object")
    }

    fn sample() -> DynamicObject {
        object(
            "kyverno",
            json!({
                "hashScheme": 1, "phase": "Waiting", "currentStageName": "staging", "snapshotIndex": 3,
                "snapshotCommit": "0123456789abcdef", "rollbackOf": 1,
                "message": "stage staging: Paused: Awaiting Manual Approval",
                "stages": [
                    {"name": "dev", "snapshotIndex": 3, "appliedAt": "2026-11-20T10:00:00Z", "appliedSpecHash": "a", "counts": {"matchingClusters": 2, "summaries": 2, "provisioned": 2, "failed": 0},
                     "currentStatusDescription": "Successfully provisioned"},
                    {"name": "staging", "snapshotIndex": 3, "appliedAt": "2026-11-20T10:00:00Z", "appliedSpecHash": "b", "counts": {"matchingClusters": 1, "summaries": 1, "provisioned": 1, "failed": 0},
                     "currentStatusDescription": "Paused: Awaiting Manual Approval", "waitingReason": "an approval",
                     "approver": {"kind": "Field", "sha": "fedcba9876543210", "author": "Ada"}}
                ]
            }),
        )
    }

    #[test]
    fn overview_shows_phase_stage_snapshot_and_rollback() {
        let text = render(&[sample()], false, Output::Table).expect("render");
        for expected in [
            "kyverno",
            "Waiting",
            "staging",
            "#3 0123456 (rollback to #1)",
        ] {
            assert!(text.contains(expected), "{expected:?} missing in\n{text}");
        }
    }

    #[test]
    fn detail_shows_per_stage_progress_and_approver() {
        let text = render(&[sample()], true, Output::Table).expect("render");
        for expected in [
            "2/2 provisioned",
            "1/1 provisioned",
            "Ada (Field, fedcba9)",
            "an approval",
        ] {
            assert!(text.contains(expected), "{expected:?} missing in\n{text}");
        }
    }

    #[test]
    fn detail_shows_the_failure_the_failing_clusters_and_the_next_step() {
        let object = object(
            "web",
            json!({
                "hashScheme": 1, "phase": "RolledBack", "snapshotIndex": 4,
                "snapshotCommit": "0123456789abcdef0123456789abcdef01234567",
                "currentStageName": "prod",
                "policy": {"name": "fleet-defaults", "version": "abc"},
                "stages": [{"name": "prod", "snapshotIndex": 4, "appliedAt": "2026-11-20T10:00:00Z",
                    "appliedSpecHash": "a", "allowedFailures": 0,
                    "counts": {"matchingClusters": 2, "summaries": 2, "provisioned": 1, "failed": 1},
                    "notProvisioned": [{"cluster": "fleet/prod-1", "state": "Failed",
                        "message": "values: replicas must be an integer", "since": "2026-11-20T10:01:00Z"}]}],
                "failure": {"stage": "prod", "snapshotIndex": 4, "reason": "1 of 2 clusters failed",
                    "at": "2026-11-20T10:01:00Z", "onFailure": "Rollback",
                    "rollback": [{"name": "prod", "toSnapshot": 3, "restoredAt": "2026-11-20T10:02:00Z"}]}
            }),
        );
        let text = render(&[object], true, Output::Table).expect("renders");
        for expected in [
            "FAILED: stage prod with snapshot #4",
            "1 of 2 clusters failed",
            "rollback: stage prod → snapshot #3: restored",
            "git revert 0123456",
            "fleet/prod-1",
            "values: replicas must be an integer",
            "fleet-defaults",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
    }

    #[test]
    fn a_status_this_version_cannot_read_is_said_not_hidden() {
        let text =
            render(&[object("odd", json!({"phase": 7}))], false, Output::Table).expect("render");
        assert!(text.contains("unreadable status"), "{text}");
        let text =
            render(&[object("odd", json!({"phase": 7}))], true, Output::Table).expect("render");
        assert!(text.contains("unreadable status"), "{text}");
    }

    #[test]
    fn timestamps_read_as_rfc3339_seconds_never_nanoseconds() {
        let mut object = sample();
        object.data["status"]["nextWakeUp"] = json!("2026-11-20T10:05:00.123456789Z");
        for detail in [false, true] {
            let text =
                render(std::slice::from_ref(&object), detail, Output::Table).expect("render");
            assert!(text.contains("2026-11-20T10:05:00Z"), "{text}");
            assert!(!text.contains("123456789"), "{text}");
        }
    }

    #[test]
    fn json_and_yaml_carry_the_whole_status() {
        let json_text = render(&[sample()], false, Output::Json).expect("json");
        let parsed: Value = serde_json::from_str(&json_text).expect("valid json");
        assert_eq!(parsed[0]["status"]["rollbackOf"], 1);
        let yaml = render(&[sample()], false, Output::Yaml).expect("yaml");
        assert!(yaml.contains("rollbackOf: 1"), "{yaml}");
    }
}

//! `tollgate status [NAME]`: what the controller is doing, read from the GitPromotion objects in the
//! management cluster: stage, phase, snapshot, per-stage progress, waiting reason, next wake-up,
//! approver. `--watch` redraws whenever a status changes.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context as _;
use chrono::{DateTime, SecondsFormat, Utc};
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};
use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::watcher;
use serde::Deserialize;
use serde_json::Value;
use tollgate_engine::{Phase, PromotionStatus, RunFailure, StageStatus};

use super::connect::{self, ClusterArgs};
use crate::cluster::errors::{ClusterError, classify};
use crate::cluster::resources;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// One promotion (default: all of them).
    pub name: Option<String>,
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    pub output: Output,
    /// Keep watching and redraw on every change.
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(run_async(args))
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
    let mut stream = watcher::watcher(api.clone(), config).boxed();
    let tty = std::io::stdout().is_terminal();
    let mut last = String::new();
    while let Some(event) = stream.next().await {
        if let Err(error) = event {
            eprintln!("watch error (retrying): {error} [{target}]");
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            continue;
        }
        let objects = fetch(&api, args.name.as_deref())
            .await
            .with_context(|| format!("reading GitPromotions from {target}"))?;
        let text = render(&objects, args.name.is_some(), args.output)?;
        if text == last {
            continue;
        }
        let mut out = std::io::stdout().lock();
        if tty {
            // Clear the screen and home the cursor: a live view rather than a scrolling log.
            write!(out, "\x1b[2J\x1b[H")?;
        }
        write!(out, "{text}")?;
        if !tty {
            writeln!(out, "---")?;
        }
        out.flush()?;
        last = text;
    }
    Ok(ExitCode::SUCCESS)
}

/// The GitPromotions to show. Errors are classified as `run`'s preflight does, so a missing CRD
/// or a forbidden verb reads as a plain hint, not as a raw API error.
async fn fetch(
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
                shown.iter().map(render_detail).collect()
            } else {
                render_overview(&shown)
            })
        }
    }
}

/// A GitPromotion as the table shows it: its name and the engine's typed status.
struct Shown {
    name: String,
    status: Result<Option<PromotionStatus>, String>,
}

impl Shown {
    fn of(object: &DynamicObject) -> Self {
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

use tollgate_manifest::snapshot::short_sha as short;

fn time(at: Option<DateTime<Utc>>) -> String {
    at.map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
        .unwrap_or_default()
}

fn snapshot_label(status: &PromotionStatus) -> String {
    let Some(index) = status.snapshot_index else {
        return String::new();
    };
    let commit = status.snapshot_commit.as_deref().unwrap_or_default();
    let mut label = format!("#{index} {}", short(commit));
    if let Some(rollback) = status.rollback_of {
        label.push_str(&format!(" (rollback to #{rollback})"));
    }
    label
}

fn table() -> Table {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic);
    table
}

fn render_overview(shown: &[Shown]) -> String {
    if shown.is_empty() {
        return "no promotions\n".into();
    }
    let mut table = table();
    table.set_header([
        "PROMOTION",
        "PHASE",
        "STAGE",
        "SNAPSHOT",
        "MESSAGE",
        "NEXT WAKE-UP",
    ]);
    for promotion in shown {
        let row = match &promotion.status {
            Ok(Some(status)) => [
                promotion.name.clone(),
                status.phase.as_str().to_string(),
                status.current_stage_name.clone().unwrap_or_default(),
                snapshot_label(status),
                status.message.clone().unwrap_or_default(),
                time(status.next_wake_up),
            ],
            Ok(None) => [
                promotion.name.clone(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ],
            Err(error) => [
                promotion.name.clone(),
                String::new(),
                String::new(),
                String::new(),
                error.clone(),
                String::new(),
            ],
        };
        table.add_row(row);
    }
    format!("{table}\n")
}

fn render_detail(promotion: &Shown) -> String {
    let status = match &promotion.status {
        Ok(Some(status)) => status,
        Ok(None) => return format!("Promotion:    {}\n(no status yet)\n\n", promotion.name),
        Err(error) => return format!("Promotion:    {}\n{error}\n\n", promotion.name),
    };
    let mut out = format!(
        "Promotion:    {}\nPhase:        {}\nStage:        {}\nSnapshot:     {}\n",
        promotion.name,
        status.phase.as_str(),
        status.current_stage_name.as_deref().unwrap_or_default(),
        snapshot_label(status),
    );
    for (label, value) in [
        ("Message", status.message.clone()),
        ("Next wake-up", status.next_wake_up.map(|t| time(Some(t)))),
        ("Paused since", status.paused_since.map(|t| time(Some(t)))),
        ("Invalid spec", status.invalid_spec.clone()),
        (
            "Policy",
            status
                .policy
                .as_ref()
                .map(|p| format!("{} (version {})", p.name, p.version)),
        ),
    ] {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            out.push_str(&format!("{:<14}{value}\n", format!("{label}:")));
        }
    }
    let mut table = table();
    table.set_header([
        "STAGE",
        "SNAPSHOT",
        "CLUSTERS",
        "FAILED",
        "STATUS",
        "WAITING FOR",
        "APPROVER",
    ]);
    for stage in &status.stages {
        let approver = match stage.approver.as_deref() {
            Some(approver) if approver.sha.is_some() => format!(
                "{} ({}, {})",
                approver.author.as_deref().unwrap_or_default(),
                approver.kind,
                short(approver.sha.as_deref().unwrap_or_default())
            ),
            _ => String::new(),
        };
        table.add_row([
            stage.name.clone(),
            format!("#{}", stage.snapshot_index),
            format!(
                "{}/{} provisioned",
                stage.counts.provisioned, stage.counts.matching_clusters
            ),
            stage.counts.failed.to_string(),
            stage.current_status_description.clone().unwrap_or_default(),
            stage.waiting_reason.clone().unwrap_or_default(),
            approver,
        ]);
    }
    out.push_str(&format!("{table}\n"));
    if let Some(failure) = &status.failure {
        out.push_str(&render_failure(status, failure));
    }
    for stage in &status.stages {
        out.push_str(&render_clusters(stage));
    }
    out.push('\n');
    out
}

/// The failed stage, why, what the rollback did, and what the user does next.
fn render_failure(status: &PromotionStatus, failure: &RunFailure) -> String {
    let commit = status
        .snapshot_commit
        .as_deref()
        .map(short)
        .unwrap_or_default();
    let mut out = format!(
        "\nFAILED: stage {} with snapshot #{} at {} (onFailure: {})\n  {}\n",
        failure.stage,
        failure.snapshot_index,
        time(Some(failure.at)),
        failure.on_failure,
        failure.reason
    );
    for restored in &failure.rollback {
        let to = restored
            .to_snapshot
            .map_or("withdrawn".to_string(), |i| format!("snapshot #{i}"));
        let state = if restored.restored_at.is_some() {
            "restored"
        } else if restored.applied_at.is_some() {
            "restoring"
        } else {
            "to restore"
        };
        out.push_str(&format!(
            "  rollback: stage {} → {to}: {state}\n",
            restored.name
        ));
    }
    let next = match status.phase {
        Phase::RollingBack => {
            "wait for the rollback to finish; then commit a fix, or revert to acknowledge"
                .to_string()
        }
        Phase::RolledBack => format!(
            "commit a fix (a new snapshot starts a new run), or `git revert {commit}` to acknowledge the rollback"
        ),
        _ => format!(
            "fix the cause and commit (a new snapshot starts a new run), or `git revert {commit}`"
        ),
    };
    out.push_str(&format!("  next: {next}\n"));
    out
}

/// A stage's clusters that are not Provisioned, with why and since when.
fn render_clusters(stage: &StageStatus) -> String {
    if stage.not_provisioned.is_empty() && !stage.skipped {
        return String::new();
    }
    let mut out = format!("\nStage {}:", stage.name);
    if stage.skipped {
        out.push_str(" Skipped: no matching clusters");
    }
    let counts = &stage.counts;
    if !stage.not_provisioned.is_empty() {
        out.push_str(&format!(
            " {} pending, {} provisioning, {} failed, {} timed out",
            counts.pending, counts.provisioning, counts.failed, counts.timed_out
        ));
    }
    if let Some(allowed) = stage.allowed_failures {
        out.push_str(&format!(" (tolerated: {allowed})"));
    }
    if let Some(deadline) = stage.deadline {
        out.push_str(&format!("; deadline {}", time(Some(deadline))));
    }
    out.push('\n');
    if stage.not_provisioned.is_empty() {
        return out;
    }
    let mut table = table();
    table.set_header(["CLUSTER", "STATE", "SINCE", "MESSAGE"]);
    for cluster in &stage.not_provisioned {
        table.add_row([
            cluster.cluster.clone(),
            cluster.state.as_str().to_string(),
            time(Some(cluster.since)),
            cluster.message.clone().unwrap_or_default(),
        ]);
    }
    out.push_str(&format!("{table}\n"));
    if stage.not_provisioned_unlisted > 0 {
        out.push_str(&format!(
            "… and {} more not Provisioned\n",
            stage.not_provisioned_unlisted
        ));
    }
    out
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
    fn json_and_yaml_carry_the_whole_status() {
        let json_text = render(&[sample()], false, Output::Json).expect("json");
        let parsed: Value = serde_json::from_str(&json_text).expect("valid json");
        assert_eq!(parsed[0]["status"]["rollbackOf"], 1);
        let yaml = render(&[sample()], false, Output::Yaml).expect("yaml");
        assert!(yaml.contains("rollbackOf: 1"), "{yaml}");
    }
}

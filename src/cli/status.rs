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
    let client = connect::client(&args.cluster).await?;
    let api: Api<DynamicObject> = Api::all_with(client, &resources::git_promotion());
    if !args.watch {
        let objects = fetch(&api, args.name.as_deref()).await?;
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
            eprintln!("watch error (retrying): {error}");
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            continue;
        }
        let objects = fetch(&api, args.name.as_deref()).await?;
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
    format!("{out}{table}\n\n")
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

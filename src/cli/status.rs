//! `tollgate status [NAME]`: what the controller is doing, read from the GitPromotion objects in the
//! management cluster: stage, phase, snapshot, per-stage progress, waiting reason, next wake-up,
//! approver. `--watch` redraws whenever a status changes.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context as _;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};
use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::watcher;
use serde_json::Value;

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
        Output::Json => Ok(serde_json::to_string_pretty(&documents)? + "\n"),
        Output::Yaml => Ok(serde_saphyr::to_string(&documents)?),
        Output::Table if detail => Ok(documents.iter().map(render_detail).collect()),
        Output::Table => Ok(render_overview(&documents)),
    }
}

fn text(value: &Value, pointer: &str) -> String {
    match value.pointer(pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => String::new(),
    }
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(8)]
}

fn snapshot_label(status: &Value) -> String {
    let index = text(status, "/snapshotIndex");
    if index.is_empty() {
        return String::new();
    }
    let mut label = format!("#{index} {}", short(&text(status, "/snapshotCommit")));
    let rollback = text(status, "/rollbackOf");
    if !rollback.is_empty() {
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

fn render_overview(documents: &[Value]) -> String {
    if documents.is_empty() {
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
    for doc in documents {
        let status = &doc["status"];
        table.add_row([
            text(doc, "/name"),
            text(status, "/phase"),
            text(status, "/currentStageName"),
            snapshot_label(status),
            text(status, "/message"),
            text(status, "/nextWakeUp"),
        ]);
    }
    format!("{table}\n")
}

fn render_detail(doc: &Value) -> String {
    let status = &doc["status"];
    let mut out = format!(
        "Promotion:    {}\nPhase:        {}\nStage:        {}\nSnapshot:     {}\n",
        text(doc, "/name"),
        text(status, "/phase"),
        text(status, "/currentStageName"),
        snapshot_label(status),
    );
    for (label, pointer) in [
        ("Message", "/message"),
        ("Next wake-up", "/nextWakeUp"),
        ("Paused since", "/pausedSince"),
        ("Invalid spec", "/invalidSpec"),
    ] {
        let value = text(status, pointer);
        if !value.is_empty() {
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
    for stage in status["stages"].as_array().into_iter().flatten() {
        let approver = match text(stage, "/approver/sha") {
            sha if sha.is_empty() => String::new(),
            sha => format!(
                "{} ({}, {})",
                text(stage, "/approver/author"),
                text(stage, "/approver/kind"),
                short(&sha)
            ),
        };
        table.add_row([
            text(stage, "/name"),
            format!("#{}", text(stage, "/snapshotIndex")),
            format!(
                "{}/{} provisioned",
                text(stage, "/counts/provisioned"),
                text(stage, "/counts/matchingClusters")
            ),
            text(stage, "/counts/failed"),
            text(stage, "/currentStatusDescription"),
            text(stage, "/waitingReason"),
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
                "phase": "Waiting", "currentStageName": "staging", "snapshotIndex": 3,
                "snapshotCommit": "0123456789abcdef", "rollbackOf": 1,
                "message": "stage staging: Paused: Awaiting Manual Approval",
                "stages": [
                    {"name": "dev", "snapshotIndex": 3, "counts": {"matchingClusters": 2, "provisioned": 2, "failed": 0},
                     "currentStatusDescription": "Successfully provisioned"},
                    {"name": "staging", "snapshotIndex": 3, "counts": {"matchingClusters": 1, "provisioned": 1, "failed": 0},
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
            "#3 01234567 (rollback to #1)",
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
            "Ada (Field, fedcba98)",
            "an approval",
        ] {
            assert!(text.contains(expected), "{expected:?} missing in\n{text}");
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

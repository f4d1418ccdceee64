//! `tollgate status [NAME]`: what the controller is doing, read from the GitPromotion objects in the
//! management cluster: phase, snapshot, and per stage of the pipeline what it does (the engine's
//! activity), its counts and the snapshot it runs; next wake-up, approvers, failures. `--watch`
//! follows the changes: a live view on a terminal, plain frames otherwise.
//!
//! Everything shown is read from the engine's typed status (`pipeline()`); this module only lays
//! it out, and `stage_words` is the one place that words a stage's activity.

mod analyses;
mod follow;
pub mod live;
mod quoted_errors;
mod screen;
mod table;

pub use crate::views::shown::Shown;

use std::process::ExitCode;

use anyhow::Context as _;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
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
    /// Keep watching. On a terminal (table output): a live view redrawn in place every second,
    /// one block per promotion with a progress bar, the snapshot and what each stage is doing
    /// ("soaking, ends in 1m12s", "awaiting approval for 3m"). Piped, or with `-o json|yaml`:
    /// the output again on every change (piped: plain text, frames separated by `---`).
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
        let text = render(
            &objects,
            args.name.is_some(),
            args.output,
            screen::plain_width(),
        )?;
        super::write_stdout(&text)?;
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

/// The output for `objects`: one promotion in detail (`detail`: `status NAME`), or all of them;
/// a table at most `width` columns wide.
pub fn render(
    objects: &[DynamicObject],
    detail: bool,
    output: Output,
    width: usize,
) -> anyhow::Result<String> {
    let mut documents: Vec<Value> = objects.iter().map(document_of).collect();
    // `status NAME` asks for one promotion: one object, not a list of one.
    let document = match (detail, documents.len()) {
        (true, 1) => documents.remove(0),
        _ => Value::Array(documents),
    };
    match output {
        Output::Json => Ok(serde_json::to_string_pretty(&document)? + "\n"),
        Output::Yaml => Ok(serde_saphyr::to_string(&document)?),
        Output::Table => {
            let shown: Vec<Shown> = objects.iter().map(Shown::of).collect();
            Ok(if detail {
                shown
                    .iter()
                    .map(|promotion| table::render_detail(promotion, width))
                    .collect()
            } else {
                table::render_overview(&shown, width)
            })
        }
    }
}

/// One promotion as `-o json|yaml` prints it: its name, the whole status as stored (whatever
/// version of tollgate wrote it) and the engine's projection of it, per stage (`pipeline`: what
/// every other view shows; a restored stage's snapshot is the one it runs again, not the
/// rejected one `status.stages[].snapshotIndex` keeps).
fn document_of(object: &DynamicObject) -> Value {
    let status = object.data.get("status").cloned().unwrap_or(Value::Null);
    let mut document = serde_json::json!({"name": object.metadata.name, "status": status});
    if let Ok(Some(typed)) = crate::views::shown::status_of(object.data.get("status")) {
        let pipeline: Vec<_> = typed.pipeline().iter().map(|v| v.projected()).collect();
        document["pipeline"] = serde_json::to_value(pipeline).unwrap_or(Value::Null);
    }
    document
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;

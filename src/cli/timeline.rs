//! `tollgate timeline NAME`: a picture of the promotion's recent runs, one lane per stage, from the
//! run history the controller keeps in the GitPromotion's status (`status.runs`). SVG, or PNG
//! rendered from the same SVG.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use chrono::Utc;
use kube::api::{Api, DynamicObject};
use tollgate_engine::PromotionStatus;
use tollgate_model::duration::parse_go_duration;

use super::connect::{self, ClusterArgs};
use super::status::Shown;
use crate::cluster::resources;
use crate::views::timeline::{Period, png, svg_of};

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  tollgate timeline podinfo > podinfo.svg
  tollgate timeline podinfo --since 2h -o png --output-file podinfo.png

Bars: what the controller says each stage did:
  provisioning (each wave of a waved stage: \"wave 2/4\"), pause between waves,
  soak (the trigger's delay), health checks, analysis (measuring),
  waiting for a promotion window, waiting for approval (or after an inconclusive analysis),
  held by a blackout (a stage's start, or a wave's), paused, failed, rolling back.
A run replaced before it finished is faded, hatched and labelled \"superseded by #N\".
Labels never overlap: one without room is left out (a bar's tooltip says it all).
The controller keeps the last 10 runs (fewer for pipelines of many stages).")]
pub struct Args {
    /// The promotion (its GitPromotion's name).
    pub name: String,
    /// Show the runs of this recent period (a Go duration: 90m, 24h, 168h).
    #[arg(long, default_value = "24h", value_parser = parse_period)]
    pub since: Period,
    /// Picture format.
    #[arg(long, short = 'o', value_enum, default_value = "svg")]
    pub output: Format,
    /// Write the picture to this file instead of stdout.
    #[arg(long)]
    pub output_file: Option<PathBuf>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

fn parse_period(text: &str) -> Result<Period, String> {
    let length = parse_go_duration(text).map_err(|error| error.to_string())?;
    if length.is_zero() {
        return Err("the period must be longer than 0s".to_string());
    }
    Ok(Period {
        text: text.to_string(),
        length,
    })
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.output == Format::Png && args.output_file.is_none() && std::io::stdout().is_terminal() {
        anyhow::bail!(
            "refusing to write a PNG to a terminal: give --output-file FILE or redirect stdout"
        );
    }
    let Some(status) = super::block_on(fetch(&args))? else {
        eprintln!(
            "no promotion named {:?} (is the controller running against this cluster?)",
            args.name
        );
        return Ok(ExitCode::from(1));
    };
    let picture = picture(&args, status.as_ref())?;
    match &args.output_file {
        Some(path) => {
            std::fs::write(path, &picture).with_context(|| format!("writing {}", path.display()))?
        }
        None => {
            use std::io::Write as _;
            let mut out = std::io::stdout().lock();
            out.write_all(&picture)?;
            out.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The promotion's status: `None` when there is no such GitPromotion, `Some(None)` when it has no
/// status yet.
async fn fetch(args: &Args) -> anyhow::Result<Option<Option<PromotionStatus>>> {
    let connection = connect::connect(&args.cluster).await?;
    let api: Api<DynamicObject> = Api::all_with(connection.client, &resources::git_promotion());
    let objects = super::status::fetch(&api, Some(&args.name))
        .await
        .with_context(|| format!("reading GitPromotions from {}", connection.target))?;
    let Some(object) = objects.first() else {
        return Ok(None);
    };
    let status = Shown::of(object).status.map_err(|error| {
        anyhow::anyhow!(
            "the status of GitPromotion {} is unreadable by this version of tollgate: {error}",
            args.name
        )
    })?;
    Ok(Some(status))
}

/// The picture's bytes in the chosen format.
fn picture(args: &Args, status: Option<&PromotionStatus>) -> anyhow::Result<Vec<u8>> {
    let svg = svg_of(&args.name, status, &args.since, Utc::now());
    match args.output {
        Format::Svg => Ok(svg.into_bytes()),
        Format::Png => {
            let rendered = png::render(&svg)?;
            if let Some(warning) = rendered.warning {
                eprintln!("warning: {warning}");
            }
            Ok(rendered.png)
        }
    }
}

//! `tollgate validate [PATH…]`: parse and validate ClusterPromotion files without a cluster.
//! Exit 0 valid (warnings allowed unless `--strict`), 1 invalid, 2 usage or I/O error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tollgate_spec::report::{Summary, render_github, render_human, render_json};
use tollgate_spec::{Diagnostic, Limits, parse_file};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Human,
    Json,
    Github,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Files or directories (searched recursively for *.yaml / *.yml, hidden directories skipped).
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "human")]
    pub output: OutputFormat,
    /// Treat warnings as failures.
    #[arg(long)]
    pub strict: bool,
}

const EXIT_INVALID: u8 = 1;
const EXIT_USAGE: u8 = 2;

fn is_yaml(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e == "yaml" || e == "yml")
}

fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.') && n != "." && n != "..")
}

/// Collects YAML files under `path`, in a stable (sorted) order.
fn collect(path: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let metadata = std::fs::metadata(path)?;
    if metadata.is_file() {
        files.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for entry in entries {
        if is_hidden(&entry) {
            continue;
        }
        if entry.is_dir() {
            collect(&entry, files)?;
        } else if is_yaml(&entry) {
            files.push(entry);
        }
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut files = Vec::new();
    for path in &args.paths {
        if let Err(e) = collect(path, &mut files) {
            eprintln!("error: cannot read {}: {e}", path.display());
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    }
    if files.is_empty() {
        eprintln!("error: no *.yaml or *.yml files found");
        return Ok(ExitCode::from(EXIT_USAGE));
    }
    let limits = Limits::default();
    let mut sources: BTreeMap<String, String> = BTreeMap::new();
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    let mut promotions = 0;
    for file in &files {
        let name = file.display().to_string();
        let bytes = match std::fs::read(file) {
            Ok(bytes) => bytes,
            Err(e) => {
                eprintln!("error: cannot read {name}: {e}");
                return Ok(ExitCode::from(EXIT_USAGE));
            }
        };
        let parsed = parse_file(&name, &bytes, &limits);
        promotions += parsed.promotions.len();
        diagnostics.extend(parsed.all_diagnostics());
        if let Ok(text) = String::from_utf8(bytes) {
            sources.insert(name, text);
        }
    }
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let warnings = diagnostics.len() - errors;
    let valid = errors == 0 && (!args.strict || warnings == 0);
    let output = match args.output {
        OutputFormat::Human => {
            let mut text = render_human(&diagnostics, |f| sources.get(f).map(String::as_str));
            text.push_str(&format!(
                "{} file(s), {promotions} promotion(s): {errors} error(s), {warnings} warning(s){}\n",
                files.len(),
                if valid { "" } else { " — invalid" }
            ));
            text
        }
        OutputFormat::Json => {
            let mut text = render_json(
                &diagnostics,
                Summary {
                    files: files.len(),
                    promotions,
                    valid,
                },
            );
            text.push('\n');
            text
        }
        OutputFormat::Github => render_github(&diagnostics),
    };
    super::write_stdout(&output)?;
    Ok(if valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_INVALID)
    })
}

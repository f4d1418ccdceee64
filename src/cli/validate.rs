//! `tollgate validate [PATH…]`: parse and validate ClusterPromotion files without a cluster.
//! Exit 0 valid (warnings allowed unless `--strict`), 1 invalid, 2 usage or I/O error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tollgate_manifest::documents::{duplicate_names, near_miss_kinds};
use tollgate_manifest::parse::ParsedFile;
use tollgate_manifest::report::{Summary, render_github, render_human, render_json};
use tollgate_manifest::rules::annotations::APPROVE_NAMES_NO_SNAPSHOT;
use tollgate_manifest::{Diagnostic, Limits, parse_file};

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

/// Every file's own diagnostics, then what only the set of files shows: the same promotion name
/// defined twice (as the controller rejects it), and documents that look like mistyped
/// ClusterPromotions. Approval values that are commits on HEAD's first-parent history are not
/// warned about (see [`known_commit_approvals`]).
fn diagnostics_of(
    files: &[PathBuf],
    parsed_files: &[ParsedFile],
    sources: &BTreeMap<String, String>,
) -> Vec<Diagnostic> {
    let mut commits = FirstParentCommits::default();
    let mut diagnostics = Vec::new();
    for (path, parsed) in files.iter().zip(parsed_files) {
        let mut file_diagnostics = parsed.all_diagnostics();
        let known = known_commit_approvals(path, parsed, &mut commits);
        file_diagnostics.retain(|d| {
            d.code != APPROVE_NAMES_NO_SNAPSHOT || !known.contains(&(d.line, d.column))
        });
        if !commits.of(path).is_empty() {
            for diagnostic in &mut file_diagnostics {
                if diagnostic.code == APPROVE_NAMES_NO_SNAPSHOT {
                    diagnostic
                        .message
                        .push_str(" (nor is it a commit on HEAD's first-parent history)");
                }
            }
        }
        if let Some(text) = sources.get(&parsed.file) {
            file_diagnostics.extend(near_miss_kinds(parsed, text));
        }
        file_diagnostics.sort_by_key(|d| (d.line, d.column));
        diagnostics.extend(file_diagnostics);
    }
    diagnostics.extend(duplicate_names(parsed_files, |file| {
        sources.get(file).map(String::as_str)
    }));
    diagnostics
}

/// The first-parent commit SHAs of HEAD of each git repository seen, by repository directory.
#[derive(Default)]
struct FirstParentCommits(BTreeMap<PathBuf, Vec<String>>);

impl FirstParentCommits {
    /// The SHAs for the repository holding `file`; empty outside a repository.
    fn of(&mut self, file: &Path) -> &[String] {
        let directory = file.parent().unwrap_or(Path::new("."));
        let Ok(repo) = git2::Repository::discover(directory) else {
            return &[];
        };
        let key = repo.path().to_path_buf();
        self.0
            .entry(key)
            .or_insert_with(|| first_parent_shas(&repo).unwrap_or_default())
    }
}

fn first_parent_shas(repo: &git2::Repository) -> Result<Vec<String>, git2::Error> {
    let mut walk = repo.revwalk()?;
    walk.push_head()?;
    walk.simplify_first_parent()?;
    walk.map(|oid| oid.map(|oid| oid.to_string())).collect()
}

/// Positions of the `approve-names-no-snapshot` warnings of `parsed` whose value is a prefix of
/// a commit on HEAD's first-parent history: such a value names the snapshot that commit
/// introduced, which only git knows.
fn known_commit_approvals(
    path: &Path,
    parsed: &ParsedFile,
    commits: &mut FirstParentCommits,
) -> Vec<(u32, u32)> {
    let mut known = Vec::new();
    for document in &parsed.promotions {
        let Some(promotion) = &document.promotion else {
            continue;
        };
        for diagnostic in &document.diagnostics {
            if diagnostic.code != APPROVE_NAMES_NO_SNAPSHOT {
                continue;
            }
            let value = diagnostic
                .path
                .strip_prefix("metadata.annotations[")
                .and_then(|rest| rest.strip_suffix(']'))
                .and_then(|key| promotion.metadata.annotations.get(key))
                .map(|value| value.to_ascii_lowercase());
            if let Some(value) = value
                && commits.of(path).iter().any(|sha| sha.starts_with(&value))
            {
                known.push((diagnostic.line, diagnostic.column));
            }
        }
    }
    known
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
    let mut parsed_files = Vec::new();
    for file in &files {
        let name = file.display().to_string();
        let bytes = match std::fs::read(file) {
            Ok(bytes) => bytes,
            Err(e) => {
                eprintln!("error: cannot read {name}: {e}");
                return Ok(ExitCode::from(EXIT_USAGE));
            }
        };
        parsed_files.push(parse_file(&name, &bytes, &limits));
        if let Ok(text) = String::from_utf8(bytes) {
            sources.insert(name, text);
        }
    }
    let promotions = parsed_files
        .iter()
        .map(|p| p.promotions.len())
        .sum::<usize>();
    let diagnostics = diagnostics_of(&files, &parsed_files, &sources);
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

//! `tollgate validate [PATH…]`: parse and validate ClusterPromotion and RolloutPolicy files
//! without a cluster, and which policy governs each promotion.
//! Exit 0 valid (warnings allowed unless `--strict`), 1 invalid, 2 usage or I/O error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tollgate_manifest::documents::{duplicate_names, near_miss_kinds};
use tollgate_manifest::parse::ParsedFile;
use tollgate_manifest::report::{Summary, render_github, render_human, render_json};
use tollgate_manifest::rules::annotations::APPROVE_NAMES_NO_SNAPSHOT;
use tollgate_manifest::{Diagnostic, Limits, parse_file};

mod analysis_soak;
mod comparison_baselines;
mod depends_on;
mod policy_admins;

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
/// warned about (see [`known_commit_approvals`]). With them, which policy governs each valid
/// promotion.
fn diagnostics_of(
    files: &[PathBuf],
    parsed_files: &[ParsedFile],
    sources: &BTreeMap<String, String>,
) -> (Vec<Diagnostic>, Vec<policies::Governance>) {
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
    let (policy_diagnostics, governance) =
        policies::diagnostics(parsed_files, |file| sources.get(file).map(String::as_str));
    diagnostics.extend(policy_diagnostics);
    diagnostics.extend(depends_on::diagnostics(parsed_files, |file| {
        sources.get(file).map(String::as_str)
    }));
    (diagnostics, governance)
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
    let policy_count = parsed_files.iter().map(|p| p.policies.len()).sum::<usize>();
    let policies_text = match policy_count {
        0 => String::new(),
        1 => ", 1 policy".to_string(),
        n => format!(", {n} policies"),
    };
    let (diagnostics, governance) = diagnostics_of(&files, &parsed_files, &sources);
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let warnings = diagnostics.len() - errors;
    let valid = errors == 0 && (!args.strict || warnings == 0);
    let output = match args.output {
        OutputFormat::Human => {
            let mut text = render_human(&diagnostics, |f| sources.get(f).map(String::as_str));
            for governed in &governance {
                text.push_str(&format!("{governed}\n"));
            }
            text.push_str(&format!(
                "{} file(s), {promotions} promotion(s){policies_text}: {errors} error(s), {warnings} warning(s){}\n",
                files.len(),
                if valid { "" } else { " — invalid" }
            ));
            text
        }
        OutputFormat::Json => {
            let text = render_json(
                &diagnostics,
                Summary {
                    files: files.len(),
                    promotions,
                    valid,
                },
            );
            format!("{}\n", with_governance(&text, &governance))
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

/// The JSON report with `"governance"`: per valid promotion, its file, name, and the policy
/// governing it with the policy's file (`null`: none, upstream behaviour).
fn with_governance(report: &str, governance: &[policies::Governance]) -> String {
    let Ok(serde_json::Value::Object(mut report)) = serde_json::from_str(report) else {
        return report.to_string();
    };
    let governance = governance.iter().map(|g| {
        serde_json::json!({
            "file": g.file,
            "promotion": g.promotion,
            "policy": g.policy.as_ref().map(|(name, _)| name),
            "policyFile": g.policy.as_ref().map(|(_, file)| file),
        })
    });
    report.insert("governance".into(), governance.collect());
    serde_json::to_string_pretty(&report).unwrap_or_else(|_| "{}".to_string())
}

/// What only policies and promotions together show: a policy name defined twice, a promotion
/// that two policies select or whose annotation names no policy, a stage override no governed
/// promotion can use, an analysis that outlasts the soak of a stage it gates. Policies are chosen
/// by the controller's rule ([`PolicySet::choose`]).
mod policies {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    pub(super) use tollgate_manifest::key_position::key_position;
    use tollgate_manifest::model::ClusterPromotion;
    use tollgate_manifest::parse::{ParsedFile, ParsedPromotion};
    use tollgate_manifest::{Diagnostic, RolloutPolicy, Severity};
    use tollgate_model::policy::POLICY_ANNOTATION;
    use tollgate_source::PolicySet;

    /// Which policy governs a valid promotion, by the controller's rule.
    pub struct Governance {
        /// The promotion's file.
        pub file: String,
        pub promotion: String,
        /// The governing policy's name and file; `None`: no policy, upstream behaviour.
        pub policy: Option<(String, String)>,
    }

    impl std::fmt::Display for Governance {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            let Governance {
                file, promotion, ..
            } = self;
            write!(f, "{file}: ClusterPromotion {promotion:?} is governed by ")?;
            match &self.policy {
                Some((name, policy_file)) => write!(f, "RolloutPolicy {name:?} ({policy_file})"),
                None => f.write_str("no RolloutPolicy (upstream behaviour)"),
            }
        }
    }

    /// Where a policy document starts.
    struct PolicyAt<'a> {
        file: &'a str,
        line: u32,
    }

    /// The diagnostics, and which policy governs each promotion whose policy can be chosen.
    pub fn diagnostics<'t>(
        files: &[ParsedFile],
        text_of: impl Fn(&str) -> Option<&'t str>,
    ) -> (Vec<Diagnostic>, Vec<Governance>) {
        let mut diagnostics = Vec::new();
        let (places, mut valid) = policy_places(files);
        for (name, at) in places.iter().filter(|(_, at)| at.len() > 1) {
            diagnostics.extend(duplicate_policy(name, at, &text_of));
        }
        // A name defined twice governs nothing here: the error above says why.
        valid.retain(|(policy, _)| places.get(policy.name()).is_some_and(|at| at.len() == 1));
        let usable: Vec<String> = valid.iter().map(|(p, _)| p.name().to_string()).collect();
        let unusable = places
            .iter()
            .filter(|(name, _)| !usable.iter().any(|u| u == *name))
            .filter_map(|(name, at)| Some((name.to_string(), at.first()?.file.to_string())));
        let set = PolicySet::new(valid, Vec::new()).with_unusable(unusable);
        let (governed, governance) =
            choose_policies(files, &set, &places, &text_of, &mut diagnostics);
        let line_of = |policy: &RolloutPolicy| {
            places
                .get(policy.name())
                .and_then(|at| at.first())
                .map_or(1, |at| at.line)
        };
        for (policy, file) in set.policies() {
            let Some(promotions) = governed.get(policy.name()) else {
                continue;
            };
            let line = line_of(policy);
            diagnostics.extend(unused_overrides(policy, file, line, promotions, &text_of));
            diagnostics.extend(super::analysis_soak::diagnostics(
                policy, file, line, promotions, &text_of,
            ));
            diagnostics.extend(super::comparison_baselines::diagnostics(
                policy, file, line, promotions, &text_of,
            ));
        }
        for (policy, file) in set.policies() {
            diagnostics.extend(super::policy_admins::diagnostics(
                policy,
                file,
                line_of(policy),
                &text_of,
            ));
        }
        (diagnostics, governance)
    }

    /// Where each policy name is defined, and the policies that parsed.
    #[allow(clippy::type_complexity)]
    fn policy_places(
        files: &[ParsedFile],
    ) -> (
        BTreeMap<&str, Vec<PolicyAt<'_>>>,
        Vec<(Arc<RolloutPolicy>, String)>,
    ) {
        let mut places: BTreeMap<&str, Vec<PolicyAt<'_>>> = BTreeMap::new();
        let mut valid = Vec::new();
        for file in files {
            for document in &file.policies {
                if let Some(name) = &document.name {
                    places.entry(name).or_default().push(PolicyAt {
                        file: &file.file,
                        line: document.line,
                    });
                }
                if let Some(policy) = &document.policy {
                    valid.push((Arc::new(policy.clone()), file.file.clone()));
                }
            }
        }
        (places, valid)
    }

    /// The policy each promotion gets: the promotions of each policy, and the governance lines;
    /// a promotion whose policy cannot be chosen is a diagnostic.
    fn choose_policies<'f, 't>(
        files: &'f [ParsedFile],
        set: &PolicySet,
        places: &BTreeMap<&str, Vec<PolicyAt<'_>>>,
        text_of: &impl Fn(&str) -> Option<&'t str>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> (BTreeMap<String, Vec<&'f ClusterPromotion>>, Vec<Governance>) {
        let mut governed: BTreeMap<String, Vec<&ClusterPromotion>> = BTreeMap::new();
        let mut governance = Vec::new();
        for file in files {
            for document in &file.promotions {
                let Some(promotion) = &document.promotion else {
                    continue;
                };
                let chosen = set.choose(promotion, &file.file);
                if let Ok(policy) = &chosen {
                    governance.push(Governance {
                        file: file.file.clone(),
                        promotion: promotion.name().to_string(),
                        policy: policy.as_ref().map(|p| {
                            let policy_file = set.file_of(p.name()).unwrap_or("?");
                            (p.name().to_string(), policy_file.to_string())
                        }),
                    });
                }
                match chosen {
                    Ok(Some(policy)) => governed
                        .entry(policy.name().to_string())
                        .or_default()
                        .push(promotion),
                    Ok(None) => {}
                    Err(problem) => diagnostics.push(choice_error(
                        &file.file,
                        document,
                        promotion,
                        not_among_inputs(promotion, places).unwrap_or(problem.message),
                        text_of(&file.file),
                    )),
                }
            }
        }
        (governed, governance)
    }

    fn duplicate_policy<'t>(
        name: &str,
        at: &[PolicyAt<'_>],
        text_of: &impl Fn(&str) -> Option<&'t str>,
    ) -> Vec<Diagnostic> {
        let all: Vec<String> = at
            .iter()
            .map(|p| format!("{}:{}", p.file, p.line))
            .collect();
        at.iter()
            .map(|place| {
                let (line, column) = text_of(place.file)
                    .and_then(|text| key_position(text, place.line, &["metadata", "name"]))
                    .unwrap_or((place.line, 1));
                Diagnostic {
                    severity: Severity::Error,
                    code: "duplicate-policy-name",
                    file: place.file.to_string(),
                    line,
                    column,
                    path: "metadata.name".to_string(),
                    message: format!(
                        "RolloutPolicy {name:?} is defined more than once ({}); the controller keeps its last valid version until one definition is removed",
                        all.join(", ")
                    ),
                }
            })
            .collect()
    }

    /// A promotion whose policy cannot be chosen: at its annotation when it names a policy, else
    /// at its name.
    /// A promotion whose annotation names a policy no validated file defines: it may well be
    /// defined in a file that was not passed; say so rather than "does not exist".
    fn not_among_inputs(
        promotion: &ClusterPromotion,
        places: &BTreeMap<&str, Vec<PolicyAt<'_>>>,
    ) -> Option<String> {
        let name = promotion.metadata.annotations.get(POLICY_ANNOTATION)?;
        if places.contains_key(name.as_str()) {
            return None;
        }
        Some(format!(
            "annotation {POLICY_ANNOTATION} names RolloutPolicy {name:?}, which is not among the validated files; pass the directory that holds it (tollgate validate DIR) to check it, or add it"
        ))
    }

    fn choice_error(
        file: &str,
        document: &ParsedPromotion,
        promotion: &ClusterPromotion,
        message: String,
        text: Option<&str>,
    ) -> Diagnostic {
        let named = promotion
            .metadata
            .annotations
            .contains_key(POLICY_ANNOTATION);
        let (code, keys, path) = if named {
            (
                "policy-not-found",
                ["metadata", "annotations", POLICY_ANNOTATION].as_slice(),
                format!("metadata.annotations[{POLICY_ANNOTATION}]"),
            )
        } else {
            (
                "policy-conflict",
                ["metadata", "name"].as_slice(),
                "metadata.name".to_string(),
            )
        };
        let (line, column) = text
            .and_then(|text| key_position(text, document.line, keys))
            .unwrap_or((document.line, 1));
        Diagnostic {
            severity: Severity::Error,
            code,
            file: file.to_string(),
            line,
            column,
            path,
            message: format!("ClusterPromotion {:?}: {message}", promotion.name()),
        }
    }

    /// A warning for each stage override of `policy` that no promotion it governs has a stage for.
    fn unused_overrides<'t>(
        policy: &RolloutPolicy,
        file: &str,
        line: u32,
        promotions: &[&ClusterPromotion],
        text_of: &impl Fn(&str) -> Option<&'t str>,
    ) -> Vec<Diagnostic> {
        let names: Vec<&str> = promotions.iter().map(|p| p.name()).collect();
        policy
            .spec
            .stages
            .keys()
            .filter(|stage| promotions.iter().all(|p| p.stage(stage).is_none()))
            .map(|stage| {
                let (line, column) = text_of(file)
                    .and_then(|text| key_position(text, line, &["spec", "stages", stage]))
                    .unwrap_or((line, 1));
                Diagnostic {
                    severity: Severity::Warning,
                    code: "policy-stage-unknown",
                    file: file.to_string(),
                    line,
                    column,
                    path: tollgate_manifest::located::child_path("spec.stages", stage),
                    message: format!(
                        "stage override {stage:?} of RolloutPolicy {:?} applies to no stage: no promotion it governs ({}) has a stage of that name",
                        policy.name(),
                        names.join(", ")
                    ),
                }
            })
            .collect()
    }
}

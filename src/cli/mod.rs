//! Subcommands. Each lives in its own file with an `Args` struct and a `run` function; this file
//! only lists them. Business rules live in the library crates, never here.

use std::io::Write as _;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub mod analysis_gates;
pub mod approve;
pub mod client_certificate;
pub mod connect;
pub mod controller_view;
pub mod crd;
// Without the `embedded` feature, the same names say that the embedded cluster is not built in.
#[cfg_attr(not(feature = "embedded"), path = "embedded_absent.rs")]
pub mod embedded;
pub mod emulator;
#[cfg(feature = "embedded")]
pub mod fleet_health;
pub mod history;
pub mod plan;
pub mod plan_verify;
pub mod retry;
pub mod rollback;
pub mod run;
pub mod schema;
pub mod seal;
pub mod status;
pub mod timeline;
pub mod trust_args;
pub mod ui;
pub mod ui_args;
pub mod ui_signing;
pub mod validate;
pub mod width;

#[derive(Parser, Debug)]
#[command(
    name = "tollgate",
    version,
    about = "Progressive, staged Sveltos rollouts driven from git",
    after_help = "Annotations on a ClusterPromotion in git: tollgate.dev/paused: \"true\" holds its \
pipeline where it is (no apply, no delete; \"false\" or removing it resumes); tollgate.dev/policy: NAME \
picks its RolloutPolicy; approve.tollgate.dev/STAGE: SNAPSHOT approves a manual gate (tollgate approve \
writes it); retry.tollgate.dev/STAGE: SNAPSHOT/N re-drives a halted stage's failed clusters once per N \
(tollgate retry writes it). On its GitPromotion: tollgate.dev/confirm-prune: \"true\" releases a held removal."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug)]
pub struct GlobalArgs {
    /// Log format on stderr.
    #[arg(
        long,
        global = true,
        env = "TOLLGATE_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,
    /// Log filter, in `tracing` env-filter syntax (e.g. `info,tollgate=debug`).
    #[arg(long, global = true, env = "TOLLGATE_LOG", default_value = "warn")]
    pub log: String,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the controller: follow a git branch and drive its promotions on the management cluster.
    Run(Box<run::Args>),
    /// Show the promotions' rollout status, from the management cluster.
    Status(status::Args),
    /// Serve the embedded management cluster (Kubernetes API emulator + Sveltos stand-in).
    Emulator(emulator::Args),
    /// Print tollgate's CustomResourceDefinition (GitPromotion) as YAML.
    Crd(crd::Args),
    /// Print the JSON Schema of a kind tollgate reads from git (RolloutPolicy), for editors.
    Schema(schema::Args),
    /// Validate ClusterPromotion files (exit 0 valid, 1 invalid, 2 usage or I/O error).
    Validate(validate::Args),
    /// Show the snapshots and approvals of one promotion from git history.
    History(history::Args),
    /// Show what a commit range would do to each promotion (restarts, stages, approvals).
    Plan(plan::Args),
    /// Approve a manual stage for a snapshot: commit the approval annotation on a new branch.
    Approve(approve::Args),
    /// Restore a promotion to an earlier snapshot's content: commit it on a new branch.
    Rollback(rollback::Args),
    /// Commit a signed statement that vouches for the unsigned history before it
    /// (`Tollgate-Seal:`, for `--verify-commits Strict`).
    Seal(seal::Args),
    /// Retry a halted stage: commit the retry annotation that re-drives its failed clusters.
    Retry(retry::Args),
    /// Draw a promotion's recent runs as a timeline (SVG or PNG), from the management cluster.
    Timeline(timeline::Args),
    /// Serve the web view of every rollout (reads the cluster; actions commit to git).
    Ui(Box<ui::Args>),
    /// Print shell completions.
    Completions(CompletionsArgs),
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    pub shell: clap_complete::Shell,
}

pub fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => run::run(*args),
        Command::Status(args) => status::run(args),
        Command::Emulator(args) => emulator::run(args),
        Command::Crd(args) => crd::run(args),
        Command::Schema(args) => schema::run(args),
        Command::Validate(args) => validate::run(args),
        Command::History(args) => history::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Approve(args) => approve::run(args),
        Command::Rollback(args) => rollback::run(args),
        Command::Seal(args) => seal::run(args),
        Command::Retry(args) => retry::run(args),
        Command::Timeline(args) => timeline::run(args),
        Command::Ui(args) => ui::run(*args),
        Command::Completions(args) => {
            // Into a buffer, then out through `write_stdout`: clap_complete panics when a write
            // to stdout fails, as it does when the reader has gone (`tollgate completions bash
            // | true`).
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut cmd, "tollgate", &mut script);
            write_stdout(&String::from_utf8_lossy(&script))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub fn init_logging(global: &GlobalArgs) {
    // kube's client logs every failed request at ERROR, and its watcher every 403 at WARN, at
    // each retry; tollgate reports each failing request and watch itself, once per change of
    // state and with what it was doing, so those lines are duplicates unless asked for by name.
    let mut spec = global.log.clone();
    if !global.log.contains("kube_client") {
        spec.push_str(",kube_client::client::builder=off");
    }
    if !global.log.contains("kube_runtime") {
        spec.push_str(",kube_runtime::watcher=error");
    }
    let filter = tracing_subscriber::EnvFilter::try_new(&spec)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Colour only on a terminal: escape codes in a pod's log are noise to every log pipeline.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match global.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Runs an async command to completion on a runtime of its own (the CLI's commands are
/// synchronous at the top).
pub fn block_on<T>(
    command: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    use anyhow::Context as _;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(command)
}

/// Writes `text` to stdout and flushes it. When the reader has gone away (`tollgate status |
/// head -1`) this returns the `BrokenPipe` error instead of panicking as `print!` does; `main`
/// then exits quietly (see [`is_broken_pipe`]).
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Writes one line to stdout, like `println!` but returning a closed pipe as an error.
pub fn say(line: &str) -> std::io::Result<()> {
    write_stdout(&format!("{line}\n"))
}

/// Writes one line of a report whose command goes on regardless (`approve`, `rollback`: a reader
/// that stopped reading must not stop the commit or the push half-way, nor panic as `println!`).
pub fn report_line(line: &str) {
    if let Err(error) = say(line)
        && error.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("warning: cannot write to stdout: {error}");
    }
}

/// Whether `error` comes from writing to a closed pipe: the reader stopped reading, which is the
/// reader's choice, not a failure worth a message.
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// An error and its causes, `: `-separated, leaving out a cause its parent already quotes (our
/// error types print their source inline, which `{:#}` would repeat). A cluster error ends the
/// chain: it quotes what the API server or the transport said, which its sources (kube's error
/// and below) repeat in other words.
pub fn error_chain(error: &anyhow::Error) -> String {
    let mut shown = String::new();
    let mut previous = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if !previous.contains(&text) {
            if !shown.is_empty() {
                shown.push_str(": ");
            }
            shown.push_str(&text);
        }
        if cause.is::<crate::cluster::errors::ClusterError>() {
            break;
        }
        previous = text;
    }
    shown
}

#[cfg(test)]
mod error_chain_tests {
    use super::error_chain;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot fetch: {source}")]
    struct Fetch {
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn causes_already_quoted_are_not_repeated() {
        let io = std::io::Error::other("connection refused");
        let error = anyhow::Error::new(Fetch { source: io }).context("cannot read branch main");
        assert_eq!(
            error_chain(&error),
            "cannot read branch main: cannot fetch: connection refused"
        );
        let plain = anyhow::Error::new(std::io::Error::other("disk full")).context("writing");
        assert_eq!(error_chain(&plain), "writing: disk full");
    }

    #[test]
    fn a_cluster_error_is_shown_once_without_its_kube_source() {
        let status =
            kube::core::Status::failure("gitpromotions is forbidden", "Forbidden").with_code(403);
        let error = crate::cluster::errors::classify(
            kube::Error::Api(Box::new(status)),
            "list",
            "gitpromotions",
            "",
        );
        let error = anyhow::Error::new(error).context("reading the promotions");
        assert_eq!(
            error_chain(&error),
            "reading the promotions: RBAC forbids tollgate to list gitpromotions: gitpromotions \
             is forbidden (see deploy/ for the ClusterRole)"
        );
    }
}

/// The documented claims about the CLI (docs/operations.md#run-flags), checked against the parser.
#[cfg(test)]
mod readme_claims {
    use clap::CommandFactory;

    use super::Cli;

    /// "Every flag has an environment variable (`tollgate run --help`)": docs/operations.md#run-flags says the
    /// exceptions, `--kubeconfig` and `--context`, which read KUBECONFIG as kubectl does.
    #[test]
    fn every_run_flag_has_an_environment_variable() {
        let cli = Cli::command();
        let run = cli.find_subcommand("run").expect("run");
        let missing: Vec<String> = run
            .get_arguments()
            .filter(|arg| arg.get_long().is_some())
            .filter(|arg| !matches!(arg.get_id().as_str(), "kubeconfig" | "context"))
            .filter(|arg| arg.get_env().is_none())
            .map(|arg| format!("--{}", arg.get_long().unwrap_or_default()))
            .collect();
        assert!(missing.is_empty(), "flags without env: {missing:?}");
    }

    #[test]
    fn help_names_the_pause_annotation_the_webhook_and_status_api_urls() {
        let mut cli = Cli::command();
        let top = cli.render_long_help().to_string();
        assert!(top.contains("tollgate.dev/paused"), "{top}");
        let mut run = Cli::command();
        let run = run.find_subcommand_mut("run").expect("run");
        let help = run.render_long_help().to_string();
        for url in [
            "/webhooks/{github,gitlab,gitea,generic}",
            "/api/v1/promotions",
        ] {
            assert!(help.contains(url), "{url} missing in run --help:\n{help}");
        }
    }
}

//! `tollgate`: a git-driven controller for progressive, staged Sveltos rollouts.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use tollgate::cli;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    cli::init_logging(&args.global);
    match cli::dispatch(args.command) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", cli::error_chain(&error));
            ExitCode::from(2)
        }
    }
}

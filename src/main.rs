//! `tollgate`: a git-driven controller for progressive, staged Sveltos rollouts.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use tollgate::cli;

// mimalloc instead of glibc malloc: at 10,000 promotions glibc's malloc and free were about 40 % of
// the controller's CPU, and its per-thread arenas fragment under watch-event churn.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    tollgate::memory::disable_transparent_huge_pages();
    let args = cli::Cli::parse();
    cli::init_logging(&args.global);
    match cli::dispatch(args.command) {
        Ok(code) => code,
        // The reader of our stdout went away (`… | head -1`): end as a process killed by SIGPIPE
        // would (128 + 13), without a message.
        Err(error) if cli::is_broken_pipe(&error) => ExitCode::from(141),
        Err(error) => {
            eprintln!("error: {}", cli::error_chain(&error));
            ExitCode::from(2)
        }
    }
}

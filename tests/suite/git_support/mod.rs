//! `git` for CLI tests: isolated from the machine's configuration, with a fixed author and
//! committer, so that what the tests assert does not depend on who runs them.

use std::path::Path;
use std::process::Command;

pub const AUTHOR: &str = "Alice Author";
pub const COMMITTER: &str = "Carl Committer";

pub fn git_command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("git");
    command
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", AUTHOR)
        .env("GIT_AUTHOR_EMAIL", "alice@example.com")
        .env("GIT_COMMITTER_NAME", COMMITTER)
        .env("GIT_COMMITTER_EMAIL", "carl@example.com");
    command
}

/// Runs git, asserts success, returns trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    run(git_command(dir, args), args)
}

/// Like [`git`], with author and committer dates pinned so commit SHAs are stable (for snapshots).
pub fn git_at(dir: &Path, args: &[&str], date: &str) -> String {
    let mut command = git_command(dir, args);
    command
        .env("GIT_AUTHOR_DATE", date)
        .env("GIT_COMMITTER_DATE", date);
    run(command, args)
}

fn run(mut command: Command, args: &[&str]) -> String {
    let output = command.output().expect("run git");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

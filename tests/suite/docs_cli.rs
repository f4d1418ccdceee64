//! `docs/cli.md` against the parser and the binary, so they cannot drift: the command table lists
//! every subcommand, every long flag of every subcommand is documented where that command is
//! (and every flag documented there exists), and the exit codes the page gives are the ones the
//! binary returns.

use std::collections::{BTreeMap, BTreeSet};

use clap::CommandFactory;
use tollgate::cli::Cli;
use tollgate_fixtures::{TestRepo, promotion, stage};

use crate::support::docs::{page, rows, section, spans};
use crate::support::tollgate_binary;

/// The subcommands' names (clap's own `help` left out).
fn subcommands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .filter(|name| name != "help")
        .collect()
}

#[test]
fn the_command_table_lists_every_subcommand_and_no_other() {
    let cli = page("cli.md");
    // `` [`run`](#tollgate-run) `` → `run`.
    let listed: BTreeSet<String> = rows(section(&cli, "# CLI reference"))
        .iter()
        .flat_map(|r| spans(&r[0]))
        .collect();
    let commands: BTreeSet<String> = subcommands().into_iter().collect();
    let missing: Vec<&String> = commands.difference(&listed).collect();
    let unknown: Vec<&String> = listed.difference(&commands).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "not in the table: {missing:?}; in the table, no subcommand: {unknown:?}"
    );
}

/// The long flags (`--name`) a text names in its inline code spans, fenced blocks left out (their
/// examples chain other programs). A span that starts with another program (`kubectl …`, `git
/// …`) or with another subcommand (`tollgate run …` where `commands` are others) names none of
/// these commands' flags.
fn flags_named(text: &str, commands: &[String]) -> BTreeSet<String> {
    let mut prose = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    let mut flags = BTreeSet::new();
    for span in spans(&prose) {
        let mut words = span.split_whitespace();
        match words.next() {
            Some(first) if first.starts_with('-') => {}
            Some("tollgate") => {
                if !words
                    .next()
                    .is_some_and(|c| commands.iter().any(|n| n == c))
                {
                    continue;
                }
            }
            _ => continue,
        }
        for token in
            span.split(|c: char| c.is_whitespace() || matches!(c, ',' | '=' | '|' | '[' | ']'))
        {
            let Some(name) = token.strip_prefix("--") else {
                continue;
            };
            if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
                continue;
            }
            let end = name
                .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
                .unwrap_or(name.len());
            flags.insert(format!("--{}", &name[..end]));
        }
    }
    flags
}

/// Where the flags of each subcommand are documented: its section of docs/cli.md, and for all of
/// them the global options. `run`'s flags are also in the run flags table of docs/operations.md,
/// and the web view's (`ui`, and `run`'s `--ui-…`) in docs/web.md.
fn places() -> Vec<(String, Vec<String>, BTreeSet<String>)> {
    let commands = subcommands();
    let cli = page("cli.md");
    let mut places = vec![(
        "cli.md: Global options".to_string(),
        commands.clone(),
        flags_named(section(&cli, "## Global options"), &commands),
    )];
    for command in commands.iter().filter(|c| c.as_str() != "ui") {
        let heading = format!("## tollgate {command}");
        let served = vec![command.clone()];
        let flags = flags_named(section(&cli, &heading), &served);
        places.push((format!("cli.md: {heading}"), served, flags));
    }
    let run = vec!["run".to_string()];
    let operations = page("operations.md");
    let flags = flags_named(section(&operations, "## Run flags"), &run);
    places.push(("operations.md: ## Run flags".to_string(), run, flags));
    let web = vec!["ui".to_string(), "run".to_string()];
    let flags = flags_named(section(&page("web.md"), "## Running it"), &web);
    places.push(("web.md: ## Running it".to_string(), web, flags));
    places
}

/// The long flags of `arguments`, hidden ones (for tests) left out.
fn longs<'a>(arguments: impl Iterator<Item = &'a clap::Arg>) -> impl Iterator<Item = String> {
    arguments
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long())
        .map(|l| format!("--{l}"))
}

/// Every subcommand's long flags, the global ones (`--log`, `--log-format`) included.
fn flags_by_command() -> BTreeMap<String, BTreeSet<String>> {
    let cli = Cli::command();
    let global: Vec<String> = longs(cli.get_arguments()).collect();
    cli.get_subcommands()
        .filter(|c| c.get_name() != "help")
        .map(|c| {
            let flags = longs(c.get_arguments()).chain(global.iter().cloned());
            (c.get_name().to_string(), flags.collect())
        })
        .collect()
}

/// clap's own flags, which every command takes and no section needs to list.
const BUILT_IN: [&str; 2] = ["--help", "--version"];

#[test]
fn every_flag_of_every_subcommand_is_documented_where_its_command_is_and_no_other() {
    let flags = flags_by_command();
    let places = places();
    let mut problems = Vec::new();
    for (command, own) in &flags {
        for flag in own {
            let documented = places
                .iter()
                .any(|(_, served, named)| served.contains(command) && named.contains(flag));
            if !documented {
                problems.push(format!("tollgate {command} {flag} is not documented"));
            }
        }
    }
    for (place, served, named) in &places {
        for flag in named {
            let exists = served.iter().any(|c| flags[c].contains(flag));
            if !exists && !BUILT_IN.contains(&flag.as_str()) {
                problems.push(format!("{place} names {flag}, no flag of {served:?}"));
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The exit codes table: command → the meaning of 0, 1 and 2 ("—": never that code).
fn exit_codes() -> BTreeMap<String, [String; 3]> {
    let cli = page("cli.md");
    let mut codes = BTreeMap::new();
    for row in rows(section(&cli, "## Exit codes")) {
        for command in spans(&row[0]) {
            let meanings = [row[1].clone(), row[2].clone(), row[3].clone()];
            let twice = codes.insert(command.clone(), meanings).is_some();
            assert!(!twice, "{command} is in two rows of the exit codes table");
        }
    }
    codes
}

#[test]
fn the_exit_codes_table_covers_every_subcommand() {
    let documented: BTreeSet<String> = exit_codes().into_keys().collect();
    let commands: BTreeSet<String> = subcommands().into_iter().collect();
    assert_eq!(documented, commands);
}

/// A repository with one valid promotion, `web`, committed on `main`.
fn repo_with_web() -> TestRepo {
    let repo = TestRepo::new();
    let web = promotion("web")
        .stage(stage("dev").selector("env", "dev").auto())
        .to_yaml();
    repo.write("web.yaml", &web);
    repo.commit("web");
    repo
}

/// Representative cases of each code the page gives, run through the binary: each code must be
/// one the table documents for that command (not "—"), and the one the binary returns.
#[test]
fn the_documented_exit_codes_are_what_the_binary_returns() {
    let codes = exit_codes();
    let repo = repo_with_web();
    let dir = repo.path().display().to_string();
    let missing = repo.path().join("no-such-dir").display().to_string();
    let invalid = TestRepo::new();
    invalid.write("bad.yaml", "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\nmetadata: {name: bad}\nspec: {stages: []}\n");
    let bad = invalid.path().display().to_string();
    let cases: [(&str, &[&str], u8); 11] = [
        ("validate", &["validate", &dir], 0),
        ("validate", &["validate", &bad], 1),
        ("validate", &["validate", &missing], 2),
        ("validate", &["validate", "--no-such-flag"], 2),
        ("history", &["history", "web", "--repo", &dir], 0),
        ("history", &["history", "nope", "--repo", &dir], 1),
        ("history", &["history", "web", "--repo", &missing], 2),
        (
            "rollback",
            &["rollback", "nope", "--to", "1", "--repo", &dir],
            1,
        ),
        ("crd", &["crd"], 0),
        ("schema", &["schema", "rolloutpolicy"], 0),
        ("schema", &["schema", "nokind"], 2),
    ];
    let mut problems = Vec::new();
    for (command, args, code) in cases {
        let meaning = &codes[command][usize::from(code)];
        if meaning == "—" || meaning.is_empty() {
            problems.push(format!(
                "{args:?}: exit {code} is not documented for {command}"
            ));
        }
        let output = tollgate_binary()
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .expect("tollgate runs");
        if output.status.code() != Some(i32::from(code)) {
            problems.push(format!(
                "{args:?}: exit {:?}, the page says {code} ({meaning}); stderr: {}",
                output.status.code(),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

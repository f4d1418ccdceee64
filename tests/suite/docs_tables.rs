//! The reference tables of `docs/operations.md` against the code, so they cannot drift: every
//! `tollgate run` flag is in the run flags table with its environment variable, every metric
//! tollgate registers is in the metrics table, every Event reason is in the Kubernetes Events
//! table, and no table names one the code lacks.

use std::collections::BTreeSet;

use clap::CommandFactory;
use tollgate::cli::Cli;

use crate::support::docs::{self, spans, table};

fn operations() -> String {
    docs::page("operations.md")
}

#[test]
fn every_run_flag_and_its_environment_variable_is_in_the_operations_table() {
    let command = Cli::command();
    let run = command.find_subcommand("run").expect("tollgate run");
    let rows = table(&operations(), "Run flags");
    let documented: BTreeSet<String> = rows.iter().flat_map(|r| spans(&r[0])).collect();
    let mut problems = Vec::new();
    let mut flags = BTreeSet::new();
    // `--log` and `--log-format` are global: every subcommand takes them.
    let global = command.get_arguments().filter(|a| a.is_global_set());
    for arg in run.get_arguments().chain(global) {
        let Some(long) = arg.get_long() else {
            continue;
        };
        let flag = format!("--{long}");
        flags.insert(flag.clone());
        let Some(row) = rows.iter().find(|r| spans(&r[0]).contains(&flag)) else {
            problems.push(format!("{flag} is not in the run flags table"));
            continue;
        };
        let Some(env) = arg.get_env().and_then(|e| e.to_str()) else {
            continue;
        };
        // `TOLLGATE_GIT_…` stands for the variables of a row's several flags.
        let named = spans(&row[1]).iter().any(|documented| {
            documented == env
                || documented
                    .strip_suffix('…')
                    .is_some_and(|prefix| env.starts_with(prefix))
        });
        if !named {
            problems.push(format!("{flag}: its variable {env} is not in its row"));
        }
    }
    for flag in documented.difference(&flags) {
        problems.push(format!("{flag} is documented, and no flag of tollgate run"));
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// Every metric's name without a counter's `_total`: those registered in the sources (a family
/// with no series yet is not in a scrape) and those a scrape shows (the collectors).
pub(crate) fn metric_names() -> BTreeSet<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut names = BTreeSet::new();
    let mut files = vec![root];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            let entries = std::fs::read_dir(&path).expect("a source directory");
            files.extend(entries.map(|e| e.expect("an entry").path()));
            continue;
        }
        if path.extension().is_some_and(|e| e == "rs") {
            names.extend(registered(
                &std::fs::read_to_string(&path).expect("a source file"),
            ));
        }
    }
    let scraped = tollgate::metrics::Metrics::new().encode();
    let types = scraped.lines().filter_map(|l| l.strip_prefix("# TYPE "));
    names.extend(
        types
            .filter_map(|l| l.split(' ').next())
            .map(str::to_string),
    );
    names
}

/// `registry.register(\n "name",` → `tollgate_name`; `register_with_unit` adds the unit
/// (seconds: the only one tollgate uses, checked). The metrics module's helpers
/// `registered(\n &mut registry,\n "name",` and `registered_in_seconds(` (seconds) count too.
fn registered(source: &str) -> Vec<String> {
    let lines: Vec<&str> = source.lines().map(str::trim).collect();
    let mut names = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let (name_line, with_unit) = if line.ends_with(".register(") {
            (index + 1, false)
        } else if line.ends_with("register_with_unit(") {
            (index + 1, true)
        } else if line.ends_with(" registered(") || line.ends_with(": registered(") {
            (index + 2, false)
        } else if line.ends_with("registered_in_seconds(") {
            (index + 2, true)
        } else {
            continue;
        };
        let Some(name) = lines.get(name_line).and_then(|l| l.strip_suffix(',')) else {
            continue;
        };
        if !name.starts_with('"') {
            continue;
        }
        let name = format!("tollgate_{}", name.trim_matches('"'));
        if with_unit {
            let statement = lines[index..].iter().take(6).copied().collect::<String>();
            assert!(
                statement.contains("Unit::Seconds") || line.ends_with("registered_in_seconds("),
                "{statement}"
            );
            names.push(format!("{name}_seconds"));
        } else {
            names.push(name);
        }
    }
    names
}

/// A row's names: `` `tollgate_a_sent_total`, `_failed_total` `` shares the first name's prefix
/// (the one that makes a served name, when one does).
fn documented_metrics(cell: &str, served: &BTreeSet<String>) -> Vec<String> {
    let names = spans(cell);
    let Some(first) = names.first() else {
        return Vec::new();
    };
    let prefixes: Vec<&str> = first.match_indices('_').map(|(i, _)| &first[..i]).collect();
    let mut out = vec![first.clone()];
    for short in names.iter().skip(1) {
        let full = prefixes
            .iter()
            .rev()
            .map(|p| format!("{p}{short}"))
            .find(|f| served.contains(f))
            .unwrap_or_else(|| short.clone());
        out.push(full);
    }
    out
}

#[test]
fn every_metric_served_is_in_the_operations_table_and_no_other() {
    let names = metric_names();
    assert!(names.len() > 25, "{names:?}");
    let served: BTreeSet<String> = names
        .iter()
        .map(|n| format!("{n}_total"))
        .chain(names.iter().cloned())
        .collect();
    let documented: BTreeSet<String> = table(&operations(), "Metrics")
        .iter()
        .flat_map(|r| documented_metrics(&r[0], &served))
        .map(|n| n.strip_suffix("_total").map_or(n.clone(), str::to_string))
        .collect();
    let missing: Vec<&String> = names.difference(&documented).collect();
    let unknown: Vec<&String> = documented.difference(&names).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "served but not documented: {missing:?}; documented but not served: {unknown:?}"
    );
}

/// Every reason an Event can carry (`EventReason::ALL`: the engine's and the notifier's) is in the
/// Kubernetes Events table, and the table names no other.
#[test]
fn every_event_reason_is_in_the_events_table_and_no_other() {
    let reasons: BTreeSet<String> = tollgate_engine::EventReason::ALL
        .iter()
        .map(|r| r.as_str().to_string())
        .collect();
    let rows = table(&operations(), "Kubernetes Events");
    let documented: BTreeSet<String> = rows.iter().flat_map(|r| spans(&r[0])).collect();
    let missing: Vec<&String> = reasons.difference(&documented).collect();
    let unknown: Vec<&String> = documented.difference(&reasons).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "emitted but not documented: {missing:?}; documented but never emitted: {unknown:?}"
    );
    for row in &rows {
        assert!(matches!(row[1].as_str(), "Normal" | "Warning"), "{row:?}");
    }
}

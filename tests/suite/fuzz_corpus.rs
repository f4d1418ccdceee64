//! Replays the committed fuzz corpus (fuzz/corpus/<target>/) and every saved crash
//! (fuzz/regressions/<target>/) through the same entry points the fuzz targets call, so that
//! whatever the fuzzer once found stays fixed. See fuzz/README.md for running the fuzzers.

use std::path::{Path, PathBuf};

use tollgate::fuzzing;
use tollgate::server::Provider;

fn inputs(target: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut files = Vec::new();
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        files.extend(entries.map(|e| e.expect("corpus entry").path()));
    }
    files.sort();
    files
}

fn replay(target: &str, run: impl Fn(&[u8]) + std::panic::RefUnwindSafe) {
    let files = inputs(target);
    assert!(!files.is_empty(), "fuzz/corpus/{target} is empty");
    let mut failures = Vec::new();
    for file in &files {
        let data = std::fs::read(file).expect("read corpus file");
        if std::panic::catch_unwind(|| run(&data)).is_err() {
            failures.push(file.display().to_string());
        }
    }
    assert!(
        failures.is_empty(),
        "{target}: failing inputs {failures:#?}"
    );
}

#[test]
fn spec_file_corpus() {
    replay("spec_file", fuzzing::spec_file);
}

#[test]
fn webhook_github_corpus() {
    replay("webhook_github", |data| {
        fuzzing::webhook(Provider::GitHub, data)
    });
}

#[test]
fn webhook_gitlab_corpus() {
    replay("webhook_gitlab", |data| {
        fuzzing::webhook(Provider::GitLab, data)
    });
}

#[test]
fn webhook_gitea_corpus() {
    replay("webhook_gitea", |data| {
        fuzzing::webhook(Provider::Gitea, data)
    });
}

#[test]
fn webhook_generic_corpus() {
    replay("webhook_generic", |data| {
        fuzzing::webhook(Provider::Generic, data)
    });
}

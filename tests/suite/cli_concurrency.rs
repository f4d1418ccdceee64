//! `tollgate run`'s concurrency flags: adaptive by default, `--concurrency N` fixed, and the two
//! do not mix.

use crate::support;

use support::tollgate_binary as tollgate;

fn run_with(flags: &[&str]) -> (Option<i32>, String) {
    let output = tollgate()
        .args(["run", "--repo", "/nonexistent/promotions"])
        .args(flags)
        .env_remove("TOLLGATE_CONCURRENCY")
        .env_remove("TOLLGATE_MAX_CONCURRENCY")
        .output()
        .expect("tollgate runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn fixed_and_adaptive_concurrency_do_not_mix() {
    let (code, stderr) = run_with(&["--concurrency", "8", "--max-concurrency", "64"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--concurrency"), "{stderr}");
    assert!(stderr.contains("--max-concurrency"), "{stderr}");
}

#[test]
fn concurrency_must_be_positive() {
    for flag in ["--concurrency", "--max-concurrency"] {
        let (code, stderr) = run_with(&[flag, "0"]);
        assert_eq!(code, Some(2), "{flag}: {stderr}");
        assert!(stderr.contains(flag), "{flag}: {stderr}");
    }
}

#[test]
fn help_explains_adaptive_concurrency() {
    let output = tollgate()
        .args(["run", "--help"])
        .output()
        .expect("tollgate runs");
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("--max-concurrency"), "{help}");
    assert!(help.contains("[default: 256]"), "{help}");
    assert!(help.contains("Retry-After"), "{help}");
}

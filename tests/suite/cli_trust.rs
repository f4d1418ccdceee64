//! `tollgate history --trusted-keys` marks verified commits and `tollgate plan --trusted-keys`
//! says whether a pull request's commits would verify (issue #33), with keys made in the test.

use assert_cmd::Command;
use tollgate_fixtures::signing::{Signer, SshSigner, have_tool};
use tollgate_fixtures::{TestRepo, promotion, stage};

fn web(version: &str) -> String {
    promotion("web")
        .chart("web", version)
        .stage(stage("staging").selector("env", "staging").auto())
        .to_yaml()
}

fn stdout(repo: &TestRepo, args: &[&str]) -> String {
    let out = Command::cargo_bin("tollgate")
        .expect("binary")
        .args(args)
        .args(["--repo", &repo.path().display().to_string()])
        // A row per commit: what a row says is checked here, not how it wraps at 80 columns.
        .env("COLUMNS", "1000")
        .assert()
        .success();
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

#[test]
fn history_marks_verified_commits_and_plan_says_whether_a_range_would_verify() {
    if !have_tool("ssh-keygen", "openssh-client") {
        return;
    }
    let alice = SshSigner::new("alice");
    let keys = tempfile::tempdir().expect("temp dir");
    alice.trust_in(keys.path());
    let keys_arg = keys.path().display().to_string();
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    repo.commit("web 1.0.0, unsigned");
    repo.write("web.yaml", &web("2.0.0"));
    repo.commit_signed(&alice, "web 2.0.0, signed");

    let history = stdout(&repo, &["history", "web", "--trusted-keys", &keys_arg]);
    let row = |version: &str| {
        history
            .lines()
            .find(|l| l.contains(&format!("web {version}")))
            .unwrap_or_default()
            .to_string()
    };
    assert!(row("1.0.0").contains("unsigned"), "{history}");
    assert!(
        row("2.0.0").contains("verified (alice@example.com"),
        "{history}"
    );
    let plain = stdout(&repo, &["history", "web"]);
    assert!(!plain.contains("verified"), "no keys, no marks: {plain}");

    // A pull request: an unsigned commit, then a signed one.
    repo.git(&["checkout", "-q", "-b", "pr"]);
    repo.write("web.yaml", &web("3.0.0"));
    let unsigned = repo.commit("web 3.0.0, unsigned");
    repo.write("web.yaml", &web("3.0.1"));
    repo.commit_signed(&alice, "web 3.0.1, signed");
    let plan = stdout(
        &repo,
        &[
            "plan",
            "--from",
            "main",
            "--to",
            "pr",
            "--trusted-keys",
            &keys_arg,
        ],
    );
    assert!(plan.contains("Commit verification:"), "{plan}");
    assert!(
        plan.contains(&format!(
            "{} \"web 3.0.0, unsigned\": unsigned",
            &unsigned[..7]
        )),
        "{plan}"
    );
    assert!(
        plan.contains("--verify-commits Head: would roll out"),
        "{plan}"
    );
    assert!(
        plan.contains("--verify-commits Strict: would not roll out")
            && plan.contains(&unsigned[..7]),
        "{plan}"
    );
    let json = stdout(
        &repo,
        &[
            "plan",
            "--from",
            "main",
            "--to",
            "pr",
            "--trusted-keys",
            &keys_arg,
            "-o",
            "json",
        ],
    );
    let document: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(document["commitVerification"]["head"]["rollsOut"], true);
    assert_eq!(
        document["commitVerification"]["strict"]["commit"],
        unsigned.as_str()
    );
}

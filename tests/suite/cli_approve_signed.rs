//! `tollgate approve` and `tollgate rollback` sign with the user's git signing configuration
//! (issue #33): keys made in the test (`ssh-keygen`, `gpg`), commits that `git verify-commit`
//! accepts, the trailer form under a policy that wants several approvers, and a signing failure
//! that commits nothing.

use assert_cmd::Command;
use tollgate_fixtures::signing::{GpgSigner, Signer, SshSigner, have_tool};
use tollgate_fixtures::{TestRepo, promotion, stage};
use tollgate_model::SignatureCheck;
use tollgate_source::verify::{TrustedKeys, commit_signature};

fn tools() -> bool {
    have_tool("ssh-keygen", "openssh-client") && have_tool("gpg", "gnupg")
}

fn gated(version: &str) -> String {
    promotion("gated")
        .chart("web", version)
        .stage(stage("staging").selector("env", "staging").manual())
        .stage(stage("production").selector("env", "production").auto())
        .to_yaml()
}

const TWO_APPROVERS: &str = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: gates\nspec:\n  approvals:\n    staging:\n      approvers: [alice@example.com, carol@example.com]\n      minApprovals: 2\n      requireSignature: true\n";

fn tollgate(
    repo: &TestRepo,
    args: &[&str],
    env: &[(String, std::path::PathBuf)],
) -> assert_cmd::assert::Assert {
    let mut command = Command::cargo_bin("tollgate").expect("binary");
    command
        .args(args)
        .args(["--repo", &repo.path().display().to_string()]);
    for (key, value) in env {
        command.env(key, value);
    }
    command.assert()
}

/// The tip of `branch`.
fn tip(repo: &TestRepo, branch: &str) -> String {
    repo.git(&["rev-parse", &format!("refs/heads/{branch}")])
}

fn branches(repo: &TestRepo) -> Vec<String> {
    repo.git(&["for-each-ref", "--format=%(refname:short)", "refs/heads"])
        .lines()
        .map(str::to_string)
        .collect()
}

fn verified_by_tollgate(repo: &TestRepo, sha: &str, signer: &dyn Signer) -> SignatureCheck {
    let keys = tempfile::tempdir().expect("temp dir");
    signer.trust_in(keys.path());
    let trusted = TrustedKeys::read_dir(keys.path()).expect("keys");
    let git = git2::Repository::open(repo.path()).expect("open");
    commit_signature(&git, git2::Oid::from_str(sha).expect("oid"), &trusted)
}

#[test]
fn approve_signs_with_ssh_in_the_trailer_form_and_git_verify_commit_accepts_it() {
    if !tools() {
        return;
    }
    let alice = SshSigner::new("alice");
    let repo = TestRepo::new();
    repo.write("gated.yaml", &gated("1.0.0"));
    repo.write("policy.yaml", TWO_APPROVERS);
    repo.commit("gated 1.0.0");
    alice.configure(&repo);

    let out = tollgate(&repo, &["approve", "gated", "staging"], &[]).success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("signed with your SSH key"), "{stdout}");
    let branch = branches(&repo)
        .into_iter()
        .find(|b| b.starts_with("tollgate/approve-gated-staging-"))
        .expect("the approval branch");
    let sha = tip(&repo, &branch);
    repo.git(&["verify-commit", &sha]);
    let message = repo.git(&["log", "-1", "--format=%B", &sha]);
    // `tollgate/approve-gated-staging-<snapshot id>-<approver>`: a branch per approver.
    let id = branch
        .rsplit('-')
        .nth(1)
        .expect("snapshot id in the branch");
    assert!(branch.ends_with("-alice"), "{branch}");
    assert!(
        message.contains(&format!("Tollgate-Approve: gated/staging@{id}")),
        "{message}"
    );
    assert_eq!(
        repo.git(&["diff", "--stat", &format!("{sha}^"), &sha]),
        "",
        "the trailer form changes no file"
    );
    assert!(verified_by_tollgate(&repo, &sha, &alice).is_verified());
}

#[test]
fn approve_and_rollback_sign_with_openpgp_and_git_verify_commit_accepts_them() {
    if !tools() {
        return;
    }
    let gerda = GpgSigner::new("gerda");
    let repo = TestRepo::new();
    repo.write("gated.yaml", &gated("1.0.0"));
    repo.commit("gated 1.0.0");
    repo.write("gated.yaml", &gated("2.0.0"));
    repo.commit("gated 2.0.0");
    gerda.configure(&repo);

    tollgate(&repo, &["approve", "gated", "staging"], &gerda.env()).success();
    let approval = branches(&repo)
        .into_iter()
        .find(|b| b.starts_with("tollgate/approve-"))
        .expect("the approval branch");
    let sha = tip(&repo, &approval);
    repo.git_env(&["verify-commit", &sha], &gerda.env());
    assert!(
        repo.git(&["show", "--format=", &sha])
            .contains("approve.tollgate.dev/staging"),
        "one approver: the annotation form"
    );
    assert!(verified_by_tollgate(&repo, &sha, &gerda).is_verified());

    tollgate(&repo, &["rollback", "gated", "--to", "1"], &gerda.env()).success();
    let rollback = tip(&repo, "tollgate/rollback-gated-to-1");
    repo.git_env(&["verify-commit", &rollback], &gerda.env());
}

#[test]
fn a_signing_failure_is_an_error_and_commits_nothing() {
    if !tools() {
        return;
    }
    let repo = TestRepo::new();
    repo.write("gated.yaml", &gated("1.0.0"));
    repo.commit("gated 1.0.0");
    repo.git(&["config", "gpg.format", "ssh"]);
    repo.git(&["config", "user.signingKey", "/nonexistent/id_ed25519"]);
    let before = branches(&repo);

    let out = tollgate(&repo, &["approve", "gated", "staging"], &[]).failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("cannot sign the commit") && stderr.contains("nothing was committed"),
        "{stderr}"
    );
    assert_eq!(branches(&repo), before, "no unsigned commit, no branch");
}

#[test]
fn a_policy_that_requires_signatures_refuses_an_unsigned_approval() {
    let repo = TestRepo::new();
    repo.write("gated.yaml", &gated("1.0.0"));
    repo.write("policy.yaml", TWO_APPROVERS);
    repo.commit("gated 1.0.0");
    let before = branches(&repo);
    let out = tollgate(&repo, &["approve", "gated", "staging"], &[]).failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("requires signed approvals") && stderr.contains("user.signingKey"),
        "{stderr}"
    );
    assert_eq!(branches(&repo), before);
}

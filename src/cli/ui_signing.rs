//! `tollgate run --ui` refuses to start when the web view's own signing key is an approver's
//! (issue #44 item 9). The web view commits in its clone (`--ui-repo`) with that clone's git
//! configuration: when `user.signingKey` is a key the trusted keys name as an approver of some
//! gate, every approval pressed in the browser is signed as that approver, so whoever reaches
//! the page approves in their name. Checked once at start, before anything is served, against the
//! RolloutPolicies of the tracked branch in the clone (and in the tracked repository when it is a
//! local directory too); without `--trusted-keys` no key maps to a principal and nothing matches.

use std::path::Path;

use anyhow::Context as _;
use tollgate_source::sign::{Signing, SigningFormat};
use tollgate_source::signer_principals::{SignerIdentity, signer_identities};
use tollgate_source::{GitSource, PolicySet, SourceConfig};

/// What the check reads.
pub struct WebSigner<'a> {
    /// The web view's clone (`--ui-repo`), whose signing configuration counts.
    pub ui_repo: &'a Path,
    /// The tracked repository (`--repo`): its policies are read too when it is a local directory.
    pub tracked: &'a str,
    pub branch: &'a str,
    pub path: &'a str,
    /// `--trusted-keys`.
    pub trusted_keys: Option<&'a Path>,
}

/// One approver the web view's key signs as.
struct Conflict {
    principal: String,
    key: String,
    stage: String,
    policy: String,
    file: String,
}

/// Fails, naming the key, the principal, the policy and the stage, when the web view's clone
/// signs as an approver.
pub fn refuse_approver_key(check: &WebSigner<'_>) -> anyhow::Result<()> {
    let Some(keys) = check.trusted_keys else {
        return Ok(());
    };
    let repo = git2::Repository::open(check.ui_repo)
        .with_context(|| format!("opening --ui-repo {}", check.ui_repo.display()))?;
    // Without an identity the web view commits nothing; openpgp's default key is the committer.
    let committer = repo
        .signature()
        .map(|s| {
            format!(
                "{} <{}>",
                s.name().unwrap_or_default(),
                s.email().unwrap_or_default()
            )
        })
        .unwrap_or_default();
    let Some(signing) = Signing::from_config(&repo, &committer).with_context(|| {
        format!(
            "reading the signing configuration of {}",
            check.ui_repo.display()
        )
    })?
    else {
        return Ok(());
    };
    let identities = signer_identities(&signing, keys).with_context(|| {
        format!(
            "matching the web view's signing key against {}",
            keys.display()
        )
    })?;
    if identities.is_empty() {
        return Ok(());
    }
    let conflicts = conflicts(&policy_sets(check)?, &identities);
    match conflicts.first() {
        None => Ok(()),
        Some(first) => anyhow::bail!("{}", refusal(check, &signing, keys, first)),
    }
}

/// Every approver of every gate of `sets` that one of `identities` signs as.
fn conflicts(sets: &[PolicySet], identities: &[SignerIdentity]) -> Vec<Conflict> {
    let mut found = Vec::new();
    for (policy, file) in sets.iter().flat_map(PolicySet::policies) {
        for (stage, approval) in &policy.spec.approvals {
            let signed_as = identities
                .iter()
                .flat_map(|id| id.principals.iter().map(move |p| (p, &id.key)));
            for (principal, key) in signed_as.filter(|(p, _)| approval.lists(p)) {
                found.push(Conflict {
                    principal: principal.clone(),
                    key: key.clone(),
                    stage: stage.clone(),
                    policy: policy.name().to_string(),
                    file: file.to_string(),
                });
            }
        }
    }
    found
}

/// The policies at the tip of the tracked branch, in the clone and in a local tracked repository.
fn policy_sets(check: &WebSigner<'_>) -> anyhow::Result<Vec<PolicySet>> {
    let mut dirs = vec![check.ui_repo.to_path_buf()];
    let tracked = Path::new(check.tracked);
    if tracked.is_dir() && tracked.canonicalize().ok() != check.ui_repo.canonicalize().ok() {
        dirs.push(tracked.to_path_buf());
    }
    let mut sets = Vec::new();
    for dir in dirs {
        let config = SourceConfig::new(
            dir.to_string_lossy(),
            check.branch,
            check.path,
            std::env::temp_dir(),
        );
        let mut source = GitSource::open(config)
            .with_context(|| format!("reading the RolloutPolicies of {}", dir.display()))?;
        source
            .sync()
            .with_context(|| format!("reading the RolloutPolicies of {}", dir.display()))?;
        sets.push(source.policies());
    }
    Ok(sets)
}

fn refusal(check: &WebSigner<'_>, signing: &Signing, keys: &Path, c: &Conflict) -> String {
    let format = match signing.format {
        SigningFormat::Ssh => "SSH",
        SigningFormat::OpenPgp => "OpenPGP",
    };
    format!(
        "refusing to serve the web view: its repository {} signs commits with the {format} key \
         {} (git config user.signingKey {}), which the trusted keys ({}) name {}, an approver of \
         stage {} in RolloutPolicy {} ({}). Every approval pressed in the web view would be \
         signed as {}, whoever pressed it. Give the web view's repository a signing key that no \
         policy lists as an approver (or none), or take {} out of the approvers.",
        check.ui_repo.display(),
        c.key,
        signing.key,
        keys.display(),
        c.principal,
        c.stage,
        c.policy,
        c.file,
        c.principal,
        c.principal
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_fixtures::TestRepo;
    use tollgate_fixtures::signing::{Signer, SshSigner, have_tool};

    const APPROVERS: &str = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: gates\nspec:\n  approvals:\n    prod:\n      approvers: [alice@example.com]\n";

    fn repo_with(files: &[(&str, &str)]) -> TestRepo {
        let repo = TestRepo::new();
        for (name, text) in files {
            repo.write(name, text);
        }
        repo.commit("files");
        repo
    }

    #[test]
    fn the_tracked_repository_policies_count_when_it_is_another_local_directory() {
        if !have_tool("ssh-keygen", "openssh-client") {
            return;
        }
        let alice = SshSigner::new("alice");
        let keys = tempfile::tempdir().expect("keys");
        alice.trust_in(keys.path());
        // The clone has no policy yet; the tracked repository has one listing alice.
        let clone = repo_with(&[("README", "clone")]);
        alice.configure(&clone);
        let tracked = repo_with(&[("policy.yaml", APPROVERS)]);
        let tracked_dir = tracked.path().display().to_string();
        fn check<'a>(clone: &'a Path, tracked: &'a str, keys: Option<&'a Path>) -> WebSigner<'a> {
            WebSigner {
                ui_repo: clone,
                tracked,
                branch: "main",
                path: "",
                trusted_keys: keys,
            }
        }
        let refused = refuse_approver_key(&check(clone.path(), &tracked_dir, Some(keys.path())))
            .expect_err("alice signs for the web view");
        let message = refused.to_string();
        assert!(
            message.contains("alice@example.com") && message.contains("RolloutPolicy gates"),
            "{message}"
        );
        assert!(message.contains("SHA256:"), "the key is named: {message}");
        // A remote URL is not read here (the clone stands for it); no keys, no principal.
        refuse_approver_key(&check(
            clone.path(),
            "https://git.example/fleet.git",
            Some(keys.path()),
        ))
        .expect("only the clone's policies, none listing alice");
        refuse_approver_key(&check(clone.path(), &tracked_dir, None)).expect("no trusted keys");
    }
}

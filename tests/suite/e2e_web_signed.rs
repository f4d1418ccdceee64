//! Web approvals under an approval policy with `requireSignature` (issue #44 item 9): a web
//! approval is the server's commit, signed by the server's key or not at all, so it can never be
//! an approver's own signature. The page shows the signed command each approver runs instead of
//! a button that cannot count, a forged approve POST is refused, and `tollgate run --ui` refuses
//! to start when its own signing key is an approver's.

use crate::support;

use support::web_attack::{FORM, branches, request};
use support::web_page::serve_in_process;
use support::{TestRepo, World, fleet_yaml};
use tollgate_fixtures::{promotion, stage};

const SIGNED_GATE: &str = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: gates\nspec:\n  approvals:\n    prod:\n      approvers: [alice@example.com]\n      requireSignature: true\n";

fn gated() -> String {
    promotion("web")
        .chart("web", "1.0.0")
        .stage(stage("dev").selector("env", "dev").auto())
        .stage(stage("prod").selector("env", "prod").manual())
        .to_yaml()
}

fn gated_repo() -> TestRepo {
    let repo = TestRepo::new();
    repo.write("web.yaml", &gated());
    repo.write("policy.yaml", SIGNED_GATE);
    repo.commit("web, its prod gate wanting alice's signature");
    repo
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_require_signature_the_page_shows_the_signed_command_and_refuses_an_approve() {
    let world = World::start(gated_repo(), &fleet_yaml(1, "50ms")).await;
    world
        .eventually("prod to await approval", || async {
            let status = world.status("web").await?;
            let prod = status["stages"]
                .as_array()?
                .iter()
                .find(|s| s["name"] == "prod")?
                .clone();
            (prod["activity"]["kind"] == "AwaitingApproval").then_some(())
        })
        .await;
    let addr = serve_in_process(&world, None).await.to_string();
    let (page, forged) = tokio::task::spawn_blocking(move || {
        let page = request(&addr, &addr, "GET", "/ui/promotions/web", &[], b"");
        let origin = format!("http://{addr}");
        let headers = [("Origin", origin.as_str()), FORM];
        let body = b"action=approve&stage=prod";
        let path = "/ui/promotions/web/actions";
        (page, request(&addr, &addr, "POST", path, &headers, body))
    })
    .await
    .expect("requests");
    let page = page.expect("the page");
    assert_eq!(page.status, 200);
    assert!(
        !page.body.contains("data-action=\"approve\""),
        "an Approve button that cannot count: {}",
        page.body
    );
    assert!(
        page.body.contains("tollgate approve web prod"),
        "the command each approver runs: {}",
        page.body
    );
    assert!(
        page.body.contains("your own key"),
        "the note on signing: {}",
        page.body
    );

    let forged = forged.expect("an answer");
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert!(
        forged.body.contains("requireSignature")
            && forged.body.contains("tollgate approve web prod"),
        "the refusal says why and what to run: {}",
        forged.body
    );
    assert_eq!(
        branches(&world.repo.path().join(".git")),
        ["main"],
        "the refused approval committed something"
    );
}

#[cfg(feature = "embedded")]
mod startup {
    use super::*;
    use support::web_attack::UiRun;
    use tollgate_fixtures::signing::{Signer, SshSigner, have_tool};

    /// The gated repository, its web view's clone signing with `signer`'s key, and a
    /// trusted-keys directory holding alice's and bob's keys.
    fn signing_as(
        signer: &SshSigner,
        alice: &SshSigner,
        bob: &SshSigner,
    ) -> (TestRepo, tempfile::TempDir) {
        let repo = gated_repo();
        signer.configure(&repo);
        let keys = tempfile::tempdir().expect("keys dir");
        alice.trust_in(keys.path());
        bob.trust_in(keys.path());
        (repo, keys)
    }

    #[test]
    fn run_ui_refuses_to_start_when_its_signing_key_is_an_approver() {
        if !have_tool("ssh-keygen", "openssh-client") {
            return;
        }
        let (alice, bob) = (SshSigner::new("alice"), SshSigner::new("bob"));
        let (repo, keys) = signing_as(&alice, &alice, &bob);
        let trusted = ["--trusted-keys", keys.path().to_str().expect("utf-8")];
        let mut refused = UiRun::spawn(repo.path(), &trusted);
        let exit = refused.wait_exit();
        assert_eq!(exit.code(), Some(2), "it started: {}", refused.log());
        let log = refused.log();
        for part in [
            "alice@example.com",
            "gates",
            "prod",
            "user.signingKey",
            "SHA256:",
        ] {
            assert!(log.contains(part), "the refusal names {part}: {log}");
        }
        assert!(!log.contains("serving /healthz"), "it served first: {log}");

        // bob signs for the web view: not an approver, it starts.
        let (repo, keys) = signing_as(&bob, &alice, &bob);
        let trusted = ["--trusted-keys", keys.path().to_str().expect("utf-8")];
        let started = UiRun::spawn(repo.path(), &trusted);
        started.addr();
        // alice's key without trusted keys: nothing maps it to a principal, it starts.
        let (repo, _keys) = signing_as(&alice, &alice, &bob);
        let untrusted = UiRun::spawn(repo.path(), &[]);
        untrusted.addr();
    }
}

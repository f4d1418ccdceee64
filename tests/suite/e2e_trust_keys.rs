//! End to end: the trusted-keys directory is watched (issue #44, docs/trust.md#trusted-keys). A
//! key added to it lets a refused commit roll out, and removing the key refuses that commit
//! again, with no git change and no poke: these controllers poll git once an hour, so only the
//! watch can see the change. Once in a plain directory, once in a directory laid out as a
//! mounted Kubernetes Secret, which changes by swapping its `..data` symlink.

use crate::e2e_trust::{chart_version, tools, verifying, wait_refused, wait_run_of, web};
use crate::support;

use std::path::Path;
use std::time::Duration;

use support::{TestRepo, World, fleet_yaml};
use tollgate::cluster::leader::LeaderGate;
use tollgate::controller;
use tollgate_fixtures::signing::{GpgSigner, Signer, SshSigner};
use tollgate_fixtures::volume::SecretVolume;
use tollgate_source::VerifyCommits;

/// A controller under `--verify-commits Head --trusted-keys keys` that polls git once an hour:
/// a sync within the test's patience comes from a watch (the repository's or the keys').
async fn start_polling_hourly(repo: TestRepo, keys: &Path) -> World {
    let mut world = World::without_controller(repo, &fleet_yaml(1, "50ms")).await;
    world.trust = verifying(VerifyCommits::Head, keys);
    let mut config = world.controller_config();
    config.poll_interval = Duration::from_secs(3600);
    let started = controller::start(world.client.clone(), config, LeaderGate::always())
        .await
        .expect("controller starts");
    world.controller = Some(started);
    world
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_added_to_the_directory_rolls_a_refused_commit_out_and_removing_it_refuses_it() {
    if !tools() {
        return;
    }
    let (alice, bob) = (SshSigner::new("alice"), SshSigner::new("bob"));
    let keys = tempfile::tempdir().expect("temp dir");
    alice.trust_in(keys.path());
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    let by_alice = repo.commit_signed(&alice, "web 1.0.0, by alice");
    let world = start_polling_hourly(repo, keys.path()).await;
    wait_run_of(&world, "web", &by_alice).await;

    world.repo.write("web.yaml", &web("2.0.0"));
    let by_bob = world.repo.commit_signed(&bob, "web 2.0.0, by bob");
    wait_refused(&world, "web", &by_bob, "unknown key").await;

    bob.trust_in(keys.path());
    wait_run_of(&world, "web", &by_bob).await;
    assert_eq!(
        chart_version(&world, "web-production").await.as_deref(),
        Some("2.0.0")
    );

    std::fs::remove_file(keys.path().join("bob.sshpub")).expect("remove bob's key");
    wait_refused(&world, "web", &by_bob, "unknown key").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_mounted_from_a_kubernetes_secret_are_seen_when_its_data_link_is_swapped() {
    if !tools() {
        return;
    }
    let (alice, gerda) = (SshSigner::new("alice"), GpgSigner::new("gerda"));
    let alice_line = alice.allowed_signer(alice.email()) + "\n";
    let gerda_key = gerda.armored();
    let keys = tempfile::tempdir().expect("temp dir");
    let mut volume = SecretVolume::new(keys.path(), &[("alice.sshpub", &alice_line)]);
    let repo = TestRepo::new();
    repo.write("web.yaml", &web("1.0.0"));
    let by_alice = repo.commit_signed(&alice, "web 1.0.0, by alice");
    let world = start_polling_hourly(repo, keys.path()).await;
    wait_run_of(&world, "web", &by_alice).await;

    world.repo.write("web.yaml", &web("2.0.0"));
    let by_gerda = world.repo.commit_signed(&gerda, "web 2.0.0, by gerda");
    wait_refused(&world, "web", &by_gerda, "unknown key").await;

    volume.update(&[("alice.sshpub", &alice_line), ("gerda.asc", &gerda_key)]);
    wait_run_of(&world, "web", &by_gerda).await;
    assert_eq!(
        chart_version(&world, "web-production").await.as_deref(),
        Some("2.0.0")
    );

    volume.update(&[("alice.sshpub", &alice_line)]);
    wait_refused(&world, "web", &by_gerda, "unknown key").await;
}

//! `tollgate plan`'s estimate measured against real runs (issue #47): a controller rolls out a
//! promotion again and again on a fleet whose provisioning latencies vary from run to run; before
//! each measured run, `plan -o json --kubeconfig` estimates it from the run history the
//! GitPromotion keeps, and the run's real duration is compared with the p50–p90 range. The old
//! estimate (one minute per provisioning, what a plan without the cluster still assumes) is
//! measured beside it.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

use crate::support::{TestRepo, World, seed, tollgate_binary};

const PROMOTION: &str = "kyverno-rollout-auto";
const ENVS: [(&str, u64); 3] = [("dev", 300), ("staging", 500), ("prod", 800)];
/// Runs recorded before the first estimate, then runs estimated and measured.
const WARM_UP: usize = 5;
const MEASURED: usize = 10;

/// A deterministic stream of numbers in [0, 1): the same latencies on every run of the test.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// This run's latencies: each environment's base, up to 60 % slower.
fn vary_latencies(world: &World, random: &mut Lcg) {
    for (env, base) in ENVS {
        let latency = Duration::from_millis((base as f64 * (1.0 + 0.6 * random.next())) as u64);
        for i in 1..=2 {
            world
                .emulator
                .set_latency(&format!("fleet/{env}-{i}"), latency)
                .expect("cluster");
        }
    }
}

fn manifest(version: usize) -> String {
    seed("05-kyverno-rollout-auto-v1.yaml", "1s").replace(
        "chartVersion:     3.5.2",
        &format!("chartVersion:     3.5.{version}"),
    )
}

/// `plan --from main --to next -o json` (with the cluster when `kubeconfig`): the estimate's
/// (p50, p90) ends as durations from `now`.
fn planned(repo: &TestRepo, kubeconfig: Option<&std::path::Path>) -> (f64, f64) {
    let now = Utc::now();
    let mut command = tollgate_binary();
    command
        .args([
            "plan", "--from", "main", "--to", "next", "-o", "json", "--repo",
        ])
        .arg(repo.path())
        .args(["--now", &now.to_rfc3339_opts(SecondsFormat::Millis, true)]);
    if let Some(kubeconfig) = kubeconfig {
        command.arg("--kubeconfig").arg(kubeconfig);
    }
    let output = command.output().expect("tollgate plan");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("json");
    let estimate = &report["promotions"][0]["estimate"];
    let end = |key: &str| {
        let at: DateTime<Utc> = serde_json::from_value(estimate[key].clone()).expect(key);
        (at - now).num_milliseconds() as f64 / 1000.0
    };
    (end("endP50"), end("endP90"))
}

/// The real duration of the run of the newest snapshot, once it completed.
async fn real_duration(world: &World, version: usize) -> f64 {
    world
        .eventually("the run completes", || async {
            let status = world.status(PROMOTION).await?;
            let run = status["runs"].as_array()?.last()?.clone();
            let chart = format!("3.5.{version}");
            let applied = world.profile(&format!("{PROMOTION}-production")).await?;
            (applied.data.pointer("/spec/helmCharts/0/chartVersion")? == chart.as_str()
                && run["outcome"] == "Completed")
                .then_some(())?;
            let at = |key: &str| serde_json::from_value::<DateTime<Utc>>(run[key].clone()).ok();
            Some((at("endedAt")? - at("startedAt")?).num_milliseconds() as f64 / 1000.0)
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_duration_falls_in_the_estimated_range() {
    let repo = TestRepo::new();
    repo.write("promotions/kyverno.yaml", &manifest(0));
    repo.commit("kyverno 3.5.0");
    let fleet = tollgate_fixtures::fleet_of_envs(&ENVS.map(|(env, _)| env), 2, "300ms").to_yaml();
    let mut random = Lcg(47);
    let world = World::start(repo, &fleet).await;
    let kubeconfig = world.kubeconfig();
    real_duration(&world, 0).await;
    let (mut inside, mut rows, mut measured) = (0, Vec::new(), Vec::new());
    for version in 1..=WARM_UP + MEASURED {
        vary_latencies(&world, &mut random);
        world.repo.git(&["checkout", "-q", "-b", "next"]);
        world
            .repo
            .write("promotions/kyverno.yaml", &manifest(version));
        world.repo.commit(&format!("kyverno 3.5.{version}"));
        world.repo.git(&["checkout", "-q", "main"]);
        // The controller and the emulator run on this runtime: the plan blocks only this thread.
        let estimates = (version > WARM_UP).then(|| {
            tokio::task::block_in_place(|| {
                (
                    planned(&world.repo, Some(&kubeconfig)),
                    planned(&world.repo, None),
                )
            })
        });
        world.repo.git(&["merge", "-q", "--ff-only", "next"]);
        world.repo.git(&["branch", "-q", "-D", "next"]);
        world.poke();
        let real = real_duration(&world, version).await;
        if let Some(((p50, p90), (old, _))) = estimates {
            inside += usize::from(p50 <= real && real <= p90);
            measured.push((real, p50, p90));
            rows.push(format!(
                "real {real:6.2}s  p50 {p50:6.2}s  p90 {p90:6.2}s  old {old:6.2}s  p50 error {:+5.1} %",
                (p50 - real) / real * 100.0
            ));
        }
    }
    let table = rows.join("\n");
    eprintln!("estimate vs real, {inside} of {MEASURED} inside p50–p90:\n{table}");
    // Measured here (docs/cli.md): 5 of 10 inside, the rest within 0.25 s (6.5 %) of the range;
    // the old guess said 183 s for about 5 s. A median as the range's low end leaves about half
    // the runs below it, so the bound asserted is the error, with room for a loaded machine.
    for ((real, p50, p90), row) in measured.iter().zip(&rows) {
        assert!(
            *real >= p50 * 0.75 && *real <= p90 * 1.25,
            "{row}: more than 25 % outside the range\n{table}"
        );
    }
}

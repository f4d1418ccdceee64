//! `tollgate plan`'s estimate measured against real runs (issue #47): a controller rolls out a
//! promotion again and again on a fleet whose provisioning latencies vary from run to run; before
//! each measured run, `plan -o json --kubeconfig` estimates it from the run history the
//! GitPromotion keeps, and the run's real duration is compared with the p10–p90 range (meant to
//! hold it) and the p50–p90 range (the typical run to a slow one, which holds about half of the
//! runs by construction: half of them end before the median). The old estimate (one minute per
//! provisioning, what a plan without the cluster still assumes) is measured beside it.

use std::path::Path;
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

/// `plan --from main --to next -o FORMAT --now NOW` (with the cluster when `kubeconfig`): stdout.
/// Text is as wide as no line reaches, one line per detail.
fn plan_output(
    repo: &TestRepo,
    format: &str,
    kubeconfig: Option<&Path>,
    now: DateTime<Utc>,
) -> String {
    let mut command = tollgate_binary();
    command
        .args(["plan", "--from", "main", "--to", "next", "-o", format])
        .arg("--repo")
        .arg(repo.path())
        .args(["--now", &now.to_rfc3339_opts(SecondsFormat::Millis, true)])
        .env("COLUMNS", "1000");
    if let Some(kubeconfig) = kubeconfig {
        command.arg("--kubeconfig").arg(kubeconfig);
    }
    let output = command.output().expect("tollgate plan");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8")
}

/// The estimate's (p10, p50, p90) ends as seconds from `now`.
struct Planned {
    p10: f64,
    p50: f64,
    p90: f64,
}

/// `plan -o json` (with the cluster when `kubeconfig`): the estimate's ends from now.
fn planned(repo: &TestRepo, kubeconfig: Option<&Path>) -> Planned {
    let now = Utc::now();
    let report: Value =
        serde_json::from_str(&plan_output(repo, "json", kubeconfig, now)).expect("json");
    let estimate = &report["promotions"][0]["estimate"];
    let end = |key: &str| {
        let at: DateTime<Utc> = serde_json::from_value(estimate[key].clone()).expect(key);
        (at - now).num_milliseconds() as f64 / 1000.0
    };
    Planned {
        p10: end("endP10"),
        p50: end("endP50"),
        p90: end("endP90"),
    }
}

/// `1m5s`, `59s`: whole seconds as the plan prints them (under an hour).
fn go_seconds(seconds: i64) -> String {
    match seconds {
        0..60 => format!("{seconds}s"),
        _ => format!("{}m{}s", seconds / 60, seconds % 60),
    }
}

/// The JSON estimate of one plan at one `now`, and the `estimate` row of its text, once checked
/// to be the row of Markdown and to carry the JSON's figures: the typical duration and its end,
/// the p10–p90 range when the figures differ, and the basis.
fn estimate_in_every_output(repo: &TestRepo, kubeconfig: &Path) -> (String, Value) {
    let now = Utc::now();
    let row = |format: &str, prefix: &str, suffix: &str| {
        let out = plan_output(repo, format, Some(kubeconfig), now);
        (out.lines())
            .find_map(|l| {
                l.strip_prefix(prefix)?
                    .strip_suffix(suffix)
                    .map(str::to_string)
            })
            .unwrap_or_else(|| panic!("no estimate in {out}"))
    };
    let text = row("text", "  estimate         ", "");
    assert_eq!(text, row("markdown", "| estimate | ", " |"));
    let json: Value =
        serde_json::from_str(&plan_output(repo, "json", Some(kubeconfig), now)).expect("json");
    let estimate = json["promotions"][0]["estimate"].clone();
    let whole = |key: &str| {
        let seconds = estimate[key].as_i64();
        go_seconds(seconds.unwrap_or_else(|| panic!("{key}: {estimate}")))
    };
    let end: DateTime<Utc> = serde_json::from_value(estimate["endP50"].clone()).expect("endP50");
    let ends = end.format("%Y-%m-%d %H:%M:%S UTC");
    let (p10, p50, p90) = (
        whole("p10Seconds"),
        whole("p50Seconds"),
        whole("p90Seconds"),
    );
    let head = match p10 == p90 {
        true => format!("{p50}, ends {ends} ("),
        false => format!("{p50} typical, {p10}–{p90} (p10–p90); ends {ends}, "),
    };
    let basis = estimate["basis"].as_str().expect("basis");
    assert!(
        text.starts_with(&head) && text.ends_with(&format!(" ({basis})")),
        "{text}\n{estimate}"
    );
    (text, estimate)
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

/// `next` gets `content` in a commit of its own; main stays where it is until [`merge_next`].
fn prepare_next(repo: &TestRepo, content: &str, message: &str) {
    repo.git(&["checkout", "-q", "-b", "next"]);
    repo.write("promotions/kyverno.yaml", content);
    repo.commit(message);
    repo.git(&["checkout", "-q", "main"]);
}

/// Main takes `next`, and the controller is told.
fn merge_next(world: &World) {
    world.repo.git(&["merge", "-q", "--ff-only", "next"]);
    world.repo.git(&["branch", "-q", "-D", "next"]);
    world.poke();
}

/// A measured run: its real duration, the estimate from the history and the old guess (s).
struct Measured {
    real: f64,
    planned: Planned,
    old: f64,
}

impl Measured {
    fn in_p10_p90(&self) -> bool {
        self.planned.p10 <= self.real && self.real <= self.planned.p90
    }

    fn in_p50_p90(&self) -> bool {
        self.planned.p50 <= self.real && self.real <= self.planned.p90
    }

    /// How far the typical estimate (p50) is from the real duration, in % of it.
    fn p50_error(&self) -> f64 {
        (self.planned.p50 - self.real) / self.real * 100.0
    }

    fn row(&self) -> String {
        let Planned { p10, p50, p90 } = self.planned;
        format!(
            "real {:6.2}s  p10 {p10:6.2}s  p50 {p50:6.2}s  p90 {p90:6.2}s  old {:6.2}s  p50 error {:+5.1} %",
            self.real,
            self.old,
            self.p50_error()
        )
    }
}

/// The coverages and the median error, in a line.
fn summary(measured: &[Measured]) -> String {
    let count = |inside: fn(&Measured) -> bool| measured.iter().filter(|m| inside(m)).count();
    let mut errors: Vec<f64> = measured.iter().map(|m| m.p50_error().abs()).collect();
    errors.sort_by(f64::total_cmp);
    let median = (errors[(errors.len() - 1) / 2] + errors[errors.len() / 2]) / 2.0;
    format!(
        "{} of {n} inside p10–p90, {} of {n} inside p50–p90, median |p50 error| {median:.1} %, largest {:.1} %",
        count(Measured::in_p10_p90),
        count(Measured::in_p50_p90),
        errors.last().copied().unwrap_or_default(),
        n = measured.len(),
    )
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
    let mut measured = Vec::new();
    for version in 1..=WARM_UP + MEASURED {
        vary_latencies(&world, &mut random);
        prepare_next(
            &world.repo,
            &manifest(version),
            &format!("kyverno 3.5.{version}"),
        );
        // The controller and the emulator run on this runtime: the plan blocks only this thread.
        let estimates = (version > WARM_UP).then(|| {
            tokio::task::block_in_place(|| {
                (
                    planned(&world.repo, Some(&kubeconfig)),
                    planned(&world.repo, None).p50,
                )
            })
        });
        merge_next(&world);
        let real = real_duration(&world, version).await;
        if let Some((planned, old)) = estimates {
            measured.push(Measured { real, planned, old });
        }
    }
    let table: Vec<String> = measured.iter().map(Measured::row).collect();
    let table = format!("{}\n{}", summary(&measured), table.join("\n"));
    eprintln!("estimate vs real:\n{table}");
    // Measured here (docs/cli.md), five runs of the test: 9, 8, 9, 8 and 8 of 10 inside p10–p90
    // (the misses 0.01–0.11 s above p90), 6, 5, 6, 5 and 5 of 10 inside p50–p90 (about half the
    // runs end before the median, by construction), the median |p50 error| 2.4–3.0 %, at most
    // 6.9 %; the old guess said 183 s for about 5 s. Asserted with room for a loaded machine:
    // p10–p90 holds 7 of 10, and no run is more than 25 % outside the typical-to-slow range.
    for (run, row) in measured.iter().zip(table.lines().skip(1)) {
        assert!(
            run.real >= run.planned.p50 * 0.75 && run.real <= run.planned.p90 * 1.25,
            "{row}: more than 25 % outside the range\n{table}"
        );
    }
    let in_range = measured.iter().filter(|m| m.in_p10_p90()).count();
    assert!(
        in_range >= 7,
        "p10–p90 holds {in_range} of {MEASURED}\n{table}"
    );
    // Text, Markdown and JSON carry the same figures: here from the 10 recorded runs.
    prepare_next(&world.repo, &manifest(99), "kyverno 3.5.99");
    let (_, json) =
        tokio::task::block_in_place(|| estimate_in_every_output(&world.repo, &kubeconfig));
    let basis = "p10, p50 and p90 of each stage's provisioning in 10 recorded runs";
    assert_eq!(json["basis"], basis, "{json}");
}

/// One recorded run: each stage has one provisioning, so its p10, p50 and p90 are the same and
/// the estimate is one value; a stage the change adds has no history and takes the assumed
/// minute. Every output says so, alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_recorded_run_is_one_value_and_a_new_stage_is_assumed() {
    let repo = TestRepo::new();
    repo.write("promotions/kyverno.yaml", &manifest(0));
    repo.commit("kyverno 3.5.0");
    let fleet = tollgate_fixtures::fleet_of_envs(&["dev", "staging", "prod", "qa"], 1, "300ms");
    let world = World::start(repo, &fleet.to_yaml()).await;
    let kubeconfig = world.kubeconfig();
    real_duration(&world, 0).await;
    let qa = "  - name: qa\n    clusterSelector:\n      matchLabels:\n        env: qa\n    trigger:\n      auto:\n        delay: 1s\n";
    prepare_next(&world.repo, &(manifest(1) + qa), "kyverno 3.5.1, and qa");
    let (text, json) =
        tokio::task::block_in_place(|| estimate_in_every_output(&world.repo, &kubeconfig));
    assert_eq!(json["runs"], 1, "{json}");
    assert_eq!(json["assumedStages"], serde_json::json!(["qa"]), "{json}");
    assert_eq!(json["p10Seconds"], json["p50Seconds"], "{json}");
    assert_eq!(json["p90Seconds"], json["p50Seconds"], "{json}");
    assert_eq!(json["endP10"], json["endP50"], "{json}");
    assert_eq!(json["endP90"], json["endP50"], "{json}");
    // Simulated: qa's assumed minute and four 1s soaks, besides the recorded provisionings.
    let seconds = json["p50Seconds"].as_i64().expect("p50Seconds");
    assert!(seconds >= 64, "{json}");
    let basis = "each stage's one provisioning in 1 recorded run: no range; assumed 1m0s per provisioning of qa (none recorded)";
    assert_eq!(json["basis"], basis, "{json}");
    assert!(!text.contains("p10–p90"), "{text}");
}

/// Waves: each wave's provisioning is a sample of its stage, so one recorded run of a waved
/// stage already gives a range: production's two waves, one fast cluster and one slow, are its
/// p10 (and p50, the lower of two by nearest rank) and its p90.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_run_of_a_waved_stage_gives_a_range() {
    let waves = "apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nmetadata:\n  name: waves\nspec:\n  stages:\n    production:\n      waves:\n        sortingLabelKey: order\n        size: 1\n        pause: 1s\n";
    let repo = TestRepo::new();
    repo.write("promotions/kyverno.yaml", &manifest(0));
    repo.write("promotions/policy.yaml", waves);
    repo.commit("kyverno 3.5.0, production in waves");
    let prod = |name: &str, order: &str, latency: &str| {
        tollgate_fixtures::cluster(name)
            .ns("fleet")
            .label("env", "prod")
            .label("order", order)
            .latency(latency)
    };
    let fleet = tollgate_fixtures::fleet_of_envs(&["dev", "staging"], 1, "300ms")
        .cluster(prod("prod-1", "1", "200ms"))
        .cluster(prod("prod-2", "2", "2s"));
    let world = World::start(repo, &fleet.to_yaml()).await;
    let kubeconfig = world.kubeconfig();
    real_duration(&world, 0).await;
    prepare_next(&world.repo, &manifest(1), "kyverno 3.5.1");
    let (_, json) =
        tokio::task::block_in_place(|| estimate_in_every_output(&world.repo, &kubeconfig));
    assert_eq!(json["runs"], 1, "{json}");
    assert_eq!(json["endP10"], json["endP50"], "{json}");
    let whole = |key: &str| {
        json[key]
            .as_i64()
            .unwrap_or_else(|| panic!("{key}: {json}"))
    };
    // Both simulated waves take the slow cluster's time at p90, the fast one's at p10.
    assert!(whole("p90Seconds") >= whole("p10Seconds") + 2, "{json}");
    let basis = "p10, p50 and p90 of each stage's provisioning in 1 recorded run";
    assert_eq!(json["basis"], basis, "{json}");
}

/// A failed run counts: its provisionings that ended (the failing stage's, until the failure
/// was seen) are samples, and it is one of the recorded runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_is_one_of_the_recorded_runs() {
    let repo = TestRepo::new();
    repo.write("promotions/kyverno.yaml", &manifest(0));
    let halt = tollgate_fixtures::policy("halt")
        .max_failures("0")
        .on_failure("Halt");
    repo.write("promotions/policy.yaml", &halt.to_yaml());
    repo.commit("kyverno 3.5.0, halting on a failure");
    let fleet = tollgate_fixtures::fleet_of_envs(&["dev", "staging", "prod"], 1, "300ms").failure(
        "3.5.1",
        &[("env", "staging")],
        "Helm",
        "values: bad",
    );
    let world = World::start(repo, &fleet.to_yaml()).await;
    let kubeconfig = world.kubeconfig();
    real_duration(&world, 0).await;
    prepare_next(&world.repo, &manifest(1), "kyverno 3.5.1");
    merge_next(&world);
    world
        .eventually("the run of 3.5.1 is recorded as failed", || async {
            let status = world.status(PROMOTION).await?;
            let runs = status["runs"].as_array()?;
            (runs.len() == 2 && runs[1]["outcome"] == "Failed").then_some(())
        })
        .await;
    prepare_next(&world.repo, &manifest(2), "kyverno 3.5.2");
    let (_, json) =
        tokio::task::block_in_place(|| estimate_in_every_output(&world.repo, &kubeconfig));
    assert_eq!(json["runs"], 2, "{json}");
    assert_eq!(json["assumedStages"], serde_json::json!([]), "{json}");
    let basis = "p10, p50 and p90 of each stage's provisioning in 2 recorded runs";
    assert_eq!(json["basis"], basis, "{json}");
}

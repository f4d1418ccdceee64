//! The burst (issue #49): `--burst N` promotions whose first stages all complete in the same
//! instant, timed from each promotion's last Sveltos status change to its next stage's apply.
//!
//! After the main measurement, the fleet's provisioning latency becomes an hour and one commit
//! bumps promotions 0..N to [`VERSION`]: their first stages are applied and stay `Provisioning`.
//! Once the API is quiet, the emulator finishes every provisioning feature at once
//! (`EmulatorHandle::finish_provisioning_now`). For each promotion, the latency runs from the
//! newest status write among its first stage's ClusterSummaries (after the release) to the first
//! apply of its second stage's profile carrying the version: both times from the emulator's
//! write log, one clock. The log is read only when the API is quiet (a scan holds the server's
//! lock; polling it during the burst slowed the very requests it timed).

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tollgate_emulator::EmulatorHandle;
use tollgate_emulator::write_log::LoggedWrite;

/// The chart version the burst's commit gives its promotions.
pub const VERSION: &str = "9.9.9";

/// The provisioning latency that holds the burst's first stages until the release.
pub const HOLD_MS: u64 = 3_600_000;

/// Write-log entries the emulator keeps per burst promotion: its first stage's apply, summaries
/// (spec and status writes) and promotion status, then the same for the second stage, with
/// room for Events.
pub const LOG_ENTRIES_PER_PROMOTION: usize = 100;

/// What the emulator child's write log says about the burst so far.
#[derive(Debug, Serialize, Deserialize)]
pub struct Progress {
    /// Promotions whose first stage carries the version.
    pub first_stages_applied: usize,
    /// Per promotion (in index order), the milliseconds from its last first-stage summary status
    /// write to its second stage's apply; `None` until every promotion's second stage is applied.
    pub latencies_ms: Option<Vec<f64>>,
}

/// The child's answer to `burst COUNT COMMITTED RELEASED` (times RFC 3339, `none` before the
/// release): one pass over the write log.
pub fn progress(
    emulator: &EmulatorHandle,
    count: usize,
    committed: DateTime<Utc>,
    released: Option<DateTime<Utc>>,
) -> Progress {
    let mut first_applied = vec![false; count];
    let mut last_status: Vec<Option<DateTime<Utc>>> = vec![None; count];
    let mut next_applied: Vec<Option<DateTime<Utc>>> = vec![None; count];
    emulator.scan_write_log(|write| {
        if write.time < committed {
            return;
        }
        if let Some((index, stage)) = tollgate_profile_write(write, count) {
            match stage {
                0 => first_applied[index] = true,
                1 if released.is_some() => {
                    next_applied[index].get_or_insert(write.time);
                }
                _ => {}
            }
        } else if let Some(index) = first_stage_summary_status(write, count)
            && released.is_some_and(|r| write.time >= r)
        {
            let last = &mut last_status[index];
            *last = Some(last.map_or(write.time, |t| t.max(write.time)));
        }
    });
    let latencies_ms = (0..count)
        .map(|i| Some(super::ms(next_applied[i]? - last_status[i]?)))
        .collect();
    Progress {
        first_stages_applied: first_applied.iter().filter(|a| **a).count(),
        latencies_ms,
    }
}

/// `(promotion, stage)` of a tollgate write of a burst promotion's profile at the version.
fn tollgate_profile_write(write: &LoggedWrite, count: usize) -> Option<(usize, usize)> {
    if write.field_manager != "tollgate"
        || !write.resource.starts_with("clusterprofiles.")
        || write.object["spec"]["helmCharts"][0]["chartVersion"] != VERSION
    {
        return None;
    }
    profile_index(write.object["metadata"]["name"].as_str()?, count)
}

/// The promotion of a status write of a first-stage ClusterSummary at the version.
fn first_stage_summary_status(write: &LoggedWrite, count: usize) -> Option<usize> {
    if !write.status_subresource
        || !write.resource.starts_with("clustersummaries.")
        || write.object["spec"]["clusterProfileSpec"]["helmCharts"][0]["chartVersion"] != VERSION
    {
        return None;
    }
    let profile =
        write.object["metadata"]["labels"]["projectsveltos.io/cluster-profile-name"].as_str()?;
    match profile_index(profile, count)? {
        (index, 0) => Some(index),
        _ => None,
    }
}

/// `p{index}-s{stage}` (the harness's profile names) → `(index, stage)`, for index < count.
fn profile_index(name: &str, count: usize) -> Option<(usize, usize)> {
    let (promotion, stage) = name.strip_prefix('p')?.split_once("-s")?;
    let index: usize = promotion.parse().ok()?;
    (index < count).then_some((index, stage.parse().ok()?))
}

/// Drives the burst from the harness: hold, commit, wait for the first stages, release, wait
/// for the second stages. Returns the report's `burst` object.
pub fn run(
    emulator: &mut super::EmulatorProcess,
    repo: &std::path::Path,
    args: &super::Args,
    count: usize,
) -> Value {
    emulator.ask(&format!("latency {HOLD_MS}"));
    for p in 0..count {
        std::fs::write(
            repo.join(format!("p{p}.yaml")),
            super::promotion(p, args.stages, args.shards, VERSION),
        )
        .expect("write promotion");
    }
    super::git(repo, &["add", "-A"]);
    let committed = Utc::now();
    super::git(repo, &["commit", "-q", "-m", "burst"]);
    let ask = |emulator: &mut super::EmulatorProcess, released: Option<DateTime<Utc>>| {
        let released = released.map_or("none".to_string(), |t| t.to_rfc3339());
        let answer = emulator.ask(&format!(
            "burst {count} {} {released}",
            committed.to_rfc3339()
        ));
        serde_json::from_str::<Progress>(&answer).expect("burst progress")
    };
    // The log is scanned under the emulator's lock: only once the API is quiet, so the scans
    // never stand between the controller and the server they are timing.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        super::settle(emulator, Duration::from_secs(2));
        if ask(emulator, None).first_stages_applied == count {
            break;
        }
        if Instant::now() > deadline {
            return json!({"error": "first stages not applied within 300 s"});
        }
    }
    let released: DateTime<Utc> = emulator.ask("release").parse().expect("release time");
    eprintln!("burst: {count} first stages released at {released}");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        super::settle(emulator, Duration::from_secs(1));
        if let Some(latencies) = ask(emulator, Some(released)).latencies_ms {
            return report(count, latencies);
        }
        if Instant::now() > deadline {
            return json!({"error": "second stages not applied within 120 s of the release"});
        }
    }
}

fn report(count: usize, mut latencies: Vec<f64>) -> Value {
    latencies.sort_by(f64::total_cmp);
    let at = |p: f64| latencies[((p * (latencies.len() - 1) as f64).round()) as usize];
    json!({
        "promotions": count,
        "status_change_to_next_stage_apply_ms": {
            "p50": at(0.5),
            "p99": at(0.99),
            "max": at(1.0),
        },
    })
}

/// The child's side of `release`: finishes every provisioning feature, answers the time.
pub fn release(emulator: &EmulatorHandle) -> String {
    let released = Utc::now();
    emulator.finish_provisioning_now();
    released.to_rfc3339()
}

/// Parses `burst COUNT COMMITTED RELEASED` on the child's side.
pub fn answer(emulator: &EmulatorHandle, count: &str, committed: &str, released: &str) -> String {
    let time = |t: &str| {
        DateTime::parse_from_rfc3339(t)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    };
    let (Ok(count), Some(committed)) = (count.parse::<usize>(), time(committed)) else {
        return "bad burst query".into();
    };
    let progress = progress(emulator, count, committed, time(released));
    serde_json::to_string(&progress).expect("json")
}

//! Load-independent companion of `parse_validate_hash`: runs parse + validate + hash of seed 04
//! a fixed number of times (first argument, default 20 000) and prints the process CPU time per
//! promotion, so the figure holds on a shared, loaded machine where wall-clock benches do not.
//! For cycles and instructions run it under `perf stat -e task-clock,cycles:u,instructions:u`.

use std::hint::black_box;
use std::time::Duration;

use tollgate_manifest::{Limits, SpecHashes, parse_file};

const SEED_04: &[u8] =
    include_bytes!("../../../../shared/fixtures/seeds/04-cert-manager-rollout-auto.yaml");

/// User + system CPU time of this process, from `/proc/self/stat` (clock ticks of 10 ms).
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn run(iterations: u32, limits: &Limits) -> usize {
    let mut valid = 0;
    for _ in 0..iterations {
        let parsed = parse_file("04.yaml", black_box(SEED_04), limits);
        let hashes = parsed.promotions[0].promotion.as_ref().map(SpecHashes::of);
        valid += usize::from(black_box(hashes).is_some());
    }
    valid
}

fn main() {
    let iterations: u32 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20_000);
    let limits = Limits {
        compile_lua: false,
        ..Limits::default()
    };
    run(iterations / 10 + 1, &limits);
    let (Some(before), wall) = (cpu_time(), std::time::Instant::now()) else {
        eprintln!("no /proc/self/stat: CPU time unavailable");
        return;
    };
    let valid = run(iterations, &limits);
    let wall = wall.elapsed();
    let Some(after) = cpu_time() else {
        return;
    };
    assert_eq!(valid, iterations as usize, "seed 04 must stay valid");
    let cpu = after.saturating_sub(before);
    let per = cpu.as_secs_f64() * 1e6 / f64::from(iterations);
    println!(
        "seed04 parse+validate+hash: {per:.1} µs CPU per promotion ({:.0}/s on one core); wall {:.1} µs; {iterations} iterations",
        1e6 / per,
        wall.as_secs_f64() * 1e6 / f64::from(iterations),
    );
}

//! Throughput of parse + validate + hash for a seed-04-sized promotion (Lua compile off), and the
//! cost of one `Window::state_at` call (engine hot path).

use std::hint::black_box;

use chrono::{DateTime, Utc};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tollgate_spec::model::TimeWindow;
use tollgate_spec::window::Window;
use tollgate_spec::{Limits, SpecHashes, parse_file};

const SEED_04: &[u8] =
    include_bytes!("../../../../shared/fixtures/seeds/04-cert-manager-rollout-auto.yaml");

fn parse_validate_hash(c: &mut Criterion) {
    let limits = Limits {
        compile_lua: false,
        ..Limits::default()
    };
    let mut group = c.benchmark_group("promotion");
    group.throughput(Throughput::Elements(1));
    group.bench_function("parse_validate_hash_seed04", |b| {
        b.iter(|| {
            let parsed = parse_file("04.yaml", black_box(SEED_04), &limits);
            let promotion = parsed.promotions[0].promotion.as_ref().map(SpecHashes::of);
            black_box(promotion)
        })
    });
    group.finish();
}

fn window_state_at(c: &mut Criterion) {
    let weekly = Window::parse(&TimeWindow {
        from: "0 10 * * 6".into(),
        to: "0 22 * * 0".into(),
    })
    .expect("valid window");
    let zoned = Window::parse(&TimeWindow {
        from: "CRON_TZ=Europe/Berlin 0 9 * * mon-fri".into(),
        to: "CRON_TZ=Europe/Berlin 0 17 * * mon-fri".into(),
    })
    .expect("valid window");
    let now: DateTime<Utc> = DateTime::from_timestamp(1_759_858_200, 0).expect("2025-10-07T17:30Z");
    c.bench_function("window_state_at_weekly_utc", |b| {
        b.iter(|| black_box(weekly.state_at(black_box(now))))
    });
    c.bench_function("window_state_at_weekdays_berlin", |b| {
        b.iter(|| black_box(zoned.state_at(black_box(now))))
    });
}

criterion_group!(benches, parse_validate_hash, window_state_at);
criterion_main!(benches);

//! Throughput of parse + validate + hash for a seed-04-sized promotion (Lua compile off), the
//! same work stage by stage, and the cost of one `Window::state_at` call (engine hot path).
//! `seed04_cpu_time` measures the first figure in CPU time, which holds on a loaded machine.

use std::hint::black_box;

use chrono::{DateTime, Utc};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tollgate_manifest::model::TimeWindow;
use tollgate_manifest::window::Window;
use tollgate_manifest::{Limits, SpecHashes, parse_file};

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

/// Seed 04 stage by stage. The fast YAML reader (the usual path) is private to the crate and
/// measured as part of `parse_file`; `yaml_spanned_tree` and `to_json_with_locations` are the
/// serde-saphyr path taken by files the fast reader leaves to it, and `granit_events_only` is
/// serde-saphyr's event stream alone. The schema and
/// `validate_document` stages include a `json_clone` (the real pipeline moves the document).
fn stages(c: &mut Criterion) {
    use serde_saphyr::Spanned;
    use tollgate_manifest::located::{self, Locations, Node};
    use tollgate_manifest::validate::{self, ValidationContext};
    let limits = Limits {
        compile_lua: false,
        ..Limits::default()
    };
    let text = std::str::from_utf8(SEED_04).expect("utf8");
    let mut group = c.benchmark_group("stages");
    group.warm_up_time(std::time::Duration::from_secs(1));
    group.measurement_time(std::time::Duration::from_secs(3));
    group.bench_function("granit_events_only", |b| {
        b.iter(|| {
            let mut options = serde_saphyr::granit_parser::Options::default();
            options.emit_comments = false;
            let parser = serde_saphyr::granit_parser::Parser::new_from_str_with_options(
                black_box(text),
                options,
            );
            let mut count = 0usize;
            for event in parser {
                let (event, _span) = event.expect("event");
                count += matches!(event, serde_saphyr::granit_parser::Event::Scalar(..)) as usize;
            }
            black_box(count)
        })
    });
    group.bench_function("yaml_spanned_tree", |b| {
        b.iter(|| {
            let docs: Vec<Spanned<Node>> =
                serde_saphyr::from_multiple(black_box(text)).expect("yaml");
            black_box(docs)
        })
    });
    let docs: Vec<Spanned<Node>> = serde_saphyr::from_multiple(text).expect("yaml");
    group.bench_function("to_json_with_locations", |b| {
        b.iter(|| {
            let mut locations = Locations::default();
            let mut problems = Vec::new();
            let json = located::to_json(black_box(&docs[0]), &mut locations, &mut problems);
            black_box((json, locations))
        })
    });
    let mut locations = Locations::default();
    let json = located::to_json(&docs[0], &mut locations, &mut Vec::new());
    group.bench_function("schema_validate_and_default", |b| {
        b.iter(|| {
            let mut doc = json.clone();
            let errors = tollgate_manifest::schema::cluster_promotion_schema()
                .validate_and_default(&mut doc);
            black_box((doc, errors))
        })
    });
    group.bench_function("json_clone", |b| b.iter(|| black_box(json.clone())));
    let mut defaulted = json.clone();
    tollgate_manifest::schema::cluster_promotion_schema().validate_and_default(&mut defaulted);
    let document_locations = tollgate_manifest::loc_tree::DocumentLocations::Map(locations.clone());
    let context = ValidationContext {
        source: text,
        locations: &document_locations,
        limits: &limits,
    };
    group.bench_function("rules_check_all", |b| {
        b.iter(|| {
            let mut findings = Vec::new();
            tollgate_manifest::rules::check_all(black_box(&defaulted), &context, &mut findings);
            black_box(findings)
        })
    });
    group.bench_function("validate_document", |b| {
        b.iter(|| black_box(validate::validate_document(json.clone(), &context)))
    });
    let parsed = parse_file("04.yaml", SEED_04, &limits);
    let promotion = parsed.promotions[0].promotion.clone().expect("valid");
    group.bench_function("spec_hashes", |b| {
        b.iter(|| black_box(SpecHashes::of(black_box(&promotion))))
    });
    group.finish();
}

criterion_group!(benches, parse_validate_hash, window_state_at, stages);
criterion_main!(benches);

//! What the eval does thousands of times per run, on the shipped `debug-loop` scenario.
//!
//! - `tokens/*`: exact o200k counting of every message of a session, cold (a new counter)
//!   and warm (every message already memoized, the common case inside a run);
//! - `generate`: building the seeded session;
//! - `request/*`: the default projection of the whole log, then lowering to each provider
//!   shape and validating it (done for every request of every run);
//! - `run/*`: one whole session through a strategy with the extractive summarizer, for a
//!   baseline and a few summarizing strategies.

use std::hint::black_box;
use std::path::Path;

use compactbench_core::request::{lower, validate};
use compactbench_core::{default_projection, Log, Shape};
use compactbench_eval::drive::{run, Env};
use compactbench_eval::generate::generate;
use compactbench_eval::scenario::Scenario;
use compactbench_summarize::Extractive;
use compactbench_tokens::{Encoding, TokenCounter};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};

fn scenario() -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/01-debug-loop.toml");
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn tokens(c: &mut Criterion) {
    let session = generate(&scenario(), 0);
    let messages: Vec<_> = session.steps.iter().map(|s| s.message().clone()).collect();
    let mut g = c.benchmark_group("tokens");
    g.sample_size(10);
    g.bench_function("cold", |b| {
        b.iter_batched(
            || TokenCounter::new(Encoding::O200kBase),
            |counter| messages.iter().map(|m| counter.count_message(m)).sum::<u64>(),
            BatchSize::LargeInput,
        )
    });
    let warm = TokenCounter::new(Encoding::O200kBase);
    let total: u64 = messages.iter().map(|m| warm.count_message(m)).sum();
    assert!(total > 0, "the session has content");
    g.bench_function("warm", |b| b.iter(|| messages.iter().map(|m| warm.count_message(m)).sum::<u64>()));
    g.finish();
}

fn generation(c: &mut Criterion) {
    let scenario = scenario();
    c.bench_function("generate", |b| b.iter(|| generate(black_box(&scenario), 0)));
}

fn request(c: &mut Criterion) {
    let session = generate(&scenario(), 0);
    let log = Log::from_messages(std::iter::once(session.system.clone()).chain(session.steps.iter().map(|s| s.message().clone())));
    let mut g = c.benchmark_group("request");
    g.bench_function("project", |b| b.iter(|| default_projection(black_box(&log))));
    let view = default_projection(&log);
    for shape in Shape::ALL {
        g.bench_function(format!("lower_validate/{}", shape.as_str()), |b| b.iter(|| validate(&lower(black_box(&view), shape)).len()));
    }
    g.finish();
}

fn runs(c: &mut Criterion) {
    let scenario = scenario();
    let session = generate(&scenario, 0);
    let counter = TokenCounter::new(Encoding::O200kBase);
    let summarizer = Extractive::new(TokenCounter::new(Encoding::O200kBase));
    let env = Env { counter: &counter, summarizer: &summarizer };
    let mut g = c.benchmark_group("run");
    g.sample_size(10);
    for strategy in compactbench_registry::all() {
        let id = strategy.info().id.clone();
        if !["none", "pi", "claude-code", "opencode-v1", "openhands"].contains(&id.as_str()) {
            continue;
        }
        g.bench_function(id, |b| b.iter(|| run(strategy.as_ref(), &scenario, &session, 0, &env, |_| {}).requests.len()));
    }
    g.finish();
}

criterion_group!(benches, tokens, generation, request, runs);
criterion_main!(benches);

//! Case counts and reporting shared by the fuzz targets of every crate (core, import, eval):
//! each includes this file as its `support` module with `#[path]`.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngSeed, TestRunner};

/// Inputs per target: `COMPACTBENCH_FUZZ_CASES` when set (the long mode), else `default`.
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("COMPACTBENCH_FUZZ_CASES").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

/// Runs `body` on `cases(default)` inputs drawn from `strategy`; a panic fails the test
/// with proptest's minimal failing input. The default run uses a fixed seed (the same
/// inputs every time); the long mode a random one unless `COMPACTBENCH_FUZZ_SEED` is set.
/// Prints `fuzz <name>: N inputs, P panics` (shown by `cargo xtask fuzz`).
pub(crate) fn fuzz<S>(name: &str, default: u32, strategy: S, body: impl Fn(S::Value))
where
    S: Strategy,
    S::Value: std::fmt::Debug,
{
    let long = std::env::var_os("COMPACTBENCH_FUZZ_CASES").is_some();
    let seed = std::env::var("COMPACTBENCH_FUZZ_SEED").ok().and_then(|v| v.trim().parse().ok());
    let rng_seed = match (seed, long) {
        (Some(s), _) => RngSeed::Fixed(s),
        (None, false) => RngSeed::Fixed(0x00c0_ffee),
        (None, true) => RngSeed::Random,
    };
    let config = Config { cases: cases(default), failure_persistence: None, rng_seed, ..Config::default() };
    let (inputs, panics) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let mut runner = TestRunner::new(config);
    let result = runner.run(&strategy, |value| {
        inputs.fetch_add(1, Ordering::Relaxed);
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| body(value))) {
            panics.fetch_add(1, Ordering::Relaxed);
            resume_unwind(p);
        }
        Ok(())
    });
    eprintln!("fuzz {name}: {} inputs, {} panics", inputs.into_inner(), panics.into_inner());
    if let Err(e) = result {
        panic!("fuzz {name}: {e}");
    }
}

//! Benchmarks only: see `benches/hot_paths.rs`, run with `cargo xtask bench`.
//!
//! Speed targets live here and in the eval's timing report, never in timed unit tests: the
//! machines are shared and noisy, and criterion's statistics are what tell a regression from
//! noise.

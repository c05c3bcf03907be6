//! Summarizers the runner injects into strategies.
//!
//! [`Extractive`] is the default: deterministic, offline, and blind to planted facts. It
//! stands in for a model so that strategy differences come from structure (what is kept,
//! pruned, offloaded, re-injected) and results are byte-identical across runs.
//!
//! Wrappers around any summarizer (the offline ones here, or a real model from
//! `compactbench-summarize-http`):
//! - [`ReplayCache`] records every answer as one JSON file per request and replays it, counting
//!   hits and misses; [`CacheMode::ReplayOnly`] re-runs a recorded run with no model at all.
//! - [`Faulty`] injects one [`FaultKind`] (timeout, HTTP 500, empty, over the cap, garbage)
//!   on the calls a [`Trigger`] selects, deterministically.

mod bounds;
mod cache;
mod extractive;
mod faults;
mod prompted;

pub use bounds::{Null, Oracle};
pub use cache::{cache_key, CacheMode, CacheStats, ReplayCache, DEFAULT_ROOT};
pub use extractive::{Extractive, MAX_LINE_CHARS, TARGET_TOKENS};
pub use faults::{FaultKind, Faulty, Trigger, MAX_OVER_CAP_TOKENS};
pub use prompted::{prompt, requested_sections, PromptFollowing, Section};

//! Summarizers the runner injects into strategies.
//!
//! [`Extractive`] is the default: deterministic, offline, and blind to planted facts. It
//! stands in for a model so that strategy differences come from structure (what is kept,
//! pruned, offloaded, re-injected) and results are byte-identical across runs.

mod bounds;
mod extractive;

pub use bounds::{Null, Oracle};
pub use extractive::{Extractive, MAX_LINE_CHARS, TARGET_TOKENS};

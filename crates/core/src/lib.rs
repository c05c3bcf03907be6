//! compactbench-core: the data model and the Strategy seam.
//!
//! Three representations (see ARCHITECTURE.md):
//! - [`Log`]: the append-only session history; compaction appends a [`Checkpoint`].
//! - [`View`]: the working conversation a [`Strategy`] projects from the log.
//! - [`request::Request`]: the view lowered to a provider shape and validated.
//!
//! No IO, no async: everything here is data and pure functions.
//!
//! # Strategy guidelines
//! Adding a strategy touches three places:
//! 1. a crate `crates/strategies/<name>` (package `compactbench-strategy-<name>`) exposing one
//!    public type `<Harness>Strategy` and `pub fn strategy() -> Box<dyn Strategy>`, with crate
//!    docs naming the original (repo@commit), its trigger, what it keeps, and every deviation;
//! 2. one line in `crates/registry/src/lib.rs` and one path dependency in its `Cargo.toml`;
//! 3. its spec in `shared/specs/` (section (j) cases become the crate's tests).
//!
//! `cargo xtask new-strategy <name>` scaffolds all three.
#![deny(missing_docs)]

mod checkpoint;
mod error;
pub mod estimate;
mod log;
mod message;
mod model;
pub mod request;
mod replay;
mod store;
mod strategy;
mod summarizer;
mod text_chat;
mod tokenizer;
pub mod tools;
mod view;

pub use checkpoint::{Checkpoint, CheckpointKind, Offload, Replacement, SummarizerUsage, SummaryPosition, Window};
pub use error::{Error, ErrorKind};
pub use log::{Entry, EntryId, Log};
pub use message::{Failure, Message, Part, Role, Usage};
pub use model::{ModelProfile, Pricing, Shape};
pub use replay::{DefaultView, Incremental, Plan, Replay, Reprojected, ViewState};
pub use store::VirtualStore;
pub use strategy::{Cx, Decision, Fidelity, Moment, Strategy, StrategyInfo};
pub use summarizer::{StopReason, Summarizer, Summary, SummaryContext, SummaryRequest};
pub use text_chat::{TextChat, TextEdit};
pub use tokenizer::{Encoding, Tokenizer};
pub use view::{default_projection, Origin, View, ViewMessage};

#[cfg(test)]
mod tests;

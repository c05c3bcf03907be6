//! Benchmarks: see `benches/hot_paths.rs` and `examples/tokenizers.rs`, run with `cargo xtask bench`.
//!
//! Speed targets live here and in the eval's timing report, never in timed unit tests: the
//! machines are shared and noisy, and criterion's statistics are what tell a regression from
//! noise.
//!
//! The library holds one helper, [`shipped_texts`]: every text the project ships for counting,
//! which the tokenizer comparison (`examples/tokenizers.rs`, `tests/tokenizers.rs`) counts with
//! both BPE implementations.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use compactbench_eval::generate::generate;
use compactbench_eval::scenario::load_dir;

/// Seeds of the default scenarios' sessions in [`shipped_texts`] (the eval's `--seeds 3`).
pub const SEEDS: u64 = 3;

/// Where a shipped text comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A message (its searchable text, as the runner counts it) of a default scenario's
    /// generated session (`scenarios/*.toml`, seeds `0..SEEDS`), system prompt included.
    Session,
    /// A message of a replay scenario's session (`scenarios/real/*.toml`: the recorded
    /// transcripts as imported).
    Replay,
    /// A whole file under `bench-data/` (transcripts, summary cache, READMEs), byte for byte.
    File,
}

/// A text to count, with where it comes from (`scenario#seed/step` or a file's path).
pub struct Text {
    pub origin: Origin,
    pub name: String,
    pub text: String,
}

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every shipped text, each distinct text once (first occurrence kept), in a fixed order:
/// default scenario sessions, replay sessions, then the files under `bench-data/`.
pub fn shipped_texts() -> Vec<Text> {
    let root = root();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut push = |origin, name: String, text: String| {
        if seen.insert(text.clone()) {
            out.push(Text { origin, name, text });
        }
    };
    for (origin, dir, seeds) in [(Origin::Session, root.join("scenarios"), SEEDS), (Origin::Replay, root.join("scenarios/real"), 1)] {
        let scenarios = load_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
        for scenario in &scenarios {
            for seed in 0..seeds {
                let session = generate(scenario, seed);
                push(origin, format!("{}#{seed}/system", scenario.name), session.system.searchable_text());
                for (i, step) in session.steps.iter().enumerate() {
                    push(origin, format!("{}#{seed}/{i}", scenario.name), step.message().searchable_text());
                }
            }
        }
    }
    let mut files = Vec::new();
    walk(&root.join("bench-data"), &mut files);
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = path.strip_prefix(&root).unwrap_or(&path).display().to_string();
        push(Origin::File, name, text);
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display())).path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

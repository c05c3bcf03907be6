//! What the binary's end-to-end tests share: running it, a scratch folder, a tiny scenario.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub(crate) fn compactbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_compactbench")).args(args).output().expect("the binary runs")
}

/// A fresh folder of its own under Cargo's scratch space for integration tests.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Three facts planted early in a tiny scenario (`[[facts]]` tables for [`tiny_scenarios`]).
#[allow(dead_code, reason = "each test binary compiles this module; not all of them plant these")]
pub(crate) const THREE_FACTS: &str = r#"
[[facts]]
kind = "error_message"
turn = 0
[[facts]]
kind = "decision"
turn = 1
[[facts]]
kind = "file_path"
turn = 3
"#;

/// A tiny scenario (small window, few turns), so a real eval of a few strategies takes a
/// moment. `facts` is appended as TOML (`[[facts]]` tables).
pub(crate) fn tiny_scenarios(dir: &Path, facts: &str) -> PathBuf {
    let scenarios = dir.join("scenarios");
    std::fs::create_dir_all(&scenarios).unwrap();
    let text = format!(
        r#"
name = "tiny"
description = "Small enough for a test."
[model]
name = "m"
window = 6000
max_output = 500
provider = "anthropic"
pricing = {{ input = 3.0, cached_input = 0.3, output = 15.0 }}
[session]
turns = 6
steps_per_turn = [2, 4]
{facts}"#
    );
    std::fs::write(scenarios.join("tiny.toml"), text).unwrap();
    scenarios
}

//! `compactbench eval` refuses arguments it cannot honour before running anything.

mod common;

use common::{compactbench, scratch, tiny_scenarios};

/// `--text-chat` for a strategy whose harness has no text chat shape is refused up front, with
/// the strategies that have one, rather than panicking in a worker.
#[test]
fn text_chat_for_a_strategy_without_one_is_refused() {
    let dir = scratch("eval-args-text-chat");
    let scenarios = tiny_scenarios(&dir, "");
    for (id, said) in [("pi", "pi declares no text chat shape of its own"), ("no-such", "unknown strategy")] {
        let out = compactbench(&[
            "eval",
            "--strategy",
            "pi",
            "--text-chat",
            id,
            "--scenarios",
            scenarios.to_str().unwrap(),
            "--out",
            dir.join("out").to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains(said) && stderr.contains("strategies") && stderr.contains("aider"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// A missing scenario folder (the default is relative to the repository root) is named, with
/// the way out, rather than reported as an OS error of a listing.
#[test]
fn a_missing_scenario_folder_is_named_with_the_flag_to_pass() {
    let dir = scratch("eval-args-no-scenarios");
    let missing = dir.join("nowhere");
    let out = compactbench(&["eval", "--scenarios", missing.to_str().unwrap(), "--out", dir.join("out").to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("no scenario folder at {}", missing.display())) && stderr.contains("--scenarios DIR"), "{stderr}");
}

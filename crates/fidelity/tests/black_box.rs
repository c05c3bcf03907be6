//! A fast subset of the black-box check: two sessions through each installed harness CLI,
//! against the scripted model server on 127.0.0.1; every difference must be in
//! `fidelity/black-box.toml`. CLIs not installed (`cargo xtask fidelity --setup` was not run)
//! are skipped with a message; the full run is `cargo xtask fidelity --black-box`.

mod common;

use std::time::Duration;

use compactbench_eval::scenario::load_dir;
use compactbench_fidelity::blackbox::{check, report::load_reviewed, Options};
use compactbench_fidelity::HARNESSES;
use compactbench_tokens::{Encoding, TokenCounter};

#[test]
fn installed_harness_clis_agree_on_two_sessions() {
    let root = common::root();
    let installs = root.join("target/fidelity");
    let scenarios: Vec<_> = load_dir(&root.join("scenarios")).unwrap().into_iter().filter(|s| s.name == "giant-outputs" || s.name == "stale-values").collect();
    let reviewed = load_reviewed(&root).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let options = Options { installs: installs.clone(), scenarios: &scenarios, sessions: 2, scratch: scratch.path().to_path_buf(), timeout: Duration::from_secs(180), jobs: 1, recorded: false };
    for h in HARNESSES.iter().filter(|h| matches!(h.strategy, "claude-code" | "opencode-v1" | "gemini-cli")) {
        if !common::harness_installed(&root, h) {
            continue;
        }
        let report = check(h, &options, &TokenCounter::new(Encoding::O200kBase), &|line| eprintln!("{line}")).unwrap();
        assert_eq!(report.analysed().count(), 2, "{:?}", report.sessions.iter().map(|s| &s.problem).collect::<Vec<_>>());
        assert_eq!(report.unreviewed(&reviewed), 0, "{:#?}", report.sessions);
    }
}

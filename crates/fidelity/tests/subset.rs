//! A fast subset of the fidelity check: a few cases per installed original, each of which must
//! agree with our crate on every part (trigger, selection, tokens before; strictly: a part only
//! one side answers disagrees) or differ only where `fidelity/deliberate.toml` says so with a
//! reason. Originals not installed (`cargo xtask
//! fidelity --setup` was not run, as on a fresh clone or in CI) are skipped with a message;
//! the full run is `cargo xtask fidelity`.

use std::path::Path;

use compactbench_eval::scenario::load_dir;
use compactbench_fidelity::driver::installed;
use compactbench_fidelity::run::{check, Options};
use compactbench_fidelity::ORIGINALS;
use compactbench_tokens::{Encoding, TokenCounter};

#[test]
fn installed_originals_agree_on_a_few_cases() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
    let scenarios = load_dir(&root.join("scenarios")).unwrap();
    // Two scenarios keep it fast: one with parallel calls, one long session.
    let scenarios: Vec<_> = scenarios.into_iter().filter(|s| s.name == "parallel-calls" || s.name == "drift").collect();
    let counter = TokenCounter::new(Encoding::O200kBase);
    let deliberate = compactbench_fidelity::deliberate::load(&root.join("fidelity/deliberate.toml")).unwrap();
    let options = Options { root: &root, scenarios: &scenarios, cases: 4, minimize: false, deliberate: &deliberate };
    let mut checked = 0;
    for original in ORIGINALS {
        if !installed(&root, original) {
            eprintln!("skip {}: not installed (run `cargo xtask fidelity --setup`)", original.name);
            continue;
        }
        let report = check(original, &options, &counter, &|_| {}).unwrap_or_else(|e| panic!("{}: {e:#}", original.name));
        let a = &report.agreement;
        assert!(a.answered() > 0, "{}: no case answered ({:?})", original.name, report.problems);
        assert_eq!(a.unreviewed, 0, "{}: {} ({:?} cases differ)", original.name, a.short(), a.differing);
        checked += 1;
    }
    eprintln!("{checked} of {} originals checked", ORIGINALS.len());
}

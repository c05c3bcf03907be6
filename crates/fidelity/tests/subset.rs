//! A fast subset of the fidelity check: the cases of a few sessions per installed original, each of which must
//! agree with our crate on every part (trigger, selection, tokens before; strictly: a part only
//! one side answers disagrees) or differ only where `fidelity/deliberate.toml` says so with a
//! reason. Originals not installed (`cargo xtask
//! fidelity --setup` was not run, as on a fresh clone or in CI) are skipped with a message;
//! the full run is `cargo xtask fidelity`.

mod common;

use compactbench_eval::scenario::load_dir;
use compactbench_fidelity::run::{check, check_strategy, Options};
use compactbench_fidelity::ORIGINALS;
use compactbench_tokens::{Encoding, TokenCounter};

#[test]
fn installed_originals_agree_on_a_few_cases() {
    let root = common::root();
    let scenarios = load_dir(&root.join("scenarios")).unwrap();
    // Two scenarios keep it fast: one with parallel calls, one long session.
    let scenarios: Vec<_> = scenarios.into_iter().filter(|s| s.name == "parallel-calls" || s.name == "drift").collect();
    let counter = TokenCounter::new(Encoding::O200kBase);
    let deliberate = compactbench_fidelity::deliberate::load(&root.join("fidelity/deliberate.toml")).unwrap();
    let options = Options { root: &root, scenarios: &scenarios, sessions: 4, minimize: false, deliberate: &deliberate };
    let mut checked = 0;
    for original in ORIGINALS {
        if !common::installed(&root, original) {
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

/// The check can fail: a copy of the `pi` strategy with one setting changed (`keepRecentTokens`
/// 20,000 -> 12,000, so it keeps less) disagrees with Pi 1.6.0 on the selection.
#[test]
fn a_changed_copy_of_a_crate_fails_the_check() {
    use compactbench_strategy_pi::{PiConfig, PiStrategy};
    let root = common::root();
    let Some(original) = common::installed_original(&root, "pi-1.6.0") else { return };
    let scenarios: Vec<_> = load_dir(&root.join("scenarios")).unwrap().into_iter().filter(|s| s.name == "drift").collect();
    let counter = TokenCounter::new(Encoding::O200kBase);
    let options = Options { root: &root, scenarios: &scenarios, sessions: 6, minimize: false, deliberate: &[] };
    let changed = PiStrategy::new(PiConfig { keep_recent_tokens: 12_000, ..PiConfig::default() });
    let report = check_strategy(original, &changed, &options, &counter, &|_| {}).unwrap();
    let a = &report.agreement;
    assert!(a.unreviewed > 0 && a.differing.contains_key("selection"), "{}: {:?}", a.short(), a.differing);
    // The same cases with the crate as it is agree.
    let report = check(original, &options, &counter, &|_| {}).unwrap();
    assert_eq!(report.agreement.unreviewed, 0, "{}", report.agreement.short());
}

/// The same for a trigger: a copy of `kimi-cli/k1` reserving 40,000 instead of 50,000 (so it
/// compacts later) disagrees with kimi-cli 1.15.0 at the windows where the two reserves part.
#[test]
fn a_changed_reserve_fails_the_k1_check() {
    use compactbench_strategy_kimi_cli::{KimiCliConfig, KimiCliStrategy};
    let root = common::root();
    let Some(original) = common::installed_original(&root, "kimi-cli-1.15.0") else { return };
    let scenarios: Vec<_> = load_dir(&root.join("scenarios")).unwrap().into_iter().filter(|s| s.name == "drift").collect();
    let counter = TokenCounter::new(Encoding::O200kBase);
    let options = Options { root: &root, scenarios: &scenarios, sessions: 2, minimize: false, deliberate: &[] };
    let changed = KimiCliStrategy::k1(KimiCliConfig { reserved_context_size: 40_000, ..KimiCliConfig::default() });
    let report = check_strategy(original, &changed, &options, &counter, &|_| {}).unwrap();
    let a = &report.agreement;
    assert!(a.unreviewed > 0 && a.differing.contains_key("trigger"), "{}: {:?}", a.short(), a.differing);
    let report = check(original, &options, &counter, &|_| {}).unwrap();
    assert_eq!(report.agreement.unreviewed, 0, "{}", report.agreement.short());
}

/// The same for in-place rewrites: a copy of `oh-my-pi` with `supersedeReads` off (no stale-read
/// pass) disagrees with oh-my-pi's turn-end check on the entries it rewrites.
#[test]
fn a_changed_prune_fails_the_oh_my_pi_turn_end_check() {
    use compactbench_strategy_oh_my_pi::{OhMyPiConfig, OhMyPiStrategy};
    let root = common::root();
    let Some(original) = common::installed_original(&root, "oh-my-pi-18.3.4-turn-end") else { return };
    let scenarios: Vec<_> = load_dir(&root.join("scenarios")).unwrap().into_iter().filter(|s| s.name == "repeated-reads").collect();
    let counter = TokenCounter::new(Encoding::O200kBase);
    let options = Options { root: &root, scenarios: &scenarios, sessions: 8, minimize: false, deliberate: &[] };
    let changed = OhMyPiStrategy::new(OhMyPiConfig { supersede_reads: false, ..OhMyPiConfig::default() });
    let report = check_strategy(original, &changed, &options, &counter, &|_| {}).unwrap();
    let a = &report.agreement;
    assert!(a.unreviewed > 0 && a.differing.contains_key("rewrites"), "{}: {:?}", a.short(), a.differing);
    let report = check(original, &options, &counter, &|_| {}).unwrap();
    assert_eq!(report.agreement.unreviewed, 0, "{}", report.agreement.short());
    assert!(report.agreement.rewrites_theirs > 0, "no case rewrote anything");
}

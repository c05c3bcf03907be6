//! The replay law (`compactbench_testkit::law`) for every registered strategy on every shipped
//! scenario: the session of seed 1, fed entry by entry to the strategy's replay, gives the
//! views, decisions and checkpoints of its from-scratch functions at every compaction, at the
//! manual compaction commands a scenario's user types, and at a sample of other requests. The
//! property suite (`fuzz_strategies.rs`) checks the same law on generated sessions.

use std::path::Path;

use compactbench_core::Message;
use compactbench_eval::generate::{generate, Step};
use compactbench_eval::scenario::{load_dir, Scenario};
use compactbench_testkit::{assert_replay_law_instructed, FakeSummarizer};

/// Compare at every this many requests besides every compaction: the from-scratch functions
/// rebuild the whole view, so comparing at every request of a long session would make this
/// test quadratic.
const SAMPLE: u32 = 16;

fn shipped() -> Vec<Scenario> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    ["", "real", "local-model"].iter().flat_map(|dir| load_dir(&root.join(dir)).unwrap()).collect()
}

/// One test per half of the strategies, so the two run in parallel.
fn law_on_shipped_scenarios(part: usize) {
    let scenarios = shipped();
    assert!(scenarios.len() >= 19, "found {} shipped scenarios", scenarios.len());
    // Each session's messages, and its manual compaction commands at the messages they precede
    // (message `i + 1` is step `i`: the system prompt comes first).
    let sessions: Vec<(Vec<Message>, Vec<(usize, String)>)> = scenarios
        .iter()
        .map(|sc| {
            let session = generate(sc, 1);
            let messages = std::iter::once(session.system.clone()).chain(session.steps.iter().map(Step::message).cloned()).collect();
            let manual = session.instructions.manual.iter().map(|m| (m.step + 1, m.text.clone())).collect();
            (messages, manual)
        })
        .collect();
    // `COMPACTBENCH_LAW_ONLY=id,id` narrows the test (to work on one strategy).
    let only: Option<Vec<String>> = std::env::var("COMPACTBENCH_LAW_ONLY").ok().map(|v| v.split(',').map(|s| s.trim().to_owned()).collect());
    let strategies = compactbench_registry::all().into_iter().skip(part).step_by(2);
    for strategy in strategies.filter(|s| only.as_ref().is_none_or(|o| o.contains(&s.info().id))) {
        let mut compactions = 0;
        for (sc, (session, manual)) in scenarios.iter().zip(&sessions) {
            let summarizer = || Box::new(FakeSummarizer::default()) as Box<dyn compactbench_core::Summarizer>;
            compactions += assert_replay_law_instructed(strategy.as_ref(), &sc.model, session, SAMPLE, &summarizer, manual).compactions;
        }
        eprintln!("replay law/{}: {} scenarios, {compactions} compactions compared", strategy.info().id, scenarios.len());
    }
}

#[test]
fn replay_law_on_shipped_scenarios_part_1_of_2() {
    law_on_shipped_scenarios(0);
}

#[test]
fn replay_law_on_shipped_scenarios_part_2_of_2() {
    law_on_shipped_scenarios(1);
}

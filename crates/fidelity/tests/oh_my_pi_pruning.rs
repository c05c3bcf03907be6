//! Sessions the generated scenarios do not produce, asked of oh-my-pi's per-turn pruning at a
//! turn's end (`pruneSupersededToolResults`, `pruneToolOutputs` of `@oh-my-pi/pi-agent-core`
//! 18.2.11, driven as 18.3.4's `checkCompaction` runs them; checks `oh-my-pi`): several
//! results in one tool message (oh-my-pi stores one per message), reads with line selectors,
//! internal-URL reads, a failed final reply, and either side of the cache guard. Every answer
//! must agree with our crate, except one pinned crate bug (see the end of the test). Skipped with a message when `cargo xtask fidelity --setup --only
//! oh-my-pi-18.3.4-turn-end` was not run.

mod common;

use compactbench_core::{Log, Message, ModelProfile, Moment, Part, Pricing, Role, Shape, Strategy, Usage};
use compactbench_fidelity::compare::compare;
use compactbench_fidelity::driver::Driver;
use compactbench_fidelity::ours::answer;
use compactbench_fidelity::{Answer, Case, Original};
use serde_json::json;

fn reply(parts: Vec<Part>, input: u64) -> Message {
    let mut m = Message::new(Role::Assistant, parts);
    m.usage = Some(Usage { input, output: 20, ..Default::default() });
    m
}

fn read(id: &str, path: &str) -> Part {
    Part::ToolCall { id: id.into(), name: "read".into(), args: json!({ "path": path }) }
}

fn result(id: &str, chars: usize) -> Part {
    Part::ToolResult { call_id: id.into(), name: "read".into(), text: format!("{id} {}", "x".repeat(chars)), is_error: false }
}

/// A prompt, then one assistant step per group of reads (`(path, result chars)`), each group's
/// results in one tool message, then a final reply (`None` usage: a failed reply).
fn session(groups: &[&[(&str, usize)]], last_usage: Option<u64>) -> Log {
    let mut log = Log::new();
    log.push_message(Message::system("You are oh-my-pi."));
    log.push_message(Message::user("Fix the parser."));
    let mut n = 0;
    for group in groups {
        let ids: Vec<String> = group.iter().map(|_| {
            n += 1;
            format!("c{n}")
        }).collect();
        log.push_message(reply(group.iter().zip(&ids).map(|((p, _), id)| read(id, p)).collect(), 1_000 * n));
        log.push_message(Message::new(Role::Tool, group.iter().zip(&ids).map(|((_, size), id)| result(id, *size)).collect()));
    }
    let mut done = Message::new(Role::Assistant, vec![Part::text("Done.")]);
    done.usage = last_usage.map(|input| Usage { input, output: 10, ..Default::default() });
    log.push_message(done);
    log
}

#[test]
fn oh_my_pi_prunes_as_its_original_on_handmade_sessions() {
    let root = common::root();
    let Some(original) = common::installed_original(&root, "oh-my-pi-18.3.4-turn-end") else { return };
    let strategy = compactbench_registry::find("oh-my-pi").unwrap();
    let mut driver = Driver::start(&root, original).unwrap();
    let big = 40_000; // 10,000 tokens: over the 8,000-token cache guard on its own
    let sessions: Vec<(&str, Log)> = vec![
        // The older read of a.rs shares its tool message with a 10,000-token result after it:
        // oh-my-pi stores one result per message, so the messages after the older read total
        // over the 8,000-token cache guard and it stays (our crate pruned it until the fix).
        ("shared-message", session(&[&[("src/a.rs", 400), ("src/big.rs", big)], &[("src/a.rs", 400)]], Some(15_000))),
        // The older read of a.rs shares its tool message with a larger result before it.
        ("shared-message-last", session(&[&[("src/big.rs", big), ("src/a.rs", 400)], &[("src/a.rs", 400)]], Some(15_000))),
        // Two reads of a.rs in one message.
        ("same-message", session(&[&[("src/a.rs", 400), ("src/a.rs", 400)]], Some(5_000))),
        // Selectors: a bare read supersedes a selector-carrying one; different selectors do not.
        ("selectors", session(&[&[("src/a.rs:10-20", 400)], &[("src/a.rs:30-40", 400)], &[("src/a.rs:30-40", 400)], &[("src/a.rs", 400)]], Some(6_000))),
        // Internal URLs are exempt.
        ("urls", session(&[&[("skill://x/SKILL.md", 400)], &[("skill://x/SKILL.md", 400)], &[("https://e.com/a", 400)], &[("https://e.com/a", 400)]], Some(6_000))),
        // A failed final reply: the stale-read pass still runs.
        ("failed-reply", session(&[&[("src/a.rs", 400)], &[("src/a.rs", 400)]], None)),
        // Either side of the cache guard: the messages after the older read total under and
        // over 8,000 tokens.
        ("guard-under", session(&[&[("src/a.rs", 400)], &[("src/b.rs", 30_000)], &[("src/a.rs", 400)]], Some(12_000))),
        ("guard-over", session(&[&[("src/a.rs", 400)], &[("src/b.rs", 32_000)], &[("src/a.rs", 400)]], Some(12_000))),
    ];
    let mut rewrote = 0;
    for (name, log) in sessions {
        for window in [10_000, 200_000] {
            let (ours, theirs) = ask(&mut driver, original, strategy.as_ref(), &format!("{name}/w{window}"), &log, window);
            assert!(compare(&ours, &theirs).agrees(), "{name}/w{window}: ours {ours:?}, oh-my-pi {theirs:?}");
            rewrote += usize::from(theirs.rewritten.as_ref().is_some_and(|r| !r.is_empty()));
        }
    }
    assert!(rewrote >= 10, "the original rewrote on {rewrote} cases");

}

/// Our answer and the original's on `log` at a turn's end with `window`.
fn ask(driver: &mut Driver, original: &Original, strategy: &dyn Strategy, id: &str, log: &Log, window: u64) -> (Answer, Answer) {
    let model = ModelProfile { name: "m".into(), window, max_output: 4_096, provider: Shape::Anthropic, pricing: Pricing::default() };
    let case = Case::new(id, log.clone(), model);
    let export = (original.export)(&case).unwrap();
    let theirs = driver.ask(&case, &export).unwrap().to_answer(&export, &case).unwrap();
    (answer(strategy, &case, Moment::TurnEnd, original.rewrites, original.rewrites_apart), theirs)
}

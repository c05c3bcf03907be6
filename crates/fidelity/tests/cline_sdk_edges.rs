//! Sessions the generated scenarios do not produce, asked of `@cline/core` 0.0.86's own
//! `prepareTurn` hook (checks `cline/sdk`): a provider input count above the hook's estimate
//! (the scale-down of the budget, and its cap at 4), a long conversation (the half-window
//! target), thinking, an image, text the estimator counts in UTF-16 units (emoji, accents,
//! control characters and quotes JSON escapes), a run's first request (no input count), and
//! windows on either side of the trigger. Every answer must agree with our crate. Skipped with a
//! message when `cargo xtask fidelity --setup --only cline/sdk` was not run.

mod common;

use compactbench_core::{Log, Message, ModelProfile, Moment, Part, Pricing, Role, Shape, Usage};
use compactbench_fidelity::compare::compare;
use compactbench_fidelity::driver::Driver;
use compactbench_fidelity::ours::answer;
use compactbench_fidelity::Case;
use serde_json::json;

fn reply(parts: Vec<Part>, input: u64) -> Message {
    let mut m = Message::new(Role::Assistant, parts);
    m.usage = Some(Usage { input: input - input / 4, output: 50, cache_read: input / 4, ..Default::default() });
    m
}

fn result(id: &str, text: String) -> Message {
    Message::new(Role::Tool, vec![Part::ToolResult { call_id: id.into(), name: "read_files".into(), text, is_error: false }])
}

/// `turns` prompts of `rounds` tool rounds each, results of `size` characters; replies report
/// `input` tokens.
fn session(turns: usize, rounds: usize, size: usize, input: u64) -> Log {
    let mut log = Log::new();
    log.push_message(Message::system("You are Cline. «Résumé» 🚀"));
    for t in 0..turns {
        log.push_message(Message::user(format!("Task {t}: fix the parser — \"quoted\"\tand tabbed 😀")));
        for r in 0..rounds {
            let id = format!("c{t}_{r}");
            let mut parts = vec![Part::Reasoning { text: format!("think {t}/{r} ü") }];
            parts.push(Part::ToolCall { id: id.clone(), name: "read_files".into(), args: json!({ "files": [{ "path": format!("src/f{t}_{r}.rs") }] }) });
            log.push_message(reply(parts, input));
            log.push_message(result(&id, format!("// f{t}_{r} \u{1}\n{}", "fn x() { \"é\" }\n".repeat(size / 17))));
        }
        if t + 1 < turns {
            let mut done = reply(vec![Part::text(format!("Done with task {t} ✅"))], input);
            done.parts.push(Part::Media { mime: "image/png".into(), tokens: 500 });
            log.push_message(done);
        }
    }
    log
}

#[test]
fn cline_core_agrees_on_handmade_sessions() {
    let root = common::root();
    let Some(original) = common::installed_original(&root, "cline/sdk") else { return };
    let strategy = compactbench_registry::find("cline/sdk").unwrap();
    let mut driver = Driver::start(&root, original).unwrap();
    let (mut fired, mut kept, mut scaled) = (0, 0, 0);
    // (turns, rounds, result size, reported input): small counts; counts 2x and 10x the
    // estimate (scale-down, and its cap); many pairs (the long-conversation target).
    for (turns, rounds, size, input) in [(1, 6, 4_000, 1_000), (2, 5, 3_000, 30_000), (3, 4, 2_000, 60_000), (6, 2, 3_000, 3_000), (7, 1, 9_000, 200_000)] {
        let full = session(turns, rounds, size, input);
        // The last request of the run, and a run's first request (the log ends in a prompt).
        let mut first = full.clone();
        first.push_message(Message::user("And now the docs."));
        for log in [full, first] {
            for window in [2_000, 8_000, 12_000, 20_000, 30_000, 60_000, 250_000] {
                let model = ModelProfile { name: "gpt-5".into(), window, max_output: 4_096, provider: Shape::OpenaiChat, pricing: Pricing::default() };
                let case = Case::new(format!("t{turns}x{rounds}/s{size}/i{input}/w{window}/n{}", log.len()), log.clone(), model);
                let export = (original.export)(&case).unwrap();
                let theirs = driver.ask(&case, &export).unwrap().to_answer(&export, &case).unwrap();
                let ours = answer(strategy.as_ref(), &case, Moment::BeforeRequest, compactbench_fidelity::originals::all_rewrites, false);
                assert!(compare(&ours, &theirs).agrees(), "{}: ours {ours:?}, @cline/core {theirs:?}", case.id);
                fired += usize::from(theirs.compact);
                kept += usize::from(theirs.first_kept.is_some());
                scaled += usize::from(export.session["previousRequestInputTokens"].as_u64().is_some_and(|p| p > 20_000));
            }
        }
    }
    assert!(fired > 10 && kept > 10 && fired < 70 && scaled > 10, "fired {fired}, kept {kept}, scaled {scaled} of 70");
}

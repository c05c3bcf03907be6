//! Tests of the user's compaction instructions: the `[memory]` and `[[manual]]` scenario tables,
//! how the generator writes them (project memory at the end of the system prompt, manual
//! commands at user steps, the facts they name), and how the driver hands a manual command to a
//! strategy and measures where the texts went.

use std::path::Path;

use compactbench_summarize::{Extractive, PromptFollowing};
use compactbench_tokens::TokenCounter;

use crate::drive::{run, Env};
use crate::facts::{key, FactKind, NamedBy};
use crate::generate::{generate, Step};
use crate::results::{RunResult, Status};
use crate::scenario::Scenario;

fn shipped() -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/12-compact-instructions.toml");
    Scenario::load(&path).unwrap()
}

const BASE: &str = r#"
name = "instructed"
description = "instruction tests"
[model]
name = "test"
window = 100000
max_output = 8000
provider = "anthropic"
pricing = { input = 3.0, cached_input = 0.3, output = 15.0 }
[session]
turns = 6
steps_per_turn = [1, 2]
[[facts]]
kind = "identifier"
turn = 1
[[facts]]
kind = "error_message"
turn = 3
"#;

fn parse_err(extra: &str) -> String {
    Scenario::parse(Path::new("scenarios/bad.toml"), &format!("{BASE}{extra}")).unwrap_err().to_string()
}

#[test]
fn malformed_instructions_name_the_file_and_the_field() {
    assert!(Scenario::parse(Path::new("ok.toml"), &format!("{BASE}[memory]\nnames = [1]\n[[manual]]\nturn = 2\nnames = [0]\n[[manual]]\nturn = 5\n")).is_ok());
    let cases = [
        ("[memory]\nnames = []\n", "scenarios/bad.toml: field `memory.names`: expected at least one fact index"),
        ("[memory]\nnames = [0, 2]\n", "scenarios/bad.toml: field `memory.names[1]`: expected an index into [[facts]] (0..2), got 2"),
        ("[[manual]]\nturn = 0\n", "scenarios/bad.toml: field `manual[0].turn`: expected 1..6 (after a turn has ended), got 0"),
        ("[[manual]]\nturn = 6\n", "scenarios/bad.toml: field `manual[0].turn`: expected 1..6 (after a turn has ended), got 6"),
        ("[[manual]]\nturn = 3\nnames = [1]\n", "scenarios/bad.toml: field `manual[0].names[0]`: facts[1] is planted in turn 3, not before the command's turn 3"),
        (
            "[memory]\nnames = [0]\n[[manual]]\nturn = 4\nnames = [1, 0]\n",
            "scenarios/bad.toml: field `manual[0].names[1]`: facts[0] is already named by memory.names[0]; a fact may be named once",
        ),
    ];
    for (extra, want) in cases {
        assert_eq!(parse_err(extra), want, "{extra}");
    }
    let err = parse_err("[[manual]]\nturn = 2\nfocus = \"x\"\n");
    assert!(err.starts_with("scenarios/bad.toml: TOML parse error at line") && err.contains("unknown field `focus`"), "{err}");
}

#[test]
fn keys_are_the_tagged_names_needles_are_about() {
    let cases = [
        ("error[E0599]: no method named `parse_token_q7k2` found for struct `TokenMap` in the current scope", "parse_token_q7k2"),
        ("do not change the public API of auth::parse_token_q7k2", "parse_token_q7k2"),
        ("update the migration notes in docs/auth_q7k2.md", "docs/auth_q7k2.md"),
        ("src/net/cache_b3c4.rs", "src/net/cache_b3c4.rs"),
        ("cache_port_q7k2 = `9172`", "cache_port_q7k2"),
        ("use a Vec for load_state_z0z9 because lookups dominate the profile", "load_state_z0z9"),
    ];
    for (needle, want) in cases {
        assert_eq!(key(needle), Some(want), "{needle}");
    }
    assert_eq!(key("error: build failed in src/lib.rs"), None);
}

#[test]
fn the_generator_writes_memory_manual_commands_and_named_facts() {
    let sc = shipped();
    let session = generate(&sc, 1);
    let ins = &session.instructions;
    let keys = |by: NamedBy| -> Vec<&str> { session.facts.iter().filter(|f| f.named_by == Some(by)).map(|f| key(&f.needle).unwrap()).collect() };
    let (memory, manual) = (keys(NamedBy::Memory), keys(NamedBy::Manual));
    assert_eq!((memory.len(), manual.len()), (3, 3));
    assert_eq!(session.facts.iter().filter(|f| f.named_by.is_none()).count(), 5);
    // The memory ends the system prompt and names its three keys in backticks.
    assert!(session.system.text().ends_with(&ins.memory) && ins.memory.ends_with(&ins.memory_rule));
    assert!(memory.iter().all(|k| ins.memory_rule.contains(&format!("`{k}`"))), "{}", ins.memory_rule);
    // Two commands, at the user messages of turns 14 and 22: the first names its keys, the second is bare.
    let user_steps: Vec<usize> = (0..session.steps.len()).filter(|&i| matches!(session.steps[i], Step::User(_))).collect();
    assert_eq!(ins.manual.iter().map(|m| m.step).collect::<Vec<_>>(), [user_steps[14], user_steps[22]]);
    assert!(manual.iter().all(|k| ins.manual[0].text.contains(&format!("`{k}`"))), "{}", ins.manual[0].text);
    assert_eq!(ins.manual[1].text, "");
    // What is named was planted (the keys are in the session before the command) and is needed after it.
    for f in session.facts.iter().filter(|f| f.named_by == Some(NamedBy::Manual)) {
        assert!(f.kind == FactKind::SupersededValue || f.planted_step < ins.manual[0].step, "{f:?}");
        assert!(f.needed_until > ins.manual[1].step);
    }
    // A scenario without the tables has no memory, no command and no named fact.
    let plain = generate(&Scenario::parse(Path::new("plain.toml"), BASE).unwrap(), 1);
    assert_eq!(plain.instructions, Default::default());
    assert!(plain.facts.iter().all(|f| f.named_by.is_none()));
}

fn run_with(id: &str, sc: &Scenario, prompted: bool) -> RunResult {
    let strategy = compactbench_registry::all().into_iter().find(|s| s.info().id == id).unwrap();
    let counter = TokenCounter::default();
    let extractive = Extractive::new(counter.clone());
    let following = PromptFollowing::new(counter.clone());
    let summarizer: &dyn compactbench_core::Summarizer = if prompted { &following } else { &extractive };
    let env = Env { counter: &counter, summarizer };
    run(strategy.as_ref(), sc, &generate(sc, 1), 1, &env, |_| {})
}

/// Each strategy does with the typed text what its original does: Pi puts it in the summary
/// prompt, Claude Code too; Codex compacts without it; DeepSeek Harness refuses `/compact <text>`
/// and runs only the bare command; Aider has no command. The memory's instruction rides along as
/// context where the summary call re-sends the agent's system prompt (Claude Code) and is not
/// sent where it has its own (Pi).
#[test]
fn manual_commands_reach_the_strategies_as_their_originals_pass_them() {
    let sc = shipped();
    let cases = [
        ("pi", (2, 2), "in prompt", "not sent"),
        ("claude-code", (2, 2), "in prompt", "as context"),
        ("codex", (2, 2), "dropped", "as context"),
        ("deepseek-harness", (1, 2), "dropped", "as context"),
        ("aider", (0, 2), "no command", "not sent"),
    ];
    for (id, (ran, asked), manual, memory) in cases {
        let r = run_with(id, &sc, false);
        let i = r.instructed;
        assert_eq!((i.manual_ran, i.manual_asked), (ran, asked), "{id}");
        let manual_seen = match (i.manual_ran, i.manual_in_prompt, i.manual_in_context) {
            (0, _, _) => "no command",
            (_, p, _) if p > 0 => "in prompt",
            (_, _, c) if c > 0 => "as context",
            _ => "dropped",
        };
        let memory_seen = match (i.memory_in_prompt, i.memory_in_context) {
            (p, _) if p > 0 => "in prompt",
            (_, c) if c > 0 => "as context",
            _ => "not sent",
        };
        assert_eq!((manual_seen, memory_seen), (manual, memory), "{id}: {i:?}");
        let moments: Vec<&str> = r.compactions.iter().filter(|c| c.moment == "manual").map(|c| c.reason.as_str()).collect();
        assert_eq!(moments.len() as u32, ran, "{id}: {moments:?}");
    }
}

/// The probe on the named facts: with a summarizer that follows its prompt, every fact the
/// manual command names that is still in the request before Pi's manual compaction is in the
/// first request after it, and named facts are retained to the end more often than the unnamed
/// ones of the same session.
#[test]
fn prompted_pi_keeps_what_the_manual_command_names() {
    let sc = shipped();
    let session = generate(&sc, 1);
    let manual_step = session.instructions.manual[0].step as u32;
    let needles: Vec<&str> = session.facts.iter().filter(|f| f.named_by == Some(NamedBy::Manual)).map(|f| f.needle.as_str()).collect();
    assert_eq!(needles.len(), 3);
    let strategy = compactbench_registry::all().into_iter().find(|s| s.info().id == "pi").unwrap();
    let counter = TokenCounter::default();
    let following = PromptFollowing::new(counter.clone());
    let env = Env { counter: &counter, summarizer: &following };
    // Per request: which named needles its view holds.
    let mut present: Vec<Vec<bool>> = Vec::new();
    let r = run(strategy.as_ref(), &sc, &session, 1, &env, |snap| {
        let text: String = snap.view.iter().map(|m| m.text()).collect::<Vec<_>>().join("\n");
        present.push(needles.iter().map(|n| text.contains(n)).collect());
    });
    let c = r.compactions.iter().find(|c| c.moment == "manual" && c.step == manual_step).expect("pi compacts at the command");
    assert!(c.error.is_none() && r.instructed.manual_in_prompt >= 1, "{c:?}");
    // A named fact still in the request before the command is in the one after it (a fact
    // an earlier compaction already dropped cannot come back).
    let (before, after) = (&present[c.request as usize - 1], &present[c.request as usize]);
    assert!(before.iter().filter(|&&b| b).count() >= 2, "{before:?}");
    for k in 0..needles.len() {
        assert!(!before[k] || after[k], "{} was dropped by the manual compaction", needles[k]);
    }
    let kept = |by: Option<NamedBy>| {
        let facts: Vec<_> = r.facts.iter().filter(|f| f.named_by == by).collect();
        facts.iter().filter(|f| f.last.is_verbatim() || f.last == Status::Recoverable).count() as f64 / facts.len() as f64
    };
    assert!(kept(Some(NamedBy::Manual)) > kept(None), "{:?}", r.facts);
}

/// Where each strategy (every registered variant) puts what the user typed after its manual
/// command, in the summary request it builds: the fragment its instructions must hold (as the
/// original lays it out; see each crate's docs), `None` when it compacts without the text, or no
/// compaction at all when it has no command.
#[test]
fn every_strategy_passes_manual_instructions_as_its_original_does() {
    use compactbench_core::Decision;
    use compactbench_testkit::{manual, TYPED};
    enum Expect {
        /// Compacts; the text is in its summary prompt as this fragment.
        InPrompt(String),
        /// Compacts without the text.
        Dropped,
        /// No manual command (or none that takes text): nothing happens.
        NoCommand,
    }
    use Expect::*;
    let focus = format!("\n\nAdditional focus: {TYPED}");
    // By crate (the id before any `/`), then the variants that differ.
    let expected = |id: &str| -> Expect {
        match (id.split('/').next().unwrap_or(id), id) {
            (_, "claude-code/api-context-management" | "amp/compaction") => NoCommand,
            (_, "kimi-cli/k1" | "cline/sdk") => Dropped,
            ("pi" | "oh-my-pi", _) => InPrompt(focus.clone()),
            ("claude-code", _) => InPrompt(format!("\n\nAdditional Instructions:\n{TYPED}")),
            ("kimi-cli", _) => InPrompt(format!("It takes precedence over the default priorities above:\n{TYPED}")),
            ("amp", _) => InPrompt(format!("so that it can pursue this goal:\n\n{TYPED}\n\n")),
            ("codex" | "gemini-cli" | "goose" | "cursor" | "opencode-v1" | "opencode-v2" | "antigravity", _) => Dropped,
            _ => NoCommand,
        }
    };
    let mut seen = [0; 3];
    for strategy in compactbench_registry::all() {
        let id = strategy.info().id.clone();
        let (decision, requests) = manual(strategy.as_ref(), TYPED);
        match expected(&id) {
            InPrompt(fragment) => {
                seen[0] += 1;
                assert_ne!(decision, Decision::Skip, "{id}");
                assert!(requests.iter().any(|r| r.instructions.contains(&fragment)), "{id}: {:?}", requests.iter().map(|r| &r.instructions).collect::<Vec<_>>());
                assert!(requests.iter().all(|r| !r.transcript.contains(TYPED) && !r.system.contains(TYPED)), "{id}: only in the prompt");
            }
            Dropped => {
                seen[1] += 1;
                assert_ne!(decision, Decision::Skip, "{id}");
                assert!(!requests.is_empty(), "{id} compacted without a summary call");
                assert!(requests.iter().all(|r| !r.instructions.contains(TYPED) && !r.transcript.contains(TYPED) && !r.system.contains(TYPED)), "{id}");
            }
            NoCommand => {
                seen[2] += 1;
                assert_eq!((decision, requests.len()), (Decision::Skip, 0), "{id}");
            }
        }
    }
    assert!(seen.iter().all(|&n| n >= 2), "{seen:?}");
    // DeepSeek Harness refuses `/compact <text>` (a usage error) and compacts on a bare `/compact`.
    let deepseek = compactbench_registry::all().into_iter().find(|s| s.info().id == "deepseek-harness").unwrap();
    let (decision, requests) = manual(deepseek.as_ref(), "");
    assert_eq!((decision, requests.len()), (Decision::compact("manual"), 1));
}

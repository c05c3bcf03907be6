//! Fuzz target for the scenario parser, `Scenario::parse(path, text)`, and the generator behind
//! it.
//!
//! Inputs: arbitrary strings, and structure-aware mutations of the shipped scenario files
//! (`scenarios/**/*.toml`): delete, duplicate, swap or cut lines, give a key a value of another
//! type or out of range, rename keys, insert table headers, fields and lines of other scenarios.
//!
//! Properties: never panics; an error displays as `path: message` and names a line (TOML syntax
//! and type errors) or a field (validation errors); a scenario that parses generates a session
//! (when small enough to be quick) whose tool calls are all answered and whose needles first
//! appear where they are planted. Cases: 256 by default, `COMPACTBENCH_FUZZ_CASES` in the long
//! mode (`cargo xtask fuzz`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use compactbench_eval::generate::{generate, Step};
use compactbench_eval::scenario::Scenario;
use proptest::prelude::*;
use proptest::sample::Index;

#[path = "../../../tests/support/fuzz.rs"]
mod support;

/// Every shipped scenario file's lines.
fn corpus() -> &'static [Vec<String>] {
    static FILES: OnceLock<Vec<Vec<String>>> = OnceLock::new();
    FILES.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let mut paths: Vec<PathBuf> = Vec::new();
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "toml") {
                    paths.push(p);
                }
            }
        }
        paths.sort();
        assert!(paths.len() >= 10, "scenario corpus: {} files", paths.len());
        paths.iter().map(|p| std::fs::read_to_string(p).unwrap().lines().map(str::to_owned).collect()).collect()
    })
}

/// Values of every TOML type, in and out of the ranges the validator accepts.
const VALUES: &[&str] = &[
    "\"text\"", "\"\"", "\"UPPER case\"", "0", "-1", "1", "3", "1023", "1024", "4294967296", "18446744073709551616", "1.5",
    "-0.0", "1e-300", "nan", "inf", "-inf", "true", "[]", "[1]", "[0, 0]", "[5, 2]", "[1, 2, 3]", "[\"a\", 1]", "{}",
    "{ read = 1 }", "{ read = 0, grep = 0, bash = 0, edit = 0, ls = 0 }", "{ input = \"x\" }", "1979-05-27",
    "\"\"\"multi\nline\"\"\"", "'literal'", "\"anthropic\"", "\"gemini\"", "\"bedrock\"", "\"decision\"", "\"opinion\"",
    "\"pi\"", "\"x.jsonl\"", "0x10", "1_000", "+1", "\"\\u0000\"",
];

/// Keys of the scenario format, plus typos.
const KEYS: &[&str] = &[
    "name", "description", "window", "max_output", "provider", "pricing", "input", "cached_input", "output", "turns",
    "steps_per_turn", "parallel_share", "output_scale", "system_prompt_lines", "delegable_share", "files", "tools",
    "read", "grep", "bash", "edit", "ls", "kind", "turn", "until_turn", "transcript", "format", "row", "windw", "turn s",
    "\"quoted\"", "a.b", "",
];

/// Whole lines to insert: headers, fields, garbage.
const LINES: &[&str] = &[
    "[session]", "[model]", "[[facts]]", "[replay]", "[session.tools]", "[model.pricing]", "[facts]", "[[session]]",
    "[[model]]", "[", "]]", "kind = \"decision\"", "turn = 3", "until_turn = 0", "files = 0", "window = 1023",
    "max_output = 0", "steps_per_turn = [5, 2]", "parallel_share = 1.5", "output_scale = nan", "delegable_share = -0.1",
    "transcript = \"x.jsonl\"", "format = \"bogus\"", "name = \"UPPER\"", "turns = 0", "= 1", "key =", "\"unterminated",
    "# comment", "", "\u{feff}name = \"bom\"", "a = 1 = 2", "x = { y = ", "\t  ",
];

#[derive(Clone, Debug)]
enum Op {
    Delete(Index),
    Duplicate(Index),
    Swap(Index, Index),
    /// Cut the line at a character.
    Truncate(Index, Index),
    SetValue(Index, Index),
    RenameKey(Index, Index),
    InsertLine(Index, Index),
    /// A line of another scenario file (file, line).
    Graft(Index, Index, Index),
    /// Arbitrary text as a line.
    InsertText(Index, String),
}

#[derive(Clone, Debug)]
enum Input {
    Text(String),
    Mutated { file: Index, ops: Vec<Op>, trailing_newline: bool },
}

fn op() -> impl Strategy<Value = Op> {
    let ix = any::<Index>;
    prop_oneof![
        2 => ix().prop_map(Op::Delete),
        1 => ix().prop_map(Op::Duplicate),
        1 => (ix(), ix()).prop_map(|(a, b)| Op::Swap(a, b)),
        1 => (ix(), ix()).prop_map(|(a, b)| Op::Truncate(a, b)),
        4 => (ix(), ix()).prop_map(|(a, b)| Op::SetValue(a, b)),
        1 => (ix(), ix()).prop_map(|(a, b)| Op::RenameKey(a, b)),
        2 => (ix(), ix()).prop_map(|(a, b)| Op::InsertLine(a, b)),
        1 => (ix(), ix(), ix()).prop_map(|(a, b, c)| Op::Graft(a, b, c)),
        1 => (ix(), any::<String>()).prop_map(|(a, s)| Op::InsertText(a, s)),
    ]
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        1 => any::<String>().prop_map(Input::Text),
        6 => (any::<Index>(), prop::collection::vec(op(), 0..5), prop::bool::weighted(0.9))
            .prop_map(|(file, ops, trailing_newline)| Input::Mutated { file, ops, trailing_newline }),
    ]
}

fn build(input: &Input) -> String {
    let corpus = corpus();
    let (file, ops, trailing_newline) = match input {
        Input::Text(t) => return t.clone(),
        Input::Mutated { file, ops, trailing_newline } => (file, ops, *trailing_newline),
    };
    let mut lines = corpus[file.index(corpus.len())].clone();
    for op in ops {
        let n = lines.len();
        if n == 0 {
            lines.push(String::new());
            continue;
        }
        match op {
            Op::Delete(i) => {
                lines.remove(i.index(n));
            }
            Op::Duplicate(i) => {
                let l = lines[i.index(n)].clone();
                lines.insert(i.index(n), l);
            }
            Op::Swap(a, b) => lines.swap(a.index(n), b.index(n)),
            Op::Truncate(i, at) => {
                let l = &mut lines[i.index(n)];
                let chars = l.chars().count();
                *l = l.chars().take(at.index(chars + 1)).collect();
            }
            Op::SetValue(i, v) => {
                // A line with `key = value` (the first such line at or after i, cyclically).
                if let Some(k) = (0..n).map(|k| (i.index(n) + k) % n).find(|&k| lines[k].contains('=') && !lines[k].trim_start().starts_with('#')) {
                    let key = lines[k].split('=').next().unwrap().to_owned();
                    lines[k] = format!("{key}= {}", VALUES[v.index(VALUES.len())]);
                }
            }
            Op::RenameKey(i, key) => {
                if let Some(k) = (0..n).map(|k| (i.index(n) + k) % n).find(|&k| lines[k].contains('=')) {
                    let rest = lines[k].split_once('=').unwrap().1.to_owned();
                    lines[k] = format!("{} ={rest}", KEYS[key.index(KEYS.len())]);
                }
            }
            Op::InsertLine(i, l) => lines.insert(i.index(n + 1), LINES[l.index(LINES.len())].to_owned()),
            Op::Graft(i, f, l) => {
                let other = &corpus[f.index(corpus.len())];
                if !other.is_empty() {
                    lines.insert(i.index(n + 1), other[l.index(other.len())].clone());
                }
            }
            Op::InsertText(i, s) => lines.insert(i.index(n + 1), s.clone()),
        }
    }
    let mut text = lines.join("\n");
    if trailing_newline {
        text.push('\n');
    }
    text
}

/// Scenarios parsed, rejected, and sessions generated (how deep the inputs go).
static OUTCOMES: [AtomicUsize; 3] = [const { AtomicUsize::new(0) }; 3];

/// Generates the session when that is quick, and checks it.
fn check_session(sc: &Scenario) {
    let s = &sc.session;
    let size = f64::from(s.turns) * f64::from(s.steps_per_turn[1].max(1)) * s.output_scale.max(1.0);
    if sc.replay.is_some() || size > 2_000.0 || s.system_prompt_lines > 2_000 {
        return;
    }
    let session = generate(sc, 3);
    OUTCOMES[2].fetch_add(1, Ordering::Relaxed);
    assert_eq!(session.steps.iter().filter(|s| matches!(s, Step::User(_))).count(), s.turns as usize);
    for f in &session.facts {
        let holds = |s: &Step| s.message().searchable_text().contains(&f.needle);
        assert!(holds(&session.steps[f.planted_step]), "{} not in its step", f.needle);
        assert!(!session.steps[..f.planted_step].iter().any(holds), "{} appears before it is planted", f.needle);
    }
    for (i, step) in session.steps.iter().enumerate() {
        if let Step::Assistant(m) = step {
            let mut calls: Vec<&str> = m.tool_call_ids().collect();
            let mut results: Vec<&str> =
                session.steps[i + 1..].iter().take(calls.len()).flat_map(|s| s.message().tool_result_ids()).collect();
            calls.sort_unstable();
            results.sort_unstable();
            assert_eq!(calls, results, "step {i}: calls not answered right after");
        }
    }
    for span in &session.spans {
        assert!(span.start <= span.end && span.end < session.steps.len());
        assert!(matches!(session.steps[span.start], Step::Assistant(_)) && matches!(session.steps[span.end], Step::Tool(_)));
    }
}

#[test]
fn fuzz_scenario_parser() {
    corpus();
    let path = Path::new("scenarios/fuzz.toml");
    support::fuzz("scenario-parser", 256, input(), |input| {
        let text = build(&input);
        match Scenario::parse(path, &text) {
            Ok(sc) => {
                OUTCOMES[0].fetch_add(1, Ordering::Relaxed);
                check_session(&sc);
            }
            Err(e) => {
                OUTCOMES[1].fetch_add(1, Ordering::Relaxed);
                let shown = e.to_string();
                assert_eq!(e.path, path);
                assert!(shown.starts_with("scenarios/fuzz.toml: "), "{shown}");
                let names_line = e.message.contains("line ");
                let names_field = e.message.contains("field `");
                assert!(names_line || names_field, "error names neither a line nor a field: {shown}");
            }
        }
    });
    let [parsed, rejected, generated] = OUTCOMES.each_ref().map(|a| a.load(Ordering::Relaxed));
    eprintln!("fuzz scenario-parser: {parsed} parsed ({generated} generated a session), {rejected} rejected");
}

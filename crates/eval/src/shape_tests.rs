//! Tests of [`crate::shape`] with Aider's chat shape, the one a strategy declares: it keeps every
//! step and needle, writes each call in Aider's formats, and Aider runs on it without pairing
//! violations.

use std::path::Path;

use compactbench_core::tools::ToolKind;
use compactbench_core::{Message, Part, Role, Strategy};
use compactbench_summarize::Extractive;
use compactbench_tokens::TokenCounter;
use expect_test::expect;
use serde_json::json;

use crate::drive::RunOptions;
use crate::generate::{generate, Session, Step};
use crate::matrix::run_matrix;
use crate::results::RunResult;
use crate::scenario::Scenario;

/// The session in Aider's chat shape, as Aider's strategy declares it.
fn aider_chat(session: &Session) -> Session {
    crate::shape::text_chat(session, aider().as_ref())
}

fn aider() -> Box<dyn Strategy> {
    compactbench_registry::find("aider").unwrap()
}

/// Every shipped scenario: the generated ones and the replays of recorded transcripts.
fn every_shipped_scenario() -> Vec<Scenario> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    ["", "real", "local-model"].iter().flat_map(|sub| crate::scenario::load_dir(&dir.join(sub)).unwrap()).collect()
}

fn kind(step: &Step) -> &'static str {
    match step {
        Step::User(_) => "user",
        Step::Assistant(_) => "assistant",
        Step::Tool(_) => "tool",
    }
}

/// Whether a step's original message makes an edit or write call.
fn edits(step: &Step) -> bool {
    step.message().parts.iter().any(|p| matches!(p, Part::ToolCall { name, args, .. } if matches!(crate::shape::kind(name, args), ToolKind::Edit | ToolKind::Write)))
}

#[test]
fn aider_chat_keeps_every_step_and_needle_of_the_shipped_scenarios() {
    let mut unparsed = Vec::new();
    let aider = aider();
    let chat = aider.text_chat().unwrap();
    for sc in every_shipped_scenario() {
        let session = generate(&sc, 0);
        let text = aider_chat(&session);
        let name = &sc.name;
        assert_eq!(
            text.steps.iter().map(kind).collect::<Vec<_>>(),
            session.steps.iter().map(kind).collect::<Vec<_>>(),
            "{name}"
        );
        assert_eq!(
            (&text.system, &text.facts, &text.spans),
            (&session.system, &session.facts, &session.spans),
            "{name}"
        );
        for f in &text.facts {
            let planted = text.steps[f.planted_step].message().searchable_text();
            assert!(
                planted.contains(&f.needle),
                "{name}: {:?} {:?} not in its step {}",
                f.kind,
                f.needle,
                f.planted_step
            );
        }
        for (i, (before, after)) in session.steps.iter().zip(&text.steps).enumerate() {
            let m = after.message();
            assert!(!m.has_tool_calls() && m.tool_result_ids().next().is_none(), "{name}: step {i} keeps a tool part");
            // Results become user messages; user steps (a replay's later system messages too)
            // keep their role.
            let role = match after {
                Step::Assistant(_) => Role::Assistant,
                Step::Tool(_) => Role::User,
                Step::User(_) => before.message().role,
            };
            assert_eq!(m.role, role, "{name}: step {i}");
            // Every edit reads back as an edit, as Aider's parser reads the reply.
            if edits(before) && chat.edited_files(&m.text()).is_none_or(|files| files.is_empty()) {
                unparsed.push(format!("{name} step {i}"));
            }
        }
    }
    assert!(unparsed.is_empty(), "edits Aider would not parse: {unparsed:?}");
}

/// One call of each kind and how Aider's chat shows it and its result.
#[test]
fn each_call_is_written_in_aiders_format() {
    let calls = [
        ("edit", json!({"path": "src/a.rs", "oldText": "let a = 1;", "newText": "let a = 2;"}), "Applied edit to src/a.rs", false),
        ("Edit", json!({"file_path": "b.py", "old_string": "x = 1\n", "new_string": "x = 2\n"}), "old_string not found", true),
        ("Write", json!({"file_path": "docs/new.md", "content": "# New"}), "File created", false),
        ("MultiEdit", json!({"file_path": "c.ts", "edits": [{"old_string": "a", "new_string": "b"}, {"old_string": "c", "new_string": "d"}]}), "2 edits failed", true),
        ("apply_patch", json!("*** Begin Patch\n*** Update File: d.rs\n@@\n fn d() {\n-    1\n+    2\n }\n*** Add File: e.rs\n+fn e() {}\n*** End Patch"), "Success", false),
        ("read", json!({"path": "src/a.rs", "offset": 10, "limit": 5}), "   10\tfn a() {}", false),
        ("str_replace_editor", json!({"command": "view", "path": "/w/p.c", "view_range": [650, 700]}), "650 int x;", false),
        ("grep", json!({"pattern": "open_node", "path": "."}), "No matches found for `open_node`", false),
        ("Grep", json!({"pattern": "a b's", "path": "src", "glob": "*.rs"}), "src/a.rs:1:a b's", false),
        ("Glob", json!({"pattern": "**/*.toml"}), "Cargo.toml", false),
        ("ls", json!({"path": "src/core"}), "src/core/a.rs", false),
        ("shell", json!({"command": ["bash", "-lc", "rg -n codex"], "workdir": "/w"}), "a:1:codex", false),
        ("bash", json!({"command": "cargo test parser::"}), "test result: FAILED", true),
        ("TodoWrite", json!({"todos": [{"content": "update the changelog", "status": "pending"}]}), "Todos updated", false),
    ];
    let mut steps = vec![Step::User(Message::user("Fix it."))];
    for (i, (name, args, result, is_error)) in calls.iter().enumerate() {
        let id = format!("c{i}");
        steps.push(Step::Assistant(Message::tool_call(&id, *name, args.clone())));
        steps.push(Step::Tool(Message::tool_result(&id, *name, *result, *is_error)));
    }
    let session = Session { system: Message::system("sys"), steps, facts: Vec::new(), spans: Vec::new(), instructions: Default::default() };
    let shown: Vec<String> = aider_chat(&session)
        .steps
        .iter()
        .skip(1)
        .map(|s| format!("[{}]\n{}", s.message().role.as_str(), s.message().text()))
        .collect();
    expect![[r#"
        [assistant]
        src/a.rs
        ```rust
        <<<<<<< SEARCH
        let a = 1;
        =======
        let a = 2;
        >>>>>>> REPLACE
        ```
        [user]
        I updated the files.
        Applied edit to src/a.rs
        [assistant]
        b.py
        ```python
        <<<<<<< SEARCH
        x = 1
        =======
        x = 2
        >>>>>>> REPLACE
        ```
        [user]
        # 1 SEARCH/REPLACE block failed to match!

        ## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in b.py
        <<<<<<< SEARCH
        x = 1
        =======
        x = 2
        >>>>>>> REPLACE

        old_string not found

        The SEARCH section must exactly match an existing block of lines including all white space, comments, indentation, docstrings, etc

        [assistant]
        docs/new.md
        ```markdown
        <<<<<<< SEARCH
        =======
        # New
        >>>>>>> REPLACE
        ```
        [user]
        I updated the files.
        File created
        [assistant]
        c.ts
        ```typescript
        <<<<<<< SEARCH
        a
        =======
        b
        >>>>>>> REPLACE
        ```

        c.ts
        ```typescript
        <<<<<<< SEARCH
        c
        =======
        d
        >>>>>>> REPLACE
        ```
        [user]
        # 2 SEARCH/REPLACE blocks failed to match!

        ## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in c.ts
        <<<<<<< SEARCH
        a
        =======
        b
        >>>>>>> REPLACE


        ## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in c.ts
        <<<<<<< SEARCH
        c
        =======
        d
        >>>>>>> REPLACE

        2 edits failed

        The SEARCH section must exactly match an existing block of lines including all white space, comments, indentation, docstrings, etc

        [assistant]
        d.rs
        ```rust
        <<<<<<< SEARCH
        fn d() {
            1
        }
        =======
        fn d() {
            2
        }
        >>>>>>> REPLACE
        ```

        e.rs
        ```rust
        <<<<<<< SEARCH
        =======
        fn e() {}
        >>>>>>> REPLACE
        ```
        [user]
        I updated the files.
        Success
        [assistant]
        ```bash
        sed -n '10,14p' src/a.rs
        ```
        [user]
        Output from sed -n '10,14p' src/a.rs
           10	fn a() {}

        [assistant]
        ```bash
        sed -n '650,700p' /w/p.c
        ```
        [user]
        Output from sed -n '650,700p' /w/p.c
        650 int x;

        [assistant]
        ```bash
        grep -rn open_node .
        ```
        [user]
        Output from grep -rn open_node .
        No matches found for `open_node`

        [assistant]
        ```bash
        grep -rn --include '*.rs' 'a b'\''s' src
        ```
        [user]
        Output from grep -rn --include '*.rs' 'a b'\''s' src
        src/a.rs:1:a b's

        [assistant]
        ```bash
        find . -name '**/*.toml'
        ```
        [user]
        Output from find . -name '**/*.toml'
        Cargo.toml

        [assistant]
        ```bash
        ls src/core
        ```
        [user]
        Output from ls src/core
        src/core/a.rs

        [assistant]
        ```bash
        rg -n codex
        ```
        [user]
        Output from rg -n codex
        a:1:codex

        [assistant]
        ```bash
        cargo test parser::
        ```
        [user]
        Output from cargo test parser::
        test result: FAILED

        [assistant]
        ```bash
        TodoWrite {"todos":[{"content":"update the changelog","status":"pending"}]}
        ```
        [user]
        Output from TodoWrite
        Todos updated
    "#]]
    .assert_eq(&shown.join("\n"));
}

/// Aider on its own shape, over every shipped scenario at full length (shortened sessions never
/// break pairing natively, so they would not show what the shape changes): natively, Aider's
/// split keeps tool results whose call it summarized (`orphan_result`); as text it compacts
/// wherever it compacts natively and no request breaks any rule.
#[test]
fn aider_on_its_chat_shape_compacts_without_violations() {
    let scenarios = every_shipped_scenario();
    let aider = vec![aider()];
    let counter = TokenCounter::default();
    let summarizer = |_: &Session| -> Box<dyn compactbench_core::Summarizer> { Box::new(Extractive::default()) };
    let run = |options| run_matrix(&aider, &scenarios, 1, &counter, &summarizer, options, &|_| {});
    let (native, text) = (run(RunOptions::default()), run(RunOptions { aider_chat: true, ..Default::default() }));
    let compactions = |r: &RunResult| r.compactions.iter().filter(|c| c.error.is_none()).count();
    let orphans = |r: &RunResult| r.violations.values().filter_map(|rules| rules.get("orphan_result")).sum::<u32>();
    let mut table = String::new();
    for (n, t) in native.iter().zip(&text) {
        assert_eq!((t.strategy.as_str(), &t.scenario), ("aider+text", &n.scenario));
        table.push_str(&format!(
            "{}: native {} compactions, {} orphan results; text {} compactions, {:?}\n",
            n.scenario,
            compactions(n),
            orphans(n),
            compactions(t),
            t.violations
        ));
    }
    assert!(native.iter().any(|r| orphans(r) > 0), "native Aider no longer breaks pairing:\n{table}");
    for (n, t) in native.iter().zip(&text) {
        assert!(compactions(n) == 0 || compactions(t) > 0, "aider+text never compacts on {}:\n{table}", t.scenario);
        assert!(t.violations.is_empty(), "aider+text breaks a rule on {}:\n{table}", t.scenario);
    }
}

/// A strategy whose harness sends tool calls declares no text shape, and cannot run in one.
#[test]
#[should_panic(expected = "none declares no text chat shape")]
fn a_strategy_without_a_chat_shape_has_no_text_rows() {
    let none = compactbench_registry::find("none").unwrap();
    let session = Session { system: Message::system("sys"), steps: vec![Step::User(Message::user("Hi."))], facts: Vec::new(), spans: Vec::new(), instructions: Default::default() };
    crate::shape::text_chat(&session, none.as_ref());
}

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use compactbench_core::{Message, Part, Role};

use super::*;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench-data/transcripts/");

const CC_9034: &str = "claude-code__vsla__9034225e.jsonl";
const CC_0A72: &str = "claude-code__vsla__0a725fb5.jsonl";
const PI_COMPACTION: &str = "pi__pi-mono__before-compaction.jsonl";
const PI_LARGE: &str = "pi__pi-mono__large-session.jsonl";
const CODEX: &str = "codex__moonmind__019a7ae6.jsonl";
const OPENHANDS: &str = "openhands__multi-swe-bench-example__output.jsonl";
const SWE_AGENT: &str = "swe-agent__pydicom-1458.traj";

const FIXTURES: [(&str, Format); 7] = [
    (CC_9034, Format::ClaudeCode),
    (CC_0A72, Format::ClaudeCode),
    (PI_COMPACTION, Format::Pi),
    (PI_LARGE, Format::Pi),
    (CODEX, Format::Codex),
    (OPENHANDS, Format::OpenHands),
    (SWE_AGENT, Format::SweAgent),
];

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(DIR).join(name)
}

fn load(name: &str) -> Imported {
    load_with(name, &Options::default())
}

fn load_with(name: &str, options: &Options) -> Imported {
    import(&fixture(name), options).unwrap_or_else(|e| panic!("{e}"))
}

/// Tool calls by name.
fn call_names(messages: &[Message]) -> BTreeMap<String, usize> {
    let mut names = BTreeMap::new();
    for m in messages {
        for p in &m.parts {
            if let Part::ToolCall { name, .. } = p {
                *names.entry(name.clone()).or_insert(0) += 1;
            }
        }
    }
    names
}

/// Checks the shape every import must have: 0 skipped lines, every call answered once, each
/// result in its own tool message right after the assistant message that made the call (only
/// tool messages between), result names matching call names.
fn assert_well_formed(name: &str, imp: &Imported) {
    let s = &imp.stats;
    assert_eq!(s.skipped_lines, 0, "{name}");
    assert_eq!((s.unpaired_calls, s.unpaired_results), (0, 0), "{name}");
    assert_eq!(s.tool_pairs, s.tool_calls, "{name}");
    assert_eq!(s.messages, imp.messages.len(), "{name}");
    for (i, m) in imp.messages.iter().enumerate() {
        if m.role != Role::Tool {
            assert!(
                !m.tool_result_ids().any(|_| true),
                "{name}: result outside a tool message at {i}"
            );
            continue;
        }
        assert_eq!(
            m.tool_result_ids().count(),
            1,
            "{name}: message {i} holds one result"
        );
        let Some(Part::ToolResult {
            call_id,
            name: tool,
            ..
        }) = m.parts.first()
        else {
            panic!("{name}: message {i}")
        };
        let caller = imp.messages[..i]
            .iter()
            .rev()
            .find(|m| m.role != Role::Tool)
            .expect("a caller");
        let call = caller.parts.iter().find_map(|p| match p {
            Part::ToolCall { id, name, .. } if id == call_id => Some(name),
            _ => None,
        });
        assert_eq!(
            call,
            Some(tool),
            "{name}: result {i} ({call_id}) follows its call"
        );
    }
    for r in &imp.recorded {
        assert!(r.message_index <= imp.messages.len(), "{name}");
    }
}

#[test]
fn every_fixture_imports_cleanly_and_is_detected() {
    for (name, format) in FIXTURES {
        let imp = load(name);
        assert_eq!(imp.format, format, "{name}");
        assert_well_formed(name, &imp);
        let head = std::fs::read(fixture(name)).unwrap();
        assert_eq!(
            Format::detect(&head[..head.len().min(64 * 1024)]),
            Some(format),
            "{name}"
        );
        assert_eq!(
            Format::detect(&head[..head.len().min(4096)]),
            Some(format),
            "{name} from 4 KiB"
        );
        // Lenient mode changes nothing on a clean file.
        let lenient = load_with(
            name,
            &Options {
                lenient: true,
                ..Options::default()
            },
        );
        assert_eq!(lenient, imp, "{name}");
    }
}

#[test]
fn claude_code_9034225e_matches_readme() {
    // README: 613 lines, 219 tool calls (Edit 60, Read 55, TodoWrite 36, Bash 34), pairs OK,
    // 1 compaction (+1 `summary` line).
    let imp = load(CC_9034);
    let s = &imp.stats;
    assert_eq!(s.lines, 613);
    assert_eq!(s.tool_calls + s.excluded_tool_calls, 219);
    assert_eq!(
        (s.tool_calls, s.excluded_tool_calls, s.sidechain_lines),
        (176, 43, 114)
    );
    let names = call_names(&imp.messages);
    assert_eq!((names["Edit"], names["TodoWrite"]), (60, 36));
    // Read 55 and Bash 34 include the sub-agents' 26 reads and 4 shell calls.
    assert_eq!((names["Read"], names["Bash"]), (29, 30));
    assert_eq!(imp.recorded.len(), 1);
    let c = &imp.recorded[0];
    let summary = c.summary.as_deref().unwrap();
    assert!(summary.starts_with("This session is being continued from a previous conversation"));
    assert_eq!(imp.messages[c.message_index].role, Role::User);
    assert_eq!(imp.messages[c.message_index].text(), summary);
    assert_eq!(
        (c.trigger.as_deref(), c.tokens_before, c.first_kept_message),
        (None, None, None)
    );
    // `summary` title line and two model-fallback notices.
    assert_eq!(s.metadata_lines, 3);
    // Streamed replies were merged: one message per `message.id` in the main chain (229 ids in
    // the file minus the sub-agents' own).
    let assistants = imp
        .messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .count();
    assert!(assistants < 229, "{assistants}");
    assert!(imp
        .messages
        .iter()
        .any(|m| m.role == Role::Assistant && !m.text().is_empty() && m.has_tool_calls()));
    assert!(imp
        .messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .all(|m| m.usage.is_some()));
}

#[test]
fn claude_code_0a725fb5_matches_readme() {
    // README: 609 lines, 209 tool calls (Bash 53, Grep 47, Read 38, Edit 36), 1 compaction,
    // 42 sidechain lines.
    let imp = load(CC_0A72);
    let s = &imp.stats;
    assert_eq!(s.lines, 609);
    assert_eq!(s.tool_calls + s.excluded_tool_calls, 209);
    assert_eq!(s.sidechain_lines, 42);
    assert_eq!((s.tool_calls, s.excluded_tool_calls), (194, 15));
    let names = call_names(&imp.messages);
    assert_eq!((names["Bash"], names["Edit"]), (53, 36));
    // Grep 47 and Read 38 include the sub-agent's 8 greps and 6 reads.
    assert_eq!((names["Grep"], names["Read"]), (39, 32));
    assert_eq!(imp.recorded.len(), 1);
    assert!(imp.recorded[0]
        .summary
        .as_deref()
        .unwrap()
        .starts_with("This session is being continued"));
}

#[test]
fn pi_before_compaction_matches_readme() {
    // README: 1,003 lines, 454 tool calls, 2 compactions with tokensBefore 175,004 and 185,014.
    let imp = load(PI_COMPACTION);
    let s = &imp.stats;
    assert_eq!(s.lines, 1003);
    assert_eq!(s.tool_calls + s.excluded_tool_calls, 454);
    // 5 calls sat in aborted turns (dropped, as Pi drops them); one call (line 628) was
    // interrupted by the compaction and gets Pi's synthetic "No result provided".
    assert_eq!(
        (s.tool_calls, s.excluded_tool_calls, s.synthetic_results),
        (449, 5, 1)
    );
    assert_eq!(s.dropped_messages, 19);
    assert_eq!(imp.recorded.len(), 2);
    assert_eq!(
        imp.recorded
            .iter()
            .map(|c| c.tokens_before)
            .collect::<Vec<_>>(),
        [Some(175_004), Some(185_014)]
    );
    // Each entry's own time (the release that made it is dated by it).
    assert_eq!(
        imp.recorded
            .iter()
            .map(|c| c.recorded_at.as_deref())
            .collect::<Vec<_>>(),
        [
            Some("2025-12-08T23:22:54.411Z"),
            Some("2025-12-08T23:54:21.502Z")
        ]
    );
    // firstKeptEntryIndex 293 and 551 are the user lines 294 and 552.
    let kept: Vec<String> = imp
        .recorded
        .iter()
        .map(|c| imp.messages[c.first_kept_message.unwrap()].text())
        .collect();
    assert_eq!(
        kept,
        [
            "i reviwed what we have, it's good. continue",
            "can leave it"
        ]
    );
    for c in &imp.recorded {
        assert!(c
            .summary
            .as_deref()
            .unwrap()
            .starts_with("# Context Checkpoint"));
        assert!(c.first_kept_message.unwrap() < c.message_index);
    }
    // The first message after the second compaction is the user line right after it.
    assert_eq!(
        imp.messages[imp.recorded[1].message_index].text(),
        "alright, where were we?"
    );
    let synthetic = imp.messages.iter().find(|m| matches!(m.parts.first(), Some(Part::ToolResult { text, .. }) if text == "No result provided"));
    assert!(matches!(
        synthetic.unwrap().parts[0],
        Part::ToolResult { is_error: true, .. }
    ));
}

#[test]
fn pi_large_session_matches_readme() {
    // README: 1,019 lines, 391 tool calls, 0 compactions.
    let imp = load(PI_LARGE);
    let s = &imp.stats;
    assert_eq!(s.lines, 1019);
    assert_eq!(s.tool_calls + s.excluded_tool_calls, 391);
    assert_eq!(
        (s.tool_calls, s.excluded_tool_calls, s.synthetic_results),
        (373, 18, 0)
    );
    assert!(imp.recorded.is_empty());
}

#[test]
fn codex_matches_readme() {
    // README: 731 lines, 97 tool calls (shell 80, apply_patch 13, update_plan 4), 0 compactions.
    let imp = load(CODEX);
    let s = &imp.stats;
    assert_eq!(s.lines, 731);
    assert_eq!(s.tool_calls, 97);
    let names = call_names(&imp.messages);
    assert_eq!(
        names,
        BTreeMap::from([
            ("apply_patch".into(), 13),
            ("shell".into(), 80),
            ("update_plan".into(), 4)
        ])
    );
    assert!(imp.recorded.is_empty());
    // 101 reasoning items, all with encrypted content.
    assert_eq!(s.reasoning_parts, 101);
    assert_eq!(s.opaque_reasoning_bytes, 220_404);
    // session_meta 1 + turn_context 103 + event_msg 319.
    assert_eq!(s.metadata_lines, 423);
    let first_reasoning = imp
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .find_map(|p| match p {
            Part::Reasoning { text } => Some(text.as_str()),
            _ => None,
        });
    assert!(first_reasoning
        .unwrap()
        .starts_with("**Searching for note in repo**\n\n[encrypted reasoning: "));
    // apply_patch is a custom (free-form) tool: its input stays a JSON string.
    let patch = imp
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .find_map(|p| match p {
            Part::ToolCall { name, args, .. } if name == "apply_patch" => Some(args),
            _ => None,
        });
    assert!(patch
        .unwrap()
        .as_str()
        .unwrap()
        .starts_with("*** Begin Patch"));
    assert!(imp.messages.iter().any(|m| m.usage.is_some()));
}

#[test]
fn openhands_rows_match_readme() {
    // README: 3 rows with 26 / 36 / 52 actions; pairs OK via `cause`.
    let text = std::fs::read_to_string(fixture(OPENHANDS)).unwrap();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let actions: Vec<usize> = rows
        .iter()
        .map(|r| {
            r["history"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e.get("action").is_some())
                .count()
        })
        .collect();
    assert_eq!(actions, [26, 36, 52]);
    // Actions that are tool calls in the prompt: all with tool_call_metadata except `finish`.
    let expected_calls = [22, 32, 49];
    for (row, calls) in expected_calls.into_iter().enumerate() {
        let imp = load_with(
            OPENHANDS,
            &Options {
                row,
                ..Options::default()
            },
        );
        assert_well_formed(OPENHANDS, &imp);
        assert_eq!(imp.stats.lines, 3);
        assert_eq!(imp.stats.tool_calls, calls, "row {row}");
        let tool_actions = rows[row]["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| {
                e.get("action").is_some()
                    && e.get("tool_call_metadata").is_some()
                    && e["action"] != "finish"
            })
            .count();
        assert_eq!(tool_actions, calls);
        assert_eq!(imp.messages[0].role, Role::System);
        assert_eq!(imp.messages[1].role, Role::User);
        assert!(imp.recorded.is_empty());
    }
    // Row 0: the recall observation becomes workspace context; `finish` becomes assistant text.
    let imp = load(OPENHANDS);
    assert!(imp.messages[2].text().contains("<RUNTIME_INFORMATION>"));
    assert!(imp.messages[2]
        .text()
        .contains("keyword match for \"github\""));
    assert_eq!(imp.messages.last().unwrap().role, Role::Assistant);
    let first_result = imp.messages.iter().find(|m| m.role == Role::Tool).unwrap();
    assert!(first_result
        .searchable_text()
        .ends_with("[Command finished with exit code 0]"));
    // Row 1 has an error observation without a call: a user message.
    let imp = load_with(
        OPENHANDS,
        &Options {
            row: 1,
            ..Options::default()
        },
    );
    assert!(imp.messages.iter().any(|m| m.role == Role::User
        && m.text()
            .ends_with("[Error occurred in processing last action]")));
    let err = import(
        &fixture(OPENHANDS),
        &Options {
            row: 3,
            ..Options::default()
        },
    )
    .unwrap_err();
    assert!(err.message.contains("row 3 not found"), "{err}");
}

#[test]
fn swe_agent_matches_readme() {
    // README: 12 steps, 26 history messages, text actions.
    let imp = load(SWE_AGENT);
    let s = &imp.stats;
    assert_eq!((s.tool_calls, s.tool_pairs), (12, 12));
    // 26 history messages + the final `submit` observation taken from trajectory[11].
    assert_eq!(s.messages, 27);
    assert_eq!(imp.messages[0].role, Role::System);
    assert_eq!(
        (imp.messages[1].role, imp.messages[2].role),
        (Role::User, Role::User)
    );
    let Part::ToolCall { name, args, .. } = &imp.messages[3].parts[1] else {
        panic!()
    };
    assert_eq!(
        (name.as_str(), args["command"].as_str()),
        ("bash", Some("create reproduce_bug.py\n"))
    );
    let last = imp.messages.last().unwrap();
    assert!(matches!(&last.parts[0], Part::ToolResult { text, .. } if text.contains("diff --git")));
}

#[test]
fn readme_lists_every_copied_transcript() {
    let readme = std::fs::read_to_string(fixture("README.md")).unwrap();
    for (name, _) in FIXTURES {
        assert!(readme.contains(name), "{name} has a provenance row");
    }
}

// ---- synthetic inputs ----

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A temporary file with `bytes`, removed on drop.
struct Temp(PathBuf);

impl Temp {
    fn new(bytes: &[u8]) -> Temp {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "compactbench-import-{}-{n}.txt",
            std::process::id()
        ));
        std::fs::write(&path, bytes).unwrap();
        Temp(path)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn run(bytes: &[u8], format: Option<Format>, lenient: bool) -> Result<Imported, ImportError> {
    let t = Temp::new(bytes);
    import(
        &t.0,
        &Options {
            format,
            lenient,
            row: 0,
        },
    )
}

fn lines(ls: &[&str]) -> Vec<u8> {
    let mut s = ls.join("\n");
    s.push('\n');
    s.into_bytes()
}

#[test]
fn hostile_inputs_never_panic() {
    let fixtures: Vec<Vec<u8>> = FIXTURES
        .iter()
        .map(|(n, _)| std::fs::read(fixture(n)).unwrap())
        .collect();
    let mut inputs: Vec<(String, Vec<u8>)> = vec![
        ("empty".into(), Vec::new()),
        ("blank".into(), b"\n\n  \r\n".to_vec()),
        ("garbage".into(), (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()),
        ("invalid utf-8".into(), b"{\"type\":\"user\",\"message\":{\"content\":\"\xff\xfe\"}}\n".to_vec()),
        ("scalar lines".into(), b"1\n\"x\"\nnull\n[]\ntrue\n".to_vec()),
        ("nested nulls".into(), b"{\"type\":null,\"message\":null,\"payload\":null,\"history\":null}\n".to_vec()),
        ("wrong types".into(), b"{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"tool_use\",\"id\":1}]}}\n{\"type\":\"response_item\",\"payload\":{\"type\":\"function_call\",\"call_id\":[],\"name\":{},\"arguments\":3}}\n{\"type\":\"session\"}\n{\"type\":\"message\",\"message\":{\"role\":\"assistant\",\"content\":\"x\"}}\n".to_vec()),
        ("deep json".into(), format!("{}{}", "[".repeat(200_000), "]".repeat(200_000)).into_bytes()),
    ];
    for (i, f) in fixtures.iter().enumerate() {
        // Truncated mid-line, at several points, and with bytes flipped.
        for cut in [1, 17, 500, 5_000, 70_000] {
            inputs.push((
                format!("{} cut at {cut}", FIXTURES[i].0),
                f[..f.len().min(cut)].to_vec(),
            ));
        }
        let mut flipped = f[..f.len().min(100_000)].to_vec();
        for k in (0..flipped.len()).step_by(997) {
            flipped[k] ^= 0x5a;
        }
        inputs.push((format!("{} flipped", FIXTURES[i].0), flipped));
    }
    let mut formats: Vec<Option<Format>> = Format::ALL.iter().copied().map(Some).collect();
    formats.push(None);
    for (label, bytes) in &inputs {
        for format in &formats {
            for lenient in [false, true] {
                // Must return, not panic; wrong-format and broken inputs must not import silently
                // as something else unless lenient skipping made sense of them.
                let r = run(bytes, *format, lenient);
                if let Ok(imp) = &r {
                    assert_eq!(imp.stats.messages, imp.messages.len(), "{label}");
                }
            }
        }
    }
    // A JSONL file cut mid-line: strict names the broken last line, lenient skips it.
    for (i, (name, format)) in FIXTURES.iter().enumerate() {
        if matches!(format, Format::OpenHands | Format::SweAgent) {
            continue;
        }
        let cut = &fixtures[i][..20_000];
        let complete = cut.iter().filter(|&&b| b == b'\n').count();
        let err = run(cut, Some(*format), false).unwrap_err();
        assert_eq!(err.line, Some(complete + 1), "{name}: {err}");
        let imp = run(cut, Some(*format), true).unwrap();
        assert_eq!(
            (imp.stats.skipped_lines, imp.stats.lines),
            (1, complete + 1),
            "{name}"
        );
    }
    // The .traj cut anywhere is one broken document.
    let traj = &fixtures[6];
    assert!(run(&traj[..traj.len() / 2], Some(Format::SweAgent), true)
        .unwrap_err()
        .message
        .starts_with("invalid JSON"));
    assert_eq!(Format::detect(&traj[..200]), Some(Format::SweAgent));
    // Specific expectations.
    for format in &formats {
        for lenient in [false, true] {
            assert!(run(b"", *format, lenient)
                .unwrap_err()
                .message
                .contains("empty"));
            assert!(
                run(&inputs[2].1, *format, lenient).is_err(),
                "garbage as {format:?}"
            );
            assert!(
                run(&inputs[4].1, *format, lenient).is_err(),
                "scalars as {format:?}"
            );
        }
    }
    // Every fixture read as every other format fails in strict mode, except where a format is a
    // structural superset (none of ours are).
    for (i, (name, own)) in FIXTURES.iter().enumerate() {
        for other in Format::ALL {
            if other != *own {
                assert!(
                    run(&fixtures[i], Some(other), false).is_err(),
                    "{name} as {other}"
                );
            }
        }
    }
}

#[test]
fn errors_name_file_line_and_field() {
    let bad = lines(&[
        r#"{"type":"user","message":{"role":"user","content":"hi"}}"#,
        r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"ok"}]}}"#,
        r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","name":"Read","input":{}}]}}"#,
        r#"{"type":"user","message":{"content":"bye"}}"#,
    ]);
    let t = Temp::new(&bad);
    let err = import(
        &t.0,
        &Options {
            format: Some(Format::ClaudeCode),
            ..Options::default()
        },
    )
    .unwrap_err();
    assert_eq!(err.line, Some(3));
    assert_eq!(err.message, "missing field `message.content[0].id`");
    assert_eq!(
        err.to_string(),
        format!("{}:3: missing field `message.content[0].id`", t.0.display())
    );
    let imp = import(
        &t.0,
        &Options {
            format: Some(Format::ClaudeCode),
            lenient: true,
            row: 0,
        },
    )
    .unwrap();
    assert_eq!(imp.stats.skipped_lines, 1);
    assert_eq!(imp.messages.len(), 3);

    let err = run(
        &lines(&[r#"{"type":"session","id":"s"}"#, "{not json"]),
        Some(Format::Pi),
        false,
    )
    .unwrap_err();
    assert_eq!(err.line, Some(2));
    assert!(err.message.starts_with("invalid JSON"), "{err}");
    let err = run(
        b"{\"type\":\"session_meta\",\"payload\":{}}\n\xff\n",
        Some(Format::Codex),
        false,
    )
    .unwrap_err();
    assert_eq!(
        (err.line, err.message.as_str()),
        (Some(2), "invalid UTF-8 at byte 0")
    );
    let err = run(&lines(&[r#"{"type":"response_item","payload":{"type":"function_call","call_id":"c","name":"shell","arguments":5}}"#]), Some(Format::Codex), false).unwrap_err();
    assert_eq!(
        err.message,
        "field `payload.arguments` must be a string, found a number"
    );
    let err = run(
        br#"{"history":[{"role":"system","content":"s"},{"content":"x"}]}"#,
        Some(Format::SweAgent),
        false,
    )
    .unwrap_err();
    assert_eq!(err.message, "history[1]: missing field `role`");
    let err = run(&lines(&[r#"{"instance_id":"x","history":[{"id":0,"action":"run","tool_call_metadata":{"tool_call_id":"t"}}]}"#]), Some(Format::OpenHands), false).unwrap_err();
    assert_eq!(
        (err.line, err.message.as_str()),
        (
            Some(1),
            "history[0]: missing field `history[0].tool_call_metadata.function_name`"
        )
    );
    let err = run(
        &lines(&[r#"{"type":"message","message":{"role":"user","content":"hi"}}"#]),
        Some(Format::Pi),
        true,
    )
    .unwrap_err();
    assert!(
        err.message
            .contains("first entry is not a `session` header"),
        "{err}"
    );
}

#[test]
fn claude_code_streaming_merge_duplicates_and_compaction_2x() {
    let input = lines(&[
        r#"{"type":"user","sessionId":"s","isSidechain":false,"message":{"role":"user","content":"go"}}"#,
        r#"{"type":"assistant","sessionId":"s","message":{"id":"m1","content":[{"type":"thinking","thinking":"plan","signature":"sig"}]}}"#,
        r#"{"type":"assistant","sessionId":"s","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"a"}}]}}"#,
        r#"{"type":"user","sessionId":"s","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"A"}]},"toolUseResult":{"file":{"content":"A"}}}"#,
        r#"{"type":"assistant","sessionId":"s","message":{"id":"m1","content":[{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"x"}}],"usage":{"input_tokens":3,"cache_creation_input_tokens":10,"cache_read_input_tokens":100,"output_tokens":7}}}"#,
        r#"{"type":"user","sessionId":"s","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"boom"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgoAAAANSUhEUgAAB4AAAAQ4CAYAAAD"}}],"is_error":true}]},"toolUseResult":"Error: boom"}"#,
        r#"{"type":"assistant","sessionId":"s","isSidechain":true,"message":{"id":"s1","content":[{"type":"tool_use","id":"x","name":"Grep","input":{}}]}}"#,
        r#"{"type":"assistant","sessionId":"s","message":{"id":"m2","content":[{"type":"redacted_thinking","data":"QUJD"},{"type":"text","text":"done"}]}}"#,
        r#"{"type":"system","subtype":"compact_boundary","sessionId":"s","version":"2.0.14","content":"Conversation compacted","compactMetadata":{"trigger":"auto","preTokens":155000}}"#,
        r#"{"type":"user","sessionId":"s","isCompactSummary":true,"message":{"role":"user","content":"This session is being continued... SUMMARY"}}"#,
        r#"{"type":"user","sessionId":"s","message":{"role":"user","content":[{"type":"text","text":"next"}]}}"#,
    ]);
    let imp = run(&input, None, false).unwrap();
    assert_eq!(imp.format, Format::ClaudeCode);
    assert_well_formed("synthetic", &imp);
    let roles: Vec<Role> = imp.messages.iter().map(|m| m.role).collect();
    use Role::*;
    assert_eq!(roles, [User, Assistant, Tool, Tool, Assistant, User, User]);
    assert_eq!(
        imp.messages[1].tool_call_ids().collect::<Vec<_>>(),
        ["t1", "t2"]
    );
    assert_eq!(
        imp.messages[1].usage,
        Some(compactbench_core::Usage {
            input: 3,
            output: 7,
            cache_read: 100,
            cache_write: 10,
        })
    );
    assert!(
        matches!(&imp.messages[3].parts[0], Part::ToolResult { text, is_error: true, name, .. } if text == "boom" && name == "Bash")
    );
    // 1920x1080 PNG: fits 1.15 MP -> about 1,533 tokens.
    assert!(
        matches!(&imp.messages[3].parts[1], Part::Media { mime, tokens } if mime == "image/png" && (1400..1600).contains(tokens))
    );
    let s = &imp.stats;
    assert_eq!(
        (
            s.tool_calls,
            s.sidechain_lines,
            s.excluded_tool_calls,
            s.media_parts
        ),
        (2, 1, 1, 1)
    );
    assert_eq!((s.reasoning_parts, s.opaque_reasoning_bytes), (2, 4));
    assert_eq!(
        imp.recorded,
        [RecordedCompaction {
            message_index: 5,
            trigger: Some("auto".into()),
            tokens_before: Some(155_000),
            summary: Some("This session is being continued... SUMMARY".into()),
            first_kept_message: None,
            release: Some("2.0.14".into()),
            recorded_at: None,
        }]
    );
}

#[test]
fn codex_grouping_custom_tools_and_compacted() {
    let input = lines(&[
        r#"{"timestamp":"t","type":"session_meta","payload":{"id":"x","instructions":"i"}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"dev"}]}}"#,
        r#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","image_url":"data:image/gif;base64,R0lGODlhIAAQAIAAAP"}]}}"#,
        r#"{"type":"response_item","payload":{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"raw"}],"encrypted_content":null}}"#,
        r#"{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"false\"]}","call_id":"c1"}}"#,
        r#"{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"not json","call_id":"c2"}}"#,
        r#"{"type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"{\"output\":\"\",\"metadata\":{\"exit_code\":1}}"}}"#,
        r#"{"type":"response_item","payload":{"type":"function_call_output","call_id":"c2","output":"ok"}}"#,
        r#"{"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":100,"cached_input_tokens":60,"output_tokens":5}}}}"#,
        r#"{"type":"compacted","payload":{"message":"SUMMARY"}}"#,
        r#"{"type":"response_item","payload":{"type":"custom_tool_call","call_id":"c3","name":"apply_patch","input":"*** Begin Patch"}}"#,
        r#"{"type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"c3","output":"done"}}"#,
        r#"{"type":"response_item","payload":{"type":"ghost_snapshot"}}"#,
    ]);
    let imp = run(&input, None, false).unwrap();
    assert_eq!(imp.format, Format::Codex);
    assert_well_formed("synthetic", &imp);
    use Role::*;
    assert_eq!(
        imp.messages.iter().map(|m| m.role).collect::<Vec<_>>(),
        [System, User, Assistant, Tool, Tool, Assistant, Tool]
    );
    assert!(
        matches!(&imp.messages[1].parts[1], Part::Media { mime, tokens: 1 } if mime == "image/gif")
    );
    assert!(matches!(&imp.messages[2].parts[0], Part::Reasoning { text } if text == "raw"));
    assert!(
        matches!(&imp.messages[2].parts[2], Part::ToolCall { args, .. } if args == &serde_json::json!("not json"))
    );
    assert!(matches!(
        &imp.messages[3].parts[0],
        Part::ToolResult { is_error: true, .. }
    ));
    assert!(
        matches!(&imp.messages[4].parts[0], Part::ToolResult { is_error: false, name, .. } if name == "shell")
    );
    assert_eq!(
        imp.messages[2].usage,
        Some(compactbench_core::Usage {
            input: 40,
            output: 5,
            cache_read: 60,
            ..Default::default()
        })
    );
    assert_eq!(
        imp.recorded,
        [RecordedCompaction {
            message_index: 5,
            summary: Some("SUMMARY".into()),
            ..Default::default()
        }]
    );
    assert_eq!(imp.stats.metadata_lines, 3);
}

#[test]
fn pi_v3_follows_the_active_branch() {
    let input = lines(&[
        r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#,
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user","content":"first"}}"#,
        r#"{"type":"message","id":"b","parentId":"a","timestamp":"t","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"x"}}],"stopReason":"toolUse","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4}}}"#,
        r#"{"type":"message","id":"c","parentId":"b","timestamp":"t","message":{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"X"}],"isError":false}}"#,
        r#"{"type":"message","id":"d","parentId":"c","timestamp":"t","message":{"role":"user","content":"abandoned branch"}}"#,
        r#"{"type":"message","id":"e","parentId":"c","timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"kept"},{"type":"toolCall","id":"c2","name":"bash","arguments":{}}],"stopReason":"toolUse"}}"#,
        r#"{"type":"compaction","id":"f","parentId":"e","timestamp":"t","summary":"S","firstKeptEntryId":"c","tokensBefore":1234}"#,
        r#"{"type":"message","id":"g","parentId":"f","timestamp":"t","message":{"role":"bashExecution","command":"ls","output":"","exitCode":2,"cancelled":false,"truncated":false}}"#,
        r#"{"type":"message","id":"h","parentId":"g","timestamp":"t","message":{"role":"assistant","content":[{"type":"toolCall","id":"c3","name":"bash","arguments":{}}],"stopReason":"aborted"}}"#,
    ]);
    let imp = run(&input, None, false).unwrap();
    assert_eq!(imp.format, Format::Pi);
    assert_well_formed("synthetic", &imp);
    let texts: Vec<String> = imp.messages.iter().map(Message::searchable_text).collect();
    assert_eq!(
        texts,
        [
            "first",
            "read {\"path\":\"x\"}",
            "X",
            "kept\nbash {}",
            "No result provided",
            "Ran `ls`\n(no output)\n\nCommand exited with code 2"
        ]
    );
    assert_eq!(
        imp.messages[1].usage,
        Some(compactbench_core::Usage {
            input: 1,
            output: 2,
            cache_read: 3,
            cache_write: 4,
        })
    );
    let s = &imp.stats;
    assert_eq!(
        (
            s.synthetic_results,
            s.dropped_messages,
            s.excluded_tool_calls
        ),
        (1, 2, 1)
    );
    assert_eq!(
        imp.recorded,
        [RecordedCompaction {
            message_index: 5,
            trigger: None,
            tokens_before: Some(1234),
            summary: Some("S".into()),
            first_kept_message: Some(2),
            release: None,
            recorded_at: Some("t".into()),
        }]
    );
}

#[test]
fn swe_agent_structured_history() {
    let doc = br#"{"history":[
        {"role":"system","content":"sys"},
        {"role":"user","content":[{"type":"text","text":"task"}]},
        {"role":"assistant","content":"look","tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},
        {"role":"tool","content":"a b","tool_call_ids":["call_1"]},
        {"role":"assistant","content":"no action here"}
    ]}"#;
    let imp = run(doc, None, false).unwrap();
    assert_eq!(imp.format, Format::SweAgent);
    assert_well_formed("synthetic", &imp);
    assert_eq!(imp.stats.tool_calls, 1);
    assert!(
        matches!(&imp.messages[3].parts[0], Part::ToolResult { name, text, .. } if name == "bash" && text == "a b")
    );
    assert_eq!(imp.messages[4].text(), "no action here");
}

#[test]
fn format_names_round_trip() {
    for f in Format::ALL {
        assert_eq!(f.name().parse::<Format>(), Ok(f));
        assert_eq!(f.to_string(), f.name());
    }
    assert_eq!("Claude_Code".parse::<Format>(), Ok(Format::ClaudeCode));
    assert_eq!("sweagent".parse::<Format>(), Ok(Format::SweAgent));
    assert!("auto".parse::<Format>().is_err());
    assert_eq!(Format::detect(b""), None);
    assert_eq!(Format::detect(b"hello"), None);
    assert_eq!(
        serde_json::to_string(&Format::SweAgent).unwrap(),
        "\"swe-agent\""
    );
}

#[test]
fn media_estimates() {
    use crate::media::{decode_base64, dimensions, image_tokens};
    assert_eq!(decode_base64("aGVsbG8="), b"hello");
    assert_eq!(image_tokens(200, 200), 54);
    assert_eq!(image_tokens(1000, 1000), 1334);
    // 4000x3000 is scaled to fit 1.15 MP: about 1,533 tokens.
    assert_eq!(image_tokens(4000, 3000), 1534);
    let jpeg = [
        0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 17, 8, 0x01, 0x2C, 0x02, 0x58,
    ];
    assert_eq!(dimensions(&jpeg), Some((600, 300)));
    assert_eq!(dimensions(b"GIF89a\x20\x00\x10\x00"), Some((32, 16)));
    assert_eq!(dimensions(b"%PDF-1.4"), None);
    assert!(matches!(
        crate::media::media_part("application/pdf", Some("JVBERi0xLjQ=")),
        Part::Media {
            tokens: MEDIA_FALLBACK_TOKENS,
            ..
        }
    ));
}

/// Found by the importer fuzz target: a `.traj` that is valid JSON but not an object named
/// neither a line nor a field.
#[test]
fn a_traj_that_is_not_an_object_names_its_line() {
    let err = run(b"\n  [1, 2]\n", Some(Format::SweAgent), false).unwrap_err();
    assert_eq!(err.line, Some(2), "{err}");
    assert_eq!(err.message, "expected a JSON object, found an array");
    assert!(err.to_string().ends_with(":2: expected a JSON object, found an array"), "{err}");
}

//! The server, the script, the player and the request analysis, without any harness CLI.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use compactbench_core::{Message, Part, Role};
use compactbench_eval::session::{Session, Step};
use compactbench_tokens::TokenCounter;
use serde_json::{json, Value};

use super::analyze::{claude_session, Facts};
use super::run::{cline_summaries, gemini_compressions, Flavor, Player, Run, CLAUDE_COMPACT_MARKER};
use super::script::{build, Tools};
use super::server::{Block, Limits, Reply, Responder, Server, Wire};

/// Answers every request with one tool call and 100 input tokens, counting them.
struct Fixed;

impl Responder for Fixed {
    fn respond(&mut self, wire: Wire, _body: &Value) -> (String, Reply) {
        let blocks = vec![Block::Text("Looking.".into()), Block::Call { id: "toolu_1".into(), name: "Bash".into(), input: json!({"command": "ls"}) }];
        (format!("{wire:?}"), Reply { blocks, input_tokens: 100, output_tokens: 7 })
    }
}

/// One HTTP/1.1 exchange: status line, headers and body as text.
fn post(server: &Server, method: &str, path: &str, body: &Value) -> String {
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = body.to_string();
    write!(stream, "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn the_server_streams_both_wires_records_and_keeps_its_budget() {
    let server = Server::start(Box::new(Fixed), Limits { max_requests: 3, lifetime: Duration::from_secs(30) }).unwrap();
    assert!(server.url().starts_with("http://127.0.0.1:"));

    let messages = post(&server, "POST", "/v1/messages?beta=true", &json!({"model": "m", "stream": true, "messages": []}));
    assert!(messages.starts_with("HTTP/1.1 200") && messages.contains("text/event-stream"), "{messages}");
    let order: Vec<&str> = messages.lines().filter_map(|l| l.strip_prefix("event: ")).collect();
    assert_eq!(order, [
        "message_start", "content_block_start", "content_block_delta", "content_block_stop", "content_block_start", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop",
    ]);
    assert!(messages.contains(r#""partial_json":"{\"command\":\"ls\"}""#) && messages.contains(r#""stop_reason":"tool_use""#));
    assert!(messages.contains(r#""input_tokens":100"#) && messages.contains(r#""output_tokens":7"#));

    let plain = post(&server, "POST", "/v1/messages", &json!({"model": "m", "messages": []}));
    let json_body: Value = serde_json::from_str(plain.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(json_body["content"][1]["name"], "Bash");

    let responses = post(&server, "POST", "/v1/responses", &json!({"model": "m", "stream": true, "input": []}));
    assert!(responses.contains("event: response.completed") && responses.contains(r#""type":"function_call""#) && responses.contains(r#""call_id":"toolu_1""#));

    assert!(post(&server, "GET", "/v1/models", &json!({})).starts_with("HTTP/1.1 404"));
    let spent = post(&server, "POST", "/v1/messages", &json!({"model": "m", "messages": []}));
    assert!(spent.starts_with("HTTP/1.1 400") && spent.contains("budget is spent"), "{spent}");
    let kinds: Vec<String> = server.records().into_iter().map(|r| r.kind).collect();
    assert_eq!(kinds, ["Anthropic", "Anthropic", "Responses"]);
}

#[test]
fn the_server_speaks_gemini_streamed_and_whole_and_counts_tokens_itself() {
    let server = Server::start(Box::new(Fixed), Limits { max_requests: 4, lifetime: Duration::from_secs(30) }).unwrap();
    let request = json!({"contents": [{"role": "user", "parts": [{"text": "Fix the parser."}]}]});
    let body_of = |response: &str| response.split("\r\n\r\n").nth(1).unwrap().to_owned();

    let streamed = post(&server, "POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", &request);
    assert!(streamed.starts_with("HTTP/1.1 200") && streamed.contains("text/event-stream"), "{streamed}");
    let event = body_of(&streamed);
    let data: Value = serde_json::from_str(event.strip_prefix("data: ").unwrap().trim_end()).unwrap();
    let candidate = &data["candidates"][0];
    assert_eq!(candidate["content"]["role"], "model");
    assert_eq!(candidate["content"]["parts"][0], json!({"text": "Looking."}));
    assert_eq!(candidate["content"]["parts"][1], json!({"functionCall": {"id": "toolu_1", "name": "Bash", "args": {"command": "ls"}}}));
    assert_eq!(candidate["finishReason"], "STOP");
    assert_eq!(data["usageMetadata"], json!({"promptTokenCount": 100, "candidatesTokenCount": 7, "totalTokenCount": 107}));
    assert_eq!(data["modelVersion"], "gemini-2.5-pro", "the model comes from the path");

    let whole = post(&server, "POST", "/v1beta/models/gemini-2.5-pro:generateContent", &request);
    assert!(whole.contains("application/json"), "{whole}");
    let whole: Value = serde_json::from_str(&body_of(&whole)).unwrap();
    assert_eq!(whole["candidates"], data["candidates"]);

    let counted = post(&server, "POST", "/v1beta/models/gemini-2.5-pro:countTokens", &request);
    let counted: Value = serde_json::from_str(&body_of(&counted)).unwrap();
    assert_eq!(counted["totalTokens"], request["contents"].to_string().len() / 4);

    assert!(post(&server, "POST", "/v1beta/models/gemini-2.5-pro:embedContent", &request).starts_with("HTTP/1.1 404"));
    let records = server.records();
    let kinds: Vec<(Wire, &str)> = records.iter().map(|r| (r.wire, r.kind.as_str())).collect();
    assert_eq!(kinds, [(Wire::Gemini, "Gemini"), (Wire::Gemini, "Gemini"), (Wire::Gemini, "count_tokens")], "the count is not a model turn");
}

#[test]
fn the_server_speaks_chat_completions_streamed_with_usage_and_whole() {
    let server = Server::start(Box::new(Fixed), Limits { max_requests: 3, lifetime: Duration::from_secs(30) }).unwrap();
    let body_of = |response: &str| response.split("\r\n\r\n").nth(1).unwrap().to_owned();
    let request = |stream: bool, usage: bool| {
        json!({"model": "m", "stream": stream, "stream_options": {"include_usage": usage}, "messages": [{"role": "user", "content": "Fix the parser."}]})
    };

    let streamed = post(&server, "POST", "/v1/chat/completions", &request(true, true));
    assert!(streamed.starts_with("HTTP/1.1 200") && streamed.contains("text/event-stream"), "{streamed}");
    let events: Vec<String> = body_of(&streamed).lines().filter_map(|l| l.strip_prefix("data: ")).map(str::to_owned).collect();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect();
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk" && c["id"] == chunks[0]["id"]));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(chunks[1]["choices"][0]["delta"]["content"], "Looking.");
    let call = &chunks[2]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(*call, json!({"index": 0, "id": "toolu_1", "type": "function", "function": {"name": "Bash", "arguments": "{\"command\":\"ls\"}"}}));
    assert_eq!(chunks[3]["choices"][0]["finish_reason"], "tool_calls");
    let last = chunks.last().unwrap();
    assert_eq!((last["choices"].clone(), last["usage"].clone()), (json!([]), json!({"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107})));

    let without = post(&server, "POST", "/v1/chat/completions", &request(true, false));
    assert!(!without.contains("prompt_tokens"), "usage only when asked: {without}");

    let whole: Value = serde_json::from_str(&body_of(&post(&server, "POST", "/v1/chat/completions", &request(false, false)))).unwrap();
    assert_eq!(whole["choices"][0]["message"]["content"], "Looking.");
    assert_eq!(whole["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "Bash");
    assert_eq!((whole["choices"][0]["finish_reason"].as_str(), whole["usage"]["prompt_tokens"].as_u64()), (Some("tool_calls"), Some(100)));
    let kinds: Vec<Wire> = server.records().into_iter().map(|r| r.wire).collect();
    assert_eq!(kinds, [Wire::Chat; 3]);
}

fn session() -> Session {
    let call = |id: &str, name: &str, args: Value| Message::new(Role::Assistant, vec![Part::ToolCall { id: id.into(), name: name.into(), args }]);
    Session {
        system: Message::system("You are a coding agent."),
        steps: vec![
            Step::User(Message::user("Fix the parser.")),
            Step::Assistant(Message::new(Role::Assistant, vec![Part::text("Reading it."), Part::ToolCall { id: "c1".into(), name: "read".into(), args: json!({"path": "src/parser.rs"}) }])),
            Step::Tool(Message::tool_result("c1", "read", "fn parse() {}", false)),
            Step::Assistant(call("c2", "bash", json!({"command": "cargo test parser::"}))),
            Step::Tool(Message::tool_result("c2", "bash", "test parser::a ... FAILED", true)),
            Step::Assistant(Message::assistant("The parser test fails.")),
            Step::User(Message::user("Go on.")),
            Step::Assistant(Message::assistant("Done.")),
        ],
        facts: Vec::new(),
        spans: Vec::new(),
        instructions: Default::default(),
    }
}

#[test]
fn a_session_becomes_turns_of_replies_with_the_files_their_calls_need() {
    let mut script = build(&session(), Tools::ClaudeCode, "/w", &TokenCounter::default());
    assert_eq!(script.turns.len(), 2);
    assert_eq!((script.turns[0].user.as_str(), script.turns[0].replies.len(), script.requests()), ("Fix the parser.", 3, 4));
    let first = &script.turns[0].replies[0];
    assert_eq!(first.reply.blocks[1], Block::Call { id: "toolu_cb0000".into(), name: "Read".into(), input: json!({"file_path": "/w/src/parser.rs"}) });
    assert_eq!(first.files, [("src/parser.rs".to_owned(), "fn parse() {}".to_owned())]);
    let Block::Call { name, input, .. } = &script.turns[0].replies[1].reply.blocks[0] else { panic!("a call") };
    assert_eq!((name.as_str(), input["command"].as_str()), ("Bash", Some("cat .compactbench/0001.out; exit 1")));
    assert_eq!(script.turns[0].replies[1].files[0].1, "test parser::a ... FAILED");
    let prefixes = script.prefixes();
    assert!(prefixes.windows(2).all(|w| w[0] < w[1]), "each prompt holds more of the session: {prefixes:?}");
    script.place(1_000, 2, 10);
    assert_eq!(script.overhead, 1_000 - prefixes[2] - 10);
}

#[test]
fn a_session_becomes_gemini_cli_tool_calls() {
    let script = build(&session(), Tools::Gemini, "/w", &TokenCounter::default());
    let first = &script.turns[0].replies[0];
    assert_eq!(first.reply.blocks[1], Block::Call { id: "call_cb0000".into(), name: "read_file".into(), input: json!({"file_path": "/w/src/parser.rs"}) });
    assert_eq!(first.files, [("src/parser.rs".to_owned(), "fn parse() {}".to_owned())]);
    let Block::Call { name, input, .. } = &script.turns[0].replies[1].reply.blocks[0] else { panic!("a call") };
    assert_eq!((name.as_str(), input["command"].as_str()), ("run_shell_command", Some("cat .compactbench/0001.out; exit 1")));
}

#[test]
fn the_player_tells_gemini_cli_turns_compressions_and_side_requests_apart() {
    let dir = tempfile::tempdir().unwrap();
    let script = build(&session(), Tools::Gemini, &dir.path().to_string_lossy(), &TokenCounter::default());
    let replies: Vec<Reply> = script.turns[0].replies.iter().map(|p| p.reply.clone()).collect();
    let mut player = Player::new(script, dir.path().to_path_buf(), Flavor::Gemini);
    let tools = json!([{"functionDeclarations": [{"name": "read_file"}, {"name": "run_shell_command"}]}]);
    let request = |contents: Value, tools: &Value| json!({"systemInstruction": {"parts": [{"text": "sys"}]}, "tools": tools, "contents": contents});
    let user = json!([{"role": "user", "parts": [{"text": "<session_context>\n</session_context>"}, {"text": "Fix the parser."}]}]);
    assert_eq!(player.respond(Wire::Gemini, &request(user.clone(), &Value::Null)).0, "side", "no tools: not the main loop");
    let (kind, reply) = player.respond(Wire::Gemini, &request(user, &tools));
    assert_eq!((kind.as_str(), &reply.blocks), ("main", &replies[0].blocks));
    let results = json!([{"role": "user", "parts": [{"functionResponse": {"id": "call_cb0000", "name": "read_file", "response": {"output": "fn parse() {}"}}}]}]);
    let (_, reply) = player.respond(Wire::Gemini, &request(results.clone(), &tools));
    assert_eq!(reply.blocks, replies[1].blocks, "function responses go on with the turn");
    for instruction in ["Generate a new <state_snapshot> based on the provided history.", "Critically evaluate the <state_snapshot> you just generated."] {
        let compress = json!([{"role": "user", "parts": [{"text": instruction}]}]);
        let (kind, reply) = player.respond(Wire::Gemini, &request(compress, &Value::Null));
        assert!(kind == "compaction" && matches!(&reply.blocks[0], Block::Text(t) if t == crate::ours::FIXED_SUMMARY), "{kind}");
    }
    assert_eq!(player.respond(Wire::Gemini, &request(results, &tools)).0, "after_compaction");
}

#[test]
fn gemini_cli_compression_events_are_read_from_its_telemetry_file() {
    // The local exporter writes pretty-printed records one after another, not JSON lines.
    let telemetry = "{\n  \"attributes\": {\"event.name\": \"gemini_cli.api_request\"}\n}\n{\n  \"attributes\": {\n    \"event.name\": \"gemini_cli.chat_compression\",\n    \"tokens_before\": 524451,\n    \"tokens_after\": 1682\n  }\n}\n";
    let events = gemini_compressions(telemetry);
    assert_eq!(events.len(), 1);
    assert_eq!((events[0]["tokens_before"].as_u64(), events[0]["tokens_after"].as_u64()), (Some(524_451), Some(1_682)));
    assert!(gemini_compressions("").is_empty());
}

#[test]
fn cline_summary_metadata_is_read_from_its_compaction_record() {
    let home = tempfile::tempdir().unwrap();
    assert!(cline_summaries(home.path()).is_empty(), "no sessions folder");
    let session = home.path().join(".cline/data/sessions/1796677500317_2556b");
    std::fs::create_dir_all(&session).unwrap();
    let record = json!({"version": 1, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Context summary:\n\nFixed."}],
         "metadata": {"kind": "compaction_summary", "displayRole": "system", "userRunSpan": 1, "tokensBefore": 11896}},
        {"id": "msg_1", "role": "assistant", "content": []},
    ]});
    std::fs::write(session.join("1796677500317_2556b.compaction.json"), record.to_string()).unwrap();
    std::fs::write(session.join("1796677500317_2556b.messages.json"), "{}").unwrap();
    let summaries = cline_summaries(home.path());
    assert_eq!(summaries.len(), 1);
    assert_eq!(summaries[0]["tokensBefore"].as_u64(), Some(11_896));
}

fn request(messages: Value, tools: bool) -> Value {
    let tools = if tools { json!([{"name": "Bash"}, {"name": "Read"}]) } else { json!([]) };
    json!({"model": "claude-sonnet-4-5", "system": [{"type": "text", "text": "sys"}], "tools": tools, "messages": messages})
}

#[test]
fn the_player_answers_turns_in_order_and_stops_after_the_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let script = build(&session(), Tools::ClaudeCode, &dir.path().to_string_lossy(), &TokenCounter::default());
    let replies: Vec<Reply> = script.turns[0].replies.iter().map(|p| p.reply.clone()).collect();
    let mut player = Player::new(script, dir.path().to_path_buf(), Flavor::ClaudeCode);
    let user = json!([{"role": "user", "content": "Fix the parser."}]);
    assert_eq!(player.respond(Wire::Anthropic, &request(user.clone(), false)).0, "side", "no Bash tool: not the main loop");
    let (kind, reply) = player.respond(Wire::Anthropic, &request(user, true));
    assert_eq!((kind.as_str(), &reply.blocks), ("main", &replies[0].blocks));
    assert_eq!(std::fs::read_to_string(dir.path().join("src/parser.rs")).unwrap(), "fn parse() {}", "written before the reply");
    let results = json!([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_cb0000", "content": "1\tfn parse() {}"}]}]);
    let (_, reply) = player.respond(Wire::Anthropic, &request(results.clone(), true));
    assert_eq!(reply.blocks, replies[1].blocks);
    let compact = json!([{"role": "user", "content": [{"type": "text", "text": format!("{CLAUDE_COMPACT_MARKER}. Summarize.")}]}]);
    let (kind, reply) = player.respond(Wire::Anthropic, &request(compact, true));
    assert!(kind == "compaction" && matches!(&reply.blocks[0], Block::Text(t) if t.contains("<summary>")));
    assert_eq!(player.respond(Wire::Anthropic, &request(results, true)).0, "after_compaction");
}

/// A recorded Claude Code 2.1.332 run (`stale-values/s0`), trimmed: system prompt, tools and
/// reminders cut short, tool results cut to 600 characters, scratch paths renamed.
fn recorded() -> Run {
    serde_json::from_str(include_str!("../../tests/fixtures/claude-code-2.1.332-stale-values-s0.json")).unwrap()
}

#[test]
fn a_recorded_claude_code_run_yields_its_facts_and_ours() {
    let run = recorded();
    let result = claude_session("stale-values/s0", &run, "/scratch/work");
    assert_eq!(result.problem, None);
    let kept = Some(vec!["call:toolu_cb0004".to_owned(), "result:toolu_cb0004".to_owned()]);
    let theirs = Facts {
        compacted_at: Some(5),
        tokens_before: Some(68_224),
        prefix_reused: Some(true),
        instruction: Some("analysis+summary text-only".into()),
        summary_role: Some("user".into()),
        summary_index: Some(0),
        kept: kept.clone(),
        files: Some(Vec::new()),
    };
    assert_eq!(result.theirs, theirs);
    assert_eq!(result.ours, Facts { tokens_before: result.ours.tokens_before, ..theirs.clone() });
    assert_eq!(result.differing(), ["tokens_before"]);

    // Without the request after the compaction, nothing is known of what the CLI keeps.
    let mut old = run.clone();
    old.records.retain(|r| r.kind != "after_compaction");
    let result = claude_session("stale-values/s0", &old, "/scratch/work");
    assert_eq!((result.theirs.kept, result.theirs.summary_role), (None, None), "no request after the compaction: nothing to say");
}

#[test]
fn a_turn_start_compaction_re_attaches_files_on_both_sides() {
    // Recorded 2.1.332 run `stale-values/s2`, trimmed as above and to its last two main
    // requests: the compaction came as the user's next message arrived.
    let run: Run = serde_json::from_str(include_str!("../../tests/fixtures/claude-code-2.1.332-stale-values-s2-turn-start.json")).unwrap();
    let result = claude_session("stale-values/s2", &run, "/scratch/work");
    let files: Vec<String> =
        [".compactbench/0006.out", ".compactbench/0007.out", ".compactbench/0008.out", ".compactbench/0009.out", "src/core/auth.rs"].map(str::to_owned).into();
    assert_eq!(result.theirs.files.as_ref(), Some(&files), "the five newest reads, cat included");
    assert_eq!(result.theirs.kept, Some(vec!["text:Done with src/net/auth.r".to_owned()]), "the closing answer stays");
    assert_eq!((result.theirs.compacted_at, result.theirs.tokens_before), (Some(2), Some(67_007)));
    assert!(result.differing().is_empty(), "{result:#?}");
}

#[test]
fn a_recorded_codex_run_yields_its_facts_and_ours() {
    // A recorded Codex 0.171.0 run (`stale-values/s0`), trimmed: developer and contextual
    // messages and the handoff prompt cut short, tools named only, scratch paths renamed.
    let run: Run = serde_json::from_str(include_str!("../../tests/fixtures/codex-0.171.0-stale-values-s0.json")).unwrap();
    let result = super::analyze::codex_session("stale-values/s0", &run);
    assert_eq!(result.problem, None);
    let theirs = &result.theirs;
    assert_eq!((theirs.compacted_at, theirs.prefix_reused, theirs.instruction.as_deref()), (Some(5), Some(true), Some("handoff")));
    assert_eq!((theirs.summary_role.as_deref(), theirs.tokens_before, theirs.files.as_ref()), (Some("user"), None, None));
    let kept = theirs.kept.as_ref().unwrap();
    assert!(!kept.is_empty() && kept.iter().all(|k| k.starts_with("user:")), "Codex keeps the real user messages only: {kept:?}");
    assert!(result.differing().is_empty(), "{result:#?}");
}

#[test]
fn a_recorded_opencode_run_yields_its_facts_and_ours() {
    // A recorded opencode-ai 1.18.33 run (`multi-file-refactor/s0`), trimmed to its last main
    // request, the compaction request and the request after it: system prompt cut short, tools
    // named only, the serialized conversation and the tool results outside the kept tail cut,
    // scratch paths renamed. The last reply reported 69,983 + 39 tokens.
    let run: Run = serde_json::from_str(include_str!("../../tests/fixtures/opencode-1.18.33-multi-file-refactor-s0.json")).unwrap();
    let result = super::analyze::opencode_session("multi-file-refactor/s0", &run);
    assert_eq!(result.problem, None);
    let theirs = &result.theirs;
    assert_eq!((theirs.compacted_at, theirs.prefix_reused, theirs.instruction.as_deref()), (Some(1), Some(false), Some("anchored")));
    assert_eq!((theirs.summary_role.as_deref(), theirs.summary_index, theirs.tokens_before, theirs.files.as_ref()), (Some("assistant"), Some(1), None, None));
    let kept = theirs.kept.as_ref().unwrap();
    // The tail starts inside a turn (at an assistant message, which shares the summary's
    // message on the wire) and holds the next turn whole, its user message included.
    assert_eq!(kept.first().map(String::as_str), Some("text:I'll resolve what src/ne"));
    assert_eq!(kept.iter().filter(|k| k.starts_with("user:")).count(), 1);
    assert_eq!(kept.last().map(String::as_str), Some("result:toolu_cb0021"), "the results of the reply it compacted after are kept");
    assert!(result.differing().is_empty(), "{result:#?}");

    // Just under the usable context (100,000 − 32,000): neither side compacts there.
    let mut under = run.clone();
    under.records[0].reply.input_tokens = super::OPENCODE_THRESHOLD - under.records[0].reply.output_tokens - 1;
    under.records.truncate(1);
    let result = super::analyze::opencode_session("multi-file-refactor/s0", &under);
    assert_eq!((result.theirs.compacted_at, result.ours.compacted_at), (None, None));
    under.records[0].reply.input_tokens += 1;
    assert_eq!(super::analyze::opencode_session("multi-file-refactor/s0", &under).ours.compacted_at, Some(1));
}

#[test]
fn a_run_of_some_clis_replaces_their_results_and_keeps_the_others_byte_for_byte() {
    use super::report::{read_json, replace, write_json};
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../reports/fidelity");
    let reports = read_json(&committed).unwrap().expect("a committed blackbox.json");
    let dir = tempfile::tempdir().unwrap();
    write_json(dir.path(), &reports).unwrap();
    let bytes = |d: &Path| std::fs::read(d.join("blackbox.json")).unwrap();
    assert!(bytes(dir.path()) == bytes(&committed), "read and written back, the file is unchanged");

    let strategies = |r: &[super::report::HarnessReport]| r.iter().map(|r| r.strategy.clone()).collect::<Vec<_>>();
    let mut all = reports.clone();
    let mut rerun = all[0].clone();
    rerun.settings = "rerun".into();
    replace(&mut all, rerun);
    assert_eq!((strategies(&all), all[0].settings.as_str()), (strategies(&reports), "rerun"), "replaced in place");
    for (a, b) in all.iter().zip(&reports).skip(1) {
        assert_eq!(serde_json::to_string(a).unwrap(), serde_json::to_string(b).unwrap());
    }
    // A CLI not in the file yet goes to its place in `HARNESSES` order.
    let mut without = reports.clone();
    let first = without.remove(0);
    replace(&mut without, first);
    assert_eq!(strategies(&without), strategies(&reports));
}

#[test]
fn a_recorded_gemini_cli_run_yields_its_facts_and_ours() {
    // A recorded @google/gemini-cli 0.61.0 run (`chat-like/s1`), trimmed to its last two main
    // requests (the last of a turn that crossed the threshold, and the next turn's first), the
    // two compression requests (their closing instruction only) and the request after them:
    // system instruction cut short, tools named only, scratch paths renamed, telemetry event
    // reduced to its sizes.
    let run: Run = serde_json::from_str(include_str!("../../tests/fixtures/gemini-cli-0.61.0-chat-like-s1.json")).unwrap();
    let result = super::analyze::gemini_session("chat-like/s1", &run, "/scratch/work");
    assert_eq!(result.problem, None);
    let theirs = &result.theirs;
    assert_eq!((theirs.compacted_at, theirs.tokens_before, theirs.prefix_reused), (Some(2), Some(run.records[1].reply.input_tokens), Some(false)));
    assert_eq!(theirs.instruction.as_deref(), Some("snapshot + verify"), "the snapshot request, then its verification");
    assert_eq!((theirs.summary_role.as_deref(), theirs.summary_index, theirs.files.as_ref()), (Some("user"), Some(0), None));
    let kept = theirs.kept.as_ref().unwrap();
    assert!(kept[0].starts_with("user:"), "cut at a user message: {kept:?}");
    assert_eq!(kept.last().map(String::as_str), Some("result:call_cb0013"), "the responses the request after it sends");
    assert!(result.differing().is_empty(), "{result:#?}");

    // The reply before the turn's first request reported over the threshold, yet the CLI (a new
    // process, `--resume latest`) did not compress there: it starts from its estimate of the
    // resumed history. Our crate, given that reply's usage, would.
    let (strategy, model) = super::analyze::gemini_strategy();
    assert!(run.records[0].reply.input_tokens >= super::GEMINI_THRESHOLD);
    let contents = run.records[1].body["contents"].as_array().unwrap();
    let reported = |c: &Value| (c == &contents[contents.len() - 2]).then_some(compactbench_core::Usage { input: run.records[0].reply.input_tokens, output: 0, ..Default::default() });
    let log = super::analyze::gemini_log(&run.records[1].body["systemInstruction"], contents, &reported);
    let view = compactbench_core::Strategy::project(&strategy, &log);
    let mut store = compactbench_core::VirtualStore::new();
    let cx = compactbench_core::Cx::new(&model, &crate::ours::FixedSummarizer, &mut store, crate::ours::tokenizer());
    let decision = compactbench_core::Strategy::decide(&strategy, &log, &view, compactbench_core::Moment::BeforeRequest, &cx);
    assert!(matches!(decision, compactbench_core::Decision::Compact { .. }), "{decision:?}");
    let mut before = run.clone();
    before.records.truncate(2);
    assert_eq!(super::analyze::gemini_session("chat-like/s1", &before, "/scratch/work").ours.compacted_at, None, "asked as the CLI is");
}

#[test]
fn a_recorded_kimi_cli_run_yields_its_facts_and_ours() {
    // A recorded kimi-cli 1.52.0 run (`parallel-calls/s0`), trimmed to its last two main requests,
    // the compaction request and the request after it: system prompts cut short, tools named
    // only, tool results cut short where no count reads them (all but a request's newest ones),
    // the compaction request's transcript cut short before its prompt, scratch paths renamed.
    let run: Run = serde_json::from_str(include_str!("../../tests/fixtures/kimi-cli-1.52.0-parallel-calls-s0.json")).unwrap();
    let result = super::analyze::chat_session("parallel-calls/s0", &run, &super::analyze::kimi_chat());
    assert_eq!(result.problem, None);
    let theirs = &result.theirs;
    assert_eq!((theirs.compacted_at, theirs.prefix_reused, theirs.instruction.as_deref()), (Some(2), Some(false), Some("focus-sections")));
    assert_eq!((theirs.summary_role.as_deref(), theirs.summary_index, theirs.tokens_before, theirs.files.as_ref()), (Some("user"), Some(0), None, None));
    // The two newest user/assistant messages: the user's message, which Kimi sends inside the
    // summary's message (adjacent user messages are merged on the wire), and the reply with its
    // four calls, whose results follow.
    let kept = theirs.kept.as_ref().unwrap();
    assert!(kept[0].starts_with("user:") && kept[1].starts_with("text:"), "{kept:?}");
    assert_eq!(kept.iter().filter(|k| k.starts_with("call:")).count(), 4);
    assert_eq!(kept.last().map(String::as_str), Some("result:call_cb0025"));
    assert!(result.differing().is_empty(), "{result:#?}");

    // On the main requests alone (where the CLI did not compact), our crate does not either.
    let mut under = run.clone();
    under.records.truncate(2);
    assert_eq!(super::analyze::chat_session("parallel-calls/s0", &under, &super::analyze::kimi_chat()).ours.compacted_at, None);
}

#[test]
fn a_recorded_cline_run_is_analysed_on_its_whole_tool_results() {
    // A recorded Cline 3.0.65 run (`pressure/s1`), trimmed to its last main request, the
    // compaction request and the request after it: tools named only, scratch paths renamed; its
    // `--json` tool events hold the results whole (two over 8,000 characters, which the
    // requests send cut).
    let run: Run = serde_json::from_str(include_str!("../../tests/fixtures/cline-3.0.65-pressure-s1.json")).unwrap();
    let result = super::analyze::chat_session("pressure/s1", &run, &super::analyze::cline_chat());
    assert_eq!(result.problem, None);
    // The CLI kept the newest call and its 24,000-character result: its stored transcript
    // counts the whole result, past the 20,000 tokens it preserves at most.
    assert_eq!(result.theirs.kept.as_deref(), Some(&["call:call_cb0003".to_owned(), "result:call_cb0003".to_owned()][..]));
    assert!(result.differing().is_empty(), "{result:#?}");
    // On the results as sent, our crate would count the newest one cut and keep one call more.
    let mut cut = run.clone();
    cut.tools.clear();
    let ours = super::analyze::chat_session("pressure/s1", &cut, &super::analyze::cline_chat()).ours;
    assert_eq!(ours.kept.map(|k| k.len()), Some(4));
}

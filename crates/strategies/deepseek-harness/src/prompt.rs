//! What the summary call sends and how its answer is framed (`compaction-basic/src/summarizer.ts`).
//! The instruction and preamble are paraphrased; the section headings and the
//! `<compacted-summary>` tags are kept literally.

use compactbench_core::{Message, Part, Role};

use crate::meter::image_block_json;

/// Opening tag of the summary inside the checkpoint (literal).
pub(crate) const SUMMARY_OPEN_TAG: &str = "<compacted-summary>";
/// Closing tag of the summary inside the checkpoint (literal).
pub(crate) const SUMMARY_CLOSE_TAG: &str = "</compacted-summary>";

/// `COMPACTION_INSTRUCTION`, paraphrased: sent as the final user message after the replayed
/// conversation, so the call is a prefix of the conversation's own requests.
pub(crate) const COMPACTION_INSTRUCTION: &str = "\
Switch roles: you now serve as the compaction engine of this coding assistant. Condense the conversation above into a structured checkpoint from which another model can carry on the work without losing anything essential.

Answer with exactly the Markdown outline below, every section present and in this order. Use short bullets rather than paragraphs, and put \"(none)\" under a section that has nothing in it instead of leaving the section out.

## Primary Request and Intent
- [what the user asked for and how that goal changed; quote the user where the exact words matter]

## Key Technical Concepts
- [languages, libraries, patterns and conventions involved]

## Files and Code
- [exact path: why it matters, important changes or snippets]

## Errors and Fixes
- [each error and how it was fixed, with any user feedback about it]

## Pending Jobs
- [work the user asked for that is not done yet]

## Current Work
- [exactly what was underway when this checkpoint was taken]

## Next Step
- [the one next action that follows from the latest request, or \"(none)\"]

## Critical Context
- [decisions and why they were made, constraints, user preferences, open questions, data needed to go on]

Rules:
- Write terse English engineering language. Keep file paths, commands, error text, identifiers, numbers, function signatures and code fragments exactly as they appear.
- Record the user's feedback and explicit instructions faithfully, above all their corrections.
- Say nothing about this request or about the context having been condensed.
- Reply with the checkpoint text only; call no tool and take no other action.
- A <compacted-summary> block already present in the conversation is an earlier checkpoint. Do not carry it over word for word: keep the facts that still hold, drop the outdated ones, and merge the newer information into one consolidated summary with the same outline.";

/// `CHECKPOINT_PREAMBLE`, paraphrased.
pub(crate) const CHECKPOINT_PREAMBLE: &str = "\
Automatically generated checkpoint: it condenses an earlier part of this conversation to make room in the context. Take what it records as settled background and build on it without repeating it. Go on with the task directly from the messages after it, and do not mention this checkpoint.";

/// `frameSummary`: the checkpoint user message, three text blocks.
pub(crate) fn checkpoint_message(summary: &str) -> Message {
    Message::new(
        Role::User,
        vec![
            Part::text(format!("{CHECKPOINT_PREAMBLE}\n\n{SUMMARY_OPEN_TAG}")),
            Part::text(summary),
            Part::text(SUMMARY_CLOSE_TAG),
        ],
    )
}

/// Appends `s` as a JSON string literal (quotes and escapes as `serde_json` writes them).
fn string(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(out, s).expect("writing to a Vec cannot fail");
}

/// Appends one content block, the members in the order the harness's objects list them:
/// the bytes of `serde_json` serializing the same object (the workspace keeps key order).
fn content_block(out: &mut Vec<u8>, part: &Part) {
    match part {
        Part::Text { text } => {
            out.extend_from_slice(br#"{"type":"text","text":"#);
            string(out, text);
        }
        Part::Reasoning { text } => {
            out.extend_from_slice(br#"{"type":"reasoning","text":"#);
            string(out, text);
        }
        // `arguments` is the raw JSON string the model produced.
        Part::ToolCall { id, name, args } => {
            out.extend_from_slice(br#"{"type":"tool-call","id":"#);
            string(out, id);
            out.extend_from_slice(br#","name":"#);
            string(out, name);
            out.extend_from_slice(br#","arguments":"#);
            string(out, &args.to_string());
        }
        Part::ToolResult { call_id, text, is_error, .. } => {
            out.extend_from_slice(br#"{"type":"tool-result","toolCallId":"#);
            string(out, call_id);
            out.extend_from_slice(br#","content":[{"type":"text","text":"#);
            string(out, text);
            out.extend_from_slice(br#"}],"isError":"#);
            out.extend_from_slice(if *is_error { b"true" } else { b"false" });
        }
        // A complete object already: written whole, no closing brace to add.
        Part::Media { mime, .. } => {
            return serde_json::to_writer(out, &image_block_json(mime)).expect("writing to a Vec cannot fail");
        }
    }
    out.push(b'}');
}

/// Appends one canonical message, `{"role":..,"content":[blocks]}`.
fn message_line<'a>(out: &mut Vec<u8>, role: &str, blocks: impl IntoIterator<Item = &'a Part>) {
    out.extend_from_slice(br#"{"role":"#);
    string(out, role);
    out.extend_from_slice(br#","content":["#);
    for (i, part) in blocks.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        content_block(out, part);
    }
    out.extend_from_slice(b"]}");
}

/// One message as the harness's canonical messages (`role`, `content` blocks), one per line
/// after `out`'s existing lines: a tool message becomes one user-role message per result,
/// then one for its other parts if it has any.
fn canonical(out: &mut Vec<u8>, message: &Message) {
    let role = match message.role {
        Role::System => "system",
        Role::User | Role::Tool => "user",
        Role::Assistant => "assistant",
    };
    let line = |out: &mut Vec<u8>, blocks: &mut dyn Iterator<Item = &Part>| {
        if !out.is_empty() {
            out.push(b'\n');
        }
        message_line(out, role, blocks);
    };
    if message.role == Role::Tool {
        let is_result = |p: &&Part| matches!(p, Part::ToolResult { .. });
        for result in message.parts.iter().filter(is_result) {
            line(out, &mut std::iter::once(result));
        }
        if message.parts.iter().any(|p| !is_result(&p)) {
            line(out, &mut message.parts.iter().filter(|p| !is_result(p)));
        }
        return;
    }
    line(out, &mut message.parts.iter());
}

/// The shadowed messages verbatim, one canonical message per line. Written as JSON bytes
/// directly: the same bytes as `serde_json::Value` objects of the same members, without
/// building them (a test keeps the `Value` form as the reference).
pub(crate) fn transcript<'a>(messages: impl IntoIterator<Item = &'a Message>) -> String {
    let mut out = Vec::new();
    for message in messages {
        canonical(&mut out, message);
    }
    String::from_utf8(out).expect("JSON of valid strings is UTF-8")
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Message, Part, Role};
    use serde_json::{json, Value};

    use crate::meter::image_block_json;

    fn content_block(part: &Part) -> Value {
        match part {
            Part::Text { text } => json!({"type": "text", "text": text}),
            Part::Reasoning { text } => json!({"type": "reasoning", "text": text}),
            Part::ToolCall { id, name, args } => {
                json!({"type": "tool-call", "id": id, "name": name, "arguments": args.to_string()})
            }
            Part::ToolResult { call_id, text, is_error, .. } => json!({
                "type": "tool-result",
                "toolCallId": call_id,
                "content": [{"type": "text", "text": text}],
                "isError": is_error,
            }),
            Part::Media { mime, .. } => image_block_json(mime),
        }
    }

    fn canonical(message: &Message) -> Vec<Value> {
        let role = match message.role {
            Role::System => "system",
            Role::User | Role::Tool => "user",
            Role::Assistant => "assistant",
        };
        if message.role == Role::Tool {
            let (results, rest): (Vec<&Part>, Vec<&Part>) =
                message.parts.iter().partition(|p| matches!(p, Part::ToolResult { .. }));
            let mut out: Vec<Value> =
                results.into_iter().map(|p| json!({"role": role, "content": [content_block(p)]})).collect();
            if !rest.is_empty() {
                out.push(json!({"role": role, "content": rest.into_iter().map(content_block).collect::<Vec<_>>()}));
            }
            return out;
        }
        vec![json!({"role": role, "content": message.parts.iter().map(content_block).collect::<Vec<_>>()})]
    }

    /// The `serde_json::Value` form `transcript` must reproduce byte for byte.
    fn reference<'a>(messages: impl IntoIterator<Item = &'a Message>) -> String {
        messages.into_iter().flat_map(canonical).map(|v| v.to_string()).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn transcript_is_the_json_values_bytes() {
        let tricky = "say \"hi\"\n\tthen \\ é😀 \u{1}\u{7f}";
        let parts = vec![
            Part::text(tricky),
            Part::text(""),
            Part::Reasoning { text: tricky.into() },
            Part::ToolCall { id: "c\"1".into(), name: "grep".into(), args: json!({"pattern": "a\\b\"", "n": 2, "deep": {"x": [null, true], "e": []}}) },
            Part::ToolResult { call_id: "c1".into(), name: "grep".into(), text: tricky.into(), is_error: true },
            Part::ToolResult { call_id: "c2".into(), name: "read".into(), text: String::new(), is_error: false },
            Part::Media { mime: "image/png".into(), tokens: 1200 },
        ];
        let mut messages: Vec<Message> =
            [Role::System, Role::User, Role::Assistant, Role::Tool].map(|r| Message::new(r, parts.clone())).into();
        messages.push(Message::new(Role::Tool, vec![]));
        messages.push(Message::new(Role::User, vec![]));
        messages.push(Message::tool_result("c3", "bash", "only a result", false));
        messages.push(Message::new(Role::Tool, vec![Part::text("only text")]));
        for m in &messages {
            assert_eq!(super::transcript([m]), reference([m]), "{m:?}");
        }
        assert_eq!(super::transcript(&messages), reference(&messages));
        assert_eq!(super::transcript([]), reference([]));
    }
}

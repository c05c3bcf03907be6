//! Auto-condense: the in-band `summarize_task` turn (`summarizeTask` and `continuationPrompt`
//! in `src/core/prompts/contextManagement.ts`, `SummarizeTaskHandler.ts`).
//!
//! Cline never calls a separate summarizer: the agent model itself, in its normal request
//! (normal system prompt, current view), gets the instruction block appended to the user
//! message and answers with a `summarize_task` call. Here the injected summarizer plays that
//! model: its system prompt is the session's system prompt, its transcript the view as Anthropic
//! messages, its instructions the block. The prompt texts are paraphrased; the element marker,
//! the section names and the tool shape are kept because the model and the handler rely on them.

use compactbench_core::request::{lower, Block, WireMessage};
use compactbench_core::{Message, Role, Shape, SummaryContext, SummaryRequest, View};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

/// The instruction block appended to the user message (paraphrase; literal marker).
const SUMMARIZE_TASK: &str = r#"<explicit_instructions type="summarize_task">
The context window of this conversation is almost used up. Your one job now is to write a thorough, detailed summary of the conversation so far, with particular care for what the user explicitly asked for and what you yourself have done. Keep the technical detail - code patterns, architecture decisions - that would be needed to go on developing without the earlier messages.

You may answer in exactly one of two ways. If every item of your task_progress list is done and you are ready to finish, call the attempt_completion tool. Otherwise you must call the summarize_task tool, in PLAN mode as well as in ACT mode. Reply to this message with nothing but one of these two tool calls. A summarize_task call has to carry everything needed to continue the task, because afterwards you will no longer see any message except this summary.

For the summarize_task call, first think inside <thinking> tags: walk through the conversation in order and, for each part, note the user's requests and intent, how you went about them, the key decisions, concepts and code patterns, and concrete details such as file names, full code snippets, function signatures and edits. Then check that the result is accurate and complete.

The summary must have these sections:
1. Primary Request and Intent: every explicit request and intent of the user, in detail.
2. Key Technical Concepts: the important concepts, technologies and frameworks that came up.
3. Files and Code Sections: the files and code you examined, changed or created, with full snippets where they help and why each read or edit matters; look hardest at the latest messages.
4. Problem Solving: problems solved and troubleshooting still going on.
5. Pending Tasks: tasks you were explicitly asked to do that are still open.
6. Task Evolution: the original task (copy verbatim whatever is needed to carry on), how the user changed it over time, in order, the task that is active now, and why it changed, quoting the user's own words that changed it.
7. Current Work: exactly what was being done right before this request, with file names and snippets, giving most weight to the latest messages of both sides.
8. Next Step: the next step that follows directly from the user's explicit requests and from the work right before this request; if that work was finished, only a step the user explicitly asked for. Quote the latest conversation verbatim to show where the work stopped.
9. Required Files: optional; the fewest files needed for the next step, most important first, one path per line starting with "- ", relative to the working directory. Leave the section out when no file is needed.
10. Give the most recent user message special weight: it shows what the user wants now.

Call shape:
<summarize_task>
<context>your detailed summary</context>
</summarize_task>
</explicit_instructions>
"#;

/// Header Cline puts in front of the tool result (`[summarize_task]` + ` Result:`).
const RESULT_HEADER: &str = "[summarize_task] Result:\n";

/// `continuationPrompt(summary)`, paraphrased.
fn continuation(summary: &str) -> String {
    format!(
        "\nThis session picks up a previous conversation that ran out of context. That conversation is summarized here:\n{summary}.\n\n\
         Carry on from where it stopped without asking the user anything further, continuing the last task you were given. Where the most recent user message and the initial task message differ, follow the most recent one.\n\
         If the most recent user message began with \"/newtask\", \"/smol\", \"/compact\", \"/newrule\" or \"/reportbug\", tell the user they need to run that command again.\n"
    )
}

/// The user message Cline stores as the `summarize_task` result and shows from then on
/// (XML-tool form: a text block, see the crate docs).
pub(crate) fn summary_message(summary: &str) -> Message {
    Message::user(format!("{RESULT_HEADER}{}", continuation(summary)))
}

/// One content block as the Anthropic Messages API spells it: the JSON object of `json!({..})`
/// with these keys in this order, serialized in place instead of built as a `Value` (the
/// whole view is serialized at every condense; the test below compares the bytes).
struct AnthropicBlock<'a>(&'a Block<'a>);

impl Serialize for AnthropicBlock<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let entries = match self.0 {
            Block::Text { .. } | Block::Reasoning { .. } | Block::Media { .. } => 2,
            Block::ToolCall { .. } | Block::ToolResult { .. } => 4,
        };
        let mut map = serializer.serialize_map(Some(entries))?;
        match self.0 {
            Block::Text { text } => {
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", text)?;
            }
            Block::Reasoning { text } => {
                map.serialize_entry("type", "thinking")?;
                map.serialize_entry("thinking", text)?;
            }
            Block::ToolCall { id, name, args } => {
                map.serialize_entry("type", "tool_use")?;
                map.serialize_entry("id", id)?;
                map.serialize_entry("name", name)?;
                map.serialize_entry("input", args)?;
            }
            Block::ToolResult { call_id, text, is_error, .. } => {
                map.serialize_entry("type", "tool_result")?;
                map.serialize_entry("tool_use_id", call_id)?;
                map.serialize_entry("content", &[AnthropicBlock(&Block::Text { text })])?;
                map.serialize_entry("is_error", is_error)?;
            }
            Block::Media { tokens } => {
                map.serialize_entry("type", "image")?;
                map.serialize_entry("tokens", tokens)?;
            }
        }
        map.end()
    }
}

/// One message as the Anthropic Messages API spells it: `{"role": .., "content": [blocks]}`.
#[derive(Serialize)]
struct AnthropicMessage<'a> {
    role: &'a str,
    content: Vec<AnthropicBlock<'a>>,
}

/// The request the agent model gets on the summarizing turn: the view it would have sent
/// (system prompt apart, messages as Anthropic JSON), the instruction block after it.
pub(crate) fn request(view: &View, max_output_tokens: u64) -> SummaryRequest {
    let system: Vec<String> = view.iter().take_while(|m| m.role == Role::System).map(Message::text).collect();
    let lowered = lower(view, Shape::Anthropic);
    SummaryRequest {
        purpose: "summarize_task".into(),
        // spec (d): the same agent model, normal system prompt and current view, instruction block appended.
        context: SummaryContext::Prefix,
        system: system.join("\n\n"),
        transcript: transcript(&lowered.messages),
        instructions: SUMMARIZE_TASK.into(),
        max_output_tokens,
    }
}

/// The lowered messages as a pretty-printed JSON array.
fn transcript(messages: &[WireMessage<'_>]) -> String {
    let messages: Vec<AnthropicMessage<'_>> = messages
        .iter()
        .map(|m| AnthropicMessage { role: m.role, content: m.blocks.iter().map(AnthropicBlock).collect() })
        .collect();
    serde_json::to_string_pretty(&messages).expect("messages serialize")
}

#[cfg(test)]
mod tests {
    use compactbench_core::request::{Block, WireMessage};
    use serde_json::{json, Value};

    /// The `Value` form the serialization must reproduce byte for byte.
    fn block_json(block: &Block) -> Value {
        match block {
            Block::Text { text } => json!({"type": "text", "text": text}),
            Block::Reasoning { text } => json!({"type": "thinking", "thinking": text}),
            Block::ToolCall { id, name, args } => json!({"type": "tool_use", "id": id, "name": name, "input": args}),
            Block::ToolResult { call_id, text, is_error, .. } => {
                json!({"type": "tool_result", "tool_use_id": call_id, "content": [{"type": "text", "text": text}], "is_error": is_error})
            }
            Block::Media { tokens } => json!({"type": "image", "tokens": tokens}),
        }
    }

    fn reference(messages: &[WireMessage<'_>]) -> String {
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| json!({"role": m.role, "content": m.blocks.iter().map(block_json).collect::<Vec<_>>()}))
            .collect();
        serde_json::to_string_pretty(&messages).unwrap()
    }

    #[test]
    fn transcript_is_the_pretty_json_values_bytes() {
        let args = json!({"path": "src/é😀.rs", "q": "a\"b\\c\n\u{1}", "empty": {}, "list": [], "n": [1, null, true]});
        let blocks = vec![
            Block::Text { text: "say \"hi\"\n\tthen é😀 \u{7f}\u{2028}" },
            Block::Reasoning { text: "" },
            Block::ToolCall { id: "c1", name: "read_file", args: &args },
            Block::ToolResult { call_id: "c1", name: "read_file", text: "line\r\n", is_error: false },
            Block::ToolResult { call_id: "c2", name: "x", text: "", is_error: true },
            Block::Media { tokens: 1200 },
        ];
        let messages = vec![
            WireMessage { role: "user", blocks: blocks.clone().into(), from_view: vec![0].into() },
            WireMessage { role: "assistant", blocks: Vec::new().into(), from_view: vec![].into() },
            WireMessage { role: "user", blocks: blocks[3..4].to_vec().into(), from_view: vec![1].into() },
        ];
        assert_eq!(super::transcript(&messages), reference(&messages));
        assert_eq!(super::transcript(&messages[..0]), reference(&messages[..0]));
    }
}

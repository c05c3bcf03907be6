//! OpenCode's estimator for everything but the trigger: `Token.estimate(s) = max(0, round(len(s) / 4))`
//! over UTF-16 code units, applied to `JSON.stringify(toModelMessages(msgs))` when sizing turns.
//!
//! The JSON follows the AI SDK `ModelMessage` shape that `toModelMessages` produces (a user
//! message with text and file parts; an assistant message with text, reasoning and tool-call
//! parts followed by one tool message with the results). Media carry no bytes here, only a
//! provider token size, so a media part is counted as an empty data field plus its tokens.

use compactbench_core::estimate::{chars_div4_round, round_div4, utf16_len};
use compactbench_core::{Message, Part};
use serde_json::{json, Value};

use crate::session::{Kind, OcMsg, CLEARED, INTERRUPTED, MARKER_TEXT};

/// `Token.estimate`.
pub(crate) fn est_oc(s: &str) -> u64 {
    chars_div4_round(s)
}

/// The JSON footprint of one OpenCode message once converted to model messages.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Size {
    /// UTF-16 length of its model messages' JSON, without separators.
    chars: u64,
    /// Number of model messages it becomes.
    count: u64,
    /// Provider tokens of its media.
    media: u64,
}

/// `est_oc(JSON.stringify([...]))` for the concatenated model messages of `sizes`.
pub(crate) fn estimate(sizes: &[Size]) -> u64 {
    let count: u64 = sizes.iter().map(|s| s.count).sum();
    let chars: u64 = 2 + sizes.iter().map(|s| s.chars).sum::<u64>() + count.saturating_sub(1);
    round_div4(chars) + sizes.iter().map(|s| s.media).sum::<u64>()
}

/// The size of `msg` as model-message JSON.
pub(crate) fn size(msg: &OcMsg<'_>) -> Size {
    let mut media = 0;
    let values = model_messages(msg, &mut media);
    Size { chars: values.iter().map(|v| utf16_len(&v.to_string())).sum(), count: values.len() as u64, media }
}

fn user_content(message: &Message, media: &mut u64) -> Vec<Value> {
    message
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } | Part::Reasoning { text } => Some(json!({"type": "text", "text": text})),
            Part::Media { mime, tokens } => {
                *media += u64::from(*tokens);
                Some(json!({"type": "file", "mediaType": mime, "data": ""}))
            }
            Part::ToolCall { .. } | Part::ToolResult { .. } => None,
        })
        .collect()
}

fn model_messages(msg: &OcMsg<'_>, media: &mut u64) -> Vec<Value> {
    match msg.kind {
        Kind::Marker => vec![json!({"role": "user", "content": [{"type": "text", "text": MARKER_TEXT}]})],
        Kind::User | Kind::After => match msg.message {
            Some(m) => vec![json!({"role": "user", "content": user_content(m, media)})],
            None => Vec::new(),
        },
        Kind::Summary => match msg.message {
            Some(m) => vec![json!({"role": "assistant", "content": [{"type": "text", "text": m.text()}]})],
            None => Vec::new(),
        },
        Kind::Assistant => {
            let mut out = Vec::new();
            if let Some(m) = msg.message {
                let content: Vec<Value> = m
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Text { text } => Some(json!({"type": "text", "text": text})),
                        Part::Reasoning { text } => Some(json!({"type": "reasoning", "text": text})),
                        Part::ToolCall { id, name, args } => {
                            Some(json!({"type": "tool-call", "toolCallId": id, "toolName": name, "input": args}))
                        }
                        Part::ToolResult { .. } | Part::Media { .. } => None,
                    })
                    .collect();
                if !content.is_empty() {
                    out.push(json!({"role": "assistant", "content": content}));
                }
            }
            let results: Vec<Value> = msg
                .parts
                .iter()
                .map(|p| {
                    let output = match &p.output {
                        None => json!({"type": "error-text", "value": INTERRUPTED}),
                        Some(o) if o.compacted => json!({"type": "text", "value": CLEARED}),
                        Some(o) if o.is_error => json!({"type": "error-text", "value": o.text}),
                        Some(o) if !o.media.is_empty() => {
                            let mut value = vec![json!({"type": "text", "text": o.text})];
                            for (mime, tokens) in &o.media {
                                *media += tokens;
                                value.push(json!({"type": "media", "mediaType": mime, "data": ""}));
                            }
                            json!({"type": "content", "value": value})
                        }
                        Some(o) => json!({"type": "text", "value": o.text}),
                    };
                    json!({"type": "tool-result", "toolCallId": p.call_id, "toolName": p.name, "output": output})
                })
                .collect();
            if !results.is_empty() {
                out.push(json!({"role": "tool", "content": results}));
            }
            out
        }
    }
}

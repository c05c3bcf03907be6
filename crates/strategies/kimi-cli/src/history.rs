//! The view seen as Kimi CLI's `Context.history`: the system prompt apart, and messages as
//! Kimi stores them (only `TextPart`s in `content`; tool calls in `tool_calls`).

use std::borrow::Cow;

use compactbench_core::{Message, Part, Role, View, ViewMessage};

/// The history: the view after its leading system messages, the system prompt, which Kimi
/// keeps out of its history (it is never counted as pending, summarized or cut).
pub(crate) fn items(view: &View) -> &[ViewMessage] {
    let leading = view.messages.iter().take_while(|vm| vm.message.role == Role::System).count();
    &view.messages[leading..]
}

/// The system prompt (the leading system messages, joined by newlines) and the history.
pub(crate) fn split(view: &View) -> (String, &[ViewMessage]) {
    let items = items(view);
    let system = view.messages[..view.len() - items.len()].iter().map(|vm| vm.message.text()).collect::<Vec<_>>().join("\n");
    (system, items)
}

/// The `TextPart`s of `message` as Kimi would store it, in order. Reasoning (think parts),
/// media and tool calls are not text parts. A tool result becomes the text Kimi's
/// `tool_result_to_message` writes: the output, `<system>ERROR: …</system>` for an error, or a
/// `<system>` note for an empty output.
pub(crate) fn text_parts(message: &Message) -> Vec<Cow<'_, str>> {
    message
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::Text { text } => Some(Cow::Borrowed(text.as_str())),
            Part::ToolResult { text, is_error, .. } => Some(result_text(text, *is_error)),
            Part::Reasoning { .. } | Part::ToolCall { .. } | Part::Media { .. } => None,
        })
        .collect()
}

/// The text Kimi's `tool_result_to_message` stores for a tool output.
pub(crate) fn result_text(text: &str, is_error: bool) -> Cow<'_, str> {
    if is_error {
        Cow::Owned(format!("<system>ERROR: {text}</system>"))
    } else if text.is_empty() {
        Cow::Borrowed("<system>Tool output is empty.</system>")
    } else {
        Cow::Borrowed(text)
    }
}

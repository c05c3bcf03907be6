//! The request V2 builds before every provider turn, as the JSON its trigger measures.
//!
//! `compactIfNeeded` estimates `JSON.stringify({system, messages, tools})` of the already
//! built `LLMRequest`. This module rebuilds that JSON from the view with the shapes of
//! `toLLMMessages` (@60ada05b / @5ea89d13) and the `@opencode-ai/llm` message schema:
//! system parts `{type, text}`; messages `{id?, role, content: [parts], metadata?}`; tool
//! results as separate `tool` messages. Field order does not matter to a length estimate.
//!
//! The trigger only needs the document's length, and builds it before every request, so
//! [`request_len`] adds the length up member by member (see [`len`]) without building the
//! document; [`request_json`] builds it the direct way and is kept as the reference the
//! tests compare against.

#[cfg(test)]
use std::collections::HashSet;

use compactbench_core::estimate::{json_utf16_len, round_div4};
use compactbench_core::{EntryId, Log, Message, Origin, Part, Role, View};
#[cfg(test)]
use serde_json::{json, Value};

use crate::history::leading_system_count;

/// A V2 message id: `msg_` plus 26 characters, the length of an ascending identifier
/// (modelling choice: only the length reaches the estimate).
#[cfg(test)]
fn message_id(id: EntryId) -> String {
    format!("msg_{:026}", id.0)
}

/// A media part. The seam keeps only the token size, so the base64 payload is modelled as
/// `4 × tokens` characters, which the estimator counts as `tokens`.
#[cfg(test)]
fn media(mime: &str, tokens: u32) -> Value {
    json!({"type": "media", "mediaType": mime, "data": "A".repeat(4 * tokens as usize)})
}

#[cfg(test)]
fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// The `@opencode-ai/llm` messages one view message becomes.
#[cfg(test)]
fn native(id: Option<EntryId>, m: &Message) -> Vec<Value> {
    let with_id = |mut v: Value| {
        if let (Some(id), Some(obj)) = (id, v.as_object_mut()) {
            obj.insert("id".into(), Value::String(message_id(id)));
        }
        v
    };
    match m.role {
        Role::User => {
            let content: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text: t } => Some(text(t)),
                    Part::Media { mime, tokens } => Some(media(mime, *tokens)),
                    _ => None,
                })
                .collect();
            // User rows always carry a metadata object (`{...message.metadata}`).
            vec![with_id(json!({"role": "user", "content": content, "metadata": {}}))]
        }
        Role::System => vec![json!({"role": "system", "content": [text(&m.text())]})],
        Role::Assistant => {
            let content: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text: t } if !t.is_empty() => Some(text(t)),
                    Part::Reasoning { text: t } if !t.is_empty() => Some(json!({"type": "reasoning", "text": t})),
                    Part::ToolCall { id, name, args } => {
                        Some(json!({"type": "tool-call", "id": id, "name": name, "input": args}))
                    }
                    Part::Media { mime, tokens } => Some(media(mime, *tokens)),
                    _ => None,
                })
                .collect();
            if content.is_empty() {
                return Vec::new();
            }
            vec![with_id(json!({"role": "assistant", "content": content}))]
        }
        Role::Tool => {
            let mut out: Vec<Value> = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolResult { call_id, name, text, is_error: false } => Some(json!({
                        "role": "tool",
                        "content": [{"type": "tool-result", "id": call_id, "name": name,
                                     "result": {"type": "text", "value": text}}],
                    })),
                    Part::ToolResult { call_id, name, text, is_error: true } => Some(json!({
                        "role": "tool",
                        "content": [{"type": "tool-result", "id": call_id, "name": name,
                                     "result": {"type": "error", "value": {
                                         "error": {"type": "unknown", "message": text}, "content": []}}}],
                    })),
                    _ => None,
                })
                .collect();
            if let Some(content) = out.first_mut().and_then(|v| v["content"].as_array_mut()) {
                content.extend(m.parts.iter().filter_map(|p| match p {
                    Part::Media { mime, tokens } => Some(media(mime, *tokens)),
                    _ => None,
                }));
            }
            out
        }
    }
}

/// `JSON.stringify({system, messages, tools})` of the request built from `view`. The leading
/// system messages of the log are the system parts (agent prompt and context baseline);
/// `tools` is empty because the seam carries no tool definitions. The reference for
/// [`request_len`].
#[cfg(test)]
pub(crate) fn request_json(log: &Log, view: &View) -> String {
    let leading: HashSet<EntryId> = (0..leading_system_count(log) as u32).map(EntryId).collect();
    let mut system = Vec::new();
    let mut messages = Vec::new();
    for vm in &view.messages {
        let m = &vm.message;
        match vm.origin {
            Origin::Entry(id) | Origin::Replaced(id, _) if leading.contains(&id) => {
                let t = m.text();
                if !t.is_empty() {
                    system.push(text(&t));
                }
            }
            // The checkpoint row: one user message, no metadata.
            Origin::Summary(cp) => {
                messages.push(json!({"id": message_id(cp), "role": "user", "content": [text(&m.text())]}));
            }
            origin => messages.extend(native(origin.entry(), m)),
        }
    }
    json!({"system": system, "messages": messages, "tools": []}).to_string()
}

/// UTF-16 lengths of compact JSON, composed the way `serde_json` writes a document: an
/// object is its braces, per member the key as a string, a colon and the value, and a comma
/// between members; an array is its brackets, the items and a comma between items. So the
/// length of a document is the sum of its parts' lengths plus this fixed punctuation, and
/// nothing has to be built to know it. Strings count their quotes and escapes
/// ([`compactbench_core::estimate::json_str_utf16_len`]).
pub(crate) mod len {
    use compactbench_core::estimate::json_str_utf16_len;

    /// Length of `s` as a JSON string.
    pub(crate) fn string(s: &str) -> u64 {
        json_str_utf16_len(s)
    }

    /// Length of an object with these members (key, length of the value).
    pub(crate) fn object<'a>(members: impl IntoIterator<Item = (&'a str, u64)>) -> u64 {
        let mut array = Array::default();
        for (key, value) in members {
            array.push(string(key) + 1 + value);
        }
        array.len()
    }

    /// An array (or, through [`object`], a member list) being added up item by item.
    #[derive(Default)]
    pub(crate) struct Array {
        items: u64,
        units: u64,
    }

    impl Array {
        pub(crate) fn push(&mut self, item: u64) {
            self.items += 1;
            self.units += item;
        }

        pub(crate) fn is_empty(&self) -> bool {
            self.items == 0
        }

        /// Brackets (or braces), the items, and a comma between each two.
        pub(crate) fn len(&self) -> u64 {
            2 + self.units + self.items.saturating_sub(1)
        }
    }
}

use len::{object, string, Array};

/// Length of a [`message_id`] as a JSON string: `msg_` and 26 digits (a `u32` has at most
/// 10, so the padding always makes 26), plus the quotes.
const MESSAGE_ID_JSON_LEN: u64 = 4 + 26 + 2;

/// Length of the `id` member's value when the message carries one.
fn id_member(id: Option<EntryId>) -> Option<(&'static str, u64)> {
    id.map(|_| ("id", MESSAGE_ID_JSON_LEN))
}

/// Length of `{"type":"text","text":t}`.
fn text_len(t: &str) -> u64 {
    object([("type", string("text")), ("text", string(t))])
}

/// Length of a media part: the payload is `4 × tokens` `A`s, no escapes, plus its quotes.
fn media_len(mime: &str, tokens: u32) -> u64 {
    object([("type", string("media")), ("mediaType", string(mime)), ("data", 4 * u64::from(tokens) + 2)])
}

/// Adds to `messages` the lengths of the `@opencode-ai/llm` messages one view message
/// becomes (the shapes of the reference `native`).
fn push_native(messages: &mut Array, id: Option<EntryId>, m: &Message) {
    match m.role {
        Role::User => {
            let mut content = Array::default();
            for p in &m.parts {
                match p {
                    Part::Text { text } => content.push(text_len(text)),
                    Part::Media { mime, tokens } => content.push(media_len(mime, *tokens)),
                    _ => {}
                }
            }
            // `"metadata":{}` is two characters of value.
            let members = [("role", string("user")), ("content", content.len()), ("metadata", 2)];
            messages.push(object(members.into_iter().chain(id_member(id))));
        }
        Role::System => {
            messages.push(object([("role", string("system")), ("content", 2 + text_len(&m.text()))]));
        }
        Role::Assistant => {
            let mut content = Array::default();
            for p in &m.parts {
                match p {
                    Part::Text { text } if !text.is_empty() => content.push(text_len(text)),
                    Part::Reasoning { text } if !text.is_empty() => {
                        content.push(object([("type", string("reasoning")), ("text", string(text))]))
                    }
                    Part::ToolCall { id, name, args } => content.push(object([
                        ("type", string("tool-call")),
                        ("id", string(id)),
                        ("name", string(name)),
                        ("input", json_utf16_len(args)),
                    ])),
                    Part::Media { mime, tokens } => content.push(media_len(mime, *tokens)),
                    _ => {}
                }
            }
            if content.is_empty() {
                return;
            }
            let members = [("role", string("assistant")), ("content", content.len())];
            messages.push(object(members.into_iter().chain(id_member(id))));
        }
        Role::Tool => {
            // Every result is its own `tool` message; the message's media join the first
            // one's content (and are dropped when there is no result).
            let media: u64 = m
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Media { mime, tokens } => Some(1 + media_len(mime, *tokens)),
                    _ => None,
                })
                .sum();
            let mut first = true;
            for p in &m.parts {
                let Part::ToolResult { call_id, name, text, is_error } = p else { continue };
                let result = if *is_error {
                    let error = object([("type", string("unknown")), ("message", string(text))]);
                    object([("type", string("error")), ("value", object([("error", error), ("content", 2)]))])
                } else {
                    object([("type", string("text")), ("value", string(text))])
                };
                let block =
                    object([("type", string("tool-result")), ("id", string(call_id)), ("name", string(name)), ("result", result)]);
                // `[block]`, plus `,media` per media part in the first message.
                let content = 2 + block + if first { media } else { 0 };
                first = false;
                messages.push(object([("role", string("tool")), ("content", content)]));
            }
        }
    }
}

/// `utf16_len(request_json(log, view))`, added up member by member instead of serialized.
pub(crate) fn request_len(log: &Log, view: &View) -> u64 {
    let leading = leading_system_count(log);
    let mut system = Array::default();
    let mut messages = Array::default();
    for vm in &view.messages {
        let m = &vm.message;
        match vm.origin {
            // The log's leading messages are ids `0..leading`.
            Origin::Entry(id) | Origin::Replaced(id, _) if id.index() < leading => {
                let t = m.text();
                if !t.is_empty() {
                    system.push(text_len(&t));
                }
            }
            // The checkpoint row: one user message, no metadata.
            Origin::Summary(_) => messages.push(object([
                ("id", MESSAGE_ID_JSON_LEN),
                ("role", string("user")),
                ("content", 2 + text_len(&m.text())),
            ])),
            origin => push_native(&mut messages, origin.entry(), m),
        }
    }
    // `"tools":[]` is two characters of value.
    object([("system", system.len()), ("messages", messages.len()), ("tools", 2)])
}

/// The trigger's estimate of the request built from `view`: `est_oc` of its JSON
/// (`round(len / 4)`, [`crate::history::est_oc`]) over the length [`request_len`] adds up.
pub(crate) fn estimate_request(log: &Log, view: &View) -> u64 {
    round_div4(request_len(log, view))
}

#[cfg(test)]
mod tests {
    use compactbench_core::estimate::utf16_len;
    use compactbench_core::{default_projection, Checkpoint, CheckpointKind, EntryId, Log, Message, Part, Replacement, Role, Window};
    use serde_json::json;

    use super::{message_id, request_json, request_len, MESSAGE_ID_JSON_LEN};

    fn same_length(log: &Log) {
        let view = default_projection(log);
        assert_eq!(request_len(log, &view), utf16_len(&request_json(log, &view)), "{}", request_json(log, &view));
    }

    #[test]
    fn message_ids_have_a_fixed_length() {
        for id in [0, 7, u32::MAX] {
            assert_eq!(super::len::string(&message_id(EntryId(id))), MESSAGE_ID_JSON_LEN);
        }
    }

    #[test]
    fn request_len_is_the_length_of_the_request_json() {
        let tricky = "q\"uote\\ tab\t nl\n \u{1}\u{1f}\u{7f} é 日本 😀";
        let mut log = Log::new();
        same_length(&log);
        log.push_message(Message::system(tricky));
        log.push_message(Message::system(""));
        same_length(&log);
        log.push_message(Message::new(Role::User, vec![Part::text(tricky), Part::Media { mime: "image/png".into(), tokens: 3 }, Part::text("")]));
        log.push_message(Message::new(Role::User, vec![]));
        log.push_message(Message::new(
            Role::Assistant,
            vec![
                Part::text(""),
                Part::Reasoning { text: String::new() },
                Part::Reasoning { text: tricky.into() },
                Part::text(tricky),
                Part::ToolCall { id: "c\"1".into(), name: "bash".into(), args: json!({"cmd": tricky, "n": [1, null, {}], "e": []}) },
                Part::ToolCall { id: "c2".into(), name: "read".into(), args: json!("raw string") },
                Part::Media { mime: "image/jpeg".into(), tokens: 0 },
            ],
        ));
        log.push_message(Message::new(
            Role::Tool,
            vec![
                Part::ToolResult { call_id: "c\"1".into(), name: "bash".into(), text: tricky.into(), is_error: false },
                Part::Media { mime: "image/png".into(), tokens: 5 },
                Part::ToolResult { call_id: "c2".into(), name: "read".into(), text: tricky.into(), is_error: true },
                Part::Media { mime: "image/gif".into(), tokens: 1 },
            ],
        ));
        // A tool message with media and no result becomes no message at all.
        log.push_message(Message::new(Role::Tool, vec![Part::Media { mime: "image/png".into(), tokens: 2 }]));
        // Assistant messages with nothing to send are left out.
        log.push_message(Message::new(Role::Assistant, vec![Part::text("")]));
        log.push_message(Message::system(tricky));
        same_length(&log);

        // A checkpoint: a summary row, a replaced message, kept system rows.
        let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(4))).with_summary(Message::new(
            Role::User,
            vec![Part::text(tricky), Part::text("second")],
        ));
        cp.replacements.push(Replacement { entry: EntryId(5), message: Message::tool_result("c\"1", "bash", "short", false) });
        log.push_checkpoint(cp);
        log.push_message(Message::user("after"));
        same_length(&log);
    }
}

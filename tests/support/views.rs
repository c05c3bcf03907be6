//! Views for the fuzz targets of the request validators (core's `fuzz_request`) and of the
//! runner's revalidation (eval's `fuzz_revalidate`): arbitrary views, well-formed
//! conversations, and structure-aware edits of them. Each includes this file as its `views`
//! module with `#[path]`.
#![allow(dead_code)] // Each target uses part of it.

use compactbench_core::{EntryId, Message, Origin, Part, Role, View, ViewMessage};
use proptest::prelude::*;

pub(crate) fn role() -> impl Strategy<Value = Role> {
    prop_oneof![Just(Role::System), Just(Role::User), Just(Role::Assistant), Just(Role::Tool)]
}

/// Short strings from a small alphabet, so ids collide and texts are often blank.
pub(crate) fn small_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just(" ".to_string()),
        Just("\n\t".to_string()),
        Just("ok".to_string()),
        Just("\u{a0}".to_string()),
        "[a-c ]{0,6}",
        any::<String>(),
    ]
}

pub(crate) fn call_id() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "c[0-4]", any::<String>()]
}

pub(crate) fn part() -> impl Strategy<Value = Part> {
    prop_oneof![
        small_text().prop_map(|text| Part::Text { text }),
        small_text().prop_map(|text| Part::Reasoning { text }),
        (call_id(), small_text()).prop_map(|(id, name)| Part::ToolCall { id, name, args: serde_json::json!({"x": 1}) }),
        (call_id(), small_text(), small_text(), any::<bool>())
            .prop_map(|(call_id, name, text, is_error)| Part::ToolResult { call_id, name, text, is_error }),
        (small_text(), any::<u32>()).prop_map(|(mime, tokens)| Part::Media { mime, tokens }),
    ]
}

pub(crate) fn origin() -> impl Strategy<Value = Origin> {
    let id = || any::<u32>().prop_map(EntryId);
    prop_oneof![
        id().prop_map(Origin::Entry),
        (id(), id()).prop_map(|(a, b)| Origin::Replaced(a, b)),
        id().prop_map(Origin::Summary),
        id().prop_map(Origin::Injected),
    ]
}

pub(crate) fn arbitrary_view() -> impl Strategy<Value = View> {
    prop::collection::vec(
        (origin(), role(), prop::collection::vec(part(), 0..5)).prop_map(|(origin, role, parts)| ViewMessage {
            origin,
            message: Message::new(role, parts),
        }),
        0..24,
    )
    .prop_map(|messages| View { messages })
}

/// One assistant step of a well-formed conversation.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    pub(crate) text: bool,
    pub(crate) reasoning: bool,
    /// Parallel calls (0 = a text-only reply).
    pub(crate) calls: usize,
    /// User message after the step's results, with media or not.
    pub(crate) user: Option<bool>,
}

pub(crate) fn step() -> impl Strategy<Value = Step> {
    (any::<bool>(), any::<bool>(), 0usize..4, prop::option::of(any::<bool>())).prop_map(|(text, reasoning, calls, user)| Step {
        text: text || calls == 0,
        reasoning,
        calls,
        user,
    })
}

/// A conversation every shape accepts: optional system prompt, a user message, then assistant
/// steps whose calls are all answered right after them (one tool message per result).
pub(crate) fn well_formed(system: bool, steps: &[Step]) -> View {
    let mut messages = Vec::new();
    if system {
        messages.push(Message::system("You are a coding agent."));
    }
    messages.push(Message::user("Fix the failing test."));
    for (n, s) in steps.iter().enumerate() {
        let mut parts = Vec::new();
        if s.reasoning {
            parts.push(Part::Reasoning { text: "thinking about it".into() });
        }
        if s.text {
            parts.push(Part::text("Let me look."));
        }
        let ids: Vec<String> = (0..s.calls).map(|k| format!("call_{n}_{k}")).collect();
        for id in &ids {
            parts.push(Part::ToolCall { id: id.clone(), name: "read".into(), args: serde_json::json!({"path": "src/lib.rs"}) });
        }
        messages.push(Message::new(Role::Assistant, parts));
        for id in ids {
            messages.push(Message::tool_result(id, "read", "fn main() {}", false));
        }
        if let Some(media) = s.user {
            let mut parts = vec![Part::text("Keep going.")];
            if media {
                parts.push(Part::Media { mime: "image/png".into(), tokens: 1200 });
            }
            messages.push(Message::new(Role::User, parts));
        }
    }
    let messages = messages.into_iter().enumerate().map(|(i, message)| ViewMessage { origin: Origin::Entry(EntryId(i as u32)), message }).collect();
    View { messages }
}

/// A structure-aware edit of a view.
#[derive(Clone, Debug)]
pub(crate) enum Mutation {
    Delete(usize),
    Duplicate(usize),
    Swap(usize, usize),
    SetRole(usize, Role),
    DropPart(usize, usize),
    InsertPart(usize, usize, Part),
    /// Moves a message to another position.
    Move(usize, usize),
    /// Truncates the view to its first N messages (a cut mid-turn).
    Truncate(usize),
}

pub(crate) fn mutation() -> impl Strategy<Value = Mutation> {
    let ix = || any::<prop::sample::Index>().prop_map(|i| i.index(1 << 16));
    prop_oneof![
        ix().prop_map(Mutation::Delete),
        ix().prop_map(Mutation::Duplicate),
        (ix(), ix()).prop_map(|(a, b)| Mutation::Swap(a, b)),
        (ix(), role()).prop_map(|(a, r)| Mutation::SetRole(a, r)),
        (ix(), ix()).prop_map(|(a, b)| Mutation::DropPart(a, b)),
        (ix(), ix(), part()).prop_map(|(a, b, p)| Mutation::InsertPart(a, b, p)),
        (ix(), ix()).prop_map(|(a, b)| Mutation::Move(a, b)),
        ix().prop_map(Mutation::Truncate),
    ]
}

pub(crate) fn apply(view: &mut View, m: &Mutation) {
    let len = view.messages.len();
    if len == 0 {
        return;
    }
    match m {
        Mutation::Delete(i) => {
            view.messages.remove(i % len);
        }
        Mutation::Duplicate(i) => {
            let vm = view.messages[i % len].clone();
            view.messages.insert(i % len, vm);
        }
        Mutation::Swap(a, b) => view.messages.swap(a % len, b % len),
        Mutation::SetRole(i, r) => view.messages[i % len].message.role = *r,
        Mutation::DropPart(i, k) => {
            let parts = &mut view.messages[i % len].message.parts;
            if !parts.is_empty() {
                let k = k % parts.len();
                parts.remove(k);
            }
        }
        Mutation::InsertPart(i, k, p) => {
            let parts = &mut view.messages[i % len].message.parts;
            let k = k % (parts.len() + 1);
            parts.insert(k, p.clone());
        }
        Mutation::Move(a, b) => {
            let vm = view.messages.remove(a % len);
            view.messages.insert(b % len, vm);
        }
        Mutation::Truncate(n) => view.messages.truncate(n % (len + 1)),
    }
}

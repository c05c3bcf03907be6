//! Fuzz target for the provider validators: `request::lower` and `request::validate` on
//! arbitrary views and on structure-aware mutations of well-formed ones.
//!
//! Properties: lowering and validating never panic, for every shape; every violation and
//! every wire message points inside the request and the view; a well-formed conversation
//! (before mutation) breaks no rule of any shape; revalidating a sequence of edited views
//! counts what validating each from scratch counts. Cases: 256 by default,
//! `COMPACTBENCH_FUZZ_CASES` in the long mode (`cargo xtask fuzz`).

use compactbench_core::request::{count, lower, validate, Block, Request, Revalidator};
use compactbench_core::{EntryId, Message, Origin, Part, Role, Shape, View, ViewMessage};
use proptest::prelude::*;

#[path = "../../../tests/support/fuzz.rs"]
mod support;

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![Just(Role::System), Just(Role::User), Just(Role::Assistant), Just(Role::Tool)]
}

/// Short strings from a small alphabet, so ids collide and texts are often blank.
fn small_text() -> impl Strategy<Value = String> {
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

fn call_id() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "c[0-4]", any::<String>()]
}

fn part() -> impl Strategy<Value = Part> {
    prop_oneof![
        small_text().prop_map(|text| Part::Text { text }),
        small_text().prop_map(|text| Part::Reasoning { text }),
        (call_id(), small_text()).prop_map(|(id, name)| Part::ToolCall { id, name, args: serde_json::json!({"x": 1}) }),
        (call_id(), small_text(), small_text(), any::<bool>())
            .prop_map(|(call_id, name, text, is_error)| Part::ToolResult { call_id, name, text, is_error }),
        (small_text(), any::<u32>()).prop_map(|(mime, tokens)| Part::Media { mime, tokens }),
    ]
}

fn origin() -> impl Strategy<Value = Origin> {
    let id = || any::<u32>().prop_map(EntryId);
    prop_oneof![
        id().prop_map(Origin::Entry),
        (id(), id()).prop_map(|(a, b)| Origin::Replaced(a, b)),
        id().prop_map(Origin::Summary),
        id().prop_map(Origin::Injected),
    ]
}

fn arbitrary_view() -> impl Strategy<Value = View> {
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
struct Step {
    text: bool,
    reasoning: bool,
    /// Parallel calls (0 = a text-only reply).
    calls: usize,
    /// User message after the step's results, with media or not.
    user: Option<bool>,
}

fn step() -> impl Strategy<Value = Step> {
    (any::<bool>(), any::<bool>(), 0usize..4, prop::option::of(any::<bool>())).prop_map(|(text, reasoning, calls, user)| Step {
        text: text || calls == 0,
        reasoning,
        calls,
        user,
    })
}

/// A conversation every shape accepts: optional system prompt, a user message, then assistant
/// steps whose calls are all answered right after them (one tool message per result).
fn well_formed(system: bool, steps: &[Step]) -> View {
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
enum Mutation {
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

fn mutation() -> impl Strategy<Value = Mutation> {
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

fn apply(view: &mut View, m: &Mutation) {
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

/// Lowers and validates `view` for every shape and checks what must hold of any request.
fn check_any(view: &View) -> Vec<(Shape, usize)> {
    let mut found = Vec::new();
    for shape in Shape::ALL {
        let request: Request<'_> = lower(view, shape);
        assert_eq!(request.shape, shape);
        if shape == Shape::OpenaiChat {
            assert!(request.system.is_empty(), "chat sends system inline");
        }
        let mut last = 0;
        for w in &request.messages {
            assert!(!w.from_view.is_empty(), "{shape:?}: a wire message from no view message");
            for &i in &w.from_view {
                assert!(i < view.len(), "{shape:?}: from_view {i} outside a view of {}", view.len());
                assert!(i >= last, "{shape:?}: wire messages out of view order");
                last = i;
            }
        }
        for b in request.system.iter().chain(request.messages.iter().flat_map(|w| &w.blocks)) {
            // Blocks borrow from the view: every text is one of the view's strings.
            if let Block::Text { text } | Block::Reasoning { text } = b {
                assert!(view.iter().any(|m| m.parts.iter().any(|p| matches!(p, Part::Text { text: t } | Part::Reasoning { text: t } if t == text))));
            }
        }
        let violations = validate(&request);
        for v in &violations {
            assert!(v.at < request.messages.len().max(1), "{shape:?}: violation at {} of {} messages", v.at, request.messages.len());
            assert!(!v.detail.is_empty());
        }
        // Deterministic.
        assert_eq!(violations, validate(&lower(view, shape)));
        found.push((shape, violations.len()));
    }
    found
}

#[test]
fn fuzz_request_validators_on_arbitrary_views() {
    support::fuzz("request-validators/arbitrary", 256, arbitrary_view(), |view| {
        check_any(&view);
    });
}

#[test]
fn fuzz_request_validators_on_mutated_conversations() {
    let input = (any::<bool>(), prop::collection::vec(step(), 0..12), prop::collection::vec(mutation(), 0..6));
    support::fuzz("request-validators/mutated", 256, input, |(system, steps, mutations)| {
        let mut view = well_formed(system, &steps);
        for (shape, n) in check_any(&view) {
            assert_eq!(n, 0, "{shape:?}: a well-formed conversation breaks a rule: {:?}", validate(&lower(&view, shape)));
        }
        for m in &mutations {
            apply(&mut view, m);
        }
        check_any(&view);
    });
}

#[test]
fn fuzz_revalidation_counts_what_validation_counts() {
    let edit = (mutation(), prop::collection::vec((role(), prop::collection::vec(part(), 0..4)), 0..3), any::<prop::sample::Index>());
    let input = (any::<bool>(), prop::collection::vec(step(), 0..12), prop::collection::vec(edit, 1..10));
    support::fuzz("request-validators/revalidate", 256, input, |(system, steps, edits)| {
        let mut view = well_formed(system, &steps);
        let mut revalidator = Revalidator::new();
        let expected = |view: &View| Shape::ALL.map(|shape| count(&validate(&lower(view, shape))));
        assert_eq!(revalidator.update(&view, 0), expected(&view));
        for (mutation, appended, slack) in edits {
            let before = view.clone();
            apply(&mut view, &mutation);
            for (role, parts) in appended {
                let origin = Origin::Entry(EntryId(view.len() as u32 + 1000));
                view.messages.push(ViewMessage { origin, message: Message::new(role, parts) });
            }
            // Any count of unchanged messages up to the true one is a correct thing to say.
            let same = view.messages.iter().zip(&before.messages).take_while(|(a, b)| a.message == b.message).count();
            let unchanged = slack.index(same + 1);
            assert_eq!(revalidator.update(&view, unchanged), expected(&view), "after {mutation:?}, {unchanged} of {same} unchanged");
        }
    });
}

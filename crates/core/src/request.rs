//! Lowering a view to a provider's request shape, and one validator per shape.
//!
//! Lowering is what a careful harness adapter does and no more: it maps roles and parts to
//! the shape, groups what the shape groups (Anthropic and Gemini put tool results in the next
//! user turn), and merges adjacent same-role turns where the provider requires or performs
//! that (Anthropic's API combines them; Gemini rejects them, so adapters such as pi-ai merge).
//! Everything else that is wrong with a view stays wrong and the validator lists it.

use rustc_hash::FxHashSet;
use smallvec::{smallvec, SmallVec};

use serde::Serialize;

use crate::{Part, Role, Shape, View};

/// One content block of a wire message, borrowing from the view it was lowered from (a
/// request is built for every shape at every step, so copying the content would dominate).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block<'a> {
    /// Text.
    Text {
        /// The text.
        text: &'a str,
    },
    /// Reasoning sent back to the provider.
    Reasoning {
        /// The text.
        text: &'a str,
    },
    /// A tool call (`tool_calls`, `function_call`, `tool_use`, `functionCall`).
    ToolCall {
        /// Call id.
        id: &'a str,
        /// Tool name.
        name: &'a str,
        /// Arguments.
        args: &'a serde_json::Value,
    },
    /// A tool result (`tool`, `function_call_output`, `tool_result`, `functionResponse`).
    ToolResult {
        /// Id of the answered call.
        call_id: &'a str,
        /// Tool name.
        name: &'a str,
        /// Output.
        text: &'a str,
        /// Failure flag.
        is_error: bool,
    },
    /// Media, by size.
    Media {
        /// Token size.
        tokens: u32,
    },
}

impl Block<'_> {
    /// Whether the block has no content: blank text or reasoning (a call, a result or media
    /// always counts as content).
    #[inline]
    pub fn is_empty(&self) -> bool {
        match self {
            Block::Text { text } | Block::Reasoning { text } => text.trim().is_empty(),
            Block::ToolCall { .. } | Block::ToolResult { .. } | Block::Media { .. } => false,
        }
    }
}

/// One message (or item) of a request.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WireMessage<'a> {
    /// Role or item type in the shape's own words (`user`, `model`, `function_call_output`, …).
    pub role: &'static str,
    /// Content (inline up to two blocks: a request is lowered for every shape at every
    /// request, and a heap allocation per message was most of that).
    pub blocks: SmallVec<[Block<'a>; 2]>,
    /// Indices of the view messages this was built from.
    pub from_view: SmallVec<[usize; 2]>,
}

impl<'a> WireMessage<'a> {
    /// Ids of the calls it makes (validation runs for every shape at every request, so the
    /// ids are read in place rather than collected).
    #[inline]
    pub fn calls(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.blocks.iter().filter_map(|b| if let Block::ToolCall { id, .. } = b { Some(*id) } else { None })
    }

    /// Ids of the calls it answers.
    #[inline]
    pub fn results(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.blocks.iter().filter_map(|b| if let Block::ToolResult { call_id, .. } = b { Some(*call_id) } else { None })
    }
}

/// A view lowered to one provider shape.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Request<'a> {
    /// The shape.
    pub shape: Shape,
    /// Top-level system content (Responses `instructions`, Anthropic `system`, Gemini
    /// `systemInstruction`); empty for OpenAI Chat, which sends system messages inline.
    pub system: Vec<Block<'a>>,
    /// Messages or items in order.
    pub messages: Vec<WireMessage<'a>>,
}

fn blocks_of(parts: &[Part], keep_reasoning: bool) -> SmallVec<[Block<'_>; 2]> {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(Block::Text { text }),
            Part::Reasoning { text } => keep_reasoning.then_some(Block::Reasoning { text }),
            Part::ToolCall { id, name, args } => Some(Block::ToolCall { id, name, args }),
            Part::ToolResult { call_id, name, text, is_error } => {
                Some(Block::ToolResult { call_id, name, text, is_error: *is_error })
            }
            Part::Media { tokens, .. } => Some(Block::Media { tokens: *tokens }),
        })
        .collect()
}

/// Lowers `view` to `shape`.
pub fn lower<'a>(view: &'a View, shape: Shape) -> Request<'a> {
    let mut request = Request { shape, system: Vec::new(), messages: Vec::with_capacity(view.len()) };
    lower_tail(view, 0, &mut request);
    request
}

/// Lowers the view messages from `from` on to `request.shape` and appends them to `request`.
/// From 0 this is [`lower`]; from a later message it continues a lowering that ended in a
/// non-system message (so no leading system messages are left, and nothing merges into what
/// `request` already holds when `request` is empty). A caller that validates successive views
/// of one conversation lowers only what changed with it.
pub fn lower_tail<'a>(view: &'a View, from: usize, request: &mut Request<'a>) {
    let shape = request.shape;
    let mut leading = from == 0;
    for (i, vm) in view.messages.iter().enumerate().skip(from) {
        let m = &vm.message;
        if m.role == Role::System && leading && shape != Shape::OpenaiChat {
            request.system.extend(blocks_of(&m.parts, false));
            continue;
        }
        leading = false;
        let wire = |role: &'static str, blocks: SmallVec<[Block<'a>; 2]>| WireMessage { role, blocks, from_view: smallvec![i] };
        match shape {
            Shape::OpenaiChat => match m.role {
                Role::System => request.messages.push(wire("system", blocks_of(&m.parts, false))),
                Role::User => request.messages.push(wire("user", blocks_of(&m.parts, false))),
                Role::Assistant => request.messages.push(wire("assistant", blocks_of(&m.parts, false))),
                // One `tool` message per result.
                Role::Tool => {
                    for b in blocks_of(&m.parts, false) {
                        request.messages.push(wire("tool", smallvec![b]));
                    }
                }
            },
            Shape::OpenaiResponses => {
                let role = match m.role {
                    Role::System => "system",
                    Role::User | Role::Tool => "user",
                    Role::Assistant => "assistant",
                };
                // Every call and every output is an item of its own; text goes in a message item.
                let mut text = SmallVec::new();
                let mut items = Vec::new();
                for b in blocks_of(&m.parts, true) {
                    match b {
                        Block::ToolCall { .. } => items.push(wire("function_call", smallvec![b])),
                        Block::ToolResult { .. } => items.push(wire("function_call_output", smallvec![b])),
                        Block::Reasoning { .. } => items.push(wire("reasoning", smallvec![b])),
                        Block::Text { .. } | Block::Media { .. } => text.push(b),
                    }
                }
                if !text.is_empty() || items.is_empty() {
                    request.messages.push(wire(role, text));
                }
                request.messages.extend(items);
            }
            Shape::Anthropic | Shape::Gemini => {
                let (user, assistant) = if shape == Shape::Anthropic { ("user", "assistant") } else { ("user", "model") };
                let role = match m.role {
                    Role::System | Role::User | Role::Tool => user,
                    Role::Assistant => assistant,
                };
                let blocks = blocks_of(&m.parts, shape == Shape::Anthropic);
                match request.messages.last_mut() {
                    Some(last) if last.role == role => {
                        last.blocks.extend(blocks);
                        last.from_view.push(i);
                    }
                    _ => request.messages.push(wire(role, blocks)),
                }
            }
        }
    }
}

/// A rule a request breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// A tool result whose call appears nowhere before it.
    OrphanResult,
    /// A tool call that is never answered (or not answered where the shape requires).
    MissingResult,
    /// A result whose call exists, but not in the message right before it.
    ResultNotAfterCall,
    /// The first message has a role the shape does not accept first.
    FirstRole,
    /// Two adjacent messages share a role the shape requires to alternate.
    ConsecutiveSameRole,
    /// A message (or, for Anthropic and Gemini, a text block) with no content.
    EmptyContent,
}

impl Rule {
    /// Every rule, in report order.
    pub const ALL: [Rule; 6] = [
        Rule::OrphanResult,
        Rule::MissingResult,
        Rule::ResultNotAfterCall,
        Rule::FirstRole,
        Rule::ConsecutiveSameRole,
        Rule::EmptyContent,
    ];

    /// Snake-case name as used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::OrphanResult => "orphan_result",
            Rule::MissingResult => "missing_result",
            Rule::ResultNotAfterCall => "result_not_after_call",
            Rule::FirstRole => "first_role",
            Rule::ConsecutiveSameRole => "consecutive_same_role",
            Rule::EmptyContent => "empty_content",
        }
    }
}

/// One broken rule, where.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The rule.
    pub rule: Rule,
    /// Index into [`Request::messages`].
    pub at: usize,
    /// What exactly (call id, roles).
    pub detail: String,
}

/// The rules [`validate`] applies to one shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShapeRules {
    /// Results must sit in the run of result-carrying messages right after their call.
    pub adjacent_results: bool,
    /// The first message must be `user`.
    pub first_user: bool,
    /// Adjacent messages must not share a role.
    pub alternate: bool,
    /// An empty text block is an error even when the message has other content.
    pub empty_blocks: bool,
}

/// The rules of `shape`.
pub fn rules(shape: Shape) -> ShapeRules {
    match shape {
        Shape::OpenaiChat => ShapeRules { adjacent_results: true, first_user: false, alternate: false, empty_blocks: false },
        Shape::OpenaiResponses => ShapeRules { adjacent_results: false, first_user: false, alternate: false, empty_blocks: false },
        Shape::Anthropic => ShapeRules { adjacent_results: true, first_user: true, alternate: false, empty_blocks: true },
        Shape::Gemini => ShapeRules { adjacent_results: true, first_user: true, alternate: true, empty_blocks: true },
    }
}

/// Every rule `request` breaks for its shape, in message order.
pub fn validate<'a>(request: &Request<'a>) -> Vec<Violation> {
    let rules = rules(request.shape);
    let mut out = Vec::new();
    let msgs = &request.messages;
    let mut push = |rule, at, detail: String| out.push(Violation { rule, at, detail });

    if rules.first_user {
        if let Some(first) = msgs.first() {
            if first.role != "user" {
                push(Rule::FirstRole, 0, format!("first message is {}", first.role));
            }
        }
    }
    for (i, m) in msgs.iter().enumerate() {
        if m.blocks.iter().all(Block::is_empty) {
            push(Rule::EmptyContent, i, format!("{} message has no content", m.role));
        } else if rules.empty_blocks && m.blocks.iter().any(Block::is_empty) {
            push(Rule::EmptyContent, i, format!("{} message has an empty text block", m.role));
        }
        if rules.alternate && i > 0 && msgs[i - 1].role == m.role {
            push(Rule::ConsecutiveSameRole, i, format!("two {} messages in a row", m.role));
        }
    }

    let mut seen: FxHashSet<&str> = FxHashSet::with_capacity_and_hasher(msgs.len(), Default::default());
    if rules.adjacent_results {
        // Calls of the latest assistant message still waiting for their results, and where.
        let mut pending: Vec<(&str, usize)> = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            if m.results().next().is_none() || m.calls().next().is_some() {
                for (id, at) in pending.drain(..) {
                    push(Rule::MissingResult, at, format!("call {id} has no result right after it"));
                }
            }
            for id in m.results() {
                if let Some(k) = pending.iter().position(|(p, _)| *p == id) {
                    pending.remove(k);
                } else if seen.contains(id) {
                    push(Rule::ResultNotAfterCall, i, format!("result for {id} is not right after its call"));
                } else {
                    push(Rule::OrphanResult, i, format!("result for {id} has no call"));
                }
            }
            for id in m.calls() {
                seen.insert(id);
                pending.push((id, i));
            }
        }
        for (id, at) in pending {
            push(Rule::MissingResult, at, format!("call {id} has no result right after it"));
        }
    } else {
        let answered: FxHashSet<&str> = msgs.iter().flat_map(WireMessage::results).collect();
        for (i, m) in msgs.iter().enumerate() {
            for id in m.results() {
                if !seen.contains(id) {
                    push(Rule::OrphanResult, i, format!("output for {id} has no earlier call"));
                }
            }
            for id in m.calls() {
                if !answered.contains(id) {
                    push(Rule::MissingResult, i, format!("call {id} has no output"));
                }
                seen.insert(id);
            }
        }
    }
    out
}

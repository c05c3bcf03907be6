//! The token meter: the fixed chars/4 heuristic (`token-meter/src/estimate.ts`) and the
//! usage-anchored pressure measurement (`token-meter/src/index.ts`), replayed over our log.

use compactbench_core::estimate::chars_div4_ceil;
use compactbench_core::{Entry, EntryId, Log, Message, Part, Role, SummaryPosition, View, Window};

/// Structural overhead of every content block (`BLOCK_OVERHEAD`).
const BLOCK_OVERHEAD: u64 = 4;
/// Role framing of every priced message (`ROLE_OVERHEAD`).
const ROLE_OVERHEAD: u64 = 4;

/// The attachment reference an image block carries in the original, with stand-in values
/// for what our messages do not record (id, byte size, dimensions).
pub(crate) fn image_block_json(mime: &str) -> serde_json::Value {
    serde_json::json!({
        "type": "image",
        "attachment": {
            "attachmentId": "00000000-0000-4000-8000-000000000000",
            "mediaType": mime,
            "bytes": 100000,
            "width": 1000,
            "height": 1000,
        },
    })
}

fn text_block(text: &str) -> u64 {
    chars_div4_ceil(text) + BLOCK_OVERHEAD
}

/// `estimateContent` for one block.
fn block(part: &Part) -> u64 {
    match part {
        Part::Text { text } | Part::Reasoning { text } => text_block(text),
        Part::ToolCall { name, args, .. } => {
            chars_div4_ceil(name) + chars_div4_ceil(&args.to_string()) + BLOCK_OVERHEAD
        }
        // The result's content is one text block, priced recursively, plus the result block.
        Part::ToolResult { text, .. } => text_block(text) + BLOCK_OVERHEAD,
        // Unknown-to-the-switch blocks are priced by their JSON (`default:` branch).
        Part::Media { mime, .. } => BLOCK_OVERHEAD + chars_div4_ceil(&image_block_json(mime).to_string()),
    }
}

/// `estimateMessage`. Every tool result is its own user-role message in the original, so a
/// tool message pays the role framing once per result.
pub(crate) fn estimate_message(message: &Message) -> u64 {
    let results = message.parts.iter().filter(|p| matches!(p, Part::ToolResult { .. })).count() as u64;
    message.parts.iter().map(block).sum::<u64>() + ROLE_OVERHEAD * results.max(1)
}

/// How a message moves the open-tool-call count: `+` its calls, `−1` per result.
pub(crate) fn pairing_delta(message: &Message) -> i64 {
    message.tool_call_ids().count() as i64 - message.tool_result_ids().count() as i64
}

/// The session's system prompt: the log's leading system messages.
pub(crate) fn system_prompt(log: &Log) -> Option<String> {
    let texts: Vec<String> = log.messages().take_while(|(_, m)| m.role == Role::System).map(|(_, m)| m.text()).collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}

/// `estimateHeader`: the system prompt (tools are not part of our envelope).
fn header_tokens(system: Option<&str>) -> u64 {
    system.map_or(0, |s| chars_div4_ceil(s) + ROLE_OVERHEAD)
}

/// One priced surface node: a view message after the system prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    /// Index into the view.
    pub(crate) at: usize,
    pub(crate) tokens: u64,
    pub(crate) delta: i64,
}

/// Where the pressure figure is anchored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Baseline {
    /// No request yet and an empty surface.
    None,
    /// The heuristic price of the envelope and surface.
    Estimated,
    /// The newest reply's provider usage.
    Usage,
}

impl Baseline {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Baseline::None => "none",
            Baseline::Estimated => "estimated",
            Baseline::Usage => "usage",
        }
    }
}

/// `TokenMeasurement`: pressure and the priced surface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Measurement {
    /// `totalTokens`.
    pub(crate) total: u64,
    pub(crate) baseline: Baseline,
    /// The surface in order.
    pub(crate) nodes: Vec<Node>,
}

/// The anchor the meter records at an assistant reply.
struct Anchor {
    surface: u64,
    baseline: u64,
    usage: bool,
}

struct FoldNode {
    entry: Option<EntryId>,
    role: Role,
    tokens: u64,
}

/// Replays the log's surface as the meter folds session events, and returns the anchor of
/// the newest assistant reply. The anchor's surface is the surface at the reply's step start
/// (before the step's own new user messages) plus the reply itself, as `_foldEvent` records it.
fn newest_anchor(log: &Log, header: u64) -> Option<Anchor> {
    let mut nodes: Vec<FoldNode> = Vec::new();
    let mut leading = true;
    let mut anchor = None;
    for (id, entry) in log.entries() {
        match entry {
            Entry::Message(m) => {
                if leading && m.role == Role::System {
                    continue;
                }
                leading = false;
                let tokens = estimate_message(m);
                if m.role == Role::Assistant {
                    let total: u64 = nodes.iter().map(|n| n.tokens).sum();
                    let step_user: u64 = nodes
                        .iter()
                        .rev()
                        .take_while(|n| n.entry.is_some() && n.role == Role::User)
                        .map(|n| n.tokens)
                        .sum();
                    let surface = total - step_user + tokens;
                    let estimated = header + surface;
                    anchor = Some(match m.usage {
                        Some(u) if u.total() >= estimated => Anchor { surface, baseline: u.total(), usage: true },
                        _ => Anchor { surface, baseline: estimated, usage: false },
                    });
                }
                nodes.push(FoldNode { entry: Some(id), role: m.role, tokens });
            }
            Entry::Checkpoint(cp) => {
                for r in &cp.replacements {
                    if let Some(n) = nodes.iter_mut().find(|n| n.entry == Some(r.entry)) {
                        n.tokens = estimate_message(&r.message);
                    }
                }
                let kept: Box<dyn Fn(EntryId) -> bool + '_> = match &cp.window {
                    Window::Inherit => continue,
                    Window::From(first) => {
                        let first = *first;
                        Box::new(move |e| e >= first)
                    }
                    Window::Kept(ids) => Box::new(move |e| ids.contains(&e)),
                };
                nodes.retain(|n| n.entry.is_some_and(&kept));
                let mut head: Vec<FoldNode> = Vec::new();
                let summary = cp.summary.as_ref().map(|s| FoldNode { entry: None, role: s.role, tokens: estimate_message(s) });
                let injected = cp.injected.iter().map(|m| FoldNode { entry: None, role: m.role, tokens: estimate_message(m) });
                match cp.summary_position {
                    SummaryPosition::AfterSystem => {
                        head.extend(summary);
                        head.extend(injected);
                        head.append(&mut nodes);
                    }
                    SummaryPosition::AfterKept => {
                        head.extend(injected);
                        head.append(&mut nodes);
                        head.extend(summary);
                    }
                }
                nodes = head;
            }
        }
    }
    anchor
}

/// `tokenMeter.measure(session)` over the view the strategy projects.
pub(crate) fn measure(log: &Log, view: &View) -> Measurement {
    let header = header_tokens(system_prompt(log).as_deref());
    let leading = view.messages.iter().take_while(|m| m.message.role == Role::System).count();
    let nodes: Vec<Node> = view.messages[leading..]
        .iter()
        .enumerate()
        .map(|(i, vm)| Node { at: leading + i, tokens: estimate_message(&vm.message), delta: pairing_delta(&vm.message) })
        .collect();
    let surface: u64 = nodes.iter().map(|n| n.tokens).sum();
    let (total, baseline) = match newest_anchor(log, header) {
        Some(a) => {
            let total = (a.baseline as i128 + surface as i128 - a.surface as i128).max(0) as u64;
            (total, if a.usage { Baseline::Usage } else { Baseline::Estimated })
        }
        None if header == 0 && surface == 0 => (0, Baseline::None),
        None => (header + surface, Baseline::Estimated),
    };
    Measurement { total, baseline, nodes }
}

/// Whether no tool call is open after the last node.
pub(crate) fn balanced_at_tail(nodes: &[Node]) -> bool {
    nodes.iter().map(|n| n.delta).sum::<i64>() == 0
}

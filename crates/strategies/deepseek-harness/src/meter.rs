//! The token meter: the fixed chars/4 heuristic (`token-meter/src/estimate.ts`) and the
//! usage-anchored pressure measurement (`token-meter/src/index.ts`), replayed over our log.

use compactbench_core::estimate::{chars_div4_ceil, json_utf16_len};
use compactbench_core::{Checkpoint, Entry, EntryId, Log, Message, Origin, Part, Role, SummaryPosition, View, Window};

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

/// `estimateContent` for one block. A JSON text's `ceil(len / 4)` is taken over its length
/// counted without building it (`json_utf16_len(v)` is `utf16_len(v.to_string())`).
fn block(part: &Part) -> u64 {
    match part {
        Part::Text { text } | Part::Reasoning { text } => text_block(text),
        Part::ToolCall { name, args, .. } => chars_div4_ceil(name) + json_utf16_len(args).div_ceil(4) + BLOCK_OVERHEAD,
        // The result's content is one text block, priced recursively, plus the result block.
        Part::ToolResult { text, .. } => text_block(text) + BLOCK_OVERHEAD,
        // Unknown-to-the-switch blocks are priced by their JSON (`default:` branch).
        Part::Media { mime, .. } => BLOCK_OVERHEAD + json_utf16_len(&image_block_json(mime)).div_ceil(4),
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

/// `estimate_message` of log messages, each priced on first use and remembered: the fold
/// and the surface price the same log messages (the view shows a log message verbatim under
/// [`Origin::Entry`]), and a measurement needs only those on the surface now and at the
/// newest reply, not the whole log.
struct LogPrices<'a> {
    log: &'a Log,
    memo: Vec<Option<u64>>,
}

impl<'a> LogPrices<'a> {
    fn new(log: &'a Log) -> LogPrices<'a> {
        LogPrices { log, memo: vec![None; log.len()] }
    }

    fn get(&mut self, id: EntryId) -> u64 {
        let log = self.log;
        *self.memo[id.index()]
            .get_or_insert_with(|| estimate_message(log.message(id).expect("a priced log entry is a message")))
    }
}

/// What a folded node is priced by: its log message (or the replacement a checkpoint made of
/// it, see [`Fold`]), or a checkpoint's summary or injected message.
#[derive(Clone, Copy)]
enum Source<'a> {
    Log(EntryId),
    Message(&'a Message),
}

/// The folded surface.
struct Fold<'a> {
    nodes: Vec<FoldNode<'a>>,
    /// The newest replacement of each log message, by entry index. The meter re-prices a
    /// replaced message only while it is on the surface; recording every replacement here
    /// instead is the same, since a message that has left the surface never returns (nodes
    /// only come back as new, later entries).
    replaced: Vec<Option<&'a Message>>,
}

struct FoldNode<'a> {
    entry: Option<EntryId>,
    role: Role,
    source: Source<'a>,
}

/// Replays the log's surface as the meter folds session events, and returns the anchor of
/// the newest assistant reply. The anchor's surface is the surface at the reply's step start
/// (before the step's own new user messages) plus the reply itself, as `_foldEvent` records it.
///
/// The meter records an anchor at every reply and the newest one wins, so only the fold up
/// to the newest reply matters, and only the nodes on the surface at that point are priced
/// (the original's running surface total is that sum).
fn newest_anchor(log: &Log, header: u64, prices: &mut LogPrices<'_>) -> Option<Anchor> {
    let (reply_id, reply) = log.messages().rev().find(|(_, m)| m.role == Role::Assistant)?;
    let mut fold = Fold { nodes: Vec::with_capacity(reply_id.index()), replaced: vec![None; reply_id.index()] };
    let mut leading = true;
    for (id, entry) in log.entries().take(reply_id.index()) {
        match entry {
            Entry::Message(m) => {
                if leading && m.role == Role::System {
                    continue;
                }
                leading = false;
                fold.nodes.push(FoldNode { entry: Some(id), role: m.role, source: Source::Log(id) });
            }
            Entry::Checkpoint(cp) => fold.checkpoint(cp),
        }
    }
    let Fold { nodes, replaced } = fold;
    let mut price = |n: &FoldNode<'_>| match n.source {
        Source::Log(id) => replaced[id.index()].map_or_else(|| prices.get(id), estimate_message),
        Source::Message(m) => estimate_message(m),
    };
    let total: u64 = nodes.iter().map(&mut price).sum();
    let step_user: u64 =
        nodes.iter().rev().take_while(|n| n.entry.is_some() && n.role == Role::User).map(&mut price).sum();
    let surface = total - step_user + prices.get(reply_id);
    let estimated = header + surface;
    Some(match reply.usage {
        Some(u) if u.total() >= estimated => Anchor { surface, baseline: u.total(), usage: true },
        _ => Anchor { surface, baseline: estimated, usage: false },
    })
}

impl<'a> Fold<'a> {
    /// A checkpoint's effect on the folded surface: its replacements take their messages'
    /// place, then, when it sets a window, the kept nodes with the summary and injected
    /// messages around them.
    fn checkpoint(&mut self, cp: &'a Checkpoint) {
        for r in &cp.replacements {
            // A replacement names an earlier log message; one beyond the fold names no node.
            if let Some(slot) = self.replaced.get_mut(r.entry.index()) {
                *slot = Some(&r.message);
            }
        }
        let kept: Box<dyn Fn(EntryId) -> bool + '_> = match &cp.window {
            Window::Inherit => return,
            Window::From(first) => {
                let first = *first;
                Box::new(move |e| e >= first)
            }
            Window::Kept(ids) => Box::new(move |e| ids.contains(&e)),
        };
        let nodes = &mut self.nodes;
        nodes.retain(|n| n.entry.is_some_and(&kept));
        let mut head: Vec<FoldNode<'a>> = Vec::with_capacity(nodes.len() + 1 + cp.injected.len());
        let summary = cp.summary.as_ref().map(|s| FoldNode { entry: None, role: s.role, source: Source::Message(s) });
        let injected = cp.injected.iter().map(|m| FoldNode { entry: None, role: m.role, source: Source::Message(m) });
        match cp.summary_position {
            SummaryPosition::AfterSystem => {
                head.extend(summary);
                head.extend(injected);
                head.append(nodes);
            }
            SummaryPosition::AfterKept => {
                head.extend(injected);
                head.append(nodes);
                head.extend(summary);
            }
        }
        *nodes = head;
    }
}

/// `tokenMeter.measure(session)` over the view the strategy projects.
pub(crate) fn measure(log: &Log, view: &View) -> Measurement {
    let header = header_tokens(system_prompt(log).as_deref());
    let mut prices = LogPrices::new(log);
    let leading = view.messages.iter().take_while(|m| m.message.role == Role::System).count();
    let nodes: Vec<Node> = view.messages[leading..]
        .iter()
        .enumerate()
        .map(|(i, vm)| {
            let tokens = match vm.origin {
                Origin::Entry(id) => prices.get(id),
                _ => estimate_message(&vm.message),
            };
            Node { at: leading + i, tokens, delta: pairing_delta(&vm.message) }
        })
        .collect();
    let surface: u64 = nodes.iter().map(|n| n.tokens).sum();
    let (total, baseline) = match newest_anchor(log, header, &mut prices) {
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

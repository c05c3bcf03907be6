//! The session branch as oh-my-pi sees it, rebuilt from our append-only log.
//!
//! oh-my-pi rewrites stored entries in place when it prunes or shakes (`rewriteEntries`) and
//! appends a `compaction` entry when it summarizes. Our log only grows, so the in-place
//! rewrites are whole-message replacements in checkpoints with [`Window::Inherit`], and the
//! current content of an entry is the log message with the newest replacement applied.
//! [`Branch`] folds that branch from the log one entry at a time (a replay keeps one; the
//! from-scratch functions fold the whole log). [`Work`] is that current branch plus what one
//! maintenance pass has done so far: each step rewrites it in memory and records the
//! checkpoint it will append, so later steps of the same pass (a fallback method, the
//! dead-end rescue) see the rewritten history exactly as the original does.

use std::borrow::Cow;
use std::collections::BTreeSet;

use compactbench_core::{Checkpoint, CheckpointKind, Entry, EntryId, Log, Message, Part, Replacement, Role, Window};
use rustc_hash::FxHashMap;
use serde_json::{json, Value};

use crate::tokens::{count_compaction_summary, count_message, is_usage_anchor, prompt_tokens, valid_usage};

/// `CompactionEntry.summary` of a compaction entry (one of our checkpoints that sets a
/// window): the raw summary text, file list included, wrapper excluded.
pub(crate) fn summary_text(cp: &Checkpoint) -> Cow<'_, str> {
    match cp.details.get("summary").and_then(Value::as_str) {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(cp.summary.as_ref().map(Message::text).unwrap_or_default()),
    }
}

/// `firstKeptEntryId` of a compaction entry.
pub(crate) fn first_kept(cp: &Checkpoint) -> Option<EntryId> {
    match &cp.window {
        Window::From(id) => Some(*id),
        Window::Kept(ids) => ids.first().copied(),
        Window::Inherit => None,
    }
}

/// A list of strings a compaction entry stored in its details (`readFiles`, `modifiedFiles`).
pub(crate) fn strings(cp: &Checkpoint, key: &str) -> Vec<String> {
    cp.details
        .get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// One branch entry.
pub(crate) enum Item<'a> {
    /// A `message` entry with its current content; `pruned` holds the indices of `ToolResult`
    /// parts that carry oh-my-pi's `prunedAt` stamp.
    /// `tokens` is its `countMessage` while it shows a message of the log (which never
    /// changes, so the [`Branch`] counts it once); `None` once a pass rewrote it.
    Msg { id: EntryId, msg: Content<'a, Message>, pruned: BTreeSet<usize>, tokens: Option<u64> },
    /// A `compaction` entry.
    Compaction { id: EntryId, cp: Content<'a, Checkpoint> },
}

/// The current content of a branch entry: stored in the log (a message, the newest
/// replacement of it, a checkpoint), or made by this pass. Not a `Cow`: that is as large as
/// a message, and the branch is rebuilt with one item per message at every decision.
pub(crate) enum Content<'a, T> {
    Stored(&'a T),
    Made(Box<T>),
}

impl<T> std::ops::Deref for Content<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        match self {
            Content::Stored(t) => t,
            Content::Made(t) => t,
        }
    }
}

impl Item<'_> {
    pub(crate) fn id(&self) -> EntryId {
        match self {
            Item::Msg { id, .. } | Item::Compaction { id, .. } => *id,
        }
    }

    pub(crate) fn message(&self) -> Option<&Message> {
        match self {
            Item::Msg { msg, .. } => Some(msg),
            Item::Compaction { .. } => None,
        }
    }
}

/// A message of the rebuilt model context (`buildSessionContext`): a branch message, or the
/// summary of the latest compaction. Values are indices into [`Work::items`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ctx {
    Msg(usize),
    Summary(usize),
}

/// The tool result carried by one `ToolResult` part of a tool message, with the loose text
/// and media parts that follow it (oh-my-pi stores one `toolResult` message per call; a tool
/// message of ours with several results is read as several of them).
pub(crate) struct ResultUnit {
    /// Index of the `ToolResult` part.
    pub(crate) part: usize,
    /// Indices of its text-bearing parts (the result itself first).
    pub(crate) texts: Vec<usize>,
    /// Number of media parts.
    pub(crate) images: u64,
}

/// The result units of a tool message.
pub(crate) fn result_units(m: &Message) -> Vec<ResultUnit> {
    let mut units: Vec<ResultUnit> = Vec::new();
    for (i, part) in m.parts.iter().enumerate() {
        match part {
            Part::ToolResult { .. } => units.push(ResultUnit { part: i, texts: vec![i], images: 0 }),
            Part::Text { .. } => {
                if let Some(u) = units.last_mut() {
                    u.texts.push(i);
                }
            }
            Part::Media { .. } => {
                if let Some(u) = units.last_mut() {
                    u.images += 1;
                }
            }
            Part::Reasoning { .. } | Part::ToolCall { .. } => {}
        }
    }
    units
}

/// The text of a text-bearing part.
pub(crate) fn part_text(part: &Part) -> &str {
    match part {
        Part::Text { text } | Part::ToolResult { text, .. } | Part::Reasoning { text } => text,
        Part::ToolCall { .. } | Part::Media { .. } => "",
    }
}

impl ResultUnit {
    /// Non-empty text fragments of the result.
    pub(crate) fn fragments<'m>(&self, m: &'m Message) -> Vec<&'m str> {
        self.texts.iter().map(|&i| part_text(&m.parts[i])).filter(|t| !t.is_empty()).collect()
    }

    /// `countMessage` of the `toolResult` message this unit stands for.
    pub(crate) fn tokens(&self, m: &Message) -> u64 {
        crate::tokens::count_fragments(self.fragments(m)) + self.images * crate::tokens::IMAGE_TOKEN_ESTIMATE
    }

    /// Tool name and call id of the result.
    pub(crate) fn call<'m>(&self, m: &'m Message) -> (&'m str, &'m str) {
        match &m.parts[self.part] {
            Part::ToolResult { call_id, name, .. } => (name, call_id),
            _ => ("", ""),
        }
    }

    /// The message with this result's content replaced by `text`: its own text becomes
    /// `text`, its loose text parts go, and its media stay only if `keep_media`.
    pub(crate) fn rewrite(&self, m: &Message, text: &str, keep_media: bool) -> Message {
        let mut out = m.clone();
        let end = self.end(m);
        out.parts = m
            .parts
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                if i == self.part {
                    let Part::ToolResult { call_id, name, is_error, .. } = p else { return Some(p.clone()) };
                    return Some(Part::ToolResult {
                        call_id: call_id.clone(),
                        name: name.clone(),
                        text: text.to_owned(),
                        is_error: *is_error,
                    });
                }
                if i > self.part && i < end {
                    return match p {
                        Part::Media { .. } if keep_media => Some(p.clone()),
                        Part::Text { .. } | Part::Media { .. } => None,
                        _ => Some(p.clone()),
                    };
                }
                Some(p.clone())
            })
            .collect();
        out
    }

    /// One past the last part belonging to this unit.
    fn end(&self, m: &Message) -> usize {
        m.parts
            .iter()
            .enumerate()
            .skip(self.part + 1)
            .find(|(_, p)| matches!(p, Part::ToolResult { .. }))
            .map_or(m.parts.len(), |(i, _)| i)
    }
}

/// Tool calls on the branch by id: `(tool name, arguments)` (`collectToolCallsById`).
pub(crate) type ToolCalls<'w> = FxHashMap<&'w str, (&'w str, &'w Value)>;

/// The branch folded from the log entry by entry: what a replay keeps between requests, and
/// what [`Work::from_branch`] turns into the branch a pass works on.
#[derive(Debug, Default)]
pub(crate) struct Branch {
    /// The log's leading system messages (its first entries): oh-my-pi's system prompt,
    /// outside the session.
    system: Vec<EntryId>,
    /// `countMessage` summed over `system` (`computeNonMessageTokens`).
    system_tokens: u64,
    /// Branch entries in order.
    slots: Vec<Slot>,
    /// Log entry -> its slot, for message entries.
    index: Vec<Option<usize>>,
    /// `contextSnapshot.historyRewriteTokensRemoved` per usage-anchor assistant.
    removed: FxHashMap<EntryId, u64>,
}

/// A branch entry of a [`Branch`]. `from`: the checkpoint and replacement holding a message's
/// newest rewrite, if any; `tokens`: its `countMessage`.
#[derive(Debug)]
enum Slot {
    Msg { id: EntryId, from: Option<(EntryId, usize)>, tokens: u64, pruned: BTreeSet<usize> },
    Compaction { id: EntryId },
}

impl Branch {
    /// Takes in entry `id`, just appended to `log`: a message joins the branch (or the system
    /// prompt, while only system messages came before); a checkpoint's replacements become
    /// the current content of the messages they name, its `prunedAt` stamps (of entries
    /// before it) and the tokens it removed before a usage anchor are recorded, and one that
    /// sets a window is a compaction entry.
    pub(crate) fn push(&mut self, log: &Log, id: EntryId) {
        self.index.push(None);
        match log.get(id).expect("pushed entries are in the log") {
            Entry::Message(m) if m.role == Role::System && self.system.len() == id.index() => {
                self.system.push(id);
                self.system_tokens += count_message(m);
            }
            Entry::Message(m) => {
                self.index[id.index()] = Some(self.slots.len());
                self.slots.push(Slot::Msg { id, from: None, tokens: count_message(m), pruned: BTreeSet::new() });
            }
            Entry::Checkpoint(cp) => {
                for (n, r) in cp.replacements.iter().enumerate() {
                    if let Some(Slot::Msg { from, tokens, .. }) = self.slot_mut(r.entry.index()) {
                        *from = Some((id, n));
                        *tokens = count_message(&r.message);
                    }
                }
                for pair in cp.details.get("pruned").and_then(Value::as_array).into_iter().flatten() {
                    let entry = pair.get(0).and_then(Value::as_u64).filter(|&e| e < u64::from(id.0));
                    let part = pair.get(1).and_then(Value::as_u64);
                    if let (Some(entry), Some(part)) = (entry, part) {
                        if let Some(Slot::Msg { pruned, .. }) = self.slot_mut(entry as usize) {
                            pruned.insert(part as usize);
                        }
                    }
                }
                if let Some(anchor) = cp.details.get("anchor").and_then(Value::as_u64) {
                    let removed = cp.details.get("anchoredTokensRemoved").and_then(Value::as_u64).unwrap_or(0);
                    *self.removed.entry(EntryId(anchor as u32)).or_default() += removed;
                }
                if cp.window != Window::Inherit {
                    self.slots.push(Slot::Compaction { id });
                }
            }
        }
    }

    /// The slot of message entry `entry`, if it is on the branch.
    fn slot_mut(&mut self, entry: usize) -> Option<&mut Slot> {
        let i = self.index.get(entry).copied().flatten()?;
        Some(&mut self.slots[i])
    }
}

/// The branch being maintained, and the checkpoints one maintenance pass will append.
pub(crate) struct Work<'a> {
    /// The log's leading system messages: oh-my-pi's system prompt, outside the session.
    pub(crate) system: Vec<&'a Message>,
    /// `computeNonMessageTokens`: the system prompt's count (our log carries no tool schemas).
    system_tokens: u64,
    /// Branch entries in order.
    pub(crate) items: Vec<Item<'a>>,
    /// `contextSnapshot.historyRewriteTokensRemoved` per usage-anchor assistant.
    removed: FxHashMap<EntryId, u64>,
    /// The id the next appended checkpoint gets.
    next: u32,
    /// Checkpoints this pass produced, in order.
    pub(crate) out: Vec<Checkpoint>,
}

/// What one rewrite step changed.
#[derive(Default)]
pub(crate) struct Rewrite {
    changed: BTreeSet<usize>,
    pruned: Vec<(EntryId, usize)>,
}

impl Rewrite {
    pub(crate) fn is_empty(&self) -> bool {
        self.changed.is_empty()
    }

    /// Log ids of the changed messages.
    pub(crate) fn entries(&self, work: &Work<'_>) -> Vec<EntryId> {
        self.changed.iter().map(|&i| work.items[i].id()).collect()
    }
}

impl<'a> Work<'a> {
    /// The branch of `log`, folded from scratch.
    pub(crate) fn new(log: &'a Log) -> Work<'a> {
        let mut branch = Branch::default();
        log.entries().for_each(|(id, _)| branch.push(log, id));
        Work::from_branch(log, &branch)
    }

    /// The branch `branch` folded from `log`, its messages borrowed from the log.
    pub(crate) fn from_branch(log: &'a Log, branch: &Branch) -> Work<'a> {
        let checkpoint = |id| match log.get(id) {
            Some(Entry::Checkpoint(cp)) => cp,
            _ => unreachable!("rewrites and compactions are checkpoints of the log"),
        };
        let items = branch
            .slots
            .iter()
            .map(|slot| match *slot {
                Slot::Msg { id, from, tokens, ref pruned } => {
                    let msg = match from {
                        Some((cp, n)) => &checkpoint(cp).replacements[n].message,
                        None => log.message(id).expect("message slots are messages of the log"),
                    };
                    Item::Msg { id, msg: Content::Stored(msg), pruned: pruned.clone(), tokens: Some(tokens) }
                }
                Slot::Compaction { id } => Item::Compaction { id, cp: Content::Stored(checkpoint(id)) },
            })
            .collect();
        Work {
            system: branch.system.iter().filter_map(|&id| log.message(id)).collect(),
            system_tokens: branch.system_tokens,
            items,
            removed: branch.removed.clone(),
            next: log.next_id().0,
            out: Vec::new(),
        }
    }

    /// The message of item `i` (panics on a compaction item).
    pub(crate) fn msg(&self, i: usize) -> &Message {
        self.items[i].message().expect("item is a message")
    }

    /// Whether part `part` of item `i` is stamped `prunedAt`.
    pub(crate) fn is_pruned(&self, i: usize, part: usize) -> bool {
        matches!(&self.items[i], Item::Msg { pruned, .. } if pruned.contains(&part))
    }

    /// Replaces the content of item `i` in this pass.
    pub(crate) fn replace(&mut self, i: usize, message: Message, rw: &mut Rewrite) {
        if let Item::Msg { msg, tokens, .. } = &mut self.items[i] {
            *msg = Content::Made(Box::new(message));
            *tokens = None;
            rw.changed.insert(i);
        }
    }

    /// Stamps `prunedAt` on part `part` of item `i`.
    pub(crate) fn mark_pruned(&mut self, i: usize, part: usize, rw: &mut Rewrite) {
        if let Item::Msg { id, pruned, .. } = &mut self.items[i] {
            pruned.insert(part);
            rw.pruned.push((*id, part));
        }
    }

    /// Index of the latest compaction entry.
    pub(crate) fn latest_compaction(&self) -> Option<usize> {
        self.items.iter().rposition(|it| matches!(it, Item::Compaction { .. }))
    }

    /// The latest compaction entry.
    pub(crate) fn latest(&self) -> Option<&Checkpoint> {
        self.latest_compaction().map(|i| match &self.items[i] {
            Item::Compaction { cp, .. } => &**cp,
            Item::Msg { .. } => unreachable!("latest_compaction returns a compaction"),
        })
    }

    /// `keepBoundaryId`: the latest compaction's `firstKeptEntryId`, as an item index (0 when
    /// absent or not found, as `resolveBoundaryIndex` does).
    pub(crate) fn boundary_index(&self) -> usize {
        let Some(first) = self.latest().and_then(first_kept) else { return 0 };
        self.items.iter().position(|it| it.id() == first).unwrap_or(0)
    }

    /// The newest usage anchor after the latest compaction entry, as an item index.
    pub(crate) fn usage_anchor(&self) -> Option<usize> {
        let from = self.latest_compaction().map_or(0, |c| c + 1);
        (from..self.items.len()).rev().find(|&i| self.items[i].message().is_some_and(is_usage_anchor))
    }

    /// Adds tokens a rewrite removed before the usage anchor (`recordAnchoredHistoryRewrite`).
    pub(crate) fn record_removed(&mut self, anchor: EntryId, tokens: u64) {
        *self.removed.entry(anchor).or_default() += tokens;
    }

    /// `buildSessionContext` in model mode: the latest compaction's summary first, then the
    /// messages from its `firstKeptEntryId` (searched before it), then everything after it.
    pub(crate) fn context(&self) -> Vec<Ctx> {
        let Some(ci) = self.latest_compaction() else {
            return (0..self.items.len()).filter(|&i| self.items[i].message().is_some()).map(Ctx::Msg).collect();
        };
        let mut out = vec![Ctx::Summary(ci)];
        let first = self.latest().and_then(first_kept);
        if let Some(start) = self.items[..ci].iter().position(|it| Some(it.id()) == first) {
            out.extend((start..ci).filter(|&i| self.items[i].message().is_some()).map(Ctx::Msg));
        }
        out.extend((ci + 1..self.items.len()).filter(|&i| self.items[i].message().is_some()).map(Ctx::Msg));
        out
    }

    /// `countMessage` of a context message.
    pub(crate) fn count(&self, c: Ctx) -> u64 {
        match c {
            Ctx::Msg(i) => self.message_tokens(i),
            Ctx::Summary(i) => match &self.items[i] {
                Item::Compaction { cp, .. } => count_compaction_summary(&summary_text(cp), 0),
                Item::Msg { .. } => 0,
            },
        }
    }

    /// `#estimateStoredContextTokens` of the context `ctx` ([`Work::context`], which takes a
    /// pass over the branch to build, so a caller needing several figures builds it once):
    /// the local floor, system prompt plus every context message.
    pub(crate) fn stored_estimate(&self, ctx: &[Ctx]) -> u64 {
        self.system_tokens + ctx.iter().map(|&c| self.count(c)).sum::<u64>()
    }

    /// `getContextUsage().tokens` (`getContextBreakdown`): anchored on the newest good reply
    /// after the latest compaction — its prompt tokens minus what rewrites removed before it,
    /// plus the local count of every later context message — or, without an anchor, the
    /// system prompt plus every context message.
    pub(crate) fn context_usage(&self, ctx: &[Ctx]) -> u64 {
        if let Some(anchor) = self.usage_anchor() {
            if let Some(pos) = ctx.iter().position(|&c| c == Ctx::Msg(anchor)) {
                let usage = valid_usage(self.msg(anchor)).expect("anchor has usage");
                let removed = self.removed.get(&self.items[anchor].id()).copied().unwrap_or(0);
                return prompt_tokens(&usage).saturating_sub(removed)
                    + ctx[pos + 1..].iter().map(|&c| self.count(c)).sum::<u64>();
            }
        }
        self.stored_estimate(ctx)
    }

    /// `compactionContextTokens(getContextUsage(), storedEstimate)`: the residual the
    /// post-maintenance checks compare.
    pub(crate) fn residual(&self, ctx: &[Ctx]) -> u64 {
        self.context_usage(ctx).max(self.stored_estimate(ctx))
    }

    /// `collectToolCallsById` over the branch.
    pub(crate) fn tool_calls(&self) -> ToolCalls<'_> {
        let mut calls = FxHashMap::with_capacity_and_hasher(self.items.len(), Default::default());
        for it in &self.items {
            let Some(m) = it.message() else { continue };
            if m.role != Role::Assistant {
                continue;
            }
            for p in &m.parts {
                if let Part::ToolCall { id, name, args } = p {
                    calls.insert(id.as_str(), (name.as_str(), args));
                }
            }
        }
        calls
    }

    /// `countMessage` of message item `i` (0 for a compaction item): the log's own count
    /// while it shows a log message, else counted now.
    pub(crate) fn message_tokens(&self, i: usize) -> u64 {
        match &self.items[i] {
            Item::Msg { tokens: Some(t), .. } => *t,
            Item::Msg { msg, .. } => count_message(msg),
            Item::Compaction { .. } => 0,
        }
    }

    /// For each item, the tokens of every message entry strictly after it
    /// (`computeMessageSuffixTokens`; compaction entries count nothing).
    pub(crate) fn message_suffix_tokens(&self) -> Vec<u64> {
        let mut out = vec![0; self.items.len()];
        let mut acc = 0;
        for i in (0..self.items.len()).rev() {
            out[i] = acc;
            acc += self.message_tokens(i);
        }
        out
    }

    /// A rewrite checkpoint for `rw`: replacements for every changed message (whole-message
    /// stand-ins keeping their call ids) and the `prunedAt` stamps in `details.pruned`.
    pub(crate) fn rewrite_checkpoint(&self, kind: CheckpointKind, rw: &Rewrite, mut details: Value) -> Checkpoint {
        let mut cp = Checkpoint::new(kind, Window::Inherit);
        cp.replacements = rw
            .changed
            .iter()
            .map(|&i| Replacement { entry: self.items[i].id(), message: self.msg(i).clone() })
            .collect();
        if let Value::Object(map) = &mut details {
            map.insert("pruned".into(), json!(rw.pruned.iter().map(|(e, p)| json!([e.0, p])).collect::<Vec<_>>()));
        }
        cp.details = details;
        cp
    }

    /// Appends `cp` to this pass's output; a window-setting one becomes the latest
    /// compaction entry of the branch.
    pub(crate) fn emit(&mut self, cp: Checkpoint) -> EntryId {
        let id = EntryId(self.next);
        self.next += 1;
        if cp.window != Window::Inherit {
            self.items.push(Item::Compaction { id, cp: Content::Made(Box::new(cp.clone())) });
        }
        self.out.push(cp);
        id
    }
}

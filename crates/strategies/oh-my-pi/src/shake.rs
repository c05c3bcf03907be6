//! Shake: heavy content elided in place behind recoverable placeholders, no model call
//! (agent-core `compaction/shake.ts` for the regions; coding-agent `session-maintenance.ts`
//! `shake`, `#shakeElidePlaceholder`, `#shakeArtifactText` for the offload).

use compactbench_core::tools::{tool_kind, tool_path, ToolKind};
use compactbench_core::{CheckpointKind, Message, Offload, Part, Role, VirtualStore};
use serde_json::json;

use crate::branch::{part_text, result_units, Item, Rewrite, ToolCalls, Work};
use crate::tokens::count_text;

/// A shake preset (`ShakeConfig`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ShakeConfig {
    pub(crate) name: &'static str,
    /// Keep the newest this-many tokens of context intact.
    pub(crate) protect_tokens: u64,
    /// Shake only if the estimated savings reach this.
    pub(crate) min_savings: u64,
    /// Smallest fenced/XML block worth eliding.
    pub(crate) fence_min_tokens: u64,
    /// Whether reads of `artifact://` are protected (eliding one only mints another).
    pub(crate) protect_artifact_reads: bool,
}

/// `DEFAULT_SHAKE_CONFIG`: the automatic `shake` method.
pub(crate) const DEFAULT_SHAKE: ShakeConfig = ShakeConfig {
    name: "default",
    protect_tokens: 16_000,
    min_savings: 4_000,
    fence_min_tokens: 400,
    protect_artifact_reads: true,
};

/// `AGGRESSIVE_SHAKE_CONFIG`: manual `/shake` (not reachable automatically).
#[cfg(test)]
pub(crate) const AGGRESSIVE_SHAKE: ShakeConfig = ShakeConfig {
    name: "aggressive",
    protect_tokens: 4_000,
    min_savings: 0,
    fence_min_tokens: 400,
    protect_artifact_reads: false,
};

/// `RESCUE_SHAKE_CONFIG`: the compaction dead-end rescue (aggressive, no protect window,
/// artifact reads protected).
pub(crate) const RESCUE_SHAKE: ShakeConfig = ShakeConfig {
    name: "rescue",
    protect_tokens: 0,
    min_savings: 0,
    fence_min_tokens: 400,
    protect_artifact_reads: true,
};

/// `PLACEHOLDER_TOKEN_ESTIMATE`: a placeholder's assumed cost in the savings gate.
const PLACEHOLDER_TOKEN_ESTIMATE: u64 = 16;

/// What a region covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RegionKind {
    /// A whole tool result (the `ToolResult` part at this index).
    ToolResult { part: usize },
    /// A fenced or XML block: byte range `[start, end)` of the text part at this index.
    Block { part: usize, start: usize, end: usize },
}

/// `ShakeRegion`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Region {
    /// Branch item index.
    pub(crate) item: usize,
    pub(crate) kind: RegionKind,
    pub(crate) tokens: u64,
    pub(crate) original: String,
    /// Tool name, or the role of the message holding the block.
    pub(crate) label: String,
}

/// `scanTextForBlockRanges`: fenced blocks (a line starting, after indentation, with three
/// backticks or tildes, up to the next such line) and top-level lowercase XML elements whose
/// opening and closing tags sit alone on unindented lines. Ranges cover whole lines without
/// the final newline; unterminated ones are ignored; nested ranges collapse to the outermost.
pub(crate) fn block_ranges(text: &str) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let mut in_fence = false;
    let mut fence_start = 0;
    let mut tags: Vec<&str> = Vec::new();
    let mut xml_start: Option<usize> = None;
    let mut line_start = 0;
    // Each line ends at a newline or at the end of the text.
    for i in memchr::memchr_iter(b'\n', text.as_bytes()).chain([text.len()]) {
        let line = &text[line_start..i];
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            if in_fence {
                ranges.push((fence_start, i));
            } else {
                fence_start = line_start;
            }
            in_fence = !in_fence;
            line_start = i + 1;
            continue;
        }
        if !in_fence {
            if let Some(tag) = opening_tag(trimmed).filter(|_| line.len() == trimmed.len()) {
                if tags.is_empty() {
                    xml_start = Some(line_start);
                }
                tags.push(tag);
            } else if let Some(tag) = closing_tag(trimmed) {
                if tags.last() == Some(&tag) {
                    tags.pop();
                    if tags.is_empty() {
                        if let Some(start) = xml_start.take() {
                            ranges.push((start, i));
                        }
                    }
                }
            }
        }
        line_start = i + 1;
    }
    ranges.sort_by_key(|r| r.0);
    let mut kept: Vec<(usize, usize)> = Vec::new();
    for r in ranges {
        if kept.last().is_some_and(|last| r.0 < last.1) {
            continue;
        }
        kept.push(r);
    }
    kept
}

fn is_tag_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_' || b == b'-')
}

/// `^<([a-z_-]+)(?:\s+[^>]*)?>$`.
fn opening_tag(s: &str) -> Option<&str> {
    let inner = s.strip_prefix('<')?.strip_suffix('>')?;
    let name_len = inner.bytes().take_while(|b| b.is_ascii_lowercase() || *b == b'_' || *b == b'-').count();
    let (name, rest) = inner.split_at(name_len);
    if !is_tag_name(name) || rest.contains('>') {
        return None;
    }
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then_some(name)
}

/// `^</([a-z_-]+)>$`.
fn closing_tag(s: &str) -> Option<&str> {
    let name = s.strip_prefix("</")?.strip_suffix('>')?;
    is_tag_name(name).then_some(name)
}

/// Whether a tool result is protected: results of `skill`, reads of `skill://` files, and (if
/// the preset says so) reads of `artifact://` files. A result counts as a read when both it
/// and its call come from a file-read tool (oh-my-pi's `read`, mapped through
/// [`tool_kind`]).
fn is_protected(name: &str, call: Option<&(&str, &serde_json::Value)>, config: &ShakeConfig) -> bool {
    if name == "skill" {
        return true;
    }
    let Some((call_name, args)) = call else { return false };
    if tool_kind(name) != ToolKind::Read || tool_kind(call_name) != ToolKind::Read {
        return false;
    }
    let Some(path) = tool_path(args) else { return false };
    path.starts_with("skill://") || (config.protect_artifact_reads && path.starts_with("artifact://"))
}

/// Protection shared with the prune passes (`DEFAULT_PRUNE_CONFIG.protectedTools`: `skill`
/// and skill-file reads).
pub(crate) fn is_protected_for_prune(name: &str, call: Option<&(&str, &serde_json::Value)>) -> bool {
    is_protected(name, call, &ShakeConfig { protect_artifact_reads: false, ..DEFAULT_SHAKE })
}

/// `collectShakeRegions`: every eligible region at or after the compaction boundary whose
/// later context (all entries strictly after it) reaches `protect_tokens`; tool results not
/// already pruned and not protected; fenced/XML blocks of at least `fence_min_tokens` in
/// user, assistant and (mid-log system, read as `developer`) messages. Nothing if the
/// savings estimate `Σ max(0, tokens − 16)` stays under `min_savings`.
pub(crate) fn collect_regions(work: &Work<'_>, config: &ShakeConfig) -> Vec<Region> {
    let after = work.message_suffix_tokens();
    let calls: ToolCalls<'_> = work.tool_calls();
    let boundary = work.boundary_index();
    let mut regions = Vec::new();
    for (i, item) in work.items.iter().enumerate().skip(boundary) {
        let Item::Msg { msg, .. } = item else { continue };
        // Results flagged useless bypass the protect window; nothing in our sessions is.
        if after[i] < config.protect_tokens {
            continue;
        }
        match msg.role {
            Role::Tool => {
                for unit in result_units(msg) {
                    if work.is_pruned(i, unit.part) {
                        continue;
                    }
                    let (name, call_id) = unit.call(msg);
                    if is_protected(name, calls.get(call_id), config) {
                        continue;
                    }
                    let fragments = unit.fragments(msg);
                    if fragments.is_empty() {
                        continue;
                    }
                    regions.push(Region {
                        item: i,
                        kind: RegionKind::ToolResult { part: unit.part },
                        tokens: crate::tokens::count_fragments(fragments.iter().copied()),
                        original: fragments.join("\n"),
                        label: name.to_owned(),
                    });
                }
            }
            role => {
                let label = match role {
                    Role::Assistant => "assistant",
                    Role::User => "user",
                    _ => "developer",
                };
                for (pi, part) in msg.parts.iter().enumerate() {
                    let Part::Text { text } = part else { continue };
                    for (start, end) in block_ranges(text) {
                        let slice = &text[start..end];
                        let tokens = count_text(slice);
                        if slice.is_empty() || tokens < config.fence_min_tokens {
                            continue;
                        }
                        regions.push(Region {
                            item: i,
                            kind: RegionKind::Block { part: pi, start, end },
                            tokens,
                            original: slice.to_owned(),
                            label: label.to_owned(),
                        });
                    }
                }
            }
        }
    }
    let savings: u64 = regions.iter().map(|r| r.tokens.saturating_sub(PLACEHOLDER_TOKEN_ESTIMATE)).sum();
    if savings < config.min_savings {
        return Vec::new();
    }
    regions
}

/// `#shakeElidePlaceholder` (literal forms).
pub(crate) fn placeholder(region: &Region, index: usize, artifact: Option<&str>) -> String {
    match artifact {
        Some(id) => format!("[shaken ~{} tokens — recover: artifact://{id} (region {})]", region.tokens, index + 1),
        None => format!("[shaken ~{} tokens]", region.tokens),
    }
}

/// `#shakeArtifactText`: one section per region — heading, blank line, original, blank line.
pub(crate) fn artifact_text(regions: &[Region]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for (i, r) in regions.iter().enumerate() {
        parts.push(format!("### region {} ({}, ~{} tok)", i + 1, r.label, r.tokens));
        parts.push(String::new());
        parts.push(r.original.clone());
        parts.push(String::new());
    }
    parts.join("\n")
}

/// `applyShakeRegion(s)` on one message: a tool result's content becomes the replacement
/// (its media kept, `prunedAt` stamped by the caller); block regions are spliced into their
/// text, highest offset first so earlier offsets stay valid.
pub(crate) fn apply(message: &Message, regions: &[(&Region, String)]) -> Message {
    let mut out = message.clone();
    let mut blocks: Vec<(usize, usize, usize, &str)> = Vec::new();
    for (region, replacement) in regions {
        match region.kind {
            RegionKind::ToolResult { part } => {
                if let Some(unit) = result_units(&out).into_iter().find(|u| u.part == part) {
                    out = unit.rewrite(&out, replacement, true);
                }
            }
            RegionKind::Block { part, start, end } => blocks.push((part, start, end, replacement)),
        }
    }
    blocks.sort_by_key(|b| std::cmp::Reverse(b.1));
    for (part, start, end, replacement) in blocks {
        if let Some(Part::Text { text }) = out.parts.get_mut(part) {
            text.replace_range(start..end, replacement);
        }
    }
    out
}

/// What one shake pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ShakeResult {
    pub(crate) tool_results: usize,
    pub(crate) blocks: usize,
    pub(crate) tokens_freed: u64,
    pub(crate) artifact: Option<String>,
}

impl ShakeResult {
    pub(crate) fn reclaimed(&self) -> bool {
        self.tool_results + self.blocks > 0
    }
}

/// The next free session artifact id: artifacts are numbered from 0 in the order they are
/// written, and live in the virtual store under `artifact://<id>`, the internal URL the
/// agent's read tool resolves.
fn next_artifact_id(store: &VirtualStore) -> String {
    store.paths().filter(|p| p.starts_with("artifact://")).count().to_string()
}

/// `shake("elide", config)`: collects the regions, saves their original text as one
/// artifact, replaces each by its placeholder, records the rewrite (and the tokens it removed
/// before the usage anchor) and appends one offload checkpoint.
pub(crate) fn shake(work: &mut Work<'_>, config: &ShakeConfig, store: &mut VirtualStore, reason: &str) -> ShakeResult {
    let regions = collect_regions(work, config);
    if regions.is_empty() {
        return ShakeResult::default();
    }
    let tokens_before = work.residual(&work.context());
    let id = next_artifact_id(store);
    let path = format!("artifact://{id}");
    store.write(path.clone(), artifact_text(&regions));
    let replacements: Vec<String> = regions.iter().enumerate().map(|(i, r)| placeholder(r, i, Some(&id))).collect();
    let replacement_tokens: Vec<u64> =
        replacements.iter().map(|r| if r.is_empty() { 0 } else { count_text(r) }).collect();

    let anchor = work.usage_anchor();
    let mut anchored_removed = 0;
    let mut result = ShakeResult { artifact: Some(id), ..ShakeResult::default() };
    let (mut original, mut replaced) = (0, 0);
    for (i, r) in regions.iter().enumerate() {
        match r.kind {
            RegionKind::ToolResult { .. } => result.tool_results += 1,
            RegionKind::Block { .. } => result.blocks += 1,
        }
        original += r.tokens;
        replaced += replacement_tokens[i];
        if anchor.is_some_and(|a| r.item < a) {
            anchored_removed += r.tokens.saturating_sub(replacement_tokens[i]);
        }
    }
    result.tokens_freed = original.saturating_sub(replaced);

    let mut rw = Rewrite::default();
    let mut items: Vec<usize> = regions.iter().map(|r| r.item).collect();
    items.dedup();
    for item in items {
        let mine: Vec<(&Region, String)> =
            regions.iter().zip(&replacements).filter(|(r, _)| r.item == item).map(|(r, s)| (r, s.clone())).collect();
        let message = apply(work.msg(item), &mine);
        work.replace(item, message, &mut rw);
        for (r, _) in &mine {
            if let RegionKind::ToolResult { part } = r.kind {
                work.mark_pruned(item, part, &mut rw);
            }
        }
    }
    let anchor_id = anchor.map(|a| work.items[a].id());
    if let Some(a) = anchor_id {
        work.record_removed(a, anchored_removed);
    }
    let entries = rw.entries(work);
    let mut cp = work.rewrite_checkpoint(
        CheckpointKind::Offload,
        &rw,
        json!({
            "step": "shake",
            "preset": config.name,
            "reason": reason,
            "toolResultsDropped": result.tool_results,
            "blocksDropped": result.blocks,
            "tokensFreed": result.tokens_freed,
            "artifact": path,
            "anchor": anchor_id.map(|a| a.0),
            "anchoredTokensRemoved": anchored_removed,
        }),
    );
    cp.offloads = vec![Offload { path, entries }];
    cp.tokens_before = tokens_before;
    work.emit(cp);
    result
}

/// `dropImages`: strips image parts from every message of the branch (a message left with no
/// content gets the literal `[image removed]`). Returns how many were removed; appends one
/// prune checkpoint if any.
pub(crate) fn drop_images(work: &mut Work<'_>) -> usize {
    let tokens_before = work.residual(&work.context());
    let mut rw = Rewrite::default();
    let mut removed = 0;
    for i in 0..work.items.len() {
        let Some(m) = work.items[i].message() else { continue };
        // Assistant turns carry no image blocks in oh-my-pi; only user, developer and tool
        // results are stripped.
        if m.role == Role::Assistant {
            continue;
        }
        let images =
            m.parts.iter().filter(|p| matches!(p, Part::Media { mime, .. } if mime.starts_with("image/"))).count();
        if images == 0 {
            continue;
        }
        let mut out = m.clone();
        out.parts.retain(|p| !matches!(p, Part::Media { mime, .. } if mime.starts_with("image/")));
        if !out.parts.iter().any(|p| !part_text(p).is_empty()) {
            out.parts.push(Part::text("[image removed]"));
        }
        removed += images;
        work.replace(i, out, &mut rw);
    }
    if !rw.is_empty() {
        let mut cp = work.rewrite_checkpoint(
            CheckpointKind::Prune,
            &rw,
            json!({"step": "drop-images", "imagesDropped": removed}),
        );
        cp.tokens_before = tokens_before;
        work.emit(cp);
    }
    removed
}

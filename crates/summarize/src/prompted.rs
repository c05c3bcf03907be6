//! The prompt-following summarizer: extractive, but it writes the sections the strategy's own
//! summary prompt asks for.
//!
//! Rule (documented in README and ARCHITECTURE.md, and the only rule):
//! 1. Read the request's `system` and `instructions` (the strategy's own summary prompt; the
//!    system prompt only when its opening is about summarizing, since some harnesses send the
//!    agent's own system prompt there) and find which [`Section`]s it asks for: a section is
//!    asked for when one of its prompt phrases occurs (lowercase, at a word start). Sections come
//!    in the order of their first mention. Names the prompt quotes in backticks (identifiers and
//!    paths, [`named_terms`]: what a user's compaction instructions add) ask for a first section,
//!    `User focus`, of every line naming one (with `Recent context` after it when nothing else
//!    is asked for). If none is found, the summary is the [`Extractive`] one.
//! 2. Split the transcript into lines as the extractive summarizer does (every escaped `\n`
//!    of a JSON-lines record also splits), trimmed and cut to [`MAX_LINE_CHARS`](crate::MAX_LINE_CHARS) characters,
//!    and mark the lines of user messages (`[User]:` blocks, `User:`/`Human:` lines, JSON
//!    records with role `user` that carry no tool result) and the leads (first line of a
//!    paragraph, label block or record).
//! 3. Each section has its candidate lines, from patterns of the line alone (error lines,
//!    lines naming a file path, "no matches"/"not found", user lines with must/never/always/
//!    don't, decided/chose/will use, TODO/pending/still open before a bare "next", definitions,
//!    ...), newest first; a JSON record's pieces are read with one level of escapes undone;
//!    `Recent context` takes every line with the extractive ranking.
//! 4. The budget `min(max_output_tokens, TARGET_TOKENS)` exact tokens (heading and newline
//!    included) is shared among the requested sections, filled in prompt order within three
//!    groups: the pattern sections first, then `User requests` (every user line), then
//!    `Recent context`, so that a line lands in its most specific section. Each section may
//!    use an equal share of what is left, and what it leaves goes to the sections after it;
//!    then a second pass spends what is still left. A line is taken once; a line that does
//!    not fit is skipped and shorter ones are still tried.
//! 5. Emit, in prompt order, `## <Section>` and the section's lines in transcript order;
//!    sections are separated by a blank line, and a section with no line is left out.
//!
//! It sees only the request, never the planted facts. The stop reason is `Length` when
//! candidates were left out because of the caller's own cap (not the target), as for
//! [`Extractive`].

use std::borrow::Cow;
use std::sync::Arc;

use compactbench_core::{Error, StopReason, Summarizer, Summary, SummaryRequest};
use compactbench_tokens::TokenCounter;
use dashmap::DashMap;
use rustc_hash::{FxBuildHasher, FxHashSet};
use xxhash_rust::xxh3::xxh3_64;

use crate::extractive::{cut, Extractive, TARGET_TOKENS};

/// A section a summary prompt can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Section {
    /// What the user asked for and means.
    Requests,
    /// Rules and preferences the user set.
    Constraints,
    /// Errors and failures, as exact lines.
    Errors,
    /// Files read, changed or created.
    Files,
    /// Decisions and their reasons.
    Decisions,
    /// What is still open, and the next step.
    NextSteps,
    /// What was learned: searches that found nothing, causes ruled out.
    NegativeResults,
    /// Names of functions, types and flags.
    Identifiers,
    /// The latest work, whatever it is (the extractive ranking).
    Recent,
    /// Every line naming what the prompt names in backticks (the user's "keep the lines about
    /// `cache_port_q7k2`"): see [`named_terms`].
    Named,
}

/// The table: each section, its heading, and the prompt phrases that ask for it.
const TABLE: &[(Section, &str, &[&str])] = &[
    (
        Section::Requests,
        "User requests",
        &["goal", "request", "intent", "trying to achieve", "wants to achieve", "user messages", "objective"],
    ),
    (
        Section::Constraints,
        "Constraints",
        &["constraint", "preference", "directive", "requirement", "convention", "rules", "do something differently"],
    ),
    (Section::Errors, "Errors", &["error", "fail", "bug", "blocked", "blocker", "exception"]),
    (Section::Files, "Files", &["file", "artifact", "path"]),
    (Section::Decisions, "Decisions", &["decision", "decided", "chose", "choice"]),
    (
        Section::NextSteps,
        "Next steps",
        &["next step", "pending", "todo", "still left", "left to do", "remaining", "open question", "plan"],
    ),
    (
        Section::NegativeResults,
        "Negative results",
        &["learned", "knowledge", "discover", "finding", "troubleshoot", "ruled out", "dead end", "negative result", "not found", "searched"],
    ),
    (
        Section::Identifiers,
        "Identifiers",
        &["function name", "signature", "identifier", "symbol", "code snippet", "code pattern"],
    ),
    (
        Section::Recent,
        "Recent context",
        &["current work", "recent action", "recent work", "current state", "in progress", "being worked on", "critical context", "context that matters", "context needed", "context for"],
    ),
];

impl Section {
    /// Fill order: sections of specific lines (0), the user's messages (1), the catch-all (2).
    fn tier(self) -> u8 {
        match self {
            Section::Requests => 1,
            Section::Recent => 2,
            _ => 0,
        }
    }

    /// The heading the summary writes.
    pub fn heading(self) -> &'static str {
        if self == Section::Named {
            return "User focus";
        }
        TABLE.iter().find(|(s, _, _)| *s == self).map(|(_, h, _)| *h).expect("every section is in the table")
    }
}

/// `hay.find(needle)` by memchr's substring search: the candidate rules run dozens of searches
/// over each new line, and std's two-way searcher is set up anew for each.
fn find(hay: &str, needle: &str) -> Option<usize> {
    memchr::memmem::find(hay.as_bytes(), needle.as_bytes())
}

/// Whether `needle` occurs in `hay` at a word start (the character before it, if any, is not
/// alphanumeric or `_`). Both lowercase.
fn at_word_start(hay: &str, needle: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = find(&hay[from..], needle) {
        let at = from + i;
        let before = hay[..at].chars().next_back();
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return Some(at);
        }
        from = at + needle.len();
    }
    None
}

/// Whether `word` occurs in `hay` as a whole word. Both lowercase.
fn has_word(hay: &str, word: &str) -> bool {
    let mut from = 0;
    while let Some(i) = find(&hay[from..], word) {
        let at = from + i;
        let before = hay[..at].chars().next_back();
        let after = hay[at + word.len()..].chars().next();
        let boundary = |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        if boundary(before) && boundary(after) {
            return true;
        }
        from = at + word.len();
    }
    false
}

/// The sections `prompt` asks for, in the order of their first mention.
pub fn requested_sections(prompt: &str) -> Vec<Section> {
    let prompt = prompt.to_lowercase();
    let mut found: Vec<(usize, Section)> = TABLE
        .iter()
        .filter_map(|(section, _, phrases)| phrases.iter().filter_map(|p| at_word_start(&prompt, p)).min().map(|at| (at, *section)))
        .collect();
    found.sort_unstable();
    found.into_iter().map(|(_, s)| s).collect()
}

/// Words that make a system prompt a summary prompt (otherwise it is the agent's own system
/// prompt, which some harnesses send along, and it asks for no section).
const SUMMARY_MARKERS: &[&str] = &["summar", "condens", "compress", "snapshot", "checkpoint", "compact"];

/// How much of a system prompt's start [`prompt`] reads for what it is about: every summary
/// system prompt of the strategies says so in its first sentence or heading.
const OPENING_CHARS: usize = 300;

/// The summary prompt of `request`: its instructions, after its system prompt when that is
/// about summarizing. A system prompt is about summarizing when its opening (the first 300
/// characters) says so: an agent's own system prompt sent along may mention
/// compaction further down (a project memory's "when you compact, keep …" at its end), which
/// makes it no summary prompt.
pub fn prompt(request: &SummaryRequest) -> String {
    let system = request.system.chars().take(OPENING_CHARS).collect::<String>().to_lowercase();
    if SUMMARY_MARKERS.iter().any(|m| system.contains(m)) {
        format!("{}\n\n{}", request.system, request.instructions)
    } else {
        request.instructions.clone()
    }
}

/// What `prompt` names to keep: each span in backticks without whitespace that holds `_` or `/`
/// (an identifier or a path: `cache_port_q7k2`, `src/net/auth.rs`), once, in order. A user's
/// compaction instructions name things this way; the strategies' own prompts name none.
pub(crate) fn named_terms(prompt: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for (i, span) in prompt.split('`').enumerate() {
        let quoted = i % 2 == 1;
        if quoted && span.len() >= 3 && !span.contains(char::is_whitespace) && span.contains(['_', '/']) && !out.contains(&span) {
            out.push(span);
        }
    }
    out
}

/// One transcript line as the summarizer weighs it.
struct Line<'a> {
    text: Cow<'a, str>,
    traits: Traits,
    user: bool,
    lead: bool,
    /// A heading or placeholder: never a candidate.
    skip: bool,
}

/// Markers of a JSON record that carries tool output rather than user text.
const TOOL_RECORD: &[&str] = &["\"tool_result\"", "\"functionresponse\"", "\"function_call_output\"", "\"tool_use_id\"", "\"tool_call_id\""];

/// The role label a text transcript line opens with (`[User]: …`, `User: …`), lowercase.
fn label(line: &str) -> Option<String> {
    if let Some(rest) = line.strip_prefix('[') {
        let end = rest.find("]:")?;
        return (end <= 40).then(|| rest[..end].to_lowercase());
    }
    let end = line.find(':')?;
    let head = line[..end].to_lowercase();
    ["user", "human", "assistant", "ai", "model", "tool", "system"].contains(&head.as_str()).then_some(head)
}

/// One level of JSON string escapes undone (`\"`, `\\`, `\/`, `\t`), so that a line quoted
/// inside another record (an earlier summary or draft sent back) reads as, and dedups with,
/// the line itself.
fn unescape(piece: &str) -> Cow<'_, str> {
    if !piece.contains('\\') {
        return Cow::Borrowed(piece);
    }
    let mut out = String::with_capacity(piece.len());
    let mut chars = piece.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('\\', Some(&n @ ('"' | '\\' | '/'))) => {
                out.push(n);
                chars.next();
            }
            ('\\', Some('t')) => {
                out.push('\t');
                chars.next();
            }
            _ => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// What a line's text says, as the sections' candidate rules read it: one bit per rule,
/// worked out once per distinct text (transcripts repeat lines across compactions and
/// strategies) and memoized by [`PromptFollowing`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Traits(u16);

impl Traits {
    const CONSTRAINT: u16 = 1;
    const ERROR: u16 = 1 << 1;
    const PATH: u16 = 1 << 2;
    const MODIFIED: u16 = 1 << 3;
    const DECISION: u16 = 1 << 4;
    const OPEN: u16 = 1 << 5;
    const NEXT: u16 = 1 << 6;
    const NEGATIVE: u16 = 1 << 7;
    const DEFINITION: u16 = 1 << 8;

    fn of(text: &str) -> Traits {
        let lower = text.to_lowercase();
        let rules: [(u16, bool); 9] = [
            (Self::CONSTRAINT, has_any(&lower, CONSTRAINT)),
            (Self::ERROR, is_error(&lower)),
            (Self::PATH, names_path(text)),
            (Self::MODIFIED, MODIFIED.iter().any(|m| find(&lower, m).is_some())),
            (Self::DECISION, has_any(&lower, DECISION)),
            (Self::OPEN, has_any(&lower, OPEN)),
            (Self::NEXT, has_word(&lower, "next")),
            (Self::NEGATIVE, NEGATIVE.iter().any(|p| find(&lower, p).is_some())),
            (Self::DEFINITION, is_definition(&lower)),
        ];
        Traits(rules.iter().filter(|(_, on)| *on).fold(0, |bits, (bit, _)| bits | bit))
    }

    fn has(self, bit: u16) -> bool {
        self.0 & bit != 0
    }
}

/// Line text (by its XXH3) -> its traits, shared by every call of one summarizer.
/// The key is a hash already, so the map only folds it (Fx) rather than hashing it again.
type TraitMemo = DashMap<u64, Traits, FxBuildHasher>;

/// What a summary prompt asks for: worked out once per distinct prompt (a strategy sends the
/// same prompt at every compaction) and memoized by [`PromptFollowing`].
struct Plan {
    /// The sections to write, in prompt order; `Named` first when the prompt names terms.
    sections: Vec<Section>,
    /// The prompt's [`named_terms`].
    named: Vec<String>,
}

impl Plan {
    fn of(prompt: &str) -> Plan {
        let mut sections = requested_sections(prompt);
        let named: Vec<String> = named_terms(prompt).into_iter().map(str::to_owned).collect();
        if !named.is_empty() {
            // What the user named comes first; with nothing else asked for, the rest of the
            // budget goes to the latest work.
            if sections.is_empty() {
                sections.push(Section::Recent);
            }
            sections.insert(0, Section::Named);
        }
        Plan { sections, named }
    }
}

/// Prompt (by its XXH3) -> its plan, shared like [`TraitMemo`] (an `Arc`, so that a call holds
/// no lock on the memo while it summarizes).
type PlanMemo = DashMap<u64, Arc<Plan>>;

/// What `memo` holds for `bytes` (keyed by their XXH3), made and stored on the first call.
/// Looked up before it is written: most keys are known, and `entry` locks its shard for
/// writing even then.
fn memoized<V: Clone, S: std::hash::BuildHasher + Clone>(memo: &DashMap<u64, V, S>, bytes: &[u8], make: impl FnOnce() -> V) -> V {
    let key = xxh3_64(bytes);
    if let Some(known) = memo.get(&key) {
        return known.clone();
    }
    memo.entry(key).or_insert_with(make).clone()
}

fn lines<'t>(transcript: &'t str, memo: &TraitMemo) -> Vec<Line<'t>> {
    let mut out = Vec::new();
    // Role of the current label block in a text transcript.
    let mut user_block = false;
    let mut lead_next = true;
    for raw in transcript.lines() {
        let line = raw.trim();
        if line.is_empty() {
            lead_next = true;
            continue;
        }
        let lower = if line.starts_with('{') { line.to_lowercase() } else { String::new() };
        let record = lower.contains("\"role\"");
        let user = if record {
            let compact: String = lower.split_whitespace().collect();
            compact.contains("\"role\":\"user\"") && !TOOL_RECORD.iter().any(|m| compact.contains(m))
        } else {
            if let Some(l) = label(line) {
                user_block = l == "user" || l == "human";
                lead_next = true;
            }
            user_block
        };
        let pieces = line.split("\\n").map(|p| p.trim().trim_end_matches('\\').trim_end()).filter(|p| !p.is_empty());
        for (i, piece) in pieces.enumerate() {
            let text = if line.starts_with('{') { unescape(piece) } else { Cow::Borrowed(piece) };
            let text = match text {
                Cow::Borrowed(t) => Cow::Borrowed(cut(t)),
                Cow::Owned(mut t) => {
                    t.truncate(cut(&t).len());
                    Cow::Owned(t)
                }
            };
            // Headings and placeholders of an earlier summary carry nothing.
            let heading = text.starts_with("# ") || text.starts_with("##") || text == "(none)";
            let traits = memoized(memo, text.as_bytes(), || Traits::of(&text));
            out.push(Line { text, traits, user, lead: (i == 0 && (record || lead_next)), skip: heading });
        }
        lead_next = false;
    }
    out
}

const ERROR: &[&str] = &["error:", "error[", "panicked", "failed", "failure", "traceback", "exception", "exit code", "exit status", "fatal:"];
const NEGATIVE: &[&str] = &[
    "no matches",
    "no match found",
    "not found",
    "0 results",
    "no results",
    "nothing found",
    "found nothing",
    "does not exist",
    "doesn't exist",
    "no such file",
    "ruled out",
    "not caused by",
    "not the cause",
    "dead end",
    "did not help",
    "didn't help",
];
const CONSTRAINT: &[&str] =
    &["must", "never", "always", "don't", "do not", "should not", "shouldn't", "make sure", "important", "avoid", "prefer", "without"];
const DECISION: &[&str] = &["decided", "decision", "decide", "chose", "choose", "will use", "going with", "opted", "settled on", "instead of"];
/// Explicit open items; a bare "next" (a user's "Next: do X", often the task itself) ranks after
/// them.
const OPEN: &[&str] =
    &["todo", "next step", "pending", "still open", "remaining", "left to do", "not yet", "in progress", "follow up", "follow-up", "[ ]", "open question"];
const MODIFIED: &[&str] = &["applied edit", "edited", "modified", "created", "wrote", "updated", "renamed", "deleted", "+++ "];
const DEFINITION: &[&str] =
    &["fn ", "def ", "class ", "struct ", "enum ", "trait ", "interface ", "func ", "function ", "const ", "type "];

fn is_error(l: &str) -> bool {
    // `0 failed` is a passing test summary; `Error::Kind` is a path, not an error line.
    let l = l.replace(" 0 failed", "").replace("error::", "");
    ERROR.iter().any(|p| find(&l, p).is_some())
}

fn has_any(l: &str, words: &[&str]) -> bool {
    words.iter().any(|w| has_word(l, w))
}

/// Extensions that make a bare `name.ext` token a file name (a token with a `/` needs none
/// of these).
const EXTENSIONS: &[&str] = &[
    "rs", "py", "ts", "tsx", "js", "jsx", "go", "java", "kt", "c", "h", "cc", "cpp", "hpp", "cs", "rb", "php", "swift", "sh", "md", "txt",
    "toml", "json", "jsonl", "yaml", "yml", "lock", "cfg", "ini", "html", "css", "sql", "xml", "log",
];

/// A token that looks like a file path: `dir/name.ext`, or `name.ext` with a known extension.
fn names_path(text: &str) -> bool {
    text.split(|c: char| c.is_whitespace() || "`'\",;:()[]{}<>=".contains(c)).any(|tok| {
        let tok = tok.trim_end_matches(['.', ',']);
        let Some((stem, ext)) = tok.rsplit_once('.') else { return false };
        let name = stem.rsplit('/').next().unwrap_or(stem);
        !name.is_empty()
            && (1..=5).contains(&ext.len())
            && ext.chars().all(|c| c.is_ascii_alphanumeric())
            && ext.chars().any(|c| c.is_ascii_alphabetic())
            && if tok.contains('/') { true } else { EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()) }
    })
}

fn is_definition(l: &str) -> bool {
    DEFINITION.iter().any(|d| at_word_start(l, d).is_some())
        || l.split_whitespace().any(|t| t.starts_with("--") && t.len() > 3 && t[2..].chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
}

/// Candidate line indices of `section`, best first; `named` are the prompt's [`named_terms`].
fn candidates(section: Section, lines: &[Line<'_>], named: &[String]) -> Vec<usize> {
    let newest_first = |pred: &dyn Fn(&Line<'_>) -> bool| -> Vec<usize> { (0..lines.len()).rev().filter(|&i| !lines[i].skip && pred(&lines[i])).collect() };
    match section {
        Section::Requests => {
            let mut c = newest_first(&|l| l.user && l.lead);
            c.extend(newest_first(&|l| l.user && !l.lead));
            c
        }
        Section::Constraints => {
            let any_user = lines.iter().any(|l| l.user);
            newest_first(&|l| (l.user || !any_user) && l.traits.has(Traits::CONSTRAINT))
        }
        Section::Errors => newest_first(&|l| l.traits.has(Traits::ERROR)),
        Section::Files => {
            let mut c = newest_first(&|l| l.traits.has(Traits::PATH) && l.traits.has(Traits::MODIFIED));
            c.extend(newest_first(&|l| l.traits.has(Traits::PATH) && !l.traits.has(Traits::MODIFIED)));
            c
        }
        Section::Decisions => newest_first(&|l| l.traits.has(Traits::DECISION)),
        Section::NextSteps => {
            let mut c = newest_first(&|l| l.traits.has(Traits::OPEN));
            c.extend(newest_first(&|l| !l.traits.has(Traits::OPEN) && l.traits.has(Traits::NEXT)));
            c
        }
        Section::NegativeResults => newest_first(&|l| l.traits.has(Traits::NEGATIVE)),
        Section::Identifiers => newest_first(&|l| l.traits.has(Traits::DEFINITION)),
        Section::Recent => {
            let mut c = newest_first(&|l| l.lead);
            c.extend(newest_first(&|l| !l.lead));
            c
        }
        Section::Named => newest_first(&|l| named.iter().any(|t| l.text.contains(t.as_str()))),
    }
}

/// The deterministic prompt-following summarizer.
pub struct PromptFollowing {
    counter: TokenCounter,
    fallback: Extractive,
    traits: TraitMemo,
    plans: PlanMemo,
}

impl PromptFollowing {
    /// A summarizer counting with `counter`'s encoding.
    pub fn new(counter: TokenCounter) -> PromptFollowing {
        PromptFollowing { fallback: Extractive::new(counter.clone()), counter, traits: TraitMemo::default(), plans: PlanMemo::default() }
    }

    /// The plan of `prompt`, memoized.
    fn plan(&self, prompt: &str) -> Arc<Plan> {
        memoized(&self.plans, prompt.as_bytes(), || Arc::new(Plan::of(prompt)))
    }
}

impl Default for PromptFollowing {
    fn default() -> Self {
        PromptFollowing::new(TokenCounter::default())
    }
}

impl Summarizer for PromptFollowing {
    fn name(&self) -> &str {
        "prompted"
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        let plan = self.plan(&prompt(request));
        let Plan { sections, named } = plan.as_ref();
        if sections.is_empty() {
            return self.fallback.summarize(request);
        }
        let input_tokens = self.counter.count_text_segmented(&request.system) + self.counter.count_text_segmented(&request.user_message());
        let lines = lines(&request.transcript, &self.traits);
        let budget = request.max_output_tokens.min(TARGET_TOKENS);

        struct Fill {
            section: Section,
            candidates: Vec<usize>,
            taken: Vec<usize>,
        }
        let mut fills: Vec<Fill> =
            sections.iter().map(|&section| Fill { section, candidates: candidates(section, &lines, named), taken: Vec::new() }).collect();
        // Fill order: the sections of specific lines first, then the user's messages, then the
        // catch-all, each group in prompt order (a line goes to the most specific section).
        let mut order: Vec<usize> = (0..fills.len()).collect();
        order.sort_by_key(|&k| (fills[k].section.tier(), k));
        let mut seen: FxHashSet<&str> = FxHashSet::default();
        let mut used = 0u64;
        let cost = |text: &str| self.counter.count_text_cached(text) + 1;
        let n = fills.len() as u64;
        for pass in 0..2 {
            for (j, &k) in order.iter().enumerate() {
                let fill = &mut fills[k];
                // Pass 1: an equal share of what is left; pass 2: all that is left.
                let limit = if pass == 0 { used + (budget - used) / (n - j as u64) } else { budget };
                // The heading (and the blank line before it) is paid with the first line.
                let head = cost(&format!("## {}", fill.section.heading())) + 1;
                for &i in &fill.candidates {
                    if limit - used < 2 {
                        break;
                    }
                    let text = lines[i].text.as_ref();
                    if seen.contains(text) {
                        continue;
                    }
                    let c = cost(text) + if fill.taken.is_empty() { head } else { 0 };
                    if used + c > limit {
                        continue;
                    }
                    used += c;
                    seen.insert(text);
                    fill.taken.push(i);
                }
            }
        }
        let left_out = fills.iter().any(|f| f.candidates.iter().any(|&i| !seen.contains(lines[i].text.as_ref())));
        let mut blocks = Vec::new();
        for fill in &mut fills {
            if fill.taken.is_empty() {
                continue;
            }
            fill.taken.sort_unstable();
            let mut block = format!("## {}", fill.section.heading());
            for &i in &fill.taken {
                block.push('\n');
                block.push_str(&lines[i].text);
            }
            blocks.push(block);
        }
        let text = blocks.join("\n\n");
        let stop = if left_out && request.max_output_tokens < TARGET_TOKENS { StopReason::Length } else { StopReason::Complete };
        Ok(Summary { output_tokens: self.counter.count_text_segmented(&text), text, input_tokens, stop })
    }
}


#[cfg(test)]
mod tests {
    use expect_test::expect;

    use super::*;

    fn request(system: &str, transcript: &str, instructions: &str, cap: u64) -> SummaryRequest {
        SummaryRequest { purpose: "history".into(), context: compactbench_core::SummaryContext::Fresh, system: system.into(), transcript: transcript.into(), instructions: instructions.into(), max_output_tokens: cap }
    }

    /// The first summary request `dir`'s default strategy (from the registry) sends when it
    /// compacts a long session, captured by testkit's recording fake summarizer: the real
    /// prompts, so these tests follow the strategies when their prompts change.
    fn captured(dir: &str) -> SummaryRequest {
        use compactbench_core::{Message, Moment};
        use compactbench_testkit::{model, Harness};
        let krate = compactbench_registry::CRATES.iter().find(|c| c.dir == dir).unwrap();
        let strategy = &(krate.build)()[0];
        let mut messages = vec![Message::system("You are a coding agent. Use the tools to read, search, edit and test; fix every error.")];
        for i in 0..40 {
            let words: String = (0..400).map(|w| format!("word{} ", i * 400 + w)).collect();
            messages.push(Message::user(format!("Request {i}: {words}")));
            messages.push(Message::assistant(format!("Reply {i}: {words}")));
        }
        let mut h = Harness::new(messages, model(128_000, 8_192));
        let checkpoints = h.compact(strategy.as_ref(), Moment::TurnEnd).unwrap();
        assert!(!checkpoints.is_empty(), "{dir} did not compact");
        h.summarizer.requests().into_iter().next().unwrap_or_else(|| panic!("{dir} sent no summary request"))
    }

    /// `dir`'s captured request (its real system prompt and instructions) over `transcript`, capped at `cap`.
    fn real(dir: &str, transcript: &str, cap: u64) -> SummaryRequest {
        SummaryRequest { transcript: transcript.into(), max_output_tokens: cap, ..captured(dir) }
    }

    /// A Pi-serialized transcript with one line of each kind a prompt can ask for, and filler.
    const TRANSCRIPT: &str = "\
[User]: Fix the flaky parser test in src/parser.rs.
You must not change the public API of parser::parse; other crates depend on it.

[Assistant]: I'll read the parser first.

[Assistant tool calls]: read(path=\"src/parser.rs\")

[Tool result]: src/parser.rs
   1\tpub fn parse_header(&mut self, input: &str) -> Result<(), Error> {
   2\t    let token = self.lex(input)?;

[Assistant tool calls]: grep(pattern=\"legacy_mode\")

[Tool result]: No matches found for `legacy_mode` in 412 files.

[Assistant tool calls]: bash(command=\"cargo test parser::\")

[Tool result]: running 12 tests
test parser::tests::empty ... ok
error[E0599]: no method named `peek_byte` found for struct `Lexer` in the current scope
test result: FAILED. 11 passed; 1 failed; 0 ignored

[Assistant]: Decision: use a VecDeque for the lookahead because peek must be O(1).

[Assistant tool calls]: edit(path=\"src/lexer.rs\")

[Tool result]: Applied edit to src/lexer.rs

[Assistant]: Done for now. Still open: update the migration notes in docs/parser.md once the fix lands.";

    #[test]
    fn finds_the_sections_of_the_pi_prompt() {
        let r = captured("pi");
        use Section::*;
        assert_eq!(requested_sections(&prompt(&r)), [Requests, Constraints, Recent, Errors, Decisions, NextSteps, Files, Identifiers]);
    }

    #[test]
    fn finds_the_sections_of_the_claude_code_prompt() {
        // Claude Code sends the agent's own system prompt as the system: it is not read.
        let r = captured("claude-code");
        use Section::*;
        assert_eq!(
            requested_sections(&prompt(&r)),
            [Requests, Identifiers, Decisions, Files, Errors, Constraints, NegativeResults, NextSteps, Recent]
        );
    }

    #[test]
    fn finds_the_sections_of_the_codex_prompt() {
        let r = captured("codex");
        use Section::*;
        assert_eq!(requested_sections(&prompt(&r)), [Requests, Decisions, Recent, Constraints, NextSteps]);
    }

    #[test]
    fn finds_the_sections_of_the_gemini_cli_prompt() {
        let r = captured("gemini-cli");
        use Section::*;
        assert_eq!(
            requested_sections(&prompt(&r)),
            [Constraints, Requests, NextSteps, Errors, Files, NegativeResults, Identifiers, Decisions, Recent]
        );
    }

    #[test]
    fn writes_the_requested_sections_from_the_transcript() {
        let s = PromptFollowing::default().summarize(&real("pi", TRANSCRIPT, 2000)).unwrap();
        expect![[r###"
            ## Constraints
            You must not change the public API of parser::parse; other crates depend on it.

            ## Recent context
            [Assistant]: I'll read the parser first.
            2	    let token = self.lex(input)?;
            [Assistant tool calls]: grep(pattern="legacy_mode")
            [Tool result]: No matches found for `legacy_mode` in 412 files.
            [Assistant tool calls]: bash(command="cargo test parser::")
            [Tool result]: running 12 tests
            test parser::tests::empty ... ok

            ## Errors
            error[E0599]: no method named `peek_byte` found for struct `Lexer` in the current scope
            test result: FAILED. 11 passed; 1 failed; 0 ignored

            ## Decisions
            [Assistant]: Decision: use a VecDeque for the lookahead because peek must be O(1).

            ## Next steps
            [Assistant]: Done for now. Still open: update the migration notes in docs/parser.md once the fix lands.

            ## Files
            [User]: Fix the flaky parser test in src/parser.rs.
            [Assistant tool calls]: read(path="src/parser.rs")
            [Tool result]: src/parser.rs
            [Assistant tool calls]: edit(path="src/lexer.rs")
            [Tool result]: Applied edit to src/lexer.rs

            ## Identifiers
            1	pub fn parse_header(&mut self, input: &str) -> Result<(), Error> {"###]].assert_eq(&s.text);
        assert_eq!(s.stop, StopReason::Complete);
    }

    #[test]
    fn stays_within_the_cap_and_reports_length() {
        let long: String = (0..400).map(|i| format!("[Tool result]: error: check {i} failed in src/mod_{i}.rs\n\n[User]: you must keep step {i} small\n\n")).collect();
        for cap in [20, 60, 300, 1000] {
            let s = PromptFollowing::default().summarize(&real("pi", &long, cap)).unwrap();
            assert!(s.output_tokens <= cap, "{cap}: {} tokens\n{}", s.output_tokens, s.text);
            assert_eq!(s.stop, StopReason::Length, "{cap}");
        }
        let s = PromptFollowing::default().summarize(&real("pi", &long, 100_000)).unwrap();
        assert!(s.output_tokens <= TARGET_TOKENS, "{}", s.output_tokens);
        assert_eq!(s.stop, StopReason::Complete, "the target is ours, not the caller's cap");
        // Every requested section got a share: the newest error and the newest constraint.
        assert!(s.text.contains("error: check 399 failed") && s.text.contains("you must keep step 399 small"), "{}", s.text);
    }

    #[test]
    fn is_deterministic() {
        let json: String = TRANSCRIPT
            .split("\n\n")
            .map(|block| serde_json::json!({"role": if block.starts_with("[User]") { "user" } else { "assistant" }, "content": block}).to_string())
            .collect::<Vec<_>>()
            .join("\n");
        for (dir, transcript) in [("pi", TRANSCRIPT), ("gemini-cli", json.as_str()), ("claude-code", json.as_str())] {
            let a = PromptFollowing::default().summarize(&real(dir, transcript, 300)).unwrap();
            let b = PromptFollowing::default().summarize(&real(dir, transcript, 300)).unwrap();
            assert_eq!(a, b);
            assert!(a.text.starts_with("## "), "{}", a.text);
        }
    }

    #[test]
    fn json_records_split_at_escaped_newlines_and_know_their_role() {
        let transcript = [
            r#"{"content":[{"text":"Fix it.\nNever touch the vendored code.","type":"text"}],"role":"user"}"#,
            r#"{"content":[{"content":"Never mind: 0 results.\nerror: build failed","tool_use_id":"t1","type":"tool_result"}],"role":"user"}"#,
        ]
        .join("\n");
        let s = PromptFollowing::default().summarize(&request("", &transcript, "List the user's constraints, then the errors.", 500)).unwrap();
        assert_eq!(s.text, "## Constraints\nNever touch the vendored code.\",\"type\":\"text\"}],\"role\":\"user\"}\n\n## Errors\nerror: build failed\",\"tool_use_id\":\"t1\",\"type\":\"tool_result\"}],\"role\":\"user\"}");
    }

    #[test]
    fn a_line_quoted_back_inside_another_record_is_taken_once() {
        // Gemini CLI's verification pass sends the draft back as a model record: its lines
        // arrive escaped once more.
        let tool = r#"{"parts":[{"functionResponse":{"response":{"output":"error: \"x\" failed"}}}],"role":"user"}"#;
        let draft = format!("## Errors\n{}\n(end)", unescape(tool));
        let transcript = format!("{tool}\n{}", serde_json::json!({"parts": [{"text": draft}], "role": "model"}));
        let s = PromptFollowing::default().summarize(&request("", &transcript, "List the errors.", 500)).unwrap();
        assert_eq!(s.text, "## Errors\n{\"parts\":[{\"functionResponse\":{\"response\":{\"output\":\"error: \"x\" failed\"}}}],\"role\":\"user\"}");
    }

    /// No strategy's own summary prompt names anything in backticks, so `User focus` appears
    /// only where a user's instructions reach the prompt; and the agent's system prompt sent
    /// along stays unread even when project memory at its end mentions compaction.
    #[test]
    fn only_user_instructions_name_terms() {
        use compactbench_core::{Message, Moment};
        use compactbench_testkit::{model, Harness};
        let mut seen = 0;
        for strategy in compactbench_registry::all() {
            for at in [Moment::TurnEnd, Moment::BeforeRequest, Moment::Overflow, Moment::Manual] {
                let mut messages = vec![Message::system("You are a coding agent.")];
                for i in 0..40 {
                    let words: String = (0..400).map(|w| format!("word{} ", i * 400 + w)).collect();
                    messages.push(Message::user(format!("Request {i}: {words}")));
                    messages.push(Message::assistant(format!("Reply {i}: {words}")));
                }
                let mut h = Harness::new(messages, model(128_000, 8_192));
                let _ = h.compact(strategy.as_ref(), at);
                for r in h.summarizer.requests() {
                    seen += 1;
                    assert_eq!(named_terms(&prompt(&r)), Vec::<&str>::new(), "{} at {at:?}", strategy.info().id);
                }
            }
        }
        assert!(seen > 40, "only {seen} summary requests");
        let rules: String = (0..8).map(|i| format!("- Rule {i}: keep each change small and run the module's tests afterwards.\n")).collect();
        let agent = format!("You are a coding agent.\n{rules}\n## Compact instructions\nWhen you compact, keep the lines about `cache_port_q7k2`.");
        assert_eq!(prompt(&request(&agent, "", "Summarize the errors.", 100)), "Summarize the errors.");
        // A summary system prompt says what it is at once, under a heading or not.
        let goose = "## Task\n\nThis session is being compacted. List the errors.";
        assert_eq!(prompt(&request(goose, "", "Go.", 100)), format!("{goose}\n\nGo."));
        assert_eq!(named_terms("keep `cache_port_q7k2`, `src/net/a.rs`, `cache_port_q7k2` and `x y_z`, not `plain`"), ["cache_port_q7k2", "src/net/a.rs"]);
    }

    /// A name the instructions quote in backticks gets its own first section with every line
    /// naming it, newest first within its share; without the name the same request keeps
    /// other lines.
    #[test]
    fn follows_the_names_a_user_asks_to_keep() {
        let filler: String =
            (0..60).map(|i| format!("[User]: run check {i} again\n\n[Tool result]: error: check {i} failed in src/mod_{i}.rs\n\n")).collect();
        let transcript = format!(
            "[User]: Setting: cache_port_q7k2 = `8431` for now.\n\n{filler}[User]: Change of plan: cache_port_q7k2 = `9172` (was `8431`).\n\n{filler}"
        );
        let plain = real("pi", &transcript, 300);
        let s = PromptFollowing::default().summarize(&plain).unwrap();
        assert!(!s.text.contains("cache_port_q7k2"), "{}", s.text);
        let asked = SummaryRequest { instructions: format!("{}\n\nAdditional focus: keep `cache_port_q7k2`", plain.instructions), ..plain };
        let s = PromptFollowing::default().summarize(&asked).unwrap();
        expect![[r#"
            ## User focus
            [User]: Change of plan: cache_port_q7k2 = `9172` (was `8431`)."#]]
        .assert_eq(s.text.split("\n\n").next().unwrap());
    }

    #[test]
    fn falls_back_to_the_extractive_summary_when_the_prompt_asks_for_nothing_it_knows() {
        let r = request("You summarize.", TRANSCRIPT, "Write a short summary.", 120);
        assert!(requested_sections(&prompt(&r)).is_empty());
        let s = PromptFollowing::default().summarize(&r).unwrap();
        assert_eq!(s, Extractive::default().summarize(&r).unwrap());
    }
}

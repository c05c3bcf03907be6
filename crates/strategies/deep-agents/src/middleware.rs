//! The middleware stack around one model call, replayed on the log: the filesystem
//! middleware's evictions, the optional `compact_conversation` tool, and the summarization
//! middleware's `wrap_model_call` (argument truncation, trigger, cut, history offload,
//! summary, complete-request budget and overflow-tail clipping).
//!
//! Mapping to the seam: the raw LangGraph state is the log's messages after the leading system
//! prompt; the private `_summarization_event` is the newest summary checkpoint (window
//! `From(first kept entry)`, summary in user role right after the system prompt); state
//! rewrites (evicted or clipped tool results, tagged human messages, reasoning dropped from
//! messages kept across a summary) are replacements; backend writes go to the virtual store and
//! are listed as offloads. Argument truncation only ever changes a request, so it lives in the
//! projection.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use compactbench_core::{
    default_projection, Checkpoint, CheckpointKind, Cx, EntryId, Error, ErrorKind, Log, Message, Offload, Origin, Part,
    Replacement, Role, Summarizer, SummarizerUsage, SummaryContext, SummaryRequest, View, ViewMessage, VirtualStore, Window,
};
use serde_json::{json, Value};

use crate::config::{ModelFacts, Settings, Size};
use crate::evict::{self, Evicted};
use crate::{count, cutoff, paths, prompt, xml};

/// Key under which every checkpoint of this strategy keeps its private data.
const DETAILS_KEY: &str = "deep_agents";
/// `with_retry()`'s default: three attempts in all.
const SUMMARY_ATTEMPTS: u32 = 3;
/// Tools whose old arguments argument truncation clips.
const TRUNCATED_TOOLS: [&str; 2] = ["write_file", "edit_file"];
/// Characters of a clipped argument kept before the truncation text.
const TRUNCATED_ARG_HEAD: usize = 20;
/// The manual tool's name.
const COMPACT_TOOL: &str = "compact_conversation";

/// What produced a checkpoint.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Tool-time eviction of a large tool result (filesystem middleware).
    ToolEviction,
    /// Eviction of a large human message (filesystem middleware).
    HumanEviction,
    /// The `compact_conversation` tool.
    CompactTool,
    /// `wrap_model_call` summarized.
    Summarization,
    /// `wrap_model_call` clipped the trailing tool results without summarizing.
    TailClip,
    /// Records the model facts so the projection can apply argument truncation.
    Profile,
}

impl Step {
    fn as_str(self) -> &'static str {
        match self {
            Step::ToolEviction => "tool_eviction",
            Step::HumanEviction => "human_eviction",
            Step::CompactTool => "compact_tool",
            Step::Summarization => "summarization",
            Step::TailClip => "tail_clip",
            Step::Profile => "profile",
        }
    }

    /// Steps taken inside `wrap_model_call` for the request being built.
    fn wraps_request(step: &str) -> bool {
        step == Step::Summarization.as_str() || step == Step::TailClip.as_str()
    }
}

fn details(cp: &Checkpoint) -> Option<&Value> {
    cp.details.get(DETAILS_KEY)
}

/// The model facts recorded by the newest checkpoint of this strategy.
pub(crate) fn recorded_facts(log: &Log) -> Option<ModelFacts> {
    log.checkpoints().rev().find_map(|(_, cp)| ModelFacts::from_json(details(cp)?.get("facts")?))
}

/// The session id naming the history file, if a summary already created one.
fn session_id(log: &Log) -> Option<String> {
    log.checkpoints().rev().find_map(|(_, cp)| Some(details(cp)?.get("session_id")?.as_str()?.to_owned()))
}

/// The newest summarization event's `cutoff_index`.
fn previous_cutoff(log: &Log) -> Option<u64> {
    log.checkpoints().rev().find_map(|(_, cp)| details(cp)?.get("cutoff_index")?.as_u64())
}

/// Summaries made so far (numbers the archive sections).
fn summary_rounds(log: &Log) -> u64 {
    log.checkpoints().filter(|(_, cp)| details(cp).and_then(|d| d.get("cutoff_index")).is_some()).count() as u64
}

/// Checkpoints appended after the newest message: what has been done for the pending request.
fn pending_checkpoints(log: &Log) -> impl Iterator<Item = &Checkpoint> {
    log.entries().rev().map_while(|(_, e)| match e {
        compactbench_core::Entry::Checkpoint(cp) => Some(&**cp),
        compactbench_core::Entry::Message(_) => None,
    })
}

/// The argument-truncation set recorded by a `wrap_model_call` step for the pending request.
pub(crate) fn recorded_truncation(log: &Log) -> Option<HashSet<EntryId>> {
    let (_, entry) = log.entries().next_back()?;
    let compactbench_core::Entry::Checkpoint(cp) = entry else { return None };
    let ids = details(cp)?.get("request_truncated")?.as_array()?;
    Some(ids.iter().filter_map(|v| v.as_u64()).map(|i| EntryId(i as u32)).collect())
}

/// Number of leading system messages (the system prompt, sent apart from the message list).
pub(crate) fn leading_system(view: &View) -> usize {
    view.messages
        .iter()
        .take_while(|vm| vm.message.role == Role::System && matches!(vm.origin, Origin::Entry(_)))
        .count()
}

/// Messages of a view slice.
fn msgs(items: &[ViewMessage]) -> Vec<&Message> {
    items.iter().map(|vm| &vm.message).collect()
}

/// `_count_tokens`: the main counter over the system prompt and the message list (tool schemas
/// are not part of the seam).
pub(crate) fn total_tokens(system: &[ViewMessage], messages: &[ViewMessage], settings: &Settings) -> u64 {
    count::count(system.iter().chain(messages).map(|vm| &vm.message), settings.chars_per_token(), true)
}

fn should_truncate(len: usize, total: u64, settings: &Settings) -> bool {
    match settings.truncate.trigger {
        None => false,
        Some(Size::Messages(m)) => len as u64 >= m,
        Some(Size::Tokens(t)) => total >= t,
        Some(Size::Fraction(f)) => settings.fraction_tokens(f).is_some_and(|t| total >= t),
    }
}

/// `_truncate_args`: the request copy with old `write_file` / `edit_file` string arguments
/// clipped, and the entries that were clipped.
pub(crate) fn truncate_args(effective: &[ViewMessage], total: u64, settings: &Settings) -> HashSet<EntryId> {
    let mut out = HashSet::new();
    if !should_truncate(effective.len(), total, settings) {
        return out;
    }
    let cut = cutoff::truncate_cutoff(&msgs(effective), settings);
    if cut >= effective.len() {
        return out;
    }
    for vm in &effective[..cut] {
        if let Some(entry) = vm.origin.entry() {
            if truncated_message(&vm.message, settings).is_some() {
                out.insert(entry);
            }
        }
    }
    out
}

/// The message with its clipped arguments, if any argument needs clipping.
pub(crate) fn truncated_message(m: &Message, settings: &Settings) -> Option<Message> {
    if m.role != Role::Assistant {
        return None;
    }
    let max = settings.truncate.max_length;
    let mut out = m.clone();
    let mut changed = false;
    for part in &mut out.parts {
        let Part::ToolCall { name, args, .. } = part else { continue };
        if !TRUNCATED_TOOLS.contains(&name.as_str()) {
            continue;
        }
        let Some(map) = args.as_object_mut() else { continue };
        for value in map.values_mut() {
            if let Value::String(s) = value {
                if s.chars().count() > max {
                    let head: String = s.chars().take(TRUNCATED_ARG_HEAD).collect();
                    *s = format!("{head}{}", settings.truncate.truncation_text);
                    changed = true;
                }
            }
        }
    }
    changed.then_some(out)
}

/// The argument truncation of the request built from `view`, the default projection of `log`
/// (`total`: its main count): what the `wrap_model_call` step that built the pending request
/// recorded, else what `_truncate_args` clips now.
pub(crate) fn request_truncation(log: &Log, view: &View, total: impl FnOnce() -> u64, settings: &Settings) -> HashSet<EntryId> {
    recorded_truncation(log).unwrap_or_else(|| truncate_args(&view.messages[leading_system(view)..], total(), settings))
}

/// Applies a truncation set to view messages.
pub(crate) fn apply_truncation(messages: &mut [ViewMessage], ids: &HashSet<EntryId>, settings: &Settings) {
    for vm in messages {
        if vm.origin.entry().is_some_and(|e| ids.contains(&e)) {
            if let Some(m) = truncated_message(&vm.message, settings) {
                vm.message = m;
            }
        }
    }
}

/// `_should_summarize_based_on_reported_tokens`: the newest assistant message's reported total
/// (same model, so the provider always matches).
fn reported_at_least(messages: &[ViewMessage], threshold: u64) -> bool {
    messages
        .iter()
        .rev()
        .find(|vm| vm.message.role == Role::Assistant)
        .and_then(|vm| vm.message.usage)
        .is_some_and(|u| u.total() > 0 && u.total() >= threshold)
}

/// `_should_summarize`: OR over clauses, AND within one.
fn should_summarize(messages: &[ViewMessage], total: u64, settings: &Settings) -> bool {
    settings.trigger.iter().any(|clause| {
        clause.messages.is_none_or(|m| messages.len() as u64 >= m)
            && clause.tokens.is_none_or(|t| total >= t || reported_at_least(messages, t))
            && clause.fraction.is_none_or(|f| {
                settings.fraction_tokens(f).is_some_and(|t| total >= t || reported_at_least(messages, t))
            })
    })
}

fn over_budget(total: u64, settings: &Settings) -> bool {
    settings.input_budget().is_some_and(|b| total > b)
}

/// `SummarizationToolMiddleware._is_eligible_for_compaction`: half of each trigger clause, with
/// token and fraction metrics read only from provider-reported usage.
pub(crate) fn compact_tool_eligible(messages: &[ViewMessage], settings: &Settings) -> bool {
    let half = |v: f64| ((v * 0.5) as u64).max(1);
    settings.trigger.iter().any(|clause| {
        clause.messages.is_none_or(|m| messages.len() as u64 >= half(m as f64))
            && clause.tokens.is_none_or(|t| reported_at_least(messages, half(t as f64)))
            && clause.fraction.is_none_or(|f| {
                settings.facts.max_input_tokens.is_some_and(|max| reported_at_least(messages, half(max as f64 * f)))
            })
    })
}

/// What `wrap_model_call` computes before acting.
struct Plan<'a> {
    total_untruncated: u64,
    /// The request list: effective messages with old arguments clipped.
    request: Cow<'a, [ViewMessage]>,
    truncated: HashSet<EntryId>,
    total: u64,
}

/// The plan for `effective` after `system`, whose main count is `total_untruncated`.
fn plan<'a>(system: &[ViewMessage], effective: &'a [ViewMessage], total_untruncated: u64, settings: &Settings) -> Plan<'a> {
    let truncated = truncate_args(effective, total_untruncated, settings);
    if truncated.is_empty() {
        return Plan { total_untruncated, request: Cow::Borrowed(effective), truncated, total: total_untruncated };
    }
    let mut request = effective.to_vec();
    apply_truncation(&mut request, &truncated, settings);
    let total = total_tokens(system, &request, settings);
    Plan { total_untruncated, request: Cow::Owned(request), truncated, total }
}

/// The trailing tool results of the newest message batch, if one answers `compact_conversation`:
/// the number of trailing tool messages.
fn compact_tool_batch(effective: &[ViewMessage]) -> Option<usize> {
    let n = effective.iter().rev().take_while(|vm| vm.message.role == Role::Tool).count();
    let answered = effective[effective.len() - n..]
        .iter()
        .any(|vm| vm.message.parts.iter().any(|p| matches!(p, Part::ToolResult { name, .. } if name == COMPACT_TOOL)));
    (n > 0 && answered).then_some(n)
}

/// Why the strategy would act before the next request, if it would, given `view`, the default
/// projection of `log`, and its main count `total`.
pub(crate) fn reason_before_request(log: &Log, view: &View, total: u64, settings: &Settings) -> Option<&'static str> {
    let (system, effective) = view.messages.split_at(leading_system(view));
    if evict::pending_tool_evictions(effective, settings) {
        return Some("large-tool-result");
    }
    if evict::pending_human_eviction(effective, settings) {
        return Some("large-human-message");
    }
    if let Some(n) = compact_tool_batch(effective).filter(|_| pending_checkpoints(log).next().is_none()) {
        let at_tool_time = &effective[..effective.len() - n];
        if compact_tool_eligible(at_tool_time, settings) && cutoff::cutoff(&msgs(at_tool_time), settings) > 0 {
            return Some(COMPACT_TOOL);
        }
    }
    let plan = plan(system, effective, total, settings);
    let budget = over_budget(plan.total, settings);
    if should_summarize(&plan.request, plan.total, settings) || budget {
        let reason = if budget { "input-budget" } else { "threshold" };
        // Over the budget with nothing to summarize, the original still clips the trailing tool
        // results, or fails the request when that is not enough.
        if budget || cutoff::cutoff(&msgs(&plan.request), settings) > 0 {
            return Some(reason);
        }
    }
    if !plan.truncated.is_empty() && recorded_facts(log).is_none() {
        return Some("truncate-args");
    }
    None
}

/// A log being extended by one compaction, so each step sees the previous steps' effect.
pub(crate) struct Work<'s> {
    log: Log,
    settings: &'s Settings,
    out: Vec<Checkpoint>,
}

impl<'s> Work<'s> {
    pub(crate) fn new(log: &Log, settings: &'s Settings) -> Work<'s> {
        Work { log: log.clone(), settings, out: Vec::new() }
    }

    pub(crate) fn finish(self) -> Vec<Checkpoint> {
        self.out
    }

    fn push(&mut self, cp: Checkpoint) {
        self.log.push_checkpoint(cp.clone());
        self.out.push(cp);
    }

    fn details(&self, step: Step, extra: Value) -> Value {
        let mut d = json!({ "step": step.as_str(), "facts": self.settings.facts.to_json() });
        if let (Some(map), Value::Object(extra)) = (d.as_object_mut(), extra) {
            map.extend(extra);
        }
        json!({ DETAILS_KEY: d })
    }

    fn view(&self) -> (View, usize) {
        let view = default_projection(&self.log);
        let n = leading_system(&view);
        (view, n)
    }

    fn offload_checkpoint(&self, step: Step, evicted: Evicted, tokens_before: u64, extra: Value) -> Checkpoint {
        let kind = if evicted.offloads.is_empty() { CheckpointKind::Prune } else { CheckpointKind::Offload };
        let mut cp = Checkpoint::new(kind, Window::Inherit);
        cp.replacements = evicted.replacements;
        cp.offloads = evicted.offloads;
        cp.tokens_before = tokens_before;
        cp.details = self.details(step, extra);
        cp
    }

    /// The filesystem middleware: large tool results (tool time) and the newest large human
    /// message (model-call time, outside the summarization middleware).
    pub(crate) fn evictions(&mut self, store: &mut VirtualStore) {
        let (view, n) = self.view();
        let before = total_tokens(&view.messages[..n], &view.messages[n..], self.settings);
        let evicted = evict::evict_tool_results(&view.messages[n..], self.settings, store);
        if !evicted.is_empty() {
            let cp = self.offload_checkpoint(Step::ToolEviction, evicted, before, json!({}));
            self.push(cp);
        }
        let (view, n) = self.view();
        let evicted = evict::evict_human_message(&view.messages[n..], self.settings, store);
        if !evicted.is_empty() {
            let cp = self.offload_checkpoint(Step::HumanEviction, evicted, before, json!({}));
            self.push(cp);
        }
    }

    /// The `compact_conversation` tool, when the newest tool batch answers a call to it that no
    /// checkpoint has handled: gate, cut, summary, then history offload, as at tool time
    /// (the tool's own result was not in state yet). A failure leaves nothing behind, as the
    /// tool then only reports the error.
    pub(crate) fn compact_tool(&mut self, cx: &mut Cx<'_>, handled: bool) {
        let (view, n_sys) = self.view();
        let effective = &view.messages[n_sys..];
        let Some(n_tail) = compact_tool_batch(effective).filter(|_| !handled) else { return };
        let at_tool_time = &effective[..effective.len() - n_tail];
        if !compact_tool_eligible(at_tool_time, self.settings) {
            return;
        }
        let cut = cutoff::cutoff(&msgs(at_tool_time), self.settings);
        if cut == 0 {
            return;
        }
        let tokens_before = total_tokens(&view.messages[..n_sys], effective, self.settings);
        let to_summarize = &at_tool_time[..cut];
        let xml_all = xml::buffer_string(to_summarize, &HashMap::new(), self.settings.facts.anthropic);
        let mut usage = SummarizerUsage::default();
        let Ok(summary) = summarize(cx.summarizer, &xml_all, cx.model.max_output, &mut usage) else { return };
        let session = self.session_id(to_summarize);
        let archived: Vec<&ViewMessage> = to_summarize.iter().filter(|vm| vm.origin.entry().is_some()).collect();
        let file_path = self.offload_history(&session, &archived, &HashMap::new(), cx.store);
        let event = Event {
            cut,
            first_kept: effective.get(cut).and_then(|vm| vm.origin.entry()),
            kept_before_summary: &at_tool_time[cut..],
            session,
            file_path,
            summary,
            usage,
            tokens_before,
            created_at: state_len(&self.log) - n_tail as u64,
            archived: archived.iter().filter_map(|vm| vm.origin.entry()).collect(),
        };
        let cp = self.event_checkpoint(Step::CompactTool, event, Evicted::default(), Vec::new(), json!({}));
        self.push(cp);
    }

    /// `wrap_model_call`. `overflow`: the plain request was rejected for its size, so the
    /// trigger is skipped and the retry must be strictly smaller.
    pub(crate) fn wrap(&mut self, cx: &mut Cx<'_>, overflow: bool) -> Result<(), Error> {
        let (view, n_sys) = self.view();
        let (system, effective) = view.messages.split_at(n_sys);
        let plan = plan(system, effective, total_tokens(system, effective, self.settings), self.settings);
        let truncated_ids = || json!(sorted(&plan.truncated));
        let act = overflow
            || should_summarize(&plan.request, plan.total, self.settings)
            || over_budget(plan.total, self.settings);
        if !act {
            self.profile_marker(&plan);
            return Ok(());
        }
        let cut = cutoff::cutoff(&msgs(&plan.request), self.settings);
        if cut == 0 {
            let (_, evicted) =
                call_with_budget(system, plan.request.to_vec(), plan.total, overflow, self.settings, cx.store)?;
            if evicted.is_empty() {
                self.profile_marker(&plan);
            } else {
                let extra = json!({ "request_truncated": truncated_ids(), "clipped": true, "overflow": overflow });
                let cp = self.offload_checkpoint(Step::TailClip, evicted, plan.total_untruncated, extra);
                self.push(cp);
            }
            return Ok(());
        }

        let (to_summarize, preserved) = plan.request.split_at(cut);
        let anthropic = self.settings.facts.anthropic;
        let (media, media_offloads) = offload_media(to_summarize, self.settings, cx.store);
        let session = self.session_id(to_summarize);
        let archived: Vec<&ViewMessage> = to_summarize.iter().filter(|vm| vm.origin.entry().is_some()).collect();
        // The sync path writes the history before asking for the summary, so a failing
        // summarizer still leaves the section in the file.
        let file_path = self.offload_history(&session, &archived, &media, cx.store);
        let xml_all = xml::buffer_string(to_summarize, &media, anthropic);
        let mut usage = SummarizerUsage::default();
        let summary = summarize(cx.summarizer, &xml_all, cx.model.max_output, &mut usage)?;

        // The request actually sent: summary, then the kept tail (clipped arguments, reasoning
        // bound to the summarized past removed).
        let summary_message = Message::user(prompt::summary_text(&summary, file_path.as_deref()));
        let mut request = vec![ViewMessage { origin: Origin::Summary(self.log.next_id()), message: summary_message }];
        request.extend(preserved.iter().map(|vm| ViewMessage {
            origin: vm.origin,
            message: if anthropic {
                without_reasoning(&vm.message).unwrap_or_else(|| vm.message.clone())
            } else {
                vm.message.clone()
            },
        }));
        let (_, clipped) = call_with_budget(system, request, plan.total, overflow, self.settings, cx.store)?;
        let was_clipped = !clipped.is_empty();
        let event = Event {
            cut,
            first_kept: preserved.first().and_then(|vm| vm.origin.entry()),
            kept_before_summary: &effective[cut..],
            session,
            file_path,
            summary,
            usage,
            tokens_before: plan.total_untruncated,
            created_at: state_len(&self.log),
            archived: archived.iter().filter_map(|vm| vm.origin.entry()).collect(),
        };
        let extra = json!({ "request_truncated": truncated_ids(), "clipped": was_clipped, "overflow": overflow });
        let cp = self.event_checkpoint(Step::Summarization, event, clipped, media_offloads, extra);
        self.push(cp);
        Ok(())
    }

    /// The request was built by a `wrap_model_call` step and still overflowed: one strictly
    /// smaller retry by clipping its trailing tool results, unless that step already clipped
    /// or was itself the overflow retry.
    pub(crate) fn retry_after_overflow(&mut self, projected: &View, cx: &mut Cx<'_>) -> Result<(), Error> {
        let step = pending_checkpoints(&self.log).find_map(|cp| {
            let d = details(cp)?;
            Step::wraps_request(d.get("step")?.as_str()?).then(|| d.clone())
        });
        let Some(step) = step else { return self.wrap(cx, true) };
        let flag = |k: &str| step.get(k).and_then(Value::as_bool).unwrap_or(false);
        if flag("clipped") || flag("overflow") {
            return Err(recovery_exhausted());
        }
        let n_sys = leading_system(projected);
        let (system, request) = projected.messages.split_at(n_sys);
        let total = total_tokens(system, request, self.settings);
        let (_, evicted) = call_with_budget(system, request.to_vec(), total, true, self.settings, cx.store)?;
        let extra = json!({
            "request_truncated": step.get("request_truncated").cloned().unwrap_or(json!([])),
            "clipped": true,
            "overflow": true,
        });
        let cp = self.offload_checkpoint(Step::TailClip, evicted, total, extra);
        self.push(cp);
        Ok(())
    }

    /// When argument truncation changes the request but no checkpoint records the model facts
    /// yet, the projection could not reproduce it: record them.
    fn profile_marker(&mut self, plan: &Plan) {
        if plan.truncated.is_empty() || recorded_facts(&self.log).is_some() {
            return;
        }
        let mut cp = Checkpoint::new(CheckpointKind::Prune, Window::Inherit);
        cp.tokens_before = plan.total_untruncated;
        cp.details = self.details(Step::Profile, json!({}));
        self.push(cp);
    }

    /// The history file's session id: the one already in use, or a new one.
    fn session_id(&self, to_summarize: &[ViewMessage]) -> String {
        session_id(&self.log).unwrap_or_else(|| {
            let first = to_summarize.iter().map(|vm| vm.message.searchable_text()).next().unwrap_or_default();
            format!("session_{}", paths::hex32(&["session", &first, &self.log.len().to_string()]))
        })
    }

    /// `_offload_to_backend`: appends a `## Summarized at …` section with the evicted messages
    /// (previous summary left out) to the session's history file. `None` when the write fails.
    fn offload_history(
        &self,
        session: &str,
        archived: &[&ViewMessage],
        media: &HashMap<(EntryId, usize), String>,
        store: &mut VirtualStore,
    ) -> Option<String> {
        if self.settings.failing_backend {
            return None;
        }
        let path = paths::history_file(session);
        let xml = xml::buffer_string(archived.iter().copied(), media, self.settings.facts.anthropic);
        let section = format!("## Summarized at {}\n\n{xml}\n\n", paths::timestamp(summary_rounds(&self.log) + 1));
        store.append(&path, &section);
        Some(path)
    }

    fn event_checkpoint(
        &self,
        step: Step,
        event: Event<'_>,
        clipped: Evicted,
        media: Vec<Offload>,
        extra: Value,
    ) -> Checkpoint {
        let window = Window::From(event.first_kept.unwrap_or_else(|| self.log.next_id()));
        let mut cp = Checkpoint::new(CheckpointKind::Summary, window)
            .with_summary(Message::user(prompt::summary_text(&event.summary, event.file_path.as_deref())));
        // Reasoning Claude bound to the now-summarized past is left out of every later request.
        if self.settings.facts.anthropic {
            for vm in event.kept_before_summary {
                if let (Some(entry), Some(m)) = (vm.origin.entry(), without_reasoning(&vm.message)) {
                    cp.replacements.push(Replacement { entry, message: m });
                }
            }
        }
        cp.replacements.extend(clipped.replacements);
        if let Some(path) = &event.file_path {
            cp.offloads.push(Offload { path: path.clone(), entries: event.archived.clone() });
        }
        cp.offloads.extend(media);
        cp.offloads.extend(clipped.offloads);
        cp.tokens_before = event.tokens_before;
        cp.summarizer = event.usage;
        let state_cutoff = match previous_cutoff(&self.log) {
            Some(prev) => prev + event.cut as u64 - 1,
            None => event.cut as u64,
        };
        let mut warnings = Vec::new();
        if event.file_path.is_none() {
            warnings.push("Offloading conversation history to backend failed during summarization; older messages will not be recoverable.");
        }
        let mut extra = extra;
        if let Some(map) = extra.as_object_mut() {
            map.insert("cutoff_index".into(), json!(state_cutoff));
            map.insert("created_at_index".into(), json!(event.created_at));
            map.insert("file_path".into(), json!(event.file_path));
            map.insert("session_id".into(), json!(event.session));
            map.insert("warnings".into(), json!(warnings));
        }
        cp.details = self.details(step, extra);
        cp
    }
}

/// A new summarization event, before it becomes a checkpoint.
struct Event<'a> {
    cut: usize,
    first_kept: Option<EntryId>,
    kept_before_summary: &'a [ViewMessage],
    session: String,
    file_path: Option<String>,
    summary: String,
    usage: SummarizerUsage,
    tokens_before: u64,
    created_at: u64,
    archived: Vec<EntryId>,
}

fn sorted(ids: &HashSet<EntryId>) -> Vec<u32> {
    let mut v: Vec<u32> = ids.iter().map(|e| e.0).collect();
    v.sort_unstable();
    v
}

/// Raw state length: the log's messages after the leading system prompt.
fn state_len(log: &Log) -> u64 {
    let mut messages = log.messages().skip_while(|(_, m)| m.role == Role::System);
    let mut n = 0;
    while messages.next().is_some() {
        n += 1;
    }
    n
}

/// `_drop_bound_reasoning` for Claude: the message without reasoning parts, if it had any.
fn without_reasoning(m: &Message) -> Option<Message> {
    if m.role != Role::Assistant || !m.parts.iter().any(|p| matches!(p, Part::Reasoning { .. })) {
        return None;
    }
    let mut out = m.clone();
    out.parts.retain(|p| !matches!(p, Part::Reasoning { .. }));
    Some(out)
}

/// `_call_with_budget`: when the plain request was rejected or the complete request is over the
/// input budget, clip the trailing tool results and insist on a real reduction.
fn call_with_budget(
    system: &[ViewMessage],
    request: Vec<ViewMessage>,
    rejected_total: u64,
    error: bool,
    settings: &Settings,
    store: &mut VirtualStore,
) -> Result<(Vec<ViewMessage>, Evicted), Error> {
    let total = total_tokens(system, &request, settings);
    if !error && !over_budget(total, settings) {
        return Ok((request, Evicted::default()));
    }
    let (clipped, evicted) = evict::clip_tail(&request, 1, settings, store);
    let reduced = total_tokens(system, &clipped, settings);
    if error && reduced >= rejected_total {
        return Err(recovery_exhausted());
    }
    if over_budget(reduced, settings) {
        return Err(Error::new(
            ErrorKind::Other,
            "Context is still over the input budget after compaction; reduce the input, the tools or the configured output tokens.",
        ));
    }
    Ok((clipped, evicted))
}

fn recovery_exhausted() -> Error {
    Error::new(
        ErrorKind::Other,
        "Model input still does not fit after recovery; reduce the input, the tools or the configured output tokens.",
    )
}

/// The summary model call: the rendered prompt as one user message, no system prompt, the
/// model's own output cap, three attempts; the answer trimmed.
fn summarize(
    summarizer: &dyn Summarizer,
    messages_xml: &str,
    max_output: u64,
    usage: &mut SummarizerUsage,
) -> Result<String, Error> {
    let request = SummaryRequest {
        purpose: "history".into(),
        // spec (d) 5: one user-role string, no system prompt, no tools, no history.
        context: SummaryContext::Fresh,
        system: String::new(),
        transcript: prompt::render(messages_xml),
        instructions: String::new(),
        max_output_tokens: max_output,
    };
    let mut last = None;
    for _ in 0..SUMMARY_ATTEMPTS {
        match summarizer.summarize(&request) {
            Ok(s) => {
                usage.add(SummarizerUsage {
                    calls: 1,
                    failures: 0,
                    input_tokens: s.input_tokens,
                    output_tokens: s.output_tokens,
                });
                return Ok(s.text.trim().to_owned());
            }
            Err(e) => {
                usage.add(SummarizerUsage { calls: 1, failures: 1, input_tokens: 0, output_tokens: 0 });
                last = Some(e);
            }
        }
    }
    Err(last.expect("at least one attempt"))
}

/// `_offload_inline_media`: each media part of the evicted messages is written once to
/// `/conversation_history/media/<hash>.<ext>` and referenced by path in the archive and the
/// summarizer input. The seam carries media only by size, so the file holds a placeholder and
/// the hash covers the message and part rather than the bytes.
fn offload_media(
    to_summarize: &[ViewMessage],
    settings: &Settings,
    store: &mut VirtualStore,
) -> (HashMap<(EntryId, usize), String>, Vec<Offload>) {
    let mut map = HashMap::new();
    let mut offloads: Vec<Offload> = Vec::new();
    for vm in to_summarize {
        let Some(entry) = vm.origin.entry() else { continue };
        for (i, part) in vm.message.parts.iter().enumerate() {
            let Part::Media { mime, tokens } = part else { continue };
            if settings.failing_backend {
                map.insert(
                    (entry, i),
                    "<image error=\"failed_to_offload\" />".replace('<', "&lt;").replace('>', "&gt;"),
                );
                continue;
            }
            let path = paths::media_file(&[&entry.to_string(), &i.to_string(), mime, &tokens.to_string()], mime);
            store.write(path.clone(), format!("[{mime} media, {tokens} tokens]"));
            let major = mime.split('/').next().unwrap_or("");
            let block = match major {
                "image" | "audio" | "video" => format!("<{major} url={} />", xml::quoteattr(&path)),
                // Other types become a text block, which the serializer escapes.
                _ => xml::escape(&format!("<file url=\"{path}\" />")),
            };
            map.insert((entry, i), block);
            offloads.push(Offload { path, entries: vec![entry] });
        }
    }
    (map, offloads)
}

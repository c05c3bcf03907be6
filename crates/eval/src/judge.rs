//! Model-judged probes: ask a model about each planted fact, given the request it would see.
//!
//! The verbatim/recoverable/lost probes look for a fact's needle in the request; they cannot
//! tell whether a model reading that request can still answer with the fact (a needle buried
//! in 100k tokens), nor credit a summary that kept the fact's name but rephrased the rest. The
//! judge asks. Once per fact, at the last request that needs it, the model gets that request
//! rendered as a conversation and a question about the fact's kind, and the answer is scored
//! by needle match: it quotes the needle, names the fact's tagged key, or misses.
//!
//! The question is per kind, never per fact (it must not give the needle away), so the facts
//! of one kind due at one request share one call. The judge is any [`Summarizer`]: in practice
//! the OpenAI-compatible client behind the replay cache, so judged runs replay offline too.

use std::collections::HashMap;

use compactbench_core::{Part, Role, Summarizer, SummaryContext, SummaryRequest, View};
use serde::{Deserialize, Serialize};

use crate::facts::{Fact, FactKind};

/// What the judge's answer held for one fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// The whole needle, verbatim.
    Quoted,
    /// The fact's tagged key (its randomly tagged name or path) but not the whole needle.
    Named,
    /// Neither.
    Missed,
    /// The judge call failed (timeout, server error): no answer to score.
    Failed,
}

impl Answer {
    /// Snake-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Quoted => "quoted",
            Answer::Named => "named",
            Answer::Missed => "missed",
            Answer::Failed => "failed",
        }
    }
}

/// The judged probe of one fact.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Judged {
    /// The request the judge saw (the last one that needed the fact).
    pub request: u32,
    /// How its answer scored.
    pub answer: Answer,
}

/// Output cap of a judge answer: a few quoted lines.
pub const ANSWER_TOKENS: u64 = 256;

const SYSTEM: &str = "You answer questions about a conversation between a user and an AI coding assistant. \
Use only what the conversation says. Quote names, paths and messages exactly as they appear.";

/// The question asked for facts of `kind`. It names what to look for, never the fact.
pub fn question(kind: FactKind) -> &'static str {
    match kind {
        FactKind::ErrorMessage => "Quote every compiler or test error message reported in the conversation, exactly.",
        FactKind::UserConstraint => "What has the user said must not change? Quote each of the user's constraints exactly.",
        FactKind::UnresolvedStep => "Which steps did the assistant say are still open? Quote each exactly.",
        FactKind::NegativeResult => "Which searches found no matches? Give each searched pattern exactly.",
        FactKind::FilePath => "Which files did the assistant modify? Give each path exactly.",
        FactKind::Decision => "Which design decisions were made, and why? Quote each decision exactly.",
        FactKind::Identifier => "Which function or flag names are defined in the code the assistant read? Give each name exactly.",
        FactKind::RejectedHypothesis => "Which suspected causes of the failure were ruled out? Quote each exactly.",
        FactKind::SupersededValue => "Which settings (ports, versions, paths, policies) changed during the conversation? Give each one's current value exactly.",
    }
}

/// The request as the judge reads it: every message of `view` with its role, thinking and
/// tool calls included (the probes count those as in the request too).
pub fn render(view: &View) -> String {
    let mut out = String::from("<conversation>\n");
    for vm in &view.messages {
        for part in &vm.message.parts {
            let (label, text) = match part {
                Part::Text { text } => (role_label(vm.message.role), text.clone()),
                Part::Reasoning { text } => ("Assistant thinking", text.clone()),
                Part::ToolCall { name, args, .. } => ("Assistant tool call", format!("{name}({args})")),
                Part::ToolResult { text, .. } => ("Tool result", text.clone()),
                Part::Media { mime, .. } => (role_label(vm.message.role), format!("[{mime}]")),
            };
            out.push_str(&format!("[{label}]: {text}\n\n"));
        }
    }
    out.push_str("</conversation>");
    out
}

fn role_label(role: Role) -> &'static str {
    match role {
        Role::System => "System",
        Role::User => "User",
        Role::Assistant => "Assistant",
        Role::Tool => "Tool result",
    }
}

/// The fact's tagged key: the last name in its needle that ends in the generator's random
/// tag (`_` + letter, digit, letter, digit), e.g. `parse_index_k3v8` in
/// ``no method named `parse_index_k3v8` found``. No filler text contains it.
pub fn key(needle: &str) -> &str {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    needle
        .split(|c: char| !is_name(c))
        .rfind(|w| {
            let b = w.as_bytes();
            b.len() > 5
                && b[b.len() - 5] == b'_'
                && b[b.len() - 4].is_ascii_lowercase()
                && b[b.len() - 3].is_ascii_digit()
                && b[b.len() - 2].is_ascii_lowercase()
                && b[b.len() - 1].is_ascii_digit()
        })
        .unwrap_or(needle)
}

/// Scores `answer` for `fact`.
pub fn score(fact: &Fact, answer: &str) -> Answer {
    if answer.contains(&fact.needle) {
        Answer::Quoted
    } else if answer.contains(key(&fact.needle)) {
        Answer::Named
    } else {
        Answer::Missed
    }
}

/// Asks `judge` about `facts` (indices into `all`) given `view`, one call per kind.
pub(crate) fn ask(judge: &dyn Summarizer, view: &View, all: &[Fact], facts: &[usize]) -> Vec<(usize, Answer)> {
    let transcript = render(view);
    let mut answers: HashMap<FactKind, Option<String>> = HashMap::new();
    facts
        .iter()
        .map(|&f| {
            let kind = all[f].kind;
            let answer = answers.entry(kind).or_insert_with(|| {
                let request = SummaryRequest {
                    purpose: format!("judge-{}", kind.as_str()),
                    context: SummaryContext::Fresh,
                    system: SYSTEM.into(),
                    transcript: transcript.clone(),
                    instructions: question(kind).into(),
                    max_output_tokens: ANSWER_TOKENS,
                };
                judge.summarize(&request).ok().map(|s| s.text)
            });
            (f, answer.as_deref().map_or(Answer::Failed, |a| score(&all[f], a)))
        })
        .collect()
}

//! `read_thread`: keyword search over a stored thread (and its ancestors), hits ranked newest
//! first, and one extraction call that answers from them.

use std::collections::{HashMap, HashSet};

use compactbench_core::{Error, ErrorKind, Summarizer, SummaryContext, SummaryRequest, VirtualStore};

use crate::thread::{self, StoredMessage, StoredThread};

/// Output cap of the extraction call \[assume, spec (h)\].
pub(crate) const ANSWER_MAX_TOKENS: u64 = 2_000;
/// Most messages handed to the extraction call \[assume\].
const MAX_HITS: usize = 12;
/// BM25 parameters (the usual defaults) \[assume\].
const K1: f64 = 1.2;
const B: f64 = 0.75;

const SYSTEM: &str = "You read an earlier thread of a coding agent and answer one question about it for the agent, \
                      which cannot see that thread.";

/// The extraction rules, paraphrasing what "Read Bigger Threads" says the subagent does.
const RULES: &str = "Answer the question from the excerpts above only, briefly, citing the message references you rely on. \
Excerpts are listed newest first; where a newer message revises or contradicts an older one, the newer one holds. \
A tool call is an attempt, not an outcome: say what was attempted and what its observed output shows (an error means \
the attempt failed). Handoff summaries are for orientation only and are never evidence on their own. If the excerpts \
do not answer the question, say so.";

const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "had", "has", "have", "how",
    "in", "is", "it", "of", "on", "or", "that", "the", "this", "to", "was", "we", "were", "what", "when", "where",
    "which", "who", "why", "with", "you",
];

/// A word reduced by a light suffix stemmer, so `deployed`, `deploys` and `deploy` match.
fn stem(word: &str) -> String {
    for suffix in ["ing", "ed", "es", "s"] {
        if let Some(stripped) = word.strip_suffix(suffix) {
            if stripped.chars().count() >= 3 {
                return stripped.to_owned();
            }
        }
    }
    word.to_owned()
}

fn terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

/// A searchable message: its thread, the message, its terms.
struct Doc<'a> {
    thread: &'a str,
    /// Order across the threads read: ancestors first, so larger is newer.
    order: usize,
    message: &'a StoredMessage,
    terms: Vec<String>,
}

fn load(store: &VirtualStore, thread: &str) -> Result<StoredThread, Error> {
    let key = thread::url(thread);
    let text = store.read(&key).ok_or_else(|| Error::new(ErrorKind::Other, format!("thread not found: {key}")))?;
    thread::parse(text).ok_or_else(|| Error::new(ErrorKind::Other, format!("not a stored thread: {key}")))
}

/// The thread and, when asked, its ancestors, oldest first.
fn chain(store: &VirtualStore, thread: &str, ancestors: bool) -> Result<Vec<StoredThread>, Error> {
    let mut out = vec![load(store, thread)?];
    let mut seen: HashSet<String> = HashSet::from([out[0].id.clone()]);
    while let Some(parent) = out.last().and_then(|t| t.parent.clone()).filter(|_| ancestors) {
        // A missing or repeated ancestor ends the walk: the reachable part is still answered.
        if !seen.insert(parent.clone()) {
            break;
        }
        match load(store, &parent) {
            Ok(t) => out.push(t),
            Err(_) => break,
        }
    }
    out.reverse();
    Ok(out)
}

/// BM25 scores of `docs` for `query`.
fn bm25(docs: &[Doc<'_>], query: &[String]) -> Vec<f64> {
    let n = docs.len() as f64;
    let avg = docs.iter().map(|d| d.terms.len()).sum::<usize>() as f64 / n.max(1.0);
    let mut df: HashMap<&str, f64> = HashMap::new();
    for d in docs {
        let unique: HashSet<&str> = d.terms.iter().map(String::as_str).collect();
        for t in unique {
            *df.entry(t).or_default() += 1.0;
        }
    }
    let query: HashSet<&str> = query.iter().map(String::as_str).collect();
    docs.iter()
        .map(|d| {
            let len = d.terms.len() as f64;
            query
                .iter()
                .map(|q| {
                    let tf = d.terms.iter().filter(|t| t == q).count() as f64;
                    if tf == 0.0 {
                        return 0.0;
                    }
                    let df = df.get(q).copied().unwrap_or(0.0);
                    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg.max(1.0)))
                })
                .sum()
        })
        .collect()
}

fn reference(thread: &str, index: usize) -> String {
    format!("{thread} message {index}")
}

pub(crate) fn read_thread(
    store: &VirtualStore,
    thread: &str,
    question: &str,
    ancestors: bool,
    summarizer: &dyn Summarizer,
) -> Result<String, Error> {
    let threads = chain(store, thread, ancestors)?;
    let mut docs = Vec::new();
    let mut orientation = Vec::new();
    for t in &threads {
        for m in &t.messages {
            if m.summary {
                orientation.push(format!("[{}] {}", reference(&t.id, m.index), m.body));
            } else {
                docs.push(Doc { thread: &t.id, order: docs.len(), message: m, terms: terms(&m.body) });
            }
        }
    }
    let query = terms(question);
    let scores = bm25(&docs, &query);
    let mut hits: Vec<usize> = (0..docs.len()).filter(|&i| scores[i] > 0.0).collect();
    // The best hits (newer first among equals), then newest first.
    hits.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(docs[b].order.cmp(&docs[a].order)));
    hits.truncate(MAX_HITS);
    hits.sort_by(|&a, &b| docs[b].order.cmp(&docs[a].order));
    let asked = threads.last().map_or(thread, |t| t.id.as_str());
    if hits.is_empty() {
        return Ok(format!("Nothing in thread {asked} matches the question."));
    }

    let mut transcript = format!("Question: {question}\n");
    if !orientation.is_empty() {
        transcript.push_str("\nHandoff summaries (orientation only, not evidence):\n");
        transcript.push_str(&orientation.join("\n"));
        transcript.push('\n');
    }
    transcript.push_str("\nExcerpts, newest first:\n");
    let mut sources = Vec::new();
    for &i in &hits {
        let d = &docs[i];
        let r = reference(d.thread, d.message.index);
        transcript.push_str(&format!("\n[{r}] {}:\n{}\n", d.message.role, d.message.body));
        sources.push(r);
    }
    let request = SummaryRequest {
        purpose: "read_thread".into(),
        // a read_thread subagent: its own system prompt over the old thread's text, not the live prefix.
        context: SummaryContext::Fresh,
        system: SYSTEM.into(),
        transcript,
        instructions: RULES.into(),
        max_output_tokens: ANSWER_MAX_TOKENS,
    };
    let answer = summarizer.summarize(&request)?;
    Ok(format!("{}\n\nSources (newest first): {}", answer.text.trim(), sources.join("; ")))
}

//! Input classes: what real sessions carry that a replayed scenario does not.
//!
//! A replayed scenario's replies report usage equal to our exact count with no cache reads,
//! hold no images, no system message after the first and reasoning only here and there. Real
//! sessions do, and an original may decide on any of them (Pi and Gemini CLI on the provider's
//! usage, every estimator on images). So each case log gets one [`Variation`], chosen in turn,
//! and the report counts cases and disagreements per class. A variation changes messages in
//! place (entry ids stay, so checkpoints of an earlier compaction still point at the right
//! entries), except [`Variation::LateSystem`], which inserts a message and so only applies to a
//! log without checkpoints. Images and reasoning go only into messages after the newest
//! checkpoint: a checkpoint records what its strategy counted when it ran (Gemini CLI's
//! `lastPromptTokenCount` after masking, say), and content added before it after the fact
//! would make that record stale, which no real session does.
//!
//! Failed replies come in two classes. [`Variation::ReplyWithoutUsage`] takes a reply's usage
//! away (a failed reply with no usage, or a provider that reports none), which every exporter
//! can express. [`Variation::AbortedReply`] marks a reply aborted ([`Message::failure`]) with the
//! partial usage Anthropic reports before the stream ends; only originals whose session format
//! stores that marker with the usage ([`crate::Original::failed_replies`]: Pi and oh-my-pi,
//! `stopReason: "aborted"`) take it in their rotation ([`rotation`]). The others keep the
//! rotation of eight without it, so their cases are the ones they were: their exporters have no
//! place for the marker (Gemini CLI, Kimi CLI, deepagents and OpenHands never store a failed
//! reply; see `fidelity/failed-replies.md`), and dropping or converting the reply there would be
//! another class, not this one.

use compactbench_core::{Entry, Failure, Log, Message, Part, Role, Usage};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// One change to a case log, towards what real sessions carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variation {
    /// The log as the scenario replay wrote it.
    AsRun,
    /// Every reply reports fewer prompt tokens than our count (0.55x to 0.9x), most of them
    /// cache reads after the first.
    UsageUnder,
    /// Every reply reports more prompt tokens than our count (1.1x to 1.8x), cache reads as
    /// above.
    UsageOver,
    /// An image in the first user message and another in a tool message, after its result.
    Images,
    /// Reasoning before every reply.
    Reasoning,
    /// A system message before a later user message (a harness notice, a changed prompt).
    LateSystem,
    /// The newest text reply after the newest checkpoint reports no usage: a reply that failed
    /// (Pi and oh-my-pi store it as `stopReason: "error"` with zero usage, which their
    /// estimators skip), or a provider that reports none (an OpenAI-compatible stream without
    /// `include_usage`). Replies with tool calls keep theirs: a failed reply runs no tools.
    ReplyWithoutUsage,
    /// Every reply reports a prompt under or over our count (0.55x to 0.9x, or 1.1x to 1.8x),
    /// split as Anthropic reports a warm prompt cache: what an earlier reply's prompt held is
    /// read from the cache (half to nearly all of it), most of the rest is written to it
    /// (`cache_creation_input_tokens`, Pi's `cacheWrite`) and a little is uncached input.
    /// Harnesses differ on whether they count the writes (Pi and Claude Code do, Gemini CLI's
    /// `promptTokenCount` and Pi's silent-overflow check do not).
    UsageCacheWrites,
    /// The newest text reply after the newest checkpoint was aborted by the user mid-stream
    /// ([`Failure::Aborted`]) and carries the partial usage Anthropic reports at
    /// `message_start`: its whole prompt (input, cache reads and writes as reported) and one
    /// output token. Its content stays as stored (Pi and oh-my-pi keep what streamed). Asked only
    /// of originals that store the marker (see [`rotation`]): Pi's `getAssistantUsage` skips it,
    /// but Pi's check before the next prompt reads its usage directly; oh-my-pi skips it
    /// everywhere.
    AbortedReply,
}

/// The variations in the order cases take them: every one, [`Variation::AbortedReply`] last,
/// since only originals whose session format stores a failed reply's marker with its usage
/// ([`crate::Original::failed_replies`]) take it.
pub const VARIATIONS_WITH_FAILED: [Variation; 9] = [
    Variation::AsRun,
    Variation::UsageUnder,
    Variation::UsageOver,
    Variation::Images,
    Variation::Reasoning,
    Variation::LateSystem,
    Variation::ReplyWithoutUsage,
    Variation::UsageCacheWrites,
    Variation::AbortedReply,
];

/// The rotation of the other originals: [`VARIATIONS_WITH_FAILED`] without the last.
pub const VARIATIONS: &[Variation] = VARIATIONS_WITH_FAILED.split_at(VARIATIONS_WITH_FAILED.len() - 1).0;

/// The variations cases take in turn: with [`Variation::AbortedReply`] only where the
/// original's exporter can express it (`failed_replies`).
pub fn rotation(failed_replies: bool) -> &'static [Variation] {
    if failed_replies {
        &VARIATIONS_WITH_FAILED
    } else {
        VARIATIONS
    }
}

/// Classes found in a log rather than made: several tool calls in one reply, and an earlier
/// compaction (a log cut from the strategy's own replay).
pub const FOUND: [&str; 2] = ["parallel-calls", "earlier-compaction"];

/// The class of cases asked with one of the original's documented non-default settings
/// ([`crate::originals::Setting`]), on sessions of their own.
pub const SETTINGS_CLASS: &str = "non-default-settings";

impl Variation {
    /// Its name in case ids and the report.
    pub fn name(self) -> &'static str {
        match self {
            Variation::AsRun => "as-run",
            Variation::UsageUnder => "usage-under",
            Variation::UsageOver => "usage-over",
            Variation::Images => "images",
            Variation::Reasoning => "reasoning",
            Variation::LateSystem => "late-system",
            Variation::ReplyWithoutUsage => "reply-without-usage",
            Variation::UsageCacheWrites => "usage-cache-writes",
            Variation::AbortedReply => "aborted-reply",
        }
    }

    /// `log` changed by this variation, or `None` where it does not apply (a late system
    /// message in a log with checkpoints, or one with no later user message; images in a log
    /// without a user or a tool message).
    pub fn apply(self, log: &Log, rng: &mut ChaCha8Rng) -> Option<Log> {
        match self {
            Variation::AsRun => Some(log.clone()),
            Variation::UsageUnder => Some(scale_usage(log, rng.gen_range(0.55..0.9), rng)),
            Variation::UsageOver => Some(scale_usage(log, rng.gen_range(1.1..1.8), rng)),
            Variation::Images => images(log, rng),
            Variation::Reasoning => {
                let start = after_newest_checkpoint(log);
                Some(map_messages(log, |i, m| {
                    if i >= start && m.role == Role::Assistant && !m.parts.iter().any(|p| matches!(p, Part::Reasoning { .. })) {
                        let mut m = m.clone();
                        m.parts.insert(0, Part::Reasoning { text: reasoning_for(&m, rng.gen_range(1..8)) });
                        Some(m)
                    } else {
                        None
                    }
                }))
            }
            Variation::LateSystem => late_system(log),
            Variation::ReplyWithoutUsage => reply_without_usage(log),
            Variation::UsageCacheWrites => {
                let factor = if rng.gen_bool(0.5) { rng.gen_range(0.55..0.9) } else { rng.gen_range(1.1..1.8) };
                Some(cache_writes(log, factor, rng))
            }
            Variation::AbortedReply => aborted_reply(log),
        }
    }
}

/// The classes `log` carries of itself (names from [`FOUND`]).
pub fn found(log: &Log) -> Vec<&'static str> {
    let parallel = log.messages().any(|(_, m)| m.parts.iter().filter(|p| matches!(p, Part::ToolCall { .. })).count() > 1);
    let compacted = log.checkpoints().next().is_some();
    [(parallel, FOUND[0]), (compacted, FOUND[1])].into_iter().filter_map(|(has, name)| has.then_some(name)).collect()
}

/// `log` with each message `change` returns in place of the original (`None` keeps it).
fn map_messages(log: &Log, mut change: impl FnMut(usize, &Message) -> Option<Message>) -> Log {
    let mut out = Log::new();
    for (id, entry) in log.entries() {
        match entry {
            Entry::Message(m) => {
                out.push_message(change(id.index(), m).unwrap_or_else(|| m.clone()));
            }
            Entry::Checkpoint(cp) => {
                out.push_checkpoint((**cp).clone());
            }
        }
    }
    out
}

/// Every reported prompt scaled by `factor`; from the second reply on, a share of it (half to
/// nearly all, as a warm prompt cache gives) is reported as cache reads.
fn scale_usage(log: &Log, factor: f64, rng: &mut ChaCha8Rng) -> Log {
    let mut replies = 0;
    map_messages(log, |_, m| {
        let u = m.usage?;
        let prompt = (u.prompt() as f64 * factor).round() as u64;
        let cached = if replies == 0 { 0 } else { (prompt as f64 * rng.gen_range(0.5..0.95)) as u64 };
        replies += 1;
        Some(Message { usage: Some(Usage { input: prompt - cached, output: u.output, cache_read: cached, ..Default::default() }), ..m.clone() })
    })
}

/// Every reported prompt scaled by `factor` and split into cache reads, cache writes and
/// uncached input: a reply reads from the cache a share (half to nearly all) of what the
/// previous reply's prompt held, writes a share (half to nearly all) of the rest, and sends the
/// remainder uncached. The first reply reads nothing.
fn cache_writes(log: &Log, factor: f64, rng: &mut ChaCha8Rng) -> Log {
    let mut previous: Option<u64> = None;
    map_messages(log, |_, m| {
        let u = m.usage?;
        let prompt = (u.prompt() as f64 * factor).round() as u64;
        let read = previous.map_or(0, |p| (p.min(prompt) as f64 * rng.gen_range(0.5..0.95)) as u64);
        let write = ((prompt - read) as f64 * rng.gen_range(0.5..0.95)) as u64;
        previous = Some(prompt);
        Some(Message { usage: Some(Usage { input: prompt - read - write, output: u.output, cache_read: read, cache_write: write }), ..m.clone() })
    })
}

/// An image (800 to 1,600 tokens, as providers charge a screenshot) at the end of the first
/// user message after the newest checkpoint, and another in the tool message nearest the
/// middle of those after it.
fn images(log: &Log, rng: &mut ChaCha8Rng) -> Option<Log> {
    let start = after_newest_checkpoint(log);
    let first_user = log.messages().find(|(id, m)| id.index() >= start && m.role == Role::User)?.0.index();
    let tools: Vec<usize> =
        log.messages().filter(|(id, m)| id.index() >= start && m.role == Role::Tool).map(|(id, _)| id.index()).collect();
    let tool = *tools.get(tools.len() / 2)?;
    let mut media = |mime: &str| Part::Media { mime: mime.into(), tokens: rng.gen_range(800..1_600) };
    let (user_image, tool_image) = (media("image/png"), media("image/jpeg"));
    Some(map_messages(log, |i, m| {
        let image = match i {
            _ if i == first_user => user_image.clone(),
            _ if i == tool => tool_image.clone(),
            _ => return None,
        };
        let mut m = m.clone();
        m.parts.push(image);
        Some(m)
    }))
}

/// The index of the first entry after the newest checkpoint (0 where there is none).
fn after_newest_checkpoint(log: &Log) -> usize {
    log.checkpoints().next_back().map_or(0, |(id, _)| id.index() + 1)
}

/// `log` with the usage of its newest text reply after the newest checkpoint taken away
/// (`None` where there is no such reply with usage).
fn reply_without_usage(log: &Log) -> Option<Log> {
    let start = after_newest_checkpoint(log);
    let text_reply = |m: &Message| {
        m.role == Role::Assistant && m.usage.is_some() && !m.parts.iter().any(|p| matches!(p, Part::ToolCall { .. }))
    };
    let reply = log.messages().filter(|(id, m)| id.index() >= start && text_reply(m)).last()?.0.index();
    Some(map_messages(log, |i, m| (i == reply).then(|| Message { usage: None, ..m.clone() })))
}

/// `log` with its newest text reply after the newest checkpoint marked aborted, its usage cut
/// to what Anthropic reports at `message_start` (the prompt and one output token); `None` where
/// there is no such reply with usage.
fn aborted_reply(log: &Log) -> Option<Log> {
    let start = after_newest_checkpoint(log);
    let text_reply = |m: &Message| {
        m.role == Role::Assistant && m.usage.is_some() && !m.parts.iter().any(|p| matches!(p, Part::ToolCall { .. }))
    };
    let reply = log.messages().filter(|(id, m)| id.index() >= start && text_reply(m)).last()?.0.index();
    Some(map_messages(log, |i, m| {
        (i == reply).then(|| {
            let usage = m.usage.map(|u| Usage { output: u.output.min(1), ..u });
            Message { usage, failure: Some(Failure::Aborted), ..m.clone() }
        })
    }))
}

/// What a harness says in a system message mid-session.
const NOTICE: &str = "The workspace was reloaded: files may have changed since you last read them. Read a file again before you edit it.";

/// A system message before the newest user message that is not the first (checkpoint-free logs
/// only: it shifts every later entry).
fn late_system(log: &Log) -> Option<Log> {
    if log.checkpoints().next().is_some() {
        return None;
    }
    let users: Vec<usize> = log.messages().filter(|(_, m)| m.role == Role::User).map(|(id, _)| id.index()).collect();
    let at = *users.get(1..)?.last()?;
    let mut out = Log::new();
    for (id, m) in log.messages() {
        if id.index() == at {
            out.push_message(Message::system(NOTICE));
        }
        out.push_message(m.clone());
    }
    Some(out)
}

/// A short chain of thought about the reply's first tool call (or its answer), `n` sentences.
fn reasoning_for(m: &Message, n: usize) -> String {
    let subject = m.parts.iter().find_map(|p| match p {
        Part::ToolCall { name, .. } => Some(format!("the {name} call")),
        _ => None,
    });
    let subject = subject.as_deref().unwrap_or("the answer");
    let sentence = format!("Before {subject}, I check what the last results said and what is still open. ");
    sentence.repeat(n).trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use compactbench_core::{Checkpoint, CheckpointKind, EntryId, Window};
    use rand::SeedableRng;
    use serde_json::json;

    fn session() -> Log {
        let mut call = Message::new(
            Role::Assistant,
            vec![
                Part::ToolCall { id: "a".into(), name: "read".into(), args: json!({}) },
                Part::ToolCall { id: "b".into(), name: "ls".into(), args: json!({}) },
            ],
        );
        call.usage = Some(Usage { input: 1_000, output: 10, ..Default::default() });
        let mut answer = Message::assistant("done");
        answer.usage = Some(Usage { input: 2_000, output: 20, ..Default::default() });
        Log::from_messages([
            Message::system("sys"),
            Message::user("fix it"),
            call,
            Message::tool_result("a", "read", "text", false),
            Message::tool_result("b", "ls", "a.rs", false),
            answer,
            Message::user("thanks; now the tests"),
        ])
    }

    fn rng() -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(7)
    }

    #[test]
    fn usage_is_scaled_with_cache_reads_after_the_first_reply() {
        let over = Variation::UsageOver.apply(&session(), &mut rng()).unwrap();
        let usages: Vec<Usage> = over.messages().filter_map(|(_, m)| m.usage).collect();
        assert_eq!(usages[0].cache_read, 0);
        assert!(usages[0].input > 1_100 && usages[0].input < 1_800, "{usages:?}");
        assert!(usages[1].cache_read > 0 && usages[1].input + usages[1].cache_read > 2_200, "{usages:?}");
        let under = Variation::UsageUnder.apply(&session(), &mut rng()).unwrap();
        assert!(under.messages().filter_map(|(_, m)| m.usage).all(|u| u.input + u.cache_read < 1_800 || u.cache_read > 0));
        assert_eq!(under.messages().filter_map(|(_, m)| m.usage).map(|u| u.output).collect::<Vec<_>>(), [10, 20]);
    }

    #[test]
    fn replies_write_to_the_cache_and_later_ones_read_from_it() {
        let log = Variation::UsageCacheWrites.apply(&session(), &mut rng()).unwrap();
        let usages: Vec<Usage> = log.messages().filter_map(|(_, m)| m.usage).collect();
        assert_eq!(usages.len(), 2);
        assert_eq!(usages[0].cache_read, 0);
        assert!(usages.iter().all(|u| u.cache_write > 0 && u.cache_write + 1 >= u.input), "{usages:?}");
        assert!(usages[1].cache_read > 0 && usages[1].cache_read < usages[0].prompt(), "{usages:?}");
        // Under or over our count, both by the same factor.
        let (first, second) = (usages[0].prompt(), usages[1].prompt());
        assert!(first != 1_000 && (first < 1_000) == (second < 2_000), "{usages:?}");
        assert_eq!(usages.iter().map(|u| u.output).collect::<Vec<_>>(), [10, 20]);
    }

    #[test]
    fn images_go_to_the_first_user_message_and_a_tool_message() {
        let log = Variation::Images.apply(&session(), &mut rng()).unwrap();
        let with_media: Vec<(u32, Role)> =
            log.messages().filter(|(_, m)| m.parts.iter().any(|p| matches!(p, Part::Media { .. }))).map(|(id, m)| (id.0, m.role)).collect();
        assert_eq!(with_media, [(1, Role::User), (4, Role::Tool)]);
        assert_eq!(log.len(), session().len());
    }

    #[test]
    fn reasoning_comes_first_in_every_reply() {
        let log = Variation::Reasoning.apply(&session(), &mut rng()).unwrap();
        for (_, m) in log.messages().filter(|(_, m)| m.role == Role::Assistant) {
            assert!(matches!(&m.parts[0], Part::Reasoning { text } if !text.is_empty()), "{m:?}");
        }
    }

    /// A checkpoint records what its strategy counted when it ran: content is added only after
    /// the newest one.
    #[test]
    fn images_and_reasoning_go_only_after_the_newest_checkpoint() {
        let mut log = session();
        log.push_checkpoint(Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(5))));
        let mut call = Message::tool_call("c", "read", json!({}));
        call.usage = Some(Usage { input: 3_000, output: 5, ..Default::default() });
        for m in [Message::user("go on"), call, Message::tool_result("c", "read", "text", false)] {
            log.push_message(m);
        }
        let changed = |v: Variation| -> Vec<u32> {
            let out = v.apply(&log, &mut rng()).unwrap();
            out.messages().filter(|(id, m)| Some(*m) != log.message(*id)).map(|(id, _)| id.0).collect()
        };
        assert_eq!(changed(Variation::Images), [8, 10]);
        assert_eq!(changed(Variation::Reasoning), [9]);
        let mut closed = session();
        closed.push_checkpoint(Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(5))));
        assert_eq!(Variation::Images.apply(&closed, &mut rng()), None, "no message after the checkpoint");
    }

    #[test]
    fn a_late_system_message_goes_before_the_newest_later_user_message_of_a_log_without_checkpoints() {
        let log = Variation::LateSystem.apply(&session(), &mut rng()).unwrap();
        let roles: Vec<Role> = log.messages().map(|(_, m)| m.role).collect();
        assert_eq!(roles[6..], [Role::System, Role::User]);
        let mut compacted = session();
        compacted.push_checkpoint(Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(5))));
        assert_eq!(Variation::LateSystem.apply(&compacted, &mut rng()), None);
        assert_eq!(found(&compacted), ["parallel-calls", "earlier-compaction"]);
        let single = Log::from_messages([Message::system("s"), Message::user("u")]);
        assert_eq!(Variation::LateSystem.apply(&single, &mut rng()), None, "no later user message");
        assert!(found(&single).is_empty());
    }

    #[test]
    fn the_newest_text_reply_loses_its_usage_and_replies_with_calls_keep_theirs() {
        let log = Variation::ReplyWithoutUsage.apply(&session(), &mut rng()).unwrap();
        let usage: Vec<(u32, bool)> =
            log.messages().filter(|(_, m)| m.role == Role::Assistant).map(|(id, m)| (id.0, m.usage.is_some())).collect();
        assert_eq!(usage, [(2, true), (5, false)]);
        assert_eq!(log.message(EntryId(5)).unwrap().text(), "done");
        let mut compacted = session();
        compacted.push_checkpoint(Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(5))));
        assert_eq!(Variation::ReplyWithoutUsage.apply(&compacted, &mut rng()), None, "no reply after the checkpoint");
    }

    #[test]
    fn the_newest_text_reply_is_aborted_with_its_prompt_and_one_output_token() {
        let log = Variation::AbortedReply.apply(&session(), &mut rng()).unwrap();
        let replies: Vec<(u32, Option<Usage>, Option<Failure>)> =
            log.messages().filter(|(_, m)| m.role == Role::Assistant).map(|(id, m)| (id.0, m.usage, m.failure)).collect();
        assert_eq!(
            replies,
            [
                (2, Some(Usage { input: 1_000, output: 10, ..Default::default() }), None),
                (5, Some(Usage { input: 2_000, output: 1, ..Default::default() }), Some(Failure::Aborted)),
            ]
        );
        assert_eq!(log.message(EntryId(5)).unwrap().text(), "done");
        let mut compacted = session();
        compacted.push_checkpoint(Checkpoint::new(CheckpointKind::Summary, Window::From(EntryId(5))));
        assert_eq!(Variation::AbortedReply.apply(&compacted, &mut rng()), None, "no reply after the checkpoint");
        // Only originals that store the marker take it in turn; the others' rotation is as before.
        assert_eq!(rotation(false), VARIATIONS);
        assert_eq!(rotation(true).last(), Some(&Variation::AbortedReply));
        assert_eq!(rotation(true)[..VARIATIONS.len()], *VARIATIONS);
    }
}

//! Validity of the successive requests of one replay, redoing only what changed.
//!
//! The runner validates every request in all four shapes. A request mostly repeats the one
//! before it plus a message or two; for strategies that never cut the view (masking, clearing,
//! the `none` baseline) lowering and validating all of it at every request made a replay
//! quadratic in its length. [`Revalidator`] keeps, per shape, what validation reads of each
//! lowered message and the validator's state before it, and resumes at the first lowered
//! message that can differ. Its counts equal those of core's [`validate`] (debug builds check
//! every call): core keeps the rules, and this runner-only bookkeeping lives here.

use compactbench_core::request::{lower, lower_tail, rules, validate, Block, Request, Rule, ShapeRules, Violation, WireMessage};
use compactbench_core::{Shape, View};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

/// Violations per rule, in [`Rule::ALL`] order.
pub type RuleCounts = [u32; Rule::ALL.len()];

/// A call id no lowered message has called yet.
const UNSEEN: u32 = u32::MAX;

/// Validity of successive views of one conversation in every shape ([`Shape::ALL`] order).
#[derive(Default)]
pub struct Revalidator {
    /// Call ids by number, so the kept state holds no strings.
    ids: FxHashMap<Box<str>, u32>,
    tracks: Option<[Track; 4]>,
}

impl Revalidator {
    /// A revalidator that has seen no view.
    pub fn new() -> Revalidator {
        Revalidator::default()
    }

    /// The violations per shape and rule of `view`, whose first `unchanged` messages have the
    /// same content as those of the view given last time (0 for the first view).
    pub fn update(&mut self, view: &View, unchanged: usize) -> [RuleCounts; 4] {
        let tracks = self.tracks.get_or_insert_with(|| Shape::ALL.map(Track::new));
        let ids = &mut self.ids;
        let counts = std::array::from_fn(|k| tracks[k].update(view, unchanged, ids));
        debug_assert_eq!(counts, Shape::ALL.map(|shape| count(&validate(&lower(view, shape)))), "revalidation differs from validation");
        counts
    }
}

/// Counts of `violations` per rule.
pub fn count(violations: &[Violation]) -> RuleCounts {
    let mut counts = RuleCounts::default();
    for v in violations {
        counts[v.rule as usize] += 1;
    }
    counts
}

/// What validation reads of one lowered message, and the validator's state before it.
struct Wired {
    role: &'static str,
    /// No block has content.
    all_empty: bool,
    /// Some block has none.
    any_empty: bool,
    calls: SmallVec<[u32; 2]>,
    results: SmallVec<[u32; 2]>,
    /// First and last view message it was lowered from.
    first_view: usize,
    last_view: usize,
    counts_before: RuleCounts,
    pending_before: SmallVec<[u32; 2]>,
}

/// One shape's lowered messages and the validator's running state after them.
struct Track {
    shape: Shape,
    rules: ShapeRules,
    wired: Vec<Wired>,
    /// Violations found so far (those that later messages cannot change).
    counts: RuleCounts,
    /// Adjacent-results shapes: calls of the latest calling message still waiting.
    pending: SmallVec<[u32; 2]>,
    /// Per call id: the first lowered message calling it, or [`UNSEEN`].
    first_call: Vec<u32>,
    /// OpenAI Responses (results may come anywhere later): per call id, calls and results so
    /// far, and how many calls have no result anywhere.
    called: Vec<u32>,
    answered: Vec<u32>,
    unanswered: u32,
}

impl Track {
    fn new(shape: Shape) -> Track {
        Track {
            shape,
            rules: rules(shape),
            wired: Vec::new(),
            counts: RuleCounts::default(),
            pending: SmallVec::new(),
            first_call: Vec::new(),
            called: Vec::new(),
            answered: Vec::new(),
            unanswered: 0,
        }
    }

    fn update(&mut self, view: &View, unchanged: usize, ids: &mut FxHashMap<Box<str>, u32>) -> RuleCounts {
        // Resume at the first lowered message of the last unchanged view message: a message
        // after it may merge into it (Anthropic, Gemini), one view message may lower to several
        // (OpenAI Chat, Responses), and nothing before them can change. Resuming at the first
        // lowered message starts over, leading system messages and all.
        let (resume, from) = match unchanged.checked_sub(1) {
            None => (0, 0),
            Some(last) => {
                let mut at = self.wired.partition_point(|w| w.last_view < last).min(self.wired.len().saturating_sub(1));
                while at > 0 && self.wired[at - 1].last_view >= self.wired[at].first_view {
                    at -= 1;
                }
                // `last` lowers to nothing when it is an OpenAI Chat tool message without
                // results; the changed messages after it are lowered all the same.
                if at == 0 { (0, 0) } else { (at, self.wired[at].first_view.min(last)) }
            }
        };
        self.rewind(resume);
        let mut tail = Request { shape: self.shape, system: Vec::new(), messages: Vec::new() };
        lower_tail(view, from, &mut tail);
        for m in &tail.messages {
            self.push(m, ids);
        }
        let mut counts = self.counts;
        let missing = if self.rules.adjacent_results { self.pending.len() as u32 } else { self.unanswered };
        counts[Rule::MissingResult as usize] += missing;
        counts
    }

    /// Drops the lowered messages from `at` on and puts the state back to before them.
    fn rewind(&mut self, at: usize) {
        if at >= self.wired.len() {
            return;
        }
        for (k, w) in self.wired.iter().enumerate().skip(at).rev() {
            for &c in &w.calls {
                if self.first_call[c as usize] == k as u32 {
                    self.first_call[c as usize] = UNSEEN;
                }
                if !self.rules.adjacent_results {
                    self.called[c as usize] -= 1;
                    if self.answered[c as usize] == 0 {
                        self.unanswered -= 1;
                    }
                }
            }
            if !self.rules.adjacent_results {
                for &r in &w.results {
                    self.answered[r as usize] -= 1;
                    if self.answered[r as usize] == 0 {
                        self.unanswered += self.called[r as usize];
                    }
                }
            }
        }
        self.counts = self.wired[at].counts_before;
        self.pending = std::mem::take(&mut self.wired[at].pending_before);
        self.wired.truncate(at);
    }

    /// Validates one more lowered message, as [`validate`] does message by message.
    fn push(&mut self, m: &WireMessage<'_>, ids: &mut FxHashMap<Box<str>, u32>) {
        let mut id = |text: &str| -> u32 {
            if let Some(&n) = ids.get(text) {
                return n;
            }
            let n = ids.len() as u32;
            ids.insert(text.into(), n);
            n
        };
        let calls: SmallVec<[u32; 2]> = m.calls().map(&mut id).collect();
        let results: SmallVec<[u32; 2]> = m.results().map(&mut id).collect();
        let needed = ids.len();
        if self.first_call.len() < needed {
            self.first_call.resize(needed, UNSEEN);
            self.called.resize(needed, 0);
            self.answered.resize(needed, 0);
        }
        let w = Wired {
            role: m.role,
            all_empty: m.blocks.iter().all(Block::is_empty),
            any_empty: m.blocks.iter().any(Block::is_empty),
            calls,
            results,
            first_view: m.from_view[0],
            last_view: *m.from_view.last().expect("a lowered message comes from a view message"),
            counts_before: self.counts,
            pending_before: self.pending.clone(),
        };
        let at = self.wired.len() as u32;
        let mut found = |rule: Rule| self.counts[rule as usize] += 1;
        if self.rules.first_user && at == 0 && w.role != "user" {
            found(Rule::FirstRole);
        }
        if w.all_empty || (self.rules.empty_blocks && w.any_empty) {
            found(Rule::EmptyContent);
        }
        if self.rules.alternate && self.wired.last().is_some_and(|prev| prev.role == w.role) {
            found(Rule::ConsecutiveSameRole);
        }
        if self.rules.adjacent_results {
            if w.results.is_empty() || !w.calls.is_empty() {
                for _ in self.pending.drain(..) {
                    found(Rule::MissingResult);
                }
            }
            for &r in &w.results {
                if let Some(k) = self.pending.iter().position(|&p| p == r) {
                    self.pending.remove(k);
                } else if self.first_call[r as usize] != UNSEEN {
                    found(Rule::ResultNotAfterCall);
                } else {
                    found(Rule::OrphanResult);
                }
            }
            self.pending.extend(w.calls.iter().copied());
        } else {
            for &r in &w.results {
                if self.first_call[r as usize] == UNSEEN {
                    found(Rule::OrphanResult);
                }
                if self.answered[r as usize] == 0 {
                    self.unanswered -= self.called[r as usize];
                }
                self.answered[r as usize] += 1;
            }
            for &c in &w.calls {
                self.called[c as usize] += 1;
                if self.answered[c as usize] == 0 {
                    self.unanswered += 1;
                }
            }
        }
        for &c in &w.calls {
            if self.first_call[c as usize] == UNSEEN {
                self.first_call[c as usize] = at;
            }
        }
        self.wired.push(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compactbench_core::{EntryId, Message, Origin, Part, Role, ViewMessage};

    fn view(messages: Vec<Message>) -> View {
        let messages = messages.into_iter().enumerate().map(|(i, message)| ViewMessage { origin: Origin::Entry(EntryId(i as u32)), message }).collect();
        View { messages }
    }

    fn results(ids: &[&str]) -> Message {
        let parts = ids.iter().map(|id| Part::ToolResult { call_id: (*id).into(), name: "read".into(), text: "ok".into(), is_error: false }).collect();
        Message::new(Role::Tool, parts)
    }

    fn calls(ids: &[&str]) -> Message {
        let parts = ids.iter().map(|id| Part::ToolCall { id: (*id).into(), name: "read".into(), args: serde_json::json!({}) }).collect();
        Message::new(Role::Assistant, parts)
    }

    fn expected(view: &View) -> [RuleCounts; 4] {
        Shape::ALL.map(|shape| count(&validate(&lower(view, shape))))
    }

    /// The cases the fuzz target rarely builds: OpenAI Chat lowers a tool message to one
    /// message per result, and one without results to none.
    #[test]
    fn resumes_at_the_first_message_lowered_from_a_view_message() {
        // The last unchanged view message lowered to nothing, the one before to two.
        let mut messages = vec![Message::user("go"), calls(&["a", "b"]), results(&["a", "b"]), results(&[])];
        let mut revalidator = Revalidator::new();
        assert_eq!(revalidator.update(&view(messages.clone()), 0), expected(&view(messages.clone())));
        messages.push(Message::user("more"));
        let v = view(messages.clone());
        assert_eq!(revalidator.update(&v, 4), expected(&v));
        assert_eq!(revalidator.update(&v, 5)[0], RuleCounts::default(), "a valid chat request stays valid");

        // Two view messages that lowered to nothing; the second now has a result to give.
        let mut messages = vec![Message::user("go"), calls(&["a"]), results(&[]), results(&[]), Message::user("x")];
        let mut revalidator = Revalidator::new();
        revalidator.update(&view(messages.clone()), 0);
        messages[3] = results(&["a"]);
        let v = view(messages);
        assert_eq!(revalidator.update(&v, 3), expected(&v));
    }
}

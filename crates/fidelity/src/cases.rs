//! Seeded cases: a log cut right before a model request (or at a turn's end), with a window.
//!
//! Every case comes from a session of its own (a scenario and a seed), so the counts measure
//! distinct sessions, not the same log asked many times. Logs come from replaying the
//! session with the `none` strategy (so assistant messages carry provider usage, as a harness
//! would see it, and no compaction has happened yet), and, for originals whose exporter writes
//! checkpoints, also with the strategy itself (so previous summaries and kept windows are in
//! the log). Each log is cut once, changed by one input class in turn ([`crate::classes`]), and
//! paired with windows around the strategy's own threshold: a random one, and the two windows
//! on either side of the point where our trigger flips.

use compactbench_core::{Entry, Log, Message, ModelProfile, Moment, Role, Strategy};
use compactbench_eval::drive::{run, Env};
use compactbench_eval::generate::generate;
use compactbench_eval::scenario::Scenario;
use compactbench_tokens::TokenCounter;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::classes::{found, rotation};
use crate::ours::{decides_to_compact, FixedSummarizer};

/// One session state to ask both sides about.
#[derive(Clone, Debug)]
pub struct Case {
    /// Stable id: scenario, family, seed, request, input class, window.
    pub id: String,
    /// The log at that moment.
    pub log: Log,
    /// The model (its window varies per case).
    pub model: ModelProfile,
    /// The session it was cut from (scenario and seed).
    pub session: String,
    /// Its input classes: the variation made, then those found in the log.
    pub classes: Vec<&'static str>,
    /// The original's non-default setting it is asked with (an index into
    /// [`crate::Original::settings`]); `None`: defaults.
    pub setting: Option<usize>,
}

impl Case {
    /// A case of its own session with no input class (for tests and hand-made cases).
    pub fn new(id: impl Into<String>, log: Log, model: ModelProfile) -> Case {
        let id = id.into();
        Case { session: id.clone(), id, log, model, classes: Vec::new(), setting: None }
    }
}

/// Where cases come from: which scenarios, how many, and how they are cut.
pub struct Plan<'a> {
    /// Scenarios to replay.
    pub scenarios: &'a [Scenario],
    /// Distinct sessions wanted (at least; every scenario contributes whole rounds).
    pub sessions: usize,
    /// The moment the original checks at: before a request, or at a turn's end.
    pub moment: Moment,
    /// Also cut logs from the strategy's own replay (previous compactions in the log).
    pub with_history: bool,
    /// The original's session format stores a failed reply's marker with its usage, so
    /// [`crate::classes::Variation::AbortedReply`] is in the rotation
    /// ([`crate::classes::rotation`]).
    pub failed_replies: bool,
    /// The seed of the first session (sessions asked with another setting start elsewhere, so
    /// that every session is distinct).
    pub first_seed: u64,
}

/// Builds the cases of at least `plan.sessions` distinct sessions for `strategy`,
/// deterministically: one cut per session and replay.
pub fn build(strategy: &dyn Strategy, plan: &Plan<'_>, counter: &TokenCounter) -> Vec<Case> {
    let none = compactbench_registry::find("none").expect("the none baseline is registered");
    let summarizer = FixedSummarizer;
    let env = Env { counter, summarizer: &summarizer };
    let mut cases = Vec::new();
    let (mut sessions, mut logs) = (0usize, 0usize);
    let variations = rotation(plan.failed_replies);
    let mut seed = plan.first_seed;
    while sessions < plan.sessions && seed < plan.first_seed + 1_000 {
        for scenario in plan.scenarios {
            let session = generate(scenario, seed);
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ stable_hash(&scenario.name));
            let requests = session.requests() as u32;
            if requests < 3 {
                continue;
            }
            let before = cases.len();
            let replays: Vec<(&str, &dyn Strategy)> = if plan.with_history {
                vec![("fresh", none.as_ref()), ("history", strategy)]
            } else {
                vec![("fresh", none.as_ref())]
            };
            for (family, replayer) in replays {
                let cut = rng.gen_range(1..requests);
                let mut captured = None;
                run(replayer, scenario, &session, seed, &env, |snap| {
                    if snap.index == cut {
                        captured = Some(snap.log.clone());
                    }
                });
                let Some(log) = captured.and_then(|log| cut_for(plan.moment, log)) else { continue };
                // The input classes in turn, one per cut log; a variation that does not apply
                // to this log gives way to the next.
                let turn = logs;
                logs += 1;
                let Some((variation, log)) =
                    (0..variations.len()).map(|k| variations[(turn + k) % variations.len()]).find_map(|v| Some((v, v.apply(&log, &mut rng)?)))
                else {
                    continue;
                };
                let mut classes = vec![variation.name()];
                classes.extend(found(&log));
                let base = ModelProfile { ..scenario.model.clone() };
                let size = log_size(&log, counter);
                let random = (size as f64 / rng.gen_range(0.5..1.6)) as u64;
                let mut windows = vec![random.max(1_000)];
                if let Some(flip) = flip_window(strategy, &log, plan.moment, &base, size) {
                    windows.extend([flip - 1, flip]);
                }
                windows.sort_unstable();
                windows.dedup();
                for window in windows {
                    let model = ModelProfile { window, ..base.clone() };
                    cases.push(Case {
                        id: format!("{}/{family}/s{seed}/r{cut}/{}/w{window}", scenario.name, variation.name()),
                        log: log.clone(),
                        model,
                        session: format!("{}/s{seed}", scenario.name),
                        classes: classes.clone(),
                        setting: None,
                    });
                }
            }
            sessions += usize::from(cases.len() > before);
        }
        seed += 1;
    }
    cases
}

/// The log as the original sees it at `moment`: before a request it is the log as captured;
/// at a turn's end it ends with the assistant's final reply (the captured log must then end
/// with the user message that opened the next turn, which is dropped).
fn cut_for(moment: Moment, log: Log) -> Option<Log> {
    match moment {
        Moment::TurnEnd => {
            let last = log.entries().last()?;
            let (_, Entry::Message(m)) = last else { return None };
            if m.role != Role::User || log.len() < 3 {
                return None;
            }
            let prev = log.message(compactbench_core::EntryId(log.len() as u32 - 2))?;
            (prev.role == Role::Assistant && !prev.has_tool_calls()).then(|| prefix(&log, log.len() - 1))
        }
        _ => Some(log),
    }
}

/// The first `n` entries of `log`, as a new log (logs only grow, so this builds a new one).
pub fn prefix(log: &Log, n: usize) -> Log {
    let mut out = Log::new();
    for (_, e) in log.entries().take(n) {
        match e {
            Entry::Message(m) => {
                out.push_message(m.clone());
            }
            Entry::Checkpoint(cp) => {
                out.push_checkpoint((**cp).clone());
            }
        }
    }
    out
}

/// Exact size of every message in the log (the scale windows are drawn on).
fn log_size(log: &Log, counter: &TokenCounter) -> u64 {
    log.messages().map(|(_, m): (_, &Message)| counter.count_message(m)).sum()
}

/// The smallest window at which our strategy no longer compacts, searched between a tenth and
/// ten times the log's size; `None` where the trigger does not flip in that range (it never or
/// always fires).
fn flip_window(strategy: &dyn Strategy, log: &Log, moment: Moment, base: &ModelProfile, size: u64) -> Option<u64> {
    let fires = |w: u64| decides_to_compact(strategy, log, moment, &ModelProfile { window: w, ..base.clone() });
    let (mut lo, mut hi) = ((size / 10).max(2), size.saturating_mul(10).max(4));
    if !fires(lo) || fires(hi) {
        return None;
    }
    // Invariant: fires(lo) and !fires(hi).
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fires(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(hi)
}

/// FNV-1a, stable across Rust releases.
fn stable_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

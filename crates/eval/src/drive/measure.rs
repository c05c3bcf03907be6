//! Exact tokens of each view message, and what is known of each content a run has seen.

use memchr::memmem::Finder;
use rustc_hash::FxHashMap;

use compactbench_core::{Message, Origin, View};
use compactbench_tokens::{TokenCounter, PER_REQUEST_OVERHEAD};

use crate::facts::Fact;

/// Identifies a view message's content across requests: views are rebuilt each request, but
/// a message with the same origin (and position among messages of that origin) has the same
/// content. The conformance kit checks that projections keep origins honest.
pub(super) type Key = (Origin, u32);

/// What is known about one content.
pub(super) struct Info {
    pub(super) tokens: u64,
    /// Indices of facts whose needle it contains.
    pub(super) needles: Vec<usize>,
    /// Indices of offload paths it names (checked lazily as paths appear).
    pub(super) paths_checked: usize,
    pub(super) paths: Vec<usize>,
    /// Its searchable text, kept for the path checks to come (compactions add paths).
    pub(super) text: String,
    /// Indices into [`Contents::stale_finders`] of the stale values and supersessions it holds.
    pub(super) stale_marks: Vec<usize>,
}

/// Every content seen in a run, described once: a message is counted and searched for
/// needles the first time its key appears, whatever view it appears in after.
pub(super) struct Contents {
    by_key: FxHashMap<Key, usize>,
    pub(super) infos: Vec<Info>,
    /// A searcher for each planted fact's needle.
    pub(super) needle_finders: Vec<Finder<'static>>,
    /// Searchers for every stale value of every fact and for the statement that superseded it:
    /// the `k`-th stale value of fact `f` at `stale_first[f] + 2 * k`, its supersession next.
    /// Empty when no fact has stale values (so a session without them searches nothing more).
    pub(super) stale_finders: Vec<Finder<'static>>,
    /// Per fact, the index of its first stale value in `stale_finders`.
    pub(super) stale_first: Vec<usize>,
}

impl Contents {
    pub(super) fn new(facts: &[Fact]) -> Contents {
        let needle_finders = facts.iter().map(|f| Finder::new(f.needle.as_bytes()).into_owned()).collect();
        let (mut stale_finders, mut stale_first) = (Vec::new(), Vec::with_capacity(facts.len()));
        for f in facts {
            stale_first.push(stale_finders.len());
            for s in &f.stale {
                stale_finders.push(Finder::new(s.value.as_bytes()).into_owned());
                stale_finders.push(Finder::new(s.superseded_by.as_bytes()).into_owned());
            }
        }
        Contents { by_key: FxHashMap::default(), infos: Vec::new(), needle_finders, stale_finders, stale_first }
    }

    /// The index in `infos` of what is known of the content `key` names (`message`),
    /// described when first seen.
    fn describe(&mut self, counter: &TokenCounter, key: Key, message: &Message) -> usize {
        let (infos, finders, stale) = (&mut self.infos, &self.needle_finders, &self.stale_finders);
        *self.by_key.entry(key).or_insert_with(|| {
            let text = message.searchable_text();
            let found = |finders: &[Finder<'static>]| -> Vec<usize> {
                finders.iter().enumerate().filter(|(_, f)| f.find(text.as_bytes()).is_some()).map(|(i, _)| i).collect()
            };
            let (needles, stale_marks) = (found(finders), found(stale));
            infos.push(Info { tokens: counter.count_message(message), needles, paths_checked: 0, paths: Vec::new(), text, stale_marks });
            infos.len() - 1
        })
    }
}

/// The keys and exact tokens of the view measured last, kept so that the next measure only
/// does the messages after the prefix the two views share (a view mostly grows by a message
/// or two, and redoing all of it made a long replay quadratic).
#[derive(Default)]
pub(super) struct Measured {
    pub(super) keys: Vec<Key>,
    pub(super) tokens: Vec<u64>,
    /// Each message's [`Info`] (an index into [`Contents::infos`]).
    pub(super) infos: Vec<usize>,
    /// Messages per origin among `keys` (the next occurrence number of each).
    occurrences: FxHashMap<Origin, u32>,
}

impl Measured {
    /// Measures `view`, describing contents not seen before, and returns the request's exact
    /// total.
    pub(super) fn update(&mut self, view: &View, contents: &mut Contents, counter: &TokenCounter) -> u64 {
        // Keys are origins numbered by occurrence, so equal origins up to here mean equal keys.
        let same = self.keys.iter().zip(&view.messages).take_while(|((origin, _), vm)| *origin == vm.origin).count();
        self.truncate(same);
        for vm in &view.messages[same..] {
            let key = self.push(vm.origin);
            let info = contents.describe(counter, key, &vm.message);
            self.tokens.push(contents.infos[info].tokens);
            self.infos.push(info);
        }
        self.tokens.iter().sum::<u64>() + PER_REQUEST_OVERHEAD
    }

    /// Drops the messages from `at` on.
    fn truncate(&mut self, at: usize) {
        for (origin, _) in self.keys.drain(at..) {
            *self.occurrences.get_mut(&origin).expect("counted when kept") -= 1;
        }
        self.tokens.truncate(at);
        self.infos.truncate(at);
    }

    /// The key of `origin` appended after the kept messages.
    fn push(&mut self, origin: Origin) -> Key {
        let n = self.occurrences.entry(origin).or_default();
        *n += 1;
        let key = (origin, *n - 1);
        self.keys.push(key);
        key
    }
}

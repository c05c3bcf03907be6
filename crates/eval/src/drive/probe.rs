//! Where each needed fact is in a request: verbatim in the view, recoverable through an
//! offload path the view names, or lost; and each fact's outcome over the run.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use compactbench_core::{Log, Origin, VirtualStore};

use super::measure::{Contents, Measured};
use crate::facts::Fact;
use crate::offload_paths::OffloadPaths;
use crate::results::{CompactionRecord, FactOutcome, Status};

/// How many reads deep the probe follows pointers from one store file to another.
pub const MAX_POINTER_HOPS: usize = 3;

/// One probe of one fact: (request, state, compactions since the fact was planted).
pub(super) type Probe = (u32, Status, u32);

/// What the probe keeps between requests: the offload paths and what each version of each
/// offloaded file holds.
#[derive(Default)]
pub(super) struct Prober {
    /// Offload paths seen in checkpoints, in order of appearance.
    paths: OffloadPaths,
    /// (path index, file length) -> the facts whose needle that version of the file holds.
    reads: FxHashMap<(usize, usize), Vec<usize>>,
    /// (path index, file length) -> indices of the other paths the file names.
    links: FxHashMap<(usize, usize), Vec<usize>>,
}

impl Prober {
    /// Takes in the offload paths of the checkpoints appended to `log` since the last call.
    pub(super) fn sync(&mut self, log: &Log) {
        self.paths.sync(log);
    }

    /// The state of every fact in the view `measured` describes (None where not needed at
    /// `step`).
    pub(super) fn probe(
        &mut self,
        facts: &[Fact],
        step: usize,
        measured: &Measured,
        contents: &mut Contents,
        store: &VirtualStore,
    ) -> Vec<Option<Status>> {
        let needed: Vec<usize> = (0..facts.len()).filter(|&i| facts[i].needed_at(step)).collect();
        let mut out = vec![None; facts.len()];
        if needed.is_empty() {
            return out;
        }
        for (&info, (origin, _)) in measured.infos.iter().zip(&measured.keys) {
            let here = match origin {
                Origin::Entry(_) | Origin::Replaced(..) => Status::VerbatimKept,
                Origin::Injected(_) => Status::VerbatimInjected,
                Origin::Summary(_) => Status::VerbatimSummary,
            };
            for &f in &contents.infos[info].needles {
                // Status orders kept < injected < summary: keep the most direct place.
                out[f] = Some(out[f].map_or(here, |s: Status| s.min(here)));
            }
        }
        let missing: Vec<usize> = needed.iter().copied().filter(|&f| out[f].is_none()).collect();
        if !missing.is_empty() {
            // The offload paths the view names, each message checked against paths that
            // appeared since it was last checked.
            let mut mentioned = vec![false; self.paths.len()];
            for &info in &measured.infos {
                let info = &mut contents.infos[info];
                if info.paths_checked < self.paths.len() {
                    info.paths.extend(self.paths.named_in(&info.text, info.paths_checked));
                    info.paths_checked = self.paths.len();
                }
                for &p in &info.paths {
                    mentioned[p] = true;
                }
            }
            self.follow_pointers(store, &mut mentioned);
            // One pass over the mentioned files, each file's needles looked up once per
            // version of it, rather than every missing fact asking every file.
            let mut recoverable = vec![false; facts.len()];
            for p in (0..mentioned.len()).filter(|&p| mentioned[p]) {
                let Some(content) = store.read(self.paths.get(p)) else {
                    continue;
                };
                let finders = &contents.needle_finders;
                let holds = self.reads.entry((p, content.len())).or_insert_with(|| {
                    finders.iter().enumerate().filter(|(_, n)| n.find(content.as_bytes()).is_some()).map(|(f, _)| f).collect()
                });
                for &f in holds.iter() {
                    recoverable[f] = true;
                }
            }
            for f in missing {
                out[f] = Some(if recoverable[f] { Status::Recoverable } else { Status::Lost });
            }
        }
        if !contents.stale_finders.is_empty() {
            // Stale values and supersessions anywhere in the request (offloaded files do not
            // count: what the request itself says is what the model takes as current).
            let mut present = vec![false; contents.stale_finders.len()];
            for &info in &measured.infos {
                for &m in &contents.infos[info].stale_marks {
                    present[m] = true;
                }
            }
            for &f in &needed {
                if leaks(&present[contents.stale_first[f]..], facts[f].stale.len()) {
                    out[f] = Some(Status::Stale);
                }
            }
        }
        for (i, s) in out.iter_mut().enumerate() {
            if !needed.contains(&i) {
                *s = None;
            }
        }
        out
    }

    /// Marks the store files that the marked ones name, transitively up to
    /// [`MAX_POINTER_HOPS`] reads deep: an agent that reads a file naming another (Amp's
    /// parent thread naming its own parent) can read that one too.
    fn follow_pointers(&mut self, store: &VirtualStore, mentioned: &mut [bool]) {
        let mut frontier: Vec<usize> = (0..mentioned.len()).filter(|&p| mentioned[p]).collect();
        for _ in 0..MAX_POINTER_HOPS {
            let mut next = Vec::new();
            for p in frontier {
                let Some(content) = store.read(self.paths.get(p)) else {
                    continue;
                };
                let paths = &self.paths;
                let named = self
                    .links
                    .entry((p, content.len()))
                    .or_insert_with(|| paths.named_in(content, 0).into_iter().filter(|&q| q != p).collect());
                for &q in named.iter() {
                    if !mentioned[q] {
                        mentioned[q] = true;
                        next.push(q);
                    }
                }
            }
            if next.is_empty() {
                break;
            }
            frontier = next;
        }
    }
}

/// Whether a request leaks a stale value: of a fact's `n` stale values, with `present[2k]` saying
/// whether its `k`-th is in the request and `present[2k + 1]` whether the statement that
/// superseded it is, some value is there without its supersession. The fact is kept only when
/// its current value is there and every old value beside it is marked as replaced.
pub(crate) fn leaks(present: &[bool], n: usize) -> bool {
    (0..n).any(|k| present[2 * k] && !present[2 * k + 1])
}

/// What happened to `fact` over the run (of a session of `steps` steps), from its probes.
pub(super) fn outcome(fact: &Fact, probes: &[Probe], compactions: &[CompactionRecord], steps: usize) -> FactOutcome {
    let mut counts = BTreeMap::new();
    for (_, s, _) in probes {
        *counts.entry(*s).or_default() += 1;
    }
    let first_lost = probes.iter().find(|(_, s, _)| *s == Status::Lost);
    let max_rounds = probes.last().map_or(0, |p| p.2);
    let after_round = (1..=max_rounds).filter_map(|k| probes.iter().find(|p| p.2 >= k).map(|p| p.1)).collect();
    FactOutcome {
        id: fact.id.clone(),
        kind: fact.kind,
        planted_quarter: (1 + 4 * fact.planted_step / steps.max(1)) as u8,
        needed: probes.len() as u32,
        probes: counts,
        last: probes.last().expect("only needed facts get an outcome").1,
        lost_at: first_lost.map(|p| p.0),
        lost_after_rounds: first_lost.map(|p| p.2),
        // The newest successful compaction before the first request that lost it.
        lost_by: first_lost.and_then(|p| compactions.iter().rposition(|c| c.error.is_none() && c.request <= p.0)).map(|i| i as u32),
        after_round,
        judged: None,
        named_by: fact.named_by,
    }
}

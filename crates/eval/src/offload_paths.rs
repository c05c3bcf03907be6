//! The offload paths a run's checkpoints name, and a fast "which of them does this text name".

use std::collections::HashSet;

use aho_corasick::AhoCorasick;
use compactbench_core::{Entry, Log};

/// Offload paths in order of first appearance, searchable in segments.
///
/// A probe asks each view message which paths it names, once per path: a message already
/// checked against the first `k` paths is looked at for the rest only. A strategy that offloads
/// each masked output (Gemini CLI) makes thousands of paths, so one searcher per path costs a
/// pass over the text per path, and one automaton rebuilt over all paths at each compaction
/// costs a pass over all paths per compaction. Segments, merged like a binary counter
/// (a segment is merged into the one before it while it is at least as large), keep both the
/// searches per text and the rebuilt paths logarithmic.
#[derive(Default)]
pub(crate) struct OffloadPaths {
    paths: Vec<String>,
    /// The same paths, to tell a new one from a known one without a pass over them all
    /// (Gemini CLI's thousands of paths made that pass a visible share of every compaction).
    known: HashSet<String>,
    /// (first path index, automaton over `paths[first..next segment's first]`).
    segments: Vec<(usize, AhoCorasick)>,
    /// Entries already read (the log only grows, so a count suffices).
    entries_seen: usize,
}

impl OffloadPaths {
    /// Number of paths.
    pub(crate) fn len(&self) -> usize {
        self.paths.len()
    }

    /// Path `i`.
    pub(crate) fn get(&self, i: usize) -> &str {
        &self.paths[i]
    }

    /// Adds the new paths of the checkpoints appended to `log` since the last call.
    pub(crate) fn sync(&mut self, log: &Log) {
        let first = self.paths.len();
        for (_, entry) in log.entries().skip(self.entries_seen) {
            self.entries_seen += 1;
            let Entry::Checkpoint(cp) = entry else { continue };
            for o in &cp.offloads {
                if !self.known.contains(&o.path) {
                    self.known.insert(o.path.clone());
                    self.paths.push(o.path.clone());
                }
            }
        }
        if self.paths.len() == first {
            return;
        }
        let mut start = first;
        while let Some(&(before, _)) = self.segments.last() {
            if self.paths.len() - start < start - before {
                break;
            }
            self.segments.pop();
            start = before;
        }
        let automaton = AhoCorasick::new(&self.paths[start..]).expect("offload paths are short enough for an automaton");
        self.segments.push((start, automaton));
    }

    /// Indices, ascending and at least `from`, of the paths `text` names anywhere (overlapping
    /// ones included: one path may be a prefix of another).
    pub(crate) fn named_in(&self, text: &str, from: usize) -> Vec<usize> {
        let mut found = Vec::new();
        for (n, (start, automaton)) in self.segments.iter().enumerate() {
            let end = self.segments.get(n + 1).map_or(self.paths.len(), |s| s.0);
            if end <= from {
                continue;
            }
            found.extend(automaton.find_overlapping_iter(text).map(|m| start + m.pattern().as_usize()).filter(|&i| i >= from));
        }
        found.sort_unstable();
        found.dedup();
        found
    }
}

#[cfg(test)]
mod tests {
    use compactbench_core::{Checkpoint, CheckpointKind, Offload, Window};

    use super::*;

    fn offloading(log: &mut Log, paths: &[&str]) {
        let mut cp = Checkpoint::new(CheckpointKind::Offload, Window::Inherit);
        cp.offloads = paths.iter().map(|p| Offload { path: (*p).to_owned(), entries: Vec::new() }).collect();
        log.push_checkpoint(cp);
    }

    #[test]
    fn finds_every_named_path_across_segments_from_an_index_on() {
        let mut log = Log::new();
        let mut paths = OffloadPaths::default();
        let names: Vec<String> = (0..37).map(|i| format!("out/{i}.txt")).collect();
        // Batches of 1, 2, 3, ... paths, a repeat of a known path among them.
        let mut next = 0;
        for batch in 1.. {
            if next >= names.len() {
                break;
            }
            let end = (next + batch).min(names.len());
            let mut these: Vec<&str> = names[next..end].iter().map(String::as_str).collect();
            these.push("out/0.txt");
            offloading(&mut log, &these);
            paths.sync(&log);
            next = end;
            assert!(paths.segments.len() <= 1 + usize::BITS as usize - paths.len().leading_zeros() as usize);
        }
        // One path inside another: a text naming the longer names both.
        offloading(&mut log, &["keep/a", "keep/a.full"]);
        paths.sync(&log);
        assert_eq!(paths.len(), 39);
        assert_eq!(paths.get(5), "out/5.txt");
        let text = "see out/31.txt and out/3.txt, then out/20.txt and keep/a.full";
        assert_eq!(paths.named_in(text, 0), vec![3, 20, 31, 37, 38]);
        assert_eq!(paths.named_in(text, 4), vec![20, 31, 37, 38]);
        assert_eq!(paths.named_in(text, 32), vec![37, 38]);
        assert_eq!(paths.named_in(text, 38), vec![38]);
        assert_eq!(paths.named_in(text, 39), Vec::<usize>::new());
    }
}

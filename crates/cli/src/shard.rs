//! `eval --shard I/N`: which cells of the matrix one of N machines runs.
//!
//! A cell belongs to a shard by a stable hash of its scenario, seed and strategy, so the split
//! depends on nothing about the machine (threads, `--jobs`, timing, hash-map order) nor on
//! which other cells the matrix holds. The summarizer and the variant (`pi+delegate`,
//! `aider+text`) are left out on purpose: all of a strategy's rows on one session land on one
//! machine, and they ask the same summary requests (the bounds repeat the primary's first one;
//! delegation changes nothing before the first delegated span), which that machine's summary
//! cache then answers instead of a second machine's model call.

use std::fmt;
use std::str::FromStr;

use compactbench_eval::variant;

/// One of `count` parts of the matrix, numbered from 1 (`1/3`, `2/3`, `3/3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shard {
    index: u64,
    count: u64,
}

impl Shard {
    /// The number of shards.
    pub(crate) fn count(self) -> u64 {
        self.count
    }

    /// The shards of an `count`-way split, in order.
    pub(crate) fn all(count: u64) -> impl Iterator<Item = Shard> {
        (1..=count).map(move |index| Shard { index, count })
    }

    /// Whether this shard runs the cells of report id `run_id` (a strategy id, or one with a
    /// variant suffix) on `scenario` with `seed`.
    pub(crate) fn owns(self, scenario: &str, run_id: &str, seed: u64) -> bool {
        Shard::of(self.count, scenario, run_id, seed) == self
    }

    /// The shard of `count` that runs the cells of report id `run_id` on `scenario` with `seed`.
    pub(crate) fn of(count: u64, scenario: &str, run_id: &str, seed: u64) -> Shard {
        let strategy = variant::base(run_id);
        // FNV-1a, not std's hasher: std does not promise the same hash across Rust releases,
        // and shards built on different machines must agree. 0xff never occurs in UTF-8, so
        // it separates the fields unambiguously.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in scenario.bytes().chain([0xff]).chain(strategy.bytes()).chain([0xff]).chain(seed.to_le_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        // FNV's low bits are a poor split (its lowest bit is the parity of the input bytes'
        // lowest bits): mix every bit into every other (splitmix64's finalizer), then map to
        // 0..count by the high bits of a 128-bit product.
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
        let zero_based = ((u128::from(h) * u128::from(count)) >> 64) as u64;
        Shard { index: zero_based + 1, count }
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    /// Errors say what is wrong without repeating the value: clap quotes it before them.
    fn from_str(s: &str) -> Result<Shard, String> {
        let Some((i, n)) = s.split_once('/') else {
            return Err("expected I/N, e.g. 1/3 for the first of three shards".to_owned());
        };
        let number = |part: &str, what: &str| part.parse::<u64>().map_err(|_| format!("{what} {part:?} is not a whole number"));
        let (index, count) = (number(i, "I")?, number(n, "N")?);
        if count == 0 {
            return Err("N must be at least 1".to_owned());
        }
        if index == 0 {
            return Err("shards are numbered from 1 (from a 0-based index such as JOB_COMPLETION_INDEX, pass index + 1)".to_owned());
        }
        if index > count {
            return Err(format!("I must be 1 to {count}"));
        }
        Ok(Shard { index, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cells like a large matrix's: every (scenario, seed, report id).
    fn cells() -> Vec<(String, String, u64)> {
        let mut out = Vec::new();
        for scenario in 0..10 {
            for id in ["none", "pi", "claude-code", "codex", "aider", "gemini-cli", "openhands/llm-summarizing", "kimi-cli", "cursor", "goose"] {
                for seed in 0..20 {
                    out.push((format!("scenario-{scenario}"), id.to_owned(), seed));
                }
            }
        }
        out
    }

    #[test]
    fn every_cell_is_in_exactly_one_shard_and_shards_are_balanced() {
        let cells = cells();
        for count in 1..=7 {
            let mut sizes = vec![0usize; count as usize];
            for (scenario, id, seed) in &cells {
                let owners: Vec<Shard> = Shard::all(count).filter(|s| s.owns(scenario, id, *seed)).collect();
                assert_eq!(owners.len(), 1, "{scenario} {id} {seed} in shards {owners:?}");
                sizes[owners[0].index as usize - 1] += 1;
            }
            // A hash splits 2,000 cells within a few percent of fair; a fifth off is a broken
            // hash (FNV's raw low bits split by parity).
            let fair = cells.len() / count as usize;
            assert!(sizes.iter().all(|&n| n * 5 >= fair * 4 && n * 5 <= fair * 6), "{count} shards: {sizes:?}");
        }
    }

    #[test]
    fn the_split_is_pinned() {
        // A changed hash would split a matrix differently from shards built before it; merge
        // would then find cells in the wrong shard. These values are the split, not a guess.
        let of = |count, scenario, id, seed| Shard::of(count, scenario, id, seed).to_string();
        assert_eq!(of(3, "drift", "none", 0), "1/3");
        assert_eq!(of(3, "drift", "pi", 0), "3/3");
        assert_eq!(of(3, "drift", "pi", 1), "3/3");
        assert_eq!(of(3, "drift", "codex", 0), "2/3");
        assert_eq!(of(2, "debug-loop", "aider", 0), "1/2");
        assert_eq!(of(2, "debug-loop", "none", 0), "2/2");
        assert_eq!(of(1, "anything", "at-all", 9), "1/1");
        // A strategy's variants go where it goes.
        assert_eq!(of(3, "drift", "pi+delegate", 0), of(3, "drift", "pi", 0));
        assert_eq!(of(2, "debug-loop", "aider+text", 0), of(2, "debug-loop", "aider", 0));
    }

    #[test]
    fn bad_specs_are_refused_with_the_reason() {
        assert_eq!("2/3".parse::<Shard>(), Ok(Shard { index: 2, count: 3 }));
        for (spec, says) in [
            ("0/2", "shards are numbered from 1"),
            ("3/2", "I must be 1 to 2"),
            ("x/2", "I \"x\" is not a whole number"),
            ("1/0", "N must be at least 1"),
            ("1/y", "N \"y\" is not a whole number"),
            ("2", "expected I/N"),
            ("-1/2", "is not a whole number"),
        ] {
            let err = spec.parse::<Shard>().unwrap_err();
            assert!(err.contains(says), "{spec}: {err}");
        }
    }
}

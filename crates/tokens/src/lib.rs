//! Exact token counting for the runner, memoized by content.
//!
//! The runner measures every request with a real BPE (o200k_base by default, cl100k_base
//! selectable), counted by [`Bpe::BpeOpenai`] (GitHub's `bpe-openai`) unless the process sets
//! `COMPACTBENCH_TOKENIZER=tiktoken-rs` ([`Bpe::TiktokenRs`], the reference): the same counts,
//! compared on every shipped text by `crates/bench/tests/tokenizers.rs`, and `cargo xtask bench`
//! runs the matrix with both to print both tokenize-once floors.
//! Each unique message is tokenized once per [`TokenCounter`]: counts are cached
//! by a 64-bit hash of the message's role and searchable text. Strategies never use the
//! runner's request counts for their decisions; they use their original's estimator,
//! re-exported here as [`estimate`], or, when the original counts with a real BPE, this
//! counter through core's [`Tokenizer`] seam in the original's encoding (either encoding,
//! whatever the counter's own).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use compactbench_core::{Message, Part, Tokenizer};
use dashmap::DashMap;
use rustc_hash::FxBuildHasher;
use tiktoken_rs::CoreBPE;
use xxhash_rust::xxh3::xxh3_64_with_seed;

pub use compactbench_core::{estimate, Encoding};

/// Framing tokens per message (role markers), as OpenAI's chat format charges them.
pub const PER_MESSAGE_OVERHEAD: u64 = 4;
/// Tokens that prime the reply, charged once per request.
pub const PER_REQUEST_OVERHEAD: u64 = 3;

/// Which implementation of the BPE counts. Both give tiktoken's exact counts
/// (`encode(text, disallowed_special=())`); they differ in speed only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bpe {
    /// GitHub's `bpe-openai` (rust-gems): a regex-automata pre-tokenizer and a backtracking
    /// encoder, here with each pre-tokenizer piece's count memoized per thread. The default:
    /// about 3.9x (o200k_base) and 4.4x (cl100k_base) faster than tiktoken-rs on the shipped
    /// texts (`cargo xtask bench --tokenizers`; without the piece memo 1.7x and 2.2-3x).
    BpeOpenai,
    /// `tiktoken-rs`, a port of OpenAI's tiktoken: the reference.
    TiktokenRs,
}

impl Bpe {
    /// Its name, as `COMPACTBENCH_TOKENIZER` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Bpe::BpeOpenai => "bpe-openai",
            Bpe::TiktokenRs => "tiktoken-rs",
        }
    }

    /// The implementation of this process: `COMPACTBENCH_TOKENIZER` (`bpe-openai` or
    /// `tiktoken-rs`), [`Bpe::BpeOpenai`] when unset. Read once.
    ///
    /// # Panics
    /// On any other value: a benchmark run must not silently count with the other one.
    pub fn of_process() -> Bpe {
        static CHOSEN: OnceLock<Bpe> = OnceLock::new();
        *CHOSEN.get_or_init(|| match std::env::var("COMPACTBENCH_TOKENIZER") {
            Err(std::env::VarError::NotPresent) => Bpe::BpeOpenai,
            Ok(v) if v == "bpe-openai" => Bpe::BpeOpenai,
            Ok(v) if v == "tiktoken-rs" => Bpe::TiktokenRs,
            other => panic!("COMPACTBENCH_TOKENIZER must be bpe-openai or tiktoken-rs, not {other:?}"),
        })
    }

    /// Exact tokens of `text` in `encoding`. Each encoder is loaded once per process.
    pub fn count(self, encoding: Encoding, text: &str) -> u64 {
        match self {
            Bpe::BpeOpenai => {
                let tokenizer = match encoding {
                    Encoding::O200kBase => bpe_openai::o200k_base(),
                    Encoding::Cl100kBase => bpe_openai::cl100k_base(),
                };
                // `Tokenizer::count`, with each piece's count memoized.
                let text = tokenizer.normalize(text);
                PIECES.with_borrow_mut(|memo| {
                    let memo = &mut memo[encoding as usize];
                    if memo.len() > MAX_PIECES {
                        memo.clear();
                    }
                    tokenizer.split(text.as_str()).map(|piece| piece_count(memo, &tokenizer.bpe, piece)).sum()
                })
            }
            Bpe::TiktokenRs => tiktoken(encoding).encode_ordinary(text).len() as u64,
        }
    }
}

/// Pieces up to this many bytes have their counts memoized: a longer piece (a base64 run, a
/// long identifier) rarely recurs.
const MAX_PIECE_LEN: usize = 64;
/// A thread's piece memo is emptied when it holds more than this many pieces (a few tens of
/// megabytes).
const MAX_PIECES: usize = 1 << 20;

thread_local! {
    /// Counts of the pre-tokenizer's pieces, per encoding. The BPE encodes each piece on its
    /// own, and pieces (words with their leading space, punctuation runs, indentation) recur
    /// across texts far more than whole texts do: most of a text's pieces were counted in an
    /// earlier text, and a lookup costs less than the backtracking encoder's set-up.
    static PIECES: RefCell<[HashMap<Box<str>, u64, FxBuildHasher>; 2]> = RefCell::default();
}

/// The BPE count of one pre-tokenizer `piece`, memoized in `memo` when it is short.
fn piece_count(memo: &mut HashMap<Box<str>, u64, FxBuildHasher>, bpe: &bpe_openai::byte_pair_encoding::BytePairEncoding, piece: &str) -> u64 {
    if piece.len() > MAX_PIECE_LEN {
        return bpe.count(piece.as_bytes()) as u64;
    }
    if let Some(&n) = memo.get(piece) {
        return n;
    }
    let n = bpe.count(piece.as_bytes()) as u64;
    memo.insert(piece.into(), n);
    n
}

/// tiktoken-rs's BPE for `encoding`, loaded once per process.
fn tiktoken(encoding: Encoding) -> &'static CoreBPE {
    match encoding {
        Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
        Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
    }
}

/// A thread-safe, memoizing token counter. Share one per run.
///
/// Clones share one memo: a summarizer per session can count the lines every other session's
/// summarizer already counted (transcripts repeat the same messages across strategies, bounds
/// and sessions' seeds), and the counts stay exact.
#[derive(Clone)]
pub struct TokenCounter {
    encoding: Encoding,
    bpe: Bpe,
    /// Counts by [`key`]. Keys are XXH3 hashes already, so the map hashes them with Fx
    /// (a multiply) rather than SipHash.
    cache: Arc<DashMap<u64, u64, FxBuildHasher>>,
    /// Tells this memo's entries apart in the per-thread [`NEAR`] front (clones share it).
    salt: u64,
    misses: Arc<AtomicU64>,
    hits: Arc<AtomicU64>,
    /// Time spent in the BPE itself, summed over threads: the tokenize-once floor of the
    /// content this counter saw (every unique text once, plus the unmemoized one-off strings).
    bpe_nanos: Arc<AtomicU64>,
}

impl TokenCounter {
    /// A counter for `encoding`, counting with the process's [`Bpe::of_process`].
    pub fn new(encoding: Encoding) -> TokenCounter {
        TokenCounter::with_bpe(encoding, Bpe::of_process())
    }

    /// A counter for `encoding` counting with `bpe`.
    pub fn with_bpe(encoding: Encoding, bpe: Bpe) -> TokenCounter {
        static MEMOS: AtomicU64 = AtomicU64::new(0);
        let salt = (MEMOS.fetch_add(1, Ordering::Relaxed) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        TokenCounter { encoding, bpe, cache: Arc::default(), salt, misses: Arc::default(), hits: Arc::default(), bpe_nanos: Arc::default() }
    }

    /// The encoding.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The implementation that counts.
    pub fn bpe(&self) -> Bpe {
        self.bpe
    }

    /// Exact tokens of `text` (not memoized: use for one-off strings).
    pub fn count_text(&self, text: &str) -> u64 {
        self.encode(self.encoding, text)
    }

    /// The BPE count of `text`, timed.
    fn encode(&self, encoding: Encoding, text: &str) -> u64 {
        let started = std::time::Instant::now();
        let n = self.bpe.count(encoding, text);
        self.bpe_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        n
    }

    /// Exact tokens of `text`, memoized by content: for strings that recur, such as the
    /// lines a summarizer weighs again at every compaction.
    pub fn count_text_cached(&self, text: &str) -> u64 {
        self.count(self.encoding, text)
    }

    /// Exact tokens of a long `text` that shares most of its lines with earlier texts (a
    /// summarizer's transcript, rebuilt from the same messages at every compaction): the sum
    /// of the memoized counts of its segments, equal to [`Self::count_text`].
    ///
    /// Why the sum is exact: tiktoken splits text with its pre-tokenizer regex and encodes each
    /// piece on its own, so counts add up across any cut that is a piece boundary. A cut right
    /// after a run of `\r`/`\n` whose next character is neither whitespace nor `/` is one, for
    /// both `o200k_base` and `cl100k_base`: no alternative of their patterns matches a newline
    /// followed by such a character (newlines occur only in the whitespace alternatives and in
    /// the `[\r\n/]*` tail of the punctuation alternative).
    ///
    /// Two levels: the text is cut into blocks after runs of two or more newlines (a transcript's
    /// paragraphs, mostly whole messages that earlier transcripts held too), each block's count
    /// is memoized, and only a block seen for the first time is counted line by line (its lines
    /// memoized in turn, so a new summary made of old lines costs no BPE). Looking up every line
    /// of every transcript was most of a summarizer's time once the BPE was done. The whole
    /// text's count is memoized too: the runner measures each summary request (and answer) the
    /// summarizer has just counted, and then finds it with one hash.
    pub fn count_text_segmented(&self, text: &str) -> u64 {
        self.memoized(key(Kind::Text(self.encoding), text), || {
            let blocks = cuts(text).filter(|&i| i >= 2 && matches!(text.as_bytes()[i - 2], b'\r' | b'\n'));
            pieces(text, blocks).map(|block| self.count_block(block)).sum()
        })
        .0
    }

    /// A block of [`Self::count_text_segmented`]: memoized whole, counted line by line.
    fn count_block(&self, block: &str) -> u64 {
        self.memoized(key(Kind::Text(self.encoding), block), || pieces(block, cuts(block)).map(|line| self.count_text_cached(line)).sum())
            .0
    }

    /// Exact tokens of `message` as sent: its text, reasoning, tool names and arguments,
    /// results, media sizes, plus [`PER_MESSAGE_OVERHEAD`]. Memoized by content.
    pub fn count_message(&self, message: &Message) -> u64 {
        let text = message.searchable_text();
        let (n, hit) = self.memoized(key(Kind::Message(message.role), &text), || {
            // Media is charged by its declared size, not by the placeholder text.
            let media: u64 = message.parts.iter().map(|p| if let Part::Media { tokens, .. } = p { u64::from(*tokens) } else { 0 }).sum();
            self.count_text(&text) + media + PER_MESSAGE_OVERHEAD
        });
        if hit { &self.hits } else { &self.misses }.fetch_add(1, Ordering::Relaxed);
        n
    }

    /// The count memoized under `key`, computed by `count` (and kept) when there is none; and
    /// whether it was memoized. Looked up in this thread's [`NEAR`] front first, then in the
    /// shared memo.
    fn memoized(&self, key: u64, count: impl FnOnce() -> u64) -> (u64, bool) {
        let near_key = key ^ self.salt;
        let slot = near_key as usize % NEAR_SLOTS;
        let near = NEAR.with_borrow(|near| near[slot]);
        if near.0 == near_key && near_key != 0 {
            return (near.1, true);
        }
        let (n, hit) = match self.cache.get(&key) {
            Some(n) => (*n, true),
            None => {
                let n = count();
                self.cache.insert(key, n);
                (n, false)
            }
        };
        NEAR.with_borrow_mut(|near| near[slot] = (near_key, n));
        (n, hit)
    }

    /// Messages tokenized so far (cache misses) and answered from the cache (hits).
    pub fn stats(&self) -> (u64, u64) {
        (self.misses.load(Ordering::Relaxed), self.hits.load(Ordering::Relaxed))
    }

    /// Time spent in the BPE so far, summed over threads: what counting would cost if each
    /// unique text were tokenized once and nothing else were done (the tokenize-once floor).
    pub fn bpe_time(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.bpe_nanos.load(Ordering::Relaxed))
    }
}

/// Slots of [`NEAR`] (16 bytes each: half a megabyte, so it stays in a core's L2 cache).
const NEAR_SLOTS: usize = 1 << 15;

thread_local! {
    /// A direct-mapped front of recent counts, per thread: (key ^ memo salt, count). Counting
    /// is mostly hits (a summarizer's transcript repeats the lines of every earlier one), and
    /// on two threads every hit in the shared map took its shard's lock word from the other
    /// core; this front answers most of them from the thread's own cache without atomics.
    /// The salt keeps memos apart (a message key does not name the encoding).
    static NEAR: RefCell<Box<[(u64, u64)]>> = RefCell::new(vec![(0, 0); NEAR_SLOTS].into_boxed_slice());
}

/// What a cached count is of: a message (its role matters) or a bare text in one encoding.
enum Kind {
    Message(compactbench_core::Role),
    Text(Encoding),
}

/// The cache key of `text` counted as `kind`: a 64-bit XXH3 seeded by the kind, so messages
/// and texts of each encoding never share a key. XXH3 rather than std's SipHash: every
/// request looks up long texts again, and hashing them was a visible share of a run.
fn key(kind: Kind, text: &str) -> u64 {
    let seed = match kind {
        Kind::Message(role) => role as u64,
        Kind::Text(Encoding::O200kBase) => 16,
        Kind::Text(Encoding::Cl100kBase) => 17,
    };
    xxh3_64_with_seed(text.as_bytes(), seed)
}

/// The positions in `text` where a count may be cut (see [`TokenCounter::count_text_segmented`]):
/// right after a run of `\r`/`\n` whose next character is neither whitespace nor `/`.
fn cuts(text: &str) -> impl Iterator<Item = usize> + '_ {
    let bytes = text.as_bytes();
    memchr::memchr2_iter(b'\n', b'\r', bytes).map(|p| p + 1).filter(move |&i| {
        // Inside a run the next byte is a newline (whitespace), so only a run's end is a cut.
        bytes.get(i).is_some_and(|&next| !next.is_ascii_whitespace() && next != b'/') && !is_unicode_space_start(&text[i..])
    })
}

/// `text` cut at the ascending positions `at`: the piece before each cut, then the rest.
fn pieces<'t>(text: &'t str, at: impl Iterator<Item = usize> + 't) -> impl Iterator<Item = &'t str> {
    let mut start = 0;
    at.chain([text.len()]).map(move |cut| {
        let piece = &text[start..cut];
        start = cut;
        piece
    })
}

/// Whether `rest` starts with a non-ASCII whitespace character (`\s` in the tokenizer's
/// regex is Unicode-aware).
fn is_unicode_space_start(rest: &str) -> bool {
    rest.chars().next().is_some_and(|c| !c.is_ascii() && c.is_whitespace())
}

/// The seam strategies count through ([`compactbench_core::Cx::tokenizer`]): exact tokens of
/// `text` in any encoding, whatever the counter's own, memoized by encoding and content in the
/// counter's cache (so one counter per run serves the runner and every strategy).
impl Tokenizer for TokenCounter {
    fn count(&self, encoding: Encoding, text: &str) -> u64 {
        self.memoized(key(Kind::Text(encoding), text), || self.encode(encoding, text)).0
    }
}

impl Default for TokenCounter {
    fn default() -> Self {
        TokenCounter::new(Encoding::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segmented_counts_equal_whole_counts() {
        let counter = TokenCounter::default();
        let cl = TokenCounter::new(Encoding::Cl100kBase);
        let texts = [
            "[User]: fix the parser\nit crashes on empty input\n\n[Assistant]: reading src/parser.rs\n",
            "}\n/\nfoo\n//bar\n\n  indented\n\tTab\n\u{a0}nbsp\n\u{3000}ideographic\r\nwindows\r\n\r\nend",
            " \n \nfoo\n\n\n123456\n's\nDon't\n",
            "{\"role\":\"tool\",\"content\":\"a\\nb\"}\n{\"role\":\"user\"}\n",
            "émoji 🎉\n🎉x\nñ\n\n\n\n",
            "",
            "\n",
            "trailing\n",
        ];
        for t in texts {
            assert_eq!(counter.count_text_segmented(t), counter.count_text(t), "o200k {t:?}");
            assert_eq!(cl.count_text_segmented(t), cl.count_text(t), "cl100k {t:?}");
        }
        // Every prefix of a mixed text, so cuts land everywhere.
        let mixed = texts.join("\n");
        for (i, _) in mixed.char_indices() {
            let t = &mixed[..i];
            assert_eq!(counter.count_text_segmented(t), counter.count_text(t), "o200k {t:?}");
        }
    }

    #[test]
    fn counts_are_exact_and_memoized() {
        let counter = TokenCounter::default();
        assert_eq!(counter.count_text("hello world"), 2);
        let m = Message::user("hello world");
        assert_eq!(counter.count_message(&m), 2 + PER_MESSAGE_OVERHEAD);
        assert_eq!(counter.count_message(&m.clone()), 2 + PER_MESSAGE_OVERHEAD);
        assert_eq!(counter.stats(), (1, 1), "second count of equal content is a cache hit");
        // Same text, other role: a different message.
        counter.count_message(&Message::assistant("hello world"));
        assert_eq!(counter.stats().0, 2);
    }

    #[test]
    fn encodings_differ_and_parse() {
        let text = "fn main() { println!(\"Καλημέρα κόσμε\"); }";
        let o = TokenCounter::new(Encoding::O200kBase).count_text(text);
        let c = TokenCounter::new(Encoding::Cl100kBase).count_text(text);
        assert_ne!(o, c);
        // Messages are memoized by role and text only; each memo (and its per-thread front)
        // must still answer in its own encoding, on the same thread, in either order.
        let (o200k, cl100k) = (TokenCounter::new(Encoding::O200kBase), TokenCounter::new(Encoding::Cl100kBase));
        let m = Message::user(text);
        for _ in 0..2 {
            assert_eq!(o200k.count_message(&m), o + PER_MESSAGE_OVERHEAD);
            assert_eq!(cl100k.count_message(&m), c + PER_MESSAGE_OVERHEAD);
        }
        assert_eq!(Encoding::parse("cl100k_base"), Some(Encoding::Cl100kBase));
        assert_eq!(Encoding::parse("gpt2"), None);
    }

    #[test]
    fn the_tokenizer_seam_counts_in_either_encoding() {
        let counter = TokenCounter::default();
        let text = "fn main() { println!(\"Καλημέρα κόσμε\"); } <|endoftext|>";
        let cl = TokenCounter::new(Encoding::Cl100kBase).count_text(text);
        let tokenizer: &dyn Tokenizer = &counter;
        assert_eq!(tokenizer.count(Encoding::Cl100kBase, text), cl, "another encoding than the counter's own");
        assert_eq!(tokenizer.count(Encoding::O200kBase, text), counter.count_text(text));
        // Memoized per encoding: the cached answers stay apart.
        assert_eq!(tokenizer.count(Encoding::Cl100kBase, text), cl);
        assert_eq!(counter.count_text_cached(text), counter.count_text(text));
        // Special-token text is ordinary text (tiktoken's `disallowed_special=()`).
        assert!(tokenizer.count(Encoding::Cl100kBase, "<|endoftext|>") > 1);
    }

    #[test]
    fn both_implementations_count_alike() {
        // The cases where the two differ in how they split: bpe-openai emulates the patterns'
        // `\s+(?!\S)` look-ahead by dropping a character, and its encoder backtracks.
        let long_digits = "1234567890".repeat(50);
        let base64 = "QUJDRGVmZ2hpams0NTY3OCsvPT0=".repeat(400);
        let texts = [
            "", " ", "  ", "a  b", "a   \n  b", "trailing   ", "\n\n  x", "\t\t\n", " \u{a0}\u{3000}x",
            "DON'T we'll I'M they're", "HelloWORLD helloWorld ÀÉÎõü", "e\u{301}\u{302}", "👩‍👩‍👧 🎉x",
            "漢字かなカナ 한국어 العربية", "<|endoftext|><|fim_prefix|>", "a/b//c\n/\n", "x\r\n\r\ny",
            &long_digits, &base64,
        ];
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            for t in texts {
                assert_eq!(Bpe::BpeOpenai.count(encoding, t), Bpe::TiktokenRs.count(encoding, t), "{encoding:?} {t:?}");
            }
        }
        assert_eq!(TokenCounter::with_bpe(Encoding::Cl100kBase, Bpe::TiktokenRs).bpe(), Bpe::TiktokenRs);
        assert_eq!(Bpe::TiktokenRs.as_str(), "tiktoken-rs");
    }

    #[test]
    fn media_counts_by_declared_size() {
        let counter = TokenCounter::default();
        let m = Message::new(compactbench_core::Role::User, vec![Part::Media { mime: "image/png".into(), tokens: 1200 }]);
        assert!(counter.count_message(&m) >= 1200 + PER_MESSAGE_OVERHEAD);
    }
}

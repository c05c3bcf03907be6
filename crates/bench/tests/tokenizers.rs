//! The counter in use (bpe-openai) against the reference (tiktoken-rs) on every shipped text
//! ([`compactbench_bench::shipped_texts`]: every message of the default scenarios' sessions,
//! seeds 0-2, every message of the replayed transcripts, and every file under bench-data/), in
//! both encodings. The timed comparison is `cargo xtask bench --tokenizers`.

use compactbench_bench::shipped_texts;
use compactbench_tokens::{Bpe, Encoding, TokenCounter};

#[test]
fn bpe_openai_counts_every_shipped_text_as_tiktoken_rs_does() {
    let started = std::time::Instant::now();
    let texts = shipped_texts();
    assert!(texts.len() > 10_000, "the corpus is there: {} texts", texts.len());
    let counts = |encoding: Encoding, bpe: Bpe| -> Vec<u64> {
        let counter = TokenCounter::with_bpe(encoding, bpe);
        texts.iter().map(|t| counter.count_text(&t.text)).collect()
    };
    for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
        // The two implementations on two threads.
        let (fast, reference) = std::thread::scope(|s| {
            let fast = s.spawn(|| counts(encoding, Bpe::BpeOpenai));
            let reference = counts(encoding, Bpe::TiktokenRs);
            (fast.join().expect("bpe-openai counts"), reference)
        });
        let wrong: Vec<String> = texts
            .iter()
            .zip(fast.iter().zip(&reference))
            .filter(|(_, (a, b))| a != b)
            .map(|(t, (a, b))| format!("{}: bpe-openai {a}, tiktoken-rs {b}", t.name))
            .collect();
        assert!(wrong.is_empty(), "{encoding:?}: {} of {} texts differ:\n{}", wrong.len(), texts.len(), wrong.join("\n"));
    }
    eprintln!("{} texts counted alike in both encodings in {:.1}s", texts.len(), started.elapsed().as_secs_f64());
}

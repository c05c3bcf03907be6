//! bpe-openai against tiktoken-rs on every shipped text ([`compactbench_bench::shipped_texts`]):
//! token counts in o200k_base and cl100k_base (mismatches listed; there must be none) and the
//! time of each on one thread, best of 3, per kind of text. Run by `cargo xtask bench
//! --tokenizers` (`cargo run --release -p compactbench-bench --example tokenizers`).

use std::time::{Duration, Instant};

use compactbench_bench::{shipped_texts, Origin, Text};
use compactbench_tokens::{Bpe, Encoding};

const ROUNDS: usize = 3;

/// Counts of `texts` by `bpe` and the fastest of [`ROUNDS`] passes. Each pass runs on a
/// thread of its own: bpe-openai's piece memo is per thread, so every pass starts with it
/// empty (as a run does) rather than answering from the previous pass.
fn timed(bpe: Bpe, encoding: Encoding, texts: &[&Text]) -> (Vec<u64>, Duration) {
    let mut best = Duration::MAX;
    let mut counts = Vec::new();
    for _ in 0..ROUNDS {
        let (pass, took) = std::thread::scope(|s| {
            s.spawn(|| {
                let started = Instant::now();
                let counts: Vec<u64> = texts.iter().map(|t| bpe.count(encoding, &t.text)).collect();
                (counts, started.elapsed())
            })
            .join()
            .expect("counting does not panic")
        });
        counts = pass;
        best = best.min(took);
    }
    (counts, best)
}

fn main() {
    let started = Instant::now();
    let texts = shipped_texts();
    println!("{} distinct shipped texts, gathered in {:.1}s; one thread, best of {ROUNDS}", texts.len(), started.elapsed().as_secs_f64());
    // Load every encoder before timing.
    for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
        for bpe in [Bpe::BpeOpenai, Bpe::TiktokenRs] {
            let started = Instant::now();
            bpe.count(encoding, "warm up");
            println!("{} {} loaded in {:.0} ms", bpe.as_str(), encoding.as_str(), started.elapsed().as_secs_f64() * 1e3);
        }
    }
    let kinds = [
        ("default scenario messages, seeds 0-2", Origin::Session),
        ("replayed transcript messages", Origin::Replay),
        ("bench-data files, whole", Origin::File),
    ];
    let mut mismatches = 0;
    println!("\n| encoding | texts | MB | tokens | tiktoken-rs | bpe-openai | speed-up | mismatches |\n|---|---|---:|---:|---:|---:|---:|---:|");
    for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
        let mut total = (0, 0.0, 0, Duration::ZERO, Duration::ZERO, 0);
        for (label, origin) in kinds {
            let of: Vec<&Text> = texts.iter().filter(|t| t.origin == origin).collect();
            let (reference, t_ref) = timed(Bpe::TiktokenRs, encoding, &of);
            let (counts, t_bpe) = timed(Bpe::BpeOpenai, encoding, &of);
            let wrong: Vec<_> = of.iter().zip(reference.iter().zip(&counts)).filter(|(_, (a, b))| a != b).collect();
            for (t, (a, b)) in &wrong {
                eprintln!("{} mismatch in {}: tiktoken-rs {a}, bpe-openai {b}", encoding.as_str(), t.name);
            }
            let mb = of.iter().map(|t| t.text.len()).sum::<usize>() as f64 / 1e6;
            let tokens = reference.iter().sum::<u64>();
            row(encoding, &format!("{} {label}", of.len()), mb, tokens, t_ref, t_bpe, wrong.len());
            total = (total.0 + of.len(), total.1 + mb, total.2 + tokens, total.3 + t_ref, total.4 + t_bpe, total.5 + wrong.len());
        }
        row(encoding, &format!("**{} all**", total.0), total.1, total.2, total.3, total.4, total.5);
        mismatches += total.5;
    }
    if mismatches > 0 {
        eprintln!("{mismatches} mismatching counts");
        std::process::exit(1);
    }
}

fn row(encoding: Encoding, texts: &str, mb: f64, tokens: u64, t_ref: Duration, t_bpe: Duration, wrong: usize) {
    println!(
        "| {} | {texts} | {mb:.1} | {tokens} | {:.3} s | {:.3} s | {:.2}x | {wrong} |",
        encoding.as_str(),
        t_ref.as_secs_f64(),
        t_bpe.as_secs_f64(),
        t_ref.as_secs_f64() / t_bpe.as_secs_f64()
    );
}

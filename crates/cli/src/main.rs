//! The `compactbench` command.

mod cells;
mod journal;
mod merge;
mod shard;
mod summarizer;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The eval allocates and frees many short-lived strings and vectors per request from two
/// threads; with glibc's allocator that was a third of the run's CPU time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};
use compactbench_core::request::Rule;
use compactbench_core::{Fidelity, Strategy};
use compactbench_eval::drive::{run, Env, RunOptions};
use compactbench_eval::generate::generate;
use compactbench_eval::generate::Session;
use compactbench_eval::matrix::{run_matrix_skipping, SummarizerFactory};
use compactbench_eval::results::RunResult;
use compactbench_eval::scenario::{load_dir, Scenario};
use compactbench_eval::variant;
use compactbench_report::StrategyMeta;
use compactbench_summarize::{Extractive, Null, Oracle, PromptFollowing};
use compactbench_tokens::{Encoding, TokenCounter};
use indicatif::{ProgressBar, ProgressStyle};

/// Which compaction design keeps what the agent still needs, at what cost, with a valid request?
#[derive(Parser)]
#[command(name = "compactbench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
#[allow(clippy::large_enum_variant, reason = "parsed once per process; boxing would only obscure the clap fields")]
enum Command {
    /// Run strategies over scenarios and write reports/<run>/{results.csv,results.json,report.md,report.html}.
    Eval {
        /// Strategy id to run (repeatable); default: every registered strategy.
        #[arg(long = "strategy", value_name = "ID")]
        strategies: Vec<String>,
        /// Scenario name to run (repeatable); default: every scenario in --scenarios.
        #[arg(long = "scenario", value_name = "NAME")]
        scenarios: Vec<String>,
        /// Seeds per scenario (seeds 0..N).
        #[arg(long, default_value_t = 1)]
        seeds: u64,
        /// Output directory.
        #[arg(long, default_value = "reports/latest")]
        out: PathBuf,
        /// Worker threads (default: all cores). Results do not depend on it.
        #[arg(long)]
        jobs: Option<usize>,
        /// Skip the null and oracle summarizer bounds and the prompt-following `prompted`
        /// summarizer (run by default for every strategy that calls its summarizer).
        #[arg(long)]
        no_bounds: bool,
        /// Also run this strategy with subagent delegation of the scenarios' exploration spans
        /// (rows `<id>+delegate`; repeatable). Ignored for strategies not selected.
        #[arg(long = "delegate", value_name = "ID", default_values_t = ["pi".to_owned(), "codex".to_owned(), "claude-code".to_owned()])]
        delegate: Vec<String>,
        /// Run no delegation rows.
        #[arg(long)]
        no_delegation: bool,
        /// Also run this strategy on each session in its harness's own text chat shape, where it
        /// declares one (today Aider: edits as SEARCH/REPLACE text, tool output as user
        /// messages, no tool calls); rows `<id>+text`; repeatable. Ignored for strategies not
        /// selected.
        #[arg(long = "text-chat", value_name = "ID", default_values_t = ["aider".to_owned()])]
        text_chat: Vec<String>,
        /// Run no text-chat rows.
        #[arg(long)]
        no_text_chat: bool,
        /// Resume an interrupted eval into the same --out: reuse the finished cells (strategy,
        /// scenario, seed, summarizer, delegation, text chat) journaled in <out>/cells.jsonl and run only
        /// the rest; the reports come out byte for byte as an uninterrupted run's. Refused when
        /// the configuration differs (flags, scenario contents, a rebuilt binary). Every eval
        /// journals its cells there and deletes the journal once its reports are written;
        /// without --resume an old journal is discarded.
        #[arg(long)]
        resume: bool,
        /// Run only shard I of N (1-based: 1/3, 2/3, 3/3) of the matrix's cells, to split an
        /// eval across machines (from a 0-based index such as JOB_COMPLETION_INDEX, pass
        /// index + 1). A cell's shard is a stable hash of its scenario, seed and strategy, so
        /// every machine makes the same split whatever its cores or --jobs. A shard writes no
        /// reports: it keeps its journal, <out>/cells.jsonl, which `compactbench merge` joins
        /// with the other shards' into the reports of one run. Each shard runs the bounds of
        /// every strategy (only the merge can tell which strategies summarized). --resume
        /// continues a shard; the shards' summary caches copied into one folder serve a rerun
        /// without the model.
        #[arg(long, value_name = "I/N")]
        shard: Option<shard::Shard>,
        #[command(flatten)]
        summarizer: summarizer::SummarizerArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Join the output folders of `eval --shard I/N` (their cells.jsonl journals) into the
    /// reports of one run: results.json, results.csv, requests.csv and report.md byte for byte
    /// those of the whole matrix run on one machine (and report.html and timing.md). Refuses
    /// shards of different matrices (flags, scenarios, seeds, summarizer), missing cells (a
    /// shard not given or not finished) and the same cell with different results.
    Merge {
        /// The shards' output folders (each shard's --out), in any order.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        /// Output directory.
        #[arg(long, default_value = "reports/latest")]
        out: PathBuf,
        /// The scenarios the shards ran, to describe them in the reports (checked against
        /// the shards' journals): the same --scenarios, --suite, --transcript and
        /// --session-scale as the shards.
        #[command(flatten)]
        source: ScenarioSource,
    },
    /// List registered strategies and available scenarios.
    List {
        #[command(flatten)]
        common: Common,
    },
    /// Import a recorded transcript: print what it holds, and optionally write a replay scenario.
    Import {
        /// The transcript file.
        file: PathBuf,
        /// Its format: auto, claude-code, codex, pi, openhands, swe-agent.
        #[arg(long, default_value = "auto")]
        format: String,
        /// Skip malformed lines (and count them) instead of failing on the first.
        #[arg(long)]
        lenient: bool,
        /// OpenHands only: the row of a multi-row output.jsonl.
        #[arg(long, default_value_t = 0)]
        row: usize,
        /// Write a replay scenario (TOML) to this path, pointing at the transcript.
        #[arg(long, value_name = "PATH")]
        scenario: Option<PathBuf>,
    },
    /// Compare two runs: per strategy and scenario, what changed (tokens, retention,
    /// violations, compactions), as a Markdown table on stdout.
    Report {
        /// The two runs to compare: run folders (holding results.json) or results.json files.
        #[arg(long, num_args = 2, value_names = ["RUN_A", "RUN_B"], required = true)]
        compare: Vec<PathBuf>,
    },
    /// The tokenize-once floor of an eval: generate the scenarios' sessions and tokenize each
    /// unique message once, on all cores; prints the seconds it took (`cargo xtask bench` sets
    /// it beside the eval's own time).
    Floor {
        /// Seeds per scenario, as for eval.
        #[arg(long, default_value_t = 1)]
        seeds: u64,
        #[command(flatten)]
        common: Common,
    },
    /// Show one request of one run: its messages with roles, origins and exact token sizes.
    Inspect {
        /// Strategy id.
        #[arg(long)]
        strategy: String,
        /// Scenario name.
        #[arg(long)]
        scenario: String,
        /// Request index (from 0).
        #[arg(long)]
        request: u32,
        /// Seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(clap::Args)]
struct Common {
    #[command(flatten)]
    source: ScenarioSource,
    /// Tokenizer for exact counts: o200k_base or cl100k_base.
    #[arg(long, default_value = "o200k_base")]
    encoding: String,
}

/// Where the scenarios come from (also what `merge` needs to rebuild the shards' reports).
#[derive(clap::Args)]
struct ScenarioSource {
    /// Folder of scenario TOML files.
    #[arg(long = "scenarios", default_value = "scenarios", value_name = "DIR")]
    scenarios_dir: PathBuf,
    /// A named suite: the scenarios in that subfolder of --scenarios (e.g. `real`, the replays
    /// of recorded transcripts).
    #[arg(long, value_name = "NAME")]
    suite: Option<String>,
    /// Replay this transcript instead of the scenario files (format detected; repeatable).
    #[arg(long = "transcript", value_name = "FILE")]
    transcripts: Vec<PathBuf>,
    /// Multiply every generated session's length (its user turns) by K, facts and windows
    /// unchanged: how the run's cost grows with session length (`cargo xtask bench`).
    #[arg(long, value_name = "K", default_value_t = 1)]
    session_scale: u32,
}

impl Common {
    fn counter(&self) -> Result<TokenCounter> {
        match Encoding::parse(&self.encoding) {
            Some(e) => Ok(TokenCounter::new(e)),
            None => bail!("unknown --encoding {:?}: expected o200k_base or cl100k_base", self.encoding),
        }
    }
}

impl ScenarioSource {
    fn scenarios(&self) -> Result<Vec<Scenario>> {
        if !self.transcripts.is_empty() {
            let options = compactbench_import::Options::default();
            return self.transcripts.iter().map(|t| Ok(Scenario::from_transcript(t, &options)?)).collect();
        }
        if self.session_scale == 0 {
            bail!("--session-scale must be at least 1");
        }
        let dir = self.dir();
        if !dir.is_dir() {
            // The default is relative: a run from outside the repository finds no folder.
            bail!(
                "no scenario folder at {} (run from the repository root, or pass --scenarios DIR{})",
                dir.display(),
                if self.suite.is_some() { " with a --suite subfolder that exists" } else { "" }
            );
        }
        let mut scenarios = load_dir(&dir)?;
        for sc in &mut scenarios {
            sc.session.turns *= self.session_scale;
        }
        Ok(scenarios)
    }

    fn dir(&self) -> PathBuf {
        match &self.suite {
            Some(suite) => self.scenarios_dir.join(suite),
            None => self.scenarios_dir.clone(),
        }
    }
}

fn select_strategies(ids: &[String]) -> Result<Vec<Box<dyn Strategy>>> {
    let all = compactbench_registry::all();
    if ids.is_empty() {
        return Ok(all);
    }
    let known: Vec<String> = all.iter().map(|s| s.info().id.clone()).collect();
    let mut out = Vec::new();
    for id in ids {
        match compactbench_registry::find(id) {
            Some(s) => out.push(s),
            None => bail!("unknown strategy {id:?}; known: {}", known.join(", ")),
        }
    }
    Ok(out)
}

/// The selected strategies whose ids `ids` names (a variant's rows: `--delegate`,
/// `--text-chat`), fresh from the registry.
fn chosen(strategies: &[Box<dyn Strategy>], ids: &[String]) -> Vec<Box<dyn Strategy>> {
    strategies.iter().filter(|s| ids.contains(&s.info().id)).map(|s| compactbench_registry::find(&s.info().id).expect("from the registry")).collect()
}

/// Refuses a `--text-chat` id that names no strategy or one whose harness has no text chat
/// shape of its own (`Strategy::text_chat`), rather than failing mid-run.
fn check_text_chat(ids: &[String]) -> Result<()> {
    let declaring = || {
        let all = compactbench_registry::all();
        all.iter().filter(|s| s.text_chat().is_some()).map(|s| s.info().id.clone()).collect::<Vec<_>>().join(", ")
    };
    for id in ids {
        match compactbench_registry::find(id) {
            None => bail!("--text-chat {id:?}: unknown strategy; strategies with a text chat shape: {}", declaring()),
            Some(s) if s.text_chat().is_none() => {
                bail!("--text-chat {id}: {id} declares no text chat shape of its own; strategies that do: {}", declaring())
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn select_scenarios(all: Vec<Scenario>, names: &[String], dir: &Path) -> Result<Vec<Scenario>> {
    if names.is_empty() {
        return Ok(all);
    }
    let mut out = Vec::new();
    for n in names {
        match all.iter().find(|s| &s.name == n) {
            Some(s) => out.push(s.clone()),
            None => bail!(
                "unknown scenario {n:?} in {}; known: {}",
                dir.display(),
                all.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
            ),
        }
    }
    Ok(out)
}

fn meta(s: &dyn Strategy) -> StrategyMeta {
    let i = s.info();
    StrategyMeta {
        id: i.id.clone(),
        source: i.source.clone(),
        fidelity: match i.fidelity {
            Fidelity::Source => "source",
            Fidelity::Modelled => "modelled",
            Fidelity::Baseline => "baseline",
        },
        summary: i.summary.clone(),
        agreement: agreement(&i.id),
        check: compactbench_fidelity::checks::describe(&i.id),
        violation_notes: Rule::ALL.iter().filter_map(|r| s.explain_violation(r.as_str()).map(|n| (r.as_str(), n.to_owned()))).collect(),
    }
}

/// The measured agreement of strategy `id` with its original, from the committed fidelity
/// report (`cargo xtask fidelity` writes it).
fn agreement(id: &str) -> Option<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    compactbench_fidelity::report::agreement_of(&root, &root.join("reports/fidelity"), id)
}

#[allow(clippy::too_many_arguments)]
fn eval(
    strategies: &[String],
    names: &[String],
    seeds: u64,
    out: &Path,
    jobs: Option<usize>,
    bounds: bool,
    delegate: &[String],
    text_chat: &[String],
    resume: bool,
    shard: Option<shard::Shard>,
    summarizer: &summarizer::SummarizerArgs,
    common: &Common,
) -> Result<()> {
    if seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    let strategies = select_strategies(strategies)?;
    let scenarios = select_scenarios(common.source.scenarios()?, names, &common.source.dir())?;
    let counter = common.counter()?;
    let started = Instant::now();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(jobs.unwrap_or(0)).build()?;
    let primary = summarizer::Primary::new(summarizer, &counter)?;
    let schedule = primary.schedule(summarizer);
    let delegating = chosen(&strategies, delegate);
    check_text_chat(text_chat)?;
    let texting = chosen(&strategies, text_chat);
    let ids = |strategies: &[Box<dyn Strategy>]| strategies.iter().map(|s| s.info().id.clone()).collect();
    let config = journal::Config {
        strategies: ids(&strategies),
        scenarios: &scenarios,
        seeds,
        bounds,
        delegate: ids(&delegating),
        text_chat: ids(&texting),
        encoding: &common.encoding,
        summarizer: summarizer.settings(&primary),
        shard,
    };
    let (journal, mut runs) = if resume { journal::Journal::resume(out, &config)? } else { (journal::Journal::create(out, &config)?, Vec::new()) };
    let reused = runs.len();
    if resume && reused > 0 {
        eprintln!("resuming: {reused} finished runs reused from {}", out.join(journal::FILE).display());
    }
    let done: HashSet<(String, String, u64, String)> =
        runs.iter().map(|r| (r.scenario.clone(), r.strategy.clone(), r.seed, r.summarizer.clone())).collect();
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs {msg}").expect("valid template"),
    );
    // Where stderr is not a terminal (CI, a log file) the bar draws nothing: print a plain
    // progress line every few seconds instead.
    let plain = !std::io::stderr().is_terminal();
    let last_line = std::sync::Mutex::new(Instant::now());
    let tick = |r: &RunResult| {
        journal.record(r);
        bar.set_message(format!("{} on {} ({})", r.strategy, r.scenario, r.summarizer));
        bar.inc(1);
        if plain {
            let mut last = last_line.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let (pos, len) = (bar.position(), bar.length().unwrap_or(0));
            if last.elapsed() >= Duration::from_secs(5) || pos == len {
                eprintln!("eval: {pos}/{len} runs, {:.0}s elapsed, about {:.0}s left", started.elapsed().as_secs_f64(), bar.eta().as_secs_f64());
                *last = Instant::now();
            }
        }
    };
    // One section of the matrix (strategies under one summarizer and one set of options),
    // without the cells the journal already holds.
    let section = |strategies: &[Box<dyn Strategy>], factory: &SummarizerFactory<'_>, options: RunOptions<'_>, name: &str| {
        let run_id = |id: &str| variant::run_id(id, options.aider_chat, options.delegate);
        let mine = |scenario: &str, id: &str, seed: u64| shard.is_none_or(|s| s.owns(scenario, &run_id(id), seed));
        let reused = |scenario: &str, id: &str, seed: u64| done.contains(&(scenario.to_owned(), run_id(id), seed, name.to_owned()));
        let skip = |scenario: &str, id: &str, seed: u64| !mine(scenario, id, seed) || reused(scenario, id, seed);
        let cells = scenarios.iter().flat_map(|sc| (0..seeds).flat_map(move |seed| strategies.iter().map(move |st| (sc.name.as_str(), seed, st.info().id.as_str()))));
        let owned: Vec<_> = cells.filter(|&(sc, seed, id)| mine(sc, id, seed)).collect();
        bar.inc_length(owned.len() as u64);
        let reused = owned.iter().filter(|&&(sc, seed, id)| reused(sc, id, seed)).count() as u64;
        if reused > 0 {
            bar.inc(reused);
            // Reused cells took no time: estimate the rest from the runs to come.
            bar.reset_eta();
        }
        pool.install(|| run_matrix_skipping(strategies, &scenarios, seeds, &counter, factory, options, schedule, &skip, &tick))
    };
    let extractive: &SummarizerFactory<'_> = &|session| primary.for_session(session);
    runs.extend(section(&strategies, extractive, RunOptions { judge: primary.judge(), ..Default::default() }, primary.name()));
    // Delegation rows for the chosen strategies, on the same sessions.
    if !delegating.is_empty() {
        runs.extend(section(&delegating, extractive, RunOptions { delegate: true, judge: primary.judge(), ..Default::default() }, primary.name()));
    }
    // Rows on the sessions in Aider's chat shape for the chosen strategies.
    if !texting.is_empty() {
        runs.extend(section(&texting, extractive, RunOptions { aider_chat: true, judge: primary.judge(), ..Default::default() }, primary.name()));
    }
    if bounds {
        // Bounds only mean something for strategies that called the summarizer. A shard holds
        // a share of each strategy's runs, so it cannot tell: it runs every strategy's bounds,
        // and merge drops those of strategies that never called it.
        let calling = cells::summarizing(&runs, primary.name());
        let summarizing: Vec<Box<dyn Strategy>> = strategies
            .iter()
            .filter(|s| shard.is_some() || calling.contains(&s.info().id))
            .map(|s| compactbench_registry::find(&s.info().id).expect("selected from the registry"))
            .collect();
        let needles = |session: &Session| session.facts.iter().map(|f| f.needle.clone()).collect();
        let null: &SummarizerFactory<'_> = &|session: &Session| Box::new(Null::new(primary.for_session(session), needles(session)));
        let oracle: &SummarizerFactory<'_> = &|session: &Session| {
            Box::new(Oracle::new(primary.for_session(session), needles(session), primary.counter()))
        };
        // An offline summarizer that writes the sections the strategy's own prompt asks for.
        let prompted: &SummarizerFactory<'_> = &|_: &Session| Box::new(PromptFollowing::new(primary.counter()));
        for (factory, name) in [null, oracle, prompted].into_iter().zip(cells::BOUNDS) {
            runs.extend(section(&summarizing, factory, RunOptions::default(), name));
        }
    }
    bar.finish_and_clear();
    // A shard's output is its journal, which merge reads; only a whole run writes reports.
    if shard.is_none() {
        let phases = [("generate sessions and run the matrix", started.elapsed())];
        write_reports(out, &scenarios, &strategies, &mut runs, primary.name(), &phases)?;
        journal.finish();
    }
    if let Some(c) = primary.cache_stats() {
        eprintln!("summary cache: {} calls served from cache, {} sent to the model", c.hits, c.misses);
    }
    let (misses, hits) = counter.stats();
    // The tokenize-once floor of this run: BPE time of the run's one memo (each unique text
    // once; the summarizers count through clones of `counter`), spread over the pool's threads.
    let bpe = counter.bpe_time();
    eprintln!(
        "{} runs{} in {:.1}s ({} unique messages tokenized, {} cache hits, tokenize-once floor {:.2}s on {} threads{}){}",
        runs.len(),
        if reused > 0 { format!(" ({reused} reused)") } else { String::new() },
        started.elapsed().as_secs_f64(),
        misses,
        hits,
        bpe.as_secs_f64() / pool.current_num_threads() as f64,
        pool.current_num_threads(),
        peak_rss_mib().map(|m| format!(", peak RSS {m:.0} MiB")).unwrap_or_default(),
        match shard {
            Some(shard) => format!("; shard {shard} journaled in {}: join the {} shards with `compactbench merge`", out.join(journal::FILE).display(), shard.count()),
            None => format!("; wrote {}", out.join("report.md").display()),
        }
    );
    Ok(())
}

/// Sorts `runs` into the one order of every report and writes the reports into `out`: the end
/// of both an eval and a merge, so the two write the same bytes.
fn write_reports(
    out: &Path,
    scenarios: &[Scenario],
    strategies: &[Box<dyn Strategy>],
    runs: &mut [RunResult],
    primary: &str,
    phases: &[(&'static str, Duration)],
) -> Result<()> {
    let scenario_names: Vec<&str> = scenarios.iter().map(|s| s.name.as_str()).collect();
    let strategy_ids: Vec<&str> = strategies.iter().map(|s| s.info().id.as_str()).collect();
    cells::sort(runs, &scenario_names, &strategy_ids, primary);
    let meta: Vec<StrategyMeta> = strategies.iter().map(|s| meta(s.as_ref())).collect();
    compactbench_report::write(out, scenarios, &meta, runs, primary, phases).with_context(|| format!("writing reports to {}", out.display()))
}

/// Peak resident memory of this process so far (Linux `VmHWM`), in MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: f64 = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib / 1024.0)
}

fn floor(seeds: u64, common: &Common) -> Result<()> {
    use rayon::prelude::*;
    let scenarios = common.source.scenarios()?;
    let sessions: Vec<Session> = scenarios.par_iter().flat_map(|sc| (0..seeds).into_par_iter().map(move |seed| compactbench_eval::generate::generate(sc, seed))).collect();
    let mut unique = HashSet::new();
    let mut texts = Vec::new();
    for s in &sessions {
        for m in std::iter::once(&s.system).chain(s.steps.iter().map(|st| st.message())) {
            let text = m.searchable_text();
            if unique.insert(text.clone()) {
                texts.push(text);
            }
        }
    }
    let counter = common.counter()?;
    let started = Instant::now();
    let tokens: u64 = texts.par_iter().map(|t| counter.count_text(t)).sum();
    let seconds = started.elapsed().as_secs_f64();
    println!("floor: {} unique messages, {tokens} tokens tokenized once in {seconds:.2}s", texts.len());
    Ok(())
}

fn list(common: &Common) -> Result<()> {
    println!("strategies:");
    for s in compactbench_registry::all() {
        let i = s.info();
        let check = compactbench_fidelity::checks::describe(&i.id).map(|c| format!(" [check: {c}]")).unwrap_or_default();
        let measured = agreement(&i.id).map(|a| format!(" [agreement with the original: {a}]")).unwrap_or_default();
        println!("  {:<28} {:<9} {}{check}{measured}", i.id, format!("{:?}", i.fidelity).to_lowercase(), i.summary);
    }
    println!("scenarios ({}):", common.source.dir().display());
    for s in common.source.scenarios()? {
        println!("  {:<28} window {:>7}  {}", s.name, s.model.window, s.description);
    }
    Ok(())
}

fn inspect(strategy: &str, scenario: &str, request: u32, seed: u64, common: &Common) -> Result<()> {
    let strategy = select_strategies(&[strategy.to_owned()])?.remove(0);
    let scenario = select_scenarios(common.source.scenarios()?, &[scenario.to_owned()], &common.source.dir())?.remove(0);
    let counter = common.counter()?;
    let summarizer = Extractive::new(TokenCounter::new(counter.encoding()));
    let session = generate(&scenario, seed);
    if request as usize >= session.requests() {
        bail!("--request {request} is out of range: the session makes {} requests (0..{})", session.requests(), session.requests());
    }
    let env = Env { counter: &counter, summarizer: &summarizer };
    run(strategy.as_ref(), &scenario, &session, seed, &env, |snap| {
        if snap.index != request {
            return;
        }
        let total: u64 = snap.tokens.iter().sum();
        println!("request {request} of {} on {} (seed {seed}): {} messages, {total} tokens", strategy.info().id, scenario.name, snap.view.len());
        for (vm, t) in snap.view.messages.iter().zip(snap.tokens) {
            let text = vm.message.searchable_text().replace('\n', " ⏎ ");
            let short: String = text.chars().take(90).collect();
            println!("{:>7}  {:<9} {:<22} {short}", t, vm.message.role.as_str(), format!("{:?}", vm.origin));
        }
    });
    Ok(())
}

fn import(file: &Path, format: &str, lenient: bool, row: usize, scenario: Option<&Path>) -> Result<()> {
    let format = match format {
        "auto" => None,
        name => Some(name.parse().map_err(|e: String| anyhow::anyhow!("--format: {e}"))?),
    };
    let options = compactbench_import::Options { format, lenient, row };
    let imported = compactbench_import::import(file, &options)?;
    let s = &imported.stats;
    println!("{}: {} transcript", file.display(), imported.format.name());
    println!("  lines {}  messages {}  tool calls {}  paired {}  unpaired calls {}  unpaired results {}", s.lines, s.messages, s.tool_calls, s.tool_pairs, s.unpaired_calls, s.unpaired_results);
    println!("  sidechain lines {}  skipped lines {}  reasoning parts {}  opaque reasoning bytes {}  media {}", s.sidechain_lines, s.skipped_lines, s.reasoning_parts, s.opaque_reasoning_bytes, s.media_parts);
    println!("  recorded compactions {}", imported.recorded.len());
    for r in &imported.recorded {
        println!(
            "    at message {}: trigger {}, tokens before {}, first kept message {}",
            r.message_index,
            r.trigger.as_deref().unwrap_or("-"),
            r.tokens_before.map_or("-".to_owned(), |t| t.to_string()),
            r.first_kept_message.map_or("-".to_owned(), |m| m.to_string())
        );
    }
    if let Some(out) = scenario {
        let built = Scenario::from_transcript(file, &options)?;
        let dir = out.parent().unwrap_or(Path::new("."));
        let transcript = relative(file, dir);
        let m = &built.model;
        let text = format!(
            "# {}\nname = \"{}\"\ndescription = \"{}\"\n\n[model]\nname = \"{}\"\nwindow = {}\nmax_output = {}\nprovider = \"{}\"\npricing = {{ input = {}, cached_input = {}, output = {} }}\n\n[replay]\ntranscript = \"{}\"\nformat = \"{}\"\nrow = {}\n",
            built.description, built.name, built.description, m.name, m.window, m.max_output, m.provider.as_str(), m.pricing.input, m.pricing.cached_input, m.pricing.output,
            transcript.display(), imported.format.name(), row
        );
        std::fs::write(out, text).with_context(|| format!("writing {}", out.display()))?;
        println!("wrote {}", out.display());
    }
    Ok(())
}

/// `path` relative to `dir` when both are relative to the same place (`../` steps up as
/// needed); otherwise `path` made absolute.
fn relative(path: &Path, dir: &Path) -> PathBuf {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    let (path, dir) = (abs(path), abs(dir));
    let common = path.components().zip(dir.components()).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in dir.components().skip(common) {
        out.push("..");
    }
    for c in path.components().skip(common) {
        out.push(c);
    }
    out
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Eval { strategies, scenarios, seeds, out, jobs, no_bounds, delegate, no_delegation, text_chat, no_text_chat, resume, shard, summarizer, common } => {
            let delegate = if no_delegation { Vec::new() } else { delegate };
            let text_chat = if no_text_chat { Vec::new() } else { text_chat };
            eval(&strategies, &scenarios, seeds, &out, jobs, !no_bounds, &delegate, &text_chat, resume, shard, &summarizer, &common)
        }
        Command::Merge { dirs, out, source } => merge::merge(&dirs, &out, &source),
        Command::List { common } => list(&common),
        Command::Import { file, format, lenient, row, scenario } => import(&file, &format, lenient, row, scenario.as_deref()),
        Command::Report { compare } => {
            print!("{}", compactbench_report::compare(&compare[0], &compare[1])?);
            Ok(())
        }
        Command::Floor { seeds, common } => floor(seeds, &common),
        Command::Inspect { strategy, scenario, request, seed, common } => inspect(&strategy, &scenario, request, seed, &common),
    }
}

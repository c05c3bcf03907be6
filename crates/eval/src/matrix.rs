//! The strategy x scenario x seed matrix, run in parallel.

use compactbench_core::{Strategy, Summarizer};
use compactbench_tokens::TokenCounter;
use rayon::prelude::*;

use crate::drive::{run_with, Env, RunOptions};
use crate::generate::{generate, Session};
use crate::results::RunResult;
use crate::scenario::Scenario;

/// A generated session to replay: scenario index, seed, the session and its summarizer.
type SessionJob = (usize, u64, Session, Box<dyn Summarizer>);

/// Builds the summarizer for one session (the oracle bound needs the session's needles).
pub type SummarizerFactory<'a> = dyn Fn(&Session) -> Box<dyn Summarizer> + Sync + 'a;

/// Says whether a cell is already done (by scenario name, strategy id, seed), so the matrix
/// leaves it out: a resumed eval skips the cells it journaled.
pub type Skip<'a> = dyn Fn(&str, &str, u64) -> bool + Sync + 'a;

/// Runs every strategy on every scenario for seeds `0..seeds`, on the current rayon pool.
/// `tick` is called once per finished run (from worker threads) for progress display.
/// Results come back ordered by scenario, then strategy, then seed, whatever the thread
/// count, so output is independent of `--jobs`.
pub fn run_matrix(
    strategies: &[Box<dyn Strategy>],
    scenarios: &[Scenario],
    seeds: u64,
    counter: &TokenCounter,
    summarizer: &SummarizerFactory<'_>,
    options: RunOptions<'_>,
    tick: &(dyn Fn(&RunResult) + Sync),
) -> Vec<RunResult> {
    run_matrix_skipping(strategies, scenarios, seeds, counter, summarizer, options, &|_, _, _| false, tick)
}

/// [`run_matrix`] without the cells `skip` names (and without generating a session whose
/// cells are all skipped). A cell's result does not depend on which others run.
#[allow(clippy::too_many_arguments)]
pub fn run_matrix_skipping(
    strategies: &[Box<dyn Strategy>],
    scenarios: &[Scenario],
    seeds: u64,
    counter: &TokenCounter,
    summarizer: &SummarizerFactory<'_>,
    options: RunOptions<'_>,
    skip: &Skip<'_>,
    tick: &(dyn Fn(&RunResult) + Sync),
) -> Vec<RunResult> {
    let todo = |sc: &Scenario, seed: u64, st: &dyn Strategy| !skip(&sc.name, &st.info().id, seed);
    let sessions: Vec<SessionJob> = scenarios
        .par_iter()
        .enumerate()
        .flat_map(|(i, sc)| {
            (0..seeds)
                .into_par_iter()
                .filter(move |seed| strategies.iter().any(|st| todo(sc, *seed, st.as_ref())))
                .map(move |seed| {
                    let session = generate(sc, seed);
                    let s = summarizer(&session);
                    (i, seed, session, s)
                })
        })
        .collect();
    let jobs: Vec<(&SessionJob, &Box<dyn Strategy>)> = dealt(&sessions, rayon::current_num_threads())
        .flat_map(|s| strategies.iter().filter(|st| todo(&scenarios[s.0], s.1, st.as_ref())).map(move |st| (s, st)))
        .collect();
    let mut results: Vec<RunResult> = jobs
        .par_iter()
        .map(|((i, seed, session, summarizer), strategy)| {
            let env = Env { counter, summarizer: summarizer.as_ref() };
            let r = run_with(strategy.as_ref(), &scenarios[*i], session, *seed, &env, options, |_| {});
            tick(&r);
            r
        })
        .collect();
    // `collect` keeps job order: sessions by scenario then seed, strategies inside. Reorder to
    // scenario, strategy, seed.
    let order = |r: &RunResult| {
        let sc = scenarios.iter().position(|s| s.name == r.scenario);
        let st = strategies.iter().position(|s| crate::variant::base(&r.strategy) == s.info().id);
        (sc, st, r.seed)
    };
    results.sort_by_key(order);
    results
}

/// The sessions in the order their runs are laid out for `threads` workers: longest first,
/// dealt round-robin into one contiguous group per worker. Rayon splits the job list into
/// contiguous halves, so each worker starts on sessions of its own (two workers replaying
/// one session at once would both tokenize its new messages) and every group ends with its
/// shortest runs, which are what idle workers steal at the end: a long run left for last
/// kept one core busy alone for seconds.
fn dealt(sessions: &[SessionJob], threads: usize) -> impl Iterator<Item = &SessionJob> {
    let mut longest_first: Vec<&SessionJob> = sessions.iter().collect();
    longest_first.sort_by_key(|s| std::cmp::Reverse(s.2.steps.len()));
    let threads = threads.max(1);
    (0..threads).flat_map(move |t| longest_first.clone().into_iter().skip(t).step_by(threads))
}

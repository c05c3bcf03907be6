//! The strategy x scenario x seed matrix, run in parallel.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use compactbench_core::{Strategy, Summarizer};
use compactbench_tokens::TokenCounter;
use rayon::prelude::*;

use crate::drive::{run_with, Env, RunOptions};
use crate::generate::{generate, Session};
use crate::results::RunResult;
use crate::scenario::Scenario;

/// A generated session to replay: scenario index, seed, the session and, under
/// [`Schedule::Compute`], its summarizer.
type SessionJob = (usize, u64, Session, Option<Box<dyn Summarizer>>);

/// Builds the summarizer for a session's runs (the oracle bound needs the session's needles):
/// once per session under [`Schedule::Compute`] (its runs share it, and with it the memos of
/// the offline summarizers), once per run under [`Schedule::Remote`].
pub type SummarizerFactory<'a> = dyn Fn(&Session) -> Box<dyn Summarizer> + Sync + 'a;

/// How the matrix's runs share the machine. Results never depend on it (nor on the thread
/// count): only how long they take does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Schedule {
    /// Every run on the current rayon pool, one per thread: for summarizers that compute (the
    /// offline ones), where a run never waits.
    #[default]
    Compute,
    /// For summarizers that wait on a model behind a server: up to `max_inflight` runs wait on
    /// the model at once, while at most as many runs as the current rayon pool has threads
    /// compute.
    ///
    /// A run is sequential (each request depends on the summary before it), so the only way to
    /// keep many model calls in flight is many runs in progress. Runs go to `max_inflight` +
    /// pool-size coordinator threads (enough for `max_inflight` to wait while the pool's worth
    /// compute). A thread holds one of pool-size CPU slots while its run computes and gives it
    /// back for the length of each model call, which the summarizer marks with [`waiting`], so
    /// a run waiting on the model holds no CPU. The calls in flight are bounded by the
    /// summarizer itself (the HTTP client's limit, per attempt, so a call sleeping before a
    /// retry holds none). Each run gets its own summarizer from the factory: a session's runs
    /// are in progress at once here, and a fault injector shared by them would number their
    /// calls in arrival order.
    Remote {
        /// Model calls (runs waiting on the model) at once, at least 1.
        max_inflight: usize,
    },
}

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
    run_matrix_skipping(strategies, scenarios, seeds, counter, summarizer, options, Schedule::Compute, &|_, _, _| false, tick)
}

/// [`run_matrix`] without the cells `skip` names (and without generating a session whose
/// cells are all skipped), run as `schedule` says. A cell's result does not depend on which
/// others run.
#[allow(clippy::too_many_arguments)]
pub fn run_matrix_skipping(
    strategies: &[Box<dyn Strategy>],
    scenarios: &[Scenario],
    seeds: u64,
    counter: &TokenCounter,
    summarizer: &SummarizerFactory<'_>,
    options: RunOptions<'_>,
    schedule: Schedule,
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
                    let s = (schedule == Schedule::Compute).then(|| summarizer(&session));
                    (i, seed, session, s)
                })
        })
        .collect();
    let threads = rayon::current_num_threads();
    let mut results: Vec<RunResult> = match schedule {
        Schedule::Compute => {
            let jobs: Vec<(&SessionJob, &Box<dyn Strategy>)> = dealt(&sessions, threads)
                .flat_map(|s| strategies.iter().filter(|st| todo(&scenarios[s.0], s.1, st.as_ref())).map(move |st| (s, st)))
                .collect();
            jobs.par_iter()
                .map(|((i, seed, session, summarizer), strategy)| {
                    let summarizer = summarizer.as_deref().expect("built with the session under Schedule::Compute");
                    let env = Env { counter, summarizer };
                    let r = run_with(strategy.as_ref(), &scenarios[*i], session, *seed, &env, options, |_| {});
                    tick(&r);
                    r
                })
                .collect()
        }
        Schedule::Remote { max_inflight } => {
            // Longest sessions first, so the last runs to finish are short ones.
            let jobs: Vec<(&SessionJob, &Box<dyn Strategy>)> = dealt(&sessions, 1)
                .flat_map(|s| strategies.iter().filter(|st| todo(&scenarios[s.0], s.1, st.as_ref())).map(move |st| (s, st)))
                .collect();
            let cpu = Arc::new(Slots::new(threads));
            let next = AtomicUsize::new(0);
            let done = Mutex::new(Vec::with_capacity(jobs.len()));
            let run_jobs = || {
                CPU.with(|c| *c.borrow_mut() = Some(cpu.clone()));
                while let Some(((i, seed, session, _), strategy)) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let _computing = cpu.take();
                    let summarizer = summarizer(session);
                    let env = Env { counter, summarizer: summarizer.as_ref() };
                    let r = run_with(strategy.as_ref(), &scenarios[*i], session, *seed, &env, options, |_| {});
                    tick(&r);
                    done.lock().unwrap_or_else(PoisonError::into_inner).push(r);
                }
            };
            std::thread::scope(|scope| {
                for _ in 0..(max_inflight.max(1) + threads).min(jobs.len()) {
                    std::thread::Builder::new().name("compactbench-run".into()).spawn_scoped(scope, run_jobs).expect("can start a run thread");
                }
            });
            done.into_inner().unwrap_or_else(PoisonError::into_inner)
        }
    };
    // Job order (`collect` keeps it) or finishing order, not the report's: reorder to scenario,
    // strategy, seed.
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

/// Counting slots: at most `n` holders at once ([`Schedule::Remote`]'s CPU slots).
struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

/// A slot held; given back on drop.
struct Slot<'a>(&'a Slots);

impl Slots {
    fn new(n: usize) -> Slots {
        Slots { free: Mutex::new(n.max(1)), freed: Condvar::new() }
    }

    /// Waits for a free slot and takes it.
    fn take(&self) -> Slot<'_> {
        self.acquire();
        Slot(self)
    }

    fn acquire(&self) {
        let free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        let mut free = self.freed.wait_while(free, |free| *free == 0).unwrap_or_else(PoisonError::into_inner);
        *free -= 1;
    }

    fn release(&self) {
        *self.free.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.freed.notify_one();
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

thread_local! {
    /// The CPU slots of the [`Schedule::Remote`] matrix whose runs this thread runs; taken
    /// while a [`waiting`] call runs.
    static CPU: RefCell<Option<Arc<Slots>>> = const { RefCell::new(None) };
}

/// Runs `call`, a call to a model behind a server, as a wait: in a run of a
/// [`Schedule::Remote`] matrix, the run's CPU slot goes to another run meanwhile and is taken
/// back before `call`'s answer returns. Anywhere else (a [`Schedule::Compute`] matrix, no
/// matrix, a `waiting` call inside another) it only runs `call`. Summarizers that wrap a
/// model client call it around the client, and only there: whatever they compute themselves
/// must hold the slot.
pub fn waiting<T>(call: impl FnOnce() -> T) -> T {
    let Some(slots) = CPU.with(|c| c.borrow_mut().take()) else { return call() };
    slots.release();
    // Taken back (and the thread's slots restored) even if the call panics: the run's own
    // slot guard then gives it back again as it unwinds.
    let _back = Back(slots);
    call()
}

/// The end of a [`waiting`] call: takes a CPU slot again.
struct Back(Arc<Slots>);

impl Drop for Back {
    fn drop(&mut self) {
        self.0.acquire();
        CPU.with(|c| *c.borrow_mut() = Some(self.0.clone()));
    }
}

//! Which summarizer strategies get: the offline extractive one, or a real model behind an
//! OpenAI-compatible server, with a replay cache and optional fault injection.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Result};
use compactbench_core::{Error, Summarizer, Summary, SummaryRequest};
use compactbench_eval::generate::Session;
use compactbench_eval::matrix::{waiting, Schedule};
use compactbench_summarize::{CacheMode, CacheStats, Extractive, FaultKind, Faulty, ReplayCache, Trigger};
use compactbench_summarize_http::{OpenAi, OpenAiConfig};
use compactbench_tokens::TokenCounter;

/// Default of `--max-inflight`: enough to keep a single-GPU serving engine's batch busy, few
/// enough not to queue past the timeout on a small one.
const MAX_INFLIGHT: usize = 16;

#[derive(clap::Args)]
pub(crate) struct SummarizerArgs {
    /// The summarizer strategies call: `extractive` (offline, deterministic) or `openai` (any
    /// OpenAI-compatible chat-completions server: vLLM, llama.cpp server, Ollama).
    #[arg(long, default_value = "extractive", value_parser = ["extractive", "openai"])]
    summarizer: String,
    /// Server base URL (or COMPACTBENCH_OPENAI_BASE_URL), e.g. http://127.0.0.1:8080/v1.
    #[arg(long)]
    openai_base_url: Option<String>,
    /// Model name (or COMPACTBENCH_OPENAI_MODEL).
    #[arg(long)]
    openai_model: Option<String>,
    /// API key (or COMPACTBENCH_OPENAI_API_KEY); many local servers need none.
    #[arg(long)]
    openai_api_key: Option<String>,
    /// Model calls (summaries and --judge questions) in flight at once, whatever --jobs: up to
    /// N runs wait on the model while at most --jobs others compute, and a run waiting holds no
    /// CPU thread. Fill a serving engine with it (vLLM or SGLang batch hundreds of requests);
    /// a llama.cpp server on a CPU answers one at a time, and queued requests spend their
    /// timeout waiting: use 1 there. Results do not depend on it.
    #[arg(long, visible_alias = "openai-concurrency", default_value_t = MAX_INFLIGHT, value_name = "N")]
    max_inflight: usize,
    /// Bound on one summary request, in seconds (a small model on a CPU reading 20k tokens
    /// takes minutes).
    #[arg(long, default_value_t = OpenAiConfig::DEFAULT_TIMEOUT.as_secs(), value_name = "SECS")]
    openai_timeout: u64,
    /// Put the summary system prompt at the start of the user message, for models without a
    /// system role (Gemma).
    #[arg(long)]
    openai_fold_system: bool,
    /// Send at most N as the output cap, whatever a strategy asks for (for small models that
    /// write until the cap; a cut-off summary still reaches the strategy as cut off).
    #[arg(long, value_name = "N")]
    openai_max_tokens: Option<u64>,
    /// Replay cache folder for model summaries (one JSON file per request).
    #[arg(long, default_value = compactbench_summarize::DEFAULT_ROOT)]
    cache_dir: PathBuf,
    /// Serve model summaries only from the cache; a miss is an error (re-report a run without
    /// the model).
    #[arg(long)]
    replay_only: bool,
    /// Model-judged probes: ask the model of the --openai-* flags about each planted fact at
    /// the last request that needs it, and score its answer by needle match (one call per
    /// fact kind due at a request, cached like summaries). Works with either summarizer.
    #[arg(long)]
    judge: bool,
    /// Inject a summarizer fault: KIND[@TRIGGER], KIND one of timeout, http500, empty,
    /// over-cap, garbage; TRIGGER always (default), nth:N or every:N.
    #[arg(long, value_name = "KIND[@TRIGGER]")]
    fault: Option<String>,
}

impl SummarizerArgs {
    /// What of these flags can change a run's result, for the resume journal's configuration.
    pub(crate) fn settings(&self, primary: &Primary) -> serde_json::Value {
        serde_json::json!({
            "name": primary.name(),
            "judge": primary.judge().map(|j| j.name().to_owned()),
            "openai_fold_system": self.openai_fold_system,
            "openai_max_tokens": self.openai_max_tokens,
        })
    }
}

/// The model shared by every run (one HTTP client, one cache). A call to it is a wait: under
/// `Schedule::Remote` the run gives its CPU slot to another meanwhile.
#[derive(Clone)]
struct Shared(Arc<ReplayCache>);

impl Summarizer for Shared {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        waiting(|| self.0.summarize(request))
    }
}

/// The primary summarizer of a run, built from the flags.
pub(crate) struct Primary {
    model: Option<Shared>,
    /// The model client when `--judge` asks for model-judged probes.
    judge: Option<Shared>,
    fault: Option<(FaultKind, Trigger)>,
    name: String,
    /// The run's counter, whose memo every offline summarizer of the run shares with the runner
    /// (see `TokenCounter`): the runner measures each summary call's request, a transcript the
    /// summarizer has just counted, and with two memos every line of it was tokenized twice.
    counter: TokenCounter,
}

impl Primary {
    pub(crate) fn new(args: &SummarizerArgs, counter: &TokenCounter) -> Result<Primary> {
        let fault = match &args.fault {
            None => None,
            Some(spec) => {
                let (kind, trigger) = spec.split_once('@').unwrap_or((spec, "always"));
                let kind: FaultKind = kind.parse().map_err(|e| anyhow::anyhow!("--fault {spec:?}: {e}"))?;
                let trigger: Trigger = trigger.parse().map_err(|e| anyhow::anyhow!("--fault {spec:?}: {e}"))?;
                Some((kind, trigger))
            }
        };
        let summarizes = args.summarizer == "openai";
        if args.replay_only && !summarizes && !args.judge {
            bail!("--replay-only needs --summarizer openai or --judge (the extractive summarizer needs no cache)");
        }
        // One client (and one cache) for summaries and judging alike.
        let client = if summarizes || args.judge { Some(Shared(model_client(args)?)) } else { None };
        let model = client.clone().filter(|_| summarizes);
        let judge = client.filter(|_| args.judge);
        let base = match &model {
            Some(m) => m.name().to_owned(),
            None => "extractive".to_owned(),
        };
        let name = match fault {
            Some((kind, trigger)) => format!("{base}+{kind}@{trigger}"),
            None => base,
        };
        Ok(Primary { model, judge, fault, name, counter: counter.clone() })
    }

    /// A counter sharing the run's memo, for the other offline summarizers.
    pub(crate) fn counter(&self) -> TokenCounter {
        self.counter.clone()
    }

    /// The model that judges, with `--judge`.
    pub(crate) fn judge(&self) -> Option<&dyn Summarizer> {
        self.judge.as_ref().map(|j| j as &dyn Summarizer)
    }

    /// The report name of the summarizer each session gets.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The summarizer for one session's runs, or for one run under `Schedule::Remote` (a fault
    /// injector numbers the calls of the runs that share it).
    pub(crate) fn for_session(&self, _: &Session) -> Box<dyn Summarizer> {
        let inner: Box<dyn Summarizer> = match &self.model {
            Some(m) => Box::new(m.clone()),
            None => Box::new(Extractive::new(self.counter.clone())),
        };
        match self.fault {
            Some((kind, trigger)) => Box::new(Faulty::new(inner, kind, trigger)),
            None => inner,
        }
    }

    /// How the matrix runs: with a model to wait on (summaries or `--judge`), up to
    /// `--max-inflight` runs wait on it at once; otherwise every run computes on the pool.
    pub(crate) fn schedule(&self, args: &SummarizerArgs) -> Schedule {
        if self.model.is_some() || self.judge.is_some() {
            Schedule::Remote { max_inflight: args.max_inflight }
        } else {
            Schedule::Compute
        }
    }

    /// Cache hits and misses, when a model is used.
    pub(crate) fn cache_stats(&self) -> Option<CacheStats> {
        self.model.as_ref().or(self.judge.as_ref()).map(|m| m.0.stats())
    }
}

/// The OpenAI-compatible client of the flags, behind the replay cache.
fn model_client(args: &SummarizerArgs) -> Result<Arc<ReplayCache>> {
    let mut config = OpenAiConfig::resolve(args.openai_base_url.clone(), args.openai_model.clone(), args.openai_api_key.clone())
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    if args.max_inflight == 0 {
        bail!("--max-inflight must be at least 1");
    }
    config.max_concurrency = args.max_inflight;
    config.timeout = std::time::Duration::from_secs(args.openai_timeout);
    config.fold_system = args.openai_fold_system;
    config.max_output_tokens = args.openai_max_tokens;
    let client = OpenAi::new(config).map_err(|e| anyhow::anyhow!("{}", e.message))?;
    let mode = if args.replay_only { CacheMode::ReplayOnly } else { CacheMode::ReadWrite };
    Ok(Arc::new(ReplayCache::with_root(Box::new(client), &args.cache_dir).mode(mode)))
}

//! Real models as summarizers, through any OpenAI-compatible chat-completions server
//! (vLLM, llama.cpp `server`, Ollama, or a hosted API).
//!
//! [`OpenAi`] implements [`compactbench_core::Summarizer`]: each
//! [`SummaryRequest`](compactbench_core::SummaryRequest) becomes one
//! `POST <base>/v1/chat/completions` with
//!
//! - `model`: [`OpenAiConfig::model`];
//! - `messages`: the request's `system` as a system message (left out when empty), then
//!   `user_message()` (transcript, blank line, instructions) as the one user message; with
//!   [`OpenAiConfig::fold_system`], the system prompt opens the user message instead, for
//!   models without a system role;
//! - `max_tokens`: the request's `max_output_tokens`; `temperature`: 0;
//! - `Authorization: Bearer <key>` when an API key is configured (local servers need none).
//!
//! The answer's `choices[0].message.content` is the summary; `usage.prompt_tokens` and
//! `usage.completion_tokens` become the summary's token counts (a server that omits `usage`
//! gets the chars/4 estimate instead, so costs are never silently zero);
//! `finish_reason == "length"` becomes [`StopReason::Length`](compactbench_core::StopReason).
//!
//! # Configuration
//! [`OpenAiConfig::resolve`] takes the three settings from flags when given and otherwise from
//! the environment: [`ENV_BASE_URL`] (`COMPACTBENCH_OPENAI_BASE_URL`), [`ENV_MODEL`]
//! (`COMPACTBENCH_OPENAI_MODEL`), [`ENV_API_KEY`] (`COMPACTBENCH_OPENAI_API_KEY`, optional).
//! The base URL may end in `/v1` or not: `http://localhost:8000` and
//! `http://localhost:8000/v1` both reach `http://localhost:8000/v1/chat/completions`.
//! Bounds (per-attempt timeout, connect timeout, retries, backoff, concurrency) are plain
//! public fields with defaults on [`OpenAiConfig`].
//!
//! # Failure handling
//! - Timeouts, connection failures, HTTP 5xx and HTTP 429 are retried up to
//!   [`OpenAiConfig::max_retries`] times. A 429 or 503 with a `Retry-After` header (seconds or
//!   an HTTP-date) waits what it asks, at most [`OpenAiConfig::max_retry_after`]; otherwise the
//!   wait is exponential, `initial_backoff * 2^attempt` capped at `max_backoff`, less up to
//!   half of it fixed by the request (jitter, so calls that failed together do not come back
//!   together). Other HTTP errors (400, 401, 404, ...) are not retried: sending the same
//!   request again cannot fix them.
//! - Errors map to [`ErrorKind`](compactbench_core::ErrorKind): `Timeout` (the last attempt timed
//!   out), `Transport` (connection, HTTP status, malformed or error JSON body), `EmptySummary`
//!   (no choices, or empty content), `Other` (bad configuration, misuse).
//! - At most [`OpenAiConfig::max_concurrency`] requests are in flight per client, across all
//!   threads that share it: the matrix runs strategies on rayon threads, and a local server
//!   serves a few requests at a time well and many badly. A permit is held for one attempt,
//!   not across backoff sleeps, so a waiting retry does not block other calls.
//!
//! # Sync trait, async client
//! [`Summarizer::summarize`](compactbench_core::Summarizer::summarize) is synchronous (core does
//! no async), and its callers are rayon worker threads, not tokio threads. So each [`OpenAi`]
//! owns a small multi-thread tokio runtime and `block_on`s every call on it. `block_on` runs
//! the call's future on the calling rayon thread while the runtime's worker drives sockets and
//! timers, so any number of rayon threads can block on it at once; the semaphore, not the
//! runtime, bounds concurrency. Async callers can use [`OpenAi::summarize_async`] directly
//! (and must: tokio forbids `block_on` inside a runtime, so the sync method returns an error
//! there instead of panicking).
//!
//! # Reproducibility
//! Temperature 0 is not byte-determinism on batched servers. Wrap the client in
//! `compactbench_summarize::ReplayCache` to record every answer and replay a run without the
//! model; wrap it in `compactbench_summarize::Faulty` to inject faults.
#![deny(missing_docs)]

mod client;
mod config;
mod wire;

pub use client::OpenAi;
pub use config::{OpenAiConfig, ENV_API_KEY, ENV_BASE_URL, ENV_MODEL};

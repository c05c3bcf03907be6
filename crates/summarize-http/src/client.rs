//! The client: one chat-completions call per summary, bounded and retried.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use compactbench_core::{estimate, Error, ErrorKind, StopReason, Summarizer, Summary, SummaryRequest};
use tokio::sync::Semaphore;

use crate::config::OpenAiConfig;
use crate::wire::{ChatRequest, ChatResponse, ErrorBody};

/// Longest piece of a server's error body quoted in an error message.
const MAX_QUOTED_BODY: usize = 300;

/// A summarizer backed by a model behind an OpenAI-compatible chat-completions server.
/// `Send + Sync`: share one per run across threads (the concurrency limit is per client).
pub struct OpenAi {
    config: OpenAiConfig,
    name: String,
    endpoint: String,
    http: reqwest::Client,
    limit: Arc<Semaphore>,
    /// `Option` only so that `Drop` can take it and shut it down without blocking.
    runtime: Option<tokio::runtime::Runtime>,
}

/// One failed attempt, whether trying again could help, and when the server said to.
struct Failure {
    error: Error,
    retryable: bool,
    retry_after: Option<Duration>,
}

impl Failure {
    fn retry(kind: ErrorKind, message: String) -> Failure {
        Failure { error: Error::new(kind, message), retryable: true, retry_after: None }
    }

    fn fatal(kind: ErrorKind, message: String) -> Failure {
        Failure { error: Error::new(kind, message), retryable: false, retry_after: None }
    }
}

impl OpenAi {
    /// A client for `config`. Fails (kind `Other`) on an unusable base URL or when the
    /// runtime or the HTTP client cannot be built; nothing is sent yet.
    pub fn new(config: OpenAiConfig) -> Result<OpenAi, Error> {
        let endpoint = config.endpoint();
        let url = reqwest::Url::parse(&endpoint).map_err(|e| Error::new(ErrorKind::Other, format!("bad base URL {:?}: {e}", config.base_url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Error::new(ErrorKind::Other, format!("bad base URL {:?}: scheme must be http or https", config.base_url)));
        }
        if config.model.trim().is_empty() {
            return Err(Error::new(ErrorKind::Other, "empty model name"));
        }
        // One worker is enough: it only drives sockets and timers; the calls' futures run on
        // the rayon threads that block on them.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("compactbench-openai")
            .enable_all()
            .build()
            .map_err(|e| Error::new(ErrorKind::Other, format!("cannot start the HTTP runtime: {e}")))?;
        // reqwest is built without a bundled crypto provider (see the workspace manifest);
        // install ring once per process. An error means one is installed already: fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder().timeout(config.timeout).connect_timeout(config.connect_timeout);
        // A local server is reached directly even when HTTP(S)_PROXY is set without a
        // NO_PROXY: sending a loopback request to a proxy never reaches the model.
        if is_loopback(&url) {
            builder = builder.no_proxy();
        }
        let http = {
            let _in_runtime = runtime.enter();
            builder.build().map_err(|e| Error::new(ErrorKind::Other, format!("cannot build the HTTP client: {e}")))?
        };
        let limit = Arc::new(Semaphore::new(config.max_concurrency.max(1)));
        // What changes the answer beyond the request is part of the name, so the replay cache
        // (keyed by name and request) never serves an answer sent under other settings.
        let mut name = format!("openai:{}", config.model.trim());
        if let Some(cap) = config.max_output_tokens {
            name.push_str(&format!("+max{cap}"));
        }
        if config.fold_system {
            name.push_str("+fold-system");
        }
        Ok(OpenAi { name, endpoint, http, limit, runtime: Some(runtime), config })
    }

    /// Its settings.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The URL every call is posted to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// [`Summarizer::summarize`] for async callers: runs on the caller's tokio runtime.
    /// Use one of the two per client: pooled connections belong to the runtime that opened
    /// them.
    pub async fn summarize_async(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        let body = serde_json::to_vec(&ChatRequest::new(&self.config, request))
            .map_err(|e| Error::new(ErrorKind::Other, format!("cannot encode the request: {e}")))?;
        let mut retry = 0u32;
        loop {
            let outcome = {
                // Per attempt, not per call: a call sleeping before its retry holds no slot.
                let _permit = self.limit.acquire().await.map_err(|_| Error::new(ErrorKind::Other, "concurrency limit closed"))?;
                self.attempt(&body, request).await
            };
            match outcome {
                Ok(summary) => return Ok(summary),
                Err(f) if f.retryable && retry < self.config.max_retries => {
                    let wait = match f.retry_after {
                        Some(asked) => asked.min(self.config.max_retry_after),
                        None => jittered(self.config.backoff(retry), &body, retry),
                    };
                    tokio::time::sleep(wait).await;
                    retry += 1;
                }
                Err(f) => {
                    let attempts = retry + 1;
                    let message = if f.retryable && attempts > 1 { format!("gave up after {attempts} attempts: {}", f.error.message) } else { f.error.message };
                    return Err(Error::new(f.error.kind, message));
                }
            }
        }
    }

    async fn attempt(&self, body: &[u8], request: &SummaryRequest) -> Result<Summary, Failure> {
        let mut call = self.http.post(&self.endpoint).header(reqwest::header::CONTENT_TYPE, "application/json").body(body.to_vec());
        if let Some(key) = &self.config.api_key {
            call = call.bearer_auth(key);
        }
        let response = call.send().await.map_err(|e| self.classify(e))?;
        let status = response.status();
        let headers = response.headers().clone();
        // The timeout covers the body too: a server that stalls mid-answer times out here.
        let bytes = response.bytes().await.map_err(|e| self.classify(e))?;
        if !status.is_success() {
            let detail = serde_json::from_slice::<ErrorBody>(&bytes).map(|b| b.message()).unwrap_or_else(|_| quote(&bytes));
            let message = format!("HTTP {}: {detail}", status.as_u16());
            // 5xx: the server failed and may recover; 429: it is busy. Anything else
            // (bad request, auth, unknown model) fails the same way every time.
            if !(status.is_server_error() || status.as_u16() == 429) {
                return Err(Failure::fatal(ErrorKind::Transport, message));
            }
            // A busy (429) or overloaded (503) server may say when to come back (vLLM's and
            // SGLang's rate limiters, hosted APIs); sooner only earns another refusal.
            let asked = matches!(status.as_u16(), 429 | 503).then(|| retry_after(&headers, SystemTime::now())).flatten();
            return Err(Failure { retry_after: asked, ..Failure::retry(ErrorKind::Transport, message) });
        }
        parse(&bytes, request).map_err(|e| Failure { error: e, retryable: false, retry_after: None })
    }

    fn classify(&self, e: reqwest::Error) -> Failure {
        if e.is_timeout() {
            return Failure::retry(ErrorKind::Timeout, format!("no answer within {:?} from {}", self.config.timeout, self.endpoint));
        }
        if e.is_builder() {
            return Failure::fatal(ErrorKind::Other, format!("cannot build the request: {e}"));
        }
        // Refused, reset, closed mid-body: the transport failed; a later attempt may not.
        Failure::retry(ErrorKind::Transport, format!("{} to {}: {}", if e.is_connect() { "cannot connect" } else { "request failed" }, self.endpoint, error_chain(&e)))
    }
}

/// The wait a `Retry-After` header asks for: delay-seconds (`120`) or an HTTP-date (`Fri, 31
/// Dec 1999 23:59:59 GMT`, a date already past asking for none). `None` when absent or
/// unreadable: the client then backs off on its own.
fn retry_after(headers: &reqwest::header::HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A wait between half of `longest` and all of it, fixed by the request body and the retry
/// number. Calls that failed together (a server restarting under 64 calls in flight) then come
/// back spread out instead of together; fixed, not random, so a rerun waits the same.
fn jittered(longest: Duration, body: &[u8], retry: u32) -> Duration {
    // std's `DefaultHasher::new()` is SipHash with fixed keys: the same value every run.
    let mut hash = std::collections::hash_map::DefaultHasher::new();
    (body, retry).hash(&mut hash);
    let fraction = (hash.finish() >> 11) as f64 / (1u64 << 53) as f64;
    longest.mul_f64(0.5 + 0.5 * fraction)
}

/// Reads a successful body into a summary.
fn parse(bytes: &[u8], request: &SummaryRequest) -> Result<Summary, Error> {
    let response: ChatResponse = match serde_json::from_slice(bytes) {
        Ok(r) => r,
        Err(e) => {
            // Some servers answer a failure with status 200 and an error body.
            if let Ok(body) = serde_json::from_slice::<ErrorBody>(bytes) {
                return Err(Error::new(ErrorKind::Transport, format!("server error: {}", body.message())));
            }
            return Err(Error::new(ErrorKind::Transport, format!("malformed response ({e}): {}", quote(bytes))));
        }
    };
    let Some(choice) = response.choices.into_iter().next() else {
        return Err(Error::new(ErrorKind::EmptySummary, "response has no choices"));
    };
    let text = choice.message.and_then(|m| m.content).unwrap_or_default();
    if text.trim().is_empty() {
        return Err(Error::new(ErrorKind::EmptySummary, format!("empty summary (finish_reason {:?})", choice.finish_reason.as_deref().unwrap_or("none"))));
    }
    let stop = if choice.finish_reason.as_deref() == Some("length") { StopReason::Length } else { StopReason::Complete };
    let usage = response.usage;
    // Fallbacks for servers that omit usage: an estimate is closer than zero, which would
    // make the model look free in the report.
    let input_tokens = usage
        .as_ref()
        .and_then(|u| u.prompt_tokens)
        .unwrap_or_else(|| estimate::chars_div4_ceil(&request.system) + estimate::chars_div4_ceil(&request.user_message()));
    let output_tokens = usage.as_ref().and_then(|u| u.completion_tokens).unwrap_or_else(|| estimate::chars_div4_ceil(&text));
    Ok(Summary { text, input_tokens, output_tokens, stop })
}

fn is_loopback(url: &reqwest::Url) -> bool {
    // `host_str` keeps IPv6 brackets (`[::1]`); IP hosts are already normalized by the parser.
    match url.host_str() {
        Some(host) => host.eq_ignore_ascii_case("localhost") || host.trim_matches(['[', ']']).parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

/// At most [`MAX_QUOTED_BODY`] characters of a body, lossily decoded, for error messages.
fn quote(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    match text.char_indices().nth(MAX_QUOTED_BODY) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_string(),
    }
}

/// reqwest's top-level message ("error sending request") hides the cause; the chain names it
/// (connection refused, reset by peer).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

impl Summarizer for OpenAi {
    fn name(&self) -> &str {
        &self.name
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        // tokio panics on `block_on` inside a runtime; an error says what to do instead.
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(Error::new(ErrorKind::Other, "OpenAi::summarize called inside a tokio runtime; use summarize_async there"));
        }
        let runtime = self.runtime.as_ref().expect("the runtime lives until drop");
        runtime.block_on(self.summarize_async(request))
    }
}

impl Drop for OpenAi {
    fn drop(&mut self) {
        // Dropping a runtime blocks on its workers, which tokio forbids inside another
        // runtime (an async caller may drop the client there); shutting down in the
        // background is allowed anywhere and leaves nothing to wait for.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> SummaryRequest {
        SummaryRequest { purpose: "history".into(), context: compactbench_core::SummaryContext::Fresh, system: "S".into(), transcript: "T".into(), instructions: "I".into(), max_output_tokens: 10 }
    }

    #[test]
    fn parse_reads_text_usage_and_stop() {
        let s = parse(br#"{"choices":[{"message":{"content":"sum"},"finish_reason":"length"}],"usage":{"prompt_tokens":7,"completion_tokens":3}}"#, &request()).unwrap();
        assert_eq!(s, Summary { text: "sum".into(), input_tokens: 7, output_tokens: 3, stop: StopReason::Length });
    }

    #[test]
    fn parse_estimates_missing_usage() {
        let s = parse(br#"{"choices":[{"message":{"content":"12345"},"finish_reason":"stop"}]}"#, &request()).unwrap();
        assert_eq!((s.input_tokens, s.output_tokens, s.stop), (1 + 1, 2, StopReason::Complete));
    }

    #[test]
    fn parse_maps_empty_and_error_bodies() {
        assert_eq!(parse(br#"{"choices":[]}"#, &request()).unwrap_err().kind, ErrorKind::EmptySummary);
        assert_eq!(parse(br#"{"choices":[{"message":{"content":null}}]}"#, &request()).unwrap_err().kind, ErrorKind::EmptySummary);
        assert_eq!(parse(br#"{"choices":[{"message":{"content":"  \n"}}]}"#, &request()).unwrap_err().kind, ErrorKind::EmptySummary);
        let e = parse(br#"{"error":{"message":"model overloaded"}}"#, &request()).unwrap_err();
        assert_eq!((e.kind, e.message.contains("model overloaded")), (ErrorKind::Transport, true));
        assert_eq!(parse(b"<html>", &request()).unwrap_err().kind, ErrorKind::Transport);
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = httpdate::parse_http_date("Sun, 06 Dec 2026 22:00:00 GMT").unwrap();
        let header = |v: &str| {
            let mut h = reqwest::header::HeaderMap::new();
            h.insert(reqwest::header::RETRY_AFTER, v.parse().unwrap());
            h
        };
        assert_eq!(retry_after(&header("7"), now), Some(Duration::from_secs(7)));
        assert_eq!(retry_after(&header(" 0 "), now), Some(Duration::ZERO));
        assert_eq!(retry_after(&header("Sun, 06 Dec 2026 22:01:30 GMT"), now), Some(Duration::from_secs(90)));
        assert_eq!(retry_after(&header("Sun, 06 Dec 2026 21:59:00 GMT"), now), Some(Duration::ZERO), "a past date asks for no wait");
        assert_eq!(retry_after(&header("soon"), now), None);
        assert_eq!(retry_after(&header("-3"), now), None);
        assert_eq!(retry_after(&reqwest::header::HeaderMap::new(), now), None);
    }

    #[test]
    fn jitter_stays_between_half_and_all_and_spreads_calls() {
        let longest = Duration::from_millis(800);
        let waits: Vec<Duration> = (0..64u32).map(|i| jittered(longest, format!("body {i}").as_bytes(), 2)).collect();
        assert!(waits.iter().all(|w| *w >= longest / 2 && *w <= longest), "{waits:?}");
        let distinct: std::collections::HashSet<_> = waits.iter().collect();
        assert!(distinct.len() > 32, "{} distinct waits of 64", distinct.len());
        assert_eq!(jittered(longest, b"x", 1), jittered(longest, b"x", 1), "fixed by body and retry");
    }

    #[test]
    fn loopback_hosts_are_recognized() {
        for (u, want) in [("http://localhost:1/", true), ("http://127.0.0.2/", true), ("http://[::1]:8/", true), ("https://api.example.com/", false)] {
            assert_eq!(is_loopback(&reqwest::Url::parse(u).unwrap()), want, "{u}");
        }
    }

    #[test]
    fn settings_that_change_the_answer_are_in_the_name() {
        let config = OpenAiConfig::new("http://127.0.0.1:1", "m");
        assert_eq!(OpenAi::new(config.clone()).unwrap().name(), "openai:m");
        let tuned = OpenAiConfig { max_output_tokens: Some(1024), fold_system: true, ..config };
        assert_eq!(OpenAi::new(tuned).unwrap().name(), "openai:m+max1024+fold-system");
    }

    #[test]
    fn bad_configuration_fails_at_construction() {
        assert_eq!(OpenAi::new(OpenAiConfig::new("not a url", "m")).err().unwrap().kind, ErrorKind::Other);
        assert_eq!(OpenAi::new(OpenAiConfig::new("ftp://127.0.0.1", "m")).err().unwrap().kind, ErrorKind::Other);
        assert_eq!(OpenAi::new(OpenAiConfig::new("http://127.0.0.1", " ")).err().unwrap().kind, ErrorKind::Other);
    }
}

//! Where the server is, which model, and the bounds of every call.

use std::fmt;
use std::time::Duration;

use compactbench_core::{Error, ErrorKind};

/// Environment variable holding the server's base URL.
pub const ENV_BASE_URL: &str = "COMPACTBENCH_OPENAI_BASE_URL";
/// Environment variable holding the model name.
pub const ENV_MODEL: &str = "COMPACTBENCH_OPENAI_MODEL";
/// Environment variable holding the API key (optional: local servers need none).
pub const ENV_API_KEY: &str = "COMPACTBENCH_OPENAI_API_KEY";

/// Settings of an [`OpenAi`](crate::OpenAi) client. `Debug` redacts the API key.
#[derive(Clone, PartialEq, Eq)]
pub struct OpenAiConfig {
    /// Base URL, with or without a trailing `/v1` (see [`OpenAiConfig::endpoint`]).
    pub base_url: String,
    /// Model name as the server knows it.
    pub model: String,
    /// Bearer token; `None` sends no `Authorization` header.
    pub api_key: Option<String>,
    /// Bound on one attempt, from sending the request to reading the whole body.
    pub timeout: Duration,
    /// Bound on opening the connection, within `timeout`.
    pub connect_timeout: Duration,
    /// Retries after the first attempt, for timeouts, connection errors, 5xx and 429.
    pub max_retries: u32,
    /// Wait before the first retry; doubled for each further one.
    pub initial_backoff: Duration,
    /// Longest wait between attempts when the server names none.
    pub max_backoff: Duration,
    /// Longest wait a server's `Retry-After` (on 429 or 503) is honoured for; a longer one is
    /// cut to this, so a run is bounded whatever the server says.
    pub max_retry_after: Duration,
    /// Requests in flight at once through this client, across all threads (at least 1).
    pub max_concurrency: usize,
    /// Send the summary request's system prompt at the start of the user message instead of
    /// as a system message, for models without a system role (Gemma: its own chat template
    /// does the same, and llama-cpp-python's `gemma` chat format drops system messages).
    pub fold_system: bool,
    /// Lowest output cap sent: `max_tokens` is `min(request's cap, this)`. For a server whose
    /// model writes until the cap it is given (small models at temperature 0 repeat
    /// themselves), so a strategy asking for 13k output tokens does not cost ten minutes a
    /// call on a CPU. `None` sends the strategy's own cap.
    pub max_output_tokens: Option<u64>,
}

impl OpenAiConfig {
    /// Default per-attempt timeout. Generous because a local model writing a long summary
    /// at a few dozen tokens per second takes minutes, and a cut-off call is wasted work.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
    /// Default connect timeout: a server that cannot accept a connection in this time is down.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
    /// Default retry count.
    pub const DEFAULT_MAX_RETRIES: u32 = 3;
    /// Default first backoff.
    pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_millis(500);
    /// Default longest backoff.
    pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(8);
    /// Default longest `Retry-After` honoured: what hosted APIs ask for under rate limits
    /// (seconds to a minute), not an outage's hours.
    pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(120);
    /// Default concurrency: what a single-GPU local server batches comfortably.
    pub const DEFAULT_MAX_CONCURRENCY: usize = 4;

    /// Settings for `model` at `base_url`, no API key, default bounds.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> OpenAiConfig {
        OpenAiConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            timeout: Self::DEFAULT_TIMEOUT,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            max_retries: Self::DEFAULT_MAX_RETRIES,
            initial_backoff: Self::DEFAULT_INITIAL_BACKOFF,
            max_backoff: Self::DEFAULT_MAX_BACKOFF,
            max_retry_after: Self::DEFAULT_MAX_RETRY_AFTER,
            max_concurrency: Self::DEFAULT_MAX_CONCURRENCY,
            fold_system: false,
            max_output_tokens: None,
        }
    }

    /// The same settings with `api_key`.
    pub fn with_api_key(mut self, api_key: impl Into<String>) -> OpenAiConfig {
        self.api_key = Some(api_key.into());
        self
    }

    /// Settings from flags where given (`Some`, non-empty), else from [`ENV_BASE_URL`],
    /// [`ENV_MODEL`] and [`ENV_API_KEY`]; default bounds. Errors (kind `Other`) name the flag's
    /// environment variable when the base URL or the model is missing.
    pub fn resolve(base_url: Option<String>, model: Option<String>, api_key: Option<String>) -> Result<OpenAiConfig, Error> {
        Self::resolve_with(base_url, model, api_key, |name| std::env::var(name).ok())
    }

    /// [`OpenAiConfig::resolve`] with no flags: everything from the environment.
    pub fn from_env() -> Result<OpenAiConfig, Error> {
        Self::resolve(None, None, None)
    }

    /// `resolve` with the environment passed in, so tests need not mutate the process
    /// environment (which is unsound while other test threads read it).
    pub(crate) fn resolve_with(
        base_url: Option<String>,
        model: Option<String>,
        api_key: Option<String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<OpenAiConfig, Error> {
        // An empty flag or variable counts as unset: `FOO= cmd` is how shells unset things.
        let pick = |flag: Option<String>, var: &str| flag.filter(|s| !s.trim().is_empty()).or_else(|| env(var).filter(|s| !s.trim().is_empty()));
        let base_url = pick(base_url, ENV_BASE_URL)
            .ok_or_else(|| Error::new(ErrorKind::Other, format!("no OpenAI-compatible base URL: pass one or set {ENV_BASE_URL}")))?;
        let model = pick(model, ENV_MODEL).ok_or_else(|| Error::new(ErrorKind::Other, format!("no model name: pass one or set {ENV_MODEL}")))?;
        let mut config = OpenAiConfig::new(base_url.trim(), model.trim());
        config.api_key = pick(api_key, ENV_API_KEY).map(|k| k.trim().to_string());
        Ok(config)
    }

    /// The chat-completions URL: the base without trailing slashes, then `/chat/completions`
    /// if it already ends in `/v1` (the OpenAI SDKs' convention for base URLs), else
    /// `/v1/chat/completions` (the convention of most local servers' docs).
    pub fn endpoint(&self) -> String {
        let base = self.base_url.trim().trim_end_matches('/');
        if base.ends_with("/v1") {
            format!("{base}/chat/completions")
        } else {
            format!("{base}/v1/chat/completions")
        }
    }

    /// Longest wait before retry number `retry` (0-based): `initial_backoff * 2^retry`, at most
    /// `max_backoff`. The client waits between half of it and all of it (see
    /// [`OpenAi`](crate::OpenAi)), unless the server said how long in `Retry-After`.
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry).unwrap_or(u32::MAX);
        self.initial_backoff.saturating_mul(factor).min(self.max_backoff)
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Configs end up in logs and panic messages; the key must not.
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_retries", &self.max_retries)
            .field("initial_backoff", &self.initial_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("max_retry_after", &self.max_retry_after)
            .field("max_concurrency", &self.max_concurrency)
            .field("fold_system", &self.fold_system)
            .field("max_output_tokens", &self.max_output_tokens)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn flags_win_over_the_environment_and_empty_counts_as_unset() {
        let vars = [(ENV_BASE_URL, "http://env:1"), (ENV_MODEL, "env-model"), (ENV_API_KEY, "")];
        let c = OpenAiConfig::resolve_with(Some("http://flag:2".into()), None, None, env(&vars)).unwrap();
        assert_eq!(c.base_url, "http://flag:2");
        assert_eq!(c.model, "env-model");
        assert_eq!(c.api_key, None);
        let c = OpenAiConfig::resolve_with(Some(String::new()), None, Some("k".into()), env(&vars)).unwrap();
        assert_eq!(c.base_url, "http://env:1");
        assert_eq!(c.api_key.as_deref(), Some("k"));
    }

    #[test]
    fn missing_settings_name_their_variable() {
        let e = OpenAiConfig::resolve_with(None, Some("m".into()), None, env(&[])).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Other);
        assert!(e.message.contains(ENV_BASE_URL), "{e}");
        let e = OpenAiConfig::resolve_with(Some("http://x".into()), None, None, env(&[])).unwrap_err();
        assert!(e.message.contains(ENV_MODEL), "{e}");
    }

    #[test]
    fn endpoint_accepts_bases_with_or_without_v1() {
        for base in ["http://127.0.0.1:8000", "http://127.0.0.1:8000/", "http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/"] {
            assert_eq!(OpenAiConfig::new(base, "m").endpoint(), "http://127.0.0.1:8000/v1/chat/completions", "{base}");
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let c = OpenAiConfig::new("http://x", "m");
        assert_eq!(c.backoff(0), Duration::from_millis(500));
        assert_eq!(c.backoff(1), Duration::from_secs(1));
        assert_eq!(c.backoff(3), Duration::from_secs(4));
        assert_eq!(c.backoff(4), Duration::from_secs(8));
        assert_eq!(c.backoff(40), Duration::from_secs(8));
    }

    #[test]
    fn debug_redacts_the_key() {
        let c = OpenAiConfig::new("http://x", "m").with_api_key("sk-secret");
        assert!(!format!("{c:?}").contains("sk-secret"));
    }
}

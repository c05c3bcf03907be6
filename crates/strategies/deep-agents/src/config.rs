//! Configuration: LangChain's `ContextSize` and trigger clauses, Deep Agents' factory defaults,
//! and the settings resolved against one model.

use compactbench_core::{ModelProfile, Shape};

/// LangChain `ContextSize`: a fraction of the profile's `max_input_tokens`, a token count or a
/// message count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Size {
    Fraction(f64),
    Tokens(u64),
    Messages(u64),
}

/// One trigger clause (LangChain's dict form): every metric it names must be met. A list of
/// clauses is met when any clause is.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Clause {
    pub(crate) tokens: Option<u64>,
    pub(crate) messages: Option<u64>,
    pub(crate) fraction: Option<f64>,
}

impl From<Size> for Clause {
    fn from(size: Size) -> Clause {
        match size {
            Size::Fraction(f) => Clause { fraction: Some(f), ..Clause::default() },
            Size::Tokens(t) => Clause { tokens: Some(t), ..Clause::default() },
            Size::Messages(m) => Clause { messages: Some(m), ..Clause::default() },
        }
    }
}

/// `TruncateArgsSettings`: when and how old `write_file` / `edit_file` arguments are clipped.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TruncateArgs {
    /// `None` disables truncation.
    pub(crate) trigger: Option<Size>,
    pub(crate) keep: Size,
    pub(crate) max_length: usize,
    pub(crate) truncation_text: String,
}

impl TruncateArgs {
    /// The constructor's fallbacks for keys a settings dict leaves out.
    pub(crate) fn with(trigger: Option<Size>, keep: Size) -> TruncateArgs {
        TruncateArgs { trigger, keep, max_length: 2000, truncation_text: "...(argument truncated)".into() }
    }
}

/// How the strategy is configured. `None` fields take the defaults `create_deep_agent` computes
/// from the model (`compute_summarization_defaults`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Config {
    pub(crate) trigger: Option<Vec<Clause>>,
    pub(crate) keep: Option<Size>,
    pub(crate) truncate: Option<TruncateArgs>,
    /// Whether the model exposes a LangChain profile with an integer `max_input_tokens`
    /// (taken to be [`ModelProfile::window`]). Built-in chat models do.
    pub(crate) model_has_profile: bool,
    /// `FilesystemMiddleware.tool_token_limit_before_evict`.
    pub(crate) tool_token_limit_before_evict: Option<u64>,
    /// `FilesystemMiddleware.human_message_token_limit_before_evict`.
    pub(crate) human_message_token_limit_before_evict: Option<u64>,
    /// Makes every backend write fail, to exercise the failure paths (the virtual store itself
    /// never fails).
    pub(crate) failing_backend: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            trigger: None,
            keep: None,
            truncate: None,
            model_has_profile: true,
            tool_token_limit_before_evict: Some(20_000),
            human_message_token_limit_before_evict: Some(50_000),
            failing_backend: false,
        }
    }
}

/// What the strategy needs to know about the model; recorded in every checkpoint so that
/// [`crate::DeepAgentsStrategy`]'s projection, which sees only the log, can use it too.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ModelFacts {
    /// The profile's `max_input_tokens`, if the model has a profile.
    pub(crate) max_input_tokens: Option<u64>,
    /// The configured output cap (`max_tokens`), reserved by the input budget.
    pub(crate) max_output: u64,
    /// `ChatAnthropic` models: 3.3 chars per token, and Claude-bound reasoning.
    pub(crate) anthropic: bool,
}

impl ModelFacts {
    pub(crate) fn of(model: &ModelProfile, config: &Config) -> ModelFacts {
        ModelFacts {
            max_input_tokens: config.model_has_profile.then_some(model.window),
            max_output: model.max_output,
            anthropic: model.provider == Shape::Anthropic,
        }
    }

    pub(crate) fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "max_input_tokens": self.max_input_tokens,
            "max_output": self.max_output,
            "anthropic": self.anthropic,
        })
    }

    pub(crate) fn from_json(v: &serde_json::Value) -> Option<ModelFacts> {
        Some(ModelFacts {
            max_input_tokens: v.get("max_input_tokens")?.as_u64(),
            max_output: v.get("max_output")?.as_u64()?,
            anthropic: v.get("anthropic")?.as_bool()?,
        })
    }
}

/// Configuration resolved against one model: what every decision reads.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Settings {
    pub(crate) facts: ModelFacts,
    pub(crate) trigger: Vec<Clause>,
    pub(crate) keep: Size,
    pub(crate) truncate: TruncateArgs,
    pub(crate) tool_limit: Option<u64>,
    pub(crate) human_limit: Option<u64>,
    pub(crate) failing_backend: bool,
}

/// `compute_summarization_defaults`: fractions of the window with a profile, fixed counts
/// without one.
pub(crate) fn factory_defaults(has_profile: bool) -> (Size, Size, TruncateArgs) {
    if has_profile {
        (
            Size::Fraction(0.85),
            Size::Fraction(0.10),
            TruncateArgs::with(Some(Size::Fraction(0.85)), Size::Fraction(0.10)),
        )
    } else {
        (Size::Tokens(170_000), Size::Messages(6), TruncateArgs::with(Some(Size::Messages(20)), Size::Messages(20)))
    }
}

impl Settings {
    pub(crate) fn resolve(config: &Config, facts: ModelFacts) -> Settings {
        let (trigger, keep, truncate) = factory_defaults(facts.max_input_tokens.is_some());
        Settings {
            facts,
            trigger: config.trigger.clone().unwrap_or_else(|| vec![trigger.into()]),
            keep: config.keep.unwrap_or(keep),
            truncate: config.truncate.clone().unwrap_or(truncate),
            tool_limit: config.tool_token_limit_before_evict,
            human_limit: config.human_message_token_limit_before_evict,
            failing_backend: config.failing_backend,
        }
    }

    /// Characters per token of the tuned approximate counter.
    pub(crate) fn chars_per_token(&self) -> f64 {
        if self.facts.anthropic {
            3.3
        } else {
            4.0
        }
    }

    /// `int(max_input_tokens * fraction)`, at least 1; `None` without a profile.
    pub(crate) fn fraction_tokens(&self, fraction: f64) -> Option<u64> {
        self.facts.max_input_tokens.map(|max| ((max as f64 * fraction) as u64).max(1))
    }

    /// The complete-request budget of the newest release (`_input_budget`):
    /// `max(0, int(max_input_tokens * 0.95) - max_output)`; `None` without a profile.
    pub(crate) fn input_budget(&self) -> Option<u64> {
        self.facts.max_input_tokens.map(|max| ((max as f64 * 0.95) as u64).saturating_sub(self.facts.max_output))
    }
}

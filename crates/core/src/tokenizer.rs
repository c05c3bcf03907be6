//! The exact-tokenizer seam: real BPE counts for strategies whose original counts with one.
//!
//! Most harnesses decide with a character heuristic ([`crate::estimate`]), but some count with
//! a real BPE tokenizer: aider counts each history message with its model's tokenizer through
//! litellm (tiktoken `cl100k_base` or `o200k_base` for OpenAI-style names). A strategy decides
//! with its original's own estimator, so such a strategy needs exact counts in the original's
//! encoding. Core may not depend on tiktoken (it is compiled into every strategy crate and
//! stays IO- and dependency-free), so the runner injects a [`Tokenizer`] through
//! [`crate::Cx::tokenizer`]; `compactbench-tokens` implements it, memoized by content. There
//! is no approximate default: every caller that builds a [`crate::Cx`] passes a real one.

/// A BPE encoding (tiktoken's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Encoding {
    /// GPT-4o, GPT-4.1, GPT-5, o-series.
    #[default]
    O200kBase,
    /// GPT-4 and GPT-3.5; litellm's default encoding.
    Cl100kBase,
}

impl Encoding {
    /// tiktoken's name (`o200k_base`, `cl100k_base`), as used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }

    /// Parses `o200k_base` or `cl100k_base`.
    pub fn parse(s: &str) -> Option<Encoding> {
        match s {
            "o200k_base" => Some(Encoding::O200kBase),
            "cl100k_base" => Some(Encoding::Cl100kBase),
            _ => None,
        }
    }
}

/// Exact token counts with a real BPE, injected by the runner (see the module docs).
///
/// Object safe; implementations are shared across threads and should memoize, since strategies
/// recount the same messages at every decision.
pub trait Tokenizer: Send + Sync {
    /// Tokens of `text` in `encoding`, as tiktoken's `encode(text, disallowed_special=())`
    /// counts them: special-token text such as `<|endoftext|>` is encoded as ordinary text.
    fn count(&self, encoding: Encoding, text: &str) -> u64;
}

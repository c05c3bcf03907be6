//! Fault injection: a summarizer that fails the way real ones do, on purpose (see [`Faulty`]).

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};

use compactbench_core::{Error, ErrorKind, StopReason, Summarizer, Summary, SummaryRequest};
use compactbench_tokens::TokenCounter;
use sha2::{Digest, Sha256};

/// Largest token count an [`FaultKind::OverCap`] answer aims for, so a huge cap cannot make
/// the fault allocate without bound.
pub const MAX_OVER_CAP_TOKENS: u64 = 1 << 20;

/// The fault a [`Faulty`] injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// `Err`, kind `Timeout`: the model did not answer in time. The inner summarizer is not
    /// called.
    Timeout,
    /// `Err`, kind `Transport`, message naming HTTP 500. The inner summarizer is not called.
    Http500,
    /// `Ok` with empty text and no output tokens (input tokens as the inner call reported).
    Empty,
    /// `Ok` with the inner text repeated until it is more than twice `max_output_tokens`
    /// (exact count), `output_tokens` that count, and stop `Length`: a server that ignored the
    /// cap.
    OverCap,
    /// `Ok` with text that is not a summary: U+FFFD replacement characters where invalid
    /// UTF-8 was decoded lossily, random-looking bytes derived from the request, and
    /// Latin-1 mojibake of the inner text (`Ã©` for `é`).
    Garbage,
}

impl FaultKind {
    /// Every kind, in declaration order.
    pub const ALL: [FaultKind; 5] = [FaultKind::Timeout, FaultKind::Http500, FaultKind::Empty, FaultKind::OverCap, FaultKind::Garbage];

    /// Short name (`timeout`, `http500`, `empty`, `over-cap`, `garbage`), as parsed by
    /// [`FromStr`].
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Timeout => "timeout",
            FaultKind::Http500 => "http500",
            FaultKind::Empty => "empty",
            FaultKind::OverCap => "over-cap",
            FaultKind::Garbage => "garbage",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for FaultKind {
    type Err = String;

    fn from_str(s: &str) -> Result<FaultKind, String> {
        FaultKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = FaultKind::ALL.iter().map(|k| k.as_str()).collect();
            format!("unknown fault {s:?}; expected one of {}", names.join(", "))
        })
    }
}

/// Which calls of a [`Faulty`] get the fault; calls are numbered from 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// Every call.
    Always,
    /// Only call `n` (`Nth(0)` never fires).
    Nth(u64),
    /// Calls `n`, `2n`, `3n`, ... (`EveryNth(0)` never fires).
    EveryNth(u64),
}

impl Trigger {
    fn fires(self, call: u64) -> bool {
        match self {
            Trigger::Always => true,
            Trigger::Nth(n) => call == n,
            Trigger::EveryNth(n) => n != 0 && call % n == 0,
        }
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trigger::Always => f.write_str("always"),
            Trigger::Nth(n) => write!(f, "nth:{n}"),
            Trigger::EveryNth(n) => write!(f, "every:{n}"),
        }
    }
}

impl FromStr for Trigger {
    type Err = String;

    /// `always`, `nth:N` or `every:N`.
    fn from_str(s: &str) -> Result<Trigger, String> {
        let number = |n: &str| n.parse::<u64>().map_err(|e| format!("bad fault trigger {s:?}: {e}"));
        match s.split_once(':') {
            None if s == "always" => Ok(Trigger::Always),
            Some(("nth", n)) => Ok(Trigger::Nth(number(n)?)),
            Some(("every", n)) => Ok(Trigger::EveryNth(number(n)?)),
            _ => Err(format!("bad fault trigger {s:?}; expected always, nth:N or every:N")),
        }
    }
}

/// A summarizer that injects `kind` into the calls `trigger` selects and passes the others
/// through: a summarizer that fails the way real ones do, on purpose.
///
/// Strategies must survive a summarizer that times out, errors, answers nothing, overruns its
/// cap, or answers garbage. [`Faulty`] wraps any summarizer and turns chosen calls into one
/// [`FaultKind`], deterministically: which calls is fixed by a [`Trigger`] over the wrapper's
/// own call count, and what a fault returns depends only on the request and the inner answer.
/// (Call counts are deterministic when one session drives one `Faulty`, as the runner does;
/// a `Faulty` shared by parallel sessions numbers their calls in arrival order.)
///
/// To replay faults along with recorded answers, wrap the cache, not the other way round:
/// `Faulty::new(Box::new(ReplayCache::new(model)), ..)`, so the cache stores clean answers.
pub struct Faulty {
    inner: Box<dyn Summarizer>,
    kind: FaultKind,
    trigger: Trigger,
    name: String,
    counter: TokenCounter,
    calls: AtomicU64,
    injected: AtomicU64,
}

impl Faulty {
    /// Wraps `inner`. Its name is `<inner>+<kind>@<trigger>` (e.g.
    /// `extractive+timeout@nth:2`), so reports and caches keep faulty runs apart.
    pub fn new(inner: Box<dyn Summarizer>, kind: FaultKind, trigger: Trigger) -> Faulty {
        let name = format!("{}+{kind}@{trigger}", inner.name());
        Faulty { inner, kind, trigger, name, counter: TokenCounter::default(), calls: AtomicU64::new(0), injected: AtomicU64::new(0) }
    }

    /// Calls so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    fn over_cap(&self, inner: Summary, cap: u64) -> Summary {
        let target = cap.max(1).saturating_mul(2).min(MAX_OVER_CAP_TOKENS);
        let unit = if inner.text.trim().is_empty() { "overflow".to_string() } else { inner.text };
        let unit = format!("{unit}\n");
        // Repeat by the unit's own count first, then top up: tokens of a concatenation are
        // close to, but not exactly, the sum of the parts' tokens.
        let unit_tokens = self.counter.count_text(&unit).max(1);
        let mut text = unit.repeat(usize::try_from(target / unit_tokens + 1).unwrap_or(usize::MAX));
        let mut tokens = self.counter.count_text(&text);
        while tokens <= target {
            text.push_str(&unit);
            tokens = self.counter.count_text(&text);
        }
        Summary { text, input_tokens: inner.input_tokens, output_tokens: tokens, stop: StopReason::Length }
    }

    fn garbage(&self, inner: Summary, request: &SummaryRequest) -> Summary {
        // Random-looking but fixed: bytes of a SHA-256 chain seeded by the request and answer.
        let mut seed = Sha256::new();
        seed.update(request.user_message().as_bytes());
        seed.update(inner.text.as_bytes());
        let mut block = seed.finalize();
        let mut noise = Vec::with_capacity(96);
        for _ in 0..3 {
            noise.extend_from_slice(&block);
            block = Sha256::digest(block);
        }
        // 0xFF and 0xFE never occur in UTF-8, so at least these two decode to U+FFFD.
        let mut bytes = vec![0xFF, 0xFE];
        bytes.extend_from_slice(&noise);
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        // Mojibake: the inner answer's UTF-8 bytes read as Latin-1, as a misconfigured decoder
        // would show them. First 120 bytes only: enough to look like the answer, garbled.
        text.push(' ');
        text.extend(inner.text.bytes().take(120).map(char::from));
        Summary { output_tokens: self.counter.count_text(&text), text, input_tokens: inner.input_tokens, stop: StopReason::Complete }
    }
}

impl Summarizer for Faulty {
    fn name(&self) -> &str {
        &self.name
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        let call = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        if !self.trigger.fires(call) {
            return self.inner.summarize(request);
        }
        self.injected.fetch_add(1, Ordering::Relaxed);
        match self.kind {
            FaultKind::Timeout => Err(Error::new(ErrorKind::Timeout, format!("injected fault (call {call}): summarizer timed out"))),
            FaultKind::Http500 => Err(Error::new(ErrorKind::Transport, format!("injected fault (call {call}): HTTP 500 Internal Server Error"))),
            FaultKind::Empty => {
                let inner = self.inner.summarize(request)?;
                Ok(Summary { text: String::new(), input_tokens: inner.input_tokens, output_tokens: 0, stop: StopReason::Complete })
            }
            FaultKind::OverCap => {
                let inner = self.inner.summarize(request)?;
                Ok(self.over_cap(inner, request.max_output_tokens))
            }
            FaultKind::Garbage => {
                let inner = self.inner.summarize(request)?;
                Ok(self.garbage(inner, request))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Extractive;

    fn request(cap: u64) -> SummaryRequest {
        SummaryRequest {
            purpose: "history".into(),
            context: compactbench_core::SummaryContext::Fresh,
            system: "You summarize.".into(),
            transcript: "[User]: fix the café parser\n\n[Assistant]: done".into(),
            instructions: "Summarize.".into(),
            max_output_tokens: cap,
        }
    }

    fn faulty(kind: FaultKind, trigger: Trigger) -> Faulty {
        Faulty::new(Box::new(Extractive::default()), kind, trigger)
    }

    #[test]
    fn timeout_and_http500_are_errors_of_their_kind() {
        let e = faulty(FaultKind::Timeout, Trigger::Always).summarize(&request(100)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Timeout);
        let e = faulty(FaultKind::Http500, Trigger::Always).summarize(&request(100)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Transport);
        assert!(e.message.contains("HTTP 500"), "{e}");
    }

    #[test]
    fn empty_is_ok_with_nothing_in_it() {
        let s = faulty(FaultKind::Empty, Trigger::Always).summarize(&request(100)).unwrap();
        assert_eq!((s.text.as_str(), s.output_tokens, s.stop), ("", 0, StopReason::Complete));
        assert!(s.input_tokens > 0);
    }

    #[test]
    fn over_cap_exceeds_twice_the_cap_and_says_length() {
        let counter = TokenCounter::default();
        for cap in [0, 1, 7, 50, 300] {
            let s = faulty(FaultKind::OverCap, Trigger::Always).summarize(&request(cap)).unwrap();
            assert!(s.output_tokens > 2 * cap.max(1), "cap {cap}: {}", s.output_tokens);
            assert_eq!(s.output_tokens, counter.count_text(&s.text));
            assert_eq!(s.stop, StopReason::Length);
            // The inner answer repeated; an empty one (tiny caps) is replaced by a filler.
            let inner = Extractive::default().summarize(&request(cap)).unwrap().text;
            let unit = if inner.is_empty() { "overflow".to_string() } else { inner };
            assert!(s.text.starts_with(&format!("{unit}\n{unit}\n")), "cap {cap}: {:?}", s.text);
        }
    }

    #[test]
    fn garbage_is_deterministic_lossy_and_mojibake() {
        let a = faulty(FaultKind::Garbage, Trigger::Always).summarize(&request(100)).unwrap();
        let b = faulty(FaultKind::Garbage, Trigger::Always).summarize(&request(100)).unwrap();
        assert_eq!(a, b);
        assert!(a.text.contains('\u{FFFD}'));
        assert!(a.text.contains("cafÃ©"), "{:?}", a.text);
        assert_eq!(a.output_tokens, TokenCounter::default().count_text(&a.text));
        let other = faulty(FaultKind::Garbage, Trigger::Always).summarize(&SummaryRequest { transcript: "something else".into(), ..request(100) }).unwrap();
        assert_ne!(a.text, other.text);
    }

    #[test]
    fn triggers_pick_calls_and_others_pass_through() {
        let clean = Extractive::default().summarize(&request(100)).unwrap();
        let f = faulty(FaultKind::Timeout, Trigger::Nth(2));
        let outcomes: Vec<bool> = (0..4).map(|_| f.summarize(&request(100)).is_ok()).collect();
        assert_eq!(outcomes, [true, false, true, true]);
        assert_eq!(f.summarize(&request(100)).unwrap(), clean);
        assert_eq!((f.calls(), f.injected()), (5, 1));

        let f = faulty(FaultKind::Http500, Trigger::EveryNth(2));
        let outcomes: Vec<bool> = (0..5).map(|_| f.summarize(&request(100)).is_ok()).collect();
        assert_eq!(outcomes, [true, false, true, false, true]);
        let never = faulty(FaultKind::Http500, Trigger::EveryNth(0));
        assert!((0..3).all(|_| never.summarize(&request(100)).is_ok()));
    }

    #[test]
    fn names_and_parsing_round_trip() {
        assert_eq!(faulty(FaultKind::OverCap, Trigger::Nth(3)).name(), "extractive+over-cap@nth:3");
        for kind in FaultKind::ALL {
            assert_eq!(kind.as_str().parse::<FaultKind>().unwrap(), kind);
        }
        for trigger in [Trigger::Always, Trigger::Nth(4), Trigger::EveryNth(2)] {
            assert_eq!(trigger.to_string().parse::<Trigger>().unwrap(), trigger);
        }
        assert!("boom".parse::<FaultKind>().is_err());
        assert!("nth:x".parse::<Trigger>().is_err());
        assert!("sometimes".parse::<Trigger>().is_err());
    }
}

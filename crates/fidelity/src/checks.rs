//! Which differential check each harness's crate has: the original's published functions, its
//! CLI run as a black box, or none, and why. `compactbench list` and the main report show it, so
//! an agreement figure is never read without knowing what produced it.

use crate::{HARNESSES, ORIGINALS};

/// How a crate is compared with its original.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The original's own functions, from its published package, driven on exported cases.
    Library,
    /// The harness CLI run whole against the scripted model server.
    BlackBox,
}

/// One check of a harness's crate: its kind, the original it runs (package and version) and the
/// strategy it checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Check {
    pub kind: Kind,
    pub original: &'static str,
    pub strategy: &'static str,
}

impl Kind {
    /// How `list` and the report name it.
    fn label(self) -> &'static str {
        match self {
            Kind::Library => "library functions",
            Kind::BlackBox => "black box",
        }
    }
}

/// Harnesses with no differential check yet, and why.
pub const UNCHECKED: &[(&str, &str)] = &[
    ("amp", "closed source; no runnable client here"),
    ("antigravity", "closed source; no runnable client here"),
    ("cursor", "closed source; no runnable client here"),
    ("goose", "no registry package, and fetched source is not committed here"),
    ("opencode-v2", "no package ships core V2: the newest opencode-ai release here (1.18.33) runs V1"),
];

/// The harness a strategy id belongs to: the id up to its variant (`pi/v0.73` -> `pi`).
pub fn harness_of(strategy: &str) -> &str {
    strategy.split('/').next().unwrap_or(strategy)
}

/// The checks of `harness`'s crate (a harness id as [`harness_of`] gives it), in report order.
pub fn checks_of(harness: &str) -> Vec<Check> {
    let library =
        ORIGINALS.iter().filter(|o| harness_of(o.strategy) == harness).map(|o| Check { kind: Kind::Library, original: o.name, strategy: o.strategy });
    let black_box =
        HARNESSES.iter().filter(|h| harness_of(h.strategy) == harness).map(|h| Check { kind: Kind::BlackBox, original: h.name, strategy: h.strategy });
    library.chain(black_box).collect()
}

/// What `list` and the report say about `strategy`'s check: its harness's checks, or why it has
/// none (`None` for a baseline, which has no original). When no check runs the harness's default
/// strategy (Cline: only `cline/sdk` has a published original), each names the variant it checks.
pub fn describe(strategy: &str) -> Option<String> {
    let harness = harness_of(strategy);
    let checks = checks_of(harness);
    if !checks.is_empty() {
        let default_checked = checks.iter().any(|c| c.strategy == harness);
        let name = |c: &Check| if default_checked { c.original.to_owned() } else { format!("{} (checks {})", c.original, c.strategy) };
        let of_kind = |kind: Kind| {
            let originals: Vec<String> = checks.iter().filter(|c| c.kind == kind).map(name).collect();
            (!originals.is_empty()).then(|| format!("{}: {}", kind.label(), originals.join(", ")))
        };
        return Some([Kind::Library, Kind::BlackBox].into_iter().filter_map(of_kind).collect::<Vec<_>>().join("; "));
    }
    UNCHECKED.iter().find(|(h, _)| *h == harness).map(|(_, why)| format!("none ({why})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use compactbench_core::Fidelity;

    /// Every harness of the registry has a check or a reason for having none, never both, and
    /// the lists name no harness the registry lacks.
    #[test]
    fn every_harness_has_a_check_or_a_reason() {
        let mut harnesses: Vec<String> = compactbench_registry::all()
            .iter()
            .filter(|s| s.info().fidelity != Fidelity::Baseline)
            .map(|s| harness_of(&s.info().id).to_owned())
            .collect();
        harnesses.sort();
        harnesses.dedup();
        for h in &harnesses {
            let checked = !checks_of(h).is_empty();
            let excused = UNCHECKED.iter().any(|(u, _)| u == h);
            assert!(checked != excused, "{h}: checked {checked}, listed as unchecked {excused}");
        }
        for (u, _) in UNCHECKED {
            assert!(harnesses.iter().any(|h| h == u), "{u} is no harness of the registry");
        }
        let checked = harnesses.iter().filter(|h| !checks_of(h).is_empty()).count();
        assert_eq!((harnesses.len(), checked), (17, 12), "harnesses, and those with a differential check");
    }

    #[test]
    fn describes_variants_by_their_harness_and_baselines_not_at_all() {
        assert_eq!(describe("pi/v0.58"), describe("pi"));
        assert!(describe("pi").unwrap().starts_with("library functions: @earendil-works/pi-coding-agent 1.6.0, "), "{:?}", describe("pi"));
        assert!(describe("claude-code/v2.1.68").unwrap().starts_with("black box: @anthropic-ai/claude-code"));
        assert_eq!(describe("cursor").as_deref(), Some("none (closed source; no runnable client here)"));
        // Cline's default follows the classic ContextManager; only its SDK variant is checked.
        assert_eq!(
            describe("cline").as_deref(),
            Some("library functions: @cline/core 0.0.86 (checks cline/sdk); black box: cline 3.0.65 (checks cline/sdk)")
        );
        assert_eq!(describe("cline/sdk"), describe("cline"));
        // Kimi CLI: the release for the default, an older one for the K1 variant.
        assert_eq!(describe("kimi-cli/k1").as_deref(), Some("library functions: kimi-cli 1.52.0, kimi-cli 1.15.0; black box: kimi-cli 1.52.0"));
        assert_eq!(describe("none"), None);
    }
}

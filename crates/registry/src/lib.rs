//! The registry: the one plain list of strategy crates.
//!
//! API boundary: the runner, CLI, reports and benches learn about strategies only here.
//! Adding a strategy crate adds one line to [`CRATES`] (and one path dependency in this
//! crate's `Cargo.toml`); a test checks that every folder under `crates/strategies` is listed.

use compactbench_core::Strategy;

/// A strategy crate: its folder name under `crates/strategies` and the rows it reports
/// (its default strategy first, then any named variants).
pub struct Crate {
    /// Folder name under `crates/strategies` (package `compactbench-strategy-<dir>`).
    pub dir: &'static str,
    /// Builds every strategy the crate reports.
    pub build: fn() -> Vec<Box<dyn Strategy>>,
}

/// Every strategy crate, alphabetical by folder.
pub const CRATES: &[Crate] = &[
    Crate { dir: "aider", build: || vec![compactbench_strategy_aider::strategy()] },
    Crate { dir: "amp", build: compactbench_strategy_amp::variants },
    Crate { dir: "antigravity", build: || vec![compactbench_strategy_antigravity::strategy()] },
    Crate { dir: "claude-code", build: compactbench_strategy_claude_code::variants },
    Crate { dir: "cline", build: compactbench_strategy_cline::variants },
    Crate { dir: "codex", build: compactbench_strategy_codex::variants },
    Crate { dir: "cursor", build: || vec![compactbench_strategy_cursor::strategy()] },
    Crate { dir: "deep-agents", build: || vec![compactbench_strategy_deep_agents::strategy()] },
    Crate { dir: "deepseek-harness", build: || vec![compactbench_strategy_deepseek_harness::strategy()] },
    Crate { dir: "gemini-cli", build: || vec![compactbench_strategy_gemini_cli::strategy()] },
    Crate { dir: "goose", build: || vec![compactbench_strategy_goose::strategy()] },
    Crate { dir: "kimi-cli", build: compactbench_strategy_kimi_cli::variants },
    Crate { dir: "none", build: || vec![compactbench_strategy_none::strategy()] },
    Crate { dir: "observation-masking", build: || vec![compactbench_strategy_observation_masking::strategy()] },
    Crate { dir: "oh-my-pi", build: compactbench_strategy_oh_my_pi::variants },
    Crate { dir: "opencode-v1", build: compactbench_strategy_opencode_v1::variants },
    Crate { dir: "opencode-v2", build: || vec![compactbench_strategy_opencode_v2::strategy()] },
    Crate { dir: "openhands", build: compactbench_strategy_openhands::variants },
    Crate { dir: "pi", build: compactbench_strategy_pi::variants },
    Crate { dir: "truncate-oldest", build: || vec![compactbench_strategy_truncate_oldest::strategy()] },
];

/// Every registered strategy (each crate's rows, in registry order).
pub fn all() -> Vec<Box<dyn Strategy>> {
    CRATES.iter().flat_map(|c| (c.build)()).collect()
}

/// The strategy with this report id.
pub fn find(id: &str) -> Option<Box<dyn Strategy>> {
    all().into_iter().find(|s| s.info().id == id)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use super::*;

    #[test]
    fn every_strategy_crate_is_registered_once_in_order() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../strategies");
        let on_disk: BTreeSet<String> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.path().join("Cargo.toml").exists())
            .map(|e| e.file_name().into_string().unwrap())
            .collect();
        let listed: Vec<&str> = CRATES.iter().map(|c| c.dir).collect();
        let mut sorted = listed.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(listed, sorted, "CRATES must be alphabetical without duplicates");
        let listed: BTreeSet<String> = listed.into_iter().map(String::from).collect();
        assert_eq!(on_disk, listed, "crates/strategies and CRATES differ");
    }

    #[test]
    fn ids_are_unique_and_each_crate_reports_under_its_name() {
        let mut ids = BTreeSet::new();
        for c in CRATES {
            let rows = (c.build)();
            assert!(!rows.is_empty(), "{} reports nothing", c.dir);
            assert_eq!(rows[0].info().id, c.dir, "the default row of a crate carries the crate's name");
            for s in rows {
                let id = s.info().id.clone();
                assert!(id == c.dir || id.starts_with(&format!("{}/", c.dir)), "{id} is not under {}", c.dir);
                assert!(ids.insert(id.clone()), "duplicate id {id}");
            }
        }
        assert!(find("none").is_some());
        assert!(find("no-such-strategy").is_none());
    }
}

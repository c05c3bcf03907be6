//! Baseline `none`: never compacts. The request grows with the session and overflows the
//! window; it is the reference every other strategy's size and retention are read against.
//! No original harness (baseline), so no source commit applies.

use compactbench_core::{Checkpoint, Cx, Decision, Error, Fidelity, Incremental, Log, Moment, Replay, Strategy, StrategyInfo, View};

/// The `none` baseline.
pub struct NoneStrategy {
    info: StrategyInfo,
}

/// The `none` baseline.
pub fn strategy() -> Box<dyn Strategy> {
    Box::new(NoneStrategy {
        info: StrategyInfo {
            id: "none".into(),
            harness: "baseline".into(),
            source: "baseline".into(),
            summary: "never compacts; keeps every message".into(),
            fidelity: Fidelity::Baseline,
        },
    })
}

impl Strategy for NoneStrategy {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn Replay + '_> {
        Box::new(Incremental::default_view(self))
    }

    fn decide(&self, _: &Log, _: &View, _: Moment, _: &Cx<'_>) -> Decision {
        Decision::Skip
    }

    fn compact(&self, _: &Log, _: &View, _: Moment, _: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        Ok(Vec::new())
    }
}

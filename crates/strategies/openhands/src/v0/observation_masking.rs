//! V0 `ObservationMaskingCondenser` (`impl/observation_masking_condenser.py`).

use std::borrow::Cow;

use crate::event::Event;

/// Masks every observation outside the attention window (nothing stored).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ObservationMasking {
    /// Newest events whose observations stay (class default 5, config default 100).
    pub(crate) attention_window: usize,
}

impl ObservationMasking {
    /// `condense`: an observation at index `i < len(view) - attention_window` becomes an
    /// `AgentCondensationObservation` saying `<MASKED>`. Summaries stay: they stand for no
    /// log message a stand-in could replace.
    pub(crate) fn condense<'v>(&self, view: Cow<'v, [Event]>) -> Cow<'v, [Event]> {
        let n = view.len() as i64;
        let text: std::sync::Arc<str> = "<MASKED>".into();
        view.into_owned()
            .into_iter()
            .enumerate()
            .map(|(i, e)| if e.is_observation() && (i as i64) < n - self.attention_window as i64 { e.masked(text.clone()) } else { e })
            .collect()
    }
}

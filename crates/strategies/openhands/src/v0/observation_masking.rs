//! V0 `ObservationMaskingCondenser` (`impl/observation_masking_condenser.py`): masks every
//! observation outside the attention window (nothing stored).

use std::borrow::Cow;

use crate::event::Event;

/// `condense`: an observation at index `i < len(view) - attention_window` becomes an
/// `AgentCondensationObservation` saying `<MASKED>`. Summaries stay: they stand for no log
/// message a stand-in could replace.
pub(crate) fn condense<'v>(view: Cow<'v, [Event]>, attention_window: usize) -> Cow<'v, [Event]> {
    let n = view.len() as i64;
    let text: std::sync::Arc<str> = "<MASKED>".into();
    view.into_owned()
        .into_iter()
        .enumerate()
        .map(|(i, e)| if e.is_observation() && (i as i64) < n - attention_window as i64 { e.masked(text.clone()) } else { e })
        .collect()
}

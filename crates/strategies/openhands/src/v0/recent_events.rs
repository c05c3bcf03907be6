//! V0 `RecentEventsCondenser` (`impl/recent_events_condenser.py`).

use std::borrow::Cow;

use crate::event::Event;

/// Keeps the first events and the newest ones (nothing stored).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RecentEvents {
    /// Events at the start that are kept (config default 1).
    pub(crate) keep_first: usize,
    /// Events in the returned view (config default 100).
    pub(crate) max_events: usize,
}

impl RecentEvents {
    /// `condense`: `view[:keep_first] + view[-max(0, max_events - len(head)):]`.
    pub(crate) fn condense<'v>(&self, view: Cow<'v, [Event]>) -> Cow<'v, [Event]> {
        let head = &view[..self.keep_first.min(view.len())];
        let tail_len = self.max_events.saturating_sub(head.len());
        // Python `view[-tail_len:]`: `view[-0:]` is the whole view, and a tail longer than the
        // view is the whole view too, so short views repeat their head.
        let tail = if tail_len == 0 { &view[..] } else { &view[view.len().saturating_sub(tail_len)..] };
        Cow::Owned(head.iter().chain(tail).cloned().collect())
    }
}

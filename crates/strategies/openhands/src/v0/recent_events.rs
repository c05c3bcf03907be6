//! V0 `RecentEventsCondenser` (`impl/recent_events_condenser.py`): keeps the first events and
//! the newest ones (nothing stored).

use std::borrow::Cow;

use crate::event::Event;

/// `condense`: `view[:keep_first] + view[-max(0, max_events - len(head)):]`.
pub(crate) fn condense<'v>(view: Cow<'v, [Event]>, keep_first: usize, max_events: usize) -> Cow<'v, [Event]> {
    let head = &view[..keep_first.min(view.len())];
    let tail_len = max_events.saturating_sub(head.len());
    // Python `view[-tail_len:]`: `view[-0:]` is the whole view, and a tail longer than the
    // view is the whole view too, so short views repeat their head.
    let tail = if tail_len == 0 { &view[..] } else { &view[view.len().saturating_sub(tail_len)..] };
    Cow::Owned(head.iter().chain(tail).cloned().collect())
}

//! Per-thread memos of costly views and folds, by log version.
//!
//! The runner projects the log, then asks `decide`, then `compact`, all at one log state, and
//! each of them needs the same event view. A memo here holds the newest one per thread, keyed
//! by [`LogVersion`] (a log only grows, so one version is one set of entries) and by whatever
//! else the value depends on (a V0 pipeline). What is folded over the whole log (the event
//! stream) is a [`compactbench_core::fold::Fold`], extended as the log grows instead of rebuilt.

use std::cell::RefCell;
use std::rc::Rc;
use std::thread::LocalKey;

use compactbench_core::{Log, LogVersion};

/// One memo slot: the key it was computed for and the value.
pub(crate) type Slot<K, T> = RefCell<Option<(LogVersion, K, Rc<T>)>>;

/// The value in `slot` when it was computed for this log state and `key`, else `compute()`
/// (which then replaces it).
pub(crate) fn get<K: PartialEq + 'static, T: 'static>(
    slot: &'static LocalKey<Slot<K, T>>,
    log: &Log,
    key: K,
    compute: impl FnOnce() -> T,
) -> Rc<T> {
    let version = log.version();
    if let Some(hit) = slot.with_borrow(|s| s.as_ref().filter(|(v, k, _)| *v == version && *k == key).map(|(_, _, t)| t.clone())) {
        return hit;
    }
    let value = Rc::new(compute());
    slot.set(Some((version, key, value.clone())));
    value
}

/// A memo slot for values that depend on a log's events only (see [`get_for_events`]).
pub(crate) type EventsSlot<K, T> = RefCell<Option<(LogVersion, usize, K, Rc<T>)>>;

/// Like [`get`], but the value holds for every later state of the log with the same events
/// (`events_end`, [`crate::event::Stream::events_end`]): records appended without an event,
/// such as V0's stand-in checkpoints, do not recompute it.
pub(crate) fn get_for_events<K: PartialEq + 'static, T: 'static>(
    slot: &'static LocalKey<EventsSlot<K, T>>,
    log: &Log,
    events_end: usize,
    key: K,
    compute: impl FnOnce() -> T,
) -> Rc<T> {
    let version = log.version();
    let hit = slot.with_borrow(|s| s.as_ref().filter(|(v, end, k, _)| version.extends(*v) && *end == events_end && *k == key).map(|(.., t)| t.clone()));
    if let Some(hit) = hit {
        return hit;
    }
    let value = Rc::new(compute());
    slot.set(Some((version, events_end, key, value.clone())));
    value
}

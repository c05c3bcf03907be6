//! Per-thread memos of costly views and folds, by log version.
//!
//! The runner projects the log, then asks `decide`, then `compact`, all at one log state, and
//! each of them needs the same event view. A memo here holds the newest one per thread, keyed
//! by [`LogVersion`] (a log only grows, so one version is one set of entries) and by whatever
//! else the value depends on (a V0 pipeline). What is folded over the whole log (the event
//! stream) is a [`Fold`], extended entry by entry as the log grows instead of rebuilt.

use std::cell::RefCell;
use std::rc::Rc;
use std::thread::LocalKey;

use compactbench_core::{Entry, EntryId, Log, LogVersion};

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

/// A value folded over a log's entries in order, one entry at a time. Whatever is built from
/// the whole log at every state (the event stream, the stand-ins recorded so far) is one:
/// kept per thread, it is extended by the entries appended since, not rebuilt.
pub(crate) trait Fold: Clone + Default + 'static {
    /// Takes in the next entry.
    fn add(&mut self, id: EntryId, entry: &Entry);
}

/// The folds kept per thread, newest first: two, because a strategy that projects a copy of
/// the log with its own checkpoint appended (a new log identity) goes back to the runner's
/// log right after.
pub(crate) type Folds<T> = RefCell<Vec<(LogVersion, Rc<T>)>>;

/// `T` folded over every entry of `log`, extended from a kept fold of an earlier state of
/// the same log when there is one.
pub(crate) fn fold<T: Fold>(kept: &'static LocalKey<Folds<T>>, log: &Log) -> Rc<T> {
    const KEEP: usize = 2;
    let version = log.version();
    kept.with_borrow_mut(|kept| {
        let (from, mut value) = match kept.iter().position(|(v, _)| version.extends(*v)) {
            Some(i) if kept[i].0 == version => {
                let hit = kept.remove(i);
                kept.insert(0, hit.clone());
                return hit.1;
            }
            // Extended in place unless a caller still holds it.
            Some(i) => {
                let (v, value) = kept.remove(i);
                (v.len(), Rc::try_unwrap(value).unwrap_or_else(|shared| T::clone(&shared)))
            }
            None => (0, T::default()),
        };
        for (id, entry) in log.entries().skip(from) {
            value.add(id, entry);
        }
        let value = Rc::new(value);
        kept.insert(0, (version, value.clone()));
        kept.truncate(KEEP);
        value
    })
}

//! Values folded over a log's entries, kept per thread and extended as the log grows.
//!
//! A strategy that needs something computed from every entry at every log state (an event
//! stream, each message's estimate) would walk the whole log per request, which makes a replay
//! quadratic in its length. Because a log only grows and [`LogVersion::extends`] says when one
//! state continues another, such a value can instead be kept and fed the new entries only.

use std::cell::RefCell;
use std::rc::Rc;
use std::thread::LocalKey;

use crate::{Entry, EntryId, Log, LogVersion};

/// A value folded over a log's entries in order, one entry at a time.
pub trait Fold: Clone + Default + 'static {
    /// Takes in the next entry. It must not ask [`fold`] for a fold of the same type (the
    /// kept folds are borrowed while it runs).
    fn add(&mut self, id: EntryId, entry: &Entry);
}

/// The folds kept per thread, newest first: two, because a strategy that projects a copy of
/// the log with its own checkpoint appended (a new log identity, folded from the runner's
/// log's fold) goes back to the runner's log right after.
pub type Folds<T> = RefCell<Vec<(LogVersion, Rc<T>)>>;

/// `T` folded over every entry of `log`, extended from a kept fold of an earlier state of
/// the same log when there is one.
pub fn fold<T: Fold>(kept: &'static LocalKey<Folds<T>>, log: &Log) -> Rc<T> {
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
            Some(i) if version.same_log(kept[i].0) => {
                let (v, value) = kept.remove(i);
                (v.entries(), Rc::try_unwrap(value).unwrap_or_else(|shared| T::clone(&shared)))
            }
            // The log this one was cloned from: a copy is extended, and the original's fold
            // stays kept for it (a strategy clones the runner's log, looks at the copy with its
            // checkpoints appended, then the runner's log grows).
            Some(i) => (kept[i].0.entries(), T::clone(&kept[i].1)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Checkpoint, CheckpointKind, Message, Window};

    /// Every entry id it was fed, and how many times `add` ran in all (across clones).
    #[derive(Clone, Default)]
    struct Seen(Vec<u32>);

    thread_local!(static ADDS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) });

    impl Fold for Seen {
        fn add(&mut self, id: EntryId, _: &Entry) {
            ADDS.set(ADDS.get() + 1);
            self.0.push(id.0);
        }
    }

    fn seen(log: &Log) -> Rc<Seen> {
        thread_local!(static KEPT: Folds<Seen> = const { RefCell::new(Vec::new()) });
        fold(&KEPT, log)
    }

    #[test]
    fn a_fold_is_extended_by_new_entries_only_and_never_shared_across_logs() {
        let mut log = Log::from_messages([Message::user("a"), Message::assistant("b")]);
        assert_eq!(seen(&log).0, [0, 1]);
        assert_eq!(ADDS.get(), 2);
        // The same state: kept as it is.
        assert_eq!(seen(&log).0, [0, 1]);
        assert_eq!(ADDS.get(), 2);
        // Grown: only the new entries are fed, even while a caller holds the earlier value.
        let held = seen(&log);
        log.push_checkpoint(Checkpoint::new(CheckpointKind::Prune, Window::Inherit));
        log.push_message(Message::user("c"));
        assert_eq!(seen(&log).0, [0, 1, 2, 3]);
        assert_eq!(ADDS.get(), 4);
        assert_eq!(held.0, [0, 1], "a value a caller holds does not change");
        // A copy is another log: it starts from the original's fold (fed its own entries only),
        // and the original's fold stays kept and unchanged for it.
        let mut copy = log.clone();
        copy.push_message(Message::assistant("d"));
        assert_eq!(seen(&copy).0, [0, 1, 2, 3, 4]);
        assert_eq!(ADDS.get(), 5);
        log.push_message(Message::assistant("e"));
        assert_eq!(seen(&log).0, [0, 1, 2, 3, 4]);
        assert_eq!(ADDS.get(), 6);
        // Both grown apart: each extends its own fold (the original's has an entry the copy
        // does not hold, so it is no start for the copy).
        log.push_message(Message::assistant("f"));
        assert_eq!(seen(&log).0, [0, 1, 2, 3, 4, 5]);
        copy.push_message(Message::user("g"));
        assert_eq!(seen(&copy).0, [0, 1, 2, 3, 4, 5]);
        assert_eq!(ADDS.get(), 8);
        assert!(!copy.version().extends(log.version()) && !log.version().extends(copy.version()));
        assert!(copy.clone().version().extends(copy.version()));
    }
}

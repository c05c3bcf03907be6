//! A view of events turned into view messages: each is a log message shown as it is, or a
//! message built in its place (a summary, part of a batch, a stand-in).

use compactbench_core::{EntryId, Log, Message, Origin, View, ViewMessage};

use crate::event;

/// One message of a view as rendered: the log message at `origin` as it is (`built` is
/// `None`), or the message built in its place.
#[derive(Clone, Debug)]
pub(crate) struct Rendered {
    pub(crate) origin: Origin,
    pub(crate) built: Option<Message>,
}

impl Rendered {
    /// Log message `m` (at `entry`) showing only `parts`.
    pub(crate) fn entry(entry: EntryId, m: &Message, parts: &[usize]) -> Rendered {
        Rendered { origin: Origin::Entry(entry), built: (!event::is_whole(m, parts)).then(|| event::subset(m, parts)) }
    }

    fn to_view_message(&self, log: &Log) -> ViewMessage {
        let message = match (&self.built, self.origin) {
            (Some(built), _) => built.clone(),
            (None, Origin::Entry(entry)) => log.message(entry).expect("rendered from a log message").clone(),
            (None, _) => unreachable!("only log messages are rendered as they are"),
        };
        ViewMessage { origin: self.origin, message }
    }

    /// Whether `vm` shows what this does.
    fn shows(&self, vm: &ViewMessage) -> bool {
        vm.origin == self.origin && self.built.as_ref().is_none_or(|b| *b == vm.message)
    }
}

/// The view of `rendered` messages.
pub(crate) fn materialize(log: &Log, rendered: &[Rendered]) -> View {
    View { messages: rendered.iter().map(|r| r.to_view_message(log)).collect() }
}

/// Brings `view`, [`materialize`]d at an earlier state of `log`, up to date with `rendered`:
/// messages that are the same at the same place stay, and from the first difference on they
/// are made anew (a view mostly grows at its end, and copying every message was most of the
/// cost of rendering it).
pub(crate) fn bring_up_to_date(log: &Log, view: &mut View, rendered: &[Rendered]) {
    let same = view.messages.iter().zip(rendered).take_while(|(vm, r)| r.shows(vm)).count();
    view.messages.truncate(same);
    view.messages.extend(rendered[same..].iter().map(|r| r.to_view_message(log)));
}

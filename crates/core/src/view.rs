//! The working view a strategy projects from the log, and the default projection.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::{Checkpoint, EntryId, Log, Message, Role, SummaryPosition, Window};

/// Where a view message comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "from", content = "id", rename_all = "snake_case")]
pub enum Origin {
    /// A log message shown as it is.
    Entry(EntryId),
    /// A log message shown through a checkpoint's replacement: `(message, checkpoint)`.
    Replaced(EntryId, EntryId),
    /// The summary of the checkpoint with this id.
    Summary(EntryId),
    /// A message the checkpoint with this id re-injected.
    Injected(EntryId),
}

impl Origin {
    /// The log message this view message stands for, if it stands for one.
    pub fn entry(self) -> Option<EntryId> {
        match self {
            Origin::Entry(e) | Origin::Replaced(e, _) => Some(e),
            Origin::Summary(_) | Origin::Injected(_) => None,
        }
    }
}

/// One message of a view with its origin.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ViewMessage {
    /// Where it comes from.
    pub origin: Origin,
    /// The message as the model sees it.
    pub message: Message,
}

/// The working conversation: what the next request is built from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct View {
    /// Messages in order.
    pub messages: Vec<ViewMessage>,
}

impl View {
    /// Number of messages.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether the view is empty.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The messages without origins.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Message> {
        self.messages.iter().map(|m| &m.message)
    }

    /// Index of the newest assistant message carrying provider usage, and that usage.
    pub fn last_usage(&self) -> Option<(usize, crate::Usage)> {
        self.messages
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, m)| (m.message.role == Role::Assistant).then_some(()).and(m.message.usage.map(|u| (i, u))))
    }
}

/// The state of the newest window-setting checkpoint, plus the replacements of all.
struct Resolved<'a> {
    /// Id of the checkpoint that set the window, and the checkpoint.
    anchor: Option<(EntryId, &'a Checkpoint)>,
    /// Log message -> (replacement, checkpoint that made it); later checkpoints win.
    replacements: HashMap<EntryId, (&'a Message, EntryId)>,
}

fn resolve(log: &Log) -> Resolved<'_> {
    let mut anchor = None;
    let mut replacements = HashMap::new();
    for (id, cp) in log.checkpoints() {
        if cp.window != Window::Inherit {
            anchor = Some((id, cp));
        }
        for r in &cp.replacements {
            replacements.insert(r.entry, (&r.message, id));
        }
    }
    Resolved { anchor, replacements }
}

/// The projection most harnesses use, driven entirely by checkpoint data:
///
/// 1. leading system messages of the log (the system prompt is never compacted away);
/// 2. the summary of the newest window-setting checkpoint, if placed [`SummaryPosition::AfterSystem`];
/// 3. that checkpoint's re-injected messages;
/// 4. the messages before it that its [`Window`] keeps;
/// 5. the summary, if placed [`SummaryPosition::AfterKept`];
/// 6. every message after it.
///
/// Replacements from every checkpoint so far apply to the messages of steps 4 and 6; a later
/// replacement of the same message wins. System messages after the first non-system message
/// are treated like any other message.
pub fn default_projection(log: &Log) -> View {
    let resolved = resolve(log);
    let mut view = View::default();
    let shown = |id: EntryId, message: &Message| -> ViewMessage {
        match resolved.replacements.get(&id) {
            Some((m, by)) => ViewMessage { origin: Origin::Replaced(id, *by), message: (*m).clone() },
            None => ViewMessage { origin: Origin::Entry(id), message: message.clone() },
        }
    };

    let mut messages = log.messages().peekable();
    let mut leading_system = BTreeSet::new();
    while let Some((id, m)) = messages.next_if(|(_, m)| m.role == Role::System) {
        leading_system.insert(id);
        view.messages.push(shown(id, m));
    }

    let Some((anchor_id, cp)) = resolved.anchor else {
        view.messages.extend(log.messages().filter(|(id, _)| !leading_system.contains(id)).map(|(id, m)| shown(id, m)));
        return view;
    };

    let summary = cp.summary.as_ref().map(|s| ViewMessage { origin: Origin::Summary(anchor_id), message: s.clone() });
    if cp.summary_position == SummaryPosition::AfterSystem {
        view.messages.extend(summary.clone());
    }
    view.messages.extend(
        cp.injected.iter().map(|m| ViewMessage { origin: Origin::Injected(anchor_id), message: m.clone() }),
    );
    let kept: Box<dyn Fn(EntryId) -> bool> = match &cp.window {
        Window::Inherit => unreachable!("an anchor sets a window"),
        Window::From(first) => {
            let first = *first;
            Box::new(move |id| id >= first)
        }
        Window::Kept(ids) => {
            let set: BTreeSet<EntryId> = ids.iter().copied().collect();
            Box::new(move |id| set.contains(&id))
        }
    };
    view.messages.extend(
        log.messages()
            .filter(|(id, _)| *id < anchor_id && !leading_system.contains(id) && kept(*id))
            .map(|(id, m)| shown(id, m)),
    );
    if cp.summary_position == SummaryPosition::AfterKept {
        view.messages.extend(summary);
    }
    view.messages.extend(log.messages().filter(|(id, _)| *id > anchor_id).map(|(id, m)| shown(id, m)));
    view
}

/// Where the message standing for log entry `entry` is in a default projection. Such
/// messages come in ascending entry order (leading system messages, kept ones, later ones),
/// with only a few messages standing for none (the summary and re-injected messages) among
/// them, so a binary search that steps over those finds it.
pub(crate) fn position_of(view: &View, entry: EntryId) -> Option<usize> {
    let messages = &view.messages;
    let (mut lo, mut hi) = (0, messages.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let Some((at, here)) = messages[mid..hi].iter().enumerate().find_map(|(k, vm)| vm.origin.entry().map(|e| (mid + k, e))) else {
            hi = mid;
            continue;
        };
        match here.cmp(&entry) {
            std::cmp::Ordering::Equal => return Some(at),
            std::cmp::Ordering::Less => lo = at + 1,
            std::cmp::Ordering::Greater => hi = mid,
        }
    }
    None
}

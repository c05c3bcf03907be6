//! Tool results rewritten in the view (truncated or masked), as checkpoint data.

use std::collections::BTreeMap;

use compactbench_core::{Offload, Part, Replacement, View, VirtualStore};

/// A tool result rewritten in the view, with the file that holds its full content.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Rewrite {
    /// (view index, part index) of the tool result.
    pub(crate) at: (usize, usize),
    /// The new result text.
    pub(crate) text: String,
    /// Whether the result keeps its failure flag (`false` once the response became `{output}`).
    pub(crate) is_error: bool,
    /// Path of the saved file in the virtual store.
    pub(crate) file: String,
    /// What the file holds.
    pub(crate) saved: String,
}

/// Saves every rewritten output to its file and returns the offloads, plus one replacement
/// per view message that `shown` keeps (all its rewritten parts applied to the message as the
/// view shows it now, so earlier replacements carry over).
pub(crate) fn apply(
    view: &View,
    rewrites: &[Rewrite],
    shown: impl Fn(usize) -> bool,
    store: &mut VirtualStore,
) -> (Vec<Replacement>, Vec<Offload>) {
    let mut offloads = Vec::new();
    let mut by_message: BTreeMap<usize, Vec<&Rewrite>> = BTreeMap::new();
    for r in rewrites {
        store.write(r.file.clone(), r.saved.clone());
        let entry = view.messages[r.at.0].origin.entry();
        offloads.push(Offload { path: r.file.clone(), entries: entry.into_iter().collect() });
        if shown(r.at.0) {
            by_message.entry(r.at.0).or_default().push(r);
        }
    }
    let mut replacements = Vec::new();
    for (i, rs) in by_message {
        let vm = &view.messages[i];
        let Some(entry) = vm.origin.entry() else { continue };
        let mut message = vm.message.clone();
        for r in rs {
            if let Some(Part::ToolResult { text, is_error, .. }) = message.parts.get_mut(r.at.1) {
                *text = r.text.clone();
                *is_error = r.is_error;
            }
        }
        replacements.push(Replacement { entry, message });
    }
    (replacements, offloads)
}

//! The crate's history-size estimate (Antigravity's own is unknown): the newest fresh
//! reply's provider usage plus `ceil(chars / 4)` of what came after it.

pub(crate) use compactbench_core::estimate::message_chars_div4_ceil as message_tokens;

/// The size before a request: [`compactbench_core::estimate::fresh_usage_plus_chars_div4`].
pub(crate) fn history_tokens(log: &compactbench_core::Log, view: &compactbench_core::View) -> u64 {
    compactbench_core::estimate::fresh_usage_plus_chars_div4(log, view)
}

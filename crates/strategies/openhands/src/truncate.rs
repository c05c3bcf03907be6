//! OpenHands' two middle truncations of long text: V0 `truncate_content`
//! (`openhands/events/serialization/event.py`) and SDK `maybe_truncate`
//! (`openhands/sdk/utils/truncate.py`). Lengths are Python's, in code points.

use compactbench_core::estimate;

/// V0 `truncate_content` marker (literal).
const V0_MARKER: &str = "\n[... Observation truncated due to length ...]\n";

/// The first `n` characters of `s`.
pub(crate) fn head(s: &str, n: usize) -> &str {
    // Tool output is mostly ASCII, where characters are bytes: a vectorised check instead of
    // walking the characters of every long observation at every request.
    if s.len() <= n {
        return s;
    }
    if s.as_bytes()[..n].is_ascii() {
        return &s[..n];
    }
    &s[..s.char_indices().nth(n).map_or(s.len(), |(i, _)| i)]
}

/// Whether `s` is longer than `max` characters. A string has at most as many characters as
/// bytes, so most are answered without counting.
pub(crate) fn longer_than(s: &str, max: usize) -> bool {
    s.len() > max && s.chars().count() > max
}

/// V0 `truncate_content`: keeps the first and last `max // 2` characters around the marker.
pub(crate) fn v0(content: &str, max: usize) -> String {
    if !longer_than(content, max) {
        return content.to_owned();
    }
    let n = content.chars().count();
    let half = max / 2;
    // Python's `content[-0:]` is the whole string; `max` of 0 or 1 is never configured.
    let tail = if half == 0 { content } else { &content[head(content, n - half).len()..] };
    [head(content, half), V0_MARKER, tail].concat()
}

/// SDK `maybe_truncate(content, after, notice)` (without saving the full content to a file):
/// the head and tail of `content` around `notice`, `after` characters in all.
pub(crate) fn sdk(content: &str, after: usize, notice: &str) -> String {
    if after == 0 || !longer_than(content, after) {
        return content.to_owned();
    }
    let n = estimate::code_points(content) as usize;
    let notice_len = notice.chars().count();
    if notice_len >= after {
        return head(notice, after).to_owned();
    }
    let available = after - notice_len;
    let head_len = available / 2 + available % 2;
    let tail_len = available - head_len;
    let tail = &content[head(content, n - tail_len).len()..];
    [head(content, head_len), notice, tail].concat()
}

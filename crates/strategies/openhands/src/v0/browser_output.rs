//! V0 `BrowserOutputCondenser` (`impl/browser_output_condenser.py`): reduces all but the
//! newest browser outputs to their URL (nothing stored).

use std::borrow::Cow;

use compactbench_core::{Log, Part};

use crate::event::{Event, Kind};
use crate::stream::Stream;

/// V0 tool names whose results are `BrowserOutputObservation`s (CodeAct's `browser` and
/// `web_read`).
const BROWSER_TOOLS: [&str; 2] = ["browser", "web_read"];

/// `condense`: from the newest event back, the first `attention_window` browser outputs stay
/// and each older one becomes "Visited URL <url>" / "Content omitted", the URL being the `url`
/// argument of its call.
pub(crate) fn condense<'v>(log: &Log, stream: &Stream, view: Cow<'v, [Event]>, attention_window: usize) -> Cow<'v, [Event]> {
    let mut seen = 0;
    let mut out: Vec<Event> = view
        .into_owned()
        .into_iter()
        .rev()
        .map(|e| match &e.kind {
            Kind::Observation { name, call_id } if BROWSER_TOOLS.contains(&&**name) => {
                if seen < attention_window {
                    seen += 1;
                    return e;
                }
                let url = url(log, stream, call_id).unwrap_or_default();
                e.masked(format!("Visited URL {url}\nContent omitted").into())
            }
            _ => e,
        })
        .collect();
    out.reverse();
    Cow::Owned(out)
}

/// The `url` argument of call `call_id`.
fn url<'l>(log: &'l Log, stream: &Stream, call_id: &str) -> Option<&'l str> {
    let message = log.message(stream.call(call_id)?)?;
    message.parts.iter().rev().find_map(|p| match p {
        Part::ToolCall { id, args, .. } if id == call_id => args.get("url")?.as_str(),
        _ => None,
    })
}

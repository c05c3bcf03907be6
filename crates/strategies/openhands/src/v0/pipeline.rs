//! V0 `CondenserPipeline` (`impl/pipeline.py`): the configured condensers run in order, each
//! on the view the one before returned, until one returns a condensation. A single condenser
//! is a pipeline of one.

use std::borrow::Cow;

use compactbench_core::{Checkpoint, Cx, Error, Log};

use crate::event::Event;
use crate::stream::Stream;
use crate::v0::condenser::Condenser;

/// The view the pipeline hands to the model when nothing condenses: every transform applied
/// to the base view (`View.from_events`).
pub(crate) fn view<'v>(log: &Log, stream: &Stream, base: &'v [Event], pipeline: &[Condenser]) -> Cow<'v, [Event]> {
    pipeline.iter().fold(Cow::Borrowed(base), |view, c| c.transform(log, stream, view))
}

/// The first rolling condenser that wants to condense, with the view it gets and whether that
/// view still carries the condensation request. A transform after the last rolling condenser
/// cannot change that, so it is not run.
fn triggered<'v, 'p>(
    log: &Log,
    stream: &Stream,
    base: &'v [Event],
    pipeline: &'p [Condenser],
    mut request: bool,
) -> Option<(&'p Condenser, Cow<'v, [Event]>, bool)> {
    let last_rolling = pipeline.iter().rposition(Condenser::is_rolling)?;
    let mut view = Cow::Borrowed(base);
    for c in &pipeline[..=last_rolling] {
        if !c.is_rolling() {
            view = c.transform(log, stream, view);
            // V0's masking, browser output and recent events condensers return a new
            // `View(events=...)`, whose `unhandled_condensation_request` is false; only the
            // no-op condenser returns the view it got (openhands-ai 1.0.0,
            // `memory/condenser/impl/*.py`, `memory/view.py`).
            request &= *c == Condenser::NoOp;
        } else if c.should_condense(&view, request) {
            return Some((c, view, request));
        }
    }
    None
}

/// Whether the pipeline returns a condensation for base view `base`.
pub(crate) fn wants(log: &Log, stream: &Stream, base: &[Event], pipeline: &[Condenser], request: bool) -> bool {
    triggered(log, stream, base, pipeline, request).is_some()
}

/// `condense`: the checkpoint of the condensation the pipeline returns, if any (errors
/// propagate, as in V0).
pub(crate) fn condense(
    log: &Log,
    stream: &Stream,
    base: &[Event],
    pipeline: &[Condenser],
    request: bool,
    cx: &mut Cx<'_>,
) -> Result<Option<Checkpoint>, Error> {
    let Some((c, view, request)) = triggered(log, stream, base, pipeline, request) else { return Ok(None) };
    Ok(Some(c.get_condensation(log, &view, cx)?.checkpoint(base, request, c.name())))
}

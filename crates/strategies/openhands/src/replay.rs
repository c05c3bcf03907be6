//! The incremental layer: one run's event stream, its `View.from_events` and its running
//! token count, each grown entry by entry, for the same functions the strategy's
//! from-scratch methods call on the whole log.

use compactbench_core::{Checkpoint, Cx, EntryId, Error, Log, Moment, Plan, Replay, View};

use crate::event::{Event, EventId};
use crate::render;
use crate::sdk::view::FromEvents;
use crate::stream::Stream;
use crate::tokens::Counter;
use crate::v0::view::Kept;
use crate::{request, Condensers};

/// One run of an OpenHands strategy.
pub(crate) struct OpenhandsReplay<'s> {
    condensers: &'s Condensers,
    stream: Stream,
    views: Views,
    /// The view as last rendered, and whether entries were pushed since.
    view: View,
    stale: bool,
}

/// What each side of OpenHands builds its view from.
enum Views {
    Sdk {
        /// `View.from_events` replayed so far.
        from_events: FromEvents,
        /// Its view (properties enforced) at this log state, once asked for.
        view: Option<Vec<Event>>,
        tally: Tally,
    },
    /// V0 `View.from_events` so far (the base view, before the pipeline's transforms).
    V0(Kept),
}

impl<'s> OpenhandsReplay<'s> {
    pub(crate) fn new(condensers: &'s Condensers) -> OpenhandsReplay<'s> {
        let views = match condensers {
            Condensers::SdkNoOp | Condensers::Sdk(_) => {
                Views::Sdk { from_events: FromEvents::default(), view: None, tally: Tally::default() }
            }
            Condensers::V0(_) => Views::V0(Kept::default()),
        };
        OpenhandsReplay { condensers, stream: Stream::default(), views, view: View::default(), stale: false }
    }
}

impl Views {
    /// The SDK view or the V0 base view at this log state, with the SDK view's tally.
    fn events(&mut self) -> (&[Event], Option<&mut Tally>) {
        match self {
            Views::Sdk { from_events, view, tally } => (view.get_or_insert_with(|| from_events.view()), Some(tally)),
            Views::V0(kept) => (kept.events(), None),
        }
    }
}

impl Replay for OpenhandsReplay<'_> {
    fn push(&mut self, log: &Log, id: EntryId) {
        let slots = self.stream.push(log, id);
        match &mut self.views {
            Views::Sdk { from_events, view, .. } => {
                for slot in slots {
                    from_events.add(log, slot);
                }
                *view = None;
            }
            Views::V0(kept) => kept.add(log, slots),
        }
        self.stale = true;
    }

    fn view(&mut self, log: &Log) -> &View {
        if self.stale {
            let rendered = self.condensers.messages(log, &self.stream, self.views.events().0);
            render::bring_up_to_date(log, &mut self.view, &rendered);
            self.stale = false;
        }
        &self.view
    }

    fn decide(&mut self, log: &Log, at: Moment, cx: &Cx<'_>) -> Option<Plan> {
        let request = request(at)?;
        let (view, tally) = self.views.events();
        let tokens = || tally.expect("the SDK view is tallied").total(&Counter::new(cx.tokenizer, &cx.model.name), log, view);
        Plan::from_decision(log, at, self.condensers.decide(log, &self.stream, view, tokens, request, cx))
    }

    fn compact(&mut self, log: &Log, plan: Plan, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, Error> {
        plan.check(log);
        let (view, tally) = self.views.events();
        let tokens = || tally.expect("the SDK view is tallied").total(&Counter::new(cx.tokenizer, &cx.model.name), log, view);
        self.condensers.condense(log, &self.stream, view, tokens, plan.at() == Moment::Overflow, cx)
    }
}

/// [`Counter::total`] of the SDK views of one run, counted from the first event that differs
/// from the view counted before (a view mostly grows, or keeps its head through a
/// condensation). What an event adds depends only on it and the event before it, and an event
/// id names the same content at every state of a log, so equal id pairs add equal counts.
/// One run counts with one tokenizer and model.
#[derive(Default)]
struct Tally {
    /// For each event of the view counted last: its id, the id before it and the running total.
    counted: Vec<(Option<EventId>, EventId, u64)>,
}

impl Tally {
    fn total(&mut self, counter: &Counter<'_>, log: &Log, events: &[Event]) -> u64 {
        let previous = |i: usize| i.checked_sub(1).map(|j| &events[j]);
        let shared = self
            .counted
            .iter()
            .zip(events)
            .enumerate()
            .take_while(|(i, ((before, id, _), e))| *id == e.id && *before == previous(*i).map(|p| p.id))
            .count();
        self.counted.truncate(shared);
        let mut total = self.counted.last().map_or(0, |&(.., running)| running);
        for (i, e) in events.iter().enumerate().skip(shared) {
            total += counter.event(log, previous(i), e);
            self.counted.push((previous(i).map(|p| p.id), e.id, total));
        }
        3 + total
    }
}

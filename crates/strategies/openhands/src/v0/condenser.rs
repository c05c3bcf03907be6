//! V0 `Condenser` and `RollingCondenser` (`openhands/memory/condenser/condenser.py`): one
//! configured condenser of the family, each in its own module.

use std::borrow::Cow;

use compactbench_core::{Cx, Error, Log};

use crate::event::Event;
use crate::stream::Stream;
use crate::v0::condensation::Condensation;
use crate::v0::llm_summarizing::LlmSummarizing;
use crate::v0::structured_summary::StructuredSummary;
use crate::v0::{
    amortized_forgetting, browser_output, conversation_window, llm_attention, observation_masking, recent_events,
};

/// One V0 condenser (validated settings).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Condenser {
    /// `NoOpCondenser`.
    NoOp,
    ObservationMasking { attention_window: usize },
    BrowserOutput { attention_window: usize },
    RecentEvents { keep_first: usize, max_events: usize },
    LlmSummarizing(LlmSummarizing),
    StructuredSummary(StructuredSummary),
    AmortizedForgetting { max_size: usize, keep_first: usize },
    LlmAttention { max_size: usize, keep_first: usize },
    ConversationWindow,
}

impl Condenser {
    /// Rolling condensers emit condensation events; the others transform every view.
    pub(crate) fn is_rolling(&self) -> bool {
        matches!(
            self,
            Condenser::LlmSummarizing(_)
                | Condenser::StructuredSummary(_)
                | Condenser::AmortizedForgetting { .. }
                | Condenser::LlmAttention { .. }
                | Condenser::ConversationWindow
        )
    }

    /// `RollingCondenser.should_condense`: over `max_size` events or a condensation request;
    /// the conversation window on a request only.
    pub(crate) fn should_condense(&self, view: &[Event], request: bool) -> bool {
        let max_size = match *self {
            Condenser::LlmSummarizing(ref c) | Condenser::StructuredSummary(StructuredSummary(ref c)) => c.max_size,
            Condenser::AmortizedForgetting { max_size, .. } | Condenser::LlmAttention { max_size, .. } => max_size,
            Condenser::ConversationWindow => return request,
            _ => return false,
        };
        view.len() > max_size || request
    }

    /// `condense` of a condenser that is not rolling: the view it returns (nothing stored).
    /// Borrowed in, borrowed out where it changes nothing.
    pub(crate) fn transform<'v>(&self, log: &Log, stream: &Stream, view: Cow<'v, [Event]>) -> Cow<'v, [Event]> {
        match *self {
            Condenser::ObservationMasking { attention_window } => observation_masking::condense(view, attention_window),
            Condenser::BrowserOutput { attention_window } => browser_output::condense(log, stream, view, attention_window),
            Condenser::RecentEvents { keep_first, max_events } => recent_events::condense(view, keep_first, max_events),
            _ => view,
        }
    }

    /// `get_condensation` of a rolling condenser.
    pub(crate) fn get_condensation(&self, log: &Log, view: &[Event], cx: &mut Cx<'_>) -> Result<Condensation, Error> {
        match *self {
            Condenser::LlmSummarizing(ref c) => c.get_condensation(log, view, cx),
            Condenser::StructuredSummary(ref c) => c.get_condensation(log, view, cx),
            Condenser::AmortizedForgetting { max_size, keep_first } => {
                amortized_forgetting::get_condensation(view, max_size, keep_first)
            }
            Condenser::LlmAttention { max_size, keep_first } => {
                llm_attention::get_condensation(log, view, max_size, keep_first, cx)
            }
            Condenser::ConversationWindow => Ok(conversation_window::get_condensation(view)),
            _ => unreachable!("only rolling condensers condense"),
        }
    }

    /// The name recorded in checkpoint details.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Condenser::NoOp => "noop",
            Condenser::ObservationMasking { .. } => "observation_masking",
            Condenser::BrowserOutput { .. } => "browser_output",
            Condenser::RecentEvents { .. } => "recent_events",
            Condenser::LlmSummarizing(_) => "llm_summarizing",
            Condenser::StructuredSummary(_) => "structured_summary",
            Condenser::AmortizedForgetting { .. } => "amortized_forgetting",
            Condenser::LlmAttention { .. } => "llm_attention",
            Condenser::ConversationWindow => "conversation_window",
        }
    }
}

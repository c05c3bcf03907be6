//! V0 `Condenser` and `RollingCondenser` (`openhands/memory/condenser/condenser.py`): one
//! configured condenser of the family, each in its own module.

use std::borrow::Cow;

use compactbench_core::{Cx, Error, Log};

use crate::event::Event;
use crate::stream::Stream;
use crate::v0::amortized_forgetting::AmortizedForgetting;
use crate::v0::browser_output::BrowserOutput;
use crate::v0::condensation::Condensation;
use crate::v0::conversation_window;
use crate::v0::llm_attention::LlmAttention;
use crate::v0::llm_summarizing::LlmSummarizing;
use crate::v0::observation_masking::ObservationMasking;
use crate::v0::recent_events::RecentEvents;
use crate::v0::structured_summary::StructuredSummary;

/// One V0 condenser (validated settings).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Condenser {
    /// `NoOpCondenser`.
    NoOp,
    ObservationMasking(ObservationMasking),
    BrowserOutput(BrowserOutput),
    RecentEvents(RecentEvents),
    LlmSummarizing(LlmSummarizing),
    StructuredSummary(StructuredSummary),
    AmortizedForgetting(AmortizedForgetting),
    LlmAttention(LlmAttention),
    ConversationWindow,
}

impl Condenser {
    /// Rolling condensers emit condensation events; the others transform every view.
    pub(crate) fn is_rolling(&self) -> bool {
        matches!(
            self,
            Condenser::LlmSummarizing(_)
                | Condenser::StructuredSummary(_)
                | Condenser::AmortizedForgetting(_)
                | Condenser::LlmAttention(_)
                | Condenser::ConversationWindow
        )
    }

    /// `RollingCondenser.should_condense`: over `max_size` events or a condensation request;
    /// the conversation window on a request only.
    pub(crate) fn should_condense(&self, view: &[Event], request: bool) -> bool {
        let max_size = match self {
            Condenser::LlmSummarizing(c) | Condenser::StructuredSummary(StructuredSummary(c)) => c.max_size,
            Condenser::AmortizedForgetting(c) => c.max_size,
            Condenser::LlmAttention(c) => c.max_size,
            Condenser::ConversationWindow => return request,
            _ => return false,
        };
        view.len() > max_size || request
    }

    /// `condense` of a condenser that is not rolling: the view it returns (nothing stored).
    /// Borrowed in, borrowed out where it changes nothing.
    pub(crate) fn transform<'v>(&self, log: &Log, stream: &Stream, view: Cow<'v, [Event]>) -> Cow<'v, [Event]> {
        match self {
            Condenser::ObservationMasking(c) => c.condense(view),
            Condenser::BrowserOutput(c) => c.condense(log, stream, view),
            Condenser::RecentEvents(c) => c.condense(view),
            _ => view,
        }
    }

    /// `get_condensation` of a rolling condenser.
    pub(crate) fn get_condensation(&self, log: &Log, view: &[Event], cx: &mut Cx<'_>) -> Result<Condensation, Error> {
        match self {
            Condenser::LlmSummarizing(c) => c.get_condensation(log, view, cx),
            Condenser::StructuredSummary(c) => c.get_condensation(log, view, cx),
            Condenser::AmortizedForgetting(c) => c.get_condensation(view),
            Condenser::LlmAttention(c) => c.get_condensation(log, view, cx),
            Condenser::ConversationWindow => Ok(conversation_window::get_condensation(view)),
            _ => unreachable!("only rolling condensers condense"),
        }
    }

    /// The name recorded in checkpoint details.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Condenser::NoOp => "noop",
            Condenser::ObservationMasking(_) => "observation_masking",
            Condenser::BrowserOutput(_) => "browser_output",
            Condenser::RecentEvents(_) => "recent_events",
            Condenser::LlmSummarizing(_) => "llm_summarizing",
            Condenser::StructuredSummary(_) => "structured_summary",
            Condenser::AmortizedForgetting(_) => "amortized_forgetting",
            Condenser::LlmAttention(_) => "llm_attention",
            Condenser::ConversationWindow => "conversation_window",
        }
    }
}

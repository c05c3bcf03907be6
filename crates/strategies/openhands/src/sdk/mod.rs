//! The software-agent-sdk side: `View.from_events` ([`view`]), the messages sent for a view
//! ([`messages`]) and `LLMSummarizingCondenser` ([`condenser`]).

pub(crate) mod condenser;
pub(crate) mod messages;
pub(crate) mod view;

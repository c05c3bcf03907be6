//! The V0 side (All-Hands-AI/OpenHands `openhands/memory`): `View.from_events` ([`view`]),
//! each condenser of the family in its own module, the pipeline ([`pipeline`]) and what
//! `ConversationMemory.process_events` sends ([`messages`]).

pub(crate) mod amortized_forgetting;
pub(crate) mod browser_output;
pub(crate) mod condensation;
pub(crate) mod condenser;
pub(crate) mod conversation_window;
pub(crate) mod llm_attention;
pub(crate) mod llm_summarizing;
pub(crate) mod messages;
pub(crate) mod observation_masking;
pub(crate) mod pipeline;
pub(crate) mod recent_events;
pub(crate) mod structured_summary;
pub(crate) mod view;

//! The session model: what the generator and the transcript replays produce and the driver
//! replays, step by step.

use compactbench_core::Message;

use crate::facts::Fact;

/// One event of a session as it happened.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// The user speaks; a new turn starts.
    User(Message),
    /// The model answers; a request is made right before it.
    Assistant(Message),
    /// Tool results arrive.
    Tool(Message),
}

impl Step {
    /// The message of the step.
    pub fn message(&self) -> &Message {
        match self {
            Step::User(m) | Step::Assistant(m) | Step::Tool(m) => m,
        }
    }
}

/// A generated session.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    /// The system prompt.
    pub system: Message,
    /// Events in order.
    pub steps: Vec<Step>,
    /// Planted facts.
    pub facts: Vec<Fact>,
    /// Exploration spans a harness could delegate to a subagent, in order.
    pub spans: Vec<Span>,
    /// What the user tells the harness about compaction.
    pub instructions: UserInstructions,
}

/// What the user tells the harness about compaction: a standing instruction in project memory
/// and manual compactions with instructions. The memory travels as the system prompt does (its
/// text ends [`Session::system`]); each manual command is given to the strategy at its step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInstructions {
    /// The project memory file's text, also the tail of the system prompt (`""`: none).
    pub memory: String,
    /// Its compaction instruction, one line of `memory` (`""`: none).
    pub memory_rule: String,
    /// Manual compactions, in step order.
    pub manual: Vec<Manual>,
}

/// The user types the manual compaction command at the prompt before session step `step` (a
/// user message), after the turn before it has ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manual {
    /// The user step it precedes.
    pub step: usize,
    /// What is typed after the command (`""`: a bare `/compact`).
    pub text: String,
}

/// A run of exploration steps (searches and reads) inside one turn: from an assistant step to
/// the last tool result it leads to, inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// First step (an assistant step).
    pub start: usize,
    /// Last step (a tool result).
    pub end: usize,
}

impl Session {
    /// Number of model requests the session makes (one per assistant step).
    pub fn requests(&self) -> usize {
        self.steps.iter().filter(|s| matches!(s, Step::Assistant(_))).count()
    }
}

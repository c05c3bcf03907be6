//! The summarizer prompt and the summary prefix, paraphrased from `aider/prompts.py`
//! (`summarize`, `summary_prefix`). The transcript headers and `Ok.` are literal and live in
//! `history.rs`.

/// System prompt of the summarizer call (paraphrase of `prompts.summarize`).
pub(crate) const SUMMARIZE_SYSTEM: &str = "\
Give a *short* summary of this excerpt from a longer conversation about programming.
Keep the older parts brief and describe the most recent messages in more detail.
Begin a new paragraph whenever the topic changes.
The conversation carries on after this excerpt, so do *not* close the summary with a wrap-up or conclusion.
The summary *must* name the functions, libraries and packages being discussed.
The summary *must* name the files the assistant refers to inside ```...``` fenced code blocks.
The summary *must not* contain ```...``` fenced code blocks.

Write the summary as the USER speaking in the first person to the ASSISTANT, calling the assistant \"you\".
Open the summary with \"I asked you...\".
";

/// Put in front of the summarizer's reply to form the summary message (paraphrase of
/// `prompts.summary_prefix`; newline-terminated like the original). Worded to the original's
/// size: as many `cl100k_base` and `o200k_base` tokens, alone, before a summary and inside
/// `json.dumps` of the message, so the summary weighs in Aider's decisions (the recursion test,
/// done's size at the next `summarize_start`) what Aider's does. One token more made tokens
/// before differ by one wherever an earlier summary was in done.
pub(crate) const SUMMARY_PREFIX: &str = "Earlier in this chat I told you about several things.\n";

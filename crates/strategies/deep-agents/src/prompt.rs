//! The summary prompt (`DEEPAGENTS_DEFAULT_SUMMARY_PROMPT`: LangChain's `DEFAULT_SUMMARY_PROMPT`
//! plus Deep Agents' media-reference block) and the summary message, both paraphrased. Kept
//! literal: the four section headings, the `<messages>` block with its label, the
//! `<media_reference_information>` tag, the `<summary>` delimiters and LangChain's no-path
//! summary prefix.

/// The prompt with `{messages}` where the XML transcript goes.
const SUMMARY_PROMPT: &str = r#"<role>
Context extraction assistant
</role>

<primary_objective>
Your only job here is to pull the most relevant, highest-value context out of the conversation history below.
</primary_objective>

<objective_information>
You are close to the number of input tokens you can take, so the history has to be condensed into its most valuable parts.
What you extract will take the place of the history shown below, so keep only what is needed to keep working toward the overall goal.
</objective_information>

<instructions>
Your extract replaces the conversation history below.
Make sure no finished action gets repeated: focus the extract on what matters most for the overall goal.

Organise the extract under the sections below. Treat each one as a checklist item: fill it in, or write "None" when there is nothing to report:

## SESSION INTENT

The user's main goal or request and the task as a whole, brief but complete enough to explain what the session is for.

## SUMMARY

All of the key context from the history: choices made, conclusions and strategies, the reasons behind important decisions, and the options that were rejected and why.

## ARTIFACTS

The files and other resources that were created, changed or read. For every changed file give its path and a short description of the change, so that no artifact is silently lost.

## NEXT STEPS

The concrete tasks still left to reach the session intent, and what to do next.

</instructions>

The user will send you the whole message history to extract from. Read all of it and weigh carefully which information matters most for the overall goal and has to be kept:

With that in mind, read the entire history and extract the most important and relevant context to replace it, so that room is freed in the conversation.
Answer with the extracted context only, with no text before or after it.

<media_reference_information>
The history can contain XML media reference tags such as:
<image url="/conversation_history/media/{hash}.png" />
Such a tag means the original message carried media that has been kept at that backend path.
Treat the tag and its path as part of the conversation context, and do not invent visual details the surrounding text does not give.
Keep a media reference in your summary when the media may matter later.
The model that reads the summary can call `read_file` on that path to look at the media.
</media_reference_information>

<messages>
Messages to summarize:
{messages}
</messages>"#;

/// The single user message sent to the summary model: the template with the transcript in
/// place, right-trimmed.
pub(crate) fn render(messages_xml: &str) -> String {
    SUMMARY_PROMPT.replacen("{messages}", messages_xml, 1).trim_end().to_owned()
}

/// The summary message's text (`_build_new_messages_with_path`): with a history path, a short
/// preamble naming the file and the summary inside literal `<summary>` delimiters; without one
/// (the offload failed), LangChain's literal prefix.
pub(crate) fn summary_text(summary: &str, file_path: Option<&str>) -> String {
    match file_path {
        Some(path) => format!(
            "This conversation is already under way and its earlier part has been summarized.\n\n\
             The complete earlier conversation was saved to {path}; read it there if you need details from it.\n\n\
             The condensed summary:\n\n<summary>\n{summary}\n</summary>"
        ),
        None => format!("Here is a summary of the conversation to date:\n\n{summary}"),
    }
}

//! One summary through a real server, only when `COMPACTBENCH_OPENAI_BASE_URL` is set (with
//! `COMPACTBENCH_OPENAI_MODEL`, and `COMPACTBENCH_OPENAI_API_KEY` if the server needs one).
//! Unset, it prints that it skipped and passes, so CI and offline runs touch no network.

use compactbench_core::{Summarizer, SummaryRequest};
use compactbench_summarize_http::{OpenAi, OpenAiConfig, ENV_BASE_URL};

#[test]
fn summarizes_a_short_transcript_through_a_real_server() {
    if std::env::var(ENV_BASE_URL).map_or(true, |v| v.trim().is_empty()) {
        eprintln!("skipped: {ENV_BASE_URL} is not set");
        return;
    }
    let client = OpenAi::new(OpenAiConfig::from_env().expect("set COMPACTBENCH_OPENAI_MODEL too")).unwrap();
    let request = SummaryRequest {
        purpose: "history".into(),
        context: compactbench_core::SummaryContext::Fresh,
        system: "You summarize coding-agent conversations for the agent itself.".into(),
        transcript: "[User]: the build fails with error E0425 in src/parser.rs\n\n[Assistant]: I renamed `lexx` to `lex` in src/parser.rs line 12; the build passes now.".into(),
        instructions: "Summarize the conversation in at most three sentences. Keep file names and error codes.".into(),
        max_output_tokens: 200,
    };
    let s = client.summarize(&request).unwrap_or_else(|e| panic!("{} via {}: {e}", client.name(), client.endpoint()));
    eprintln!("{} answered ({} in, {} out, {:?}): {}", client.name(), s.input_tokens, s.output_tokens, s.stop, s.text);
    assert!(!s.text.trim().is_empty());
    assert!(s.input_tokens > 0 && s.output_tokens > 0);
}

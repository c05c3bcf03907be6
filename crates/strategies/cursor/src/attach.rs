//! File condensation for attached context: in full, as signatures, or by name only.

use compactbench_core::estimate::chars_div4_ceil;
use compactbench_core::Message;

use crate::CursorConfig;

/// Line starts that declare something, across common languages \[assume: Cursor does not say
/// how it extracts signatures\].
const DECLARATIONS: &[&str] = &[
    "pub ", "fn ", "async fn ", "struct ", "enum ", "trait ", "impl ", "mod ", "type ", "class ", "interface ",
    "function ", "async function ", "export ", "def ", "async def ", "func ", "public ", "protected ", "private ",
];

/// The declaration lines of `content`, trimmed, with an opening brace or colon dropped.
fn signatures(content: &str) -> Vec<String> {
    content
        .lines()
        .map(str::trim)
        .filter(|l| DECLARATIONS.iter().any(|d| l.starts_with(d)))
        .map(|l| l.trim_end_matches(['{', ':']).trim_end().to_owned())
        .collect()
}

pub(crate) fn attach(config: &CursorConfig, path: &str, content: &str) -> Message {
    let tokens = chars_div4_ceil(content);
    let text = if tokens <= config.condense_at {
        format!("Attached file {path}:\n```\n{content}\n```")
    } else if tokens <= config.name_only_at {
        format!(
            "Attached file {path} (condensed to its signatures, {tokens} tokens in full; read the file to expand it):\n{}",
            signatures(content).join("\n")
        )
    } else {
        format!("Attached file {path} (significantly condensed to its name, {tokens} tokens in full; read the file to expand it).")
    };
    Message::user(text)
}

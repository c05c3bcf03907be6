//! Backend paths the original writes to, with deterministic stand-ins for its random ids.
//!
//! The original names files with `uuid4()` and stamps archive sections with the wall clock.
//! Benchmark runs must be byte-identical, so ids here are FNV-1a hashes of what the file holds
//! (same shape: 32 hex digits, or a version-4 UUID string) and timestamps count compactions.

/// Folder of the summarization history and of evicted human messages.
pub(crate) const HISTORY_PREFIX: &str = "/conversation_history";
/// Folder of evicted tool results.
pub(crate) const LARGE_TOOL_RESULTS_PREFIX: &str = "/large_tool_results";
/// Longest tool-call id used verbatim in a path (`_MAX_TOOL_CALL_PATH_COMPONENT_BYTES`).
const MAX_TOOL_CALL_PATH_COMPONENT_BYTES: usize = 128;

fn fnv1a(seed: u64, parts: &[&str]) -> u64 {
    let mut h = seed;
    for part in parts {
        for b in part.as_bytes().iter().chain(std::iter::once(&0xffu8)) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// 32 hex digits derived from `parts`.
pub(crate) fn hex32(parts: &[&str]) -> String {
    format!("{:016x}{:016x}", fnv1a(0xcbf2_9ce4_8422_2325, parts), fnv1a(0x6c62_272e_07bb_0142, parts))
}

/// A version-4-shaped UUID string derived from `parts`.
pub(crate) fn uuid4(parts: &[&str]) -> String {
    let h = hex32(parts);
    format!("{}-{}-4{}-a{}-{}", &h[0..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
}

/// `/conversation_history/{session_id}.md`.
pub(crate) fn history_file(session_id: &str) -> String {
    format!("{HISTORY_PREFIX}/{session_id}.md")
}

/// `/large_tool_results/{sanitized id}` (`sanitize_tool_call_id`: `.`, `/`, `\` become `_`;
/// over-long ids become `call-<sha256>`, here a hash of the same length class).
pub(crate) fn large_tool_result(call_id: &str) -> String {
    let id = if call_id.is_empty() {
        format!("unknown-{}", &hex32(&["unknown", call_id])[..8])
    } else {
        let sanitized = call_id.replace(['.', '/', '\\'], "_");
        if sanitized.len() > MAX_TOOL_CALL_PATH_COMPONENT_BYTES {
            format!("call-{}", hex32(&[call_id]))
        } else {
            sanitized
        }
    };
    format!("{LARGE_TOOL_RESULTS_PREFIX}/{id}")
}

/// `/conversation_history/media/{hash16}.{ext}`.
pub(crate) fn media_file(hash_parts: &[&str], mime: &str) -> String {
    format!("{HISTORY_PREFIX}/media/{}.{}", &hex32(hash_parts)[..16], extension(mime))
}

/// `mimetypes.guess_extension` for the common types, `bin` otherwise.
fn extension(mime: &str) -> &'static str {
    match mime {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "application/pdf" => "pdf",
        "audio/mpeg" => "mp3",
        "audio/wav" | "audio/x-wav" => "wav",
        "video/mp4" => "mp4",
        "text/plain" => "txt",
        _ => "bin",
    }
}

/// `datetime.now(UTC).isoformat()` stand-in: the compaction's sequence number as microseconds
/// after the epoch, so sections stay ordered and runs stay reproducible.
pub(crate) fn timestamp(round: u64) -> String {
    format!("1970-01-01T00:00:{:02}.{:06}+00:00", round / 1_000_000 % 60, round % 1_000_000)
}

//! Token estimators that harnesses use for their own decisions.
//!
//! The runner measures requests exactly (the `tokens` crate); a strategy decides with the
//! estimate its original uses, picked from here by name. Lengths follow the original's
//! language: JavaScript harnesses count UTF-16 code units, Python ones code points, Go and
//! Rust ones bytes.

/// JavaScript `string.length`: UTF-16 code units.
pub fn utf16_len(s: &str) -> u64 {
    s.encode_utf16().count() as u64
}

/// Python `len(str)`: Unicode code points.
pub fn code_points(s: &str) -> u64 {
    s.chars().count() as u64
}

/// `ceil(utf16_len / 4)` (Pi's `estimateTokens` per text).
pub fn chars_div4_ceil(s: &str) -> u64 {
    utf16_len(s).div_ceil(4)
}

/// `round(utf16_len / 4)`, halves rounded up as JavaScript's `Math.round` does.
pub fn chars_div4_round(s: &str) -> u64 {
    round_div4(utf16_len(s))
}

/// `ceil(bytes / 4)` over UTF-8 bytes (Codex's `approx_token_count`).
pub fn bytes_div4_ceil(s: &str) -> u64 {
    (s.len() as u64).div_ceil(4)
}

/// `n / 4` rounded half up.
pub fn round_div4(n: u64) -> u64 {
    (n + 2) / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimators_round_as_their_originals() {
        assert_eq!(chars_div4_ceil(""), 0);
        assert_eq!(chars_div4_ceil("abcde"), 2);
        assert_eq!(chars_div4_round("abcde"), 1);
        assert_eq!(chars_div4_round("abcdef"), 2, "1.5 rounds up like Math.round");
        // "é" is one UTF-16 unit, two UTF-8 bytes; "😀" is two units, four bytes.
        assert_eq!(utf16_len("é😀"), 3);
        assert_eq!(code_points("é😀"), 2);
        assert_eq!(bytes_div4_ceil("é😀"), 2);
    }
}

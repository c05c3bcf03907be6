//! Media size estimates.

use compactbench_core::Part;

/// Tokens charged for a media item whose size cannot be read (URLs, documents, unknown
/// headers): about the ceiling of Anthropic's image rule (1.15 megapixels / 750).
pub const MEDIA_FALLBACK_TOKENS: u32 = 1_600;

/// Longest image edge after the provider's resize.
const MAX_EDGE: f64 = 1568.0;
/// Most pixels after the provider's resize.
const MAX_PIXELS: f64 = 1_150_000.0;
/// Pixels per token.
const PIXELS_PER_TOKEN: f64 = 750.0;
/// Base64 characters decoded to look for the dimensions.
const HEAD_CHARS: usize = 96 * 1024;

/// A media part for inline base64 data (or none).
pub(crate) fn media_part(mime: &str, base64: Option<&str>) -> Part {
    Part::Media {
        mime: mime.to_string(),
        tokens: estimate(base64),
    }
}

/// A media part for a URL, which may be a `data:` URL carrying the image.
pub(crate) fn media_from_url(url: &str, default_mime: &str) -> Part {
    if let Some(rest) = url.strip_prefix("data:") {
        if let Some((meta, data)) = rest.split_once(',') {
            let mime = meta
                .split(';')
                .next()
                .filter(|m| !m.is_empty())
                .unwrap_or(default_mime);
            let b64 = meta.split(';').any(|p| p == "base64");
            return media_part(mime, b64.then_some(data));
        }
    }
    let mime = guess_mime(url).unwrap_or(default_mime);
    Part::Media {
        mime: mime.to_string(),
        tokens: MEDIA_FALLBACK_TOKENS,
    }
}

fn guess_mime(url: &str) -> Option<&'static str> {
    let lower = url.to_ascii_lowercase();
    let path = lower.split(['?', '#']).next().unwrap_or("");
    [
        (".png", "image/png"),
        (".jpg", "image/jpeg"),
        (".jpeg", "image/jpeg"),
        (".gif", "image/gif"),
        (".webp", "image/webp"),
    ]
    .iter()
    .find(|(ext, _)| path.ends_with(ext))
    .map(|(_, m)| *m)
}

/// Token estimate for inline base64 data.
fn estimate(base64: Option<&str>) -> u32 {
    let Some(data) = base64 else {
        return MEDIA_FALLBACK_TOKENS;
    };
    let head = decode_base64(&data[..floor_char_boundary(data, HEAD_CHARS)]);
    match dimensions(&head) {
        Some((w, h)) if w > 0 && h > 0 => image_tokens(w, h),
        _ => MEDIA_FALLBACK_TOKENS,
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Anthropic's rule: fit into 1568 px long edge and 1.15 MP, then pixels / 750, rounded up.
pub(crate) fn image_tokens(w: u32, h: u32) -> u32 {
    let (w, h) = (f64::from(w), f64::from(h));
    let scale = 1f64
        .min(MAX_EDGE / w.max(h))
        .min((MAX_PIXELS / (w * h)).sqrt());
    let tokens = ((w * scale) * (h * scale) / PIXELS_PER_TOKEN).ceil();
    tokens.clamp(1.0, f64::from(u32::MAX)) as u32
}

/// Decodes base64 (standard or URL-safe), ignoring whitespace and stopping at padding or at the
/// first invalid character.
pub(crate) fn decode_base64(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    for b in s.bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => break,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

fn be16(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from(*b.get(i)?) << 8 | u32::from(*b.get(i + 1)?))
}

fn le16(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from(*b.get(i)?) | u32::from(*b.get(i + 1)?) << 8)
}

fn le24(b: &[u8], i: usize) -> Option<u32> {
    Some(le16(b, i)? | u32::from(*b.get(i + 2)?) << 16)
}

/// Width and height from a PNG, GIF, JPEG or WebP header.
pub(crate) fn dimensions(b: &[u8]) -> Option<(u32, u32)> {
    if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        let w = u32::from_be_bytes(b.get(16..20)?.try_into().ok()?);
        let h = u32::from_be_bytes(b.get(20..24)?.try_into().ok()?);
        return Some((w, h));
    }
    if b.starts_with(b"GIF8") {
        return Some((le16(b, 6)?, le16(b, 8)?));
    }
    if b.starts_with(b"RIFF") && b.get(8..12) == Some(b"WEBP") {
        return match b.get(12..16)? {
            b"VP8 " => Some((le16(b, 26)? & 0x3fff, le16(b, 28)? & 0x3fff)),
            b"VP8L" => {
                let (b0, b1, b2, b3) = (
                    u32::from(*b.get(21)?),
                    u32::from(*b.get(22)?),
                    u32::from(*b.get(23)?),
                    u32::from(*b.get(24)?),
                );
                Some((
                    1 + (b0 | (b1 & 0x3f) << 8),
                    1 + (b1 >> 6 | b2 << 2 | (b3 & 0xf) << 10),
                ))
            }
            b"VP8X" => Some((1 + le24(b, 24)?, 1 + le24(b, 27)?)),
            _ => None,
        };
    }
    if b.starts_with(&[0xFF, 0xD8]) {
        let mut i = 2;
        loop {
            while *b.get(i)? != 0xFF {
                i += 1;
            }
            while *b.get(i)? == 0xFF {
                i += 1;
            }
            let marker = *b.get(i)?;
            i += 1;
            if matches!(marker, 0xD8 | 0x01 | 0xD0..=0xD7) {
                continue;
            }
            if matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
                return Some((be16(b, i + 5)?, be16(b, i + 3)?));
            }
            let len = be16(b, i)? as usize;
            if len < 2 {
                return None;
            }
            i += len;
        }
    }
    None
}

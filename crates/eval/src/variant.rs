//! Report ids of a strategy run with [`RunOptions`](crate::drive::RunOptions) that change what
//! it runs on: `<id>+text` (the session in Aider's chat shape, `aider_chat`), `<id>+delegate`
//! (exploration spans handed to subagents, `delegate`), `<id>+text+delegate` for both.

/// Suffix of runs on the session in Aider's chat shape.
pub const TEXT: &str = "+text";

/// Suffix of runs that delegate exploration spans.
pub const DELEGATE: &str = "+delegate";

/// Suffixes in the order they are appended.
const SUFFIXES: [&str; 2] = [TEXT, DELEGATE];

/// The report id of a run of strategy `id`.
pub fn run_id(id: &str, text: bool, delegate: bool) -> String {
    let mut out = id.to_owned();
    for (suffix, on) in SUFFIXES.into_iter().zip([text, delegate]) {
        if on {
            out.push_str(suffix);
        }
    }
    out
}

/// The registered strategy a report id belongs to.
pub fn base(id: &str) -> &str {
    SUFFIXES.iter().rev().fold(id, |id, suffix| id.strip_suffix(suffix).unwrap_or(id))
}

/// Where a report id's variant sorts among the strategy's rows: the strategy itself, `+text`,
/// `+delegate`, `+text+delegate`.
pub fn rank(id: &str) -> usize {
    let variant = &id[base(id).len()..];
    SUFFIXES.iter().enumerate().filter(|(_, suffix)| variant.contains(*suffix)).map(|(i, _)| 1 << i).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_sort_by_variant() {
        let ids: Vec<String> = [(false, false), (true, false), (false, true), (true, true)]
            .into_iter()
            .map(|(text, delegate)| run_id("amp/compaction", text, delegate))
            .collect();
        assert_eq!(
            ids,
            ["amp/compaction", "amp/compaction+text", "amp/compaction+delegate", "amp/compaction+text+delegate"]
        );
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(base(id), "amp/compaction", "{id}");
            assert_eq!(rank(id), i, "{id}");
        }
    }
}

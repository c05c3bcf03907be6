//! The reviewed list of deliberate differences (`fidelity/deliberate.toml`): where our crate
//! answers otherwise than its original on purpose, each with its reason. A disagreement the list
//! does not cover fails `cargo xtask fidelity`; one it covers is counted and shown with its
//! reason in the report.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

/// The parts of an answer a difference can cover.
pub const PARTS: [&str; 4] = ["trigger", "selection", "tokens_before", "rewrites"];

/// One reviewed difference.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Difference {
    /// Our strategy id.
    pub strategy: String,
    /// Which part of the answer differs: one of [`PARTS`].
    pub part: String,
    /// Why, as the report shows it: what each side does and why ours is kept.
    pub reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    difference: Vec<Difference>,
}

/// Reads the list from `path`; errors name the file and the field.
pub fn load(path: &Path) -> Result<Vec<Difference>> {
    load_parts(path, &PARTS)
}

/// Reads a list whose parts are `parts` (the black-box check compares other parts).
pub fn load_parts(path: &Path, parts: &[&str]) -> Result<Vec<Difference>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
    parse_parts(path, &text, parts)
}

fn parse_parts(path: &Path, text: &str, parts: &[&str]) -> Result<Vec<Difference>> {
    let file: File = toml::from_str(text).with_context(|| format!("{}", path.display()))?;
    for (i, d) in file.difference.iter().enumerate() {
        if !parts.contains(&d.part.as_str()) {
            bail!("{}: difference {} (`{}`): field `part` is {:?}, not one of {parts:?}", path.display(), i + 1, d.strategy, d.part);
        }
        if d.reason.trim().is_empty() {
            bail!("{}: difference {} (`{}`): field `reason` is empty", path.display(), i + 1, d.strategy);
        }
    }
    Ok(file.difference)
}

/// The reviewed difference covering `part` of `strategy`'s answers, if any.
pub fn covering<'a>(list: &'a [Difference], strategy: &str, part: &str) -> Option<&'a Difference> {
    list.iter().find(|d| d.strategy == strategy && d.part == part)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_names_a_part_and_a_reason_or_is_refused() {
        let ok = "[[difference]]\nstrategy = \"x\"\npart = \"tokens_before\"\nreason = \"because\"\n";
        let list = parse_parts(Path::new("d.toml"), ok, &PARTS).unwrap();
        assert_eq!(covering(&list, "x", "tokens_before").map(|d| d.reason.as_str()), Some("because"));
        assert!(covering(&list, "x", "trigger").is_none());
        let e = parse_parts(Path::new("d.toml"), &ok.replace("tokens_before", "cut"), &PARTS).unwrap_err().to_string();
        assert!(e.contains("field `part`"), "{e}");
        let e = parse_parts(Path::new("d.toml"), &ok.replace("because", " "), &PARTS).unwrap_err().to_string();
        assert!(e.contains("field `reason` is empty"), "{e}");
        assert!(parse_parts(Path::new("d.toml"), "[[difference]]\nstrategy = \"x\"\n", &PARTS).is_err());
    }
}

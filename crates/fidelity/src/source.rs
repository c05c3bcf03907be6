//! Which source an agreement was measured on: a digest of the strategy's crate, recorded in
//! `agreement.json`, so that `compactbench list` and the main report can say when a crate
//! changed after its agreement with the original was last measured (and the figure may no
//! longer hold until `cargo xtask fidelity` runs again).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The crate folder of strategy `id` under the workspace `root`: its harness, the id before any
/// `/variant` or `+mode` (`pi/v0.73` and `claude-code+delegate` live in `pi` and `claude-code`).
pub fn crate_dir(root: &Path, id: &str) -> PathBuf {
    root.join("crates/strategies").join(id.split(['/', '+']).next().unwrap_or(id))
}

/// SHA-256 (its first 16 hex digits) of the crate of strategy `id`: its `Cargo.toml` and every
/// file under `src/`, each as its path relative to the crate, a NUL, its length and its bytes,
/// in path order. `None` when the crate is not there (a binary run away from its source tree).
pub fn digest(root: &Path, id: &str) -> Option<String> {
    let dir = crate_dir(root, id);
    let mut files = vec![dir.join("Cargo.toml")];
    collect(&dir.join("src"), &mut files).ok()?;
    files.sort();
    let mut sha = Sha256::new();
    for file in &files {
        let bytes = std::fs::read(file).ok()?;
        let relative = file.strip_prefix(&dir).unwrap_or(file);
        sha.update(relative.to_string_lossy().replace('\\', "/").as_bytes());
        sha.update([0]);
        sha.update((bytes.len() as u64).to_le_bytes());
        sha.update(&bytes);
    }
    Some(sha.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect())
}

/// Every file under `dir`, recursively.
fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, file: &str, text: &str) {
        let path = root.join("crates/strategies/pi").join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn variants_and_modes_live_in_their_harness_crate() {
        let root = Path::new("/w");
        assert_eq!(crate_dir(root, "pi/v0.73"), root.join("crates/strategies/pi"));
        assert_eq!(crate_dir(root, "claude-code+delegate"), root.join("crates/strategies/claude-code"));
        assert_eq!(crate_dir(root, "goose"), root.join("crates/strategies/goose"));
    }

    #[test]
    fn the_digest_follows_every_source_file_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        assert_eq!(digest(root, "pi"), None, "no crate, no digest");
        write(root, "Cargo.toml", "[package]\nname = \"pi\"\n");
        write(root, "src/lib.rs", "pub fn cut() {}\n");
        let first = digest(root, "pi").unwrap();
        assert_eq!(first.len(), 16);
        assert_eq!(digest(root, "pi/v0.73"), Some(first.clone()), "a variant shares its crate's digest");
        write(root, "tests/law.rs", "#[test] fn t() {}\n");
        assert_eq!(digest(root, "pi"), Some(first.clone()), "tests outside src/ do not count");
        write(root, "src/cut/rule.rs", "pub fn rule() {}\n");
        let nested = digest(root, "pi").unwrap();
        assert_ne!(nested, first, "a new file in a nested module counts");
        write(root, "src/lib.rs", "pub fn cut() { }\n");
        assert_ne!(digest(root, "pi").unwrap(), nested, "an edit counts");
    }
}

//! What the fidelity integration tests share: the workspace root, and whether `cargo xtask
//! fidelity --setup` installed what a test runs (a test skips with a message when not, as on a
//! fresh clone or in CI).

#![allow(dead_code)] // each test crate uses its part

use std::path::{Path, PathBuf};

use compactbench_fidelity::{driver, originals, Harness, Original};

/// The workspace root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Whether `--setup` installed `original`; when not, says so and how to install it.
pub(crate) fn installed(root: &Path, original: &Original) -> bool {
    let yes = driver::installed(root, original);
    if !yes {
        eprintln!("skip {}: not installed (run `cargo xtask fidelity --setup --only {}`)", original.name, original.dir);
    }
    yes
}

/// The original named `name` (its install folder or our strategy id; the first of several), if
/// `--setup` installed it; when not, says so and how to install it.
pub(crate) fn installed_original(root: &Path, name: &str) -> Option<&'static Original> {
    let original = originals::matching(name).next().unwrap_or_else(|| panic!("no original named {name}"));
    installed(root, original).then_some(original)
}

/// Whether `--setup` installed the harness CLI `harness` (under `target/fidelity`); when not,
/// says so and how to install it.
pub(crate) fn harness_installed(root: &Path, harness: &Harness) -> bool {
    let yes = root.join("target/fidelity").join(harness.dir).join(".installed").exists();
    if !yes {
        eprintln!("skip {}: not installed (run `cargo xtask fidelity --setup --only {}`)", harness.name, harness.dir);
    }
    yes
}

//! A virtual file store for offloaded content, with real read-back.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// In-memory files keyed by path. Strategies write offloaded content here; probes classify a
/// fact as recoverable only when reading a path named in the request returns its needle.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VirtualStore {
    files: BTreeMap<String, String>,
}

impl VirtualStore {
    /// An empty store.
    pub fn new() -> VirtualStore {
        VirtualStore::default()
    }

    /// Creates or overwrites `path`.
    pub fn write(&mut self, path: impl Into<String>, content: impl Into<String>) {
        self.files.insert(path.into(), content.into());
    }

    /// Appends to `path`, creating it if needed.
    pub fn append(&mut self, path: &str, content: &str) {
        self.files.entry(path.to_owned()).or_default().push_str(content);
    }

    /// Reads `path`.
    pub fn read(&self, path: &str) -> Option<&str> {
        self.files.get(path).map(String::as_str)
    }

    /// All paths, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    /// Number of files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

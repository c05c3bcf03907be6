//! A record-and-replay cache in front of any summarizer (see [`ReplayCache`]).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

use compactbench_core::{Error, ErrorKind, StopReason, Summarizer, Summary, SummaryRequest};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Cache root used by [`ReplayCache::new`], relative to the working directory.
pub const DEFAULT_ROOT: &str = "bench-data/summary-cache";

/// Version of the key derivation and file layout; a change must not read old entries.
const FORMAT: u32 = 1;

/// Whether a miss may call the inner summarizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CacheMode {
    /// Hits are served from disk; misses call the inner summarizer and are stored.
    #[default]
    ReadWrite,
    /// Hits are served from disk; a miss is an error (kind `Other`) and calls nothing.
    ReplayOnly,
}

/// Counters of a [`ReplayCache`], for "N of M summaries served from cache" in a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Calls answered from disk.
    pub hits: u64,
    /// Calls with no entry on disk (forwarded to the inner summarizer, or refused in
    /// replay-only mode).
    pub misses: u64,
    /// Entries written.
    pub stored: u64,
}

/// A record-and-replay cache in front of any summarizer.
///
/// Real models are slow, cost money, and are not byte-deterministic even at temperature 0
/// (batching changes floating-point order). [`ReplayCache`] stores every answer as one JSON
/// file per request, so a second run of the same matrix asks the model nothing new, and a
/// [`CacheMode::ReplayOnly`] run re-reports and re-checks a recorded run with no model at all.
///
/// Key: SHA-256 of the inner summarizer's name and the request's `system`, `transcript`,
/// `instructions` and `max_output_tokens`, each length-prefixed so that no two different
/// requests encode to the same bytes. `purpose` is a label for logs, not model input, so it
/// is neither hashed nor stored: a file's content is then a function of its key alone. Nor is
/// `context`: it says how the harness sends the call (what a prompt cache holds of it, which the
/// eval prices), not what the model reads.
///
/// Files: `<root>/<name>/<key>.json` (root [`DEFAULT_ROOT`] unless configured, name the inner
/// summarizer's with characters outside `[A-Za-z0-9._-]` replaced by `_`), pretty JSON with
/// fields in declaration order and a trailing newline, written to a temporary file and renamed
/// so a crash never leaves a half-written entry. Errors are not cached: a timeout is a fact
/// about one attempt, not about the request.
///
/// Every answer is on disk before it is returned (no buffer to flush): a run killed midway
/// keeps every answer it got, and its rerun asks the model none of them again.
///
/// Thread-safe: the counters are atomic and every entry is its own file, renamed into place.
/// A request is asked of the inner summarizer once however many threads want it at once (with
/// `--max-inflight`, dozens of runs are in flight, and two strategies can send the same
/// request): the first claims its key, the others wait for its answer and read it from disk.
pub struct ReplayCache {
    inner: Box<dyn Summarizer>,
    dir: PathBuf,
    mode: CacheMode,
    hits: AtomicU64,
    misses: AtomicU64,
    stored: AtomicU64,
    /// Keys whose answer a thread is getting right now.
    claimed: Mutex<HashSet<String>>,
    released: Condvar,
}

/// A key claimed in a [`ReplayCache`]; released (and its waiters woken) on drop, error or not.
struct Claim<'a> {
    cache: &'a ReplayCache,
    key: &'a str,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.cache.claimed.lock().unwrap_or_else(PoisonError::into_inner).remove(self.key);
        self.cache.released.notify_all();
    }
}

#[derive(Serialize, Deserialize)]
struct Entry {
    format: u32,
    summarizer: String,
    key: String,
    request: StoredRequest,
    response: StoredSummary,
}

#[derive(Serialize, Deserialize, PartialEq, Eq)]
struct StoredRequest {
    system: String,
    transcript: String,
    instructions: String,
    max_output_tokens: u64,
}

#[derive(Serialize, Deserialize)]
struct StoredSummary {
    text: String,
    input_tokens: u64,
    output_tokens: u64,
    stop: StoredStop,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum StoredStop {
    Complete,
    Length,
}

impl StoredRequest {
    fn of(request: &SummaryRequest) -> StoredRequest {
        StoredRequest {
            system: request.system.clone(),
            transcript: request.transcript.clone(),
            instructions: request.instructions.clone(),
            max_output_tokens: request.max_output_tokens,
        }
    }
}

/// The cache key of `request` sent to the summarizer named `summarizer`: 64 lowercase hex
/// digits of a SHA-256.
pub fn cache_key(summarizer: &str, request: &SummaryRequest) -> String {
    let mut hash = Sha256::new();
    hash.update(format!("compactbench-summary-cache/v{FORMAT}\0").as_bytes());
    for field in [summarizer, &request.system, &request.transcript, &request.instructions] {
        // Length prefixes keep ("ab", "c") and ("a", "bc") apart.
        hash.update((field.len() as u64).to_le_bytes());
        hash.update(field.as_bytes());
    }
    hash.update(request.max_output_tokens.to_le_bytes());
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// `name` made safe as one path component; the exact name is still part of every key.
fn folder_name(name: &str) -> String {
    let safe: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' }).collect();
    // "." and ".." would leave the root.
    if safe.is_empty() || safe.chars().all(|c| c == '.') {
        format!("_{safe}")
    } else {
        safe
    }
}

fn other(message: String) -> Error {
    Error::new(ErrorKind::Other, message)
}

impl ReplayCache {
    /// A read-write cache for `inner` under [`DEFAULT_ROOT`].
    pub fn new(inner: Box<dyn Summarizer>) -> ReplayCache {
        ReplayCache::with_root(inner, DEFAULT_ROOT)
    }

    /// A read-write cache for `inner` under `root` (entries go to `root/<name>/`).
    pub fn with_root(inner: Box<dyn Summarizer>, root: impl AsRef<Path>) -> ReplayCache {
        let dir = root.as_ref().join(folder_name(inner.name()));
        ReplayCache {
            inner,
            dir,
            mode: CacheMode::ReadWrite,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            stored: AtomicU64::new(0),
            claimed: Mutex::new(HashSet::new()),
            released: Condvar::new(),
        }
    }

    /// The same cache in `mode`.
    pub fn mode(mut self, mode: CacheMode) -> ReplayCache {
        self.mode = mode;
        self
    }

    /// The folder holding this summarizer's entries.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file that holds (or would hold) the answer to `request`.
    pub fn path_for(&self, request: &SummaryRequest) -> PathBuf {
        self.dir.join(format!("{}.json", cache_key(self.inner.name(), request)))
    }

    /// Hits, misses and writes so far.
    pub fn stats(&self) -> CacheStats {
        CacheStats { hits: self.hits.load(Ordering::Relaxed), misses: self.misses.load(Ordering::Relaxed), stored: self.stored.load(Ordering::Relaxed) }
    }

    /// Claims `key`, first waiting while another thread holds it (and so is getting its answer).
    fn claim<'a>(&'a self, key: &'a str) -> Claim<'a> {
        let claimed = self.claimed.lock().unwrap_or_else(PoisonError::into_inner);
        let mut claimed = self.released.wait_while(claimed, |c| c.contains(key)).unwrap_or_else(PoisonError::into_inner);
        claimed.insert(key.to_owned());
        Claim { cache: self, key }
    }

    fn load(&self, path: &Path, key: &str, request: &SummaryRequest) -> Result<Option<Summary>, Error> {
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(other(format!("cannot read cache entry {}: {e}", path.display()))),
        };
        let entry: Entry = serde_json::from_slice(&bytes).map_err(|e| other(format!("corrupt cache entry {}: {e}", path.display())))?;
        // A hash collision is not a practical worry; an entry edited or copied by hand is.
        // Serving it would silently answer a different request, so it is an error.
        if entry.format != FORMAT || entry.key != key || entry.summarizer != self.inner.name() || entry.request != StoredRequest::of(request) {
            return Err(other(format!("cache entry {} does not match its request", path.display())));
        }
        let r = entry.response;
        let stop = match r.stop {
            StoredStop::Complete => StopReason::Complete,
            StoredStop::Length => StopReason::Length,
        };
        Ok(Some(Summary { text: r.text, input_tokens: r.input_tokens, output_tokens: r.output_tokens, stop }))
    }

    fn store(&self, path: &Path, key: &str, request: &SummaryRequest, summary: &Summary) -> Result<(), Error> {
        let entry = Entry {
            format: FORMAT,
            summarizer: self.inner.name().to_string(),
            key: key.to_string(),
            request: StoredRequest::of(request),
            response: StoredSummary {
                text: summary.text.clone(),
                input_tokens: summary.input_tokens,
                output_tokens: summary.output_tokens,
                stop: match summary.stop {
                    StopReason::Complete => StoredStop::Complete,
                    StopReason::Length => StoredStop::Length,
                },
            },
        };
        let mut json = serde_json::to_string_pretty(&entry).map_err(|e| other(format!("cannot encode cache entry: {e}")))?;
        json.push('\n');
        fs::create_dir_all(&self.dir).map_err(|e| other(format!("cannot create cache folder {}: {e}", self.dir.display())))?;
        // Unique per process and call, in the same folder so the rename stays on one
        // filesystem (and is atomic there).
        static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);
        let temp = self.dir.join(format!(".{key}.{}.{}.tmp", std::process::id(), TEMP_SEQ.fetch_add(1, Ordering::Relaxed)));
        let written = fs::File::create(&temp).and_then(|mut f| f.write_all(json.as_bytes())).and_then(|()| fs::rename(&temp, path));
        if let Err(e) = written {
            let _ = fs::remove_file(&temp);
            return Err(other(format!("cannot write cache entry {}: {e}", path.display())));
        }
        self.stored.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl Summarizer for ReplayCache {
    /// The inner summarizer's name: a cached answer is that summarizer's answer.
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
        let key = cache_key(self.inner.name(), request);
        let path = self.dir.join(format!("{key}.json"));
        // Held until the answer is on disk, so a thread asking the same thing meanwhile finds
        // it there instead of asking again.
        let _claim = self.claim(&key);
        if let Some(summary) = self.load(&path, &key, request)? {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(summary);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        if self.mode == CacheMode::ReplayOnly {
            return Err(other(format!("replay-only: no cached summary for this request ({})", path.display())));
        }
        let summary = self.inner.summarize(request)?;
        // A failed write is an error although the answer is in hand: a run that claims to be
        // recorded must be replayable.
        self.store(&path, &key, request, &summary)?;
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Answers with the transcript reversed and counts its calls.
    struct Counting {
        calls: Arc<AtomicU64>,
    }

    impl Summarizer for Counting {
        fn name(&self) -> &str {
            "counting/v1"
        }

        fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Ok(Summary { text: request.transcript.chars().rev().collect(), input_tokens: 11, output_tokens: 5, stop: StopReason::Length })
        }
    }

    struct Failing;

    impl Summarizer for Failing {
        fn name(&self) -> &str {
            "failing"
        }

        fn summarize(&self, _: &SummaryRequest) -> Result<Summary, Error> {
            Err(Error::new(ErrorKind::Timeout, "slow"))
        }
    }

    fn counting() -> (Box<dyn Summarizer>, Arc<AtomicU64>) {
        let calls = Arc::new(AtomicU64::new(0));
        (Box::new(Counting { calls: calls.clone() }), calls)
    }

    fn request(transcript: &str) -> SummaryRequest {
        SummaryRequest { purpose: "history".into(), context: compactbench_core::SummaryContext::Fresh, system: "sys".into(), transcript: transcript.into(), instructions: "Summarize.".into(), max_output_tokens: 64 }
    }

    #[test]
    fn a_miss_calls_the_inner_once_then_hits_are_served_from_disk() {
        let root = tempfile::tempdir().unwrap();
        let (inner, calls) = counting();
        let cache = ReplayCache::with_root(inner, root.path());
        let first = cache.summarize(&request("abc")).unwrap();
        let second = cache.summarize(&request("abc")).unwrap();
        assert_eq!(first, second);
        assert_eq!(first.stop, StopReason::Length);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(cache.stats(), CacheStats { hits: 1, misses: 1, stored: 1 });
        assert_eq!(cache.name(), "counting/v1");
        assert_eq!(cache.dir(), root.path().join("counting_v1"));

        // A new cache over the same folder (a later run) needs no inner call at all.
        let (inner, calls) = counting();
        let again = ReplayCache::with_root(inner, root.path()).mode(CacheMode::ReplayOnly);
        assert_eq!(again.summarize(&request("abc")).unwrap(), first);
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert_eq!(again.stats().hits, 1);
    }

    #[test]
    fn purpose_is_not_part_of_the_key_but_every_model_input_is() {
        let a = request("abc");
        let key = cache_key("m", &a);
        assert_eq!(key.len(), 64);
        assert_eq!(cache_key("m", &SummaryRequest { purpose: "turn-prefix".into(), context: compactbench_core::SummaryContext::Fresh, ..a.clone() }), key);
        for changed in [
            SummaryRequest { system: "other".into(), ..a.clone() },
            SummaryRequest { transcript: "abd".into(), ..a.clone() },
            SummaryRequest { instructions: "Other.".into(), ..a.clone() },
            SummaryRequest { max_output_tokens: 65, ..a.clone() },
        ] {
            assert_ne!(cache_key("m", &changed), key);
        }
        assert_ne!(cache_key("n", &a), key);
        // Length prefixes: moving a boundary between fields changes the key.
        let shifted = SummaryRequest { system: "sy".into(), transcript: "sabc".into(), ..a.clone() };
        assert_ne!(cache_key("m", &shifted), key);
    }

    #[test]
    fn replay_only_errors_on_a_miss_without_calling_the_inner() {
        let root = tempfile::tempdir().unwrap();
        let (inner, calls) = counting();
        let cache = ReplayCache::with_root(inner, root.path()).mode(CacheMode::ReplayOnly);
        let e = cache.summarize(&request("abc")).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Other);
        assert!(e.message.contains("replay-only"), "{e}");
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert_eq!(cache.stats(), CacheStats { hits: 0, misses: 1, stored: 0 });
        assert!(!cache.dir().exists(), "a replay-only run writes nothing");
    }

    #[test]
    fn files_are_deterministic_and_readable() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let req = request("line one\n\"quoted\" ü");
        let ca = ReplayCache::with_root(counting().0, a.path());
        let cb = ReplayCache::with_root(counting().0, b.path());
        ca.summarize(&req).unwrap();
        cb.summarize(&req).unwrap();
        let fa = fs::read_to_string(ca.path_for(&req)).unwrap();
        let fb = fs::read_to_string(cb.path_for(&req)).unwrap();
        assert_eq!(fa, fb);
        let key = cache_key("counting/v1", &req);
        let expected = format!(
            r#"{{
  "format": 1,
  "summarizer": "counting/v1",
  "key": "{key}",
  "request": {{
    "system": "sys",
    "transcript": "line one\n\"quoted\" ü",
    "instructions": "Summarize.",
    "max_output_tokens": 64
  }},
  "response": {{
    "text": "ü \"detouq\"\neno enil",
    "input_tokens": 11,
    "output_tokens": 5,
    "stop": "length"
  }}
}}
"#
        );
        assert_eq!(fa, expected);
        // Only the entry: no temporary file left behind.
        assert_eq!(fs::read_dir(ca.dir()).unwrap().count(), 1);
    }

    #[test]
    fn errors_are_not_cached_and_bad_entries_are_errors() {
        let root = tempfile::tempdir().unwrap();
        let cache = ReplayCache::with_root(Box::new(Failing), root.path());
        assert_eq!(cache.summarize(&request("abc")).unwrap_err().kind, ErrorKind::Timeout);
        assert_eq!(cache.stats().stored, 0);
        assert!(!cache.dir().exists());

        let cache = ReplayCache::with_root(counting().0, root.path());
        let req = request("abc");
        cache.summarize(&req).unwrap();
        let path = cache.path_for(&req);
        fs::write(&path, "{ not json").unwrap();
        assert!(cache.summarize(&req).unwrap_err().message.contains("corrupt"));
        // An entry for another request copied under this key is refused, not served.
        let other_req = request("xyz");
        cache.summarize(&other_req).unwrap();
        fs::copy(cache.path_for(&other_req), &path).unwrap();
        assert!(cache.summarize(&req).unwrap_err().message.contains("does not match"));
    }

    #[test]
    fn is_shared_safely_across_threads() {
        let root = tempfile::tempdir().unwrap();
        let (inner, calls) = counting();
        let cache = ReplayCache::with_root(inner, root.path());
        // Record 8 distinct requests, then replay them from 4 threads at once.
        for i in 0..8 {
            cache.summarize(&request(&format!("t{i}"))).unwrap();
        }
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for i in 0..8 {
                        cache.summarize(&request(&format!("t{i}"))).unwrap();
                    }
                });
            }
        });
        assert_eq!(calls.load(Ordering::SeqCst), 8);
        assert_eq!(cache.stats(), CacheStats { hits: 32, misses: 8, stored: 8 });
    }

    #[test]
    fn every_answer_is_on_disk_before_it_is_returned() {
        let root = tempfile::tempdir().unwrap();
        let (inner, _) = counting();
        let cache = ReplayCache::with_root(inner, root.path());
        for i in 0..3 {
            cache.summarize(&request(&format!("t{i}"))).unwrap();
        }
        // Killed: no drop, nothing flushed at the end.
        std::mem::forget(cache);
        let (inner, calls) = counting();
        let rerun = ReplayCache::with_root(inner, root.path()).mode(CacheMode::ReplayOnly);
        for i in 0..3 {
            rerun.summarize(&request(&format!("t{i}"))).unwrap();
        }
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }

    /// Counts its calls and takes a while to answer, as a model does.
    struct Slow {
        calls: Arc<AtomicU64>,
    }

    impl Summarizer for Slow {
        fn name(&self) -> &str {
            "slow"
        }

        fn summarize(&self, request: &SummaryRequest) -> Result<Summary, Error> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(50));
            Ok(Summary { text: request.transcript.clone(), input_tokens: 1, output_tokens: 1, stop: StopReason::Complete })
        }
    }

    #[test]
    fn the_same_request_from_many_threads_at_once_is_asked_once() {
        let root = tempfile::tempdir().unwrap();
        let calls = Arc::new(AtomicU64::new(0));
        let cache = ReplayCache::with_root(Box::new(Slow { calls: calls.clone() }), root.path());
        let barrier = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            for t in 0..8 {
                let (cache, barrier) = (&cache, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    assert_eq!(cache.summarize(&request("same")).unwrap().text, "same");
                    // Distinct requests are not held up by one another.
                    cache.summarize(&request(&format!("own {t}"))).unwrap();
                });
            }
        });
        assert_eq!(calls.load(Ordering::SeqCst), 1 + 8);
        assert_eq!(cache.stats(), CacheStats { hits: 7, misses: 9, stored: 9 });
    }

    #[test]
    fn folder_names_are_single_safe_components() {
        assert_eq!(folder_name("openai:Qwen/Qwen2.5-7B"), "openai_Qwen_Qwen2.5-7B");
        assert_eq!(folder_name(".."), "_..");
        assert_eq!(folder_name(""), "_");
    }
}

//! The cell journal of `eval`, so an interrupted eval can resume (`eval --resume`).
//!
//! `<out>/cells.jsonl`: a header line with the eval's configuration, then one line per finished
//! cell (strategy, scenario, seed, summarizer, delegation, text chat), appended as each run ends: the run
//! as `results.json` holds it plus its `requests` and `phases`. Lines go straight to the file
//! (no buffering, no fsync: a killed process loses at most the line it was writing, which the
//! reader drops). The eval deletes the journal once its reports are written, except a shard
//! (`eval --shard I/N`): its journal is its output, which `compactbench merge` reads.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use compactbench_eval::results::RunResult;
use compactbench_eval::scenario::Scenario;
use serde_json::{json, Map, Value};

use crate::shard::Shard;

/// The journal's file name in the output folder.
pub(crate) const FILE: &str = "cells.jsonl";

/// Version of the line format.
const FORMAT: u64 = 1;

/// An open journal: finished cells are appended to it.
pub(crate) struct Journal {
    path: PathBuf,
    file: Mutex<File>,
    /// A write failed (warned once): journaling stopped, the eval goes on.
    failed: AtomicBool,
}

/// What must match for cells of one eval to stand in for another's: everything that can
/// change a cell's result or the set of cells (not `--out`, `--jobs`, caches or timeouts).
pub(crate) struct Config<'a> {
    pub(crate) strategies: Vec<String>,
    pub(crate) scenarios: &'a [Scenario],
    pub(crate) seeds: u64,
    pub(crate) bounds: bool,
    pub(crate) delegate: Vec<String>,
    pub(crate) text_chat: Vec<String>,
    pub(crate) encoding: &'a str,
    /// The primary summarizer's and the judge's settings.
    pub(crate) summarizer: Value,
    /// The share of the matrix a shard runs; `None` for all of it.
    pub(crate) shard: Option<Shard>,
}

impl Config<'_> {
    fn to_json(&self) -> Value {
        let scenarios: Vec<Value> = self.scenarios.iter().map(|s| json!({"name": s.name, "fingerprint": fingerprint(s)})).collect();
        json!({
            "binary": binary(),
            "strategies": self.strategies,
            "scenarios": scenarios,
            "seeds": self.seeds,
            "bounds": self.bounds,
            "delegate": self.delegate,
            "text_chat": self.text_chat,
            "encoding": self.encoding,
            "summarizer": self.summarizer,
            "shard": self.shard.map(|s| s.to_string()),
        })
    }
}

/// A scenario's content, hashed (FNV-1a over its `Debug` form, which includes an imported
/// transcript's messages): an edited scenario file changes it.
pub(crate) fn fingerprint(s: &Scenario) -> String {
    struct Fnv(u64);
    impl std::fmt::Write for Fnv {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            for b in s.bytes() {
                self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
            Ok(())
        }
    }
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    let _ = write!(h, "{s:?}");
    format!("{:016x}", h.0)
}

/// This binary's size and modification time: cells from a rebuilt binary are not reused.
fn binary() -> String {
    let meta = std::env::current_exe().and_then(std::fs::metadata);
    match meta {
        Ok(m) => {
            let modified = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
            format!("{} bytes, modified {modified}", m.len())
        }
        Err(_) => "unknown".to_owned(),
    }
}

impl Journal {
    /// Starts a fresh journal in `dir` for `config`, replacing any old one.
    pub(crate) fn create(dir: &Path, config: &Config<'_>) -> Result<Journal> {
        let path = dir.join(FILE);
        if path.exists() {
            eprintln!("discarding the journal of an unfinished eval in {} (--resume continues one)", dir.display());
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let header = json!({"compactbench_journal": FORMAT, "config": config.to_json()});
        writeln!(file, "{header}").with_context(|| format!("writing {}", path.display()))?;
        Ok(Journal { path, file: Mutex::new(file), failed: AtomicBool::new(false) })
    }

    /// Reopens the journal in `dir` to resume it: refuses if it was written for another
    /// configuration, drops a torn last line, and returns the finished runs it holds. Without
    /// a journal (or with only a torn header) it starts a fresh one and returns no runs.
    pub(crate) fn resume(dir: &Path, config: &Config<'_>) -> Result<(Journal, Vec<RunResult>)> {
        let Some(read) = read(dir)? else {
            eprintln!("no journal in {}: nothing to resume, running every cell", dir.display());
            return Ok((Journal::create(dir, config)?, Vec::new()));
        };
        let path = &read.path;
        let now = config.to_json();
        if read.config != now {
            bail!(
                "refusing to --resume: {} was written by an eval with a different configuration ({}); rerun without --resume to start over",
                path.display(),
                differences(&read.config, &now, ["journal", "now"])
            );
        }
        let mut file = OpenOptions::new().write(true).open(path).with_context(|| format!("opening {}", path.display()))?;
        file.set_len(read.whole).with_context(|| format!("truncating {}", path.display()))?;
        file = OpenOptions::new().append(true).open(path).with_context(|| format!("opening {}", path.display()))?;
        Ok((Journal { path: read.path, file: Mutex::new(file), failed: AtomicBool::new(false) }, read.runs))
    }

    /// Appends a finished run (from any worker thread). A failure is reported once and stops
    /// journaling; the eval itself goes on.
    pub(crate) fn record(&self, run: &RunResult) {
        if self.failed.load(Ordering::Relaxed) {
            return;
        }
        let written = write_cell(run).map_err(anyhow::Error::from).and_then(|mut line| {
            line.push(b'\n');
            let mut file = self.file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            file.write_all(&line).map_err(anyhow::Error::from)
        });
        if let Err(e) = written {
            if !self.failed.swap(true, Ordering::Relaxed) {
                eprintln!("warning: cannot journal to {} ({e:#}); this eval will not be resumable", self.path.display());
            }
        }
    }

    /// The reports are written: the journal has served.
    pub(crate) fn finish(self) {
        drop(self.file);
        if let Err(e) = std::fs::remove_file(&self.path) {
            eprintln!("warning: cannot remove {}: {e}", self.path.display());
        }
    }
}

/// A journal as read back.
pub(crate) struct Read {
    /// The journal file.
    pub(crate) path: PathBuf,
    /// The configuration in its header.
    pub(crate) config: Value,
    /// Its finished cells, in the order they finished.
    pub(crate) runs: Vec<RunResult>,
    /// Bytes of whole lines: a torn last line starts here.
    whole: u64,
}

/// Reads the journal in `dir`, dropping a torn last line (the one a killed eval was
/// writing); `None` when there is none, or only a torn header.
pub(crate) fn read(dir: &Path) -> Result<Option<Read>> {
    let path = dir.join(FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    // Only lines ending in a newline were written whole.
    let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut lines = bytes[..whole].split(|b| *b == b'\n').filter(|l| !l.is_empty());
    let Some(header) = lines.next() else {
        return Ok(None);
    };
    let mut header: Value = serde_json::from_slice(header).with_context(|| format!("{}: line 1 is not a journal header", path.display()))?;
    if header["compactbench_journal"] != FORMAT {
        bail!("{}: not a journal this compactbench writes (format {}); an eval without --resume starts a new one", path.display(), header["compactbench_journal"]);
    }
    let mut runs = Vec::new();
    for (n, line) in lines.enumerate() {
        let run = read_cell(line).with_context(|| format!("{}: line {}", path.display(), n + 2))?;
        runs.push(run);
    }
    Ok(Some(Read { path, config: header["config"].take(), runs, whole: whole as u64 }))
}

/// A run with its requests and phases, which `RunResult`'s own serialization leaves out.
fn write_cell(run: &RunResult) -> serde_json::Result<Vec<u8>> {
    let mut value = serde_json::to_value(run)?;
    if let Value::Object(map) = &mut value {
        map.insert("requests".to_owned(), serde_json::to_value(&run.requests)?);
        map.insert("phases".to_owned(), serde_json::to_value(run.phases)?);
    }
    serde_json::to_vec(&value)
}

fn read_cell(line: &[u8]) -> serde_json::Result<RunResult> {
    let mut value: Value = serde_json::from_slice(line)?;
    let mut take = |key: &str| value.as_object_mut().and_then(|m| m.remove(key)).unwrap_or(Value::Null);
    let requests = take("requests");
    let phases = take("phases");
    let mut run: RunResult = serde_json::from_value(value)?;
    run.requests = serde_json::from_value(requests)?;
    run.phases = serde_json::from_value(phases)?;
    Ok(run)
}

/// The configuration keys whose values differ, each with its value in `a` and in `b`, which
/// `labels` name.
pub(crate) fn differences(a: &Value, b: &Value, labels: [&str; 2]) -> String {
    let empty = Map::new();
    let (a, b) = (a.as_object().unwrap_or(&empty), b.as_object().unwrap_or(&empty));
    let mut out = Vec::new();
    for key in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
        let (x, y) = (a.get(key).unwrap_or(&Value::Null), b.get(key).unwrap_or(&Value::Null));
        if x != y {
            out.push(format!("{key}: {} {x}, {} {y}", labels[0], labels[1]));
        }
    }
    out.join("; ")
}


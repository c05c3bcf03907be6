//! Fuzz targets for the transcript importers, one per format, through the public entry point
//! [`compactbench_import::import`] (a file on disk, as the CLI and replay scenarios read it).
//!
//! Inputs: arbitrary bytes, JSON-ish token soup, and structure-aware mutations of the recorded
//! transcripts in `bench-data/transcripts/`: a window of lines (or of `history[]` events for
//! the one-document formats), then edits at the JSON level (delete a field, change its type,
//! set a `type`/`role` to another value seen in the corpus, graft a value from elsewhere,
//! blow a string up) and at the line level (delete, duplicate, swap, truncate mid-line, flip
//! bytes, insert garbage, CRLF, BOM).
//!
//! Properties, for the format given (strict and lenient) and detected: never panics; an error
//! names the file, and a line (`path:N: …`, N within the file) or a field (`` `a.b[3]` ``,
//! `history[i]`), or is one of the documented whole-file errors (empty, format not detected,
//! no entries of the format, OpenHands row missing); a success has consistent counts and
//! recorded compactions that point inside the conversation; strict success implies lenient
//! success with the same result. Cases: 128 per format by default, `COMPACTBENCH_FUZZ_CASES`
//! in the long mode (`cargo xtask fuzz`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use compactbench_import::{import, Format, ImportError, Options};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::Value;

#[path = "../../../tests/support/fuzz.rs"]
mod support;

const DEFAULT_CASES: u32 = 128;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench-data/transcripts/");

/// The seed transcripts of a format, parsed: one value per line (JSONL), or the document.
struct Corpus {
    files: Vec<Vec<Value>>,
    /// Every string value of a `type`, `role`, `subtype`, `action`, `observation` or `source`
    /// key in the corpus: swapping one in reaches other branches of the importer.
    tags: Vec<String>,
}

fn seeds(format: Format) -> &'static [&'static str] {
    match format {
        Format::ClaudeCode => &["claude-code__vsla__9034225e.jsonl", "claude-code__vsla__0a725fb5.jsonl"],
        Format::Codex => &["codex__moonmind__019a7ae6.jsonl"],
        Format::Pi => &["pi__pi-mono__before-compaction.jsonl", "pi__pi-mono__large-session.jsonl"],
        Format::OpenHands => &["openhands__multi-swe-bench-example__output.jsonl"],
        Format::SweAgent => &["swe-agent__pydicom-1458.traj"],
    }
}

fn collect_tags(v: &Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        Value::Object(o) => {
            for (k, v) in o {
                if let (true, Value::String(s)) = (matches!(k.as_str(), "type" | "role" | "subtype" | "action" | "observation" | "source"), v) {
                    if s.len() < 64 {
                        out.insert(s.clone());
                    }
                }
                collect_tags(v, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect_tags(v, out)),
        _ => {}
    }
}

fn corpus(format: Format) -> &'static Corpus {
    static CORPORA: OnceLock<Vec<Corpus>> = OnceLock::new();
    let all = CORPORA.get_or_init(|| {
        Format::ALL
            .iter()
            .map(|&f| {
                let files: Vec<Vec<Value>> = seeds(f)
                    .iter()
                    .map(|name| {
                        let text = std::fs::read_to_string(PathBuf::from(DIR).join(name)).unwrap();
                        if f == Format::SweAgent {
                            vec![serde_json::from_str(&text).unwrap()]
                        } else {
                            text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
                        }
                    })
                    .collect();
                let mut tags = std::collections::BTreeSet::new();
                files.iter().flatten().for_each(|v| collect_tags(v, &mut tags));
                Corpus { files, tags: tags.into_iter().collect() }
            })
            .collect()
    });
    &all[Format::ALL.iter().position(|&f| f == format).unwrap()]
}

/// A replacement value for a JSON mutation.
#[derive(Clone, Debug)]
enum NewValue {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// A string of this many bytes.
    Huge(usize),
    EmptyArray,
    EmptyObject,
    /// A `type`/`role` value from the corpus.
    Tag(Index),
    /// A copy of another value of the same input (line, path).
    Graft(Index, Vec<Index>),
}

#[derive(Clone, Debug)]
enum JsonEdit {
    Remove,
    Set(NewValue),
    /// Appends a copy of an element (arrays) or renames the key (objects' children).
    Duplicate,
    Rename(String),
}

#[derive(Clone, Debug)]
struct JsonOp {
    line: Index,
    path: Vec<Index>,
    edit: JsonEdit,
}

#[derive(Clone, Debug)]
enum LineOp {
    Delete(Index),
    Duplicate(Index),
    Swap(Index, Index),
    /// Cut the line at a byte (possibly inside a UTF-8 sequence).
    Truncate(Index, Index),
    Flip(Index, Index, u8),
    Insert(Index, Vec<u8>),
    Crlf(Index),
    Blank(Index),
    Bom,
}

#[derive(Clone, Debug)]
enum Input {
    Bytes(Vec<u8>),
    /// Concatenated JSON-ish tokens.
    Soup(Vec<Index>),
    Mutated {
        file: Index,
        start: Index,
        len: usize,
        /// Keep the first line (headers: Pi's `session`, Codex's `session_meta`).
        header: bool,
        json: Vec<JsonOp>,
        lines: Vec<LineOp>,
        pretty: bool,
        trailing_newline: bool,
    },
}

const SOUP: &[&str] = &[
    "{", "}", "[", "]", ":", ",", "\n", "\r\n", " ", "null", "true", "0", "-1", "1e999", "\"\"", "\"x\"", "\"type\"",
    "\"user\"", "\"assistant\"", "\"message\"", "\"content\"", "\"role\"", "\"history\"", "\"trajectory\"", "\"session\"",
    "\"payload\"", "\"response_item\"", "\"tool_use\"", "\"tool_result\"", "\"id\"", "\"instance_id\"", "\"toolCall\"",
    "\"function_call\"", "\"compaction\"", "\"isSidechain\"", "\"sessionId\"", "\"\\ud800\"", "\"\u{1F600}\"", "\u{feff}",
    "\\", "\"", "\u{0}", "\u{ff}",
];

fn new_value() -> impl Strategy<Value = NewValue> {
    prop_oneof![
        Just(NewValue::Null),
        any::<bool>().prop_map(NewValue::Bool),
        prop_oneof![Just(0i64), Just(-1), Just(i64::MAX), Just(i64::MIN), any::<i64>()].prop_map(NewValue::Int),
        prop_oneof![Just(1.5f64), Just(-0.5), Just(1e300), Just(1.8e19), Just(f64::MIN_POSITIVE)].prop_map(NewValue::Float),
        prop_oneof![Just(String::new()), Just(" ".to_string()), any::<String>()].prop_map(NewValue::Str),
        (1usize..200_000).prop_map(NewValue::Huge),
        Just(NewValue::EmptyArray),
        Just(NewValue::EmptyObject),
        any::<Index>().prop_map(NewValue::Tag),
        (any::<Index>(), prop::collection::vec(any::<Index>(), 0..6)).prop_map(|(l, p)| NewValue::Graft(l, p)),
    ]
}

fn json_op() -> impl Strategy<Value = JsonOp> {
    let edit = prop_oneof![
        1 => Just(JsonEdit::Remove),
        3 => new_value().prop_map(JsonEdit::Set),
        1 => Just(JsonEdit::Duplicate),
        1 => prop_oneof![Just("type".to_string()), Just("x".to_string()), Just(String::new())].prop_map(JsonEdit::Rename),
    ];
    (any::<Index>(), prop::collection::vec(any::<Index>(), 0..7), edit).prop_map(|(line, path, edit)| JsonOp { line, path, edit })
}

fn line_op() -> impl Strategy<Value = LineOp> {
    let ix = any::<Index>;
    prop_oneof![
        ix().prop_map(LineOp::Delete),
        ix().prop_map(LineOp::Duplicate),
        (ix(), ix()).prop_map(|(a, b)| LineOp::Swap(a, b)),
        (ix(), ix()).prop_map(|(a, b)| LineOp::Truncate(a, b)),
        (ix(), ix(), 1u8..=255).prop_map(|(a, b, m)| LineOp::Flip(a, b, m)),
        (ix(), prop::collection::vec(any::<u8>(), 0..40)).prop_map(|(a, b)| LineOp::Insert(a, b)),
        ix().prop_map(LineOp::Crlf),
        ix().prop_map(LineOp::Blank),
        Just(LineOp::Bom),
    ]
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..2048).prop_map(Input::Bytes),
        1 => prop::collection::vec(any::<Index>(), 0..300).prop_map(Input::Soup),
        6 => (
            any::<Index>(),
            any::<Index>(),
            1usize..48,
            prop::bool::weighted(0.8),
            prop::collection::vec(json_op(), 0..6),
            prop::collection::vec(line_op(), 0..4),
            any::<bool>(),
            prop::bool::weighted(0.9),
        )
            .prop_map(|(file, start, len, header, json, lines, pretty, trailing_newline)| Input::Mutated {
                file,
                start,
                len,
                header,
                json,
                lines,
                pretty,
                trailing_newline,
            }),
    ]
}

/// The value at `path` (each step picks a key or element), as far as the path goes.
fn walk<'a>(mut v: &'a Value, path: &[Index]) -> &'a Value {
    for ix in path {
        v = match v {
            Value::Object(o) if !o.is_empty() => o.values().nth(ix.index(o.len())).unwrap(),
            Value::Array(a) if !a.is_empty() => &a[ix.index(a.len())],
            _ => return v,
        };
    }
    v
}

/// Applies `edit` to the value `path` leads to (the path stops early at a scalar or an empty
/// container, and the edit applies there).
fn edit(v: &mut Value, path: &[Index], edit: &JsonEdit, replacement: Option<Value>) {
    let deep = |c: &Value| matches!(c, Value::Object(o) if !o.is_empty()) || matches!(c, Value::Array(a) if !a.is_empty());
    let Some((ix, rest)) = path.split_first() else {
        if let Some(r) = replacement {
            *v = r;
        }
        return;
    };
    match v {
        Value::Object(o) if !o.is_empty() => {
            let key = o.keys().nth(ix.index(o.len())).unwrap().clone();
            if !rest.is_empty() && deep(&o[&key]) {
                return self::edit(o.get_mut(&key).unwrap(), rest, edit, replacement);
            }
            match edit {
                JsonEdit::Remove => {
                    o.shift_remove(&key);
                }
                JsonEdit::Set(_) => {
                    o.insert(key, replacement.unwrap());
                }
                JsonEdit::Duplicate => {
                    let c = o[&key].clone();
                    o.insert(format!("{key}_"), c);
                }
                JsonEdit::Rename(to) => {
                    let c = o.shift_remove(&key).unwrap();
                    o.insert(to.clone(), c);
                }
            }
        }
        Value::Array(a) if !a.is_empty() => {
            let i = ix.index(a.len());
            if !rest.is_empty() && deep(&a[i]) {
                return self::edit(&mut a[i], rest, edit, replacement);
            }
            match edit {
                JsonEdit::Remove => {
                    a.remove(i);
                }
                JsonEdit::Set(_) => a[i] = replacement.unwrap(),
                JsonEdit::Duplicate | JsonEdit::Rename(_) => {
                    let c = a[i].clone();
                    a.insert(i, c);
                }
            }
        }
        other => {
            if let Some(r) = replacement {
                *other = r;
            }
        }
    }
}

/// Keeps `len` elements of `doc[key]` from `start`.
fn window(doc: &mut Value, key: &str, start: Index, len: usize) {
    if let Some(Value::Array(a)) = doc.get_mut(key) {
        if !a.is_empty() {
            let s = start.index(a.len());
            let e = (s + len).min(a.len());
            *a = a[s..e].to_vec();
        }
    }
}

fn build(format: Format, input: &Input) -> Vec<u8> {
    let corpus = corpus(format);
    let (file, start, len, header, json, line_ops, pretty, trailing_newline) = match input {
        Input::Bytes(b) => return b.clone(),
        Input::Soup(tokens) => return tokens.iter().map(|t| SOUP[t.index(SOUP.len())]).collect::<String>().into_bytes(),
        Input::Mutated { file, start, len, header, json, lines, pretty, trailing_newline } => {
            (file, start, *len, *header, json, lines, *pretty, *trailing_newline)
        }
    };
    let lines = &corpus.files[file.index(corpus.files.len())];
    // The window: lines of a JSONL file, or events of a document's `history[]`.
    let mut values: Vec<Value> = match format {
        Format::OpenHands | Format::SweAgent => {
            let mut v = lines[start.index(lines.len())].clone();
            window(&mut v, "history", *start, len);
            window(&mut v, "trajectory", *start, len);
            vec![v]
        }
        _ => {
            let s = start.index(lines.len());
            let mut out: Vec<Value> = if header && s > 0 { vec![lines[0].clone()] } else { Vec::new() };
            out.extend(lines[s..(s + len).min(lines.len())].iter().cloned());
            out
        }
    };
    for op in json {
        let replacement = match &op.edit {
            JsonEdit::Set(nv) => Some(match nv {
                NewValue::Null => Value::Null,
                NewValue::Bool(b) => Value::Bool(*b),
                NewValue::Int(i) => Value::from(*i),
                NewValue::Float(f) => Value::from(*f),
                NewValue::Str(s) => Value::String(s.clone()),
                NewValue::Huge(n) => Value::String("lorem ipsum dolor\n".repeat(n / 18 + 1)),
                NewValue::EmptyArray => Value::Array(Vec::new()),
                NewValue::EmptyObject => Value::Object(Default::default()),
                NewValue::Tag(i) => Value::String(corpus.tags[i.index(corpus.tags.len())].clone()),
                NewValue::Graft(line, path) => walk(&values[line.index(values.len())], path).clone(),
            }),
            _ => None,
        };
        let n = values.len();
        edit(&mut values[op.line.index(n)], &op.path, &op.edit, replacement);
    }
    let mut text: Vec<Vec<u8>> = if pretty && format == Format::SweAgent {
        serde_json::to_string_pretty(&values[0]).unwrap().lines().map(|l| l.as_bytes().to_vec()).collect()
    } else {
        values.iter().map(|v| serde_json::to_vec(v).unwrap()).collect()
    };
    let mut bom = false;
    for op in line_ops {
        let n = text.len();
        if n == 0 {
            break;
        }
        match op {
            LineOp::Delete(i) => {
                text.remove(i.index(n));
            }
            LineOp::Duplicate(i) => {
                let l = text[i.index(n)].clone();
                text.insert(i.index(n), l);
            }
            LineOp::Swap(a, b) => text.swap(a.index(n), b.index(n)),
            LineOp::Truncate(i, at) => {
                let l = &mut text[i.index(n)];
                let cut = at.index(l.len() + 1);
                l.truncate(cut);
            }
            LineOp::Flip(i, at, mask) => {
                let l = &mut text[i.index(n)];
                if !l.is_empty() {
                    let k = at.index(l.len());
                    l[k] ^= mask;
                }
            }
            LineOp::Insert(i, bytes) => text.insert(i.index(n + 1), bytes.clone()),
            LineOp::Crlf(i) => text[i.index(n)].push(b'\r'),
            LineOp::Blank(i) => text.insert(i.index(n + 1), Vec::new()),
            LineOp::Bom => bom = true,
        }
    }
    let mut out = if bom { b"\xEF\xBB\xBF".to_vec() } else { Vec::new() };
    out.extend(text.join(&b'\n'));
    if trailing_newline {
        out.push(b'\n');
    }
    out
}

/// A file in the temp folder, removed on drop.
struct Temp(PathBuf);

impl Temp {
    fn new(bytes: &[u8]) -> Temp {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("compactbench-fuzz-import-{}-{n}.jsonl", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        Temp(path)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Errors that concern the whole file, which the crate docs promise to name only the file.
const WHOLE_FILE: &[&str] = &["empty file", "cannot detect the transcript format", "no entries of format", "no valid entries of format"];

fn check_error(e: &ImportError, path: &Path, bytes: &[u8]) {
    let shown = e.to_string();
    let file = path.display().to_string();
    assert_eq!(e.path, path, "{shown}");
    assert!(shown.starts_with(&format!("{file}:")), "error does not start with the file: {shown}");
    let lines = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
    match e.line {
        Some(n) => {
            assert!((1..=lines).contains(&n), "line {n} outside a file of {lines} lines: {shown}");
            assert!(shown.starts_with(&format!("{file}:{n}: ")), "{shown}");
        }
        None => {
            let names_field = e.message.contains('`') || e.message.contains("history[");
            let whole_file = WHOLE_FILE.iter().any(|w| e.message.starts_with(w))
                || (e.message.starts_with("row ") && e.message.contains("not found"));
            assert!(names_field || whole_file, "error names neither a line nor a field: {shown}");
        }
    }
    assert!(!e.message.trim().is_empty(), "{shown}");
}

/// Per format: strict imports that succeeded, failed; lenient imports that succeeded (how
/// deep the inputs go, printed after each target).
static OUTCOMES: [[AtomicUsize; 3]; 5] = [const { [const { AtomicUsize::new(0) }; 3] }; 5];

fn check(format: Format, input: &Input) {
    let bytes = build(format, input);
    let t = Temp::new(&bytes);
    let run = |format: Option<Format>, lenient: bool| import(&t.0, &Options { format, lenient, row: 0 });
    let strict = run(Some(format), false);
    let lenient = run(Some(format), true);
    let detected = run(None, false);
    for r in [&strict, &lenient, &detected] {
        match r {
            Err(e) => check_error(e, &t.0, &bytes),
            Ok(imp) => {
                assert_eq!(imp.stats.messages, imp.messages.len());
                assert!(imp.stats.tool_pairs + imp.stats.unpaired_calls == imp.stats.tool_calls, "{:?}", imp.stats);
                for r in &imp.recorded {
                    assert!(r.message_index <= imp.messages.len(), "recorded compaction at {} of {} messages", r.message_index, imp.messages.len());
                    if let Some(k) = r.first_kept_message {
                        assert!(k <= imp.messages.len(), "first kept {k} of {} messages", imp.messages.len());
                    }
                }
            }
        }
    }
    let outcomes = &OUTCOMES[Format::ALL.iter().position(|&f| f == format).unwrap()];
    outcomes[usize::from(strict.is_err())].fetch_add(1, Ordering::Relaxed);
    if lenient.is_ok() {
        outcomes[2].fetch_add(1, Ordering::Relaxed);
    }
    if let Ok(s) = &strict {
        assert_eq!(s.format, format);
        assert_eq!(s.stats.skipped_lines, 0);
        assert_eq!(lenient.as_ref().ok(), Some(s), "strict imported, lenient did not import the same");
    }
}

fn fuzz_format(format: Format) {
    // Load the corpus outside the timed cases.
    corpus(format);
    support::fuzz(&format!("import/{format}"), DEFAULT_CASES, input(), |input| check(format, &input));
    let [ok, err, lenient] = &OUTCOMES[Format::ALL.iter().position(|&f| f == format).unwrap()];
    let load = |a: &AtomicUsize| a.load(Ordering::Relaxed);
    eprintln!("fuzz import/{format}: strict {} imported, {} rejected; lenient {} imported", load(ok), load(err), load(lenient));
}

#[test]
fn fuzz_import_claude_code() {
    fuzz_format(Format::ClaudeCode);
}

#[test]
fn fuzz_import_codex() {
    fuzz_format(Format::Codex);
}

#[test]
fn fuzz_import_pi() {
    fuzz_format(Format::Pi);
}

#[test]
fn fuzz_import_openhands() {
    fuzz_format(Format::OpenHands);
}

#[test]
fn fuzz_import_swe_agent() {
    fuzz_format(Format::SweAgent);
}

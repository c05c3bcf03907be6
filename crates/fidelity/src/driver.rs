//! A long-lived driver process: one JSON line in, one JSON line out, per case.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::json;

use compactbench_core::EntryId;

use crate::{Answer, Case, Export, Install, Original};

/// What a driver prints for one case: indices into the native session it was given. Every
/// field must be present ([`NativeAnswer::parse`]): `null` says "the original does not answer
/// this", and a field left out is a driver bug, not a `false` or a `null`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NativeAnswer {
    /// The case id, echoed.
    pub id: String,
    /// The trigger fired.
    pub compact: bool,
    /// First kept native index (the session's length: nothing kept).
    pub first_kept: Option<usize>,
    /// Kept native indices.
    pub kept: Option<Vec<usize>>,
    /// The cut splits a turn.
    pub split_turn: Option<bool>,
    /// Tokens before, as the original estimates them.
    pub tokens_before: Option<u64>,
    /// Native indices the original rewrote in place (masked, truncated, pruned). Optional: a
    /// driver that checks in-place rewrites sends it on every answer; one that leaves it out
    /// does not check them, and the report says so.
    #[serde(default)]
    pub rewritten: Option<Vec<usize>>,
    /// The text the original wrote at each native index of `rewritten` (the index as a JSON
    /// object key). Optional: a driver whose original writes the replacement text sends it
    /// beside `rewritten`, for every index there.
    #[serde(default)]
    pub rewritten_text: Option<BTreeMap<String, String>>,
    /// The original's own name for what it did, where it has one (Gemini CLI's
    /// `CompressionStatus`). Optional; a reviewed difference may be narrowed to it.
    #[serde(default)]
    pub outcome: Option<String>,
    /// The original threw: its message.
    pub error: Option<String>,
}

/// The fields a driver's answer must name when the original did not throw.
const FIELDS: [&str; 6] = ["compact", "first_kept", "kept", "split_turn", "tokens_before", "error"];

impl NativeAnswer {
    /// Parses one line a driver printed, requiring every field (only `id` and `error` when
    /// `error` is set: the original threw, and the other fields mean nothing).
    pub fn parse(line: &str) -> Result<NativeAnswer, String> {
        let value: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        let object = value.as_object().ok_or("not a JSON object")?;
        let threw = object.get("error").is_some_and(|e| !e.is_null());
        let required: &[&str] = if threw { &["id", "error"] } else { &FIELDS };
        if let Some(missing) = required.iter().chain(["id"].iter()).find(|f| !object.contains_key(**f)) {
            return Err(format!("field `{missing}` is missing (drivers answer every field; null where the original has none)"));
        }
        if threw {
            return Ok(NativeAnswer { id: object["id"].as_str().unwrap_or_default().to_owned(), error: object["error"].as_str().map(str::to_owned), ..NativeAnswer::default() });
        }
        serde_json::from_value(value).map_err(|e| e.to_string())
    }

    /// In our entry ids, through the export's index map.
    pub fn to_answer(&self, export: &Export, case: &Case) -> Result<Answer, String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let next = case.log.next_id();
        let map = |i: usize| export.entry(i, next).ok_or_else(|| format!("driver index {i} is outside the exported session ({} items)", export.ids.len()));
        // Several native items may stand for one entry of ours (oh-my-pi stores one tool
        // result per message): rewrites are compared by entry, sorted, as ours are.
        let rewritten = self
            .rewritten
            .as_ref()
            .map(|r| {
                let mut ids = r.iter().map(|&i| map(i)).collect::<Result<Vec<_>, _>>()?;
                ids.sort_unstable();
                ids.dedup();
                Ok::<_, String>(ids)
            })
            .transpose()?;
        let rewritten_text = self.rewritten_text.as_ref().map(|texts| self.texts(texts, &map)).transpose()?;
        Ok(Answer {
            compact: self.compact,
            first_kept: self.first_kept.map(map).transpose()?,
            kept: self.kept.as_ref().map(|k| k.iter().map(|&i| map(i)).collect::<Result<Vec<_>, _>>()).transpose()?,
            split_turn: self.split_turn,
            tokens_before: self.tokens_before,
            rewritten,
            rewritten_text,
            outcome: self.outcome.clone(),
        })
    }

    /// `rewritten_text` by our entry: the texts of native items sharing one entry joined one per
    /// line, in native order. A text at an index `rewritten` does not name, or an index it names
    /// without a text, is a driver bug.
    fn texts(
        &self,
        texts: &BTreeMap<String, String>,
        map: &dyn Fn(usize) -> Result<EntryId, String>,
    ) -> Result<BTreeMap<EntryId, String>, String> {
        let rewritten = self.rewritten.as_deref().ok_or("`rewritten_text` without `rewritten`")?;
        let mut native = BTreeMap::new();
        for (key, text) in texts {
            let i: usize = key.parse().map_err(|_| format!("`rewritten_text` key {key:?} is not a native index"))?;
            if !rewritten.contains(&i) {
                return Err(format!("`rewritten_text` has index {i}, which `rewritten` does not name"));
            }
            native.insert(i, text);
        }
        if let Some(i) = rewritten.iter().find(|i| !native.contains_key(i)) {
            return Err(format!("`rewritten` names index {i} without a text in `rewritten_text`"));
        }
        let mut by_entry: BTreeMap<EntryId, Vec<&str>> = BTreeMap::new();
        for (i, text) in native {
            by_entry.entry(map(i)?).or_default().push(text);
        }
        Ok(by_entry.into_iter().map(|(id, texts)| (id, texts.join("\n"))).collect())
    }
}

/// Where `--setup` installs an original.
///
/// Rows that install the same packages for the same driver (a release asked at two moments,
/// OpenHands V0's condensers) share the first such row's folder, so `--setup` installs them
/// once: a V0 venv is about 1 GB.
pub fn home(root: &Path, original: &Original) -> PathBuf {
    let first = crate::ORIGINALS.iter().find(|o| o.install == original.install && o.driver == original.driver);
    root.join("target/fidelity").join(first.map_or(original.dir, |o| o.dir))
}

/// Whether `--setup` has installed `original`.
pub fn installed(root: &Path, original: &Original) -> bool {
    home(root, original).join(".installed").exists()
}

/// A running driver.
pub struct Driver {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    name: &'static str,
}

impl Driver {
    /// Starts the driver of `original` (installed under `root/target/fidelity`). Its stderr goes
    /// to `driver.log` in its install folder.
    pub fn start(root: &Path, original: &Original) -> Result<Driver> {
        let home = home(root, original);
        if !installed(root, original) {
            bail!("{} is not installed: run `cargo xtask fidelity --setup` first", original.name);
        }
        let script = root.join(original.driver);
        let mut cmd = match original.install {
            Install::Npm(_) => Command::new("node"),
            Install::Pip(_) => Command::new(home.join("venv/bin/python")),
        };
        let log = std::fs::File::create(home.join("driver.log")).context("driver log")?;
        cmd.arg(&script)
            .args(original.args)
            .env("COMPACTBENCH_FIDELITY_HOME", &home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log);
        let mut child = cmd.spawn().with_context(|| format!("starting {}", script.display()))?;
        let stdin = BufWriter::new(child.stdin.take().expect("piped"));
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(Driver { child, stdin, stdout, name: original.name })
    }

    /// Asks the original about one exported case.
    pub fn ask(&mut self, case: &Case, export: &Export) -> Result<NativeAnswer> {
        let line = json!({
            "id": case.id,
            "model": {
                "name": case.model.name,
                "context_window": case.model.window,
                "max_output_tokens": case.model.max_output,
            },
            "settings": export.settings,
            "session": export.session,
        });
        serde_json::to_writer(&mut self.stdin, &line)?;
        self.stdin.write_all(b"\n")?;
        self.stdin.flush().with_context(|| format!("{}: driver stopped reading", self.name))?;
        let mut out = String::new();
        if self.stdout.read_line(&mut out)? == 0 {
            bail!("{}: driver exited (see its driver.log)", self.name);
        }
        let answer = NativeAnswer::parse(&out).map_err(|e| anyhow::anyhow!("{}: driver printed {out:?}: {e}", self.name))?;
        if answer.id != case.id {
            bail!("{}: driver answered {} for case {}", self.name, answer.id, case.id);
        }
        Ok(answer)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::NativeAnswer;

    #[test]
    fn an_answer_names_every_field_or_is_refused() {
        let full = r#"{"id":"c","compact":true,"first_kept":3,"kept":null,"split_turn":null,"tokens_before":null,"error":null}"#;
        let a = NativeAnswer::parse(full).unwrap();
        assert!(a.compact && a.first_kept == Some(3) && a.tokens_before.is_none());
        let e = NativeAnswer::parse(r#"{"id":"c","compact":true,"first_kept":3,"error":null}"#).unwrap_err();
        assert!(e.contains("field `kept` is missing"), "{e}");
        let threw = NativeAnswer::parse(r#"{"id":"c","error":"boom"}"#).unwrap();
        assert_eq!(threw.error.as_deref(), Some("boom"));
        assert!(NativeAnswer::parse(r#"{"compact":true}"#).is_err());
    }

    /// Texts go to our entries (native items of one entry joined in order), and a text without
    /// its index in `rewritten`, or an index without a text, is refused.
    #[test]
    fn rewritten_texts_map_to_entries_and_must_match_the_indices() {
        use compactbench_core::{EntryId, Log, Message, ModelProfile, Shape};

        use crate::{Case, Export};

        let log = Log::from_messages([Message::user("a"), Message::user("b"), Message::user("c")]);
        let model = ModelProfile { name: "m".into(), window: 1_000, max_output: 100, provider: Shape::OpenaiChat, pricing: Default::default() };
        let case = Case::new("c", log, model);
        // Native items 1 and 2 both stand for entry 1.
        let export = Export { session: serde_json::Value::Null, ids: vec![EntryId(0), EntryId(1), EntryId(1)], settings: serde_json::json!({}) };
        let line = |rewritten: &str, text: &str| {
            format!(r#"{{"id":"c","compact":false,"first_kept":null,"kept":null,"split_turn":null,"tokens_before":null,"error":null,"rewritten":{rewritten},"rewritten_text":{text}}}"#)
        };
        let answer = NativeAnswer::parse(&line("[2, 1]", r#"{"2": "y", "1": "x"}"#)).unwrap().to_answer(&export, &case).unwrap();
        assert_eq!(answer.rewritten, Some(vec![EntryId(1)]));
        assert_eq!(answer.rewritten_text, Some([(EntryId(1), "x\ny".to_owned())].into_iter().collect()));
        let stray = NativeAnswer::parse(&line("[1]", r#"{"0": "x", "1": "y"}"#)).unwrap().to_answer(&export, &case).unwrap_err();
        assert!(stray.contains("index 0, which `rewritten` does not name"), "{stray}");
        let missing = NativeAnswer::parse(&line("[0, 1]", r#"{"1": "y"}"#)).unwrap().to_answer(&export, &case).unwrap_err();
        assert!(missing.contains("index 0 without a text"), "{missing}");
        let no_texts = NativeAnswer::parse(&line("[0]", "null")).unwrap().to_answer(&export, &case).unwrap();
        assert_eq!(no_texts.rewritten_text, None);
    }
}

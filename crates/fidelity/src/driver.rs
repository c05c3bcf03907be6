//! A long-lived driver process: one JSON line in, one JSON line out, per case.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::json;

use crate::{Answer, Case, Export, Install, Original};

/// What a driver prints for one case: indices into the native session it was given.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NativeAnswer {
    /// The case id, echoed.
    pub id: String,
    /// The trigger fired.
    #[serde(default)]
    pub compact: bool,
    /// First kept native index (the session's length: nothing kept).
    #[serde(default)]
    pub first_kept: Option<usize>,
    /// Kept native indices.
    #[serde(default)]
    pub kept: Option<Vec<usize>>,
    /// The cut splits a turn.
    #[serde(default)]
    pub split_turn: Option<bool>,
    /// Tokens before, as the original estimates them.
    #[serde(default)]
    pub tokens_before: Option<u64>,
    /// The original threw: its message.
    #[serde(default)]
    pub error: Option<String>,
}

impl NativeAnswer {
    /// In our entry ids, through the export's index map.
    pub fn to_answer(&self, export: &Export, case: &Case) -> Result<Answer, String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let next = case.log.next_id();
        let map = |i: usize| export.entry(i, next).ok_or_else(|| format!("driver index {i} is outside the exported session ({} items)", export.ids.len()));
        Ok(Answer {
            compact: self.compact,
            first_kept: self.first_kept.map(map).transpose()?,
            kept: self.kept.as_ref().map(|k| k.iter().map(|&i| map(i)).collect::<Result<Vec<_>, _>>()).transpose()?,
            split_turn: self.split_turn,
            tokens_before: self.tokens_before,
        })
    }
}

/// Where `--setup` installs an original.
pub fn home(root: &Path, original: &Original) -> PathBuf {
    root.join("target/fidelity").join(original.dir)
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
        let answer: NativeAnswer = serde_json::from_str(&out).with_context(|| format!("{}: driver printed {out:?}", self.name))?;
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

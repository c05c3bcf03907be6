//! Scenario files: TOML, validated with errors that name the file and the field.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use compactbench_core::{ModelProfile, Shape};
use serde::Deserialize;

use crate::facts::FactKind;

/// A scenario: a model profile, the shape of a generated session, and the facts to plant.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short id, used in reports and on the command line (`[a-z0-9-]+`).
    pub name: String,
    /// One line: the stressor this scenario applies.
    pub description: String,
    /// The model the session runs against.
    pub model: ModelProfile,
    /// How the session is generated (absent for a replay scenario).
    #[serde(default)]
    pub session: SessionSpec,
    /// A recorded transcript to replay instead of a generated session.
    #[serde(default)]
    pub replay: Option<ReplaySpec>,
    /// Facts to plant (generated sessions only; replays mine theirs).
    #[serde(default, rename = "facts")]
    pub facts: Vec<FactSpec>,
    /// A project memory file (CLAUDE.md, AGENTS.md, GEMINI.md) with a standing compaction
    /// instruction, present from the start (generated sessions only).
    #[serde(default)]
    pub memory: Option<MemorySpec>,
    /// Manual compactions the user asks for (generated sessions only).
    #[serde(default)]
    pub manual: Vec<ManualSpec>,
}

/// A standing compaction instruction in project memory: "when compacting, keep the exact
/// lines about `k1`, `k2`", naming the keys of some planted facts.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySpec {
    /// Indices into `facts` of the facts whose keys the instruction names (at least one).
    pub names: Vec<usize>,
}

/// The user types the harness's manual compaction command (`/compact <text>`) at the prompt
/// after turn `turn − 1` ends, before turn `turn`'s message; the text names the keys of some
/// facts planted before it (none: a bare `/compact`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManualSpec {
    /// The turn whose user message follows the command (1 or later).
    pub turn: u32,
    /// Indices into `facts` of the facts whose keys the text names.
    #[serde(default)]
    pub names: Vec<usize>,
}

/// Tool weights for the generator: relative frequency of each tool in ordinary steps.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolWeights {
    /// File reads.
    #[serde(default)]
    pub read: u32,
    /// Searches.
    #[serde(default)]
    pub grep: u32,
    /// Shell commands, mostly test runs.
    #[serde(default)]
    pub bash: u32,
    /// File edits.
    #[serde(default)]
    pub edit: u32,
    /// Directory listings.
    #[serde(default)]
    pub ls: u32,
}

impl Default for ToolWeights {
    fn default() -> Self {
        ToolWeights { read: 4, grep: 2, bash: 3, edit: 2, ls: 1 }
    }
}

/// A real transcript replayed as the session.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplaySpec {
    /// The transcript, relative to the scenario file's folder.
    pub transcript: PathBuf,
    /// Its format (`claude-code`, `codex`, `pi`, `openhands`, `swe-agent`); detected if absent.
    #[serde(default)]
    pub format: Option<String>,
    /// OpenHands only: the row of a multi-row file.
    #[serde(default)]
    pub row: usize,
    /// The imported transcript, filled by [`Scenario::load`].
    #[serde(skip)]
    pub imported: Option<Arc<Replay>>,
}

impl PartialEq for ReplaySpec {
    fn eq(&self, other: &Self) -> bool {
        (&self.transcript, &self.format, self.row) == (&other.transcript, &other.format, other.row)
    }
}

/// A transcript ready to replay: its messages without the harness's own compaction summaries,
/// and those compactions, placed at session steps (ground truth for the matching strategy).
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    /// The format it was read as.
    pub format: compactbench_import::Format,
    /// Messages to replay.
    pub messages: Vec<compactbench_core::Message>,
    /// The harness's own compactions.
    pub recorded: Vec<Recorded>,
    /// What the importer counted.
    pub stats: compactbench_import::Stats,
}

/// A compaction the original harness recorded, in session steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The session step before which it happened.
    pub step: usize,
    /// What the harness says triggered it.
    pub trigger: Option<String>,
    /// The harness's own count of context tokens before it.
    pub tokens_before: Option<u64>,
    /// The first step it kept verbatim, where the format says.
    pub first_kept_step: Option<usize>,
    /// Its summary text, where recorded.
    pub summary: Option<String>,
    /// The harness release that made it, where recorded.
    pub release: Option<String>,
    /// When it was made, as the format writes it, where recorded (Pi).
    pub recorded_at: Option<String>,
}

impl Replay {
    /// Prepares an import for replay. Claude Code stores its compaction summary as a user
    /// message; it is the harness's output, not session input, so it is left out (and the
    /// step numbers of later messages shift accordingly).
    pub fn new(imported: compactbench_import::Imported) -> Replay {
        let summary_at: Vec<usize> = imported
            .recorded
            .iter()
            .filter(|r| imported.format == compactbench_import::Format::ClaudeCode && r.summary.is_some())
            .map(|r| r.message_index)
            .collect();
        let leading_system = imported.messages.first().is_some_and(|m| m.role == compactbench_core::Role::System);
        // Message index -> session step: minus the system prompt, minus dropped summaries before it.
        let step = |index: usize| index.saturating_sub(usize::from(leading_system)) - summary_at.iter().filter(|&&d| d < index).count();
        let recorded = imported
            .recorded
            .iter()
            .map(|r| Recorded {
                step: step(r.message_index),
                trigger: r.trigger.clone(),
                tokens_before: r.tokens_before,
                first_kept_step: r.first_kept_message.map(step),
                summary: r.summary.clone(),
                release: r.release.clone(),
                recorded_at: r.recorded_at.clone(),
            })
            .collect();
        let messages = imported.messages.into_iter().enumerate().filter(|(i, _)| !summary_at.contains(i)).map(|(_, m)| m).collect();
        Replay { format: imported.format, messages, recorded, stats: imported.stats }
    }
}

/// How the session is generated.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    /// Number of user turns.
    pub turns: u32,
    /// Inclusive range of tool-calling assistant steps per turn.
    pub steps_per_turn: [u32; 2],
    /// Share of steps that issue 2–4 calls in parallel (0.0–1.0).
    #[serde(default)]
    pub parallel_share: f64,
    /// Multiplier on tool output sizes.
    #[serde(default = "one")]
    pub output_scale: f64,
    /// Lines of the system prompt (about 12 tokens each).
    #[serde(default = "default_system_lines")]
    pub system_prompt_lines: u32,
    /// Share of turns that open with an exploration span (3–8 search/read steps) that a
    /// harness could delegate to a subagent (0.0–1.0, default 0).
    #[serde(default)]
    pub delegable_share: f64,
    /// Distinct files in the repository the session works on (1–100); fewer files means
    /// more repeated reads of the same file.
    #[serde(default = "default_files")]
    pub files: u32,
    /// Tool mix.
    #[serde(default)]
    pub tools: ToolWeights,
}

fn default_files() -> u32 {
    60
}

fn one() -> f64 {
    1.0
}

fn default_system_lines() -> u32 {
    80
}

/// One planted fact.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactSpec {
    /// What kind of fact.
    pub kind: FactKind,
    /// Turn (0-based) in which it is planted.
    pub turn: u32,
    /// Last turn in which it is still needed (inclusive); default: the last turn.
    #[serde(default)]
    pub until_turn: Option<u32>,
    /// `superseded_value` only: the turns (after `turn`, increasing, before `until_turn`) in
    /// which the value changes; the fact is needed as its last value from the last change on.
    #[serde(default)]
    pub changes: Vec<u32>,
    /// `superseded_value` only: look-alike settings stated beside each statement of the value
    /// (0–3, default 1).
    #[serde(default)]
    pub distractors: Option<u32>,
}

/// Most changes a `superseded_value` fact may have.
pub const MAX_CHANGES: usize = 4;

/// Most distractors per statement of a `superseded_value` fact.
pub const MAX_DISTRACTORS: u32 = 3;

impl FactSpec {
    /// Look-alike settings stated beside each statement of a `superseded_value` fact.
    pub fn distractors(&self) -> u32 {
        self.distractors.unwrap_or(1)
    }
}

/// A scenario file could not be used.
#[derive(Debug)]
pub struct ScenarioError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong, naming the field (and line where the parser knows it).
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for ScenarioError {}

impl Scenario {
    /// Parses and validates scenario text; `path` is used in errors only.
    pub fn parse(path: &Path, text: &str) -> Result<Scenario, ScenarioError> {
        let err = |message: String| ScenarioError { path: path.to_owned(), message };
        let scenario: Scenario = toml::from_str(text).map_err(|e| err(e.to_string().trim_end().to_owned()))?;
        scenario.validate().map_err(|(field, what)| err(format!("field `{field}`: {what}")))?;
        Ok(scenario)
    }

    /// Reads, parses and validates a scenario file; a replay scenario's transcript is
    /// imported too (relative to the file's folder).
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScenarioError { path: path.to_owned(), message: format!("cannot read: {e}") })?;
        let mut scenario = Scenario::parse(path, &text)?;
        if let Some(replay) = &mut scenario.replay {
            let file = path.parent().unwrap_or(Path::new(".")).join(&replay.transcript);
            let format = match &replay.format {
                Some(f) => Some(f.parse().map_err(|e: String| ScenarioError { path: path.to_owned(), message: format!("field `replay.format`: {e}") })?),
                None => None,
            };
            let options = compactbench_import::Options { format, lenient: false, row: replay.row };
            let imported = compactbench_import::import(&file, &options)
                .map_err(|e| ScenarioError { path: path.to_owned(), message: format!("field `replay.transcript`: {e}") })?;
            replay.imported = Some(Arc::new(Replay::new(imported)));
        }
        Ok(scenario)
    }

    /// A replay scenario for a transcript file, with a model profile suited to its format.
    pub fn from_transcript(path: &Path, options: &compactbench_import::Options) -> Result<Scenario, ScenarioError> {
        let imported = compactbench_import::import(path, options).map_err(|e| ScenarioError { path: path.to_owned(), message: e.to_string() })?;
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("transcript");
        let name: String = stem.to_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        let name = name.split('-').filter(|w| !w.is_empty()).collect::<Vec<_>>().join("-");
        let format = imported.format;
        let file = path.file_name().map_or_else(|| path.display().to_string(), |f| f.to_string_lossy().into_owned());
        Ok(Scenario {
            name,
            description: format!("Replay of the recorded {} session {file}.", format.name()),
            model: default_model(format),
            session: SessionSpec::default(),
            replay: Some(ReplaySpec {
                transcript: path.to_owned(),
                format: Some(format.name().to_owned()),
                row: options.row,
                imported: Some(Arc::new(Replay::new(imported))),
            }),
            facts: Vec::new(),
            memory: None,
            manual: Vec::new(),
        })
    }

    fn validate(&self) -> Result<(), (String, String)> {
        let fail = |field: &str, what: String| Err((field.to_owned(), what));
        if self.name.is_empty() || !self.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
            return fail("name", format!("expected lowercase letters, digits and '-', got {:?}", self.name));
        }
        if self.model.window < 1024 {
            return fail("model.window", format!("expected at least 1024 tokens, got {}", self.model.window));
        }
        if self.model.max_output == 0 || self.model.max_output >= self.model.window {
            return fail("model.max_output", format!("expected 1..{} (below the window), got {}", self.model.window, self.model.max_output));
        }
        if self.replay.is_some() {
            if self.session != SessionSpec::default() || !self.facts.is_empty() || self.memory.is_some() || !self.manual.is_empty() {
                return fail(
                    "replay",
                    "expected no [session], [[facts]], [memory] or [[manual]] in a replay scenario (its probes are mined from the transcript)".into(),
                );
            }
            return Ok(());
        }
        if self.session == SessionSpec::default() {
            return fail("session", "expected a [session] table (or a [replay] table)".into());
        }
        let s = &self.session;
        if s.turns == 0 {
            return fail("session.turns", "expected at least 1".into());
        }
        let [lo, hi] = s.steps_per_turn;
        if lo > hi || hi == 0 {
            return fail("session.steps_per_turn", format!("expected [min, max] with 0 <= min <= max and max >= 1, got [{lo}, {hi}]"));
        }
        if !(0.0..=1.0).contains(&s.parallel_share) {
            return fail("session.parallel_share", format!("expected 0.0..=1.0, got {}", s.parallel_share));
        }
        if !(0.0..=1.0).contains(&s.delegable_share) {
            return fail("session.delegable_share", format!("expected 0.0..=1.0, got {}", s.delegable_share));
        }
        if !(s.output_scale > 0.0 && s.output_scale <= 100.0) {
            return fail("session.output_scale", format!("expected a number in (0, 100], got {}", s.output_scale));
        }
        if !(1..=100).contains(&s.files) {
            return fail("session.files", format!("expected 1..=100, got {}", s.files));
        }
        let t = &s.tools;
        if t.read + t.grep + t.bash + t.edit + t.ls == 0 {
            return fail("session.tools", "expected at least one tool with a weight above 0".into());
        }
        for (i, f) in self.facts.iter().enumerate() {
            if f.turn >= s.turns {
                return fail(&format!("facts[{i}].turn"), format!("expected a turn below session.turns = {}, got {}", s.turns, f.turn));
            }
            if let Some(u) = f.until_turn {
                if u < f.turn || u >= s.turns {
                    return fail(&format!("facts[{i}].until_turn"), format!("expected {}..{}, got {u}", f.turn, s.turns));
                }
            }
            if f.kind != FactKind::SupersededValue {
                if !f.changes.is_empty() || f.distractors.is_some() {
                    let field = if f.changes.is_empty() { "distractors" } else { "changes" };
                    return fail(&format!("facts[{i}].{field}"), format!("only a superseded_value fact has {field}, this one is {}", f.kind.as_str()));
                }
                continue;
            }
            let until = f.until_turn.unwrap_or(s.turns - 1);
            if f.changes.is_empty() || f.changes.len() > MAX_CHANGES {
                return fail(&format!("facts[{i}].changes"), format!("expected 1 to {MAX_CHANGES} turns in which the value changes, got {}", f.changes.len()));
            }
            let mut after = f.turn;
            for &c in &f.changes {
                if c <= after || c >= until {
                    return fail(
                        &format!("facts[{i}].changes"),
                        format!("expected increasing turns after turn = {} and before the last turn it is needed ({until}), got {:?}", f.turn, f.changes),
                    );
                }
                after = c;
            }
            if f.distractors() > MAX_DISTRACTORS {
                return fail(&format!("facts[{i}].distractors"), format!("expected 0..={MAX_DISTRACTORS}, got {}", f.distractors()));
            }
        }
        self.validate_instructions()
    }

    /// The `[memory]` and `[[manual]]` tables: every name a fact index, each fact named once,
    /// a manual command after a turn and naming only facts planted before it.
    fn validate_instructions(&self) -> Result<(), (String, String)> {
        let fail = |field: String, what: String| Err((field, what));
        let turns = self.session.turns;
        let mut named = vec![None; self.facts.len()];
        let mut check = |field: &str, names: &[usize], before: Option<u32>| -> Result<(), (String, String)> {
            for (k, &f) in names.iter().enumerate() {
                let field = format!("{field}.names[{k}]");
                let Some(fact) = self.facts.get(f) else {
                    return fail(field, format!("expected an index into [[facts]] (0..{}), got {f}", self.facts.len()));
                };
                if let Some(other) = named[f].replace(field.clone()) {
                    return fail(field, format!("facts[{f}] is already named by {other}; a fact may be named once"));
                }
                if let Some(turn) = before.filter(|&t| fact.turn >= t) {
                    return fail(field, format!("facts[{f}] is planted in turn {}, not before the command's turn {turn}", fact.turn));
                }
            }
            Ok(())
        };
        if let Some(memory) = &self.memory {
            if memory.names.is_empty() {
                return fail("memory.names".into(), "expected at least one fact index".into());
            }
            check("memory", &memory.names, None)?;
        }
        for (i, m) in self.manual.iter().enumerate() {
            if m.turn == 0 || m.turn >= turns {
                return fail(format!("manual[{i}].turn"), format!("expected 1..{turns} (after a turn has ended), got {}", m.turn));
            }
            check(&format!("manual[{i}]"), &m.names, Some(m.turn))?;
        }
        Ok(())
    }

    /// The shape requests are "really" sent as.
    pub fn provider(&self) -> Shape {
        self.model.provider
    }
}

/// A model profile for replaying a transcript of `format`: the model family the recorded
/// sessions used, with its window, output cap, wire shape and list prices (USD per million).
pub fn default_model(format: compactbench_import::Format) -> ModelProfile {
    use compactbench_core::Pricing;
    use compactbench_import::Format;
    let (name, window, max_output, provider, pricing) = match format {
        Format::ClaudeCode | Format::Pi => ("claude-sonnet-4", 200_000, 32_000, Shape::Anthropic, Pricing { input: 3.0, cached_input: 0.3, output: 15.0 }),
        Format::Codex => ("gpt-5-codex", 272_000, 128_000, Shape::OpenaiResponses, Pricing { input: 1.25, cached_input: 0.125, output: 10.0 }),
        Format::OpenHands => ("llama-4-maverick", 128_000, 8_192, Shape::OpenaiChat, Pricing { input: 0.2, cached_input: 0.2, output: 0.6 }),
        Format::SweAgent => ("gpt-4", 32_000, 4_096, Shape::OpenaiChat, Pricing { input: 30.0, cached_input: 30.0, output: 60.0 }),
    };
    ModelProfile { name: name.into(), window, max_output, provider, pricing }
}

/// Loads every `*.toml` in `dir`, sorted by file name.
pub fn load_dir(dir: &Path) -> Result<Vec<Scenario>, ScenarioError> {
    let read = std::fs::read_dir(dir).map_err(|e| ScenarioError { path: dir.to_owned(), message: format!("cannot list: {e}") })?;
    let mut paths: Vec<PathBuf> = read
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    let scenarios = paths.iter().map(|p| Scenario::load(p)).collect::<Result<Vec<_>, _>>()?;
    for (i, s) in scenarios.iter().enumerate() {
        if let Some(j) = scenarios[..i].iter().position(|o| o.name == s.name) {
            return Err(ScenarioError { path: paths[i].clone(), message: format!("field `name`: {:?} is also used by {}", s.name, paths[j].display()) });
        }
    }
    Ok(scenarios)
}

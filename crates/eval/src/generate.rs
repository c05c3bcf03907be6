//! The seeded session generator: a long coding session with realistic tool traffic and
//! planted facts.
//!
//! Same scenario and seed, same session, byte for byte (ChaCha8 seeded from a stable hash).
//! Filler identifiers are built from dictionary words only; every needle carries a tag of
//! letters and digits (`q7k2`) that filler never produces, so needles are unique.

use std::collections::HashSet;

use compactbench_core::{Message, Part, Role};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;

use crate::facts::{Fact, FactKind, NamedBy, Stale};
pub use crate::session::{Manual, Session, Span, Step, UserInstructions};
use crate::scenario::{FactSpec, Scenario};

/// A tool call a planted fact forces into a turn, with the fact it carries, if any
/// (kind, needle, the turn the fact must be remembered until, its index in the scenario).
type ForcedStep = (Call, Option<(FactKind, String, u32, usize)>);

/// FNV-1a: a hash that stays the same across Rust releases (unlike `DefaultHasher`).
pub(crate) fn stable_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

const MODULES: &[&str] = &[
    "parser", "lexer", "config", "cache", "server", "client", "store", "index", "query", "render", "auth", "session",
    "router", "codec", "metrics", "scheduler", "worker", "planner", "buffer", "format",
];
const DIRS: &[&str] = &["src", "src/core", "src/net", "src/storage", "crates/engine/src"];
const VERBS: &[&str] = &[
    "parse", "load", "build", "read", "write", "flush", "resolve", "apply", "merge", "split", "encode", "decode",
    "validate", "render", "fetch", "spawn", "close", "open", "update", "compute",
];
const NOUNS: &[&str] = &[
    "token", "buffer", "config", "entry", "node", "frame", "header", "record", "batch", "span", "range", "block",
    "index", "query", "state", "event", "request", "response", "handle", "cursor",
];
const TYPES: &[&str] = &["Builder", "Config", "Error", "State", "Map", "Id", "Kind", "Reader", "Writer", "Table"];

struct Gen<'a> {
    rng: ChaCha8Rng,
    scale: f64,
    spec: &'a Scenario,
    steps: Vec<Step>,
    calls: u32,
    tags: HashSet<String>,
    /// The repository's files, and how often each was edited (a read shows the current
    /// version: the same bytes until the next edit).
    files: Vec<String>,
    versions: std::collections::HashMap<String, u32>,
}

/// A tool call to make and how its result is produced.
enum Call {
    Read { path: String, defines: Option<String> },
    Grep { pattern: String, empty: bool },
    Test { module: String, failure: Option<String> },
    Build,
    Edit { path: String },
    Ls { dir: String },
}

impl Gen<'_> {
    fn pick<'s>(&mut self, xs: &[&'s str]) -> &'s str {
        xs[self.rng.gen_range(0..xs.len())]
    }

    fn ident(&mut self) -> String {
        format!("{}_{}", self.pick(VERBS), self.pick(NOUNS))
    }

    fn type_name(&mut self) -> String {
        let noun = self.pick(NOUNS);
        let mut c = noun.chars();
        let head: String = c.next().map(|h| h.to_ascii_uppercase()).into_iter().chain(c).collect();
        format!("{head}{}", self.pick(TYPES))
    }

    fn path(&mut self) -> String {
        self.files[self.rng.gen_range(0..self.files.len())].clone()
    }

    /// A fresh tag: a letter, a digit, a letter, a digit. Filler never has digits in words.
    fn tag(&mut self) -> String {
        loop {
            let t: String = [
                self.rng.gen_range(b'a'..=b'z') as char,
                self.rng.gen_range(b'0'..=b'9') as char,
                self.rng.gen_range(b'a'..=b'z') as char,
                self.rng.gen_range(b'0'..=b'9') as char,
            ]
            .into_iter()
            .collect();
            if self.tags.insert(t.clone()) {
                return t;
            }
        }
    }

    fn lines(&mut self, lo: usize, hi: usize) -> usize {
        let n = self.rng.gen_range(lo..=hi) as f64 * self.scale;
        (n.round() as usize).max(1)
    }

    fn code_line(&mut self) -> String {
        let (a, b, t) = (self.ident(), self.ident(), self.type_name());
        match self.rng.gen_range(0..9) {
            0 => format!("pub fn {a}(&mut self, {}: &{t}) -> Result<(), {t}> {{", self.pick(NOUNS)),
            1 => format!("    let {} = self.{a}({})?;", self.pick(NOUNS), self.pick(NOUNS)),
            2 => format!("    if {}.is_empty() {{ return Err({t}::{}); }}", self.pick(NOUNS), self.pick(NOUNS)),
            3 => format!("    for {} in self.{}.iter() {{", self.pick(NOUNS), self.pick(NOUNS)),
            4 => format!("        self.{b}(&{}, {});", self.pick(NOUNS), self.rng.gen_range(0..4096)),
            5 => "    }".to_owned(),
            6 => format!("    // {} the {} before we {} it", self.pick(VERBS), self.pick(NOUNS), self.pick(VERBS)),
            7 => format!("use crate::{}::{{{t}, {}}};", self.pick(MODULES), self.type_name()),
            _ => format!("    Ok({t}::new({}))", self.pick(NOUNS)),
        }
    }

    fn call_id(&mut self) -> String {
        self.calls += 1;
        format!("call_{:05}", self.calls)
    }

    fn ordinary_call(&mut self, parallel: bool) -> Call {
        let w = &self.spec.session.tools;
        let weights = if parallel { [w.read.max(1), w.grep, 0, 0, w.ls] } else { [w.read, w.grep, w.bash, w.edit, w.ls] };
        let total: u32 = weights.iter().sum();
        let mut r = self.rng.gen_range(0..total);
        let kind = weights.iter().position(|&x| {
            if r < x {
                true
            } else {
                r -= x;
                false
            }
        });
        match kind.expect("r < total") {
            0 => Call::Read { path: self.path(), defines: None },
            1 => Call::Grep { pattern: self.ident(), empty: false },
            2 if self.rng.gen_bool(0.7) => Call::Test { module: self.pick(MODULES).to_owned(), failure: None },
            2 => Call::Build,
            3 => Call::Edit { path: self.path() },
            _ => Call::Ls { dir: self.pick(DIRS).to_owned() },
        }
    }

    fn call_part(&mut self, call: &Call) -> (String, Part) {
        let id = self.call_id();
        let (name, args) = match call {
            Call::Read { path, .. } => ("read", json!({ "path": path })),
            Call::Grep { pattern, .. } => ("grep", json!({ "pattern": pattern, "path": "." })),
            Call::Test { module, .. } => ("bash", json!({ "command": format!("cargo test {module}::") })),
            Call::Build => ("bash", json!({ "command": "cargo build --all-targets" })),
            Call::Edit { path } => {
                let (old, new) = (self.code_line(), self.code_line());
                ("edit", json!({ "path": path, "oldText": old, "newText": new }))
            }
            Call::Ls { dir } => ("ls", json!({ "path": dir })),
        };
        (id.clone(), Part::ToolCall { id, name: name.to_owned(), args })
    }

    fn result_text(&mut self, call: &Call) -> (String, bool) {
        match call {
            Call::Read { path, defines } => {
                // The file's content depends only on its path and version, so re-reads of an
                // unchanged file are byte-identical (what duplicate-read folding looks for).
                let version = self.versions.get(path).copied().unwrap_or(0);
                let mut file = Gen {
                    rng: ChaCha8Rng::seed_from_u64(stable_hash(path) ^ u64::from(version).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                    scale: self.scale,
                    spec: self.spec,
                    steps: Vec::new(),
                    calls: 0,
                    tags: HashSet::new(),
                    files: Vec::new(),
                    versions: Default::default(),
                };
                let n = file.lines(30, 220);
                let mut out: Vec<String> = (0..n).map(|_| file.code_line()).collect();
                if let Some(name) = defines {
                    let at = self.rng.gen_range(0..=out.len());
                    out.insert(at, format!("pub fn {name}(&self) -> bool {{"));
                }
                let numbered: Vec<String> = out.iter().enumerate().map(|(i, l)| format!("{:>4}\t{l}", i + 1)).collect();
                (format!("{path}\n{}", numbered.join("\n")), false)
            }
            Call::Grep { pattern, empty: true } => {
                (format!("No matches found for `{pattern}` in {} files.", self.rng.gen_range(120..900)), false)
            }
            Call::Grep { pattern, .. } => {
                let n = self.lines(4, 70);
                let hits: Vec<String> = (0..n)
                    .map(|_| {
                        let (p, l, c) = (self.path(), self.rng.gen_range(1..900), self.code_line());
                        format!("{p}:{l}:{}", c.replace(&c[..c.len().min(8)], pattern))
                    })
                    .collect();
                (hits.join("\n"), false)
            }
            Call::Test { module, failure } => {
                let n = self.lines(12, 90);
                let mut out = vec![format!("   Compiling engine v0.4.2"), format!("running {n} tests")];
                for _ in 0..n {
                    out.push(format!("test {module}::tests::{} ... ok", self.ident()));
                }
                match failure {
                    Some(line) => {
                        out.push(String::new());
                        out.push("failures:".into());
                        out.push(format!("---- {module}::tests::{} stdout ----", self.ident()));
                        out.push(line.clone());
                        for _ in 0..self.lines(6, 20) {
                            let (f, l) = (self.ident(), self.rng.gen_range(1..900));
                            out.push(format!("   at {module}::{f} (src/{module}.rs:{l})"));
                        }
                        out.push(format!("test result: FAILED. {} passed; 1 failed; 0 ignored", n - 1));
                        (out.join("\n"), true)
                    }
                    None => {
                        out.push(format!("test result: ok. {n} passed; 0 failed; 0 ignored"));
                        (out.join("\n"), false)
                    }
                }
            }
            Call::Build => {
                let n = self.lines(4, 30);
                let mut out: Vec<String> =
                    (0..n).map(|_| format!("   Compiling {}-{} v0.{}.{}", self.pick(NOUNS), self.pick(MODULES), self.rng.gen_range(1..9), self.rng.gen_range(0..20))).collect();
                out.push(format!("    Finished `dev` profile [unoptimized + debuginfo] target(s) in {}.{}s", self.rng.gen_range(1..90), self.rng.gen_range(0..99)));
                (out.join("\n"), false)
            }
            Call::Edit { path } => {
                *self.versions.entry(path.clone()).or_default() += 1;
                let n = self.lines(3, 24);
                let mut out = vec![format!("Applied edit to {path}"), format!("@@ -{0},{n} +{0},{n} @@", self.rng.gen_range(1..400))];
                for _ in 0..n {
                    let sign = self.pick(&["+", "-", " "]);
                    out.push(format!("{sign}{}", self.code_line()));
                }
                (out.join("\n"), false)
            }
            Call::Ls { dir } => {
                let n = self.lines(6, 40);
                let out: Vec<String> = (0..n).map(|_| format!("{dir}/{}_{}.rs", self.pick(MODULES), self.pick(NOUNS))).collect();
                (out.join("\n"), false)
            }
        }
    }

    /// Pushes one assistant step making `calls` and the tool results answering them.
    fn tool_step(&mut self, calls: Vec<Call>) {
        let mut parts = Vec::new();
        if self.rng.gen_bool(0.4) {
            let (v, p) = (self.pick(VERBS), self.path());
            parts.push(Part::text(format!("I'll {v} what {p} does before changing anything.")));
        }
        let mut results = Vec::new();
        for call in &calls {
            let (id, part) = self.call_part(call);
            parts.push(part);
            let (text, is_error) = self.result_text(call);
            let name = match &parts.last() {
                Some(Part::ToolCall { name, .. }) => name.clone(),
                _ => unreachable!("just pushed a call"),
            };
            results.push(Message::tool_result(id, name, text, is_error));
        }
        self.steps.push(Step::Assistant(Message::new(Role::Assistant, parts)));
        // Parallel results sometimes arrive out of order.
        if results.len() > 1 && self.rng.gen_bool(0.3) {
            results.shuffle(&mut self.rng);
        }
        self.steps.extend(results.into_iter().map(Step::Tool));
    }
}

/// A fact planted before its span is known (span is filled in once turns have step indices).
struct Planted {
    kind: FactKind,
    needle: String,
    step: usize,
    until_turn: u32,
    stale: Vec<Stale>,
    /// Its index in the scenario's `facts`.
    spec: usize,
}

/// What a `superseded_value` fact sets.
#[derive(Clone, Copy)]
enum Setting {
    Port,
    Version,
    Path,
    Policy,
}

const POLICIES: &[&str] = &["retry-with-backoff", "fail-fast", "queue-and-drain", "drop-oldest", "block-until-ready", "shed-load", "retry-once"];
const CHANGE_REASONS: &[&str] =
    &["the old one clashed with another service", "review asked for it", "the old one broke the integration tests", "the old one is deprecated"];

/// A `superseded_value` fact being written: its tagged key and every value it takes, in order.
struct Chain {
    setting: Setting,
    key: String,
    values: Vec<String>,
}

impl Chain {
    /// Draws the setting, its key and `changes + 1` distinct values.
    fn new(g: &mut Gen<'_>, changes: usize) -> Chain {
        let setting = [Setting::Port, Setting::Version, Setting::Path, Setting::Policy][g.rng.gen_range(0..4)];
        let key = format!("{}_{}_{}", g.pick(MODULES), setting.suffix(), g.tag());
        let mut values: Vec<String> = Vec::new();
        while values.len() <= changes {
            let v = match (setting, values.last()) {
                (Setting::Port, _) => g.rng.gen_range(1024..=65535u32).to_string(),
                (Setting::Version, None) => format!("{}.{}.{}", g.rng.gen_range(0..=3), g.rng.gen_range(1..=20), g.rng.gen_range(0..=12)),
                (Setting::Version, Some(last)) => {
                    let [major, minor, _] = version(last);
                    format!("{major}.{}.{}", minor + g.rng.gen_range(1..=3), g.rng.gen_range(0..=12))
                }
                (Setting::Path, _) => format!("{}/{}_{}.rs", g.pick(DIRS), g.pick(MODULES), g.pick(NOUNS)),
                (Setting::Policy, _) => g.pick(POLICIES).to_owned(),
            };
            if !values.contains(&v) {
                values.push(v);
            }
        }
        Chain { setting, key, values }
    }

    /// The `k`-th value as the session asserts it.
    fn assertion(&self, k: usize) -> String {
        format!("{} = `{}`", self.key, self.values[k])
    }

    /// The statement that replaces value `k - 1` by value `k`.
    fn change(&self, k: usize) -> String {
        format!("{} = `{}` (was `{}`)", self.key, self.values[k], self.values[k - 1])
    }

    /// Every value but the last, each with the statement that replaced it.
    fn stale(&self) -> Vec<Stale> {
        (1..self.values.len()).map(|k| Stale { value: self.assertion(k - 1), superseded_by: self.change(k) }).collect()
    }

    /// `n` sentences stating look-alike settings: the same kind of setting of another module
    /// (with its own tag), set to a value close to one this fact takes.
    fn distractors(&self, g: &mut Gen<'_>, n: u32) -> String {
        let mut out = String::new();
        for _ in 0..n {
            let module = self.key.split('_').next().expect("keys start with a module");
            let other = loop {
                let m = g.pick(MODULES);
                if m != module {
                    break m;
                }
            };
            let near = self.values[g.rng.gen_range(0..self.values.len())].clone();
            let value = match self.setting {
                Setting::Port => {
                    let p: u32 = near.parse().expect("ports are numbers");
                    let d = g.rng.gen_range(1..=99);
                    (if p + d <= 65535 { p + d } else { p - d }).to_string()
                }
                Setting::Version => {
                    let [major, minor, patch] = version(&near);
                    format!("{major}.{minor}.{}", patch + g.rng.gen_range(1..=3))
                }
                Setting::Path => {
                    let stem = &near[..near.rfind('_').expect("generated paths are dir/module_noun.rs")];
                    format!("{stem}_{}.rs", g.pick(NOUNS))
                }
                Setting::Policy => g.pick(POLICIES).to_owned(),
            };
            let d = format!("{other}_{}_{} = `{value}`", self.setting.suffix(), g.tag());
            let sentence = match g.rng.gen_range(0..3) {
                0 => format!(" Leave {d} as it is."),
                1 => format!(" Note that {d} is a different setting."),
                _ => format!(" Keep {d} unchanged."),
            };
            out.push_str(&sentence);
        }
        out
    }
}

impl Setting {
    fn suffix(self) -> &'static str {
        match self {
            Setting::Port => "port",
            Setting::Version => "version",
            Setting::Path => "path",
            Setting::Policy => "policy",
        }
    }
}

/// `major.minor.patch` of a generated version.
fn version(v: &str) -> [u32; 3] {
    let mut parts = v.split('.').map(|p| p.parse::<u32>().expect("generated versions are numeric"));
    [(); 3].map(|()| parts.next().expect("three parts"))
}

fn system_prompt(g: &mut Gen<'_>) -> Message {
    let mut lines = vec!["You are a coding agent working in a Rust repository. Use the tools to read, search, edit and test.".to_owned()];
    for _ in 0..g.spec.session.system_prompt_lines {
        let (v, n, m) = (g.pick(VERBS), g.pick(NOUNS), g.pick(MODULES));
        lines.push(format!("- When you {v} a {n} in the {m} module, keep the change small and run its tests afterwards."));
    }
    Message::system(lines.join("\n"))
}

/// Generates the session of `scenario` for `seed` (a replay scenario's session is its
/// transcript, the same for every seed).
pub fn generate(scenario: &Scenario, seed: u64) -> Session {
    if let Some(replay) = &scenario.replay {
        let replay = replay.imported.as_ref().expect("replay scenarios are built by Scenario::load or from_transcript");
        return crate::replay::session(&replay.messages);
    }
    let rng = ChaCha8Rng::seed_from_u64(stable_hash(&scenario.name) ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut g = Gen {
        rng,
        scale: scenario.session.output_scale,
        spec: scenario,
        steps: Vec::new(),
        calls: 0,
        tags: HashSet::new(),
        files: Vec::new(),
        versions: Default::default(),
    };
    let mut all: Vec<String> = DIRS.iter().flat_map(|d| MODULES.iter().map(move |m| format!("{d}/{m}.rs"))).collect();
    all.shuffle(&mut g.rng);
    all.truncate(scenario.session.files as usize);
    g.files = all;
    let system = system_prompt(&mut g);
    let turns = scenario.session.turns;
    let mut planted: Vec<Planted> = Vec::new();
    let mut turn_last_step = Vec::new();
    let mut turn_user_step = Vec::new();
    let mut spans = Vec::new();
    let mut chains: Vec<Option<Chain>> = scenario.facts.iter().map(|_| None).collect();
    for turn in 0..turns {
        let here: Vec<&FactSpec> = scenario.facts.iter().filter(|f| f.turn == turn).collect();
        let index = |f: &FactSpec| scenario.facts.iter().position(|x| std::ptr::eq(x, f)).expect("a fact of the scenario");
        let until = |f: &FactSpec| f.until_turn.unwrap_or(turns - 1);

        // The user message, with any constraint.
        let (v, p) = (g.pick(VERBS), g.path());
        let mut text = format!("Next: {v} the handling in {p} so the {} path works; run the tests when done.", g.pick(NOUNS));
        for f in here.iter().filter(|f| f.kind == FactKind::UserConstraint) {
            let needle = format!("do not change the public API of {}::{}_{}", g.pick(MODULES), g.ident(), g.tag());
            text.push_str(&format!(" Important: {needle}; other crates depend on it."));
            planted.push(Planted { kind: f.kind, needle, step: g.steps.len(), until_turn: until(f), stale: Vec::new(), spec: index(f) });
        }
        // A superseded value is set in the user message of its turn, then changed in later
        // turns, by the user or in the closing answer; each statement names the value it
        // replaces and sits beside look-alike settings. The fact, needed as its last value,
        // is planted by its last change.
        let mut closing_changes = Vec::new();
        for (i, f) in scenario.facts.iter().enumerate().filter(|(_, f)| f.kind == FactKind::SupersededValue) {
            if f.turn == turn {
                let chain = Chain::new(&mut g, f.changes.len());
                text.push_str(&format!(" Setting: {} for now.", chain.assertion(0)));
                text.push_str(&chain.distractors(&mut g, f.distractors()));
                chains[i] = Some(chain);
            } else if let Some(k) = f.changes.iter().position(|&c| c == turn) {
                if g.rng.gen_bool(0.5) {
                    let chain = chains[i].as_ref().expect("set before it changes");
                    text.push_str(&format!(" Change of plan: {}; use the new value from here on.", chain.change(k + 1)));
                    text.push_str(&chain.distractors(&mut g, f.distractors()));
                    if k + 1 == f.changes.len() {
                        planted.push(Planted { kind: f.kind, needle: chain.assertion(k + 1), step: g.steps.len(), until_turn: until(f), stale: chain.stale(), spec: i });
                    }
                } else {
                    closing_changes.push((i, k + 1));
                }
            }
        }
        turn_user_step.push(g.steps.len());
        g.steps.push(Step::User(Message::user(text)));

        // Steps forced by facts, placed at random positions among the turn's steps.
        let mut forced: Vec<ForcedStep> = Vec::new();
        for f in &here {
            let tag = g.tag();
            let entry = match f.kind {
                FactKind::ErrorMessage => {
                    let (module, name, ty) = (g.pick(MODULES).to_owned(), g.ident(), g.type_name());
                    let needle = format!("error[E0599]: no method named `{name}_{tag}` found for struct `{ty}` in the current scope");
                    Some((Call::Test { module, failure: Some(needle.clone()) }, needle))
                }
                FactKind::NegativeResult => {
                    let pattern = format!("{}_{tag}", g.ident());
                    Some((Call::Grep { pattern: pattern.clone(), empty: true }, format!("No matches found for `{pattern}`")))
                }
                FactKind::FilePath => {
                    let path = format!("{}/{}_{tag}.rs", g.pick(DIRS), g.pick(MODULES));
                    Some((Call::Edit { path: path.clone() }, path))
                }
                FactKind::Identifier => {
                    let name = format!("{}_{tag}", g.ident());
                    Some((Call::Read { path: g.path(), defines: Some(name.clone()) }, name))
                }
                FactKind::UserConstraint | FactKind::UnresolvedStep | FactKind::Decision | FactKind::RejectedHypothesis | FactKind::SupersededValue => None,
            };
            if let Some((call, needle)) = entry {
                forced.push((call, Some((f.kind, needle, until(f), index(f)))));
            }
        }
        // An exploration span (searches and reads a harness could hand to a subagent) opens
        // the turn in some turns; search-shaped facts of the turn are found inside it.
        let share = scenario.session.delegable_share;
        if share > 0.0 && g.rng.gen_bool(share) {
            let (inside, rest): (Vec<_>, Vec<_>) =
                forced.into_iter().partition(|(c, _)| matches!(c, Call::Read { .. } | Call::Grep { .. }));
            forced = rest;
            let k = g.rng.gen_range(3..=8usize).max(inside.len());
            let mut slots: Vec<Option<ForcedStep>> = inside.into_iter().map(Some).collect();
            slots.resize_with(k, || None);
            slots.shuffle(&mut g.rng);
            let start = g.steps.len();
            for slot in slots {
                match slot {
                    Some((call, fact)) => {
                        g.tool_step(vec![call]);
                        if let Some((kind, needle, until_turn, spec)) = fact {
                            planted.push(Planted { kind, needle, step: g.steps.len() - 1, until_turn, stale: Vec::new(), spec });
                        }
                    }
                    None => {
                        let parallel = g.rng.gen_bool(scenario.session.parallel_share);
                        let k = if parallel { g.rng.gen_range(2..=4) } else { 1 };
                        let calls = (0..k).map(|_| g.ordinary_call(true)).collect();
                        g.tool_step(calls);
                    }
                }
            }
            spans.push(Span { start, end: g.steps.len() - 1 });
        }
        let [lo, hi] = scenario.session.steps_per_turn;
        let n = (g.rng.gen_range(lo..=hi) as usize).max(forced.len());
        let mut slots: Vec<usize> = (0..n).collect();
        slots.shuffle(&mut g.rng);
        let mut at: Vec<Option<usize>> = vec![None; n];
        for (i, slot) in slots.into_iter().take(forced.len()).enumerate() {
            at[slot] = Some(i);
        }
        let mut forced: Vec<Option<ForcedStep>> = forced.into_iter().map(Some).collect();
        for slot in at {
            match slot {
                Some(i) => {
                    let (call, fact) = forced[i].take().expect("each forced step is placed once");
                    g.tool_step(vec![call]);
                    if let Some((kind, needle, until_turn, spec)) = fact {
                        // An edited path first appears in the call (the assistant step before
                        // its single result); other needles first appear in the result.
                        let back = if kind == FactKind::FilePath { 2 } else { 1 };
                        planted.push(Planted { kind, needle, step: g.steps.len() - back, until_turn, stale: Vec::new(), spec });
                    }
                }
                None => {
                    let parallel = g.rng.gen_bool(scenario.session.parallel_share);
                    let k = if parallel { g.rng.gen_range(2..=4) } else { 1 };
                    let calls = (0..k).map(|_| g.ordinary_call(parallel)).collect();
                    g.tool_step(calls);
                }
            }
        }

        // The closing answer, with any decision or open step.
        let mut text = format!("Done with {} for now: the {} tests pass locally.", g.path(), g.pick(MODULES));
        let mut closing = Vec::new();
        for f in here.iter().filter(|f| matches!(f.kind, FactKind::Decision | FactKind::UnresolvedStep)) {
            let tag = g.tag();
            let needle = match f.kind {
                FactKind::Decision => {
                    let (name, ds, why) = (g.ident(), g.pick(&["BTreeMap", "Vec", "HashSet", "SmallVec"]), g.pick(&["iteration order must be deterministic", "the hot path must not allocate", "lookups dominate the profile"]));
                    format!("use a {ds} for {name}_{tag} because {why}")
                }
                _ => format!("update the migration notes in docs/{}_{tag}.md", g.pick(MODULES)),
            };
            let sentence = if f.kind == FactKind::Decision { format!(" Decision: {needle}.") } else { format!(" Still open: {needle} once the fix lands.") };
            text.push_str(&sentence);
            closing.push((f.kind, needle, until(f), index(f)));
        }
        for &(i, k) in &closing_changes {
            let (f, chain) = (&scenario.facts[i], chains[i].as_ref().expect("set before it changes"));
            let why = g.pick(CHANGE_REASONS);
            text.push_str(&format!(" Changed: {} because {why}.", chain.change(k)));
            text.push_str(&chain.distractors(&mut g, f.distractors()));
        }
        // A ruled-out hypothesis lives only in the closing answer's reasoning, ahead of its text.
        let mut parts = Vec::new();
        for f in here.iter().filter(|f| f.kind == FactKind::RejectedHypothesis) {
            let (name, module, tag) = (g.ident(), g.pick(MODULES), g.tag());
            let needle = format!("the {module} failure is not caused by {name}_{tag}");
            parts.push(Part::Reasoning {
                text: format!("I suspected {name}_{tag} first, but its callers never reach the failing branch, so {needle}; do not revisit it."),
            });
            closing.push((f.kind, needle, until(f), index(f)));
        }
        let message = if parts.is_empty() {
            Message::assistant(text)
        } else {
            parts.push(Part::text(text));
            Message::new(Role::Assistant, parts)
        };
        g.steps.push(Step::Assistant(message));
        for (kind, needle, until_turn, spec) in closing {
            planted.push(Planted { kind, needle, step: g.steps.len() - 1, until_turn, stale: Vec::new(), spec });
        }
        for (i, k) in closing_changes {
            let (f, chain) = (&scenario.facts[i], chains[i].as_ref().expect("set before it changes"));
            if k == f.changes.len() {
                planted.push(Planted { kind: f.kind, needle: chain.assertion(k), step: g.steps.len() - 1, until_turn: until(f), stale: chain.stale(), spec: i });
            }
        }
        turn_last_step.push(g.steps.len() - 1);
    }

    let instructions = user_instructions(scenario, &planted, &turn_user_step);
    let named_by = |spec: usize| {
        let memory = scenario.memory.iter().any(|m| m.names.contains(&spec));
        let manual = scenario.manual.iter().any(|m| m.names.contains(&spec));
        memory.then_some(NamedBy::Memory).or(manual.then_some(NamedBy::Manual))
    };
    let facts = planted
        .into_iter()
        .enumerate()
        .map(|(i, p)| Fact {
            id: format!("f{i}"),
            kind: p.kind,
            needle: p.needle,
            planted_step: p.step,
            needed_from: p.step + 1,
            needed_until: turn_last_step[p.until_turn as usize],
            stale: p.stale,
            named_by: named_by(p.spec),
        })
        .collect();
    // Project memory is loaded with the system prompt and travels with it (where each harness
    // puts its own is its business: the strategy sees the system prompt).
    let system = if instructions.memory.is_empty() { system } else { Message::system(format!("{}\n\n{}", system.text(), instructions.memory)) };
    Session { system, steps: g.steps, facts, spans, instructions }
}

/// `keys` as a user writes them: `` `a` ``, `` `a` and `b` ``, `` `a`, `b` and `c` ``.
fn key_list(keys: &[&str]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// The keys of the planted facts of the scenario's `facts[i]` for each `i` of `names`.
fn named_keys<'p>(planted: &'p [Planted], names: &[usize]) -> Vec<&'p str> {
    names
        .iter()
        .filter_map(|&i| planted.iter().find(|p| p.spec == i))
        .map(|p| crate::facts::key(&p.needle).expect("generated needles carry a tagged key"))
        .collect()
}

/// The project memory file and the manual commands the scenario asks for, naming the keys of
/// the facts they list (built from the planted facts; no randomness, so a scenario without them
/// generates the same session as before they existed).
fn user_instructions(scenario: &Scenario, planted: &[Planted], turn_user_step: &[usize]) -> UserInstructions {
    let mut out = UserInstructions::default();
    if let Some(memory) = &scenario.memory {
        out.memory_rule = format!(
            "When you compact or summarize this conversation, keep the exact lines about {} verbatim: their current values, errors and decisions.",
            key_list(&named_keys(planted, &memory.names))
        );
        out.memory = format!("# Project memory (CLAUDE.md / AGENTS.md / GEMINI.md)\n\n## Compact instructions\n{}", out.memory_rule);
    }
    for m in &scenario.manual {
        let keys = named_keys(planted, &m.names);
        let text = if keys.is_empty() {
            String::new()
        } else {
            format!("focus on {}: keep their exact lines verbatim (current values, errors, decisions)", key_list(&keys))
        };
        out.manual.push(Manual { step: turn_user_step[m.turn as usize], text });
    }
    out.manual.sort_by_key(|m| m.step);
    out
}

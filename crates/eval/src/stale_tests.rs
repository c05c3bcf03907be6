//! Tests of the `superseded_value` fact kind: its scenario fields, how the generator plants the
//! value, its changes and the look-alike settings beside them, and the probe that tells the
//! current value kept from an old value leaked and from the value lost.

use std::path::Path;

use compactbench_core::{Checkpoint, CheckpointKind, Cx, Decision, Log, Message, Moment, Offload, Role, Strategy, StrategyInfo, View, Window};
use compactbench_summarize::Extractive;
use compactbench_tokens::TokenCounter;

use crate::drive::{run, Env};
use crate::facts::{Fact, FactKind};
use crate::generate::{generate, Session, Step};
use crate::results::Status;
use crate::scenario::Scenario;

/// Five short turns: a value set in turn 0, changed in turns 1 and 2, two look-alike settings
/// beside each statement, needed to the end.
const STALE: &str = r#"
name = "stale"
description = "stale-value probe tests"
[model]
name = "test"
window = 100000
max_output = 8000
provider = "anthropic"
pricing = { input = 3.0, cached_input = 0.3, output = 15.0 }
[session]
turns = 5
steps_per_turn = [1, 2]
[[facts]]
kind = "superseded_value"
turn = 0
changes = [1, 2]
distractors = 2
"#;

fn scenario(text: &str) -> Scenario {
    Scenario::parse(Path::new("stale.toml"), text).unwrap()
}

fn parse_err(text: &str) -> String {
    Scenario::parse(Path::new("scenarios/bad.toml"), text).unwrap_err().to_string()
}

/// The one superseded fact of a session.
fn the_fact(session: &Session) -> &Fact {
    let mut facts = session.facts.iter().filter(|f| f.kind == FactKind::SupersededValue);
    let f = facts.next().expect("planted");
    assert!(facts.next().is_none());
    f
}

/// The fact's tagged key: what its needle asserts a value for.
fn key(f: &Fact) -> &str {
    &f.needle[..f.needle.find(" = `").unwrap()]
}

/// The turn (0-based) each step belongs to.
fn turn_of(session: &Session, step: usize) -> usize {
    session.steps[..=step].iter().filter(|s| matches!(s, Step::User(_))).count() - 1
}

/// The first look-alike sentence the generator wrote: a ``name = `value` `` statement of
/// another setting.
fn a_distractor(session: &Session, f: &Fact) -> String {
    let text = session.steps.iter().find_map(|s| s.message().searchable_text().contains(&f.stale[0].value).then(|| s.message().searchable_text())).unwrap();
    text.split(". ").find(|s| s.contains(" = `") && !s.contains(key(f))).expect("distractors planted beside the value").to_owned()
}

#[test]
fn superseded_value_fields_are_validated_with_file_and_field() {
    scenario(STALE);
    let e = parse_err(&STALE.replace("changes = [1, 2]\n", ""));
    assert!(e.starts_with("scenarios/bad.toml: field `facts[0].changes`: expected 1 to 4"), "{e}");
    let e = parse_err(&STALE.replace("changes = [1, 2]", "changes = [2, 1]"));
    assert!(e.contains("field `facts[0].changes`: expected increasing turns"), "{e}");
    let e = parse_err(&STALE.replace("changes = [1, 2]", "changes = [0, 2]"));
    assert!(e.contains("field `facts[0].changes`"), "{e}");
    // The last change must leave a turn in which the value is needed.
    let e = parse_err(&STALE.replace("changes = [1, 2]", "changes = [1, 4]"));
    assert!(e.contains("field `facts[0].changes`") && e.contains("(4)"), "{e}");
    let e = parse_err(&STALE.replace("changes = [1, 2]", "changes = [1, 2]\nuntil_turn = 2"));
    assert!(e.contains("field `facts[0].changes`") && e.contains("(2)"), "{e}");
    let e = parse_err(&STALE.replace("distractors = 2", "distractors = 9"));
    assert!(e.contains("field `facts[0].distractors`: expected 0..=3, got 9"), "{e}");
    let e = parse_err(&STALE.replace("superseded_value", "decision"));
    assert!(e.contains("field `facts[0].changes`: only a superseded_value fact has changes, this one is decision"), "{e}");
    let e = parse_err(&STALE.replace("superseded_value", "decision").replace("changes = [1, 2]\n", ""));
    assert!(e.contains("field `facts[0].distractors`"), "{e}");
    let e = parse_err(&STALE.replace("distractors = 2", "distractor = 2"));
    assert!(e.contains("distractor"), "{e}");
}

#[test]
fn the_generator_plants_the_value_its_changes_and_look_alikes_deterministically() {
    let sc = scenario(STALE);
    for seed in 0..8 {
        let session = generate(&sc, seed);
        assert_eq!(session, generate(&sc, seed), "seed {seed}");
        let f = the_fact(&session);
        assert_eq!(f.stale.len(), 2, "two changes, two replaced values");
        let holding = |s: &str| -> Vec<usize> { (0..session.steps.len()).filter(|&i| session.steps[i].message().searchable_text().contains(s)).collect() };
        // The first value is set in turn 0's user message, and nowhere else.
        let set = holding(&f.stale[0].value);
        assert_eq!(set.len(), 1, "seed {seed}");
        assert!(matches!(session.steps[set[0]], Step::User(_)) && turn_of(&session, set[0]) == 0);
        // Each change names the value it replaces, in its own turn (by the user or in the
        // closing answer), and asserts the next value there first.
        for (k, change_turn) in [(0, 1), (1, 2)] {
            let at = holding(&f.stale[k].superseded_by);
            assert_eq!(at.len(), 1, "seed {seed}: change {k}");
            assert_eq!(turn_of(&session, at[0]), change_turn);
            let next = if k + 1 < f.stale.len() { &f.stale[k + 1].value } else { &f.needle };
            assert_eq!(holding(next), at, "seed {seed}: value {} is asserted by its change only", k + 1);
        }
        // The fact is needed as its last value from its last change on.
        assert_eq!(holding(&f.needle), vec![f.planted_step]);
        assert_eq!(f.needed_from, f.planted_step + 1);
        // Every statement sits beside two look-alike settings: the same kind of setting of
        // another module, with its own tag.
        let suffix = key(f).rsplitn(3, '_').nth(1).unwrap();
        for at in [set[0], holding(&f.stale[0].superseded_by)[0], f.planted_step] {
            let text = session.steps[at].message().searchable_text();
            let assigned: Vec<&str> = text.match_indices(" = `").map(|(i, _)| text[..i].rsplit(' ').next().unwrap()).collect();
            let others: Vec<&&str> = assigned.iter().filter(|k| **k != key(f)).collect();
            assert_eq!(others.len(), 2, "seed {seed}: {text}");
            for other in others {
                assert!(other.contains(&format!("_{suffix}_")) && *other != key(f), "{other} vs {}", key(f));
            }
        }
    }
    // Different seeds draw different settings.
    let needles: std::collections::HashSet<String> = (0..8).map(|seed| the_fact(&generate(&sc, seed)).needle.clone()).collect();
    assert_eq!(needles.len(), 8);
}

/// A strategy that, at the first request of turn 3 (after both changes), replaces everything
/// before that turn by a summary the test writes, optionally offloading the replaced messages
/// to a file the summary names.
struct Rewrite {
    info: StrategyInfo,
    summary: String,
    offload: bool,
}

fn rewrite(summary: String, offload: bool) -> Rewrite {
    let info = StrategyInfo { id: "rewrite".into(), harness: "test".into(), source: "test".into(), summary: "test".into(), fidelity: compactbench_core::Fidelity::Baseline };
    Rewrite { info, summary, offload }
}

impl Strategy for Rewrite {
    fn info(&self) -> &StrategyInfo {
        &self.info
    }

    fn start(&self) -> Box<dyn compactbench_core::Replay + '_> {
        Box::new(compactbench_core::Incremental::default_view(self))
    }

    fn decide(&self, log: &Log, _: &View, at: Moment, _: &Cx<'_>) -> Decision {
        let users = log.messages().filter(|(_, m)| m.role == Role::User).count();
        if at == Moment::BeforeRequest && users == 4 && log.last_checkpoint().is_none() {
            Decision::compact("test")
        } else {
            Decision::Skip
        }
    }

    fn compact(&self, log: &Log, _: &View, _: Moment, cx: &mut Cx<'_>) -> Result<Vec<Checkpoint>, compactbench_core::Error> {
        let last_user = log.messages().filter(|(_, m)| m.role == Role::User).map(|(id, _)| id).next_back().unwrap();
        let dropped: Vec<_> = log.messages().filter(|(id, m)| *id < last_user && m.role != Role::System).collect();
        let mut cp = Checkpoint::new(CheckpointKind::Summary, Window::From(last_user));
        let mut summary = format!("Earlier turns happened. {}", self.summary);
        if self.offload {
            let text: Vec<String> = dropped.iter().map(|(_, m)| m.searchable_text()).collect();
            cx.store.write("/history/all.md", text.join("\n\n"));
            cp.offloads.push(Offload { path: "/history/all.md".into(), entries: dropped.iter().map(|(id, _)| *id).collect() });
            summary.push_str(" The full history is in /history/all.md.");
        }
        cp.summary = Some(Message::user(summary));
        Ok(vec![cp])
    }
}

/// The fact's state at the last request, with `summary` replacing turns 0–2.
fn last_state(sc: &Scenario, session: &Session, summary: String, offload: bool) -> Status {
    let (counter, summarizer) = (TokenCounter::default(), Extractive::default());
    let env = Env { counter: &counter, summarizer: &summarizer };
    let r = run(&rewrite(summary, offload), sc, session, 0, &env, |_| {});
    assert_eq!(r.compactions.len(), 1);
    let f = r.facts.iter().find(|f| f.kind == FactKind::SupersededValue).expect("needed");
    f.last
}

#[test]
fn the_probe_tells_the_current_value_from_a_stale_one_and_from_a_distractor() {
    let sc = scenario(STALE);
    for seed in [0, 5] {
        let session = generate(&sc, seed);
        let f = the_fact(&session);
        let (v0, v1, current) = (&f.stale[0].value, &f.stale[1].value, &f.needle);
        let (to_v1, to_v2) = (&f.stale[0].superseded_by, &f.stale[1].superseded_by);
        let distractor = a_distractor(&session, f);
        let cases: Vec<(String, bool, Status, &str)> = vec![
            (String::new(), false, Status::Lost, "nothing kept"),
            (format!("The setting is {current}."), false, Status::VerbatimSummary, "the current value alone"),
            (format!("The setting is {v1}."), false, Status::Stale, "only the last stale value: a leak, not kept"),
            (format!("The setting is {v0}."), false, Status::Stale, "only the first value"),
            (format!("Set {v0}. Now {current}."), false, Status::Stale, "current beside an old value without its supersession"),
            (format!("Set {v0}. Then {to_v1}. Then {to_v2}."), false, Status::VerbatimSummary, "every old value beside its supersession"),
            (format!("Then {to_v1}. Then {to_v2}."), false, Status::VerbatimSummary, "the changes alone"),
            (format!("Set {v0}. Then {to_v2}."), false, Status::Stale, "the first value without the change that replaced it"),
            (format!("{distractor}."), false, Status::Lost, "only a look-alike setting"),
            (format!("{distractor}. {}", key(f)), false, Status::Lost, "a look-alike and the bare key"),
            (String::new(), true, Status::Recoverable, "the history file holds every statement"),
            (format!("The setting is {v1}."), true, Status::Stale, "a stale value in the request, the truth only in a file"),
        ];
        for (summary, offload, want, what) in cases {
            assert_eq!(last_state(&sc, &session, summary.clone(), offload), want, "seed {seed}: {what}: {summary}");
        }
    }
}

#[test]
fn kept_history_keeps_the_current_value_and_every_change() {
    let sc = scenario(STALE);
    let session = generate(&sc, 1);
    let (counter, summarizer) = (TokenCounter::default(), Extractive::default());
    let env = Env { counter: &counter, summarizer: &summarizer };
    let none = run(compactbench_registry::find("none").unwrap().as_ref(), &sc, &session, 1, &env, |_| {});
    let f = none.facts.iter().find(|f| f.kind == FactKind::SupersededValue).expect("needed");
    assert_eq!(f.last, Status::VerbatimKept);
    assert!(f.probes.keys().all(|s| *s == Status::VerbatimKept), "{:?}", f.probes);
}

#[test]
fn leaks_needs_every_present_old_value_beside_its_supersession() {
    use crate::drive::leaks;
    assert!(!leaks(&[], 0));
    assert!(!leaks(&[false, false], 1));
    assert!(leaks(&[true, false], 1));
    assert!(!leaks(&[true, true], 1));
    // A supersession alone (the old value quoted only inside it) is no leak.
    assert!(!leaks(&[false, true], 1));
    assert!(leaks(&[true, true, true, false], 2));
    assert!(!leaks(&[true, true, true, true, false, false], 3));
}

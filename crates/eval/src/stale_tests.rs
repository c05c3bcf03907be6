//! Tests of the `superseded_value` fact kind: its scenario fields, and how the generator plants
//! the value, its changes and the look-alike settings beside them.

use std::path::Path;

use crate::facts::{Fact, FactKind};
use crate::generate::{generate, Session, Step};
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

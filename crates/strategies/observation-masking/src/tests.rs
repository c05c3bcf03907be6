use compactbench_core::request::{lower, validate};
use compactbench_core::{CheckpointKind, Message, Moment, Shape};
use compactbench_testkit::{json, model, Harness};

fn call(h: &mut Harness, n: usize) {
    h.push(Message::tool_call(format!("c{n}"), "bash", json!({"command": format!("cmd {n}")})));
    h.push(Message::tool_result(format!("c{n}"), "bash", format!("output {n}\nline two"), false));
}

#[test]
fn masks_all_but_the_newest_ten_results_and_keeps_pairs() {
    let s = super::strategy();
    let mut h = Harness::new([Message::system("sys"), Message::user("task")], model(100_000, 1000));
    for n in 0..10 {
        call(&mut h, n);
    }
    assert!(h.step(s.as_ref(), Moment::BeforeRequest).unwrap().is_empty(), "ten results: nothing to mask");
    for n in 10..13 {
        call(&mut h, n);
    }
    let cps = h.step(s.as_ref(), Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    assert_eq!(cps[0].kind, CheckpointKind::Mask);
    assert_eq!(cps[0].replacements.len(), 3);

    let view = h.view(s.as_ref());
    let texts: Vec<String> = view.iter().map(Message::searchable_text).collect();
    assert!(texts.contains(&"Old environment output: (2 lines omitted)".to_string()));
    assert!(!texts.iter().any(|t| t.starts_with("output 2\n")), "third-oldest result masked");
    assert!(texts.iter().any(|t| t.starts_with("output 3\n")), "eleventh-newest kept");
    assert!(texts.iter().any(|t| t.contains("cmd 0")), "the call itself stays");
    for shape in Shape::ALL {
        assert_eq!(validate(&lower(&view, shape)), vec![], "{shape:?}");
    }
    // Masked results are not masked again.
    call(&mut h, 13);
    let cps = h.step(s.as_ref(), Moment::BeforeRequest).unwrap();
    assert_eq!(cps[0].replacements.len(), 1);
    assert!(h.step(s.as_ref(), Moment::TurnEnd).unwrap().is_empty());
}

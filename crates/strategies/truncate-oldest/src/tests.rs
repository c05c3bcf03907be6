use compactbench_core::{Moment, Role};
use compactbench_testkit::{json, model, sized, Harness};

use compactbench_core::Message;

fn turn(h: &mut Harness, n: usize, size: usize) {
    h.push(sized(Role::User, 'u', 40));
    h.push(Message::tool_call(format!("c{n}"), "read", json!({"path": format!("f{n}.rs")})));
    h.push(Message::tool_result(format!("c{n}"), "read", "x".repeat(size), false));
    h.push(Message::assistant(format!("done {n}")));
}

#[test]
fn drops_whole_oldest_turns_until_under_budget() {
    // Budget 1000 − 200 = 800 estimated tokens; each turn is about 10 + 6 + 200 + 2 tokens.
    let mut h = Harness::new([Message::system("sys")], model(1000, 200));
    for n in 0..4 {
        turn(&mut h, n, 800);
    }
    let s = super::strategy();
    let cps = h.step(s.as_ref(), Moment::BeforeRequest).unwrap();
    assert_eq!(cps.len(), 1);
    let view = h.view(s.as_ref());
    let text: Vec<String> = view.iter().map(Message::searchable_text).collect();
    // The system prompt stays; turn 0 is gone; turns 1..3 stay whole.
    assert_eq!(text[0], "sys");
    assert!(!text.iter().any(|t| t.contains("f0.rs")));
    assert!(text.iter().any(|t| t.contains("f1.rs")));
    assert!(text.iter().any(|t| t == "done 3"));
    for shape in compactbench_core::Shape::ALL {
        let req = compactbench_core::request::lower(&view, shape);
        assert_eq!(compactbench_core::request::validate(&req), vec![], "{shape:?}");
    }
    // Under budget now: no further compaction.
    assert!(h.step(s.as_ref(), Moment::BeforeRequest).unwrap().is_empty());
    // Never at a turn end.
    turn(&mut h, 9, 4000);
    assert!(h.step(s.as_ref(), Moment::TurnEnd).unwrap().is_empty());
}

#[test]
fn inside_one_long_turn_drops_oldest_steps_but_keeps_the_user_message() {
    let mut h = Harness::new([Message::system("sys"), Message::user("the task")], model(1000, 200));
    for n in 0..6 {
        h.push(Message::tool_call(format!("c{n}"), "bash", json!({"command": format!("step {n}")})));
        h.push(Message::tool_result(format!("c{n}"), "bash", "y".repeat(800), false));
    }
    let s = super::strategy();
    h.step(s.as_ref(), Moment::BeforeRequest).unwrap();
    let view = h.view(s.as_ref());
    let text: Vec<String> = view.iter().map(Message::searchable_text).collect();
    assert_eq!(text[1], "the task");
    assert!(!text.iter().any(|t| t.contains("step 0")));
    assert!(text.iter().any(|t| t.contains("step 5")));
    for shape in compactbench_core::Shape::ALL {
        let req = compactbench_core::request::lower(&view, shape);
        assert_eq!(compactbench_core::request::validate(&req), vec![], "{shape:?}");
    }
}

//! Results do not move when the code only gets faster: a small matrix (every registered
//! strategy, with bounds and delegation, on a tiny scenario with every fact kind) gives the
//! committed `results.json` and `requests.csv` byte for byte, with one worker thread or two.
//! After a deliberate behaviour change, refresh with `UPDATE_EXPECT=1 cargo test -p
//! compactbench-cli --test snapshot` and say why in the commit.

mod common;

use common::{compactbench, scratch, tiny_scenarios};
use expect_test::expect_file;

const FACTS: &str = r#"
[[facts]]
kind = "error_message"
turn = 0
[[facts]]
kind = "user_constraint"
turn = 0
[[facts]]
kind = "negative_result"
turn = 1
[[facts]]
kind = "file_path"
turn = 1
[[facts]]
kind = "decision"
turn = 2
"#;

#[test]
fn a_small_matrix_gives_the_committed_results_with_any_thread_count() {
    let dir = scratch("snapshot");
    let scenarios = tiny_scenarios(&dir, FACTS);
    let mut outputs = Vec::new();
    for jobs in ["1", "2"] {
        let out = dir.join(format!("jobs-{jobs}"));
        let run = compactbench(&["eval", "--scenarios", scenarios.to_str().unwrap(), "--jobs", jobs, "--out", out.to_str().unwrap()]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap();
        outputs.push((read("results.json"), read("requests.csv")));
    }
    assert!(outputs[0] == outputs[1], "--jobs 1 and --jobs 2 differ");
    expect_file!["snapshots/tiny-results.json"].assert_eq(&outputs[0].0);
    expect_file!["snapshots/tiny-requests.csv"].assert_eq(&outputs[0].1);
}

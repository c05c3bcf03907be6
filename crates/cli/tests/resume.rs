//! `compactbench eval --resume`: an eval killed midway resumes from its cell journal and ends
//! with the same reports, byte for byte, as an uninterrupted run.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{compactbench, scratch, tiny_scenarios, THREE_FACTS as FACTS};

/// Primary rows, delegation rows (pi and codex delegate by default), text-chat rows (aider's, by
/// default) and bound rows: every kind of cell the journal keeps. One worker, so the run is long
/// enough to kill midway.
fn args<'a>(scenarios: &'a Path, out: &'a Path, seeds: &'a str) -> Vec<&'a str> {
    vec![
        "eval", "--strategy", "none", "--strategy", "truncate-oldest", "--strategy", "pi", "--strategy", "codex", "--strategy", "aider", "--seeds", seeds,
        "--jobs", "1", "--scenarios", scenarios.to_str().unwrap(), "--out", out.to_str().unwrap(),
    ]
}

/// Complete cell lines in the journal (the header aside).
fn journaled(out: &Path) -> usize {
    let text = std::fs::read(out.join("cells.jsonl")).unwrap_or_default();
    text.iter().filter(|b| **b == b'\n').count().saturating_sub(1)
}

#[test]
fn a_killed_eval_resumes_to_the_same_reports() {
    let dir = scratch("resume");
    let scenarios = tiny_scenarios(&dir, FACTS);
    let (reference, resumed) = (dir.join("reference"), dir.join("resumed"));

    let out = compactbench(&args(&scenarios, &reference, "3"));
    assert!(out.status.success(), "eval failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(!reference.join("cells.jsonl").exists(), "the journal is deleted once the reports are written");
    let runs = serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(reference.join("results.json")).unwrap()).unwrap()["runs"]
        .as_array()
        .unwrap()
        .len();

    // Kill a run once a few cells are journaled.
    let mut child = Command::new(env!("CARGO_BIN_EXE_compactbench"))
        .args(args(&scenarios, &resumed, "3"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while journaled(&resumed) < 6 {
        assert!(child.try_wait().unwrap().is_none(), "the eval ended before it could be killed");
        assert!(Instant::now() < deadline, "no cells journaled");
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let done = journaled(&resumed);
    assert!(done < runs, "killed after {done} of {runs} runs: too late to test anything");
    assert!(!resumed.join("results.json").exists());
    // A kill mid-write leaves a torn last line: the reader drops it.
    let mut journal = std::fs::OpenOptions::new().append(true).open(resumed.join("cells.jsonl")).unwrap();
    std::io::Write::write_all(&mut journal, br#"{"strategy":"pi","scenario":"ti"#).unwrap();
    drop(journal);

    // Another configuration is refused, naming what differs, and leaves the journal alone.
    let refused = compactbench(&[args(&scenarios, &resumed, "2").as_slice(), &["--resume"]].concat());
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("refusing to --resume") && stderr.contains("seeds: journal 3, now 2"), "{stderr}");

    let out = compactbench(&[args(&scenarios, &resumed, "3").as_slice(), &["--resume"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "resume failed: {stderr}");
    assert!(stderr.contains(&format!("resuming: {done} finished runs reused")), "{stderr}");
    assert!(stderr.contains(&format!("{runs} runs ({done} reused)")), "{stderr}");
    for file in ["results.json", "requests.csv", "results.csv", "report.md"] {
        let (a, b) = (std::fs::read(reference.join(file)).unwrap(), std::fs::read(resumed.join(file)).unwrap());
        assert!(a == b, "{file} differs after resuming");
    }
    assert!(!resumed.join("cells.jsonl").exists());
}

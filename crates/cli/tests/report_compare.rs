//! `compactbench report --compare`: end to end through the binary, on results.json files that
//! a real `compactbench eval` wrote.

mod common;

use std::path::{Path, PathBuf};

use common::{compactbench, scratch, tiny_scenarios};

fn eval_into(dir: &Path) -> PathBuf {
    let scenarios = tiny_scenarios(dir, "");
    let run = dir.join("a");
    let out = compactbench(&[
        "eval",
        "--strategy",
        "none",
        "--strategy",
        "truncate-oldest",
        "--strategy",
        "observation-masking",
        "--seeds",
        "2",
        "--no-bounds",
        "--scenarios",
        scenarios.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "eval failed: {}", String::from_utf8_lossy(&out.stderr));
    run
}

#[test]
fn compare_lists_exactly_the_changed_strategys_rows() {
    let dir = scratch("report-compare-changed");
    let a = eval_into(&dir);
    // B: the same run with truncate-oldest's numbers changed.
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(a.join("results.json")).unwrap()).unwrap();
    let mut changed = 0;
    for row in json["rows"].as_array_mut().unwrap() {
        if row["strategy"] == "truncate-oldest" {
            row["peak_tokens"] = (row["peak_tokens"].as_u64().unwrap() + 100).into();
            row["violations_gemini"] = 3.into();
            changed += 1;
        }
    }
    assert_eq!(changed, 1, "one scenario, one row per strategy");
    let b = dir.join("b");
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(b.join("results.json"), serde_json::to_string_pretty(&json).unwrap()).unwrap();

    let out = compactbench(&["report", "--compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("| tiny |")).collect();
    assert_eq!(rows.len(), 1, "{stdout}");
    assert!(rows[0].starts_with("| tiny | truncate-oldest | extractive | changed |"), "{stdout}");
    assert!(rows[0].contains("/0 → 0/0/0/3 |"), "{stdout}");
    assert!(stdout.contains("1 rows changed, 0 only in A, 0 only in B, 2 equal"), "{stdout}");

    // The same run against itself: nothing to list.
    let same = compactbench(&["report", "--compare", a.to_str().unwrap(), a.join("results.json").to_str().unwrap()]);
    assert!(same.status.success());
    assert!(String::from_utf8(same.stdout).unwrap().contains("No differences: 3 rows, all equal."));
}

#[test]
fn bad_inputs_name_the_file() {
    let dir = scratch("report-compare-bad");
    let missing = dir.join("nowhere");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"rows\": 5}").unwrap();
    for (a, named) in [(&missing, missing.join("results.json")), (&bad, bad.clone())] {
        let out = compactbench(&["report", "--compare", a.to_str().unwrap(), bad.to_str().unwrap()]);
        assert!(!out.status.success());
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains(named.to_str().unwrap()), "{stderr}");
    }
}

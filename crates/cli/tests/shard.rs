//! `compactbench eval --shard I/N` and `compactbench merge`: three shards of a small matrix,
//! merged, give the whole run's reports byte for byte; merge refuses what it cannot join; the
//! shards' summary caches copied together replay the whole matrix without the model.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{compactbench, scratch, tiny_scenarios, THREE_FACTS as FACTS};
use serde_json::Value;

/// Every kind of cell: primary rows, delegation (pi, codex), text chat (aider), bounds, and
/// strategies that never summarize (whose bounds the shards run and merge drops).
fn eval(scenarios: &Path, out: &Path, seeds: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "eval", "--strategy", "none", "--strategy", "truncate-oldest", "--strategy", "pi", "--strategy", "codex", "--strategy", "aider", "--seeds", seeds,
        "--scenarios", scenarios.to_str().unwrap(), "--out", out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    compactbench(&args)
}

fn ok(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "failed: {stderr}");
    stderr
}

fn refused(out: &Output) -> String {
    assert!(!out.status.success(), "should have been refused");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn merge(dirs: &[&Path], scenarios: &Path, out: &Path) -> Output {
    let mut args = vec!["merge"];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    args.extend(["--scenarios", scenarios.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    compactbench(&args)
}

/// The cell lines of a shard's journal (the header aside).
fn cells(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("cells.jsonl")).unwrap().lines().skip(1).map(str::to_owned).collect()
}

/// A copy of shard folder `from` as `to`, its journal rewritten by `edit` (header, cell lines).
fn edited(from: &Path, to: &Path, edit: impl FnOnce(&mut Value, &mut Vec<String>)) -> PathBuf {
    let text = std::fs::read_to_string(from.join("cells.jsonl")).unwrap();
    let mut lines = text.lines().map(str::to_owned);
    let mut header: Value = serde_json::from_str(&lines.next().unwrap()).unwrap();
    let mut cells: Vec<String> = lines.collect();
    edit(&mut header, &mut cells);
    std::fs::create_dir_all(to).unwrap();
    let mut out = format!("{header}\n");
    for c in cells {
        out.push_str(&c);
        out.push('\n');
    }
    std::fs::write(to.join("cells.jsonl"), out).unwrap();
    to.to_owned()
}

const REPORTS: [&str; 5] = ["results.json", "results.csv", "requests.csv", "report.md", "report.html"];

fn same_reports(a: &Path, b: &Path) {
    for file in REPORTS {
        let (x, y) = (std::fs::read(a.join(file)).unwrap(), std::fs::read(b.join(file)).unwrap());
        assert!(x == y, "{file} differs between {} and {}", a.display(), b.display());
    }
}

#[test]
fn three_shards_merge_into_the_whole_runs_reports() {
    let dir = scratch("shard-merge");
    let scenarios = tiny_scenarios(&dir, FACTS);
    let whole = dir.join("whole");
    ok(&eval(&scenarios, &whole, "2", &[]));
    let shards: Vec<PathBuf> = (1..=3).map(|i| dir.join(format!("shard-{i}"))).collect();
    for (i, shard) in shards.iter().enumerate() {
        // Machines with different thread counts split alike.
        let stderr = ok(&eval(&scenarios, shard, "2", &["--shard", &format!("{}/3", i + 1), "--jobs", &(i % 2 + 1).to_string()]));
        assert!(stderr.contains(&format!("shard {}/3 journaled in", i + 1)), "{stderr}");
        assert!(!shard.join("results.json").exists(), "a shard writes no reports");
        assert!(!cells(shard).is_empty(), "shard {} got no cells: the test would prove little", i + 1);
    }
    let merged = dir.join("merged");
    // In any order.
    let stderr = ok(&merge(&[&shards[2], &shards[0], &shards[1]], &scenarios, &merged));
    assert!(stderr.contains("bound runs of strategies that never summarized dropped"), "{stderr}");
    same_reports(&whole, &merged);
    assert!(merged.join("timing.md").exists());

    // A finished shard rerun with --resume reuses its cells, runs nothing and keeps its journal.
    let journal = std::fs::read(shards[1].join("cells.jsonl")).unwrap();
    let stderr = ok(&eval(&scenarios, &shards[1], "2", &["--shard", "2/3", "--resume"]));
    let n = cells(&shards[1]).len();
    assert!(stderr.contains(&format!("resuming: {n} finished runs reused")) && stderr.contains(&format!("{n} runs ({n} reused)")), "{stderr}");
    assert_eq!(journal, std::fs::read(shards[1].join("cells.jsonl")).unwrap());
    // ... and another shard into its folder is refused, naming what differs.
    let stderr = refused(&eval(&scenarios, &shards[1], "2", &["--shard", "3/3", "--resume"]));
    assert!(stderr.contains(r#"shard: journal "2/3", now "3/3""#), "{stderr}");

    // The same shard given twice is harmless.
    let again = dir.join("again");
    ok(&merge(&[&shards[0], &shards[1], &shards[2], &shards[0]], &scenarios, &again));
    same_reports(&whole, &again);

    // Refusals, each naming the folder and the problem; a refused merge writes nothing.
    let out = dir.join("refused");
    let stderr = refused(&merge(&[&shards[0], &shards[1]], &scenarios, &out));
    assert!(stderr.contains("shard 3/3") && stderr.contains("none of the folders given"), "{stderr}");

    let unfinished = edited(&shards[2], &dir.join("unfinished"), |_, cells| {
        cells.pop();
    });
    let stderr = refused(&merge(&[&shards[0], &shards[1], &unfinished], &scenarios, &out));
    let total = cells(&shards[2]).len();
    assert!(stderr.contains(&format!("shard 3/3 in {}: 1 of its {total} cells are missing", unfinished.display())), "{stderr}");

    let other_seeds = dir.join("other-seeds");
    ok(&eval(&scenarios, &other_seeds, "1", &["--shard", "3/3"]));
    let stderr = refused(&merge(&[&shards[0], &shards[1], &other_seeds], &scenarios, &out));
    assert!(stderr.contains("shards of different matrices") && stderr.contains(other_seeds.to_str().unwrap()) && stderr.contains("seeds:"), "{stderr}");

    let two_way = edited(&shards[2], &dir.join("two-way"), |header, _| header["config"]["shard"] = "2/2".into());
    let stderr = refused(&merge(&[&shards[0], &two_way], &scenarios, &out));
    assert!(stderr.contains(&format!("{} is shard 2/2", two_way.display())), "{stderr}");

    let changed = edited(&shards[0], &dir.join("changed"), |_, cells| {
        let mut cell: Value = serde_json::from_str(&cells[0]).unwrap();
        cell["log_entries"] = (cell["log_entries"].as_u64().unwrap() + 1).into();
        cells[0] = cell.to_string();
    });
    let stderr = refused(&merge(&[&shards[0], &shards[1], &shards[2], &changed], &scenarios, &out));
    assert!(stderr.contains("differs between") && stderr.contains(changed.to_str().unwrap()), "{stderr}");

    let misplaced = edited(&shards[0], &dir.join("misplaced"), |header, _| header["config"]["shard"] = "2/3".into());
    let stderr = refused(&merge(&[&misplaced, &shards[1], &shards[2]], &scenarios, &out));
    assert!(stderr.contains("(shard 2/3) holds") && stderr.contains("a cell of shard 1/3"), "{stderr}");

    let unsharded = edited(&shards[0], &dir.join("unsharded"), |header, _| header["config"]["shard"] = Value::Null);
    let stderr = refused(&merge(&[&unsharded, &shards[1], &shards[2]], &scenarios, &out));
    assert!(stderr.contains("written by an eval without --shard"), "{stderr}");

    let nowhere = dir.join("nowhere");
    let stderr = refused(&merge(&[&nowhere], &scenarios, &out));
    assert!(stderr.contains(nowhere.to_str().unwrap()) && stderr.contains("no journal"), "{stderr}");

    let edited_scenarios = dir.join("edited-scenarios");
    std::fs::create_dir_all(&edited_scenarios).unwrap();
    let toml = std::fs::read_to_string(scenarios.join("tiny.toml")).unwrap().replace("turns = 6", "turns = 7");
    std::fs::write(edited_scenarios.join("tiny.toml"), toml).unwrap();
    let stderr = refused(&merge(&[&shards[0], &shards[1], &shards[2]], &edited_scenarios, &out));
    assert!(stderr.contains(r#"scenario "tiny""#) && stderr.contains("is not the one the shards ran"), "{stderr}");
    assert!(!out.join("results.json").exists(), "a refused merge writes nothing");
}

/// A model that answers every summary request with the start of what it was asked: short,
/// and a different answer for each request.
struct Gist;

impl wiremock::Respond for Gist {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).expect("a JSON body");
        let asked = body["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str()).unwrap_or_default();
        let gist: String = asked.chars().take(300).collect();
        wiremock::ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("Summary: {gist}")}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150}
        }))
    }
}

/// The entries of a summary cache folder (`<model>/<key>.json`), relative to it.
fn cache_entries(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for model in std::fs::read_dir(dir).unwrap() {
        for entry in std::fs::read_dir(model.unwrap().path()).unwrap() {
            out.push(entry.unwrap().path().strip_prefix(dir).unwrap().to_owned());
        }
    }
    out.sort();
    out
}

#[test]
fn the_shards_summary_caches_copied_together_replay_the_whole_matrix() {
    let dir = scratch("shard-cache");
    let scenarios = tiny_scenarios(&dir, FACTS);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let server = rt.block_on(wiremock::MockServer::start());
    rt.block_on(wiremock::Mock::given(wiremock::matchers::method("POST")).respond_with(Gist).mount(&server));
    let base_url = format!("{}/v1", server.uri());
    let model = |cache: &Path| ["--summarizer", "openai", "--openai-model", "gist", "--openai-base-url", &base_url, "--cache-dir", cache.to_str().unwrap()].map(str::to_owned).to_vec();
    // Two machines, each with its own cache.
    let shards: Vec<PathBuf> = (1..=2).map(|i| dir.join(format!("shard-{i}"))).collect();
    for (i, shard) in shards.iter().enumerate() {
        let mut extra = model(&dir.join(format!("cache-{}", i + 1)));
        extra.extend(["--shard".to_owned(), format!("{}/2", i + 1)]);
        ok(&eval(&scenarios, shard, "2", &extra.iter().map(String::as_str).collect::<Vec<_>>()));
    }
    let calls = rt.block_on(server.received_requests()).unwrap().len();
    assert!(calls > 0, "nothing summarized");
    let merged = dir.join("merged");
    ok(&merge(&[&shards[0], &shards[1]], &scenarios, &merged));

    // Copying the caches into one folder merges them (one file per request, named by its
    // hash). Each request was asked once: all of a strategy's rows on a session (its bounds
    // repeat its first summary request) ran on one machine.
    let joined = dir.join("cache");
    for i in 1..=2 {
        let from = dir.join(format!("cache-{i}"));
        for entry in cache_entries(&from) {
            std::fs::create_dir_all(joined.join(&entry).parent().unwrap()).unwrap();
            std::fs::copy(from.join(&entry), joined.join(&entry)).unwrap();
        }
    }
    assert_eq!(cache_entries(&joined).len(), calls);
    drop(server);
    drop(rt);

    // The whole matrix on one machine from the joined cache, the model gone: nothing to ask,
    // and the merged shards' reports.
    let whole = dir.join("whole");
    let mut extra = model(&joined);
    extra.push("--replay-only".to_owned());
    let stderr = ok(&eval(&scenarios, &whole, "2", &extra.iter().map(String::as_str).collect::<Vec<_>>()));
    assert!(stderr.contains(", 0 sent to the model"), "{stderr}");
    same_reports(&whole, &merged);
}

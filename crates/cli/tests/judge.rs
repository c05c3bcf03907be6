//! `compactbench eval --judge`: model-judged probes end to end, against a local mock
//! OpenAI-compatible server (127.0.0.1 only) whose "model" answers with the conversation it
//! was shown, then replayed from the cache with the server gone.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{compactbench, scratch, tiny_scenarios};
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Answers every chat request with its own user message: a judge that quotes everything the
/// request holds.
struct Echo;

impl Respond for Echo {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).expect("a JSON body");
        let text = body["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str()).unwrap_or_default().to_owned();
        ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
        }))
    }
}

const FACTS: &str = r#"
[[facts]]
kind = "error_message"
turn = 0
[[facts]]
kind = "decision"
turn = 1
[[facts]]
kind = "file_path"
turn = 4
"#;

fn eval(dir: &Path, base_url: &str, out: &str, extra: &[&str]) -> (Output, PathBuf) {
    let scenarios = tiny_scenarios(dir, FACTS);
    let run = dir.join(out);
    let cache = dir.join("cache");
    let mut args = vec![
        "eval", "--strategy", "none", "--strategy", "truncate-oldest", "--no-bounds", "--judge", "--openai-model", "echo",
        "--openai-base-url", base_url, "--cache-dir", cache.to_str().unwrap(), "--scenarios", scenarios.to_str().unwrap(),
        "--out", run.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    (compactbench(&args), run)
}

#[test]
fn judged_probes_are_reported_and_replay_without_the_model() {
    let dir = scratch("judge");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let server = rt.block_on(MockServer::start());
    rt.block_on(Mock::given(method("POST")).and(path("/v1/chat/completions")).respond_with(Echo).mount(&server));
    let base_url = format!("{}/v1", server.uri());

    let (out, run) = eval(&dir, &base_url, "a", &[]);
    assert!(out.status.success(), "eval failed: {}", String::from_utf8_lossy(&out.stderr));
    let results: Value = serde_json::from_str(&std::fs::read_to_string(run.join("results.json")).unwrap()).unwrap();
    let mut judged = 0;
    for r in results["runs"].as_array().unwrap() {
        for f in r["facts"].as_array().unwrap() {
            let in_request = f["last"].as_str().unwrap().starts_with("verbatim");
            let answer = f["judged"]["answer"].as_str().unwrap_or_else(|| panic!("{} {f}: not judged", r["strategy"]));
            // An echoing judge quotes exactly what the request holds.
            assert_eq!(answer, if in_request { "quoted" } else { "missed" }, "{} {f}", r["strategy"]);
            judged += 1;
        }
    }
    assert!(judged >= 4, "{judged} judged facts");
    let calls = rt.block_on(server.received_requests()).unwrap().len();
    assert!(calls > 0 && calls <= judged, "{calls} judge calls for {judged} facts");
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("## Model-judged probes") && report.contains("| none | "), "{report}");
    // The summarizer stays extractive: only the judge talks to the model.
    assert_eq!(results["summarizer"], "extractive");

    // The model gone, the cache answers: the same results, byte for byte.
    drop(server);
    drop(rt);
    let (out, replayed) = eval(&dir, &base_url, "b", &["--replay-only"]);
    assert!(out.status.success(), "replay failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("{calls} calls served from cache, 0 sent")), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(run.join("results.json")).unwrap(), std::fs::read(replayed.join("results.json")).unwrap());
}

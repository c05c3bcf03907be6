//! The client's protocol handling against a local mock server (wiremock, 127.0.0.1 only).
//!
//! The mock server runs on its own thread; each test drives it from a small current-thread
//! runtime and calls the client's sync API from the plain test thread, as rayon would.

use std::time::{Duration, Instant};

use compactbench_core::{ErrorKind, StopReason, Summarizer, SummaryRequest};
use compactbench_summarize_http::{OpenAi, OpenAiConfig};
use serde_json::json;
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

struct Fixture {
    rt: tokio::runtime::Runtime,
    server: MockServer,
}

impl Fixture {
    fn new() -> Fixture {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let server = rt.block_on(MockServer::start());
        Fixture { rt, server }
    }

    fn mount(&self, mock: Mock) {
        self.rt.block_on(mock.mount(&self.server));
    }

    fn requests(&self) -> Vec<wiremock::Request> {
        self.rt.block_on(self.server.received_requests()).expect("request recording is on")
    }

    /// Fast bounds so failure tests finish in well under a second.
    fn config(&self) -> OpenAiConfig {
        let mut c = OpenAiConfig::new(self.server.uri(), "test-model");
        c.timeout = Duration::from_secs(5);
        c.initial_backoff = Duration::from_millis(10);
        c.max_backoff = Duration::from_millis(40);
        c.max_retries = 2;
        c
    }
}

fn request() -> SummaryRequest {
    SummaryRequest {
        purpose: "history".into(),
        context: compactbench_core::SummaryContext::Fresh,
        system: "You are a summarizer.".into(),
        transcript: "[User]: fix the parser".into(),
        instructions: "Summarize the conversation.".into(),
        max_output_tokens: 123,
    }
}

fn completion(text: &str, finish_reason: &str) -> serde_json::Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}
    })
}

fn chat() -> wiremock::MockBuilder {
    Mock::given(method("POST")).and(path("/v1/chat/completions"))
}

#[test]
fn sends_the_documented_request_and_reads_text_and_usage() {
    let f = Fixture::new();
    let expected_body = json!({
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "You are a summarizer."},
            {"role": "user", "content": "[User]: fix the parser\n\nSummarize the conversation."}
        ],
        "max_tokens": 123,
        "temperature": 0.0
    });
    f.mount(
        chat()
            .and(header("authorization", "Bearer sk-test"))
            .and(header("content-type", "application/json"))
            .and(body_json(expected_body))
            .respond_with(ResponseTemplate::new(200).set_body_json(completion("The user wants the parser fixed.", "stop"))),
    );
    // A base URL ending in /v1 reaches the same path.
    let client = OpenAi::new(OpenAiConfig { base_url: format!("{}/v1/", f.server.uri()), ..f.config() }.with_api_key("sk-test")).unwrap();
    assert_eq!(client.name(), "openai:test-model");
    let s = client.summarize(&request()).unwrap();
    assert_eq!(s.text, "The user wants the parser fixed.");
    assert_eq!((s.input_tokens, s.output_tokens, s.stop), (42, 7, StopReason::Complete));
    assert_eq!(f.requests().len(), 1);
}

#[test]
fn no_key_sends_no_authorization_and_no_system_sends_no_system_message() {
    let f = Fixture::new();
    f.mount(chat().respond_with(ResponseTemplate::new(200).set_body_json(completion("ok", "stop"))));
    let client = OpenAi::new(f.config()).unwrap();
    client.summarize(&SummaryRequest { system: String::new(), ..request() }).unwrap();
    let sent = &f.requests()[0];
    assert!(sent.headers.get("authorization").is_none());
    let body: serde_json::Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(body["messages"].as_array().unwrap().len(), 1);
    assert_eq!(body["messages"][0]["role"], "user");
}

#[test]
fn finish_reason_length_is_a_length_stop() {
    let f = Fixture::new();
    f.mount(chat().respond_with(ResponseTemplate::new(200).set_body_json(completion("cut o", "length"))));
    let s = OpenAi::new(f.config()).unwrap().summarize(&request()).unwrap();
    assert_eq!(s.stop, StopReason::Length);
}

#[test]
fn retries_server_errors_then_succeeds() {
    let f = Fixture::new();
    // Mounted first, so it answers the first two calls; then it stops matching.
    f.mount(chat().respond_with(ResponseTemplate::new(500).set_body_string("upstream crashed")).up_to_n_times(2));
    f.mount(chat().respond_with(ResponseTemplate::new(200).set_body_json(completion("third time", "stop"))));
    let s = OpenAi::new(f.config()).unwrap().summarize(&request()).unwrap();
    assert_eq!(s.text, "third time");
    assert_eq!(f.requests().len(), 3);
}

#[test]
fn retry_after_is_honoured_on_429_and_503_and_capped() {
    let f = Fixture::new();
    // Backoff alone would wait 10-40 ms; the server asks for a second, then for a date 3 s on
    // (rounded down to whole seconds: at least 2 s on, at least 1 s after the second attempt).
    let later = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(3));
    f.mount(chat().respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1")).up_to_n_times(1));
    f.mount(chat().respond_with(ResponseTemplate::new(503).insert_header("retry-after", later.as_str())).up_to_n_times(1));
    f.mount(chat().respond_with(ResponseTemplate::new(200).set_body_json(completion("patient", "stop"))));
    let started = Instant::now();
    assert_eq!(OpenAi::new(f.config()).unwrap().summarize(&request()).unwrap().text, "patient");
    assert!(started.elapsed() >= Duration::from_millis(1900), "did not wait as asked: {:?}", started.elapsed());
    assert_eq!(f.requests().len(), 3);

    // An hour is cut to max_retry_after.
    let f = Fixture::new();
    f.mount(chat().respond_with(ResponseTemplate::new(429).insert_header("retry-after", "3600")).up_to_n_times(1));
    f.mount(chat().respond_with(ResponseTemplate::new(200).set_body_json(completion("soon", "stop"))));
    let config = OpenAiConfig { max_retry_after: Duration::from_millis(50), ..f.config() };
    let started = Instant::now();
    assert_eq!(OpenAi::new(config).unwrap().summarize(&request()).unwrap().text, "soon");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
}

#[test]
fn gives_up_after_the_bounded_retries() {
    let f = Fixture::new();
    f.mount(chat().respond_with(ResponseTemplate::new(503).set_body_json(json!({"error": {"message": "model is loading"}}))));
    let e = OpenAi::new(f.config()).unwrap().summarize(&request()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Transport);
    assert!(e.message.contains("HTTP 503") && e.message.contains("model is loading") && e.message.contains("3 attempts"), "{e}");
    assert_eq!(f.requests().len(), 3, "one attempt plus max_retries = 2");
}

#[test]
fn client_errors_are_not_retried() {
    let f = Fixture::new();
    f.mount(chat().respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {"message": "bad key"}}))));
    let e = OpenAi::new(f.config()).unwrap().summarize(&request()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Transport);
    assert!(e.message.contains("HTTP 401: bad key"), "{e}");
    assert_eq!(f.requests().len(), 1);
}

#[test]
fn a_slow_server_times_out_after_bounded_retries() {
    let f = Fixture::new();
    f.mount(chat().respond_with(ResponseTemplate::new(200).set_body_json(completion("late", "stop")).set_delay(Duration::from_millis(1500))));
    let config = OpenAiConfig { timeout: Duration::from_millis(150), max_retries: 1, ..f.config() };
    let started = Instant::now();
    let e = OpenAi::new(config).unwrap().summarize(&request()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Timeout, "{e}");
    assert_eq!(f.requests().len(), 2);
    assert!(started.elapsed() < Duration::from_millis(1400), "did not wait for the server: {:?}", started.elapsed());
}

#[test]
fn malformed_json_is_a_transport_error_and_not_retried() {
    let f = Fixture::new();
    f.mount(chat().respond_with(ResponseTemplate::new(200).set_body_string("{\"choices\": [ oops")));
    let e = OpenAi::new(f.config()).unwrap().summarize(&request()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Transport);
    assert!(e.message.contains("malformed response"), "{e}");
    assert_eq!(f.requests().len(), 1);
}

#[test]
fn empty_content_is_an_empty_summary() {
    let f = Fixture::new();
    f.mount(chat().respond_with(ResponseTemplate::new(200).set_body_json(completion("", "stop"))));
    let e = OpenAi::new(f.config()).unwrap().summarize(&request()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::EmptySummary);
}

#[test]
fn a_refused_connection_is_a_transport_error_after_retries() {
    // Bind then drop a loopback listener: its port is (almost surely) closed right after.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut config = OpenAiConfig::new(format!("http://127.0.0.1:{port}"), "m");
    config.initial_backoff = Duration::from_millis(5);
    config.max_retries = 1;
    let e = OpenAi::new(config).unwrap().summarize(&request()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Transport, "{e}");
    assert!(e.message.contains("cannot connect") && e.message.contains("2 attempts"), "{e}");
}

#[test]
fn the_concurrency_limit_is_shared_across_threads() {
    let f = Fixture::new();
    f.mount(chat().respond_with(ResponseTemplate::new(200).set_body_json(completion("ok", "stop")).set_delay(Duration::from_millis(100))));
    let client = OpenAi::new(OpenAiConfig { max_concurrency: 1, ..f.config() }).unwrap();
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| client.summarize(&request()).unwrap());
        }
    });
    // One at a time: four 100 ms answers cannot overlap.
    assert!(started.elapsed() >= Duration::from_millis(400), "{:?}", started.elapsed());
    assert_eq!(f.requests().len(), 4);
}

#[tokio::test]
async fn async_callers_use_summarize_async_and_the_sync_method_refuses() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("async ok", "stop")))
        .mount(&server)
        .await;
    let client = OpenAi::new(OpenAiConfig::new(server.uri(), "test-model")).unwrap();
    assert_eq!(client.summarize_async(&request()).await.unwrap().text, "async ok");
    let e = client.summarize(&request()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Other);
    assert!(e.message.contains("summarize_async"), "{e}");
    // Dropping the client here, inside a runtime, must not panic.
    drop(client);
}

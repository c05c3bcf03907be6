//! The scripted model server: HTTP/1 on 127.0.0.1, speaking Anthropic Messages
//! (`POST /v1/messages`), OpenAI Responses (`POST /v1/responses`), OpenAI Chat Completions
//! (`POST /v1/chat/completions`), each streamed as SSE when the request asks for it, and the
//! Gemini API (`POST /v1beta/models/MODEL:streamGenerateContent`
//! as SSE, `:generateContent` as one JSON response; `:countTokens` is answered by the server
//! itself). What to answer is the [`Responder`]'s business; the server encodes its [`Reply`] in
//! the request's wire format and records every request.
//!
//! Bounded: it answers at most `max_requests` requests and stops by itself at its deadline
//! (later requests get an error status, which the harnesses treat as fatal with retries off).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The wire format of a request, from its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wire {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses.
    Responses,
    /// OpenAI Chat Completions: `messages` with `tool_calls` on assistant messages and `tool`
    /// messages for results.
    Chat,
    /// The Gemini API (`generateContent` and `streamGenerateContent`): `contents` of `parts`,
    /// the model named in the path.
    Gemini,
}

impl Wire {
    fn of(path: &str) -> Option<Wire> {
        let path = path.split('?').next().unwrap_or(path);
        if path.ends_with("/messages") {
            Some(Wire::Anthropic)
        } else if path.ends_with("/responses") {
            Some(Wire::Responses)
        } else if path.ends_with("/chat/completions") {
            Some(Wire::Chat)
        } else if gemini_method(path).is_some_and(|(_, method)| method != GeminiMethod::CountTokens) {
            Some(Wire::Gemini)
        } else {
            None
        }
    }
}

/// What a Gemini API path asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GeminiMethod {
    /// `:generateContent`, one JSON response.
    Generate,
    /// `:streamGenerateContent` (with `alt=sse`), server-sent events.
    Stream,
    /// `:countTokens`: no model reply, a count.
    CountTokens,
}

/// The model and method of a Gemini API path (`.../models/MODEL:METHOD`, query aside).
fn gemini_method(path: &str) -> Option<(&str, GeminiMethod)> {
    let path = path.split('?').next().unwrap_or(path);
    let (model, method) = path.rsplit_once("/models/")?.1.split_once(':')?;
    let method = match method {
        "generateContent" => GeminiMethod::Generate,
        "streamGenerateContent" => GeminiMethod::Stream,
        "countTokens" => GeminiMethod::CountTokens,
        _ => return None,
    };
    Some((model, method))
}

/// One block of a reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Block {
    /// Text.
    Text(String),
    /// A tool call: id, tool name, arguments.
    Call { id: String, name: String, input: Value },
}

/// What the model answers, in no particular wire format.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// Content, in order.
    pub blocks: Vec<Block>,
    /// Prompt tokens reported.
    pub input_tokens: u64,
    /// Output tokens reported.
    pub output_tokens: u64,
}

impl Reply {
    /// A text reply with the given usage.
    pub fn text(text: impl Into<String>, input_tokens: u64, output_tokens: u64) -> Reply {
        Reply { blocks: vec![Block::Text(text.into())], input_tokens, output_tokens }
    }

    fn calls(&self) -> bool {
        self.blocks.iter().any(|b| matches!(b, Block::Call { .. }))
    }
}

/// Decides the answer to each request. `kind` names what the request was taken for (e.g.
/// `main`, `compaction`, `side`) and is recorded with it.
pub trait Responder: Send + 'static {
    /// The reply to `body` (sent to `wire`), and the kind of request it was taken for.
    fn respond(&mut self, wire: Wire, body: &Value) -> (String, Reply);
}

/// One recorded request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Order of arrival, from 0.
    pub index: usize,
    /// Wire format.
    pub wire: Wire,
    /// What the responder took it for.
    pub kind: String,
    /// The request body.
    pub body: Value,
    /// The reply sent.
    pub reply: Reply,
}

/// Limits of one server.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Requests answered at most.
    pub max_requests: usize,
    /// The server stops by itself after this long.
    pub lifetime: Duration,
}

struct Shared {
    responder: Mutex<Box<dyn Responder>>,
    records: Mutex<Vec<Record>>,
    limits: Limits,
    deadline: Instant,
}

/// A running server; dropping it stops it.
pub struct Server {
    /// Where it listens (always 127.0.0.1).
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Starts a server on a free port of 127.0.0.1.
    pub fn start(responder: Box<dyn Responder>, limits: Limits) -> Result<Server> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding 127.0.0.1")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            responder: Mutex::new(responder),
            records: Mutex::new(Vec::new()),
            limits,
            deadline: Instant::now() + limits.lifetime,
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let serving = Arc::clone(&shared);
        let thread = std::thread::spawn(move || runtime.block_on(serve(listener, serving, stopped)));
        Ok(Server { addr, shared, stop: Some(stop), thread: Some(thread) })
    }

    /// The base URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request recorded so far.
    pub fn records(&self) -> Vec<Record> {
        self.shared.records.lock().expect("records").clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(listener: std::net::TcpListener, shared: Arc<Shared>, mut stopped: tokio::sync::oneshot::Receiver<()>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
    let lifetime = tokio::time::sleep_until(shared.deadline.into());
    tokio::pin!(lifetime);
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            () = &mut lifetime => return,
            a = listener.accept() => a,
        };
        let Ok((stream, _)) = accepted else { continue };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let service = service_fn(move |request| handle(Arc::clone(&shared), request));
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

fn plain(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    Response::builder().status(status).header("content-type", content_type).body(Full::new(Bytes::from(body))).expect("static response")
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    plain(status, "application/json", json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}).to_string())
}

async fn handle(shared: Arc<Shared>, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = request.uri().path_and_query().map_or_else(|| request.uri().path().to_owned(), |p| p.as_str().to_owned());
    let post = request.method() == hyper::Method::POST;
    let Ok(collected) = request.into_body().collect().await else { return Ok(error(StatusCode::BAD_REQUEST, "unreadable body")) };
    let counting = gemini_method(&path).is_some_and(|(_, m)| m == GeminiMethod::CountTokens);
    let Some(wire) = Wire::of(&path).or(counting.then_some(Wire::Gemini)).filter(|_| post) else {
        return Ok(error(StatusCode::NOT_FOUND, "not a model endpoint"));
    };
    let Ok(body) = serde_json::from_slice::<Value>(&collected.to_bytes()) else { return Ok(error(StatusCode::BAD_REQUEST, "not JSON")) };
    let mut records = shared.records.lock().expect("records");
    if records.len() >= shared.limits.max_requests || Instant::now() >= shared.deadline {
        return Ok(error(StatusCode::BAD_REQUEST, "compactbench: the scripted server's request budget is spent"));
    }
    let index = records.len();
    if counting {
        // Not a model turn: the player never sees it. Gemini CLI counts with the API only for
        // media parts; the answer is the body's characters / 4, its own fallback estimate.
        let tokens = body.get("contents").map_or(0, |c| c.to_string().len() as u64 / 4);
        records.push(Record { index, wire, kind: "count_tokens".into(), body, reply: Reply::text("", tokens, 0) });
        return Ok(plain(StatusCode::OK, "application/json", json!({"totalTokens": tokens}).to_string()));
    }
    let (kind, reply) = shared.responder.lock().expect("responder").respond(wire, &body);
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let named = gemini_method(&path).map(|(model, _)| model);
    let model = body.get("model").and_then(Value::as_str).or(named).unwrap_or("model").to_owned();
    let response = match (wire, stream) {
        (Wire::Anthropic, true) => plain(StatusCode::OK, "text/event-stream", anthropic_sse(&reply, &model, index)),
        (Wire::Anthropic, false) => plain(StatusCode::OK, "application/json", anthropic_message(&reply, &model, index).to_string()),
        (Wire::Responses, _) => plain(StatusCode::OK, "text/event-stream", responses_sse(&reply, &model, index)),
        (Wire::Chat, true) => {
            let usage = body["stream_options"]["include_usage"].as_bool().unwrap_or(false);
            plain(StatusCode::OK, "text/event-stream", chat_sse(&reply, &model, index, usage))
        }
        (Wire::Chat, false) => plain(StatusCode::OK, "application/json", chat_completion(&reply, &model, index).to_string()),
        (Wire::Gemini, _) => match gemini_method(&path).map(|(_, m)| m) {
            Some(GeminiMethod::Stream) => plain(StatusCode::OK, "text/event-stream", gemini_sse(&reply, &model, index)),
            _ => plain(StatusCode::OK, "application/json", gemini_response(&reply, &model, index).to_string()),
        },
    };
    records.push(Record { index, wire, kind, body, reply });
    Ok(response)
}

fn anthropic_content(reply: &Reply) -> Vec<Value> {
    reply
        .blocks
        .iter()
        .map(|b| match b {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::Call { id, name, input } => json!({"type": "tool_use", "id": id, "name": name, "input": input}),
        })
        .collect()
}

fn anthropic_usage(reply: &Reply) -> Value {
    json!({"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})
}

fn stop_reason(reply: &Reply) -> &'static str {
    if reply.calls() {
        "tool_use"
    } else {
        "end_turn"
    }
}

/// A non-streamed Messages response.
pub fn anthropic_message(reply: &Reply, model: &str, index: usize) -> Value {
    json!({
        "id": format!("msg_cb{index:05}"), "type": "message", "role": "assistant", "model": model,
        "content": anthropic_content(reply), "stop_reason": stop_reason(reply), "stop_sequence": null,
        "usage": anthropic_usage(reply),
    })
}

fn event(out: &mut String, name: &str, data: &Value) {
    out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
}

/// A streamed Messages response: `message_start`, one start/delta/stop per block,
/// `message_delta` with the stop reason and usage, `message_stop`.
pub fn anthropic_sse(reply: &Reply, model: &str, index: usize) -> String {
    let mut out = String::new();
    let start_usage = json!({"input_tokens": reply.input_tokens, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0});
    event(&mut out, "message_start", &json!({"type": "message_start", "message": {
        "id": format!("msg_cb{index:05}"), "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": null, "stop_sequence": null, "usage": start_usage}}));
    for (i, b) in reply.blocks.iter().enumerate() {
        let (start, delta) = match b {
            Block::Text(text) => (json!({"type": "text", "text": ""}), json!({"type": "text_delta", "text": text})),
            Block::Call { id, name, input } => (
                json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            ),
        };
        event(&mut out, "content_block_start", &json!({"type": "content_block_start", "index": i, "content_block": start}));
        event(&mut out, "content_block_delta", &json!({"type": "content_block_delta", "index": i, "delta": delta}));
        event(&mut out, "content_block_stop", &json!({"type": "content_block_stop", "index": i}));
    }
    event(&mut out, "message_delta", &json!({"type": "message_delta", "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null}, "usage": anthropic_usage(reply)}));
    event(&mut out, "message_stop", &json!({"type": "message_stop"}));
    out
}

/// A streamed Responses response: `response.created`, one `response.output_item.done` per
/// block, `response.completed` with the usage.
pub fn responses_sse(reply: &Reply, model: &str, index: usize) -> String {
    let items: Vec<Value> = reply
        .blocks
        .iter()
        .enumerate()
        .map(|(i, b)| match b {
            Block::Text(text) => json!({"type": "message", "id": format!("msg_cb{index:05}_{i}"), "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}),
            Block::Call { id, name, input } => json!({"type": "function_call", "id": format!("fc_cb{index:05}_{i}"), "call_id": id, "name": name,
                "arguments": input.to_string(), "status": "completed"}),
        })
        .collect();
    let id = format!("resp_cb{index:05}");
    let mut out = String::new();
    event(&mut out, "response.created", &json!({"type": "response.created", "response": {"id": id, "object": "response", "model": model, "status": "in_progress", "output": []}}));
    for (i, item) in items.iter().enumerate() {
        event(&mut out, "response.output_item.added", &json!({"type": "response.output_item.added", "output_index": i, "item": item}));
        event(&mut out, "response.output_item.done", &json!({"type": "response.output_item.done", "output_index": i, "item": item}));
    }
    let usage = json!({"input_tokens": reply.input_tokens, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": reply.input_tokens + reply.output_tokens});
    event(&mut out, "response.completed", &json!({"type": "response.completed", "response": {"id": id, "object": "response", "model": model,
        "status": "completed", "output": items, "usage": usage}}));
    out
}

/// A Gemini `GenerateContentResponse`: one candidate with the reply's parts (a call as a
/// `functionCall` with the session's id), `finishReason` `STOP` (Gemini has no tool-use stop
/// reason), and the usage as `usageMetadata` (`promptTokenCount` is what Gemini CLI compresses
/// on).
pub fn gemini_response(reply: &Reply, model: &str, index: usize) -> Value {
    let parts: Vec<Value> = reply
        .blocks
        .iter()
        .map(|b| match b {
            Block::Text(text) => json!({"text": text}),
            Block::Call { id, name, input } => json!({"functionCall": {"id": id, "name": name, "args": input}}),
        })
        .collect();
    json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": reply.input_tokens, "candidatesTokenCount": reply.output_tokens,
            "totalTokenCount": reply.input_tokens + reply.output_tokens},
        "modelVersion": model,
        "responseId": format!("cb{index:05}"),
    })
}

/// A streamed Gemini response (`alt=sse`): the whole response as one `data:` event; the
/// stream has no event names and no closing event.
pub fn gemini_sse(reply: &Reply, model: &str, index: usize) -> String {
    format!("data: {}\r\n\r\n", gemini_response(reply, model, index))
}

/// The text and the `tool_calls` of a reply as a Chat Completions assistant message has them
/// (text blocks joined: the wire has one content string).
fn chat_message(reply: &Reply) -> (Option<String>, Vec<Value>) {
    let texts: Vec<&str> = reply.blocks.iter().filter_map(|b| if let Block::Text(t) = b { Some(t.as_str()) } else { None }).collect();
    let calls = reply
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::Call { id, name, input } => Some(json!({"id": id, "type": "function", "function": {"name": name, "arguments": input.to_string()}})),
            Block::Text(_) => None,
        })
        .collect();
    ((!texts.is_empty()).then(|| texts.join("\n\n")), calls)
}

fn chat_usage(reply: &Reply) -> Value {
    json!({"prompt_tokens": reply.input_tokens, "completion_tokens": reply.output_tokens, "total_tokens": reply.input_tokens + reply.output_tokens})
}

fn finish_reason(reply: &Reply) -> &'static str {
    if reply.calls() {
        "tool_calls"
    } else {
        "stop"
    }
}

/// A non-streamed Chat Completions response: one choice, the usage.
pub fn chat_completion(reply: &Reply, model: &str, index: usize) -> Value {
    let (content, calls) = chat_message(reply);
    let mut message = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": format!("chatcmpl-cb{index:05}"), "object": "chat.completion", "created": 1_700_000_000, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(reply)}],
        "usage": chat_usage(reply),
    })
}

/// A streamed Chat Completions response: a role chunk, the text as one content delta, each call
/// as a `tool_calls` delta (its index, id, name and whole arguments), a chunk with the finish
/// reason, with `include_usage` (`stream_options`) a last chunk with no choices and the usage,
/// then `data: [DONE]`.
pub fn chat_sse(reply: &Reply, model: &str, index: usize, include_usage: bool) -> String {
    let id = format!("chatcmpl-cb{index:05}");
    let chunk = |choices: Value| json!({"id": id, "object": "chat.completion.chunk", "created": 1_700_000_000, "model": model, "choices": choices});
    let delta = |delta: Value, finish: Value| json!([{"index": 0, "delta": delta, "finish_reason": finish}]);
    let mut out = String::new();
    let mut data = |v: Value| out.push_str(&format!("data: {v}\n\n"));
    data(chunk(delta(json!({"role": "assistant", "content": ""}), Value::Null)));
    let (content, calls) = chat_message(reply);
    if let Some(text) = content {
        data(chunk(delta(json!({"content": text}), Value::Null)));
    }
    for (i, call) in calls.into_iter().enumerate() {
        let mut call = call;
        call["index"] = json!(i);
        data(chunk(delta(json!({"tool_calls": [call]}), Value::Null)));
    }
    data(chunk(delta(json!({}), json!(finish_reason(reply)))));
    if include_usage {
        let mut last = chunk(json!([]));
        last["usage"] = chat_usage(reply);
        data(last);
    }
    out.push_str("data: [DONE]\n\n");
    out
}

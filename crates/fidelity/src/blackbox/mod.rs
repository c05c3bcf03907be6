//! The black-box check: a harness CLI (installed from its registry package) runs whole
//! against a scripted model server of ours on 127.0.0.1 that plays a generated session as the
//! model's side ([`script`], [`server`], [`run`]); the requests it recorded tell what the
//! harness did ([`analyze`]), and our crate replays the same history to say what it would
//! have done.

pub mod analyze;
pub mod report;
pub mod run;
pub mod script;
pub mod server;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result};
use compactbench_eval::generate::generate;
use compactbench_eval::scenario::Scenario;
use compactbench_eval::session::Session;
use compactbench_tokens::TokenCounter;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::originals::Harness;
use run::Cli;
use script::Tools;
use server::Limits;

/// The auto-compact window the runs set (`--autocompact`, Claude Code's smallest).
pub const CLAUDE_AUTOCOMPACT_WINDOW: u64 = 100_000;
/// The model slug the runs name (one the release knows: its window and output limit set the
/// threshold arithmetic).
pub const CLAUDE_MODEL: &str = "claude-sonnet-4-5";
/// The model window and output limit our side is given for that slug.
pub const CLAUDE_MODEL_WINDOW: u64 = 200_000;
/// The output limit of that model, as our crate reads it.
pub const CLAUDE_MODEL_MAX_OUTPUT: u64 = 64_000;
/// The threshold the overhead is placed against: our crate's for the settings above
/// (`100_000 − min(64_000, 20_000) − 13_000`).
pub const CLAUDE_THRESHOLD: u64 = 67_000;

/// The model slug the Codex runs name (one the release knows).
pub const CODEX_MODEL: &str = "gpt-5.5";
/// `model_context_window` of the Codex runs.
pub const CODEX_CONTEXT_WINDOW: u64 = 100_000;
/// The output limit our side is given for that model (Codex reserves none for compaction).
pub const CODEX_MAX_OUTPUT: u64 = 32_000;
/// `model_auto_compact_token_limit` of the Codex runs (below 90% of the window, so it stands).
pub const CODEX_AUTO_COMPACT_LIMIT: u64 = 67_000;

/// The `config.toml` of the Codex runs (`{BASE_URL}`: the scripted server). The provider is
/// not named "OpenAI": that switches Codex to server-side compaction.
pub fn codex_config() -> String {
    format!(
        "model = \"{CODEX_MODEL}\"\nmodel_provider = \"compactbench\"\nmodel_context_window = {CODEX_CONTEXT_WINDOW}\n\
         model_auto_compact_token_limit = {CODEX_AUTO_COMPACT_LIMIT}\n\n[model_providers.compactbench]\nname = \"compactbench\"\n\
         base_url = \"{{BASE_URL}}\"\nwire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n"
    )
}

/// The settings a Codex run uses, for the report.
pub fn codex_settings() -> String {
    format!(
        "`codex exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox --json PROMPT`, later turns `codex exec ... resume --last PROMPT`; \
         `config.toml`: model `{CODEX_MODEL}`, a provider named `compactbench` (Responses wire, retries 0), `model_context_window = {CODEX_CONTEXT_WINDOW}`, \
         `model_auto_compact_token_limit = {CODEX_AUTO_COMPACT_LIMIT}`; scratch `HOME` and `CODEX_HOME`"
    )
}

/// How the script maps the session for Codex, for the report.
pub fn codex_script() -> String {
    format!(
        "every call becomes `exec_command` printing a prepared file (`cat .compactbench/N.out`, `; exit 1` for errors); each reply reports \
         input tokens = the session's own prefix (o200k) plus a per-session overhead that puts the {CODEX_AUTO_COMPACT_LIMIT}-token limit near a \
         seeded request (the 5th to the 25th), output tokens = the reply's own; the run stops at the request after the first compaction"
    )
}

/// Codex as `--setup` installed it.
pub fn codex_cli(installs: &Path, harness: &Harness, timeout: Duration) -> Cli {
    Cli {
        program: installs.join(harness.dir).join(harness.bin),
        args: ["exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--json"].map(str::to_owned).into(),
        env: [("OPENAI_API_KEY", "sk-compactbench-scripted"), ("LANG", "C.UTF-8"), ("TZ", "UTC")].map(|(k, v)| (k.to_owned(), v.to_owned())).into(),
        timeout,
    }
}

/// How Codex runs a turn: `codex exec ... PROMPT`, later turns `codex exec ... resume --last
/// PROMPT`, with `CODEX_HOME` (its `config.toml` from [`codex_config`]) under the scratch HOME.
pub fn codex_turns() -> run::PerTurn {
    run::PerTurn {
        prepare: Box::new(|at| {
            let codex_home = at.home.join(".codex");
            std::fs::create_dir_all(&codex_home)?;
            Ok(std::fs::write(codex_home.join("config.toml"), codex_config().replace("{BASE_URL}", &format!("{}/v1", at.url)))?)
        }),
        command: Box::new(|cmd, at, turn, prompt| {
            if turn > 0 {
                cmd.args(["resume", "--last"]);
            }
            cmd.arg(prompt).env("CODEX_HOME", at.home.join(".codex"));
        }),
        event: Box::new(|event, run| {
            if run::is_compaction_event(event, "item") {
                run.boundaries.push(event.clone());
            }
        }),
        ..run::PerTurn::default()
    }
}


/// The model the OpenCode runs name: a model of their own under the bundled `anthropic`
/// provider, whose `baseURL` is the scripted server (the Messages wire, no npm download).
pub const OPENCODE_MODEL: &str = "compactbench";
/// `limit.context` of that model.
pub const OPENCODE_CONTEXT: u64 = 100_000;
/// `limit.output` of that model (at `OUTPUT_TOKEN_MAX`, so `maxOutputTokens` is this).
pub const OPENCODE_OUTPUT: u64 = 32_000;
/// The usage OpenCode 1.18.33 compacts at with those limits: `usable = context − maxOutputTokens`
/// (its `overflow.ts` reserves no compaction buffer when the model has no input limit).
pub const OPENCODE_THRESHOLD: u64 = OPENCODE_CONTEXT - OPENCODE_OUTPUT;

/// The global `opencode.json` of the OpenCode runs (`{BASE_URL}`: the scripted server). Every
/// tool is allowed; compaction settings are the defaults (auto on, prune off); no snapshot of the
/// work dir is taken at every step (it only feeds undo).
pub fn opencode_config() -> String {
    let config = serde_json::json!({
        "autoupdate": false,
        "share": "disabled",
        "snapshot": false,
        "model": format!("anthropic/{OPENCODE_MODEL}"),
        "permission": {"*": "allow"},
        "provider": {"anthropic": {
            "options": {"baseURL": "{BASE_URL}", "apiKey": "sk-ant-compactbench-scripted"},
            "models": {OPENCODE_MODEL: {"name": OPENCODE_MODEL, "tool_call": true, "limit": {"context": OPENCODE_CONTEXT, "output": OPENCODE_OUTPUT}}},
        }},
    });
    serde_json::to_string_pretty(&config).expect("static config") + "\n"
}

/// The settings an OpenCode run uses, for the report.
pub fn opencode_settings() -> String {
    format!(
        "`opencode run --pure --format json -m anthropic/{OPENCODE_MODEL}` with the user message on stdin, later turns `opencode run --continue ...`; \
         global `opencode.json`: the bundled `anthropic` provider with `baseURL` on the scripted server, model `{OPENCODE_MODEL}` with \
         `limit: {{context: {OPENCODE_CONTEXT}, output: {OPENCODE_OUTPUT}}}`, permission `allow`, autoupdate, share and snapshots off, compaction defaults; \
         env `OPENCODE_DISABLE_MODELS_FETCH OPENCODE_DISABLE_AUTOUPDATE OPENCODE_DISABLE_DEFAULT_PLUGINS OPENCODE_DISABLE_SHARE \
         OPENCODE_DISABLE_LSP_DOWNLOAD OPENCODE_DISABLE_CLAUDE_CODE = 1`, `GIT_CEILING_DIRECTORIES` at the scratch folder; scratch `HOME` and XDG dirs"
    )
}

/// How the script maps the session for OpenCode, for the report.
pub fn opencode_script() -> String {
    format!(
        "a session's `read` calls become `read` of a file holding the session's result, every other call (and a failed read) `bash` \
         printing a prepared file (`cat .compactbench/N.out`, `; exit 1` for errors); each reply reports input tokens = the session's \
         own prefix (o200k) plus a per-session overhead that puts the {OPENCODE_THRESHOLD}-token usable context near a seeded request \
         (the 5th to the 25th), output tokens = the reply's own; the run stops at the request after the first compaction"
    )
}

/// OpenCode as `--setup` installed it.
pub fn opencode_cli(installs: &Path, harness: &Harness, timeout: Duration) -> Cli {
    let env = [
        "OPENCODE_DISABLE_MODELS_FETCH",
        "OPENCODE_DISABLE_AUTOUPDATE",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS",
        "OPENCODE_DISABLE_SHARE",
        "OPENCODE_DISABLE_LSP_DOWNLOAD",
        "OPENCODE_DISABLE_CLAUDE_CODE",
    ];
    Cli {
        program: installs.join(harness.dir).join(harness.bin),
        args: ["run", "--pure", "--format", "json", "-m", &format!("anthropic/{OPENCODE_MODEL}")].map(str::to_owned).into(),
        env: env.iter().map(|k| ((*k).to_owned(), "1".to_owned())).chain([("LANG", "C.UTF-8"), ("TZ", "UTC")].map(|(k, v)| (k.to_owned(), v.to_owned()))).collect(),
        timeout,
    }
}

/// How OpenCode runs a turn: `opencode run ...`, later turns `opencode run ... --continue`, the
/// user message on stdin (`opencode run` quotes a positional message that has spaces), the XDG
/// dirs (the global `opencode.json` from [`opencode_config`]) under the scratch HOME.
pub fn opencode_turns() -> run::PerTurn {
    run::PerTurn {
        prepare: Box::new(|at| {
            std::fs::create_dir_all(at.home.join(".config/opencode"))?;
            Ok(std::fs::write(at.home.join(".config/opencode/opencode.json"), opencode_config().replace("{BASE_URL}", &format!("{}/v1", at.url)))?)
        }),
        command: Box::new(|cmd, at, turn, _| {
            if turn > 0 {
                cmd.arg("--continue");
            }
            cmd.env("PWD", at.work)
                // OpenCode takes the enclosing git work tree for the project (the scratch lies in
                // ours): stop its search at the scratch folder.
                .env("GIT_CEILING_DIRECTORIES", at.dir)
                .env("XDG_CONFIG_HOME", at.home.join(".config"))
                .env("XDG_DATA_HOME", at.home.join(".local/share"))
                .env("XDG_CACHE_HOME", at.home.join(".cache"))
                .env("XDG_STATE_HOME", at.home.join(".local/state"));
        }),
        prompt_on_stdin: true,
        // Its `tool_use` events: the results of a reply it compacted after, which no recorded
        // request holds whole.
        event: Box::new(|event, run| {
            if run::is_compaction_event(event, "part") {
                run.boundaries.push(event.clone());
            } else if event["type"] == "tool_use" {
                run.tools.push(event.clone());
            }
        }),
        ..run::PerTurn::default()
    }
}

/// The model the Gemini CLI runs name (`-m`).
pub const GEMINI_MODEL: &str = "gemini-2.5-pro";
/// `tokenLimit` of that model in 0.61.0 (`core/tokenLimits.js`), the window our side is given.
pub const GEMINI_TOKEN_LIMIT: u64 = 1_048_576;
/// The output limit our side is given for that model (it only sizes the summary calls).
pub const GEMINI_MAX_OUTPUT: u64 = 65_536;
/// The last reported prompt size Gemini CLI compresses at: `DEFAULT_COMPRESSION_TOKEN_THRESHOLD`
/// (0.5, `model.compressionThreshold` unset) of the token limit.
pub const GEMINI_THRESHOLD: u64 = GEMINI_TOKEN_LIMIT / 2;

/// The `~/.gemini/settings.json` of the Gemini CLI runs (`{TELEMETRY}`: the telemetry file).
/// API-key auth (the key and base URL come from the environment); loop detection off (it can
/// end a scripted turn early or ask the model a side question, and has no part in compression);
/// usage statistics off; telemetry to a local file only, for the compression events' sizes.
/// Compression settings are the defaults.
pub fn gemini_config() -> String {
    let config = serde_json::json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "model": {"disableLoopDetection": true},
        "telemetry": {"enabled": true, "target": "local", "outfile": "{TELEMETRY}", "logPrompts": false},
    });
    serde_json::to_string_pretty(&config).expect("static config") + "\n"
}

/// The settings a Gemini CLI run uses, for the report.
pub fn gemini_settings() -> String {
    format!(
        "`gemini --skip-trust --yolo -m {GEMINI_MODEL} -o stream-json --prompt=PROMPT`, later turns `gemini ... --resume latest --prompt=PROMPT`; \
         `~/.gemini/settings.json`: auth `gemini-api-key`, `model.disableLoopDetection`, usage statistics off, telemetry to a local file \
         (its `gemini_cli.chat_compression` events give tokens_before), compression defaults (threshold 0.5 of the {GEMINI_TOKEN_LIMIT}-token \
         limit of {GEMINI_MODEL}); env `GOOGLE_GEMINI_BASE_URL` on the scripted server, `GEMINI_API_KEY`, `GEMINI_CLI_NO_RELAUNCH=true`; \
         scratch `HOME`"
    )
}

/// How the script maps the session for Gemini CLI, for the report.
pub fn gemini_script() -> String {
    format!(
        "a session's `read` calls become `read_file` of a file holding the session's result, every other call (and a failed read) \
         `run_shell_command` printing a prepared file (`cat .compactbench/N.out`, `; exit 1` for errors); each reply reports \
         `promptTokenCount` = the session's own prefix (o200k) plus a per-session overhead that puts the {GEMINI_THRESHOLD}-token \
         threshold near a seeded request (the 5th to the 25th), `candidatesTokenCount` = the reply's own; the run stops at the request \
         after the first compression. Each turn is a new process, which starts from its local estimate of the resumed history, not \
         the last reported size, and compression cuts only at a user message, so it comes inside a later turn's tool loop. \
         `--resume` rebuilds every earlier turn's function responses twice (0.61.0's `convertSessionToClientHistory` takes them \
         from the reply's recorded tool calls and from the recorded user message), so kept results can outnumber calls; tool \
         outputs the CLI masked before are masked in the history too. Both sides get that history; masking itself is not compared"
    )
}

/// Gemini CLI as `--setup` installed it.
pub fn gemini_cli(installs: &Path, harness: &Harness, timeout: Duration) -> Cli {
    Cli {
        program: installs.join(harness.dir).join(harness.bin),
        args: ["--skip-trust", "--yolo", "-m", GEMINI_MODEL, "-o", "stream-json"].map(str::to_owned).into(),
        // No relaunch: the CLI would re-run itself as a child node process to raise its heap.
        env: [("GEMINI_API_KEY", "compactbench-scripted"), ("GEMINI_CLI_NO_RELAUNCH", "true"), ("LANG", "C.UTF-8"), ("TZ", "UTC")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into(),
        timeout,
    }
}

/// How Gemini CLI runs a turn: `gemini ... --prompt=PROMPT`, later turns `gemini ... --resume
/// latest --prompt=PROMPT`, in a process group of its own (killed after it), with
/// `~/.gemini/settings.json` from [`gemini_config`]. Its compression events are read back from
/// the telemetry file (it prints none on stdout), and the file removed (it holds every
/// request's system prompt).
pub fn gemini_turns() -> run::PerTurn {
    let telemetry = |at: &run::Scratch<'_>| at.dir.join("telemetry.log");
    run::PerTurn {
        prepare: Box::new(move |at| {
            std::fs::create_dir_all(at.home.join(".gemini"))?;
            Ok(std::fs::write(at.home.join(".gemini/settings.json"), gemini_config().replace("{TELEMETRY}", &telemetry(at).to_string_lossy()))?)
        }),
        command: Box::new(|cmd, at, turn, prompt| {
            if turn > 0 {
                cmd.args(["--resume", "latest"]);
            }
            // `--prompt=` keeps a message that starts with a dash a value.
            cmd.arg(format!("--prompt={prompt}")).env("GOOGLE_GEMINI_BASE_URL", at.url);
        }),
        leftovers: run::Leftovers::Group,
        after: Box::new(move |at, run| {
            run.boundaries = run::gemini_compressions(&std::fs::read_to_string(telemetry(at)).unwrap_or_default());
            let _ = std::fs::remove_file(telemetry(at));
        }),
        ..run::PerTurn::default()
    }
}

/// The model the Kimi CLI runs name (`default_model`, a model entry of its own).
pub const KIMI_MODEL: &str = "compactbench";
/// `max_context_size` of that model.
pub const KIMI_CONTEXT: u64 = 100_000;
/// The output limit our side is given (Kimi computes its own per request; it only sizes the
/// summary call).
pub const KIMI_MAX_OUTPUT: u64 = 32_000;
/// The count Kimi CLI 1.52.0 compacts at with the `[loop_control]` defaults: the lower of
/// `0.85 × max_context_size` and `max_context_size − reserved_context_size (50,000)`.
pub const KIMI_THRESHOLD: u64 = KIMI_CONTEXT - 50_000;

/// The `~/.kimi/config.toml` of the Kimi CLI runs (`{BASE_URL}`: the scripted server): an
/// OpenAI-compatible provider (`openai_legacy`, Chat Completions) and a model of its own with
/// `max_context_size`; loop control at its defaults; telemetry off.
pub fn kimi_config() -> String {
    format!(
        "default_model = \"{KIMI_MODEL}\"\ntelemetry = false\n\n[models.{KIMI_MODEL}]\nprovider = \"compactbench\"\nmodel = \"{KIMI_MODEL}\"\n\
         max_context_size = {KIMI_CONTEXT}\n\n[providers.compactbench]\ntype = \"openai_legacy\"\nbase_url = \"{{BASE_URL}}\"\n\
         api_key = \"sk-compactbench-scripted\"\n"
    )
}

/// The settings a Kimi CLI run uses, for the report.
pub fn kimi_settings() -> String {
    format!(
        "`python -m kimi_cli.cli --print --output-format stream-json --yolo -w WORK --prompt=PROMPT`, later turns with `--continue` (1.52.0's \
         `kimi` entry point only prints a deprecation notice; `kimi_cli.cli` is its Typer app, the original CLI the package keeps); \
         `~/.kimi/config.toml`: a provider of type `openai_legacy` (Chat Completions) with `base_url` on the scripted server, model \
         `{KIMI_MODEL}` with `max_context_size = {KIMI_CONTEXT}`, `[loop_control]` defaults (compact at the lower of 0.85 of the window \
         and the window − 50,000), telemetry off; env `KIMI_DISABLE_TELEMETRY=1`; scratch `HOME`; Python 3.13"
    )
}

/// How the script maps the session for Kimi CLI, for the report.
pub fn kimi_script() -> String {
    format!(
        "a session's `read` calls become `ReadFile` of a file holding the session's result, every other call (and a failed read) \
         `Shell` printing a prepared file (`cat .compactbench/N.out`, `; exit 1` for errors); each reply reports prompt tokens = the \
         session's own prefix (o200k) plus a per-session overhead that puts the {KIMI_THRESHOLD}-token threshold near a seeded request \
         (the 5th to the 25th), completion tokens = the reply's own; the run stops at the request after the first compaction. Kimi \
         keeps its counter in its context file, so a turn's first request starts from the last reported usage"
    )
}

/// Kimi CLI as `--setup` installed it (its Typer app under the venv's python).
pub fn kimi_cli(installs: &Path, harness: &Harness, timeout: Duration) -> Cli {
    Cli {
        program: installs.join(harness.dir).join(harness.bin),
        args: ["-m", "kimi_cli.cli", "--print", "--output-format", "stream-json", "--yolo"].map(str::to_owned).into(),
        env: [("KIMI_DISABLE_TELEMETRY", "1"), ("LANG", "C.UTF-8"), ("TZ", "UTC")].map(|(k, v)| (k.to_owned(), v.to_owned())).into(),
        timeout,
    }
}

/// `GIT_CEILING_DIRECTORIES` at the scratch folder: it lies in our git work tree, which a CLI
/// would take for the project.
fn git_ceiling(cmd: &mut std::process::Command, at: &run::Scratch<'_>) {
    cmd.env("GIT_CEILING_DIRECTORIES", at.dir);
}

/// How Kimi CLI runs a turn: `python -m kimi_cli.cli ... -w WORK --prompt=PROMPT`, later turns
/// with `--continue`, in a process group of its own (killed after it, with whatever names the
/// scratch folder), with `~/.kimi/config.toml` from [`kimi_config`].
pub fn kimi_turns() -> run::PerTurn {
    run::PerTurn {
        prepare: Box::new(|at| {
            std::fs::create_dir_all(at.home.join(".kimi"))?;
            Ok(std::fs::write(at.home.join(".kimi/config.toml"), kimi_config().replace("{BASE_URL}", &format!("{}/v1", at.url)))?)
        }),
        command: Box::new(|cmd, at, turn, prompt| {
            cmd.arg("-w").arg(at.work);
            if turn > 0 {
                cmd.arg("--continue");
            }
            // `--prompt=` keeps a message that starts with a dash a value.
            cmd.arg(format!("--prompt={prompt}"));
            git_ceiling(cmd, at);
        }),
        leftovers: run::Leftovers::GroupAndScratch,
        ..run::PerTurn::default()
    }
}

/// The model the Cline runs name, under the `openai-compatible` provider.
pub const CLINE_MODEL: &str = "compactbench";
/// `contextWindow` of that model.
pub const CLINE_CONTEXT: u64 = 20_000;
/// `maxTokens` of that model.
pub const CLINE_MAX_TOKENS: u64 = 8_192;
/// The previous request's reported input Cline compacts at (while it is within 4 times its own
/// request estimate): `0.9 × 0.9 × contextWindow`.
pub const CLINE_THRESHOLD: u64 = CLINE_CONTEXT * 81 / 100;

/// The `~/.cline/data/settings/providers.json` of the Cline runs (`{BASE_URL}`: the scripted
/// server), as `cline auth -p openai -k KEY -m MODEL -b URL` writes it, with the model's
/// `contextWindow` and `maxTokens`.
pub fn cline_config() -> String {
    let config = serde_json::json!({
        "version": 1,
        "lastUsedProvider": "openai-compatible",
        "modes": {},
        "providers": {"openai-compatible": {
            "settings": {"provider": "openai-compatible", "apiKey": "sk-compactbench-scripted", "model": CLINE_MODEL, "baseUrl": "{BASE_URL}",
                "contextWindow": CLINE_CONTEXT, "maxTokens": CLINE_MAX_TOKENS},
            "updatedAt": "2026-01-01T00:00:00.000Z",
            "tokenSource": "manual",
        }},
    });
    serde_json::to_string_pretty(&config).expect("static config") + "\n"
}

/// The settings a Cline run uses, for the report.
pub fn cline_settings() -> String {
    format!(
        "`cline --json -c WORK PROMPT` (the first turn only: 3.0.65 resumes a session, `--id`, only interactively); \
         `~/.cline/data/settings/providers.json`: provider `openai-compatible` (Chat Completions) with `baseUrl` on the scripted \
         server, model `{CLINE_MODEL}` with `contextWindow: {CLINE_CONTEXT}`, `maxTokens: {CLINE_MAX_TOKENS}`; compaction defaults \
         (`agentic`); scratch `HOME`, where its session's compaction record gives tokens_before (the summary metadata's `tokensBefore`, \
         the stored messages' estimate; its `--json` notice `auto-compacted` states the request estimate); the hub daemon it starts is \
         killed after the run"
    )
}

/// How the script maps the session for Cline, for the report.
pub fn cline_script() -> String {
    format!(
        "the session's first turn: its `read` calls become `read_files` of a file holding the session's result, every other call (and a \
         failed read) `run_commands` printing a prepared file (`cat .compactbench/N.out`, `; exit 1` for errors); each reply reports \
         prompt tokens = the session's own prefix (o200k) plus a per-session overhead that puts the {CLINE_THRESHOLD}-token threshold \
         near a seeded request (the 5th to the 25th, within the turn), completion tokens = the reply's own; the run stops at the request \
         after the first compaction; our crate gets each tool result whole from the CLI's `--json` tool events (its requests send them \
         cut to 8,000 characters)"
    )
}

/// Cline as `--setup` installed it.
pub fn cline_cli(installs: &Path, harness: &Harness, timeout: Duration) -> Cli {
    Cli {
        program: installs.join(harness.dir).join(harness.bin),
        args: vec!["--json".to_owned()],
        // Sessions in process (`local`), not in the hub daemon the CLI would start: one daemon
        // on a fixed port serves every run on the machine, whatever its HOME.
        env: [("CLINE_SESSION_BACKEND_MODE", "local"), ("LANG", "C.UTF-8"), ("TZ", "UTC")].map(|(k, v)| (k.to_owned(), v.to_owned())).into(),
        timeout,
    }
}

/// How Cline runs its one turn: `cline --json -c WORK PROMPT`, in a process group of its own
/// (killed after it, with the hub daemon it starts with `--cwd` on the work dir), with
/// `~/.cline/data/settings/providers.json` from [`cline_config`]. Its tool events give each
/// tool's whole output; its session's compaction record, the size it compacted at.
pub fn cline_turns() -> run::PerTurn {
    run::PerTurn {
        prepare: Box::new(|at| {
            let settings = at.home.join(".cline/data/settings");
            std::fs::create_dir_all(&settings)?;
            Ok(std::fs::write(settings.join("providers.json"), cline_config().replace("{BASE_URL}", &format!("{}/v1", at.url)))?)
        }),
        command: Box::new(|cmd, at, _, prompt| {
            cmd.arg("-c").arg(at.work).arg(prompt);
            git_ceiling(cmd, at);
        }),
        leftovers: run::Leftovers::GroupAndScratch,
        event: Box::new(|event, run| run.tools.extend(run::cline_tool_result(event))),
        // Its compaction summary's `tokensBefore`, the stored messages' estimate, is the size our
        // crate's checkpoint records. (Its `--json` notice `auto-compacted` and its telemetry
        // event `task.compaction_executed` give another `tokensBefore`: the request estimate,
        // system prompt and tool definitions included, the one its trigger compares.)
        after: Box::new(|at, run| run.boundaries.extend(run::cline_summaries(at.home))),
        ..run::PerTurn::default()
    }
}

/// What differs between the harness CLIs' checks: the tool names their scripts call, the usage
/// they compact at, their settings as the report shows them, and how one session is run and
/// analyzed (`work` is the session's work dir).
struct Kit<'a> {
    tools: Tools,
    threshold: u64,
    /// Turns of the session run at most (a CLI that cannot resume headless runs one).
    turns: usize,
    settings: String,
    script: String,
    run: &'a (dyn Fn(script::Script, &Path, Limits) -> Result<run::Run> + Sync),
    analyze: &'a (dyn Fn(&str, &run::Run, &str) -> analyze::SessionResult + Sync),
}

/// Runs the check of `harness` (by our strategy id: each CLI has its own runner and analysis).
pub fn check(harness: &Harness, options: &Options<'_>, counter: &TokenCounter, progress: &(dyn Fn(&str) + Sync)) -> Result<report::HarnessReport> {
    let (installs, timeout) = (&options.installs, options.timeout);
    match harness.strategy {
        "codex" => {
            let (cli, turns) = (codex_cli(installs, harness, timeout), codex_turns());
            let kit = Kit {
                tools: Tools::Codex,
                threshold: CODEX_AUTO_COMPACT_LIMIT,
                turns: usize::MAX,
                settings: codex_settings(),
                script: codex_script(),
                run: &|script, scratch, limits| run::run_per_turn(&cli, script, scratch, run::Flavor::Codex, &turns, limits),
                analyze: &|id, run, _| analyze::codex_session(id, run),
            };
            check_with(harness, kit, options, counter, progress)
        }
        "gemini-cli" => {
            let (cli, turns) = (gemini_cli(installs, harness, timeout), gemini_turns());
            let kit = Kit {
                tools: Tools::Gemini,
                threshold: GEMINI_THRESHOLD,
                turns: usize::MAX,
                settings: gemini_settings(),
                script: gemini_script(),
                run: &|script, scratch, limits| run::run_per_turn(&cli, script, scratch, run::Flavor::Gemini, &turns, limits),
                analyze: &|id, run, work| analyze::gemini_session(id, run, work),
            };
            check_with(harness, kit, options, counter, progress)
        }
        "kimi-cli" => {
            let (cli, turns) = (kimi_cli(installs, harness, timeout), kimi_turns());
            let kit = Kit {
                tools: Tools::Kimi,
                threshold: KIMI_THRESHOLD,
                turns: usize::MAX,
                settings: kimi_settings(),
                script: kimi_script(),
                run: &|script, scratch, limits| run::run_per_turn(&cli, script, scratch, run::Flavor::Kimi, &turns, limits),
                analyze: &|id, run, _| analyze::chat_session(id, run, &analyze::kimi_chat()),
            };
            check_with(harness, kit, options, counter, progress)
        }
        "cline/sdk" => {
            let (cli, turns) = (cline_cli(installs, harness, timeout), cline_turns());
            let kit = Kit {
                tools: Tools::Cline,
                threshold: CLINE_THRESHOLD,
                turns: 1,
                settings: cline_settings(),
                script: cline_script(),
                run: &|script, scratch, limits| run::run_per_turn(&cli, script, scratch, run::Flavor::Cline, &turns, limits),
                analyze: &|id, run, _| analyze::chat_session(id, run, &analyze::cline_chat()),
            };
            check_with(harness, kit, options, counter, progress)
        }
        "opencode-v1" => {
            let (cli, turns) = (opencode_cli(installs, harness, timeout), opencode_turns());
            let kit = Kit {
                tools: Tools::OpenCode,
                threshold: OPENCODE_THRESHOLD,
                turns: usize::MAX,
                settings: opencode_settings(),
                script: opencode_script(),
                run: &|script, scratch, limits| run::run_per_turn(&cli, script, scratch, run::Flavor::OpenCode, &turns, limits),
                analyze: &|id, run, _| analyze::opencode_session(id, run),
            };
            check_with(harness, kit, options, counter, progress)
        }
        _ => {
            let cli = claude_cli(installs, harness, timeout);
            let kit = Kit {
                tools: Tools::ClaudeCode,
                threshold: CLAUDE_THRESHOLD,
                turns: usize::MAX,
                settings: claude_settings(),
                script: claude_script(),
                run: &|script, scratch, limits| run::run_claude(&cli, script, scratch, limits),
                analyze: &analyze::claude_session,
            };
            check_with(harness, kit, options, counter, progress)
        }
    }
}

/// Runs `harness`'s CLI on the sessions, each with its compaction placed near a seeded request
/// (see [`placement`]), and analyzes each run.
fn check_with(
    harness: &Harness,
    kit: Kit<'_>,
    options: &Options<'_>,
    counter: &TokenCounter,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<report::HarnessReport> {
    let sessions = each_session(options, progress, &|id, session| {
        let scratch = options.scratch.join(harness.dir).join(id.replace('/', "-"));
        let work = scratch.join("work");
        let mut script = script::build(session, kit.tools, &work.to_string_lossy(), counter);
        script.turns.truncate(kit.turns);
        let (target, slack) = placement(id, script.requests());
        script.place(kit.threshold, target, slack);
        let limits = Limits { max_requests: 400, lifetime: options.timeout + Duration::from_secs(5) };
        let run = session_run(options, &scratch, || (kit.run)(script, &scratch, limits))?;
        let result = (kit.analyze)(id, &run, &work.to_string_lossy());
        std::fs::write(scratch.join("result.json"), serde_json::to_string_pretty(&result)? + "\n")?;
        Ok(result)
    })?;
    Ok(report::HarnessReport { harness: harness.name.into(), strategy: harness.strategy.into(), settings: kit.settings, script: kit.script, sessions })
}

/// Options of a black-box run.
pub struct Options<'a> {
    /// Where the install folders are (`target/fidelity`).
    pub installs: PathBuf,
    /// Scenarios sessions are generated from.
    pub scenarios: &'a [Scenario],
    /// Sessions wanted.
    pub sessions: usize,
    /// Scratch folder (per-session HOME and work dirs, recordings).
    pub scratch: PathBuf,
    /// Longest one CLI run may take.
    pub timeout: Duration,
    /// Sessions run at once.
    pub jobs: usize,
    /// Analyse the runs an earlier black-box run recorded in `scratch` instead of running the
    /// CLIs again (after a change of our crate or of the analysis).
    pub recorded: bool,
}

/// Runs `one` on every session of the run, `options.jobs` at a time (each has its own scratch
/// folder, server and CLI process), reporting each result as it comes; the results are in
/// session order.
fn each_session(
    options: &Options<'_>,
    progress: &(dyn Fn(&str) + Sync),
    one: &(dyn Fn(&str, &Session) -> Result<analyze::SessionResult> + Sync),
) -> Result<Vec<analyze::SessionResult>> {
    let all = sessions(options.scenarios, options.sessions);
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<Result<analyze::SessionResult>>>> = Mutex::new((0..all.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..options.jobs.clamp(1, all.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((id, session)) = all.get(i) else { break };
                let result = one(id, session);
                if let Ok(r) = &result {
                    progress(&format!("{id}: {}", r.line()));
                }
                done.lock().expect("results")[i] = Some(result);
            });
        }
    });
    done.into_inner().expect("results").into_iter().map(|r| r.expect("every session ran")).collect()
}

/// The run of one session: recorded earlier (`options.recorded`), or made now by `make`.
fn session_run(options: &Options<'_>, scratch: &Path, make: impl FnOnce() -> Result<run::Run>) -> Result<run::Run> {
    if options.recorded {
        let path = scratch.join("records.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("{}: no recorded run (run --black-box without --recorded first)", path.display()))?;
        return Ok(serde_json::from_str(&text)?);
    }
    make()
}

/// The settings a Claude Code run uses, for the report.
pub fn claude_settings() -> String {
    format!(
        "`claude -p --input-format stream-json --output-format stream-json --verbose --dangerously-skip-permissions --autocompact {CLAUDE_AUTOCOMPACT_WINDOW} --model {CLAUDE_MODEL}`; env `IS_SANDBOX=1 DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 CLAUDE_CODE_MAX_RETRIES=0`, scratch `HOME`, no settings files"
    )
}

/// How the script maps the session for Claude Code, for the report.
pub fn claude_script() -> String {
    format!(
        "a session's `read` calls become `Read` of a file holding the session's result, every other call (and a failed read) `Bash` \
         printing a prepared file (`cat .compactbench/N.out`, `; exit 1` for errors); each reply reports input tokens = the session's \
         own prefix (o200k) plus a per-session overhead that puts the {CLAUDE_THRESHOLD}-token threshold near a seeded request \
         (the 5th to the 25th), output tokens = the reply's own; the run stops at the request after the first compaction"
    )
}

/// Claude Code as `--setup` installed it.
pub fn claude_cli(installs: &Path, harness: &Harness, timeout: Duration) -> Cli {
    let args = [
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--dangerously-skip-permissions",
        "--autocompact",
        &CLAUDE_AUTOCOMPACT_WINDOW.to_string(),
        "--model",
        CLAUDE_MODEL,
    ];
    let env = [
        ("ANTHROPIC_API_KEY", "sk-ant-compactbench-scripted"),
        ("IS_SANDBOX", "1"),
        ("DISABLE_TELEMETRY", "1"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("DISABLE_ERROR_REPORTING", "1"),
        ("CLAUDE_CODE_MAX_RETRIES", "0"),
        ("LANG", "C.UTF-8"),
        ("TZ", "UTC"),
    ];
    Cli {
        program: installs.join(harness.dir).join(harness.bin),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        env: env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        timeout,
    }
}

/// The sessions of a run: seeds 0, 1, ... of every generated scenario in turn (replayed
/// transcripts are left out: their tools are not the generator's), `count` in all.
pub fn sessions(scenarios: &[Scenario], count: usize) -> Vec<(String, Session)> {
    let generated: Vec<&Scenario> = scenarios.iter().filter(|s| s.replay.is_none()).collect();
    if generated.is_empty() {
        return Vec::new();
    }
    (0..count)
        .map(|i| {
            let s = generated[i % generated.len()];
            let seed = (i / generated.len()) as u64;
            (format!("{}/s{seed}", s.name), generate(s, seed))
        })
        .collect()
}

/// The request whose prompt is placed at the threshold: one of the 5th to 25th, seeded by the
/// session id (so the crossing falls at varied places in a turn), and the slack under the
/// threshold (so it falls on that request or one of the next few).
fn placement(id: &str, requests: usize) -> (usize, u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)));
    let last = requests.saturating_sub(3).clamp(1, 25);
    let target = rng.gen_range(last.min(4)..=last);
    (target, rng.gen_range(0..4_000))
}


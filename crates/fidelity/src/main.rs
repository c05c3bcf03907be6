//! `compactbench-fidelity`: install the originals, then check our crates against them.
//! Run through `cargo xtask fidelity [--setup]`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use clap::Parser;
use compactbench_eval::scenario::load_dir;
use compactbench_fidelity::driver::{home, installed};
use compactbench_fidelity::report::write;
use compactbench_fidelity::run::{check, Options};
use compactbench_fidelity::{blackbox, originals, Install, Original, HARNESSES, ORIGINALS};
use compactbench_tokens::{Encoding, TokenCounter};

/// Check strategy crates against their originals' own code (npm and PyPI packages).
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Install the pinned originals into target/fidelity/ (needs the npm and PyPI registries;
    /// nothing else reaches the network).
    #[arg(long)]
    setup: bool,
    /// Only this original (its install folder or our strategy id); repeatable.
    #[arg(long = "only", value_name = "NAME")]
    only: Vec<String>,
    /// Scenario folder cases are cut from.
    #[arg(long, default_value = "scenarios")]
    scenarios: PathBuf,
    /// Where report.md and agreement.json go.
    #[arg(long, default_value = "reports/fidelity")]
    out: PathBuf,
    /// Do not shrink disagreements (faster).
    #[arg(long)]
    no_minimize: bool,
    /// Run the harness CLIs (installed by --setup) against the scripted model server instead
    /// of the library check; writes blackbox.md and blackbox.json into --out (with --only, the
    /// other CLIs' results already there are kept).
    #[arg(long)]
    black_box: bool,
    /// Distinct sessions cases are cut from, per original [default: 200; with --black-box, the
    /// sessions run per harness CLI: 55].
    #[arg(long)]
    sessions: Option<usize>,
    /// Scratch folder of --black-box runs (HOME, work dir and recorded requests per session).
    #[arg(long, default_value = "target/fidelity/black-box")]
    scratch: PathBuf,
    /// Seconds one CLI run may take (--black-box).
    #[arg(long, default_value_t = 240)]
    timeout: u64,
    /// Sessions run at once per harness CLI (--black-box); each has its own scratch folder,
    /// server and CLI process.
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// With --black-box: analyse the requests an earlier run recorded in --scratch instead of
    /// running the CLIs again.
    #[arg(long)]
    recorded: bool,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("workspace root")
}

fn selected(only: &[String]) -> Result<Vec<&'static Original>> {
    if only.is_empty() {
        return Ok(ORIGINALS.iter().collect());
    }
    let harness = |n: &String| HARNESSES.iter().any(|h| h.dir == n || h.strategy == n);
    let mut chosen: Vec<&'static Original> = Vec::new();
    // A strategy id can name both an original and a harness CLI (`gemini-cli`): it selects both.
    for n in only {
        if originals::matching(n).next().is_none() {
            if harness(n) {
                continue;
            }
            bail!("no original named {n:?}; known: {}", names());
        }
        for o in originals::matching(n) {
            if !chosen.iter().any(|c| c.dir == o.dir) {
                chosen.push(o);
            }
        }
    }
    Ok(chosen)
}

fn names() -> String {
    ORIGINALS.iter().map(|o| o.dir).chain(HARNESSES.iter().map(|h| h.dir)).collect::<Vec<_>>().join(", ")
}

fn run_command(mut c: Command) -> Result<()> {
    let shown = format!("{c:?}");
    let status = c.status().with_context(|| format!("cannot run {shown}"))?;
    if !status.success() {
        bail!("{shown} failed ({status})");
    }
    Ok(())
}

fn setup(root: &Path, original: &Original) -> Result<()> {
    // A driver folder may carry a package.json (npm `overrides` for sibling versions the
    // registry lacks); it becomes the install folder's manifest.
    let manifest = Path::new(original.driver).parent().map(|d| root.join(d).join("package.json")).filter(|m| m.exists());
    // Run pip's venv from the driver's folder: a `.python-version` there (kimi-cli needs
    // Python >= 3.12) picks the interpreter under pyenv.
    let python_dir = Path::new(original.driver).parent().map(|d| root.join(d));
    install(&home(root, original), original.name, original.install, manifest.as_deref(), python_dir.as_deref())
}

fn install(home: &Path, name: &str, what: Install, manifest: Option<&Path>, python_dir: Option<&Path>) -> Result<()> {
    std::fs::create_dir_all(home)?;
    eprintln!("setup {name} into {}", home.display());
    match what {
        Install::Npm(packages) => {
            if let Some(manifest) = manifest {
                std::fs::copy(manifest, home.join("package.json"))?;
            }
            let mut c = Command::new("npm");
            c.args(["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"]).arg(home).args(packages);
            run_command(c)?;
        }
        Install::Pip(packages) => {
            if !home.join("venv/bin/python").exists() {
                let mut c = Command::new("python3");
                c.args(["-m", "venv"]).arg(home.join("venv"));
                if let Some(dir) = python_dir {
                    c.current_dir(dir);
                }
                run_command(c)?;
            }
            let mut c = Command::new(home.join("venv/bin/pip"));
            c.args(["install", "--quiet", "--disable-pip-version-check"]).args(packages);
            run_command(c)?;
        }
    }
    std::fs::write(home.join(".installed"), format!("{name}\n"))?;
    Ok(())
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("compactbench-fidelity: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn real_main() -> Result<ExitCode> {
    let cli = Cli::parse();
    let root = root();
    let chosen = selected(&cli.only)?;
    if cli.setup {
        let mut homes = std::collections::BTreeSet::new();
        for o in chosen.iter().filter(|o| homes.insert(home(&root, o))) {
            setup(&root, o)?;
        }
        for h in HARNESSES.iter().filter(|h| cli.only.is_empty() || cli.only.iter().any(|n| n == h.dir || n == h.strategy)) {
            install(&root.join("target/fidelity").join(h.dir), h.name, h.install, None, h.python.map(|p| root.join(p)).as_deref())?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let scenarios = load_dir(&root.join(&cli.scenarios)).map_err(|e| anyhow::anyhow!("{e}"))?;
    let counter = TokenCounter::new(Encoding::O200kBase);
    if cli.black_box {
        return black_box(&root, &cli, &scenarios, &counter);
    }
    let deliberate = compactbench_fidelity::deliberate::load(&root.join("fidelity/deliberate.toml"))?;
    let options = Options { root: &root, scenarios: &scenarios, sessions: cli.sessions.unwrap_or(200), minimize: !cli.no_minimize, deliberate: &deliberate };
    let mut reports = Vec::new();
    let mut skipped = Vec::new();
    for o in chosen {
        if !installed(&root, o) {
            eprintln!("skip {}: not installed (run `cargo xtask fidelity --setup`)", o.name);
            skipped.push(o.name);
            continue;
        }
        let mut r = check(o, &options, &counter, &|line| eprintln!("{line}"))?;
        r.agreement.source = compactbench_fidelity::source::digest(&root, o.strategy);
        eprintln!("{}: {}", o.strategy, r.agreement.short());
        reports.push(r);
    }
    let header = format!(
        "Generated by `cargo xtask fidelity` at commit {} (cases from {} distinct sessions per original, cut from `{}`).{}",
        commit(&root),
        options.sessions,
        cli.scenarios.display(),
        if skipped.is_empty() { String::new() } else { format!(" Not installed, so not checked: {}.", skipped.join(", ")) }
    );
    let real = load_dir(&root.join(&cli.scenarios).join("real")).map_err(|e| anyhow::anyhow!("{e}"))?;
    let recorded = compactbench_fidelity::recorded::replay(&real, &counter);
    let recorded_differ: Vec<String> = recorded.iter().filter(|p| !p.same()).map(|p| format!("{} before step {}", p.scenario, p.step)).collect();
    eprintln!("recorded compactions: {} of {} agree", recorded.len() - recorded_differ.len(), recorded.len());
    let out = root.join(&cli.out);
    // A black-box run (`--black-box`) leaves its results beside the report; they are shown with
    // the reviewed list as it is now.
    let black_box = match blackbox::report::read_json(&out)? {
        Some(runs) => blackbox::report::section(&runs, &blackbox::report::load_reviewed(&root)?),
        None => String::new(),
    };
    write(&out, &reports, &recorded, &deliberate, &header, &black_box)?;
    eprintln!("wrote {}", out.join("report.md").display());
    let unreviewed: Vec<String> =
        reports.iter().filter(|r| r.agreement.unreviewed > 0).map(|r| format!("{} ({} cases)", r.agreement.strategy, r.agreement.unreviewed)).collect();
    if !unreviewed.is_empty() {
        eprintln!("compactbench-fidelity: disagreements not in fidelity/deliberate.toml: {}", unreviewed.join(", "));
    }
    if !recorded_differ.is_empty() {
        eprintln!("compactbench-fidelity: recorded compactions we do not reproduce: {}", recorded_differ.join(", "));
    }
    Ok(if unreviewed.is_empty() && recorded_differ.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn black_box(root: &Path, cli: &Cli, scenarios: &[compactbench_eval::scenario::Scenario], counter: &TokenCounter) -> Result<ExitCode> {
    let installs = root.join("target/fidelity");
    let options = blackbox::Options {
        installs: installs.clone(),
        scenarios,
        sessions: cli.sessions.unwrap_or(55),
        scratch: root.join(&cli.scratch),
        timeout: std::time::Duration::from_secs(cli.timeout),
        jobs: cli.jobs,
        recorded: cli.recorded,
    };
    let out = root.join(&cli.out);
    // A run of some CLIs (`--only`) replaces their results and keeps the others' as --out has them.
    let mut all = blackbox::report::read_json(&out)?.unwrap_or_default();
    let mut ran = Vec::new();
    for h in HARNESSES.iter().filter(|h| cli.only.is_empty() || cli.only.iter().any(|n| n == h.dir || n == h.strategy)) {
        if !cli.recorded && !installs.join(h.dir).join(".installed").exists() {
            eprintln!("skip {}: not installed (run `cargo xtask fidelity --setup`)", h.name);
            continue;
        }
        let report = blackbox::check(h, &options, counter, &|line| eprintln!("{line}"))?;
        for part in blackbox::analyze::PARTS {
            let (agree, n) = report.count(part);
            eprintln!("{}: {part} {agree}/{n}", h.strategy);
        }
        ran.push(report.strategy.clone());
        blackbox::report::replace(&mut all, report);
    }
    let reviewed = blackbox::report::load_reviewed(root)?;
    blackbox::report::write_json(&out, &all)?;
    std::fs::write(out.join("blackbox.md"), blackbox::report::section(&all, &reviewed))?;
    eprintln!("wrote {} and blackbox.md (report.md shows them after the next `cargo xtask fidelity`)", out.join("blackbox.json").display());
    // The exit status speaks for the CLIs this run ran.
    let unreviewed: Vec<String> = all.iter().filter(|r| ran.contains(&r.strategy) && r.unreviewed(&reviewed) > 0).map(|r| format!("{} ({} sessions)", r.strategy, r.unreviewed(&reviewed))).collect();
    if unreviewed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("compactbench-fidelity: black-box differences not in {}: {}", blackbox::report::REVIEWED, unreviewed.join(", "));
        Ok(ExitCode::FAILURE)
    }
}

/// The commit the report is made at (`git describe`-like: short hash, `-dirty` when the work
/// tree has changes), or `unknown` without git.
fn commit(root: &Path) -> String {
    let git = |args: &[&str]| Command::new("git").arg("-C").arg(root).args(args).output().ok().filter(|o| o.status.success());
    let Some(head) = git(&["rev-parse", "--short=12", "HEAD"]) else { return "unknown".into() };
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|o| !o.stdout.is_empty());
    format!("{}{}", String::from_utf8_lossy(&head.stdout).trim(), if dirty { "-dirty" } else { "" })
}

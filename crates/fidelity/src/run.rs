//! Checking one original: build cases, ask both sides, shrink disagreements.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result};
use compactbench_core::Strategy;
use compactbench_eval::scenario::Scenario;
use compactbench_tokens::TokenCounter;

use crate::cases::{build, Plan};
use crate::classes::SETTINGS_CLASS;
use crate::compare::{compare, Verdict};
use crate::deliberate::{covering, key, Difference, PARTS};
use crate::driver::Driver;
use crate::minimize::minimize;
use crate::report::{render_log, Agreement, Disagreement, OriginalReport};
use crate::{ours, Answer, Case, Original};

/// How many disagreements of each part (trigger, selection, tokens before) are shrunk and
/// shown.
const SHOWN_PER_KIND: usize = 3;

/// Options of one check.
pub struct Options<'a> {
    /// The workspace root (drivers live in `fidelity/`, installs in `target/fidelity/`).
    pub root: &'a Path,
    /// Scenarios cases are cut from.
    pub scenarios: &'a [Scenario],
    /// Distinct sessions wanted.
    pub sessions: usize,
    /// Shrink disagreements.
    pub minimize: bool,
    /// The reviewed list of deliberate differences.
    pub deliberate: &'a [Difference],
}

/// Sessions asked with each non-default setting of an original.
const SESSIONS_PER_SETTING: usize = 40;

/// Our strategy for each setting of an original: `defaults`, then one configured per
/// [`Original::settings`] entry, with the settings its driver gets (parsed once).
struct Strategies<'a> {
    defaults: &'a dyn Strategy,
    configured: Vec<(Box<dyn Strategy>, serde_json::Map<String, serde_json::Value>)>,
}

impl<'a> Strategies<'a> {
    fn new(original: &Original, defaults: &'a dyn Strategy) -> Result<Strategies<'a>> {
        let configured = original
            .settings
            .iter()
            .map(|s| Ok(((s.strategy)(), serde_json::from_str(s.driver).with_context(|| format!("settings of {}", original.name))?)))
            .collect::<Result<_>>()?;
        Ok(Strategies { defaults, configured })
    }

    fn of(&self, case: &Case) -> &dyn Strategy {
        case.setting.map_or(self.defaults, |k| self.configured[k].0.as_ref())
    }
}

/// Our answer for a case, with what `original` compares of it.
fn our_answer(original: &Original, strategy: &dyn Strategy, case: &Case) -> Answer {
    let mut ours = ours::answer(strategy, case, original.moment, original.rewrites, original.rewrites_apart);
    if original.in_view {
        ours.kept = Some(ours::view_kept(strategy, &case.log));
        ours.rewritten = Some(ours::view_rewrites(strategy, &case.log));
    }
    // An original without an estimate of its own (`Original::tokens`) answers none to compare.
    if !original.tokens {
        ours.tokens_before = None;
    }
    ours
}

/// Both answers for a case, or why the original could not answer.
fn ask(driver: &mut Driver, original: &Original, strategies: &Strategies<'_>, case: &Case) -> Result<(Answer, Result<Answer, String>)> {
    let ours = our_answer(original, strategies.of(case), case);
    let mut export = match (original.export)(case) {
        Ok(e) => e,
        Err(why) => return Ok((ours, Err(format!("not exported: {why}")))),
    };
    if let Some(k) = case.setting {
        let setting = strategies.configured[k].1.clone();
        export.settings.as_object_mut().context("an exporter's settings are an object")?.extend(setting);
    }
    let theirs = driver.ask(case, &export)?.to_answer(&export, case).map_err(|e| format!("original threw: {e}"));
    Ok((ours, theirs))
}

/// Runs the check of `original` against the registered strategy it names and returns its report.
pub fn check(original: &Original, options: &Options<'_>, counter: &TokenCounter, progress: &dyn Fn(&str)) -> Result<OriginalReport> {
    let strategy = compactbench_registry::find(original.strategy).with_context(|| format!("no strategy {}", original.strategy))?;
    check_strategy(original, strategy.as_ref(), options, counter, progress)
}

/// Runs the check of `original` against `strategy` (the registered one, or a changed copy to
/// show that the check can fail) and returns its report.
pub fn check_strategy(
    original: &Original,
    strategy: &dyn Strategy,
    options: &Options<'_>,
    counter: &TokenCounter,
    progress: &dyn Fn(&str),
) -> Result<OriginalReport> {
    let plan = Plan { scenarios: options.scenarios, sessions: options.sessions, moment: original.moment, with_history: original.history, failed_replies: original.failed_replies, first_seed: 0 };
    let mut cases = build(strategy, &plan, counter);
    let strategies = Strategies::new(original, strategy)?;
    for (k, (configured, _)) in strategies.configured.iter().enumerate() {
        let plan = Plan { sessions: SESSIONS_PER_SETTING.min(options.sessions), first_seed: 1_000 * (k as u64 + 1), ..plan };
        cases.extend(build(configured.as_ref(), &plan, counter).into_iter().map(|mut c| {
            c.setting = Some(k);
            c.classes.push(SETTINGS_CLASS);
            c
        }));
    }
    let sessions: BTreeSet<&str> = cases.iter().map(|c| c.session.as_str()).collect();
    progress(&format!("{}: {} cases from {} sessions", original.name, cases.len(), sessions.len()));
    let mut driver = Driver::start(options.root, original)?;
    let mut agreement =
        Agreement {
            strategy: original.strategy.into(),
            original: original.name.into(),
            driver_args: original.args.join(" "),
            sessions: sessions.len() as u32,
            ..Agreement::default()
        };
    let mut problems: BTreeMap<String, u32> = BTreeMap::new();
    // Disagreeing cases, with whether the reviewed list covers them.
    let mut failing: Vec<(Case, Verdict, bool)> = Vec::new();
    for case in &cases {
        agreement.cases += 1;
        let (ours, theirs) = ask(&mut driver, original, &strategies, case)?;
        let theirs = match theirs {
            Ok(t) => t,
            Err(why) => {
                if why.starts_with("not exported") {
                    agreement.not_exported += 1;
                } else {
                    agreement.errors += 1;
                }
                *problems.entry(why).or_default() += 1;
                continue;
            }
        };
        let v = compare(&ours, &theirs);
        for class in &case.classes {
            let count = agreement.classes.entry((*class).to_owned()).or_default();
            count.cases += 1;
            count.disagree += u32::from(!v.agrees());
        }
        agreement.trigger_agree += u32::from(v.trigger);
        if let Some(s) = v.selection {
            agreement.selection_compared += 1;
            agreement.selection_agree += u32::from(s);
        }
        if let Some(t) = v.tokens_before {
            agreement.tokens_compared += 1;
            agreement.tokens_agree += u32::from(t);
        }
        if let Some(r) = v.rewrites {
            agreement.rewrites_compared += 1;
            agreement.rewrites_agree += u32::from(r);
            let some = |a: &Answer| u32::from(a.rewritten.as_ref().is_some_and(|r| !r.is_empty()));
            agreement.rewrites_ours += some(&ours);
            agreement.rewrites_theirs += some(&theirs);
            if theirs.rewritten_text.is_some() {
                agreement.rewrite_texts_compared += 1;
                agreement.rewrite_entries_agree += u32::from(ours.rewritten.as_deref().unwrap_or_default() == theirs.rewritten.as_deref().unwrap_or_default());
            }
        }
        if !v.agrees() {
            let reviews = reviews(options.deliberate, original.strategy, &ours, &theirs, &v);
            for (part, covered) in &reviews {
                *agreement.differing.entry((*part).to_owned()).or_default() += 1;
                if let Some(d) = covered {
                    *agreement.covered.entry(key(options.deliberate, d)).or_default() += 1;
                }
            }
            let reviewed = reviews.iter().all(|(_, d)| d.is_some());
            if reviewed {
                agreement.reviewed += 1;
            } else {
                agreement.unreviewed += 1;
            }
            failing.push((case.clone(), v, reviewed));
        }
    }
    let mut disagreements = Vec::new();
    for part in PARTS {
        // Those the list does not cover first: they are what a reader must act on.
        let mut picked: Vec<_> = failing.iter().filter(|(_, v, _)| v.disagreeing().first() == Some(&part)).collect();
        picked.sort_by_key(|(_, _, reviewed)| *reviewed);
        for (case, verdict, reviewed) in picked.into_iter().take(SHOWN_PER_KIND) {
            let same_kind = |v: &Verdict| v.disagreeing().contains(&part);
            // An unreviewed case shrinks to one that is still unreviewed.
            let same_review = |o: &Answer, t: &Answer, v: &Verdict| *reviewed || reviews(options.deliberate, original.strategy, o, t, v).iter().any(|(_, d)| d.is_none());
            let small = if options.minimize {
                minimize(case, |c| {
                    matches!(ask(&mut driver, original, &strategies, c), Ok((o, Ok(t))) if { let v = compare(&o, &t); same_kind(&v) && same_review(&o, &t, &v) })
                })
                .0
            } else {
                case.clone()
            };
            let (ours, theirs) = ask(&mut driver, original, &strategies, &small)?;
            let Ok(theirs) = theirs else { continue };
            debug_assert!(same_kind(verdict));
            disagreements.push(Disagreement {
                case: case.id.clone(),
                part,
                minimized: small.id.clone(),
                session: render_log(&small.log),
                window: small.model.window,
                ours,
                theirs,
            });
        }
    }
    Ok(OriginalReport { agreement, problems: problems.into_iter().collect(), disagreements })
}

/// Each disagreeing part of one case, with the reviewed difference covering it, if any.
fn reviews<'a>(list: &'a [Difference], strategy: &str, ours: &Answer, theirs: &Answer, v: &Verdict) -> Vec<(&'static str, Option<&'a Difference>)> {
    v.disagreeing().into_iter().map(|part| (part, covering(list, strategy, part, Some((ours, theirs))))).collect()
}

#[cfg(test)]
mod tests {
    use compactbench_core::{EntryId, Log, Message, ModelProfile, Shape};

    use super::*;

    /// 122 events, one per message: system prompt, user message, 60 calls with their results.
    fn long_case() -> Case {
        let mut log = Log::new();
        log.push_message(Message::system("be brief"));
        log.push_message(Message::user("ask"));
        for n in 0..60 {
            let id = format!("c{n}");
            log.push_message(Message::tool_call(&id, "read", serde_json::json!({"path": format!("{n}.rs")})));
            log.push_message(Message::tool_result(&id, "read", format!("contents of {n}.rs"), false));
        }
        let model = ModelProfile { name: "m".into(), window: 100_000, max_output: 8_192, provider: Shape::Anthropic, pricing: Default::default() };
        Case::new("t", log, model)
    }

    fn ours_for(strategy: &str) -> Answer {
        let original = crate::ORIGINALS.iter().find(|o| o.strategy == strategy).unwrap();
        our_answer(original, compactbench_registry::find(strategy).unwrap().as_ref(), &long_case())
    }

    /// The observation masking row compares the `<MASKED>` stand-ins of our view and what it
    /// sends, which no checkpoint records.
    #[test]
    fn the_masking_row_compares_the_stand_ins_of_our_view() {
        let ours = ours_for("openhands/observation-masking");
        // The results at 3, 5, .., 21 are outside the newest 100 events; their calls are never
        // sent (a call goes only with its results).
        let masked: Vec<EntryId> = (3..22).step_by(2).map(EntryId).collect();
        assert_eq!(ours.rewritten.as_ref(), Some(&masked));
        let sent: Vec<EntryId> = [0, 1].into_iter().chain((3..22).step_by(2)).chain(22..122).map(EntryId).collect();
        assert_eq!(ours.kept, Some(sent));
    }

    /// The recent events row compares what our view keeps, which no checkpoint records.
    #[test]
    fn the_recent_events_row_compares_what_our_view_keeps() {
        let ours = ours_for("openhands/recent-events");
        // The system prompt and the newest 99 events (23..122); the user message is put back,
        // the result at 23 goes without its call.
        let sent: Vec<EntryId> = [0, 1].into_iter().chain(24..122).map(EntryId).collect();
        assert_eq!(ours.kept, Some(sent));
    }
}

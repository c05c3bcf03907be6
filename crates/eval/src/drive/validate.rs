//! Validity of each request in every provider shape, with the first violation of each rule
//! kept as an example.

use std::collections::BTreeMap;

use compactbench_core::request::{lower, validate, Rule, Violation};
use compactbench_core::{Message, Shape, View};

use crate::results::ViolationExample;
use crate::revalidate::Revalidator;

/// Violations of a run so far.
#[derive(Default)]
pub(super) struct Validity {
    /// Counts per shape and rule.
    pub(super) violations: BTreeMap<&'static str, BTreeMap<&'static str, u32>>,
    /// The first violation of each (shape, rule), as it happened.
    pub(super) examples: Vec<ViolationExample>,
    /// Validity of this run's requests, kept from one request to the next.
    revalidator: Revalidator,
}

impl Validity {
    /// Validates request `request` (`view`, whose first `shared` messages equal the previous
    /// request's) in every shape and returns its violations per shape.
    pub(super) fn check(&mut self, request: u32, view: &View, shared: usize) -> [u32; 4] {
        let mut per_shape = [0u32; 4];
        for ((i, shape), counts) in Shape::ALL.into_iter().enumerate().zip(self.revalidator.update(view, shared)) {
            per_shape[i] = counts.iter().sum();
            let seen = self.violations.get(shape.as_str());
            let first = Rule::ALL.iter().zip(counts).any(|(rule, n)| n > 0 && seen.and_then(|s| s.get(rule.as_str())).is_none());
            if first {
                // A rule broken for the first time in this run: its example is the first
                // violation in validation order, so validate this request in full.
                for v in validate(&lower(view, shape)) {
                    let count = self.violations.entry(shape.as_str()).or_default().entry(v.rule.as_str()).or_default();
                    if *count == 0 {
                        self.examples.push(example(request, shape, &v, view));
                    }
                    *count += 1;
                }
            } else {
                for (rule, n) in Rule::ALL.iter().zip(counts).filter(|(_, n)| *n > 0) {
                    *self.violations.entry(shape.as_str()).or_default().entry(rule.as_str()).or_default() += n;
                }
            }
        }
        per_shape
    }
}

/// The first violation of a rule in a shape: where, what, and which log messages are involved
/// (those whose tool calls or results the violation names; the view message at the violation's
/// position where it names none).
fn example(request: u32, shape: Shape, v: &Violation, view: &View) -> ViolationExample {
    let named = |m: &Message| m.tool_call_ids().chain(m.tool_result_ids()).any(|id| v.detail.contains(id));
    let mut entries: Vec<u32> =
        view.messages.iter().filter(|vm| named(&vm.message)).filter_map(|vm| vm.origin.entry()).map(|e| e.0).collect();
    if entries.is_empty() {
        entries.extend(view.messages.get(v.at).and_then(|vm| vm.origin.entry()).map(|e| e.0));
    }
    ViolationExample { shape: shape.as_str(), rule: v.rule.as_str(), request, detail: v.detail.clone(), entries }
}

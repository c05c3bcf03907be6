//! Fuzz target for the provider validators: `request::lower` and `request::validate` on
//! arbitrary views and on structure-aware mutations of well-formed ones.
//!
//! Properties: lowering and validating never panic, for every shape; every violation and
//! every wire message points inside the request and the view; a well-formed conversation
//! (before mutation) breaks no rule of any shape. (The runner's revalidation of successive
//! views is eval's `fuzz_revalidate`.) Cases: 256 by default,
//! `COMPACTBENCH_FUZZ_CASES` in the long mode (`cargo xtask fuzz`).

use compactbench_core::request::{lower, validate, Block, Request};
use compactbench_core::{Part, Shape, View};
use proptest::prelude::*;

#[path = "../../../tests/support/fuzz.rs"]
mod support;
#[path = "../../../tests/support/views.rs"]
mod views;

use views::{apply, arbitrary_view, mutation, step, well_formed};

/// Lowers and validates `view` for every shape and checks what must hold of any request.
fn check_any(view: &View) -> Vec<(Shape, usize)> {
    let mut found = Vec::new();
    for shape in Shape::ALL {
        let request: Request<'_> = lower(view, shape);
        assert_eq!(request.shape, shape);
        if shape == Shape::OpenaiChat {
            assert!(request.system.is_empty(), "chat sends system inline");
        }
        let mut last = 0;
        for w in &request.messages {
            assert!(!w.from_view.is_empty(), "{shape:?}: a wire message from no view message");
            for &i in &w.from_view {
                assert!(i < view.len(), "{shape:?}: from_view {i} outside a view of {}", view.len());
                assert!(i >= last, "{shape:?}: wire messages out of view order");
                last = i;
            }
        }
        for b in request.system.iter().chain(request.messages.iter().flat_map(|w| &w.blocks)) {
            // Blocks borrow from the view: every text is one of the view's strings.
            if let Block::Text { text } | Block::Reasoning { text } = b {
                assert!(view.iter().any(|m| m.parts.iter().any(|p| matches!(p, Part::Text { text: t } | Part::Reasoning { text: t } if t == text))));
            }
        }
        let violations = validate(&request);
        for v in &violations {
            assert!(v.at < request.messages.len().max(1), "{shape:?}: violation at {} of {} messages", v.at, request.messages.len());
            assert!(!v.detail.is_empty());
        }
        // Deterministic.
        assert_eq!(violations, validate(&lower(view, shape)));
        found.push((shape, violations.len()));
    }
    found
}

#[test]
fn fuzz_request_validators_on_arbitrary_views() {
    support::fuzz("request-validators/arbitrary", 256, arbitrary_view(), |view| {
        check_any(&view);
    });
}

#[test]
fn fuzz_request_validators_on_mutated_conversations() {
    let input = (any::<bool>(), prop::collection::vec(step(), 0..12), prop::collection::vec(mutation(), 0..6));
    support::fuzz("request-validators/mutated", 256, input, |(system, steps, mutations)| {
        let mut view = well_formed(system, &steps);
        for (shape, n) in check_any(&view) {
            assert_eq!(n, 0, "{shape:?}: a well-formed conversation breaks a rule: {:?}", validate(&lower(&view, shape)));
        }
        for m in &mutations {
            apply(&mut view, m);
        }
        check_any(&view);
    });
}

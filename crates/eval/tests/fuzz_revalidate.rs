//! Fuzz target for the runner's revalidation (`revalidate::Revalidator`): on a sequence of
//! edited views of a well-formed conversation, revalidating from the unchanged prefix counts
//! what core's validators count on each view from scratch. Cases: 256 by default,
//! `COMPACTBENCH_FUZZ_CASES` in the long mode (`cargo xtask fuzz`).

use compactbench_core::request::{lower, validate};
use compactbench_core::{EntryId, Message, Origin, Shape, View, ViewMessage};
use compactbench_eval::revalidate::{count, Revalidator};
use proptest::prelude::*;

#[path = "../../../tests/support/fuzz.rs"]
mod support;
#[path = "../../../tests/support/views.rs"]
mod views;

use views::{apply, mutation, part, role, step, well_formed};

#[test]
fn fuzz_revalidation_counts_what_validation_counts() {
    let edit = (mutation(), prop::collection::vec((role(), prop::collection::vec(part(), 0..4)), 0..3), any::<prop::sample::Index>());
    let input = (any::<bool>(), prop::collection::vec(step(), 0..12), prop::collection::vec(edit, 1..10));
    support::fuzz("request-validators/revalidate", 256, input, |(system, steps, edits)| {
        let mut view = well_formed(system, &steps);
        let mut revalidator = Revalidator::new();
        let expected = |view: &View| Shape::ALL.map(|shape| count(&validate(&lower(view, shape))));
        assert_eq!(revalidator.update(&view, 0), expected(&view));
        for (mutation, appended, slack) in edits {
            let before = view.clone();
            apply(&mut view, &mutation);
            for (role, parts) in appended {
                let origin = Origin::Entry(EntryId(view.len() as u32 + 1000));
                view.messages.push(ViewMessage { origin, message: Message::new(role, parts) });
            }
            // Any count of unchanged messages up to the true one is a correct thing to say.
            let same = view.messages.iter().zip(&before.messages).take_while(|(a, b)| a.message == b.message).count();
            let unchanged = slack.index(same + 1);
            assert_eq!(revalidator.update(&view, unchanged), expected(&view), "after {mutation:?}, {unchanged} of {same} unchanged");
        }
    });
}

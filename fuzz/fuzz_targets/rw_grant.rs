//! Fuzz the read-write lock's grant policy (`redis_lock::logic::rwlock::policy`) through the
//! shared grant rules, on one lock's line of readers and writers (a few owners, deadlines), from
//! a free lock or one held by readers. Checked for every round:
//! - the line is served in order and the round stops at the first head it leaves (no
//!   overtaking); only heads whose wait ran out are timed out;
//! - never a writer beside anyone else: a write grant goes to the round's first grantee and every
//!   grant after it is that owner's (its re-entries, its own reads); a lock held by readers
//!   grants no writer;
//! - readers are batched: a round that starts with a reader grants every reader behind it up to
//!   the first writer (or the end of the line);
//! - a round that stops early stops at a head the grants exclude.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use redis_lock::logic::command_args::Access;
use redis_lock::logic::rwlock::policy::{Open, Request, RwPolicy};
use redis_lock::logic::wait::policy::{self as grant, Head, Step};

#[derive(Arbitrary, Debug)]
struct Entry {
    owner: u8,
    write: bool,
    deadline: Option<i8>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    now: i64,
    reading: bool,
    line: Vec<Entry>,
}

const R: Request = Request { lease_ms: 1, fence: false, access: Access::Read };
const W: Request = Request { lease_ms: 1, fence: false, access: Access::Write };

fuzz_target!(|input: Input| {
    let now = input.now;
    let owners: Vec<[u8; 1]> = input.line.iter().map(|e| [e.owner % 3]).collect();
    let line: Vec<Head<Request>> = input
        .line
        .iter()
        .zip(&owners)
        .map(|(e, o)| Head {
            owner: o,
            req: if e.write { &W } else { &R },
            turn_until: None,
            deadline: e.deadline.map(|d| now.saturating_add(i64::from(d))),
        })
        .collect();
    let view = if input.reading { Open::Reading } else { Open::Free };
    let (_, steps) = grant::round::<RwPolicy>(view, &line, None, now);
    assert!(steps.len() <= line.len());
    // The owner and access of every grant so far.
    let mut grants: Vec<(&[u8], Access)> = Vec::new();
    fn writer<'a>(g: &[(&'a [u8], Access)]) -> Option<&'a [u8]> {
        g.iter().find(|(_, a)| *a == Access::Write).map(|(o, _)| *o)
    }
    let admissible = |g: &[(&[u8], Access)], owner: &[u8], access: Access| match writer(g) {
        Some(w) => w == owner,
        None if access == Access::Write => g.is_empty() && !input.reading,
        None => true,
    };
    for (step, head) in steps.iter().zip(&line) {
        match *step {
            Step::Grant(a) => {
                assert_eq!(a, head.req.access, "a grant is what the waiter asked for");
                assert!(head.deadline.is_none_or(|d| d > now));
                assert!(admissible(&grants, head.owner, a), "{grants:?} then {a:?} for {:?}", head.owner);
                grants.push((head.owner, a));
            }
            Step::TimeOut => {
                assert!(head.deadline.is_some_and(|d| d <= now));
                assert!(
                    admissible(&grants, head.owner, head.req.access),
                    "a head the grants exclude stops the round"
                );
            }
            other => panic!("no turns on this line: {other:?}"),
        }
    }
    if let Some(w) = writer(&grants) {
        assert!(grants.iter().all(|(o, _)| *o == w), "never a writer beside another owner");
        assert!(!input.reading);
    }
    // Where the round stopped: the end of the line, or a head the grants exclude.
    if let Some(head) = line.get(steps.len()) {
        assert!(!admissible(&grants, head.owner, head.req.access), "stopped at {head:?} after {grants:?}");
    }
});

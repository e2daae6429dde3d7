//! Fuzz the semaphore's pure side (`redis_lock::logic::semaphore`): the LOCK.SEM* argument
//! parsers on arbitrary argv, the ids a waiter keeps, and the grant policy through the shared
//! grant rules. Checked:
//! - parsing never panics; an accepted acquire names exactly `numids` ids, none empty or
//!   repeated, and a lease and timeout that are not negative;
//! - `decode_ids(encode_ids(ids)) == ids`, and decoding arbitrary bytes never panics;
//! - a round serves the line in order, grants each head exactly the permits it asked for, never
//!   more than were available in all, and stops at the first head that needs more than is left
//!   (nobody behind it is served); `lease_end` and `busy_reply` never overflow.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use redis_lock::logic::semaphore::policy::{decode_ids, encode_ids, Request, SemPolicy};
use redis_lock::logic::semaphore::{args, names, state};
use redis_lock::logic::wait::policy::{self as grant, Head, Step};

#[derive(Arbitrary, Debug)]
struct Input {
    argv: Vec<Vec<u8>>,
    raw: Vec<u8>,
    available: i64,
    now: i64,
    lease: i64,
    line: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let argv: Vec<&[u8]> = input.argv.iter().map(Vec::as_slice).collect();
    let _ = args::set(&argv);
    let _ = args::release(&argv);
    let _ = args::renew(&argv);
    if let Ok(a) = args::acquire(&argv) {
        assert!(a.lease_ms >= 0 && a.wait_ms.is_none_or(|w| w >= 0));
        assert!(!a.ids.is_empty() && a.ids.iter().all(|id| !id.is_empty()));
        for (i, x) in a.ids.iter().enumerate() {
            assert!(a.ids.iter().skip(i + 1).all(|y| x != y), "repeated id accepted");
        }
        assert_eq!(decode_ids(&encode_ids(a.ids.iter().copied())), a.ids.to_vec());
    }
    let _ = decode_ids(&input.raw);
    let _ = names::owners_of_zset(&input.raw);
    if let Ok(end) = state::lease_end(input.now, input.lease) {
        assert!(end <= names::NO_LEASE);
    }
    let _ = state::busy_reply(Some(input.now), input.lease);

    let reqs: Vec<Request> = input.line.iter().map(|n| Request { n: i64::from(n % 6), lease_ms: 0 }).collect();
    let line: Vec<Head<Request>> =
        reqs.iter().map(|r| Head { owner: b"ids", req: r, turn_until: None, deadline: None }).collect();
    let avail = input.available % 20;
    let (_, steps) = grant::round::<SemPolicy>(avail, &line, None, 0);
    let mut left = avail;
    for (i, step) in steps.iter().enumerate() {
        let Step::Grant(n) = step else { panic!("only grants without deadlines: {step:?}") };
        assert_eq!(*n, reqs[i].n, "a head gets exactly what it asked");
        assert!(*n >= 1 && *n <= left);
        left -= n;
    }
    if let Some(next) = reqs.get(steps.len()) {
        assert!(next.n > left || next.n < 1, "the round stopped at a head it could serve");
    }
});

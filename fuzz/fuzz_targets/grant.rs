//! Fuzz the grant rules (`redis_lock::logic::wait::policy`) with the reentrant lock's policy
//! (`redis_lock::logic::lock::policy`) on one lock's line: random waiters
//! (blocked clients with or without a deadline, script owners' turns), a random reservation and
//! clock. Checked for every round:
//! - a running reservation grants nobody; otherwise the line is served in order, one step per
//!   head, and the round stops at the first head it leaves (FIFO, no overtaking);
//! - only heads whose wait ran out are timed out, only lapsed turns dropped, a live turn at the
//!   head reserves the lock for `TURN_MS` and ends the round, and nothing is granted before it;
//! - all grants of a round go to one owner, with counts 1, 2, 3, ...; they are a run of
//!   same-owner clients, ended by another owner, a turn or the end of the line;
//! - `turn` lets a script owner in only when no other owner's reservation runs, and the wait it
//!   reports is within the reservation.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use redis_lock::logic::lock::policy::{LockPolicy, Request};
use redis_lock::logic::wait::policy::{self as grant, Gate, Head, Step, Turn, TURN_MS};

#[derive(Arbitrary, Debug)]
struct Entry {
    owner: u8,
    /// A script owner's turn, valid until now + offset.
    turn: Option<i8>,
    /// A blocked client's deadline, now + offset.
    deadline: Option<i8>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    now: i64,
    line: Vec<Entry>,
    reservation: Option<(u8, i8)>,
    asker: u8,
}

const REQ: Request = Request { lease_ms: 1, fence: false };

fuzz_target!(|input: Input| {
    let now = input.now;
    let owners: Vec<[u8; 1]> = input.line.iter().map(|e| [e.owner % 3]).collect();
    let line: Vec<Head<Request>> = input
        .line
        .iter()
        .zip(&owners)
        .map(|(e, o)| Head {
            owner: o,
            req: &REQ,
            turn_until: e.turn.map(|t| now.saturating_add(i64::from(t))),
            deadline: if e.turn.is_some() {
                None
            } else {
                e.deadline.map(|d| now.saturating_add(i64::from(d)))
            },
        })
        .collect();
    let reservation_until = input.reservation.map(|(_, t)| now.saturating_add(i64::from(t)));
    let (gate, steps) = grant::round::<LockPolicy>((), &line, reservation_until, now);

    assert_eq!(gate, grant::gate(reservation_until, now));
    if gate == Gate::Reserved {
        assert!(steps.is_empty());
    }
    assert!(steps.len() <= line.len());
    let mut granted: Option<&[u8]> = None;
    let mut count = 0;
    for (i, (step, head)) in steps.iter().zip(&line).enumerate() {
        match *step {
            Step::Stop => panic!("a round never records Stop"),
            Step::DropTurn => {
                assert!(head.turn_until.is_some_and(|u| u < now));
                assert!(granted.is_none(), "a turn behind a grant stops the grants");
            }
            Step::TimeOut => {
                assert!(head.turn_until.is_none() && head.deadline.is_some_and(|d| d <= now));
                if let Some(o) = granted {
                    assert_eq!(o, head.owner, "only same-owner waiters follow a grant");
                }
            }
            Step::GiveTurn { until } => {
                assert!(head.turn_until.is_some_and(|u| u >= now));
                assert_eq!(until, now.saturating_add(TURN_MS));
                assert!(granted.is_none());
                assert_eq!(i + 1, steps.len(), "a turn ends the round");
            }
            Step::Grant(c) => {
                assert!(head.turn_until.is_none());
                assert!(head.deadline.is_none_or(|d| d > now));
                if let Some(o) = granted {
                    assert_eq!(o, head.owner);
                }
                granted = Some(head.owner);
                count += 1;
                assert_eq!(c, count);
            }
        }
    }
    // The round stopped where the policy says it must: at the end of the line, after a turn,
    // or at a head that may not follow the grants (another owner or a turn).
    if gate != Gate::Reserved && !matches!(steps.last(), Some(Step::GiveTurn { .. })) {
        if let Some(head) = line.get(steps.len()) {
            let o = granted.expect("a round stops early only behind a grant");
            assert!(head.turn_until.is_some() || head.owner != o);
        }
    }

    let asker = [input.asker % 3];
    let res_owner = input.reservation.map(|(o, _)| [o % 3]);
    let reservation = res_owner.as_ref().zip(reservation_until).map(|(o, u)| (o.as_slice(), u));
    match grant::turn(reservation, &asker, now) {
        Turn::Go => assert!(reservation.is_none_or(|(_, u)| u < now)),
        Turn::TakeReservation => assert!(reservation.is_some_and(|(o, u)| o == asker && u >= now)),
        Turn::Wait(ms) => {
            let (o, u) = reservation.expect("a wait needs a reservation");
            assert!(o != asker && ms >= 1 && ms <= u.saturating_sub(now).max(1));
        }
    }
});

//! The spin lock's and the non-reentrant lock's script plans (`script_plans.rs`): unlocks and a
//! force unlock without a channel (the freed lock goes to LOCK.* waiters, nothing is
//! published), the latch as KEYS[2], and the acquire that refuses its own owner with ARGV's
//! error text.

use super::script_plans::{plan, Counter, Keys, Latch};
use super::scripts::LockOp;
use super::state::LockView;
use crate::logic::kinds;
use crate::logic::plan::{Arg, Cmd, Effect, Plan, Quirk, Reply, Then};
use crate::logic::scripts::parse;

use Arg::{Argv as A, Key as K};

const NOW: i64 = 1_000_000;

struct View {
    lock: LockView,
    latch: Latch,
}

impl Keys for View {
    fn for_acquire(&mut self, _: usize, _: usize) -> (LockView, Option<i64>) {
        (self.lock.clone(), None)
    }
    fn lock(&mut self, _: usize, _: usize) -> LockView {
        self.lock.clone()
    }
    fn pttl(&mut self, _: usize) -> i64 {
        700
    }
    fn exists(&mut self, _: usize) -> bool {
        self.lock != LockView::Free
    }
    fn held(&mut self, _: usize, _: usize) -> LockView {
        self.lock.clone()
    }
    fn token(&mut self, _: usize) -> Counter {
        Counter::Absent
    }
    fn latch(&mut self, l: usize) -> Latch {
        assert_eq!(l, 1, "the spin lock's latch is KEYS[2]");
        self.latch
    }
    fn channel_in_lock_slot(&mut self, _: usize, _: usize) -> bool {
        true
    }
}

fn mine(n: i64) -> LockView {
    LockView::Hash { mine: Some(Ok(n)) }
}

fn run(op: LockOp, rest: &[&str], lock: LockView, latch: Latch) -> Result<Plan, Quirk> {
    let rest: &'static [&'static [u8]] =
        Vec::leak(rest.iter().map(|s| s.to_string().leak().as_bytes()).collect());
    let c = parse(&kinds::OPS[op as usize].layout, rest).expect("the call matches");
    let mut p = Plan::new();
    plan(op, &c, NOW, &mut View { lock, latch }, &mut p)?;
    Ok(p)
}

fn path(p: &Plan) -> Vec<(Cmd, Vec<Arg>, Effect)> {
    p.steps.iter().map(|s| (s.cmd, s.args().to_vec(), s.effect)).collect()
}

fn reply(p: &Plan) -> Reply {
    match p.then {
        Then::Reply(r) => r,
        Then::Lua(q) => panic!("Lua: {q:?}"),
    }
}

const UNLOCK: [&str; 4] = ["1", "k", "30000", "o"];
const UNLOCK_LATCH: [&str; 6] = ["2", "k", "l", "30000", "o", "13500"];

#[test]
fn spin_unlocks_free_the_lock_without_a_message() {
    let hexists = (Cmd::HExists, vec![K(0), A(1)], Effect::None);
    let p = run(LockOp::SpinUnlock, &UNLOCK, mine(1), Latch::Absent).unwrap();
    let want = vec![
        hexists.clone(),
        (Cmd::HIncrBy, vec![K(0), A(1), Arg::MinusOne], Effect::CountThenGone),
        (Cmd::Del, vec![K(0)], Effect::Freed),
    ];
    assert_eq!((path(&p), reply(&p)), (want, Reply::Int(1)));
    let p = run(LockOp::SpinUnlock, &UNLOCK, mine(3), Latch::Absent).unwrap();
    assert_eq!(
        path(&p)[2],
        (Cmd::PExpire, vec![K(0), A(0)], Effect::Lease { deadline: NOW + 30000, fresh: false })
    );
    assert_eq!(reply(&p), Reply::Int(0));
    for not_owner in [LockView::Free, LockView::Hash { mine: None }] {
        let p = run(LockOp::SpinUnlock, &UNLOCK, not_owner, Latch::Absent).unwrap();
        assert_eq!((path(&p), reply(&p)), (vec![hexists.clone()], Reply::Nil));
    }
    assert_eq!(
        run(LockOp::SpinUnlock, &UNLOCK, LockView::WrongType, Latch::Absent).err(),
        Some(Quirk::WrongType)
    );
}

#[test]
fn the_spin_latch_is_the_second_key_and_answers_first() {
    let p = run(LockOp::SpinUnlockLatch, &UNLOCK_LATCH, mine(1), Latch::Value(Some(1))).unwrap();
    assert_eq!((path(&p).len(), reply(&p)), (1, Reply::Int(1)));
    let p = run(LockOp::SpinUnlockLatch, &UNLOCK_LATCH, mine(1), Latch::Absent).unwrap();
    assert_eq!(
        path(&p).last(),
        Some(&(Cmd::Set, vec![K(1), Arg::One, Arg::Px, A(2)], Effect::Latch { deadline: NOW + 13500 }))
    );
    let p = run(LockOp::SpinUnlockLatch, &UNLOCK_LATCH, mine(2), Latch::Absent).unwrap();
    assert_eq!(path(&p).last().map(|s| s.1[1]), Some(Arg::Zero));
    // No latch is written when the owner holds nothing.
    let p = run(LockOp::SpinUnlockLatch, &UNLOCK_LATCH, LockView::Free, Latch::Absent).unwrap();
    assert!(path(&p).iter().all(|s| s.0 != Cmd::Set));
    let zero = ["2", "k", "l", "30000", "o", "0"];
    assert_eq!(run(LockOp::SpinUnlockLatch, &zero, mine(1), Latch::Absent).err(), Some(Quirk::LatchMs));
}

#[test]
fn spin_force_unlock_deletes_any_type() {
    for held in [mine(1), LockView::Hash { mine: None }, LockView::WrongType] {
        let p = run(LockOp::SpinForceUnlock, &["1", "k"], held, Latch::Absent).unwrap();
        assert_eq!((path(&p), reply(&p)), (vec![(Cmd::Del, vec![K(0)], Effect::Freed)], Reply::Int(1)));
    }
    let p = run(LockOp::SpinForceUnlock, &["1", "k"], LockView::Free, Latch::Absent).unwrap();
    assert_eq!((path(&p), reply(&p)), (vec![(Cmd::Del, vec![K(0)], Effect::None)], Reply::Int(0)));
}

#[test]
fn non_reentrant_acquire_refuses_its_own_owner_with_the_given_text() {
    let args = |t: &'static str| ["1", "k", "30000", "o", t];
    let p =
        run(LockOp::NonReentrantAcquire, &args("NON_REENTRANT_REACQUIRE"), mine(1), Latch::Absent).unwrap();
    assert_eq!(reply(&p), Reply::ErrorArg(2));
    assert!(!p.writes(), "nothing changes");
    let p = run(LockOp::NonReentrantAcquire, &args("X"), LockView::Free, Latch::Absent).unwrap();
    assert_eq!(reply(&p), Reply::Nil);
    assert!(path(&p).iter().any(|s| s.2 == Effect::Count { count: 1, up: true }));
    let p =
        run(LockOp::NonReentrantAcquire, &args("X"), LockView::Hash { mine: None }, Latch::Absent).unwrap();
    assert_eq!(reply(&p), Reply::Int(700));
    for odd in ["", "-ERR x", "bad\u{1}text", "caf\u{e9}"] {
        assert_eq!(
            run(LockOp::NonReentrantAcquire, &args(odd), mine(1), Latch::Absent).err(),
            Some(Quirk::ErrorText),
            "{odd:?}"
        );
    }
}

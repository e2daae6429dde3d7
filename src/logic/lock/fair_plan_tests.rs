//! The fair lock's decisions (`fair_plans.rs`) over model keys: the purge, the take (every
//! deadline behind drops by `wait`), the enqueue behind the last waiter or the holder, the
//! replies of each version, the releases and the give-up path, and the calls left to Lua.

use super::fair_plans::decide;
use super::fair_queue::{Fair, FairAct, FairKeys, FairReply};
use super::fair_scripts::FairOp;
use super::state::LockView;
use crate::logic::kinds;
use crate::logic::plan::{Cmd, Latch, Quirk};
use crate::logic::scripts::parse;

const NOW: i64 = 1_000_000;
const SERVER: i64 = 5_000;

#[derive(Clone)]
struct Model {
    lock: LockView,
    pttl: i64,
    queue: Vec<&'static str>,
    scores: Vec<(&'static str, f64)>,
    latch: Latch,
}

fn model(lock: LockView, queue: &[&'static str], scores: &[(&'static str, f64)]) -> Model {
    Model { lock, pttl: 20_000, queue: queue.to_vec(), scores: scores.to_vec(), latch: Latch::Absent }
}

impl FairKeys for Model {
    fn lock(&mut self) -> LockView {
        self.lock.clone()
    }
    fn pttl(&mut self) -> i64 {
        self.pttl
    }
    fn queue_len(&mut self) -> usize {
        self.queue.len()
    }
    fn queue_at(&mut self, i: usize) -> Option<Vec<u8>> {
        self.queue.get(i).map(|s| s.as_bytes().to_vec())
    }
    fn deadline(&mut self, member: &[u8]) -> Option<f64> {
        self.scores.iter().find(|(m, _)| m.as_bytes() == member).map(|(_, s)| *s)
    }
    fn deadlines(&mut self) -> Vec<(Vec<u8>, f64)> {
        let mut v = self.scores.clone();
        v.sort_by(|a, b| a.1.total_cmp(&b.1));
        v.into_iter().map(|(m, s)| (m.as_bytes().to_vec(), s)).collect()
    }
    fn latch(&mut self) -> Latch {
        self.latch
    }
}

fn run(op: FairOp, rest: &[&str], m: &mut Model) -> Result<Fair, Quirk> {
    let rest: &'static [&'static [u8]] =
        Vec::leak(rest.iter().map(|s| s.to_string().leak().as_bytes()).collect());
    let def = kinds::OPS.iter().find(|d| FairOp::of(d.op) == Some(op)).expect("listed");
    let c = parse(&def.layout, rest).expect("the call matches");
    decide(op, &c, m, SERVER, true)
}

fn mine(n: i64) -> LockView {
    LockView::Hash { mine: Some(Ok(n)) }
}

const FOREIGN: LockView = LockView::Hash { mine: None };

/// fair-acquire (3.45+): lease, owner, wait, now.
fn acquire(_op: FairOp, owner: &str) -> Vec<String> {
    ["3", "k", "q", "z", "30000", owner, "5000", &NOW.to_string()].iter().map(|s| s.to_string()).collect()
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

#[test]
fn the_head_takes_a_free_lock_and_everyone_behind_moves_up() {
    let mut m =
        model(LockView::Free, &["me", "x", "y"], &[("me", 2e6), ("x", 3e6), ("y", 4e6), ("loose", 5e6)]);
    let f = run(FairOp::Acquire, &args(&acquire(FairOp::Acquire, "me")), &mut m).unwrap();
    assert_eq!(
        f.acts,
        vec![
            FairAct::LPop,
            FairAct::ZRem(b("me")),
            FairAct::LowerAll {
                members: vec![(b("x"), 3e6 - 5000.0), (b("y"), 4e6 - 5000.0), (b("loose"), 5e6 - 5000.0)],
                changed: true
            },
            FairAct::Take,
            FairAct::Lease { deadline: SERVER + 30000, fresh: true },
        ]
    );
    assert_eq!(f.reply, Some(FairReply::Nil));
    // Someone else first: the caller queues behind the last waiter.
    let f = run(FairOp::Acquire, &args(&acquire(FairOp::Acquire, "new")), &mut m).unwrap();
    let ttl = 4e6 - NOW as f64;
    assert_eq!(f.acts, vec![FairAct::Enqueue(ttl + 5000.0 + NOW as f64), FairAct::Push]);
    assert_eq!(f.reply, Some(FairReply::Int(ttl as i64)));
}

#[test]
fn expired_heads_are_purged_and_a_head_without_deadline_stops_or_fails() {
    let mut m =
        model(FOREIGN, &["old", "older", "live"], &[("old", 1.0), ("older", NOW as f64), ("live", 9e6)]);
    let f = run(FairOp::TryAcquire, &["3", "k", "q", "z", "30000", "me", &NOW.to_string(), "5000"], &mut m)
        .unwrap();
    assert_eq!(
        f.acts,
        vec![FairAct::ZRem(b("old")), FairAct::LPop, FairAct::ZRem(b("older")), FairAct::LPop]
    );
    assert_eq!(f.reply, Some(FairReply::Int(1)), "busy: never queued");
    let mut m = model(FOREIGN, &["nodeadline", "x"], &[("x", 1.0)]);
    let try_args = ["3", "k", "q", "z", "30000", "me", "1000000", "5000"];
    assert_eq!(run(FairOp::TryAcquireBug, &try_args, &mut m).err(), Some(Quirk::ScriptBug));
    let f = run(FairOp::TryAcquire, &try_args, &mut m).unwrap();
    assert!(f.acts.is_empty(), "the purge stops at it");
}

#[test]
fn each_version_answers_a_queued_caller_its_own_way() {
    let mut m = model(FOREIGN, &["a", "me"], &[("a", 1.5e6), ("me", 1.7e6)]);
    let f = run(FairOp::AcquireBug, &args(&acquire(FairOp::AcquireBug, "me")), &mut m).unwrap();
    assert_eq!(f.reply, Some(FairReply::Int(1_700_000 - 5000 - NOW)));
    assert!(f.acts.is_empty());
    for op in [FairOp::AcquireEnqueueBug, FairOp::Acquire] {
        m.pttl = -2;
        let f = run(op, &args(&acquire(op, "me")), &mut m).unwrap();
        assert_eq!(f.reply, Some(FairReply::Int(0)), "{op:?}");
    }
    // The last waiter has no deadline: arithmetic on nil up to 3.44, the PTTL after.
    let mut m = model(FOREIGN, &["a"], &[]);
    for op in [FairOp::AcquireBug, FairOp::AcquireEnqueueBug] {
        assert_eq!(
            run(op, &args(&acquire(op, "me")), &mut m.clone()).err(),
            Some(Quirk::ScriptBug),
            "{op:?}"
        );
    }
    let f = run(FairOp::Acquire, &args(&acquire(FairOp::Acquire, "me")), &mut m).unwrap();
    assert_eq!(f.reply, Some(FairReply::Int(20_000)));
    assert_eq!(f.acts[0], FairAct::Enqueue(20_000.0 + 5000.0 + NOW as f64));
}

#[test]
fn reentry_counts_or_is_refused_by_the_non_reentrant_lock() {
    let mut m = model(mine(2), &[], &[]);
    let f = run(FairOp::Acquire, &args(&acquire(FairOp::Acquire, "me")), &mut m).unwrap();
    assert_eq!(f.acts[0], FairAct::Count { count: 3, up: true });
    let nr = ["3", "k", "q", "z", "30000", "me", "5000", "1000000", "NON_REENTRANT_REACQUIRE"];
    let f = run(FairOp::NonReentrantAcquire, &nr, &mut m).unwrap();
    assert_eq!((f.acts.len(), f.reply), (0, Some(FairReply::ErrorArg(4))));
    let odd = ["3", "k", "q", "z", "30000", "me", "5000", "1000000", ""];
    assert_eq!(run(FairOp::NonReentrantAcquire, &odd, &mut m).err(), Some(Quirk::ErrorText));
}

#[test]
fn unlocks_release_keep_or_reply_nil_and_tell_the_head() {
    let unlock = ["5", "k", "q", "z", "p", "l", "0", "30000", "me", "1000000", "PUBLISH", "13500"];
    let mut m = model(mine(1), &["h"], &[("h", 9e6)]);
    let f = run(FairOp::UnlockLatch, &unlock, &mut m).unwrap();
    assert_eq!(
        f.acts,
        vec![
            FairAct::Count { count: 0, up: false },
            FairAct::Delete { freed: true },
            FairAct::Publish(b("p:h")),
            FairAct::Latch { released: true, deadline: SERVER + 13500 },
        ]
    );
    assert_eq!(f.reply, Some(FairReply::Int(1)));
    assert!(f.plan.steps.iter().any(|s| s.cmd == Cmd::Publish));
    let f = run(FairOp::UnlockLatch, &unlock, &mut model(mine(3), &[], &[])).unwrap();
    assert_eq!(f.reply, Some(FairReply::Int(0)));
    assert_eq!(f.acts.last(), Some(&FairAct::Latch { released: false, deadline: SERVER + 13500 }));
    let f = run(FairOp::UnlockLatch, &unlock, &mut model(FOREIGN, &["h"], &[])).unwrap();
    assert_eq!((f.acts.len(), f.reply), (0, Some(FairReply::Nil)));
    // A missing lock replies 1 and still tells the head.
    let f = run(FairOp::UnlockLatch, &unlock, &mut model(LockView::Free, &["h"], &[("h", 9e6)])).unwrap();
    assert_eq!(f.acts[..2], [FairAct::Free, FairAct::Publish(b("p:h"))]);
    assert_eq!(f.reply, Some(FairReply::Int(1)));
    // The latch answers first.
    let mut m = model(mine(1), &[], &[]);
    m.latch = Latch::Value(Some(0));
    let f = run(FairOp::UnlockLatch, &unlock, &mut m).unwrap();
    assert_eq!((f.acts.len(), f.reply), (0, Some(FairReply::Int(0))));
}

#[test]
fn force_unlock_deletes_any_holder_and_keeps_the_queue() {
    let force = ["4", "k", "q", "z", "p", "0", "1000000", "SPUBLISH"];
    let f = run(FairOp::ForceUnlock, &force, &mut model(FOREIGN, &["h"], &[("h", 9e6)])).unwrap();
    assert_eq!(f.acts, vec![FairAct::Delete { freed: true }, FairAct::Publish(b("p:h"))]);
    assert!(f.plan.steps.iter().any(|s| s.cmd == Cmd::SPublish));
    let f = run(FairOp::ForceUnlock, &force, &mut model(LockView::Free, &["h"], &[("h", 9e6)])).unwrap();
    assert_eq!((f.acts.len(), f.reply), (0, Some(FairReply::Int(0))));
}

#[test]
fn giving_up_lowers_those_behind_and_leaves() {
    let mut m = model(FOREIGN, &["a", "me", "b", "c"], &[("a", 1e6), ("me", 2e6), ("b", 3e6)]);
    let f = run(FairOp::AcquireFailed, &["2", "q", "z", "me", "5000"], &mut m).unwrap();
    assert_eq!(
        f.acts,
        vec![
            FairAct::ZIncr(b("b"), 3e6 - 5000.0),
            FairAct::ZIncr(b("c"), -5000.0),
            FairAct::ZRem(b("me")),
            FairAct::LRemOwner,
        ]
    );
    assert_eq!(f.reply, Some(FairReply::Nil));
}

#[test]
fn numbers_lua_would_write_otherwise_run_in_lua() {
    let mut m = model(LockView::Free, &["me", "x"], &[("me", 1e7), ("x", 1.5e7 + 0.5)]);
    assert_eq!(
        run(FairOp::Acquire, &args(&acquire(FairOp::Acquire, "me")), &mut m).err(),
        Some(Quirk::LuaNumber)
    );
    let mut m = model(FOREIGN, &[], &[]);
    for now in ["1.5", "x", "9007199254740993"] {
        let a = ["3", "k", "q", "z", "30000", "me", "5000", now];
        assert_eq!(run(FairOp::Acquire, &a, &mut m).err(), Some(Quirk::LuaNumber), "{now}");
    }
    let mut m = model(FOREIGN, &["a"], &[("a", 9.0072e15)]);
    assert_eq!(
        run(FairOp::Acquire, &args(&acquire(FairOp::Acquire, "me")), &mut m).err(),
        Some(Quirk::LuaNumber)
    );
    assert_eq!(
        run(
            FairOp::Acquire,
            &args(&acquire(FairOp::Acquire, "me")),
            &mut model(LockView::WrongType, &[], &[])
        )
        .err(),
        Some(Quirk::WrongType)
    );
}

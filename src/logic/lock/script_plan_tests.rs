//! The lock's script plans (`script_plans.rs`) per operation over every view of the keys: the
//! path (commands, arguments, effects, in the script's order), the reply, the Lua decisions, and
//! which keys were read.

use super::script_plans::{plan, Counter, Keys, Latch};
use super::scripts::LockOp;
use super::state::LockView;
use crate::logic::error::Error;
use crate::logic::kinds;
use crate::logic::plan::{Arg, Cmd, Effect, Plan, Quirk, Reply, Then};
use crate::logic::scripts::{parse, Call};

use Arg::{Argv as A, Key as K};

const NOW: i64 = 1_000_000;

/// The keys as a test sets them, and what the plan read.
#[derive(Clone)]
struct View {
    lock: LockView,
    turn: Option<i64>,
    pttl: i64,
    held: Vec<LockView>,
    token: Counter,
    latch: Latch,
    in_slot: bool,
    read: Vec<&'static str>,
}

fn view(lock: LockView) -> View {
    View {
        lock,
        turn: None,
        pttl: 700,
        held: vec![],
        token: Counter::Absent,
        latch: Latch::Absent,
        in_slot: true,
        read: vec![],
    }
}

fn mine(n: i64) -> LockView {
    LockView::Hash { mine: Some(Ok(n)) }
}

const FOREIGN: LockView = LockView::Hash { mine: None };
const CORRUPT: LockView = LockView::Hash { mine: Some(Err(Error::CorruptCount)) };

impl Keys for View {
    fn for_acquire(&mut self, lock: usize, owner: usize) -> (LockView, Option<i64>) {
        assert_eq!((lock, owner), (0, 1));
        self.read.push("lock");
        (self.lock.clone(), self.turn)
    }
    fn lock(&mut self, _: usize, _: usize) -> LockView {
        self.read.push("lock");
        self.lock.clone()
    }
    fn pttl(&mut self, _: usize) -> i64 {
        self.read.push("pttl");
        self.pttl
    }
    fn exists(&mut self, _: usize) -> bool {
        self.read.push("lock");
        self.lock != LockView::Free
    }
    fn held(&mut self, lock: usize, owner: usize) -> LockView {
        assert_eq!(owner, lock + 1, "KEYS[i] goes with ARGV[i + 1]");
        self.read.push("held");
        self.held[lock].clone()
    }
    fn token(&mut self, t: usize) -> Counter {
        assert_eq!(t, 1);
        self.read.push("token");
        self.token
    }
    fn latch(&mut self, l: usize) -> Latch {
        assert_eq!(l, 2);
        self.read.push("latch");
        self.latch
    }
    fn channel_in_lock_slot(&mut self, lock: usize, channel: usize) -> bool {
        assert_eq!((lock, channel), (0, 1));
        self.in_slot
    }
}

/// The call of `op` with these arguments after the script (numkeys, keys, args).
fn call(op: LockOp, rest: &[&str]) -> Call<'static> {
    let rest: &'static [&'static [u8]] =
        Vec::leak(rest.iter().map(|s| s.to_string().leak().as_bytes()).collect());
    parse(&kinds::OPS[op as usize].layout, rest).expect("the call matches")
}

/// The plan and what was read, checked for the properties every plan has.
fn run(op: LockOp, rest: &[&str], v: &mut View) -> Result<Plan, Quirk> {
    let c = call(op, rest);
    let mut p = Plan::new();
    plan(op, &c, NOW, v, &mut p)?;
    for s in p.steps.iter() {
        let fits = match s.effect {
            Effect::None => true,
            Effect::Count { .. } | Effect::CountThenGone => s.cmd == Cmd::HIncrBy,
            Effect::Lease { .. } => s.cmd == Cmd::PExpire,
            Effect::Delete => matches!(s.cmd, Cmd::Del | Cmd::PExpire),
            Effect::Freed => s.cmd == Cmd::Del,
            Effect::Latch { .. } => s.cmd == Cmd::Set,
            Effect::Incr { .. } => s.cmd == Cmd::Incr,
            Effect::Release { .. } => matches!(s.cmd, Cmd::Publish | Cmd::SPublish),
            Effect::Turn { .. } => s.cmd == Cmd::PTtl,
            // The read-write lock's effects: never in a lock plan.
            Effect::HSet { .. }
            | Effect::HDel
            | Effect::Message
            | Effect::Marker { .. }
            | Effect::LeaseNamed { .. }
            | Effect::DeleteNamed => false,
        };
        assert!(fits, "{op:?}: {:?} on {:?}", s.effect, s.cmd);
        assert!(matches!(s.args().first(), Some(K(_))), "the first argument is the command's key");
    }
    if let Then::Lua(_) = p.then {
        assert!(!p.has_effects(), "a Lua decision writes nothing");
    }
    Ok(p)
}

/// The path as (command, arguments, effect).
fn path(p: &Plan) -> Vec<(Cmd, Vec<Arg>, Effect)> {
    p.steps.iter().map(|s| (s.cmd, s.args().to_vec(), s.effect)).collect()
}

fn reply(p: &Plan) -> Reply {
    match p.then {
        Then::Reply(r) => r,
        Then::Lua(q) => panic!("ends in Lua: {q:?}"),
    }
}

const ACQ: [&str; 4] = ["1", "k", "30000", "o"];
const FENCED: [&str; 5] = ["2", "k", "t", "30000", "o"];

#[test]
fn acquire_takes_a_free_or_own_lock_else_replies_the_pttl() {
    let lease = |fresh| Effect::Lease { deadline: NOW + 30000, fresh };
    let mut v = view(LockView::Free);
    let p = run(LockOp::Acquire, &ACQ, &mut v).unwrap();
    assert_eq!(
        path(&p),
        [
            (Cmd::Exists, vec![K(0)], Effect::None),
            (Cmd::HIncrBy, vec![K(0), A(1), Arg::One], Effect::Count { count: 1, up: true }),
            (Cmd::PExpire, vec![K(0), A(0)], lease(true)),
        ]
    );
    assert_eq!((reply(&p), v.read), (Reply::Nil, vec!["lock"]));
    // Re-entry, from any integer HINCRBY takes (0 too).
    for (n, count) in [(2, 3), (0, 1), (-5, -4)] {
        let p = run(LockOp::Acquire, &ACQ, &mut view(mine(n))).unwrap();
        assert_eq!(path(&p)[1], (Cmd::HExists, vec![K(0), A(1)], Effect::None));
        assert_eq!(p.steps.iter().nth(2).unwrap().effect, Effect::Count { count, up: true }, "{n}");
        assert_eq!(p.steps.iter().nth(3).unwrap().effect, lease(false));
    }
    // Held by another owner: the PTTL, and the owner keeps a place among LOCK.* waiters.
    let mut v = view(FOREIGN);
    let p = run(LockOp::Acquire, &ACQ, &mut v).unwrap();
    let turn = |pttl| (Cmd::PTtl, vec![K(0)], Effect::Turn { owner: 1, pttl });
    assert_eq!(
        path(&p),
        [(Cmd::Exists, vec![K(0)], Effect::None), (Cmd::HExists, vec![K(0), A(1)], Effect::None), turn(700)]
    );
    assert_eq!((reply(&p), v.read), (Reply::Int(700), vec!["lock", "pttl"]));
    // A free lock kept for another owner's turn.
    let mut v = View { turn: Some(150), ..view(LockView::Free) };
    let p = run(LockOp::Acquire, &ACQ, &mut v).unwrap();
    assert_eq!(
        (path(&p), reply(&p)),
        (vec![(Cmd::Exists, vec![K(0)], Effect::None), turn(150)], Reply::Int(150))
    );
    assert_eq!(v.read, ["lock"], "the turn's ms are the reply");
}

#[test]
fn acquire_leaves_to_lua_what_the_script_fails_on() {
    let quirk = |op, rest: &[&str], v: LockView| run(op, rest, &mut view(v)).err();
    assert_eq!(quirk(LockOp::Acquire, &ACQ, LockView::WrongType), Some(Quirk::WrongType));
    assert_eq!(quirk(LockOp::Acquire, &ACQ, CORRUPT), Some(Quirk::CountNotInteger));
    assert_eq!(quirk(LockOp::Acquire, &ACQ, mine(i64::MAX)), Some(Quirk::CountOverflow));
    assert_eq!(quirk(LockOp::Acquire, &["1", "k", "x", "o"], LockView::Free), Some(Quirk::LeaseNotInteger));
    let huge = i64::MAX.to_string();
    assert_eq!(quirk(LockOp::Acquire, &["1", "k", &huge, "o"], mine(1)), Some(Quirk::DeadlineOverflow));
    // A lease the path never uses is no reason for Lua.
    let p = run(LockOp::Acquire, &["1", "k", "x", "o"], &mut view(FOREIGN)).unwrap();
    assert_eq!(reply(&p), Reply::Int(700));
    // PEXPIRE <= 0 deletes the lock the HINCRBY wrote.
    let p = run(LockOp::Acquire, &["1", "k", "0", "o"], &mut view(LockView::Free)).unwrap();
    let effects: Vec<Effect> = p.steps.iter().map(|s| s.effect).collect();
    assert_eq!(effects, [Effect::None, Effect::CountThenGone, Effect::Delete]);
}

#[test]
fn fenced_acquires_count_tokens_when_they_take_the_lock() {
    for (op, pair) in [(LockOp::FencedAcquire, true), (LockOp::FencedAcquirePlain, false)] {
        for (stored, token) in [(Counter::Absent, 1), (Counter::Int(41), 42), (Counter::Int(-3), -2)] {
            let mut v = View { token: stored, ..view(LockView::Free) };
            let p = run(op, &FENCED, &mut v).unwrap();
            let last = path(&p).pop().unwrap();
            assert_eq!(last, (Cmd::Incr, vec![K(1)], Effect::Incr { value: token }));
            assert_eq!(reply(&p), if pair { Reply::Pair(-1, token) } else { Reply::Nil });
            assert_eq!(v.read, ["lock", "token"]);
        }
        for (stored, q) in [
            (Counter::NotInteger, Quirk::TokenNotInteger),
            (Counter::WrongType, Quirk::TokenWrongType),
            (Counter::Int(i64::MAX), Quirk::TokenOverflow),
        ] {
            assert_eq!(run(op, &FENCED, &mut View { token: stored, ..view(mine(1)) }).err(), Some(q));
        }
        let mut v = view(LockView::Free);
        assert_eq!(run(op, &["2", "k", "k", "1", "o"], &mut v).err(), Some(Quirk::TokenIsLock));
        assert_eq!(v.read, ["lock"], "the INCR on the lock hash is known without reading");
        // Contended: the counter is not touched (nor read).
        let mut v = View { token: Counter::WrongType, ..view(FOREIGN) };
        let p = run(op, &FENCED, &mut v).unwrap();
        assert_eq!(reply(&p), if pair { Reply::Pair(700, -1) } else { Reply::Int(700) });
        assert_eq!(v.read, ["lock", "pttl"]);
    }
}

const UNLOCK: [&str; 9] = ["3", "k", "c", "l", "0", "30000", "o", "PUBLISH", "13500"];

#[test]
fn unlock_latch_answers_a_retry_before_the_lock_is_read() {
    for (latch, want) in [(Some(1), Reply::Int(1)), (Some(0), Reply::Int(0)), (None, Reply::Nil)] {
        let mut v = View { latch: Latch::Value(latch), ..view(mine(1)) };
        let p = run(LockOp::UnlockLatch, &UNLOCK, &mut v).unwrap();
        assert_eq!((path(&p), reply(&p)), (vec![(Cmd::Get, vec![K(2)], Effect::None)], want));
        assert_eq!(v.read, ["latch"]);
    }
    let mut v = View { latch: Latch::WrongType, ..view(mine(1)) };
    assert_eq!(run(LockOp::UnlockLatch, &UNLOCK, &mut v).err(), Some(Quirk::LatchWrongType));
}

#[test]
fn unlock_decrements_releases_or_replies_nil() {
    let latch = |value, deadline| (Cmd::Set, vec![K(2), value, Arg::Px, A(4)], Effect::Latch { deadline });
    let get = (Cmd::Get, vec![K(2)], Effect::None);
    let hexists = (Cmd::HExists, vec![K(0), A(2)], Effect::None);
    for not_owner in [LockView::Free, FOREIGN] {
        let p = run(LockOp::UnlockLatch, &UNLOCK, &mut view(not_owner)).unwrap();
        assert_eq!((path(&p), reply(&p)), (vec![get.clone(), hexists.clone()], Reply::Nil));
    }
    let mut v = view(mine(3));
    let p = run(LockOp::UnlockLatch, &UNLOCK, &mut v).unwrap();
    assert_eq!(
        path(&p),
        [
            get.clone(),
            hexists.clone(),
            (Cmd::HIncrBy, vec![K(0), A(2), Arg::MinusOne], Effect::Count { count: 2, up: false }),
            (Cmd::PExpire, vec![K(0), A(1)], Effect::Lease { deadline: NOW + 30000, fresh: false }),
            latch(Arg::Zero, NOW + 13500),
        ]
    );
    assert_eq!((reply(&p), v.read), (Reply::Int(0), vec!["latch", "lock"]));
    // The last hold (or any count <= 1, as the script reads HINCRBY's answer): released.
    for n in [1, 0, -4] {
        let p = run(LockOp::UnlockLatch, &UNLOCK, &mut view(mine(n))).unwrap();
        let want = [
            get.clone(),
            hexists.clone(),
            (Cmd::HIncrBy, vec![K(0), A(2), Arg::MinusOne], Effect::CountThenGone),
            (Cmd::Del, vec![K(0)], Effect::Delete),
            (Cmd::Publish, vec![K(1), A(0)], Effect::Release { lock: 0 }),
            latch(Arg::One, NOW + 13500),
        ];
        assert_eq!((path(&p), reply(&p)), (want.to_vec(), Reply::Int(1)), "{n}");
    }
    // The older texts: no latch; the 3.17-3.21 one publishes with PUBLISH.
    let p = run(LockOp::Unlock, &["2", "k", "c", "0", "100", "o", "spublish"], &mut view(mine(1))).unwrap();
    assert_eq!(path(&p)[3], (Cmd::SPublish, vec![K(1), A(0)], Effect::Release { lock: 0 }));
    let p = run(LockOp::UnlockPublish, &["2", "k", "c", "0", "100", "o"], &mut view(mine(1))).unwrap();
    assert_eq!((path(&p)[3].0, p.steps.len()), (Cmd::Publish, 4));
    // PEXPIRE <= 0 deletes a lock still held: no message.
    let p = run(LockOp::Unlock, &["2", "k", "c", "0", "-1", "o", "PUBLISH"], &mut view(mine(2))).unwrap();
    let effects: Vec<Effect> = p.steps.iter().map(|s| s.effect).collect();
    assert_eq!(
        (effects, reply(&p)),
        (vec![Effect::None, Effect::CountThenGone, Effect::Delete], Reply::Int(0))
    );
}

#[test]
fn unlock_leaves_to_lua_before_or_after_the_path() {
    let quirk = |rest: &[&str], v: View| run(LockOp::UnlockLatch, rest, &mut v.clone()).err();
    assert_eq!(quirk(&UNLOCK, view(LockView::WrongType)), Some(Quirk::WrongType));
    assert_eq!(quirk(&UNLOCK, view(CORRUPT)), Some(Quirk::CountNotInteger));
    assert_eq!(quirk(&UNLOCK, view(mine(i64::MIN))), Some(Quirk::CountOverflow));
    let no_latch_ms = ["3", "k", "c", "l", "0", "30000", "o", "PUBLISH", "0"];
    assert_eq!(quirk(&no_latch_ms, view(mine(2))), Some(Quirk::LatchMs));
    assert!(run(LockOp::UnlockLatch, &no_latch_ms, &mut view(FOREIGN)).is_ok(), "never reaches SET");
    // The script fails at a command of the path: checked first, then Lua, nothing written.
    let at_pexpire = ["3", "k", "c", "l", "0", "x", "o", "PUBLISH", "13500"];
    let p = run(LockOp::UnlockLatch, &at_pexpire, &mut view(mine(2))).unwrap();
    assert_eq!((p.then, p.steps.len(), p.writes()), (Then::Lua(Quirk::LeaseNotInteger), 5, true));
    let p = run(LockOp::UnlockLatch, &at_pexpire, &mut view(mine(1))).unwrap();
    assert_eq!(reply(&p), Reply::Int(1), "a release never uses the lease");
    let spublish = ["3", "k", "c", "l", "0", "1", "o", "SPUBLISH", "13500"];
    let p = run(LockOp::UnlockLatch, &spublish, &mut View { in_slot: false, ..view(mine(1)) }).unwrap();
    assert_eq!((p.then, p.steps.len()), (Then::Lua(Quirk::CrossSlotPublish), 6));
}

#[test]
fn force_unlock_deletes_any_existing_key() {
    let rest = ["2", "k", "c", "0", "SPUBLISH"];
    let p = run(LockOp::ForceUnlock, &rest, &mut view(LockView::Free)).unwrap();
    assert_eq!((path(&p), reply(&p)), (vec![(Cmd::Del, vec![K(0)], Effect::None)], Reply::Int(0)));
    assert!(p.writes(), "a DEL of nothing is still refused while writes are");
    for any in [mine(1), FOREIGN, LockView::WrongType] {
        let p = run(LockOp::ForceUnlock, &rest, &mut view(any)).unwrap();
        let want = [
            (Cmd::Del, vec![K(0)], Effect::Delete),
            (Cmd::SPublish, vec![K(1), A(0)], Effect::Release { lock: 0 }),
        ];
        assert_eq!((path(&p), reply(&p)), (want.to_vec(), Reply::Int(1)));
    }
    let p = run(LockOp::ForceUnlockPublish, &["2", "k", "c", "0"], &mut view(mine(1))).unwrap();
    assert_eq!(path(&p)[1].0, Cmd::Publish);
    let far = View { in_slot: false, ..view(mine(1)) };
    assert_eq!(run(LockOp::ForceUnlock, &rest, &mut far.clone()).err(), Some(Quirk::CrossSlotPublish));
}

#[test]
fn renewals_rearm_what_each_owner_holds() {
    let batch = ["3", "a", "b", "c", "30000", "oa", "ob", "oc"];
    let held = vec![LockView::field(true), LockView::field(false), LockView::Free];
    let mut v = View { held: held.clone(), ..view(LockView::Free) };
    let p = run(LockOp::RenewBatch, &batch, &mut v).unwrap();
    let lease = Effect::Lease { deadline: NOW + 30000, fresh: false };
    assert_eq!(
        path(&p),
        [
            (Cmd::HExists, vec![K(0), A(1)], Effect::None),
            (Cmd::PExpire, vec![K(0), A(0)], lease),
            (Cmd::HExists, vec![K(1), A(2)], Effect::None),
            (Cmd::HExists, vec![K(2), A(3)], Effect::None),
        ]
    );
    assert_eq!((reply(&p), p.ints.clone(), v.read.len()), (Reply::Ints, vec![1, 0, 0], 3));
    let p = run(
        LockOp::Renew,
        &["1", "a", "30000", "oa"],
        &mut View { held: held.clone(), ..view(LockView::Free) },
    );
    assert_eq!(reply(&p.unwrap()), Reply::Int(1));
    // Every key is read before anything: another type anywhere runs the batch in Lua.
    let wrong = View {
        held: vec![LockView::field(true), LockView::WrongType, LockView::Free],
        ..view(LockView::Free)
    };
    assert_eq!(run(LockOp::RenewBatch, &batch, &mut wrong.clone()).err(), Some(Quirk::WrongType));
    // A lease that is not an integer fails only if a PEXPIRE runs.
    let bad = ["3", "a", "b", "c", "x", "oa", "ob", "oc"];
    let mut v = View { held: held.clone(), ..view(LockView::Free) };
    assert_eq!(run(LockOp::RenewBatch, &bad, &mut v).err(), Some(Quirk::LeaseNotInteger));
    let none = View { held: vec![LockView::Free; 3], ..view(LockView::Free) };
    assert_eq!(run(LockOp::RenewBatch, &bad, &mut none.clone()).unwrap().ints, [0, 0, 0]);
    // An overflowing deadline fails once the path is checked, held keys or not.
    let huge = i64::MAX.to_string();
    let p = run(LockOp::RenewBatch, &["1", "a", &huge, "oa"], &mut none.clone()).unwrap();
    assert_eq!(p.then, Then::Lua(Quirk::DeadlineOverflow));
}

#[test]
fn renewals_with_a_lease_at_or_below_zero_delete_each_key_once() {
    let dup = ["3", "a", "b", "a", "0", "o", "o", "o"];
    let all = View { held: vec![LockView::field(true); 3], ..view(LockView::Free) };
    let p = run(LockOp::RenewBatch, &dup, &mut all.clone()).unwrap();
    let deletes: Vec<Arg> =
        p.steps.iter().filter(|s| s.effect == Effect::Delete).map(|s| s.args()[0]).collect();
    assert_eq!((deletes, p.ints.clone()), (vec![K(0), K(1)], vec![1, 1, 0]), "a is gone the second time");
    assert_eq!(p.steps.iter().filter(|s| s.cmd == Cmd::PExpire).count(), 2);
}

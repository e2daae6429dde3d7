//! The read-write lock's script plans (`script_plans.rs`) over views of the keys: the path
//! (commands, arguments, effects, in the script's order), the reply and the Lua decisions.

use super::script_plans::{plan, Field, Fields, Keys, ModeField, Num, Shape};
use super::scripts::{RwOp, OPS};
use crate::logic::plan::{Arg, Cmd, Effect, Latch, Plan, Quirk, Reply, Then};
use crate::logic::scripts::{parse, Call};
use std::collections::BTreeMap;

const NOW: i64 = 1_000_000;

/// The keys as a test sets them.
#[derive(Clone, Default)]
struct View {
    shape: Option<Shape>,
    mode: Option<ModeField>,
    fields: BTreeMap<Vec<u8>, Vec<u8>>,
    pttl: i64,
    holds: BTreeMap<Vec<u8>, i64>,
    latch: Option<Latch>,
}

fn int_or_num(v: &[u8]) -> Field {
    let s = std::str::from_utf8(v).unwrap_or("");
    let int = s.parse::<i64>().ok().filter(|n| n.to_string() == s);
    let num = match s.trim().parse::<f64>() {
        Ok(f) if f.fract() == 0.0 && f.abs() < 1e14 => Num::Int(f as i64),
        Ok(_) => Num::Odd,
        Err(_) => Num::Skip,
    };
    Field { int, num }
}

impl Keys for View {
    fn offer_free(&mut self, _: usize) {}
    fn shape(&mut self, _: usize) -> Shape {
        self.shape.unwrap_or(if self.fields.is_empty() { Shape::Absent } else { Shape::Hash })
    }
    fn mode(&mut self, _: usize) -> ModeField {
        self.mode.unwrap_or(ModeField::Absent)
    }
    fn field(&mut self, _: usize, field: usize) -> Option<Field> {
        let name = ARGS.with(|a| a.borrow().get(field).cloned())?;
        self.fields.get(&name).map(|v| int_or_num(v))
    }
    fn hlen(&mut self, _: usize) -> usize {
        self.fields.len() + usize::from(self.mode.is_some_and(|m| m != ModeField::Absent))
    }
    fn fields(&mut self, _: usize) -> Fields {
        let mut out = Fields::default();
        for (k, v) in &self.fields {
            out.push(k, int_or_num(v).num);
        }
        if self.mode.is_some_and(|m| m != ModeField::Absent) {
            out.push(b"mode", Num::Skip);
        }
        out
    }
    fn pttl(&mut self, _: usize) -> i64 {
        self.pttl
    }
    fn pttl_named(&mut self, name: &[u8]) -> i64 {
        self.holds.get(name).copied().unwrap_or(-2)
    }
    fn latch(&mut self, _: usize) -> Latch {
        self.latch.unwrap_or(Latch::Absent)
    }
    fn arg_number(&mut self, arg: usize) -> Option<f64> {
        ARGS.with(|a| a.borrow().get(arg).and_then(|b| std::str::from_utf8(b).ok()?.trim().parse().ok()))
    }
    fn derived_ok(&mut self, _: usize, name: &[u8]) -> bool {
        name != b"k"
    }
    fn channel_in_lock_slot(&mut self, _: usize, _: usize) -> bool {
        true
    }
}

thread_local! {
    /// The call's ARGV, for the view's field look-ups.
    static ARGS: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn call(op: RwOp, rest: &[&str]) -> Call<'static> {
    let rest: &'static [&'static [u8]] =
        Vec::leak(rest.iter().map(|s| s.to_string().leak().as_bytes()).collect());
    let c = parse(&OPS[op as usize].layout, rest).expect("the call matches");
    ARGS.with(|a| *a.borrow_mut() = c.args.iter().map(|x| x.to_vec()).collect());
    c
}

fn run(op: RwOp, rest: &[&str], v: &mut View) -> Plan {
    let c = call(op, rest);
    let mut p = Plan::new();
    plan(op, &c, NOW, v, &mut p);
    if let Then::Lua(_) = p.then {
        assert!(!p.has_effects(), "a Lua decision writes nothing");
    }
    p
}

fn cmds(p: &Plan) -> Vec<Cmd> {
    p.steps.iter().map(|s| s.cmd).collect()
}

fn reply(p: &Plan) -> Reply {
    match p.then {
        Then::Reply(r) => r,
        Then::Lua(q) => panic!("ends in Lua: {q:?}"),
    }
}

fn made(p: &Plan, a: Arg) -> String {
    match a {
        Arg::Made(i) => String::from_utf8_lossy(p.made_text(i).unwrap_or_default()).into_owned(),
        other => format!("{other:?}"),
    }
}

fn held(fields: &[(&str, &str)], mode: ModeField) -> View {
    View {
        mode: Some(mode),
        fields: fields.iter().map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec())).collect(),
        pttl: 20_000,
        ..View::default()
    }
}

const RA: [&str; 6] = ["2", "k", "{k}:me:rwlock_timeout", "30000", "me", "me:write"];

#[test]
fn read_acquire_creates_reenters_or_replies_the_pttl() {
    use Cmd::*;
    let p = run(RwOp::ReadAcquire, &RA, &mut View::default());
    assert_eq!(cmds(&p), [HGet, HSet, HSet, Set, PExpire, PExpire]);
    assert_eq!(reply(&p), Reply::Nil);
    let s: Vec<_> = p.steps.iter().collect();
    assert_eq!(made(&p, s[3].args()[0]), "{k}:me:rwlock_timeout:1");
    assert_eq!(s[3].effect, Effect::Marker { deadline: NOW + 30_000 });
    assert_eq!(s[5].effect, Effect::Lease { deadline: NOW + 30_000, fresh: true });
    // Re-entry: hold 3, the hash's TTL max(PTTL, lease).
    let mut v = held(&[("me", "2")], ModeField::Read);
    v.pttl = 50_000;
    let p = run(RwOp::ReadAcquire, &RA, &mut v);
    assert_eq!(cmds(&p), [HGet, HIncrBy, Set, PExpire, PTtl, PExpire]);
    let s: Vec<_> = p.steps.iter().collect();
    assert_eq!(s[1].effect, Effect::Count { count: 3, up: true });
    assert_eq!(made(&p, s[2].args()[0]), "{k}:me:rwlock_timeout:3");
    assert_eq!(made(&p, s[5].args()[1]), "50000");
    // The writer's own read hold; another writer: the PTTL.
    let p = run(RwOp::ReadAcquire, &RA, &mut held(&[("me:write", "1")], ModeField::Write));
    assert_eq!((cmds(&p)[..3].to_vec(), reply(&p)), (vec![HGet, HExists, HIncrBy], Reply::Nil));
    let p = run(RwOp::ReadAcquire, &RA, &mut held(&[("x:write", "1"), ("me", "1")], ModeField::Write));
    assert_eq!(
        (cmds(&p), reply(&p)),
        (vec![HGet, HExists, PTtl], Reply::Int(20_000)),
        "no re-entry beside a writer"
    );
    let p = run(RwOp::ReadAcquire, &RA, &mut held(&[("x", "1")], ModeField::Other));
    assert_eq!(reply(&p), Reply::Int(20_000));
}

#[test]
fn write_acquire_adds_the_lease_to_the_pttl() {
    let rest = ["1", "k", " 100", "me:write"];
    let p = run(RwOp::WriteAcquire, &rest, &mut held(&[("me:write", "1")], ModeField::Write));
    assert_eq!(cmds(&p), [Cmd::HGet, Cmd::HExists, Cmd::HIncrBy, Cmd::PTtl, Cmd::PExpire]);
    let last = p.steps.iter().last().expect("pexpire");
    assert_eq!(
        (made(&p, last.args()[1]), last.effect),
        ("20100".into(), Effect::Lease { deadline: NOW + 20_100, fresh: false })
    );
    // A lease Lua's arithmetic refuses, or a fraction PEXPIRE refuses: Lua, nothing written.
    for lease in ["x", "1.5"] {
        let p = run(
            RwOp::WriteAcquire,
            &["1", "k", lease, "me:write"],
            &mut held(&[("me:write", "1")], ModeField::Write),
        );
        assert!(matches!(p.then, Then::Lua(_)), "{lease}");
    }
    // Read-locked (by this owner too): the PTTL.
    let p =
        run(RwOp::WriteAcquire, &["1", "k", "30000", "me:write"], &mut held(&[("me", "1")], ModeField::Read));
    assert_eq!(reply(&p), Reply::Int(20_000));
}

fn unlock_rest(owner: &'static str) -> [&'static str; 10] {
    ["5", "k", "c", "{k}:me:rwlock_timeout", "{k}", "latch", "0", owner, "PUBLISH", "13500"]
}

#[test]
fn walks_past_the_byte_bound_run_in_lua() {
    // Another reader's 1 MiB field with 40 holds: 40 MiB of names, past MAX_WALK_BYTES (32 MiB).
    let long = "x".repeat(1 << 20);
    let mut v = held(&[("me", "1"), (long.as_str(), "40")], ModeField::Read);
    let p = run(RwOp::ReadUnlockLatchNil, &unlock_rest("me"), &mut v);
    assert_eq!(p.then, Then::Lua(Quirk::WalkTooLong));
    // 20 holds (20 MiB) are walked natively (none alive: the lock is freed).
    let mut v = held(&[("me", "1"), (long.as_str(), "20")], ModeField::Read);
    let p = run(RwOp::ReadUnlockLatchNil, &unlock_rest("me"), &mut v);
    assert_eq!(reply(&p), Reply::Int(1));
    assert_eq!(cmds(&p).iter().filter(|c| **c == Cmd::PTtl).count(), 20);
}

#[test]
fn read_unlock_walks_every_hold() {
    use Cmd::*;
    let mut v = held(&[("me", "1"), ("other", "2")], ModeField::Read);
    v.holds.insert(b"{k}:other:rwlock_timeout:2".to_vec(), 500);
    let p = run(RwOp::ReadUnlockLatchNil, &unlock_rest("me"), &mut v);
    assert_eq!(reply(&p), Reply::Int(0));
    let c = cmds(&p);
    assert_eq!(&c[..6], [Get, HGet, HExists, HIncrBy, HDel, Del]);
    assert_eq!(c.iter().filter(|x| **x == PTtl).count(), 2, "{c:?}");
    let rearm = p.steps.iter().find(|s| s.cmd == PExpire).expect("rearm");
    assert_eq!(
        (made(&p, rearm.args()[1]), rearm.effect),
        ("500".into(), Effect::Lease { deadline: NOW + 500, fresh: false })
    );
    assert_eq!(p.steps.iter().last().map(|s| s.effect), Some(Effect::Latch { deadline: NOW + 13_500 }));
    // Every other hold expired: the lock is freed (waiters first, else the message).
    let mut v = held(&[("me", "1"), ("other", "2")], ModeField::Read);
    let p = run(RwOp::ReadUnlockLatchNil, &unlock_rest("me"), &mut v);
    assert_eq!(reply(&p), Reply::Int(1));
    assert!(p.steps.iter().any(|s| s.effect == Effect::Release { lock: 0 }));
    // In write mode the writer keeps the lock; a missing lock replies nil (3.44+) or 1.
    let p = run(
        RwOp::ReadUnlockLatchNil,
        &unlock_rest("me"),
        &mut held(&[("me", "1"), ("me:write", "1")], ModeField::Write),
    );
    assert_eq!(reply(&p), Reply::Int(0));
    let p = run(RwOp::ReadUnlockLatchNil, &unlock_rest("me"), &mut View::default());
    assert_eq!((reply(&p), cmds(&p)), (Reply::Nil, vec![Get, HGet, Publish, Set]));
    let p = run(RwOp::ReadUnlockLatch, &unlock_rest("me"), &mut View::default());
    assert_eq!(reply(&p), Reply::Int(1));
    // A latch answers; not a reader: nil.
    let mut v = View { latch: Some(Latch::Value(Some(0))), ..View::default() };
    assert_eq!(reply(&run(RwOp::ReadUnlockLatchNil, &unlock_rest("me"), &mut v)), Reply::Int(0));
    let p = run(RwOp::ReadUnlockLatchNil, &unlock_rest("me"), &mut held(&[("x", "1")], ModeField::Read));
    assert_eq!(reply(&p), Reply::Nil);
    // A fractional count Lua would walk: Lua.
    let p = run(
        RwOp::ReadUnlockLatchNil,
        &unlock_rest("me"),
        &mut held(&[("me", "2"), ("x", "1.5")], ModeField::Read),
    );
    assert_eq!(p.then, Then::Lua(Quirk::LuaNumber));
}

#[test]
fn write_unlock_turns_the_lock_readable_for_the_writers_reads() {
    let rest = ["3", "k", "c", "latch", "1", "30000", "me:write", "PUBLISH", "13500"];
    let p =
        run(RwOp::WriteUnlockLatchNil, &rest, &mut held(&[("me:write", "1"), ("me", "1")], ModeField::Write));
    assert_eq!(reply(&p), Reply::Int(1));
    assert!(p.steps.iter().any(|s| s.cmd == Cmd::HSet && s.effect == Effect::HSet { wake: true }));
    let p = run(RwOp::WriteUnlockLatchNil, &rest, &mut held(&[("me:write", "1")], ModeField::Write));
    assert!(p.steps.iter().any(|s| s.effect == Effect::Release { lock: 0 }));
    let p = run(RwOp::WriteUnlockLatchNil, &rest, &mut held(&[("me:write", "3")], ModeField::Write));
    assert_eq!(reply(&p), Reply::Int(0));
    let p = run(RwOp::WriteUnlockLatchNil, &rest, &mut held(&[("me", "1")], ModeField::Read));
    assert_eq!(reply(&p), Reply::Nil);
}

#[test]
fn renewals_and_their_lua_cases() {
    // 1affef78: hold 2 is addressed with KEYS[3] (lock 2's name); count 2 with 2 keys: Lua.
    let rest = ["4", "k", "{k}", "j", "{j}", "30000", "me", "me"];
    let p = run(RwOp::ReadRenewBatchBug, &rest, &mut held(&[("me", "2")], ModeField::Read));
    let names: Vec<String> = p
        .steps
        .iter()
        .filter(|s| matches!(s.args().first(), Some(Arg::Made(_))))
        .map(|s| made(&p, s.args()[0]))
        .collect();
    assert_eq!(
        names,
        [
            "j:me:rwlock_timeout:2",
            "{k}:me:rwlock_timeout:1",
            "j:me:rwlock_timeout:2",
            "{k}:me:rwlock_timeout:1"
        ]
    );
    assert_eq!(p.ints, [1, 1]);
    let p = run(
        RwOp::ReadRenewBatchBug,
        &["2", "k", "{k}", "30000", "me"],
        &mut held(&[("me", "2")], ModeField::Read),
    );
    assert_eq!(p.then, Then::Lua(Quirk::ScriptBug));
    let p = run(
        RwOp::ReadRenewBatch,
        &["2", "k", "{k}", "30000", "me"],
        &mut held(&[("me", "2")], ModeField::Read),
    );
    assert_eq!(
        p.steps.iter().filter(|s| s.effect == Effect::LeaseNamed { deadline: NOW + 30_000 }).count(),
        2
    );
    // 4.4+: only the listed fields.
    let p = run(
        RwOp::ReadRenewBatchOwn,
        &["2", "k", "{k}", "30000", "2", "me", "x"],
        &mut held(&[("me", "1"), ("y", "4")], ModeField::Read),
    );
    assert_eq!((p.ints.clone(), p.steps.iter().filter(|s| s.cmd == Cmd::PExpire).count()), (vec![1], 2));
    let p =
        run(RwOp::ReadRenew, &["2", "k", "{k}", "30000", "x"], &mut held(&[("me", "1")], ModeField::Read));
    assert_eq!(reply(&p), Reply::Int(0));
    // A key of another type: the script's first command fails, Lua runs it.
    let mut v = View { shape: Some(Shape::Other), ..View::default() };
    let p = run(RwOp::ReadIsLocked, &["1", "k"], &mut v);
    assert_eq!((p.then, cmds(&p)), (Then::Lua(Quirk::WrongType), vec![Cmd::HGet]));
    // A non-integer lease reaches PEXPIRE after the new lock's writes: Lua, nothing written.
    let p = run(
        RwOp::ReadAcquire,
        &["2", "k", "{k}:me:rwlock_timeout", "soon", "me", "me:write"],
        &mut View::default(),
    );
    assert_eq!(p.then, Then::Lua(Quirk::LeaseNotInteger));
    assert_eq!(cmds(&p), [Cmd::HGet, Cmd::HSet, Cmd::HSet, Cmd::Set, Cmd::PExpire]);
}

#[test]
fn islocked_and_force_unlocks() {
    assert_eq!(
        reply(&run(RwOp::ReadIsLocked, &["1", "k"], &mut held(&[("a", "1")], ModeField::Read))),
        Reply::Int(1)
    );
    let w = &mut held(&[("a:write", "1")], ModeField::Write);
    assert_eq!(reply(&run(RwOp::ReadIsLocked, &["1", "k"], w)), Reply::Int(0));
    let w = &mut held(&[("a:write", "1"), ("a", "1")], ModeField::Write);
    assert_eq!(reply(&run(RwOp::ReadIsLocked, &["1", "k"], w)), Reply::Int(1));
    let p = run(RwOp::WriteForceUnlock, &["2", "k", "c", "1", "SPUBLISH"], w);
    assert_eq!((reply(&p), cmds(&p)), (Reply::Int(1), vec![Cmd::HGet, Cmd::Del, Cmd::SPublish]));
    let p = run(RwOp::ReadForceUnlockPublish, &["2", "k", "c", "0"], w);
    assert_eq!((reply(&p), cmds(&p)), (Reply::Int(0), vec![Cmd::HGet]));
}

#[test]
fn digits_are_redis_spelling() {
    for n in [1i64, 9, 10, 12_345, 99_999_999_999_999] {
        let mut r = held(&[("me", &*Box::leak((n - 1).to_string().into_boxed_str()))], ModeField::Read);
        let p = run(RwOp::ReadAcquire, &RA, &mut r);
        let set = p.steps.iter().find(|s| s.cmd == Cmd::Set).expect("set");
        assert_eq!(made(&p, set.args()[0]), format!("{{k}}:me:rwlock_timeout:{n}"));
    }
    // 10^14 is written as an exponent by Lua: Lua.
    let mut r = held(&[("me", "99999999999999")], ModeField::Read);
    assert_eq!(run(RwOp::ReadAcquire, &RA, &mut r).then, Then::Lua(Quirk::LuaNumber));
    let mut r = held(&[("me", "-5")], ModeField::Read);
    let p = run(RwOp::ReadAcquire, &RA, &mut r);
    let set = p.steps.iter().find(|s| s.cmd == Cmd::Set).expect("set");
    assert_eq!(made(&p, set.args()[0]), "{k}:me:rwlock_timeout:-4");
}

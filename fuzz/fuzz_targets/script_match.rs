//! Fuzz the native scripts' data and decisions (`redis_lock::logic::{scripts, kinds, plan}` and
//! `logic::lock::{scripts, script_plans}`): the SHA1 table, the one parser of a call, and the
//! plans of the lock's operations over arbitrary views of the keys. Properties:
//! - nothing panics, whatever the argv and the keys;
//! - a SHA1 or body matches only a script of the table (never by accident): `by_sha` answers
//!   exactly the rows' operation for their SHA1s and nothing for other 40-hex strings;
//!   `by_body` answers only when the body's SHA1 and length are a row's;
//! - `parse` accepts only the operation's layout (numkeys, number of arguments, from the slot
//!   roles), and what it returns is the argv itself: keys and arguments, leases as integers
//!   (`None` when not one), latch times as positive integers, PUBLISH/SPUBLISH only;
//! - a plan's ACL steps and its effects are one list: every effect belongs to the command it
//!   is written for (HINCRBY -> count, PEXPIRE -> lease or delete, DEL -> delete, SET -> latch,
//!   INCR -> token, PUBLISH -> release, PTTL -> turn), applies to that command's key, and names
//!   only slots of the call;
//! - a Lua decision writes nothing: after the path (`Then::Lua`) no step has an effect;
//! - the lock's rules hold: an acquire of a free lock or of one the owner holds takes it (count
//!   +1), anything else replies the PTTL; an unlock replies 0 exactly when holds remain; a
//!   renewal replies one 0/1 per key, 1 only where it re-arms or deletes.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use redis_lock::logic::kinds;
use redis_lock::logic::lock::script_plans::{self, Counter, Keys, Latch};
use redis_lock::logic::lock::scripts::{LockOp, ROWS};
use redis_lock::logic::lock::state::LockView;
use redis_lock::logic::plan::{Arg, Cmd, Effect, Plan, Reply, Then};
use redis_lock::logic::script_table::parse_sha;
use redis_lock::logic::scripts::{parse, Call, OpId, Role};

#[derive(Arbitrary, Debug, Clone, Copy)]
enum View {
    Free,
    Other,
    Mine(i64),
    Corrupt,
    Foreign,
}

#[derive(Arbitrary, Debug)]
struct Input {
    op: u8,
    sha: Vec<u8>,
    body: Vec<u8>,
    pick_builtin: Option<u8>,
    numkeys: Option<u8>,
    argv: Vec<Vec<u8>>,
    view: View,
    turn: Option<i64>,
    pttl: i64,
    held: Vec<Option<bool>>,
    token: (u8, i64),
    latch: (u8, Option<i64>),
    in_slot: bool,
    now: i64,
}

fn canonical(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    let n: i64 = s.parse().ok()?;
    (n.to_string() == s).then_some(n)
}

fn lock_view(v: View) -> LockView {
    match v {
        View::Free => LockView::Free,
        View::Other => LockView::WrongType,
        View::Mine(n) => LockView::Hash { mine: Some(Ok(n)) },
        View::Corrupt => LockView::Hash { mine: Some(Err(redis_lock::logic::error::Error::CorruptCount)) },
        View::Foreign => LockView::Hash { mine: None },
    }
}

/// The keys as the input says they are.
struct Fixed<'a>(&'a Input);

impl Keys for Fixed<'_> {
    fn for_acquire(&mut self, _: usize, _: usize) -> (LockView, Option<i64>) {
        let v = lock_view(self.0.view);
        let turn = if v == LockView::Free { self.0.turn.map(|ms| ms.max(1)) } else { None };
        (v, turn)
    }
    fn lock(&mut self, _: usize, _: usize) -> LockView {
        lock_view(self.0.view)
    }
    fn pttl(&mut self, _: usize) -> i64 {
        self.0.pttl
    }
    fn exists(&mut self, _: usize) -> bool {
        !matches!(self.0.view, View::Free)
    }
    fn held(&mut self, lock: usize, _: usize) -> LockView {
        match self.0.held.get(lock).copied().flatten() {
            None if lock % 7 == 6 => LockView::WrongType,
            None => LockView::Free,
            Some(present) => LockView::field(present),
        }
    }
    fn token(&mut self, _: usize) -> Counter {
        match self.0.token.0 % 4 {
            0 => Counter::Absent,
            1 => Counter::Int(self.0.token.1),
            2 => Counter::NotInteger,
            _ => Counter::WrongType,
        }
    }
    fn latch(&mut self, _: usize) -> Latch {
        match self.0.latch.0 % 3 {
            0 => Latch::Absent,
            1 => Latch::Value(self.0.latch.1),
            _ => Latch::WrongType,
        }
    }
    fn channel_in_lock_slot(&mut self, _: usize, _: usize) -> bool {
        self.0.in_slot
    }
}

fn check_plan(op: LockOp, call: &Call, input: &Input, p: &Plan) {
    let key_slot = |a: Arg| match a {
        Arg::Key(i) => Some(i as usize),
        _ => None,
    };
    for s in p.steps.iter() {
        for a in s.args() {
            match *a {
                Arg::Key(i) => assert!((i as usize) < call.keys.len(), "{s:?}"),
                Arg::Argv(i) => assert!((i as usize) < call.args.len(), "{s:?}"),
                _ => {}
            }
        }
        let first = s.args().first().copied().and_then(key_slot);
        let fits = match s.effect {
            Effect::None => true,
            Effect::Count { .. } | Effect::CountThenGone => s.cmd == Cmd::HIncrBy,
            Effect::Lease { .. } => s.cmd == Cmd::PExpire,
            Effect::Delete => matches!(s.cmd, Cmd::Del | Cmd::PExpire),
            // The spin lock's release: no channel, no message.
            Effect::Freed => s.cmd == Cmd::Del && call.key_index(Role::Channel).is_none(),
            Effect::Latch { .. } => s.cmd == Cmd::Set,
            Effect::Incr { .. } => s.cmd == Cmd::Incr,
            Effect::Release { lock } => {
                matches!(s.cmd, Cmd::Publish | Cmd::SPublish) && (lock as usize) < call.keys.len()
            }
            Effect::Turn { owner, .. } => s.cmd == Cmd::PTtl && (owner as usize) < call.args.len(),
            Effect::HSet { .. } => s.cmd == Cmd::HSet,
            Effect::HDel => s.cmd == Cmd::HDel,
            Effect::Message => matches!(s.cmd, Cmd::Publish | Cmd::SPublish),
            // Effects on keys a script derives: the read-write lock's, never the lock's.
            Effect::Marker { .. } | Effect::LeaseNamed { .. } | Effect::DeleteNamed => false,
        };
        assert!(fits, "{op:?}: effect {:?} on {:?}", s.effect, s.cmd);
        if s.effect != Effect::None {
            assert!(first.is_some(), "an effect applies to its command's key: {s:?}");
        }
    }
    match p.then {
        Then::Lua(_) => assert!(!p.has_effects(), "a Lua decision writes nothing: {p:?}"),
        Then::Reply(r) => {
            let effect_of = |cmd: Cmd| p.steps.iter().find(|s| s.cmd == cmd).map(|s| s.effect);
            match op {
                LockOp::NonReentrantAcquire if matches!(r, Reply::ErrorArg(_)) => {
                    assert!(
                        matches!(input.view, View::Mine(_)) && !p.writes(),
                        "only its own owner is refused"
                    );
                }
                LockOp::Acquire
                | LockOp::FencedAcquire
                | LockOp::FencedAcquirePlain
                | LockOp::NonReentrantAcquire => {
                    let took =
                        matches!((input.view, effect_of(Cmd::PTtl)), (View::Free | View::Mine(_), None));
                    match effect_of(Cmd::HIncrBy) {
                        Some(Effect::Count { count, up: true }) => {
                            assert!(took);
                            let want = if let View::Mine(n) = input.view { n + 1 } else { 1 };
                            assert_eq!(count, want);
                        }
                        Some(Effect::CountThenGone) => assert!(took && call.lease().is_some_and(|l| l <= 0)),
                        _ => assert!(matches!(r, Reply::Int(_) | Reply::Pair(_, -1)), "{r:?}"),
                    }
                }
                LockOp::UnlockPublish
                | LockOp::Unlock
                | LockOp::UnlockLatch
                | LockOp::SpinUnlock
                | LockOp::SpinUnlockLatch => {
                    if let (Reply::Int(0), Some(Effect::Count { count, up: false })) =
                        (r, effect_of(Cmd::HIncrBy))
                    {
                        assert!(count > 0);
                    }
                    if effect_of(Cmd::Del).is_some() {
                        assert_eq!(r, Reply::Int(1));
                    }
                }
                LockOp::Renew | LockOp::RenewBatch => {
                    let rearmed = p.steps.iter().filter(|s| s.cmd == Cmd::PExpire).count() as i64;
                    let ones = match r {
                        Reply::Ints => {
                            assert_eq!(p.ints.len(), call.units);
                            p.ints.iter().sum()
                        }
                        Reply::Int(n) => n,
                        other => panic!("renew replied {other:?}"),
                    };
                    assert_eq!(ones, rearmed);
                }
                LockOp::ForceUnlockPublish | LockOp::ForceUnlock => {
                    assert_eq!(r, Reply::Int(i64::from(effect_of(Cmd::Del) == Some(Effect::Delete))));
                }
                LockOp::SpinForceUnlock => {
                    assert_eq!(r, Reply::Int(i64::from(effect_of(Cmd::Del) == Some(Effect::Freed))));
                }
            }
        }
    }
}

fuzz_target!(|input: Input| {
    let table = kinds::table(b"").expect("built-in");
    // SHA1 lookups: random strings, and the real hashes in either case.
    let sha = match input.pick_builtin {
        Some(i) => ROWS[usize::from(i) % ROWS.len()].sha.as_bytes().to_vec(),
        None => input.sha.clone(),
    };
    let got = parse_sha(&sha).and_then(|s| table.by_sha(&s)).and_then(kinds::op).map(|d| d.op);
    let want = ROWS.iter().find(|r| r.sha.as_bytes().eq_ignore_ascii_case(&sha)).map(|r| r.op);
    assert_eq!(got, want, "by_sha({sha:?})");
    // Bodies: a body matches only if it hashes to a row's SHA1 at that row's length.
    if let Some(op) = table.by_body(&input.body) {
        let digest = sha1_smol::Sha1::from(&input.body).digest().to_string();
        let hit = ROWS.iter().find(|r| r.sha == digest && r.len == input.body.len());
        assert_eq!(hit.map(|r| r.op), kinds::op(op).map(|d| d.op), "a body matched by accident");
    }

    // Shapes.
    // The lock's operations (the read-write lock's plans are driven by its own unit tests and
    // the differential tests against Lua).
    let lock_ops: Vec<OpId> = (0..kinds::N_OPS)
        .map(OpId)
        .filter(|&i| kinds::op(i).and_then(|d| LockOp::of(d.op)).is_some())
        .collect();
    let id = lock_ops[usize::from(input.op) % lock_ops.len()];
    let def = kinds::op(id).expect("listed");
    let op = LockOp::of(def.op).expect("a lock operation");
    let mut rest: Vec<&[u8]> = vec![];
    let numkeys_s = input.numkeys.map(|n| n.to_string().into_bytes());
    if let Some(n) = &numkeys_s {
        rest.push(n);
    }
    rest.extend(input.argv.iter().take(24).map(Vec::as_slice));
    let Ok(call) = parse(&def.layout, &rest) else { return };
    // numkeys is rest[0]: the generated one, or an argument that happens to be an integer.
    let n = redis_lock::logic::scripts::numkeys(rest[0]).expect("a match needs an integer numkeys");
    let argv = &rest[1..];
    let l = def.layout;
    match l.each {
        None => assert!(
            n == l.keys.len() && argv.len() == n + l.args.len(),
            "{op:?}: {n} keys, {} args",
            argv.len()
        ),
        Some(_) => assert!(n >= 1 && argv.len() == 2 * n + 1, "batch matched {n} keys, {} args", argv.len()),
    }
    let (keys, args) = argv.split_at(n);
    assert_eq!((call.keys, call.args, call.numkeys()), (keys, args, n));
    assert_eq!(call.lease(), call.arg_index(Role::Lease).and_then(|i| canonical(args[i])));
    assert_eq!(
        call.latch_ms(),
        call.arg_index(Role::LatchMs).and_then(|i| canonical(args[i])).filter(|v| *v > 0)
    );
    if let Some(i) = call.arg_index(Role::PublishCmd) {
        let sharded = args[i].eq_ignore_ascii_case(b"SPUBLISH");
        assert!(sharded || args[i].eq_ignore_ascii_case(b"PUBLISH"));
        assert_eq!(call.publish == Some(redis_lock::logic::scripts::Publish::SPublish), sharded);
    }

    // Plans over the keys the input describes.
    let mut p = Plan::new();
    if script_plans::plan(op, &call, input.now, &mut Fixed(&input), &mut p).is_ok() {
        check_plan(op, &call, &input, &p);
    }
});

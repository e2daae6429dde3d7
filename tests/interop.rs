//! Interoperability with Redisson: our own Lua implementation of the RLock scripts (lua/)
//! and LOCK.* on the same keys, in both directions, compared with a pure-Lua reference key.

mod common;
use common::resp;
use common::*;

use testkit::cmd;

use rand::{Rng, SeedableRng};
use resp::{Conn, Msg, Sub, R};

const ACQUIRE_LUA: &str = include_str!("../clients/python/src/redislock/lua/acquire.lua");
const UNLOCK_LUA: &str = include_str!("../clients/python/src/redislock/lua/unlock-latch.lua");
const FORCE_UNLOCK_LUA: &str = include_str!("../clients/python/src/redislock/lua/forceunlock.lua");
const RENEW_LUA: &str = include_str!("../clients/python/src/redislock/lua/renew-batch.lua");

/// Tolerance when comparing PTTLs taken at slightly different moments on two keys. Leases used
/// in the sequences differ by at least 10 s, so a wrong lease can never hide inside it.
const TOL: i64 = 2000;

/// A Redisson-like client: the four scripts loaded once, run with EVALSHA.
struct Redisson {
    acquire: String,
    unlock: String,
    force: String,
    renew: String,
}

impl Redisson {
    fn load(c: &mut Conn) -> Redisson {
        let mut load = |s: &str| cmd!(c, "SCRIPT", "LOAD", s).str();
        Redisson {
            acquire: load(ACQUIRE_LUA),
            unlock: load(UNLOCK_LUA),
            force: load(FORCE_UNLOCK_LUA),
            renew: load(RENEW_LUA),
        }
    }

    fn lock(&self, c: &mut Conn, k: &[u8], lease: i64, owner: &str) -> R {
        cmd!(c, "EVALSHA", &self.acquire, 1, k, lease, owner)
    }

    /// Unlock with a given request id; the latch is left in place (see `unlock`).
    fn unlock_with_id(&self, c: &mut Conn, k: &[u8], lease: i64, owner: &str, request_id: &str) -> R {
        let mut latch = prefixed("redisson_unlock_latch", k);
        latch.extend_from_slice(format!(":{request_id}").as_bytes());
        cmd!(c, "EVALSHA", &self.unlock, 3, k, channel(k), &latch, "0", lease, owner, "PUBLISH", 20000)
    }

    fn latch(k: &[u8], request_id: &str) -> Vec<u8> {
        let mut latch = prefixed("redisson_unlock_latch", k);
        latch.extend_from_slice(format!(":{request_id}").as_bytes());
        latch
    }

    /// Unlock as the client does it: a fresh request id, then DEL of the latch.
    fn unlock(&self, c: &mut Conn, k: &[u8], lease: i64, owner: &str) -> R {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let r = self.unlock_with_id(c, k, lease, owner, &id);
        cmd!(c, "DEL", Self::latch(k, &id));
        r
    }

    fn force_unlock(&self, c: &mut Conn, k: &[u8]) -> R {
        cmd!(c, "EVALSHA", &self.force, 2, k, channel(k), "0", "PUBLISH")
    }

    fn renew_many(&self, c: &mut Conn, lease: i64, locks: &[(&[u8], &str)]) -> R {
        let mut a: Vec<Vec<u8>> = vec![b"EVALSHA".to_vec(), self.renew.clone().into_bytes()];
        a.push(locks.len().to_string().into_bytes());
        a.extend(locks.iter().map(|(k, _)| k.to_vec()));
        a.push(lease.to_string().into_bytes());
        a.extend(locks.iter().map(|(_, o)| o.as_bytes().to_vec()));
        c.call(&a)
    }

    /// One-key renewal, reply unwrapped from the array.
    fn renew(&self, c: &mut Conn, k: &[u8], lease: i64, owner: &str) -> R {
        let r = self.renew_many(c, lease, &[(k, owner)]);
        assert_eq!(r.arr().len(), 1, "{r:?}");
        r.arr()[0].clone()
    }
}

const A: &str = "c7d1e2a4-5b0f-4f7e-9d7a-1e2f3a4b5c6d:1";
const B: &str = "0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d:77";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Acquire(&'static str, i64),
    Release(&'static str, i64),
    Renew(&'static str, i64),
    Force,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Path {
    Module,
    Lua,
}
use Op::*;
use Path::*;

fn run(c: &mut Conn, rs: &Redisson, path: Path, k: &[u8], op: Op) -> R {
    match (path, op) {
        (Module, Acquire(o, l)) => cmd!(c, "LOCK.ACQUIRE", k, o, l),
        // Redisson re-applies its lease on a partial unlock: the module's equivalent passes lease-ms.
        (Module, Release(o, l)) => cmd!(c, "LOCK.RELEASE", k, o, l),
        (Module, Renew(o, l)) => cmd!(c, "LOCK.RENEW", k, o, l),
        (Module, Force) => cmd!(c, "LOCK.FORCERELEASE", k),
        (Lua, Acquire(o, l)) => rs.lock(c, k, l, o),
        (Lua, Release(o, l)) => rs.unlock(c, k, l, o),
        (Lua, Renew(o, l)) => rs.renew(c, k, l, o),
        (Lua, Force) => rs.force_unlock(c, k),
    }
}

fn hgetall(c: &mut Conn, k: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let r = cmd!(c, "HGETALL", k);
    let mut v: Vec<_> = r.arr().chunks(2).map(|p| (p[0].bytes(), p[1].bytes())).collect();
    v.sort();
    v
}

fn pttl(c: &mut Conn, k: &[u8]) -> i64 {
    cmd!(c, "PTTL", k).int()
}

fn close(a: i64, b: i64) -> bool {
    if a < 0 || b < 0 {
        a == b
    } else {
        (a - b).abs() <= TOL
    }
}

/// Same reply: exact, except a contended acquire's PTTL which is compared within TOL.
fn same_reply(op: Op, got: &R, want: &R) -> bool {
    match (op, got, want) {
        (Acquire(..), R::Int(g), R::Int(w)) => close(*g, *w),
        _ => got == want,
    }
}

fn is_full_release(op: Op, r: &R) -> bool {
    matches!(op, Release(..) | Force) && *r == R::Int(1)
}

/// Runs `steps` on `mixed` (with the given paths) and the same ops on `reference` through Lua
/// only; after every step compares replies, HGETALL and PTTL, and the release messages.
struct Pair<'a> {
    c: &'a mut Conn,
    rs: &'a Redisson,
    sub: Sub,
    mixed: Vec<u8>,
    reference: Vec<u8>,
}

impl<'a> Pair<'a> {
    fn new(s: &Server, c: &'a mut Conn, rs: &'a Redisson, mixed: &[u8], reference: &[u8]) -> Pair<'a> {
        let mut chans = vec![channel(mixed), channel(reference)];
        // When the key has a hash tag, also watch the (wrong) braced channel: it must stay silent.
        for k in [mixed, reference] {
            if k.contains(&b'{') {
                let mut wrong = format!("{PREFIX}:{{").into_bytes();
                wrong.extend_from_slice(k);
                wrong.push(b'}');
                chans.push(wrong);
            }
        }
        let sub = Sub::new(s.port, "SUBSCRIBE", &chans);
        Pair { c, rs, sub, mixed: mixed.to_vec(), reference: reference.to_vec() }
    }

    fn messages(&mut self) -> Vec<Msg> {
        let chan = channel(&self.mixed);
        self.sub.until_marker(self.c, "PUBLISH", &chan)
    }

    /// One step; returns the reply on the mixed key.
    fn step(&mut self, i: usize, path: Path, op: Op) -> R {
        let got = run(self.c, self.rs, path, &self.mixed, op);
        let want = run(self.c, self.rs, Lua, &self.reference, op);
        let what = format!("step {i}: {path:?} {op:?}");
        assert!(!got.is_err(), "{what}: {got:?}");
        assert!(same_reply(op, &got, &want), "{what}: reply {got:?}, pure Lua gives {want:?}");
        assert_eq!(hgetall(self.c, &self.mixed), hgetall(self.c, &self.reference), "{what}: HGETALL");
        let (pm, pr) = (pttl(self.c, &self.mixed), pttl(self.c, &self.reference));
        assert!(close(pm, pr), "{what}: PTTL {pm}, pure Lua gives {pr}");
        let mut expected = Vec::new();
        if is_full_release(op, &got) {
            expected.push((channel(&self.mixed), b"0".to_vec()));
        }
        if is_full_release(op, &want) {
            expected.push((channel(&self.reference), b"0".to_vec()));
        }
        assert_eq!(self.messages(), expected, "{what}: release messages");
        got
    }

    fn run(&mut self, steps: &[(Path, Op, R)]) {
        for (i, (path, op, want)) in steps.iter().enumerate() {
            let got = self.step(i, *path, *op);
            assert!(same_reply(*op, &got, want), "step {i}: {path:?} {op:?}: got {got:?}, expected {want:?}");
        }
        assert_eq!(cmd!(self.c, "EXISTS", &self.mixed), R::Int(0), "sequence must end with the lock free");
    }
}

fn pttl_reply(ms: i64) -> R {
    R::Int(ms)
}

fn setup() -> (Server, Conn, Redisson) {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    let rs = Redisson::load(&mut c);
    (s, c, rs)
}

const KEYS: [(&[u8], &[u8]); 3] =
    [(b"lock:orders", b"ref:orders"), (b"order{42}", b"ref{42}x"), (b"bin\0\xff\r\n", b"ref\0\xff")];

#[test]
fn lua_acquire_then_module_release() {
    let (s, mut c, rs) = setup();
    for (k, r) in KEYS {
        let mut p = Pair::new(&s, &mut c, &rs, k, r);
        p.run(&[(Lua, Acquire(A, 100000), R::Nil), (Module, Release(A, 100000), R::Int(1))]);
    }
    // Redisson's reads see the module's result.
    assert_eq!(cmd!(c, "EXISTS", "lock:orders"), R::Int(0));
}

#[test]
fn module_acquire_then_lua_unlock_and_redisson_reads() {
    let (s, mut c, rs) = setup();
    for (k, r) in KEYS {
        // Redisson's read-only calls on a module-made lock.
        assert_eq!(cmd!(c, "LOCK.ACQUIRE", k, A, 100000), R::Nil);
        assert_eq!(cmd!(c, "EXISTS", k), R::Int(1));
        assert_eq!(cmd!(c, "HEXISTS", k, A), R::Int(1));
        assert_eq!(cmd!(c, "HEXISTS", k, B), R::Int(0));
        assert_eq!(cmd!(c, "HGET", k, A), R::Bulk(b"1".to_vec()));
        assert!(pttl(&mut c, k) > 90000);
        assert_eq!(rs.unlock(&mut c, k, 100000, A), R::Int(1));
        let mut p = Pair::new(&s, &mut c, &rs, k, r);
        p.run(&[(Module, Acquire(A, 100000), R::Nil), (Lua, Release(A, 100000), R::Int(1))]);
    }
}

#[test]
fn reentry_mixed_both_ways() {
    let (s, mut c, rs) = setup();
    for (k, r) in KEYS {
        let mut p = Pair::new(&s, &mut c, &rs, k, r);
        p.run(&[
            (Lua, Acquire(A, 100000), R::Nil),
            (Module, Acquire(A, 70000), R::Nil),
            (Lua, Acquire(A, 40000), R::Nil),
            (Module, Acquire(A, 100000), R::Nil),
            (Module, Release(A, 70000), R::Int(0)),
            (Lua, Release(A, 40000), R::Int(0)),
            (Module, Acquire(A, 100000), R::Nil),
            (Lua, Release(A, 70000), R::Int(0)),
            (Module, Release(A, 40000), R::Int(0)),
            (Lua, Release(A, 100000), R::Int(1)),
            (Module, Acquire(A, 100000), R::Nil),
            (Lua, Acquire(A, 70000), R::Nil),
            (Lua, Release(A, 40000), R::Int(0)),
            (Module, Release(A, 100000), R::Int(1)),
        ]);
    }
}

#[test]
fn contention_and_not_owner_mixed() {
    let (s, mut c, rs) = setup();
    for (k, r) in KEYS {
        let mut p = Pair::new(&s, &mut c, &rs, k, r);
        p.run(&[
            (Module, Acquire(A, 100000), R::Nil),
            (Lua, Acquire(B, 40000), pttl_reply(100000)),
            (Module, Acquire(B, 40000), pttl_reply(100000)),
            (Lua, Release(B, 40000), R::Nil),
            (Module, Release(B, 40000), R::Nil),
            (Module, Renew(B, 40000), R::Int(0)),
            (Lua, Renew(B, 40000), R::Int(0)),
            (Lua, Release(A, 100000), R::Int(1)),
            (Lua, Acquire(B, 70000), R::Nil),
            (Module, Acquire(A, 10000), pttl_reply(70000)),
            (Lua, Acquire(A, 10000), pttl_reply(70000)),
            (Module, Release(A, 10000), R::Nil),
            (Lua, Release(A, 10000), R::Nil),
            (Module, Release(B, 10000), R::Int(1)),
            (Lua, Release(B, 10000), R::Nil),
            (Module, Release(B, 10000), R::Nil),
        ]);
    }
}

#[test]
fn renew_mixed() {
    let (s, mut c, rs) = setup();
    for (k, r) in KEYS {
        let mut p = Pair::new(&s, &mut c, &rs, k, r);
        p.run(&[
            (Lua, Acquire(A, 10000), R::Nil),
            (Module, Renew(A, 100000), R::Int(1)),
            (Lua, Renew(A, 70000), R::Int(1)),
            (Module, Renew(A, 40000), R::Int(1)),
            (Module, Renew(B, 100000), R::Int(0)),
            (Lua, Renew(B, 100000), R::Int(0)),
            (Module, Acquire(A, 70000), R::Nil),
            (Lua, Renew(A, 100000), R::Int(1)),
            (Module, Release(A, 40000), R::Int(0)),
            (Module, Renew(A, 70000), R::Int(1)),
            (Lua, Release(A, 10000), R::Int(1)),
            (Module, Renew(A, 70000), R::Int(0)),
            (Lua, Renew(A, 70000), R::Int(0)),
        ]);
    }
    // The batched watchdog script over module-made locks: own, foreign, missing.
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "w1", A, 5000), R::Nil);
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "w2", B, 5000), R::Nil);
    let r = rs.renew_many(&mut c, 90000, &[(b"w1", A), (b"w2", A), (b"w3", A)]);
    assert_eq!(r, R::Arr(vec![R::Int(1), R::Int(0), R::Int(0)]));
    assert!(pttl(&mut c, b"w1") > 80000);
    assert!(pttl(&mut c, b"w2") <= 5000);
    assert_eq!(cmd!(c, "LOCK.RELEASE", "w1", A), R::Int(1));
}

#[test]
fn force_release_mixed() {
    let (s, mut c, rs) = setup();
    for (k, r) in KEYS {
        let mut p = Pair::new(&s, &mut c, &rs, k, r);
        p.run(&[
            (Module, Acquire(A, 100000), R::Nil),
            (Module, Acquire(A, 100000), R::Nil),
            (Lua, Force, R::Int(1)),
            (Lua, Force, R::Int(0)),
            (Module, Force, R::Int(0)),
            (Lua, Acquire(B, 70000), R::Nil),
            (Lua, Acquire(B, 70000), R::Nil),
            (Module, Force, R::Int(1)),
            (Module, Release(B, 70000), R::Nil),
            (Lua, Release(B, 70000), R::Nil),
            (Module, Force, R::Int(0)),
        ]);
    }
}

#[test]
fn unlock_latch_retry_after_module_release() {
    // Redisson's idempotent unlock keeps answering its latched result even when the module
    // changed the lock in between; neither side publishes twice.
    let (s, mut c, rs) = setup();
    let mut sub = Sub::new(s.port, "SUBSCRIBE", &[channel(b"k")]);
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "k", A, 100000), R::Nil);
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "k", A, 100000), R::Nil);
    assert_eq!(rs.unlock_with_id(&mut c, b"k", 100000, A, "req1"), R::Int(0));
    assert_eq!(cmd!(c, "HGET", "k", A), R::Bulk(b"1".to_vec()));
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", A), R::Int(1));
    assert_eq!(rs.unlock_with_id(&mut c, b"k", 100000, A, "req1"), R::Int(0), "latched");
    assert_eq!(cmd!(c, "EXISTS", "k"), R::Int(0));
    assert_eq!(sub.until_marker(&mut c, "PUBLISH", &channel(b"k")), vec![(channel(b"k"), b"0".to_vec())]);
    // The latch is a plain string next to the lock; LOCK.* on the lock key ignore it.
    assert_eq!(cmd!(c, "TYPE", Redisson::latch(b"k", "req1")), R::Simple("string".into()));
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "k", B, 100000), R::Nil);
    assert_eq!(rs.unlock_with_id(&mut c, b"k", 100000, B, "req2"), R::Int(1));
    assert_eq!(rs.unlock_with_id(&mut c, b"k", 100000, B, "req2"), R::Int(1), "latched");
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", B), R::Nil);
    assert_eq!(sub.until_marker(&mut c, "PUBLISH", &channel(b"k")), vec![(channel(b"k"), b"0".to_vec())]);
}

#[test]
fn random_mixed_sequences_match_pure_lua() {
    let seed: u64 = std::env::var("INTEROP_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x10c4);
    eprintln!("INTEROP_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (s, mut c, rs) = setup();
    let leases = [100000, 70000, 40000];
    let mut full = 0;
    for (k, r) in KEYS {
        let mut p = Pair::new(&s, &mut c, &rs, k, r);
        for i in 0..250 {
            let owner = if rng.gen_bool(0.7) { A } else { B };
            let lease = leases[rng.gen_range(0..leases.len())];
            let op = match rng.gen_range(0..100) {
                0..=39 => Acquire(owner, lease),
                40..=79 => Release(owner, lease),
                80..=94 => Renew(owner, lease),
                _ => Force,
            };
            let path = if rng.gen_bool(0.5) { Module } else { Lua };
            let got = p.step(i, path, op);
            if is_full_release(op, &got) {
                full += 1;
            }
        }
        run(p.c, p.rs, Module, k, Force);
        run(p.c, p.rs, Lua, r, Force);
        p.messages();
    }
    assert!(full > 20, "the random sequence should free the lock often, got {full}");
}

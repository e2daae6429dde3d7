//! `lock.redisson-scripts native` for the read-write lock (spec family.md section 13): Redisson's
//! 19 `RReadLock` / `RWriteLock` script texts run natively.
//!
//! Redisson's own script text may not be in this repository, so the native code paths are
//! driven through our own Lua implementation of each text (`lua/rw-*.lua`, written from the
//! research facts), registered with `lock.redisson-extra-scripts` under the operation names.
//! The same calls go to a server without the module (Lua) and to a server with `native`:
//! replies, keyspace (values, TTLs within a tolerance) and published messages must match. The
//! built-in SHA1s are run natively next to our scripts in Lua.

mod common;
use common::scripts::{
    assert_same_keyspace, info_counts, load_rw, native_opts, rw_scripts, script, show, snapshot,
};
use common::*;

use testkit::cmd;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use resp::{Conn, Sub, R};
use std::time::Duration;

/// The built-in SHA1 of each operation (redisson-family.md).
const BUILTIN: [(&str, &str); 19] = [
    ("rw-read-acquire", "95553a6ff11176c18e71344e89d116b06fd6f753"),
    ("rw-read-unlock-publish", "f5469be4bfe5232d519471092634b3ee84e5ee6f"),
    ("rw-read-unlock", "92a54c31a4dc3b46f81e24a6dd5bb7d677c6f882"),
    ("rw-read-unlock-latch", "5947c0fee6ca25ae094ec1b3e7a2559a9273d29f"),
    ("rw-read-unlock-latch-nil", "6e1b10e11ac0a3ed8e902562ecd32ce01b553039"),
    ("rw-read-forceunlock-publish", "23f9bc91439172625235ce2ee06d6647f08a7e27"),
    ("rw-read-forceunlock", "27dbe744e95c1d854a7f556cc6817030de2d0d01"),
    ("rw-read-islocked", "8ad44f1ba014938c20da38206b6d496c85ec1aed"),
    ("rw-read-renew", "6563941ff57e01b8cf61e86907b80686438a2f74"),
    ("rw-read-renew-batch-bug", "1affef780a01e1406cb1968c62918f618d10d6a3"),
    ("rw-read-renew-batch", "d6564f42b98d6eece0e940a478ee248f80b8a90a"),
    ("rw-read-renew-batch-own", "38d2b478dfbe264ab67c221b7e4be62245f00ba0"),
    ("rw-write-acquire", "6306ba3bf1f563b284bed52d305fce615c6664d9"),
    ("rw-write-unlock-publish", "baa634f6184acc1b8f145e810a0e0e00967a3cbe"),
    ("rw-write-unlock", "319a1cdf1b56c767a0a9adf2224250bf811f110c"),
    ("rw-write-unlock-latch", "d29c5559782035515d32e926762830b3304b49be"),
    ("rw-write-unlock-latch-nil", "21f5fb0f8ddfa9be5c3e0c9757c128796add75c6"),
    ("rw-write-forceunlock-publish", "23639b0b2d18d26ce352e148ff4ac5b8e984b696"),
    ("rw-write-forceunlock", "2e2cb2a3b13e2e80e4236ef6a25beaf365dba608"),
];

const LOCKS: [&str; 4] = ["r1", "r2", "{t}r3", "a{b"];
const OWNERS: [&str; 3] =
    ["11111111-2222-3333-4444-555555555555:1", "11111111-2222-3333-4444-555555555555:2", "u:9"];

/// `{K}`, or `K` when it contains `{`.
fn kp(lock: &str) -> String {
    if lock.contains('{') {
        lock.to_string()
    } else {
        format!("{{{lock}}}")
    }
}

fn channel(lock: &str) -> String {
    format!("redisson_rwlock:{}", kp(lock))
}

fn prefix(lock: &str, owner: &str) -> String {
    format!("{}:{owner}:rwlock_timeout", kp(lock))
}

fn latch(lock: &str, id: u32) -> String {
    format!("redisson_unlock_latch:{}:{id:032x}", kp(lock))
}

fn all_channels() -> Vec<Vec<u8>> {
    LOCKS.iter().map(|l| channel(l).into_bytes()).collect()
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// (operation, KEYS, ARGV) of a Redisson-shaped call.
type Call = (&'static str, Vec<String>, Vec<String>);

fn call_for(
    op: &'static str,
    lock: &str,
    owner: &str,
    lease: &str,
    publish: &str,
    latch_id: u32,
    latch_ms: &str,
) -> Call {
    let w = format!("{owner}:write");
    let (keys, args) = match op {
        "rw-read-acquire" => (vec![lock.into(), prefix(lock, owner)], s(&[lease, owner, &w])),
        "rw-read-unlock-publish" => {
            (vec![lock.into(), channel(lock), prefix(lock, owner), kp(lock)], s(&["0", owner]))
        }
        "rw-read-unlock" => {
            (vec![lock.into(), channel(lock), prefix(lock, owner), kp(lock)], s(&["0", owner, publish]))
        }
        "rw-read-unlock-latch" | "rw-read-unlock-latch-nil" => (
            vec![lock.into(), channel(lock), prefix(lock, owner), kp(lock), latch(lock, latch_id)],
            s(&["0", owner, publish, latch_ms]),
        ),
        "rw-read-forceunlock-publish" => (vec![lock.into(), channel(lock)], s(&["0"])),
        "rw-read-forceunlock" => (vec![lock.into(), channel(lock)], s(&["0", publish])),
        "rw-read-islocked" => (vec![lock.into()], vec![]),
        "rw-read-renew" => (vec![lock.into(), kp(lock)], s(&[lease, owner])),
        "rw-write-acquire" => (vec![lock.into()], s(&[lease, &w])),
        "rw-write-unlock-publish" => (vec![lock.into(), channel(lock)], s(&["1", lease, &w])),
        "rw-write-unlock" => (vec![lock.into(), channel(lock)], s(&["1", lease, &w, publish])),
        "rw-write-unlock-latch" | "rw-write-unlock-latch-nil" => {
            (vec![lock.into(), channel(lock), latch(lock, latch_id)], s(&["1", lease, &w, publish, latch_ms]))
        }
        "rw-write-forceunlock-publish" => (vec![lock.into(), channel(lock)], s(&["1"])),
        "rw-write-forceunlock" => (vec![lock.into(), channel(lock)], s(&["1", publish])),
        other => panic!("not a single-lock op: {other}"),
    };
    (op, keys, args)
}

fn lease(rng: &mut StdRng) -> String {
    match rng.gen_range(0..50) {
        0 => "x".into(),
        1 => "0".into(),
        2 => "-5".into(),
        3 => "1.5".into(),
        4 => " 100".into(),
        5 => "9223372036854775807".into(),
        6 | 7 => "3".into(),
        _ => ["30000", "60000", "45000"][rng.gen_range(0..3)].into(),
    }
}

fn publish_cmd(rng: &mut StdRng) -> &'static str {
    ["PUBLISH", "PUBLISH", "SPUBLISH", "publish", "RPUSH"][rng.gen_range(0..5)]
}

fn gen_call(rng: &mut StdRng) -> Call {
    const OPS: [&str; 24] = [
        "rw-read-acquire",
        "rw-read-acquire",
        "rw-read-acquire",
        "rw-read-unlock-publish",
        "rw-read-unlock",
        "rw-read-unlock-latch",
        "rw-read-unlock-latch-nil",
        "rw-read-unlock-latch-nil",
        "rw-read-forceunlock-publish",
        "rw-read-forceunlock",
        "rw-read-islocked",
        "rw-read-renew",
        "rw-read-renew-batch-bug",
        "rw-read-renew-batch",
        "rw-read-renew-batch-own",
        "rw-write-acquire",
        "rw-write-acquire",
        "rw-write-unlock-publish",
        "rw-write-unlock",
        "rw-write-unlock-latch",
        "rw-write-unlock-latch-nil",
        "rw-write-unlock-latch-nil",
        "rw-write-forceunlock-publish",
        "rw-write-forceunlock",
    ];
    let op = OPS[rng.gen_range(0..OPS.len())];
    let lock = LOCKS[rng.gen_range(0..LOCKS.len())];
    let owner = OWNERS[rng.gen_range(0..OWNERS.len())];
    let l = lease(rng);
    match op {
        "rw-read-renew-batch-bug" | "rw-read-renew-batch" | "rw-read-renew-batch-own" => {
            let n = rng.gen_range(1..=3);
            let (mut keys, mut args) = (vec![], vec![l]);
            for _ in 0..n {
                let lk = LOCKS[rng.gen_range(0..LOCKS.len())];
                keys.push(lk.to_string());
                keys.push(kp(lk));
                if op == "rw-read-renew-batch-own" {
                    let m = rng.gen_range(0..=2);
                    args.push(m.to_string());
                    for _ in 0..m {
                        args.push(OWNERS[rng.gen_range(0..OWNERS.len())].to_string());
                    }
                } else {
                    args.push(OWNERS[rng.gen_range(0..OWNERS.len())].to_string());
                }
            }
            (op, keys, args)
        }
        _ => {
            let ms = if rng.gen_ratio(1, 20) { "0" } else { "13500" };
            call_for(op, lock, owner, &l, publish_cmd(rng), rng.gen_range(0..3), ms)
        }
    }
}

fn argv(c: &Call, evalsha: bool) -> Vec<Vec<u8>> {
    let sc = script(c.0);
    let mut v: Vec<Vec<u8>> = if evalsha {
        vec![b"EVALSHA".to_vec(), sc.sha.into_bytes()]
    } else {
        vec![b"EVAL".to_vec(), sc.body.to_vec()]
    };
    v.push(c.1.len().to_string().into_bytes());
    v.extend(c.1.iter().map(|k| k.clone().into_bytes()));
    v.extend(c.2.iter().map(|k| k.clone().into_bytes()));
    v
}

/// Keyspace changes that are not scripts: expiring holds, foreign writes, odd values.
fn gen_side_effect(rng: &mut StdRng) -> Vec<String> {
    let lock = LOCKS[rng.gen_range(0..LOCKS.len())];
    let owner = OWNERS[rng.gen_range(0..OWNERS.len())];
    let hold = format!("{}:{}", prefix(lock, owner), rng.gen_range(1..3));
    match rng.gen_range(0..15) {
        0 | 12 | 13 | 14 => s(&["DEL", lock]),
        1 => s(&["SET", lock, "not-a-hash"]),
        2 => s(&["HSET", lock, owner, ["abc", "1.5", "0", " 2"][rng.gen_range(0..4)]]),
        3 => s(&["HSET", lock, "mode", "foo"]),
        4 => s(&["HDEL", lock, "mode"]),
        5 | 6 => s(&["PEXPIRE", &hold, "1"]),
        7 => s(&["DEL", &hold]),
        8 => s(&["SET", &latch(lock, rng.gen_range(0..3)), ["1.5", "abc", "7", " 1"][rng.gen_range(0..4)]]),
        9 => s(&["DEL", &latch(lock, rng.gen_range(0..3))]),
        10 => s(&["HSET", lock, "x:9", "2"]),
        _ => s(&["PEXPIRE", lock, "1"]),
    }
}

/// Replies equal, except PTTLs (taken a moment apart on two servers) within a few ms.
fn same_reply(a: &R, b: &R) -> bool {
    match (a, b) {
        (R::Int(x), R::Int(y)) if (100..=10_000_000).contains(x) => (x - y).abs() <= 50,
        (R::Arr(x), R::Arr(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_reply(p, q)),
        _ => a == b,
    }
}

fn to_bytes(v: &[String]) -> Vec<Vec<u8>> {
    v.iter().map(|x| x.clone().into_bytes()).collect()
}

fn differential(seed: u64, ops: usize) {
    let lua = Server::start_opts(Opts::default().without_module());
    let native = Server::start_opts(native_opts());
    let (mut a, mut b) = (Conn::new(lua.port), Conn::new(native.port));
    let (mut ka, mut kb) = (Conn::new(lua.port), Conn::new(native.port));
    load_rw(&mut a);
    load_rw(&mut b);
    let mut subs: Vec<(Sub, Sub, &str)> = vec![
        (
            Sub::new(lua.port, "SUBSCRIBE", &all_channels()),
            Sub::new(native.port, "SUBSCRIBE", &all_channels()),
            "PUBLISH",
        ),
        (
            Sub::new(lua.port, "SSUBSCRIBE", &all_channels()),
            Sub::new(native.port, "SSUBSCRIBE", &all_channels()),
            "SPUBLISH",
        ),
    ];
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..ops {
        let (v, tiny) = if rng.gen_ratio(1, 7) {
            let w = gen_side_effect(&mut rng);
            let tiny = w[0] == "PEXPIRE";
            (to_bytes(&w), tiny)
        } else {
            let c = gen_call(&mut rng);
            let tiny = c.2.iter().any(|x| x == "3");
            (argv(&c, rng.gen_bool(0.7)), tiny)
        };
        let (ra, rb) = (a.call(&v), b.call(&v));
        assert!(same_reply(&ra, &rb), "seed {seed} op {i}: {}\n lua:    {ra:?}\n native: {rb:?}", show(&v));
        if tiny {
            // Let keys with a lease of a few ms expire on both servers before the next call.
            std::thread::sleep(Duration::from_millis(15));
        }
        if i % 25 == 0 {
            assert_same_keyspace(&mut ka, &mut kb, 100, &format!("seed {seed} op {i}"));
        }
    }
    assert_same_keyspace(&mut ka, &mut kb, 100, &format!("seed {seed} end"));
    for (sa, sb, pubcmd) in subs.iter_mut() {
        for ch in all_channels() {
            let (mut pa, mut pb) = (Conn::new(lua.port), Conn::new(native.port));
            let ma = sa.until_marker(&mut pa, pubcmd, &ch);
            let mb = sb.until_marker(&mut pb, pubcmd, &ch);
            assert_eq!(ma, mb, "seed {seed}: {pubcmd} messages on {}", String::from_utf8_lossy(&ch));
        }
    }
    let native_runs = info_counts(&mut kb, "_native");
    for s in rw_scripts() {
        let k = s.kind.replace('-', "_");
        assert!(native_runs.get(&k).copied().unwrap_or(0) > 0, "seed {seed}: no native {k}: {native_runs:?}");
    }
    let lua_runs = info_counts(&mut kb, "_lua");
    eprintln!("seed {seed}: native {native_runs:?}\n lua {lua_runs:?}");
    assert!(lua_runs.values().sum::<i64>() > 0, "no call was left to Lua");
}

#[test]
fn random_rw_sequences_match_lua_exactly_seed_1() {
    differential(1, 1500);
}

#[test]
fn random_rw_sequences_match_lua_exactly_seed_2() {
    differential(2, 1500);
}

#[test]
fn builtin_rw_shas_run_natively_like_the_scripts() {
    let lua = Server::start_opts(Opts::default().without_module());
    let native = Server::start_opts(Opts::default().module_arg("redisson-scripts native"));
    let (mut a, mut b) = (Conn::new(lua.port), Conn::new(native.port));
    load_rw(&mut a);
    let mut sub_a = Sub::new(lua.port, "SUBSCRIBE", &all_channels());
    let mut sub_b = Sub::new(native.port, "SUBSCRIBE", &all_channels());
    let (o1, o2) = (OWNERS[0], OWNERS[1]);
    let c = |op, lock, owner| call_for(op, lock, owner, "30000", "PUBLISH", 1, "13500");
    let pair = |op: &'static str, args: Vec<String>| -> Call {
        (op, vec!["r1".into(), kp("r1"), "r2".into(), kp("r2")], args)
    };
    let steps: Vec<Call> = vec![
        c("rw-read-acquire", "r1", o1),
        c("rw-read-acquire", "r1", o1),
        c("rw-read-acquire", "r1", o2),
        c("rw-read-islocked", "r1", o1),
        c("rw-write-acquire", "r1", o1),
        c("rw-read-renew", "r1", o1),
        pair("rw-read-renew-batch", s(&["40000", o1, o1])),
        pair("rw-read-renew-batch-bug", s(&["40000", o2, o1])),
        pair("rw-read-renew-batch-own", s(&["40000", "2", o1, o2, "1", o1])),
        c("rw-read-unlock-publish", "r1", o1),
        c("rw-read-unlock", "r1", o2),
        c("rw-read-unlock-latch", "r1", o1),
        c("rw-read-unlock-latch", "r1", o1),
        c("rw-read-unlock-latch-nil", "r1", o1),
        c("rw-write-acquire", "r2", o1),
        c("rw-write-acquire", "r2", o1),
        c("rw-read-acquire", "r2", o1),
        c("rw-read-acquire", "r2", o2),
        c("rw-read-islocked", "r2", o1),
        c("rw-write-unlock-publish", "r2", o1),
        c("rw-write-unlock", "r2", o1),
        c("rw-read-islocked", "r2", o1),
        c("rw-read-forceunlock", "r2", o1),
        c("rw-write-acquire", "{t}r3", o2),
        c("rw-read-forceunlock-publish", "{t}r3", o1),
        c("rw-write-forceunlock-publish", "{t}r3", o1),
        c("rw-write-acquire", "a{b", o2),
        c("rw-write-unlock-latch", "a{b", o2),
        c("rw-write-unlock-latch-nil", "a{b", o2),
        c("rw-write-acquire", "a{b", o2),
        c("rw-write-forceunlock", "a{b", o1),
        c("rw-write-unlock-latch-nil", "r4", o1),
        c("rw-read-unlock-latch-nil", "r4", o1),
    ];
    for call in &steps {
        let sha = BUILTIN.iter().find(|(k, _)| *k == call.0).unwrap().1;
        let mut va = argv(call, true);
        let mut vb = va.clone();
        vb[1] = sha.as_bytes().to_vec();
        let (ra, rb) = (a.call(&va), b.call(&vb));
        assert!(same_reply(&ra, &rb), "{call:?}: {ra:?} vs {rb:?}");
        assert_same_keyspace(&mut a, &mut b, 100, call.0);
        va.clear();
    }
    for ch in all_channels() {
        let ma = sub_a.until_marker(&mut Conn::new(lua.port), "PUBLISH", &ch);
        let mb = sub_b.until_marker(&mut Conn::new(native.port), "PUBLISH", &ch);
        assert_eq!(ma, mb);
    }
    let counts = info_counts(&mut b, "_native");
    assert_eq!(
        counts.values().sum::<i64>(),
        steps.len() as i64,
        "every builtin call ran natively: {counts:?}"
    );
    for (op, _) in BUILTIN {
        assert!(counts[&op.replace('-', "_")] > 0, "{op}: {counts:?}");
    }
}

#[test]
fn calls_the_script_fails_on_get_luas_own_reply() {
    let lua = Server::start_opts(Opts::default().without_module());
    let native = Server::start_opts(native_opts());
    let (mut a, mut b) = (Conn::new(lua.port), Conn::new(native.port));
    load_rw(&mut a);
    load_rw(&mut b);
    let (o1, o2) = (OWNERS[0], OWNERS[1]);
    let mut cases: Vec<Vec<String>> = vec![
        s(&["SET", "str", "v"]),
        s(&["HSET", "h", "mode", "read", o1, "x"]),
        s(&["HSET", "w", "mode", "write", &format!("{o1}:write"), "1"]),
        s(&["HSET", "big", "mode", "read", o1, "100000000000000"]),
    ];
    for (op, lock, owner, lease) in [
        ("rw-read-acquire", "str", o1, "30000"),
        ("rw-read-acquire", "h", o1, "30000"),
        ("rw-read-acquire", "h", o2, "soon"),
        ("rw-read-acquire", "big", o1, "30000"),
        ("rw-write-acquire", "w", o1, "x"),
        ("rw-write-acquire", "w", o1, "0x10"),
        ("rw-write-acquire", "w", o1, "1.5"),
        ("rw-write-unlock", "w", o1, "nope"),
        ("rw-read-unlock", "h", o1, "30000"),
        ("rw-read-unlock", "str", o1, "30000"),
        ("rw-read-islocked", "str", o1, "30000"),
    ] {
        let c = call_for(op, lock, owner, lease, "PUBLISH", 0, "13500");
        let v = argv(&c, true);
        cases.push(v.into_iter().map(|x| String::from_utf8(x).unwrap()).collect());
    }
    // 1affef78 with a count past the last key: Lua's nil concatenation, after PEXPIREs.
    cases.push(s(&["HSET", "bug", "mode", "read", o1, "5"]));
    cases.push(
        [
            &[
                "EVALSHA".to_string(),
                script("rw-read-renew-batch-bug").sha,
                "2".into(),
                "bug".into(),
                kp("bug"),
            ][..],
            &s(&["30000", o1]),
        ]
        .concat(),
    );
    // A huge hold count: a walk longer than the module's runs in Lua.
    cases.push(s(&["HSET", "many", "mode", "read", o2, "1", "x:1", "150000"]));
    cases.push(
        argv(&call_for("rw-read-unlock", "many", o2, "0", "PUBLISH", 0, "1"), true)
            .into_iter()
            .map(|x| String::from_utf8(x).unwrap())
            .collect(),
    );
    for v in &cases {
        let v = to_bytes(v);
        let (ra, rb) = (a.call(&v), b.call(&v));
        assert_eq!(ra, rb, "{}", show(&v));
    }
    assert_same_keyspace(&mut a, &mut b, 100, "after the Lua cases");
    let lua_runs = info_counts(&mut b, "_lua");
    assert!(lua_runs.values().sum::<i64>() >= 10, "{lua_runs:?}");
}

#[test]
fn native_unlocks_grant_blocked_lock_waiters() {
    let s = Server::start_opts(native_opts());
    let mut c = Conn::new(s.port);
    let mut sub = Sub::new(s.port, "SUBSCRIBE", &[channel("k").into_bytes()]);
    let o = OWNERS[0];
    let ra = |c: &mut Conn, op, owner| {
        let call = call_for(op, "k", owner, "30000", "PUBLISH", 1, "13500");
        let sha = BUILTIN.iter().find(|(k, _)| *k == op).unwrap().1;
        let mut v = argv(&call, true);
        v[1] = sha.as_bytes().to_vec();
        c.call(&v)
    };
    assert_eq!(ra(&mut c, "rw-read-acquire", o), R::Nil);
    let mut waiter = Conn::new(s.port);
    waiter.send(&["LOCK.ACQUIRE", "k", "py:1", "30000", "WAIT", "0", "WRITE"]);
    let mut rc = s.conn();
    assert!(wait_for(Duration::from_secs(10), || (stat(&mut rc, "waiters") == 1).then_some(())).is_some());
    // The 3.44+ read unlock frees it: granted to the writer, the latch says 1, no message.
    assert_eq!(ra(&mut c, "rw-read-unlock-latch-nil", o), R::Int(1));
    assert_eq!(waiter.read().unwrap(), R::Nil);
    assert_eq!(cmd!(c, "HGET", "k", "mode").str(), "write");
    assert_eq!(cmd!(c, "HGET", "k", "py:1:write").str(), "1");
    assert_eq!(cmd!(c, "GET", latch("k", 1)).str(), "1");
    // A Redisson read acquire now gets the PTTL; a LOCK.* reader waits; the writer's release
    // by force unlock grants it.
    assert!(matches!(ra(&mut c, "rw-read-acquire", o), R::Int(n) if n > 0));
    waiter.send(&["LOCK.ACQUIRE", "k", "py:2", "30000", "WAIT", "0", "READ"]);
    assert!(wait_for(Duration::from_secs(10), || (stat(&mut rc, "waiters") == 1).then_some(())).is_some());
    assert_eq!(ra(&mut c, "rw-write-forceunlock", o), R::Int(1));
    assert_eq!(waiter.read().unwrap(), R::Nil);
    assert_eq!(cmd!(c, "HGET", "k", "mode").str(), "read");
    // A write unlock that leaves the writer's read holds turns the lock readable: a LOCK.*
    // reader is granted, nothing is published.
    assert!(!cmd!(c, "LOCK.FORCERELEASE", "k").is_err());
    assert_eq!(ra(&mut c, "rw-write-acquire", OWNERS[1]), R::Nil);
    assert_eq!(ra(&mut c, "rw-read-acquire", OWNERS[1]), R::Nil);
    waiter.send(&["LOCK.ACQUIRE", "k", "py:3", "30000", "WAIT", "0", "READ"]);
    assert!(wait_for(Duration::from_secs(10), || (stat(&mut rc, "waiters") == 1).then_some(())).is_some());
    assert_eq!(cmd!(c, "DEL", latch("k", 1)), R::Int(1), "a new unlock request");
    assert_eq!(ra(&mut c, "rw-write-unlock-latch-nil", OWNERS[1]), R::Int(1));
    assert_eq!(waiter.read().unwrap(), R::Nil);
    assert_eq!(cmd!(c, "HGET", "k", "mode").str(), "read");
    assert_eq!(cmd!(c, "HGET", "k", "py:3").str(), "1");
    // With nobody waiting, a native unlock publishes Redisson's message.
    assert_eq!(cmd!(c, "DEL", "k"), R::Int(1));
    assert_eq!(ra(&mut c, "rw-write-acquire", o), R::Nil);
    assert_eq!(ra(&mut c, "rw-write-unlock", o), R::Int(1));
    let msgs = sub.until_marker(&mut Conn::new(s.port), "PUBLISH", channel("k").as_bytes());
    // LOCK.FORCERELEASE's "1" and this unlock's: the unlocks that granted published nothing.
    assert_eq!(msgs.iter().map(|m| m.1.clone()).collect::<Vec<_>>(), vec![b"1".to_vec(); 2], "{msgs:?}");
}

fn class(r: &R) -> Option<String> {
    match r {
        R::Err(e) => Some(e.split(' ').next().unwrap_or("").to_string()),
        _ => None,
    }
}

#[test]
fn acl_rules_apply_to_every_command_of_the_path() {
    const USERS: [(&str, &str); 7] = [
        ("full", "+@all ~* &*"),
        ("nopttl", "+@all -pttl ~* &*"),
        ("nohset", "+@all -hset ~* &*"),
        ("nohold", "+@all ~r* ~redisson_* &*"),
        ("nopub", "+@all -publish -spublish ~* &*"),
        ("nochannel", "+@all ~* resetchannels"),
        ("readonly", "+@all %R~* &*"),
    ];
    let sides: Vec<(Server, Conn)> = [Opts::default().without_module(), native_opts()]
        .into_iter()
        .map(|o| {
            let srv = Server::start_opts(o);
            let mut c = Conn::new(srv.port);
            load_rw(&mut c);
            for (name, rules) in USERS {
                let mut args = vec!["ACL", "SETUSER", name, "reset", "on", ">pw"];
                args.extend(rules.split(' '));
                assert_eq!(c.call(&args), R::Simple("OK".into()));
            }
            (srv, c)
        })
        .collect();
    let (o1, o2) = (OWNERS[0], OWNERS[1]);
    // (set-up, call) pairs covering every kind of command on the paths.
    let setup_read = vec![
        s(&["HSET", "r1", "mode", "read", o1, "1", o2, "1"]),
        s(&["SET", &format!("{}:1", prefix("r1", o1)), "1", "PX", "60000"]),
        s(&["SET", &format!("{}:1", prefix("r1", o2)), "1", "PX", "60000"]),
    ];
    let setup_write = vec![s(&["HSET", "r1", "mode", "write", &format!("{o1}:write"), "1"])];
    let cases: Vec<(Vec<Vec<String>>, Call)> = vec![
        (vec![], call_for("rw-read-acquire", "r1", o1, "30000", "PUBLISH", 0, "13500")),
        (setup_read.clone(), call_for("rw-read-acquire", "r1", o1, "30000", "PUBLISH", 0, "13500")),
        (setup_read.clone(), call_for("rw-read-unlock-latch", "r1", o1, "30000", "PUBLISH", 0, "13500")),
        (setup_read.clone(), call_for("rw-read-unlock", "r1", o1, "30000", "SPUBLISH", 0, "13500")),
        (setup_read.clone(), call_for("rw-read-renew", "r1", o1, "30000", "PUBLISH", 0, "13500")),
        (setup_read.clone(), call_for("rw-read-forceunlock", "r1", o1, "30000", "PUBLISH", 0, "13500")),
        (
            setup_write.clone(),
            call_for("rw-write-unlock-latch-nil", "r1", o1, "30000", "PUBLISH", 0, "13500"),
        ),
        (setup_write.clone(), call_for("rw-write-acquire", "r1", o1, "30000", "PUBLISH", 0, "13500")),
        (vec![], call_for("rw-write-acquire", "r1", o1, "30000", "PUBLISH", 0, "13500")),
        (setup_read.clone(), call_for("rw-read-islocked", "r1", o1, "30000", "PUBLISH", 0, "13500")),
    ];
    let mut refused = 0;
    for (user, _) in USERS {
        for (setup, call) in &cases {
            let mut out = vec![];
            for (srv, _) in &sides {
                let mut admin = Conn::new(srv.port);
                assert_eq!(cmd!(admin, "FLUSHALL"), R::Simple("OK".into()));
                for w in setup {
                    assert!(!admin.call(w).is_err());
                }
                let before = snapshot(&mut admin);
                let mut u = Conn::new(srv.port);
                assert_eq!(cmd!(u, "AUTH", user, "pw"), R::Simple("OK".into()));
                let r = u.call(&argv(call, true));
                out.push((r, before, snapshot(&mut admin)));
            }
            let ctx = format!("user {user}, {call:?}");
            let (rl, rn) = (&out[0].0, &out[1].0);
            assert_eq!(class(rn), class(rl), "{ctx}: native {rn:?} vs lua {rl:?}");
            if class(rn).is_some() {
                refused += 1;
                let (before, after) = (&out[1].1, &out[1].2);
                let content = |m: &std::collections::BTreeMap<Vec<u8>, common::scripts::KeyState>| {
                    m.iter().map(|(k, v)| (k.clone(), v.content.clone())).collect::<Vec<_>>()
                };
                assert_eq!(content(before), content(after), "{ctx}: a refused native call wrote");
            } else {
                assert!(same_reply(rn, rl), "{ctx}: {rn:?} vs {rl:?}");
                let keys = |m: &std::collections::BTreeMap<Vec<u8>, common::scripts::KeyState>| {
                    m.iter().map(|(k, v)| (k.clone(), v.content.clone())).collect::<Vec<_>>()
                };
                assert_eq!(keys(&out[0].2), keys(&out[1].2), "{ctx}: keyspace");
            }
        }
        let _ = &sides;
    }
    assert!(refused >= 15, "the matrix must refuse calls: {refused}");
}

#[test]
fn write_refusals_answer_as_lua_does() {
    let sides: Vec<Server> =
        [Opts::default().without_module(), native_opts()].into_iter().map(Server::start_opts).collect();
    let (o1, o2) = (OWNERS[0], OWNERS[1]);
    let mut outs = vec![];
    for srv in &sides {
        let mut c = Conn::new(srv.port);
        load_rw(&mut c);
        assert!(!cmd!(c, "HSET", "r1", "mode", "read", o1, "1").is_err());
        assert!(!cmd!(c, "SET", format!("{}:1", prefix("r1", o1)), "1", "PX", "60000").is_err());
        assert!(!cmd!(c, "HSET", "w1", "mode", "write", format!("{o2}:write"), "1").is_err());
        assert!(!cmd!(c, "PEXPIRE", "w1", "60000").is_err());
        assert_eq!(cmd!(c, "CONFIG", "SET", "min-replicas-to-write", "1"), R::Simple("OK".into()));
        let mut replies = vec![];
        for call in [
            call_for("rw-read-acquire", "r1", o2, "30000", "PUBLISH", 0, "13500"),
            call_for("rw-read-acquire", "w1", o1, "30000", "PUBLISH", 0, "13500"),
            call_for("rw-read-unlock-latch-nil", "r1", o1, "30000", "PUBLISH", 0, "13500"),
            call_for("rw-read-islocked", "r1", o1, "30000", "PUBLISH", 0, "13500"),
            call_for("rw-write-acquire", "fresh", o1, "30000", "PUBLISH", 0, "13500"),
            call_for("rw-write-unlock", "w1", o2, "30000", "PUBLISH", 0, "13500"),
            call_for("rw-write-forceunlock", "w1", o2, "30000", "PUBLISH", 0, "13500"),
            call_for("rw-read-renew", "r1", o1, "30000", "PUBLISH", 0, "13500"),
        ] {
            let r = c.call(&argv(&call, true));
            replies.push((call.0, class(&r), if class(&r).is_some() { R::Nil } else { r }));
        }
        assert_eq!(cmd!(c, "CONFIG", "SET", "min-replicas-to-write", "0"), R::Simple("OK".into()));
        let snap: Vec<_> = snapshot(&mut c).into_iter().map(|(k, v)| (k, v.content)).collect();
        outs.push((replies, snap));
    }
    for (x, y) in outs[0].0.iter().zip(&outs[1].0) {
        assert_eq!((x.0, &x.1), (y.0, &y.1), "error classes");
        assert!(same_reply(&x.2, &y.2), "{x:?} vs {y:?}");
    }
    assert!(
        outs[0].0.iter().filter(|r| r.1.as_deref() == Some("NOREPLICAS")).count() >= 4,
        "{:?}",
        outs[0].0
    );
    assert_eq!(outs[0].1, outs[1].1, "nothing written while refused");
}

#[test]
fn hostile_rw_calls_never_crash_the_server() {
    let mut srv = Server::start_opts(native_opts());
    let mut c = Conn::new(srv.port);
    let mut rng = StdRng::seed_from_u64(78);
    let shas: Vec<String> =
        BUILTIN.iter().map(|(_, s)| s.to_string()).chain(rw_scripts().into_iter().map(|s| s.sha)).collect();
    for (k, v) in [("h", "3"), ("h", "99999999999999999999"), ("h", "-7"), ("h", "1e3")] {
        cmd!(c, "HSET", k, "mode", "read", "o", v);
    }
    cmd!(c, "SET", "s", "x");
    for _ in 0..3000 {
        let mut v: Vec<Vec<u8>> =
            vec![b"EVALSHA".to_vec(), shas[rng.gen_range(0..shas.len())].clone().into_bytes()];
        let n = rng.gen_range(0..7);
        v.push(if rng.gen_ratio(1, 6) { b"-1".to_vec() } else { n.to_string().into_bytes() });
        for _ in 0..rng.gen_range(0..12) {
            let choices: [&[u8]; 12] = [
                b"h",
                b"s",
                b"{h}",
                b"30000",
                b"0",
                b"PUBLISH",
                b"",
                b"\x00\xff",
                b"-5",
                b"o",
                b"99999999",
                b"2",
            ];
            v.push(choices[rng.gen_range(0..choices.len())].to_vec());
        }
        let r = c.call(&v);
        if let R::Err(e) = &r {
            assert!(!e.contains("internal error"), "{e}");
        }
        if rng.gen_ratio(1, 50) {
            cmd!(
                c,
                "HSET",
                "h",
                "mode",
                ["read", "write", "x"][rng.gen_range(0..3)],
                "o",
                ["3", "-2", "abc"][rng.gen_range(0..3)]
            );
        }
    }
    srv.assert_alive();
    let mut rc = srv.conn();
    assert_eq!(stat(&mut rc, "panics_caught"), 0);
}

#[test]
fn replicas_without_the_module_stay_equal() {
    let master = Server::start_opts(native_opts());
    let replica = Server::start_opts(Opts::default().without_module());
    replica.replicate_from(&master);
    let mut m = Conn::new(master.port);
    let mut r = Conn::new(replica.port);
    load_rw(&mut m);
    let mut rng = StdRng::seed_from_u64(11);
    for _ in 0..600 {
        let c = gen_call(&mut rng);
        m.call(&argv(&c, rng.gen_bool(0.5)));
    }
    assert_eq!(cmd!(m, "WAIT", 1, 5000), R::Int(1));
    assert_same_keyspace(&mut m, &mut r, 0, "replica");
    assert!(info_counts(&mut m, "_native").values().sum::<i64>() > 300);
}

//! `lock.redisson-scripts native` (spec section 8): Redisson's lock scripts run natively.
//!
//! Redisson's own script text may not be in this repository, so the native code paths are
//! driven through our own Lua implementation of every script kind (`lua/`), registered with
//! `lock.redisson-extra-scripts`. The same calls go to a server without the module (the
//! scripts run in Lua) and to a server with `native`; replies, keyspace and published messages
//! must be identical. The built-in table's 11 SHA1s are checked in the unit tests and here by
//! running them natively next to our scripts in Lua.

mod common;
use common::scripts::{
    self, assert_same_keyspace, info_counts, load_all, native_opts, own_scripts, script, show,
};
use common::*;

use testkit::cmd;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use resp::{Conn, Sub, R};
use std::time::Duration;

/// The built-in SHA1 of each kind (Redisson 3.19+/3.22+/3.24+/3.44+ texts), from redisson-sha1.md.
const BUILTIN: [(&str, &str); 10] = [
    ("acquire", "149c5a8bf18676fd99e9e6e24923bd64d9b62f94"),
    ("unlock-publish", "3ffe249c16dee540ac8ab32e39bd408626b9aff7"),
    ("unlock", "778cea8aada230ae060b432fc333adaec85f2f4c"),
    ("unlock-latch", "6866459238a13a701d42f4971f12d9f3a50e2442"),
    ("forceunlock-publish", "7e9c80b3d786b95d5d4aaf8fd73adb9775fa6fb1"),
    ("forceunlock", "605e338249a7a1d40df83b04f7658354f883b41b"),
    ("renew", "8e19a1ddbdee9138df9f32a480c57addab4353d1"),
    ("renew-batch", "6a3d31570dc6f4b0bd32bcdc8e75667747c6f635"),
    ("fenced-acquire", "49babb5a1e6a0c5f188c2ae62b93b51cdfd63e45"),
    ("fenced-acquire-plain", "46b5551ba403d6152a7a6eca122e08728d6c8c66"),
];

const LOCKS: [&str; 4] = ["l1", "l2", "{t}l3", "l4"];
const OWNERS: [&str; 4] =
    ["11111111-2222-3333-4444-555555555555:1", "11111111-2222-3333-4444-555555555555:2", "u:9", ""];

fn channel(lock: &str) -> String {
    if lock.contains('{') {
        format!("redisson_lock__channel:{lock}")
    } else {
        format!("redisson_lock__channel:{{{lock}}}")
    }
}

fn token_key(lock: &str) -> String {
    if lock.contains('{') {
        format!("redisson_lock_token:{lock}")
    } else {
        format!("redisson_lock_token:{{{lock}}}")
    }
}

fn latch(lock: &str, id: u32) -> String {
    let tag = if lock.contains('{') { lock.to_string() } else { format!("{{{lock}}}") };
    format!("redisson_unlock_latch:{tag}:{id:032x}")
}

fn all_channels() -> Vec<Vec<u8>> {
    LOCKS.iter().map(|l| channel(l).into_bytes()).collect()
}

/// One generated call: the script kind, KEYS, ARGV.
struct Call {
    kind: &'static str,
    keys: Vec<String>,
    args: Vec<String>,
}

fn lease(rng: &mut StdRng) -> String {
    match rng.gen_range(0..40) {
        0 => "x".into(),
        1 => "0".into(),
        2 => "-5".into(),
        3 => "1.5".into(),
        4 => "9223372036854775807".into(),
        _ => ["30000", "60000", "45000"][rng.gen_range(0..3)].into(),
    }
}

fn publish_cmd(rng: &mut StdRng) -> String {
    ["PUBLISH", "PUBLISH", "SPUBLISH", "publish", "RPUSH"][rng.gen_range(0..5)].into()
}

fn gen_call(rng: &mut StdRng) -> Call {
    let lock = LOCKS[rng.gen_range(0..LOCKS.len())];
    let owner = OWNERS[rng.gen_range(0..OWNERS.len())].to_string();
    let kinds = [
        "acquire",
        "acquire",
        "fenced-acquire",
        "fenced-acquire-plain",
        "unlock-publish",
        "unlock",
        "unlock-latch",
        "unlock-latch",
        "forceunlock-publish",
        "forceunlock",
        "renew",
        "renew-batch",
    ];
    let kind = kinds[rng.gen_range(0..kinds.len())];
    let (keys, args) = match kind {
        "acquire" => (vec![lock.into()], vec![lease(rng), owner]),
        "fenced-acquire" | "fenced-acquire-plain" => {
            (vec![lock.into(), token_key(lock)], vec![lease(rng), owner])
        }
        "unlock-publish" => (vec![lock.into(), channel(lock)], vec!["0".into(), lease(rng), owner]),
        "unlock" => (vec![lock.into(), channel(lock)], vec!["0".into(), lease(rng), owner, publish_cmd(rng)]),
        "unlock-latch" => {
            let ttl = if rng.gen_ratio(1, 20) { "0".to_string() } else { "13500".to_string() };
            (
                vec![lock.into(), channel(lock), latch(lock, rng.gen_range(0..3))],
                vec!["0".into(), lease(rng), owner, publish_cmd(rng), ttl],
            )
        }
        "forceunlock-publish" => (vec![lock.into(), channel(lock)], vec!["0".into()]),
        "forceunlock" => (vec![lock.into(), channel(lock)], vec!["0".into(), publish_cmd(rng)]),
        "renew" => (vec![lock.into()], vec![lease(rng), owner]),
        _ => {
            let n = rng.gen_range(1..=4);
            let mut keys = vec![];
            let mut args = vec![lease(rng)];
            for _ in 0..n {
                keys.push(LOCKS[rng.gen_range(0..LOCKS.len())].to_string());
                args.push(OWNERS[rng.gen_range(0..OWNERS.len())].to_string());
            }
            (keys, args)
        }
    };
    Call { kind, keys, args }
}

/// EVAL or EVALSHA argv for `call`, sometimes with a shape the script does not have.
fn argv(call: &Call, evalsha: bool, bad_shape: bool) -> Vec<Vec<u8>> {
    let s = script(call.kind);
    let mut v: Vec<Vec<u8>> = if evalsha {
        vec![b"EVALSHA".to_vec(), s.sha.into_bytes()]
    } else {
        vec![b"EVAL".to_vec(), s.body.to_vec()]
    };
    let mut numkeys = call.keys.len();
    let mut args = call.args.clone();
    if bad_shape {
        if args.len() > 1 {
            args.pop();
        } else {
            args.push("extra".into());
        }
        if call.kind == "renew-batch" {
            numkeys += 0; // one argument short of N + 1
        }
    }
    v.push(numkeys.to_string().into_bytes());
    v.extend(call.keys.iter().map(|k| k.clone().into_bytes()));
    v.extend(args.into_iter().map(String::into_bytes));
    v
}

/// Keyspace changes that are not scripts: the things Redisson and others do around them.
fn gen_side_effect(rng: &mut StdRng) -> Vec<Vec<u8>> {
    let lock = LOCKS[rng.gen_range(0..LOCKS.len())];
    let words: Vec<String> = match rng.gen_range(0..8) {
        0 => vec!["DEL".into(), latch(lock, rng.gen_range(0..3))],
        1 => vec!["DEL".into(), lock.into()],
        2 => vec!["SET".into(), lock.into(), "not-a-hash".into()],
        3 => vec!["HSET".into(), lock.into(), OWNERS[0].into(), "abc".into()],
        4 => vec![
            "SET".into(),
            token_key(lock),
            ["abc", "9223372036854775807", "41"][rng.gen_range(0..3)].into(),
        ],
        5 => vec![
            "SET".into(),
            latch(lock, rng.gen_range(0..3)),
            ["1.5", "abc", "7", " 1"][rng.gen_range(0..4)].into(),
        ],
        6 => vec!["DEL".into(), token_key(lock)],
        _ => vec!["HSET".into(), token_key(lock), "f".into(), "v".into()],
    };
    words.into_iter().map(String::into_bytes).collect()
}

/// Replies equal, except PTTLs (taken a moment apart on two servers) within a few ms.
fn same_reply(a: &R, b: &R) -> bool {
    match (a, b) {
        (R::Int(x), R::Int(y)) if (1000..=1_000_000).contains(x) => (x - y).abs() <= 50,
        (R::Arr(x), R::Arr(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_reply(p, q)),
        _ => a == b,
    }
}

fn differential(seed: u64, ops: usize, resp3: bool) {
    let lua = Server::start_opts(Opts::default().without_module());
    let native = Server::start_opts(native_opts());
    let (mut a, mut b) = (Conn::new(lua.port), Conn::new(native.port));
    // Keyspace snapshots and INFO on RESP2 connections of their own.
    let (mut ka, mut kb) = (Conn::new(lua.port), Conn::new(native.port));
    if resp3 {
        for c in [&mut a, &mut b] {
            assert!(!cmd!(c, "HELLO", 3).is_err());
        }
    }
    load_all(&mut a);
    load_all(&mut b);
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
        let argv = if rng.gen_ratio(1, 8) {
            gen_side_effect(&mut rng)
        } else {
            let call = gen_call(&mut rng);
            argv(&call, rng.gen_bool(0.5), rng.gen_ratio(1, 25))
        };
        let (ra, rb) = (a.call(&argv), b.call(&argv));
        assert!(
            same_reply(&ra, &rb),
            "seed {seed} op {i}: {}\n lua:    {ra:?}\n native: {rb:?}",
            show(&argv)
        );
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
    // The native paths were taken (a test that can fail), and the fallbacks too.
    let native_runs = info_counts(&mut kb, "_native");
    for s in own_scripts() {
        let k = s.kind.replace('-', "_");
        assert!(native_runs.get(&k).copied().unwrap_or(0) > 0, "seed {seed}: no native {k}: {native_runs:?}");
    }
    assert!(info_counts(&mut kb, "_lua").values().sum::<i64>() > 0, "no call was left to Lua");
}

#[test]
fn random_sequences_match_lua_exactly_seed_1() {
    differential(1, 1500, false);
}

#[test]
fn random_sequences_match_lua_exactly_seed_2() {
    differential(2, 1500, false);
}

#[test]
fn random_sequences_match_lua_exactly_resp3() {
    differential(3, 1000, true);
}

#[test]
fn builtin_shas_run_natively_like_the_scripts() {
    let lua = Server::start_opts(Opts::default().without_module());
    let native = Server::start_opts(Opts::default().module_arg("redisson-scripts native"));
    let (mut a, mut b) = (Conn::new(lua.port), Conn::new(native.port));
    load_all(&mut a);
    let mut sub_a = Sub::new(lua.port, "SUBSCRIBE", &all_channels());
    let mut sub_b = Sub::new(native.port, "SUBSCRIBE", &all_channels());
    let o1 = OWNERS[0];
    let o2 = OWNERS[1];
    let steps: Vec<(&str, Vec<String>, Vec<String>)> = vec![
        ("acquire", vec!["l1".into()], vec!["30000".into(), o1.into()]),
        ("acquire", vec!["l1".into()], vec!["30000".into(), o1.into()]),
        ("acquire", vec!["l1".into()], vec!["30000".into(), o2.into()]),
        ("renew", vec!["l1".into()], vec!["45000".into(), o1.into()]),
        ("renew", vec!["l1".into()], vec!["45000".into(), o2.into()]),
        ("renew-batch", vec!["l1".into(), "l2".into()], vec!["40000".into(), o1.into(), o1.into()]),
        ("unlock-publish", vec!["l1".into(), channel("l1")], vec!["0".into(), "30000".into(), o1.into()]),
        ("unlock-publish", vec!["l1".into(), channel("l1")], vec!["0".into(), "30000".into(), o2.into()]),
        ("unlock-publish", vec!["l1".into(), channel("l1")], vec!["0".into(), "30000".into(), o1.into()]),
        ("acquire", vec!["l2".into()], vec!["30000".into(), o1.into()]),
        (
            "unlock",
            vec!["l2".into(), channel("l2")],
            vec!["0".into(), "30000".into(), o1.into(), "PUBLISH".into()],
        ),
        ("fenced-acquire", vec!["l3".into(), token_key("l3")], vec!["30000".into(), o1.into()]),
        ("fenced-acquire", vec!["l3".into(), token_key("l3")], vec!["30000".into(), o1.into()]),
        ("fenced-acquire", vec!["l3".into(), token_key("l3")], vec!["30000".into(), o2.into()]),
        ("fenced-acquire-plain", vec!["l3".into(), token_key("l3")], vec!["30000".into(), o1.into()]),
        ("fenced-acquire-plain", vec!["l3".into(), token_key("l3")], vec!["30000".into(), o2.into()]),
        ("forceunlock", vec!["l3".into(), channel("l3")], vec!["0".into(), "PUBLISH".into()]),
        ("forceunlock", vec!["l3".into(), channel("l3")], vec!["0".into(), "PUBLISH".into()]),
        ("acquire", vec!["l4".into()], vec!["30000".into(), o2.into()]),
        ("acquire", vec!["l4".into()], vec!["30000".into(), o2.into()]),
        (
            "unlock-latch",
            vec!["l4".into(), channel("l4"), latch("l4", 1)],
            vec!["0".into(), "30000".into(), o2.into(), "PUBLISH".into(), "13500".into()],
        ),
        (
            "unlock-latch",
            vec!["l4".into(), channel("l4"), latch("l4", 1)],
            vec!["0".into(), "30000".into(), o2.into(), "PUBLISH".into(), "13500".into()],
        ),
        (
            "unlock-latch",
            vec!["l4".into(), channel("l4"), latch("l4", 2)],
            vec!["0".into(), "30000".into(), o2.into(), "PUBLISH".into(), "13500".into()],
        ),
        (
            "unlock-latch",
            vec!["l4".into(), channel("l4"), latch("l4", 3)],
            vec!["0".into(), "30000".into(), o2.into(), "PUBLISH".into(), "13500".into()],
        ),
        ("acquire", vec!["l1".into()], vec!["30000".into(), o1.into()]),
        ("forceunlock-publish", vec!["l1".into(), channel("l1")], vec!["0".into()]),
        ("forceunlock-publish", vec!["l1".into(), channel("l1")], vec!["0".into()]),
    ];
    for (kind, keys, args) in &steps {
        let sha = BUILTIN.iter().find(|(k, _)| k == kind).unwrap().1;
        let tail: Vec<Vec<u8>> = std::iter::once(keys.len().to_string())
            .chain(keys.iter().cloned())
            .chain(args.iter().cloned())
            .map(String::into_bytes)
            .collect();
        let mut va = vec![b"EVALSHA".to_vec(), script(kind).sha.into_bytes()];
        va.extend(tail.iter().cloned());
        let mut vb = vec![b"EVALSHA".to_vec(), sha.as_bytes().to_vec()];
        vb.extend(tail);
        let (ra, rb) = (a.call(&va), b.call(&vb));
        assert!(same_reply(&ra, &rb), "{kind} {keys:?} {args:?}: {ra:?} vs {rb:?}");
        assert_same_keyspace(&mut a, &mut b, 100, kind);
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
    // The 3.17 acquire text (two branches) has its own SHA1 and the same behaviour.
    let r = cmd!(b, "EVALSHA", "dad0f8d619e548e04f21fb48d50be5034df3adae", 1, "old", 30000, o1);
    assert_eq!(r, R::Nil);
    assert_eq!(cmd!(b, "HGET", "old", o1).str(), "1");
}

#[test]
fn default_lua_leaves_scripts_alone_and_the_mode_switches_at_run_time() {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    let sha = BUILTIN[0].1;
    assert_eq!(cmd!(c, "CONFIG", "GET", "lock.redisson-scripts").arr()[1].str(), "lua");
    let r = cmd!(c, "EVALSHA", sha, 1, "k", 30000, "me:1");
    assert!(r.err().starts_with("NOSCRIPT"), "{r:?}");
    assert_eq!(cmd!(c, "CONFIG", "SET", "lock.redisson-scripts", "native"), R::Simple("OK".into()));
    assert_eq!(
        cmd!(c, "EVALSHA", sha, 1, "k", 30000, "me:1"),
        R::Nil,
        "a known EVALSHA runs without SCRIPT LOAD"
    );
    assert_eq!(cmd!(c, "HGET", "k", "me:1").str(), "1");
    assert_eq!(cmd!(c, "CONFIG", "SET", "lock.redisson-scripts", "lua"), R::Simple("OK".into()));
    assert!(cmd!(c, "EVALSHA", sha, 1, "k", 30000, "me:1").err().starts_with("NOSCRIPT"));
    assert_eq!(cmd!(c, "CONFIG", "SET", "lock.redisson-scripts", "native"), R::Simple("OK".into()));
    assert_eq!(
        cmd!(c, "CONFIG", "SET", "lock.redisson-scripts", "native"),
        R::Simple("OK".into()),
        "idempotent"
    );
    assert_eq!(
        cmd!(c, "EVALSHA", sha.to_uppercase(), 1, "k", 30000, "me:1"),
        R::Nil,
        "EVALSHA is case-insensitive"
    );
    assert_eq!(cmd!(c, "HGET", "k", "me:1").str(), "2");
    assert!(cmd!(c, "CONFIG", "SET", "lock.redisson-scripts", "maybe").is_err());
    assert!(cmd!(c, "CONFIG", "SET", "lock.redisson-extra-scripts", "acquire:zz:5").is_err());
    // Unknown scripts, EVAL_RO, FCALL and other commands pass through untouched.
    assert_eq!(cmd!(c, "EVAL", "return 7", 0), R::Int(7));
    assert_eq!(cmd!(c, "EVAL_RO", "return redis.call('exists', KEYS[1])", 1, "k"), R::Int(1));
    assert!(cmd!(c, "EVALSHA", "0000000000000000000000000000000000000000", 1, "k", 1, 2)
        .err()
        .starts_with("NOSCRIPT"));
    let info = cmd!(c, "INFO", "commandstats").str();
    assert!(info.contains("cmdstat_lock.redisson:calls=2,"), "{info}");
}

#[test]
fn exact_matches_only_everything_else_gets_luas_own_reply() {
    let lua = Server::start_opts(Opts::default().without_module());
    let native = Server::start_opts(native_opts());
    let (mut a, mut b) = (Conn::new(lua.port), Conn::new(native.port));
    load_all(&mut a);
    load_all(&mut b);
    // One call per line: `{a}` / `{u}` / `{p}` / `{f}` stand for the SHA1s of the acquire,
    // unlock-latch, unlock and fenced-acquire scripts.
    let cases = "\
        # wrong numkeys / argument counts
        EVALSHA {a} 2 k 30000 o
        EVALSHA {a} 1 k 30000
        EVALSHA {a} 0 30000 o
        # a lease the script rejects, after writing (Lua); a lease <= 0 deletes (native)
        EVALSHA {a} 1 k soon o
        EVALSHA {a} 1 k2 -1 o
        # wrong type
        SET str v
        EVALSHA {a} 1 str 30000 o
        # corrupt count
        HSET h o x
        EVALSHA {a} 1 h 30000 o
        # latch values converted as Lua's tonumber does (native)
        SET latch 1.5
        EVALSHA {u} 3 h c latch 0 1 o PUBLISH 10
        SET latch abc
        EVALSHA {u} 3 h c latch 0 1 o PUBLISH 10
        SET latch 0x10
        EVALSHA {u} 3 h c latch 0 1 o PUBLISH 10
        # a publish command the script would run as given
        HSET p o 1
        EVALSHA {p} 2 p list 0 1000 o RPUSH
        TYPE list
        # the same lock and token key: INCR on a hash, after the lock was written
        EVALSHA {f} 2 same same 30000 o";
    let shas = [
        ("{a}", script("acquire").sha),
        ("{u}", script("unlock-latch").sha),
        ("{p}", script("unlock").sha),
        ("{f}", script("fenced-acquire").sha),
    ];
    let cases: Vec<Vec<String>> = cases
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let word = |w: &str| shas.iter().find(|(k, _)| *k == w).map_or(w.to_string(), |(_, v)| v.clone());
            l.split_whitespace().map(word).collect()
        })
        .collect();
    assert_eq!(cases.len(), 19);
    for argv in cases {
        let v: Vec<Vec<u8>> = argv.iter().map(|s| s.clone().into_bytes()).collect();
        assert_eq!(a.call(&v), b.call(&v), "{argv:?}");
    }
    assert_same_keyspace(&mut a, &mut b, 100, "after exact-match cases");
    let lua_runs = info_counts(&mut b, "_lua");
    assert!(lua_runs["acquire"] >= 6, "{lua_runs:?}");
    let native_runs = info_counts(&mut b, "_native");
    assert_eq!(native_runs["acquire"], 1, "lease -1 runs natively: {native_runs:?}");
    assert_eq!(native_runs["unlock_latch"], 3, "odd latch values run natively: {native_runs:?}");
    assert_eq!(native_runs.values().sum::<i64>(), 4, "nothing else matched exactly");
}

#[test]
fn unlocks_hand_the_lock_to_lock_waiters_atomically() {
    let s = Server::start_opts(native_opts());
    let mut c = Conn::new(s.port);
    let mut sub = Sub::new(s.port, "SUBSCRIBE", &[channel("w").into_bytes()]);
    assert_eq!(cmd!(c, "EVALSHA", BUILTIN[0].1, 1, "w", 30000, "java:1"), R::Nil);
    let mut waiter = Conn::new(s.port);
    waiter.send(&[
        b"LOCK.ACQUIRE".to_vec(),
        b"w".to_vec(),
        b"py:1".to_vec(),
        b"30000".to_vec(),
        b"WAIT".to_vec(),
        b"5000".to_vec(),
    ]);
    let mut rc = s.conn();
    assert!(wait_for(Duration::from_secs(10), || (stat(&mut rc, "waiters") == 1).then_some(())).is_some());
    // The 3.24+ unlock frees it: handed over, the latch says 1, no message.
    let latch_key = latch("w", 5);
    let r = cmd!(
        c,
        "EVALSHA",
        BUILTIN[3].1,
        3,
        "w",
        channel("w"),
        &latch_key,
        0,
        30000,
        "java:1",
        "PUBLISH",
        13500
    );
    assert_eq!(r, R::Int(1));
    assert_eq!(waiter.read().unwrap(), R::Nil);
    assert_eq!(cmd!(c, "HGETALL", "w"), R::Arr(vec![R::Bulk(b"py:1".to_vec()), R::Bulk(b"1".to_vec())]));
    assert_eq!(cmd!(c, "GET", &latch_key).str(), "1");
    // A Redisson acquire now waits behind the holder; a force unlock with no waiter publishes.
    assert!(cmd!(c, "EVALSHA", BUILTIN[0].1, 1, "w", 30000, "java:1").int() > 0);
    waiter.send(&[
        b"LOCK.ACQUIRE".to_vec(),
        b"w".to_vec(),
        b"py:2".to_vec(),
        b"30000".to_vec(),
        b"WAIT".to_vec(),
        b"5000".to_vec(),
    ]);
    assert!(wait_for(Duration::from_secs(10), || (stat(&mut rc, "waiters") == 1).then_some(())).is_some());
    assert_eq!(cmd!(c, "EVALSHA", BUILTIN[5].1, 2, "w", channel("w"), 0, "PUBLISH"), R::Int(1));
    assert_eq!(waiter.read().unwrap(), R::Nil);
    assert_eq!(cmd!(c, "HGETALL", "w"), R::Arr(vec![R::Bulk(b"py:2".to_vec()), R::Bulk(b"1".to_vec())]));
    assert_eq!(cmd!(c, "EVALSHA", BUILTIN[5].1, 2, "w", channel("w"), 0, "PUBLISH"), R::Int(1));
    let msgs = sub.until_marker(&mut Conn::new(s.port), "PUBLISH", channel("w").as_bytes());
    assert_eq!(
        msgs,
        vec![(channel("w").into_bytes(), b"0".to_vec())],
        "only the last force unlock freed the lock"
    );
    assert_eq!(stat(&mut rc, "handoffs"), 2);
}

#[test]
fn multi_exec_and_scripts_behave_as_for_the_script() {
    let lua = Server::start_opts(Opts::default().without_module());
    let native = Server::start_opts(native_opts());
    let (mut a, mut b) = (Conn::new(lua.port), Conn::new(native.port));
    load_all(&mut a);
    load_all(&mut b);
    let acq = script("acquire");
    let seq: Vec<Vec<Vec<u8>>> = vec![
        vec![b"MULTI".to_vec()],
        vec![
            b"EVALSHA".to_vec(),
            acq.sha.clone().into_bytes(),
            b"1".to_vec(),
            b"m".to_vec(),
            b"30000".to_vec(),
            b"a".to_vec(),
        ],
        vec![
            b"EVAL".to_vec(),
            acq.body.to_vec(),
            b"1".to_vec(),
            b"m".to_vec(),
            b"30000".to_vec(),
            b"a".to_vec(),
        ],
        vec![
            b"EVALSHA".to_vec(),
            acq.sha.clone().into_bytes(),
            b"1".to_vec(),
            b"m".to_vec(),
            b"30000".to_vec(),
            b"b".to_vec(),
        ],
        vec![b"EXEC".to_vec()],
        // A script calling EVALSHA: refused the same way.
        vec![
            b"EVAL".to_vec(),
            format!("return redis.call('EVALSHA', '{}', 1, KEYS[1], 30000, 'x')", acq.sha).into_bytes(),
            b"1".to_vec(),
            b"m".to_vec(),
        ],
    ];
    for v in &seq {
        let (ra, rb) = (a.call(v), b.call(v));
        match (&ra, &rb) {
            (R::Arr(x), R::Arr(y)) => {
                assert_eq!(x.len(), y.len());
                for (p, q) in x.iter().zip(y) {
                    match (p, q) {
                        (R::Int(p), R::Int(q)) => assert!((p - q).abs() < 100, "{p} vs {q}"),
                        _ => assert_eq!(p, q),
                    }
                }
            }
            _ => assert_eq!(ra, rb, "{}", show(v)),
        }
    }
    assert_same_keyspace(&mut a, &mut b, 100, "MULTI");
    assert_eq!(info_counts(&mut b, "_native")["acquire"], 3);
}

#[test]
fn replicas_without_the_module_stay_equal() {
    let master = Server::start_opts(native_opts());
    let replica = Server::start_opts(Opts::default().without_module());
    replica.replicate_from(&master);
    let mut m = Conn::new(master.port);
    let mut r = Conn::new(replica.port);
    load_all(&mut m);
    let mut rng = StdRng::seed_from_u64(9);
    for _ in 0..600 {
        let call = gen_call(&mut rng);
        let v = argv(&call, rng.gen_bool(0.5), false);
        m.call(&v);
    }
    assert_eq!(cmd!(m, "WAIT", 1, 5000), R::Int(1));
    assert_same_keyspace(&mut m, &mut r, 0, "replica");
    assert!(info_counts(&mut m, "_native").values().sum::<i64>() > 300);
}

#[test]
fn read_only_replicas_and_oom_answer_as_lua_does() {
    // Replicas of a master, one with the module (native) and one without.
    let master = Server::start_opts(Opts::default().without_module());
    let rn = Server::start_opts(native_opts());
    let rl = Server::start_opts(Opts::default().without_module());
    rn.replicate_from(&master);
    rl.replicate_from(&master);
    let mut m = Conn::new(master.port);
    load_all(&mut m);
    assert_eq!(cmd!(m, "HSET", "held", "other", "1"), R::Int(1));
    assert_eq!(cmd!(m, "PEXPIRE", "held", 600000), R::Int(1));
    assert_eq!(cmd!(m, "WAIT", 2, 5000), R::Int(2));
    let (mut a, mut b) = (Conn::new(rl.port), Conn::new(rn.port));
    let acq = script("acquire").sha;
    for key in ["held", "free"] {
        let v: Vec<Vec<u8>> =
            ["EVALSHA", &acq, "1", key, "30000", "me"].iter().map(|s| s.as_bytes().to_vec()).collect();
        let (ra, rb) = (a.call(&v), b.call(&v));
        assert!(same_reply(&ra, &rb), "{key}: {ra:?} vs {rb:?}");
    }
    // OOM: the script's own error, from the same point of the script.
    let lua = Server::start_opts(Opts::default().without_module().arg("--maxmemory 1"));
    let native = Server::start_opts(native_opts().arg("--maxmemory 1"));
    let (mut a, mut b) = (Conn::new(lua.port), Conn::new(native.port));
    load_all(&mut a);
    load_all(&mut b);
    let v: Vec<Vec<u8>> =
        ["EVALSHA", &acq, "1", "k", "30000", "me"].iter().map(|s| s.as_bytes().to_vec()).collect();
    let (ra, rb) = (a.call(&v), b.call(&v));
    assert!(ra.is_err(), "{ra:?}");
    assert_eq!(ra, rb);
}

#[test]
fn cluster_routing_and_crossslot_as_for_the_script() {
    fn node(opts: Opts) -> (Server, Conn) {
        let s = Server::start_opts(opts.arg("--cluster-enabled yes --cluster-config-file nodes.conf"));
        let mut c = Conn::new(s.port);
        assert_eq!(cmd!(c, "CLUSTER", "ADDSLOTSRANGE", 0, 16383), R::Simple("OK".into()));
        let ok = wait_for(Duration::from_secs(20), || {
            cmd!(c, "CLUSTER", "INFO").str().contains("cluster_state:ok").then_some(())
        });
        assert!(ok.is_some());
        (s, c)
    }
    let (_la, mut a) = node(Opts::default().without_module());
    let (_nb, mut b) = node(native_opts());
    load_all(&mut a);
    load_all(&mut b);
    let unl = script("unlock").sha;
    let acq = script("acquire").sha;
    let cases: Vec<Vec<&str>> = vec![
        vec!["EVALSHA", &acq, "1", "{x}lock", "30000", "me"],
        // Keys in two slots: CROSSSLOT before anything runs.
        vec!["EVALSHA", &unl, "2", "{x}lock", "redisson_lock__channel:{y}", "0", "30000", "me", "PUBLISH"],
        // SPUBLISH on a channel of another slot passed as a key of the same tag: fine.
        vec![
            "EVALSHA",
            &unl,
            "2",
            "{x}lock",
            "redisson_lock__channel:{x}lock",
            "0",
            "30000",
            "me",
            "SPUBLISH",
        ],
        vec!["EVALSHA", &acq, "1", "{x}lock", "30000", "me"],
    ];
    for v in cases {
        let argv: Vec<Vec<u8>> = v.iter().map(|s| s.as_bytes().to_vec()).collect();
        let (ra, rb) = (a.call(&argv), b.call(&argv));
        assert!(same_reply(&ra, &rb), "{v:?}: {ra:?} vs {rb:?}");
    }
    assert_same_keyspace(&mut a, &mut b, 100, "cluster");
}

#[test]
fn hostile_script_calls_never_crash_the_server() {
    let mut s = Server::start_opts(native_opts());
    let mut c = Conn::new(s.port);
    let mut rng = StdRng::seed_from_u64(77);
    let shas: Vec<String> =
        BUILTIN.iter().map(|(_, s)| s.to_string()).chain(own_scripts().into_iter().map(|s| s.sha)).collect();
    for _ in 0..3000 {
        let mut v: Vec<Vec<u8>> =
            vec![if rng.gen_bool(0.5) { b"EVALSHA".to_vec() } else { b"LOCK.REDISSON".to_vec() }];
        if v[0] == b"LOCK.REDISSON" {
            v.push(
                ["acquire", "unlock-latch", "renew-batch", "nope", ""][rng.gen_range(0..5)]
                    .as_bytes()
                    .to_vec(),
            );
            v.push(["EVALSHA", "EVAL", "GET"][rng.gen_range(0..3)].as_bytes().to_vec());
        }
        v.push(shas[rng.gen_range(0..shas.len())].clone().into_bytes());
        let n = rng.gen_range(0..8);
        v.push(if rng.gen_ratio(1, 5) { b"-1".to_vec() } else { n.to_string().into_bytes() });
        for _ in 0..rng.gen_range(0..10) {
            let choices: [&[u8]; 8] =
                [b"k", b"30000", b"0", b"PUBLISH", b"", b"\x00\xff", b"-5", b"SPUBLISH"];
            v.push(choices[rng.gen_range(0..choices.len())].to_vec());
        }
        let r = c.call(&v);
        if let R::Err(e) = &r {
            assert!(!e.contains("internal error"), "{e}");
        }
    }
    s.assert_alive();
    let mut rc = s.conn();
    assert_eq!(stat(&mut rc, "panics_caught"), 0);
}

#[test]
fn known_scripts_left_to_lua_and_native_runs_are_counted_in_info() {
    let s = Server::start_opts(native_opts());
    let mut c = Conn::new(s.port);
    let info = cmd!(c, "INFO", "lock").str();
    for k in scripts::own_scripts() {
        let base = k.kind.replace('-', "_");
        assert!(info.contains(&format!("lock_redisson_{base}_native:0")), "{info}");
        assert!(info.contains(&format!("lock_redisson_{base}_lua:0")), "{info}");
    }
    cmd!(c, "EVALSHA", BUILTIN[0].1, 1, "k", "x", "o");
    cmd!(c, "EVALSHA", BUILTIN[0].1, 1, "k", 1000, "o");
    assert_eq!(info_counts(&mut c, "_lua")["acquire"], 1);
    assert_eq!(info_counts(&mut c, "_native")["acquire"], 1);
    let docs = cmd!(c, "COMMAND", "DOCS", "lock.redisson");
    let summary = docs.arr()[1].arr()[1].str();
    assert!(summary.contains("Redisson"), "{summary}");
    let keys = cmd!(c, "COMMAND", "GETKEYS", "LOCK.REDISSON", "abc", 2, "k1", "k2", "x");
    assert_eq!(keys, R::Arr(vec![R::Bulk(b"k1".to_vec()), R::Bulk(b"k2".to_vec())]));
    // Called directly, LOCK.REDISSON is the EVALSHA / EVAL it carries.
    assert_eq!(cmd!(c, "LOCK.REDISSON", BUILTIN[0].1, 1, "d", 1000, "o"), R::Nil);
    assert_eq!(cmd!(c, "HGET", "d", "o").str(), "1");
    assert!(cmd!(c, "LOCK.REDISSON", "0123456789012345678901234567890123456789", 0)
        .err()
        .starts_with("NOSCRIPT"));
    assert_eq!(cmd!(c, "LOCK.REDISSON", "return 40 + 2", 0), R::Int(42));
    assert!(cmd!(c, "LOCK.REDISSON", "x").err().contains("wrong number of arguments"));
}

#[test]
fn failed_script_acquires_take_turns_in_the_lock_fifo() {
    let s = Server::start_opts(native_opts());
    let mut c = Conn::new(s.port);
    let mut rc = s.conn();
    let mut sub = Sub::new(s.port, "SUBSCRIBE", &[channel("q").into_bytes()]);
    let acq = BUILTIN[0].1;
    let block = |owner: &str| {
        let mut w = Conn::new(s.port);
        w.send(&[
            b"LOCK.ACQUIRE".to_vec(),
            b"q".to_vec(),
            owner.as_bytes().to_vec(),
            b"30000".to_vec(),
            b"WAIT".to_vec(),
            b"10000".to_vec(),
        ]);
        w
    };
    let await_waiters = |rc: &mut redis::Connection, n: i64| {
        assert!(
            wait_for(Duration::from_secs(10), || (stat(rc, "waiters") == n).then_some(())).is_some(),
            "{n} waiters"
        );
    };
    // No WAIT client: a failed script acquire takes no place (plain script behaviour).
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "q", "holder", 30000), R::Nil);
    assert!(cmd!(c, "EVALSHA", acq, 1, "q", 30000, "java:1").int() > 29000);
    assert_eq!(stat(&mut rc, "script_turns_waiting"), 0);
    // W1 waits; java:1 fails again and stands behind W1; W2 behind it.
    let mut w1 = block("w1");
    await_waiters(&mut rc, 1);
    assert!(cmd!(c, "EVALSHA", acq, 1, "q", 30000, "java:1").int() > 29000);
    assert!(cmd!(c, "EVALSHA", acq, 1, "q", 30000, "java:1").int() > 29000, "a retry keeps its place");
    assert_eq!(stat(&mut rc, "script_turns_waiting"), 1);
    let mut w2 = block("w2");
    await_waiters(&mut rc, 2);
    // holder -> W1 (handoff, no message); W1 -> java:1's turn: freed, `0` published, kept for it.
    assert_eq!(cmd!(c, "LOCK.RELEASE", "q", "holder"), R::Int(1));
    assert_eq!(w1.read().unwrap(), R::Nil);
    assert_eq!(cmd!(w1, "LOCK.RELEASE", "q", "w1"), R::Int(1));
    assert_eq!(cmd!(c, "EXISTS", "q"), R::Int(0));
    let msgs = sub.until_marker(&mut Conn::new(s.port), "PUBLISH", channel("q").as_bytes());
    assert_eq!(msgs, vec![(channel("q").into_bytes(), b"0".to_vec())]);
    let p = cmd!(c, "LOCK.ACQUIRE", "q", "newcomer", 30000).int();
    assert!((1..=200).contains(&p), "a LOCK.* newcomer cannot barge during the turn: {p}");
    let p = cmd!(c, "EVALSHA", acq, 1, "q", 30000, "java:2").int();
    assert!((1..=200).contains(&p), "nor another script owner: {p}");
    assert_eq!(
        cmd!(c, "EVALSHA", acq, 1, "q", 30000, "java:1"),
        R::Nil,
        "the owner whose turn it is gets it"
    );
    // java:1's unlock hands the lock to W2 (java:2 queued behind W2).
    assert_eq!(
        cmd!(c, "EVALSHA", BUILTIN[2].1, 2, "q", channel("q"), 0, 30000, "java:1", "PUBLISH"),
        R::Int(1)
    );
    assert_eq!(w2.read().unwrap(), R::Nil);
    // W2 was the last queued client: java:2's turn went with the queue.
    assert_eq!(stat(&mut rc, "script_turns_waiting"), 0);
    // A script owner that never comes back stalls the queue for one turn only.
    let mut w3 = block("w3");
    await_waiters(&mut rc, 1);
    assert!(cmd!(c, "EVALSHA", acq, 1, "q", 30000, "java:2").int() > 29000);
    let mut w4 = block("w4");
    await_waiters(&mut rc, 2);
    assert_eq!(stat(&mut rc, "script_turns_waiting"), 1, "java:2 stands between w3 and w4");
    assert_eq!(cmd!(w2, "LOCK.RELEASE", "q", "w2"), R::Int(1));
    assert_eq!(w3.read().unwrap(), R::Nil);
    let t0 = std::time::Instant::now();
    assert_eq!(cmd!(w3, "LOCK.RELEASE", "q", "w3"), R::Int(1));
    assert_eq!(w4.read().unwrap(), R::Nil);
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_millis(150), "java:2's turn was kept for it ({waited:?})");
    assert_eq!(stat(&mut rc, "script_turns_missed"), 1);
    assert_eq!(stat(&mut rc, "script_turns_taken"), 1);
    // No WAIT client queued: no turn is taken, plain script behaviour.
    assert!(cmd!(c, "EVALSHA", acq, 1, "q", 30000, "java:3").int() > 0);
    assert_eq!(stat(&mut rc, "script_turns_waiting"), 0);
    assert_eq!(cmd!(w4, "LOCK.RELEASE", "q", "w4"), R::Int(1));
    assert_eq!(cmd!(c, "EVALSHA", acq, 1, "q", 30000, "java:3"), R::Nil, "plain script behaviour again");
}

//! `lock.redisson-scripts native` for the rest of Redisson's family (spec family.md section 13):
//! the fair lock's 13 texts and the non-reentrant fair lock's 2 acquires, the count-down
//! latch's 6, the spin lock's 3 and the non-reentrant lock's acquire, run natively.
//!
//! Redisson's own script text may not be in this repository, so the native code paths are
//! driven through our own Lua implementation of each operation (`lua/fair-*.lua`,
//! `lua/latch-*.lua`, `lua/spin-*.lua`, `lua/nonreentrant-*.lua`, written from the research
//! facts), registered with `lock.redisson-extra-scripts` under the operation names. The same
//! calls go to a server without the module (Lua) and to a server with `native`: replies (their
//! RESP types too), the whole keyspace (the fair lock writes keys it does not name: none here,
//! but its queue and deadlines are compared member by member, scores included) and the
//! messages on every channel must match, over random states and calls.

mod common;
use common::scripts::{family_scripts, info_counts, load_family, native_opts, show, snapshot};
use common::*;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use resp::{Conn, Sub, R};
use std::time::{Duration, Instant};
use testkit::cmd;

const NAMES: [&str; 3] = ["f1", "{t}f2", "a{b"];
const OWNERS: [&str; 4] = ["o1:1", "o2:1", "o3:7", "o4:2"];

fn derived(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

fn queue(name: &str) -> String {
    derived("redisson_lock_queue", name)
}

fn deadlines(name: &str) -> String {
    derived("redisson_lock_timeout", name)
}

fn prefix(name: &str) -> String {
    derived("redisson_lock__channel", name)
}

fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

fn unlock_latch(name: &str, n: u32) -> String {
    derived("redisson_unlock_latch", name) + &format!(":{n:032x}")
}

/// Every channel a call may publish on.
fn channels() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for n in NAMES {
        for o in OWNERS {
            out.push(format!("{}:{o}", prefix(n)).into_bytes());
        }
        out.push(latch_channel(n).into_bytes());
    }
    out
}

/// The clients' clock (client-clock deadlines are compared with it only).
fn client_now() -> i64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock");
    i64::try_from(t.as_millis()).expect("ms")
}

/// (operation, KEYS, ARGV) of a Redisson-shaped call.
type Call = (&'static str, Vec<Vec<u8>>, Vec<Vec<u8>>);

fn b(s: impl AsRef<[u8]>) -> Vec<u8> {
    s.as_ref().to_vec()
}

fn pick<'a, T>(rng: &mut StdRng, xs: &'a [T]) -> &'a T {
    &xs[rng.gen_range(0..xs.len())]
}

fn call_for(op: &'static str, name: &str, rng: &mut StdRng, now: i64) -> Call {
    let (k, q, z, p) = (b(name), b(queue(name)), b(deadlines(name)), b(prefix(name)));
    let publish = b(pick(rng, &["PUBLISH", "publish", "SPUBLISH"]));
    let lease = b(pick(rng, &["30000", "30000", "30000", "10000", "0", "-5", "x"]));
    let owner = b(pick(rng, &OWNERS));
    let wait = b(pick(rng, &["300000", "5000", "300000"]));
    let nowb = b(now.to_string());
    let latch = b(unlock_latch(name, rng.gen_range(0..3)));
    let latch_ms = b(pick(rng, &["13500", "13500", "0"]));
    let text = b(pick(rng, &["NON_REENTRANT_REACQUIRE", "NON_REENTRANT_REACQUIRE", "A B"]));
    let count = b(pick(rng, &["1", "3", "0", "-2", "x"]));
    let (keys, args) = match op {
        "latch-trysetcount-publish" => (vec![k, b(latch_channel(name))], vec![b("1"), count]),
        "latch-trysetcount" => (vec![k, b(latch_channel(name))], vec![b("1"), count, publish]),
        "latch-countdown-publish" => (vec![k, b(latch_channel(name))], vec![b("0")]),
        "latch-countdown" => (vec![k, b(latch_channel(name))], vec![b("0"), publish]),
        "latch-delete-publish" => (vec![k, b(latch_channel(name))], vec![b("1")]),
        "latch-delete" => (vec![k, b(latch_channel(name))], vec![b("1"), publish]),
        "fair-acquirefailed" => (vec![q, z], vec![owner, wait]),
        "fair-tryacquire-bug" | "fair-tryacquire" => (vec![k, q, z], vec![lease, owner, nowb, wait]),
        "fair-acquire-bug" | "fair-acquire-enqueue-bug" | "fair-acquire" => {
            (vec![k, q, z], vec![lease, owner, wait, nowb])
        }
        "fair-unlock-publish-bug" => (vec![k, q, z, p], vec![b("0"), lease, owner, nowb]),
        "fair-unlock-bug" => (vec![k, q, z, p], vec![b("0"), lease, owner, nowb, publish]),
        "fair-unlock-latch-bug" | "fair-unlock-latch" => {
            (vec![k, q, z, p, latch], vec![b("0"), lease, owner, nowb, publish, latch_ms])
        }
        "fair-forceunlock-publish-bug" => (vec![k, q, z, p], vec![b("0"), nowb]),
        "fair-forceunlock-bug" | "fair-forceunlock" => (vec![k, q, z, p], vec![b("0"), nowb, publish]),
        "nonreentrant-fair-tryacquire" => (vec![k, q, z], vec![lease, owner, nowb, wait, text]),
        "nonreentrant-fair-acquire" => (vec![k, q, z], vec![lease, owner, wait, nowb, text]),
        "spin-unlock" => (vec![k], vec![lease, owner]),
        "spin-unlock-latch" => (vec![k, latch], vec![lease, owner, latch_ms]),
        "spin-forceunlock" => (vec![k], vec![]),
        "nonreentrant-acquire" => (vec![k], vec![lease, owner, text]),
        other => panic!("unknown op {other}"),
    };
    (op, keys, args)
}

/// Put the same random state on both servers: the lock (absent, held by one or two owners,
/// with a TTL or not, a string, a latch count), the queue and the deadlines (expired, live,
/// missing, members not queued), unlock latches.
fn random_state(rng: &mut StdRng, cs: &mut [&mut Conn], now: i64) {
    for c in cs.iter_mut() {
        cmd!(c, "FLUSHALL");
    }
    for name in NAMES {
        let mut writes: Vec<Vec<Vec<u8>>> = Vec::new();
        match rng.gen_range(0..6) {
            0 | 1 => {}
            2 | 3 => {
                let holders: Vec<&str> =
                    OWNERS.iter().copied().filter(|_| rng.gen_bool(0.4)).take(2).collect();
                for o in holders {
                    writes.push(vec![b("HSET"), b(name), b(o), b(pick(rng, &["1", "2", "1", "x"]))]);
                }
                if rng.gen_bool(0.6) {
                    writes.push(vec![b("PEXPIRE"), b(name), b("600000")]);
                }
            }
            4 => writes.push(vec![b("SET"), b(name), b(pick(rng, &["2", "1", "0", "abc"]))]),
            _ => {
                writes.push(vec![b("SET"), b(name), b("3")]);
                writes.push(vec![b("PEXPIRE"), b(name), b("600000")]);
            }
        }
        let mut order: Vec<&str> = OWNERS.to_vec();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.gen_range(0..=i));
        }
        let queued = rng.gen_range(0..=OWNERS.len());
        let mut last = now + rng.gen_range(-20_000..200_000);
        for o in order.iter().take(queued) {
            writes.push(vec![b("RPUSH"), b(queue(name)), b(o)]);
            if rng.gen_bool(0.85) {
                last += rng.gen_range(-30_000..300_000);
                writes.push(vec![b("ZADD"), b(deadlines(name)), b(last.to_string()), b(o)]);
            }
        }
        for o in order.iter().skip(queued) {
            if rng.gen_bool(0.15) {
                writes.push(vec![b("ZADD"), b(deadlines(name)), b((now + 1000).to_string()), b(o)]);
            }
        }
        if rng.gen_bool(0.2) {
            writes.push(vec![b("PEXPIRE"), b(deadlines(name)), b("600000")]);
        }
        if rng.gen_bool(0.2) {
            let v = pick(rng, &["0", "1", "x"]);
            writes.push(vec![b("SET"), b(unlock_latch(name, 0)), b(v), b("PX"), b("600000")]);
        }
        for c in cs.iter_mut() {
            for w in &writes {
                let r = c.call(w);
                assert!(!r.is_err(), "{w:?}: {r:?}");
            }
        }
    }
}

/// A write another client makes between two calls: the lock taken, freed or given another
/// type, a waiter queued or dropped, a deadline moved, a latch count set.
fn foreign_write(rng: &mut StdRng, now: i64) -> Vec<Vec<u8>> {
    let name = *pick(rng, &NAMES);
    let o = *pick(rng, &OWNERS);
    match rng.gen_range(0..7) {
        0 => vec![b("DEL"), b(name)],
        1 => vec![b("HSET"), b(name), b(o), b("1")],
        2 => vec![b("RPUSH"), b(queue(name)), b(o)],
        3 => vec![b("LPOP"), b(queue(name))],
        4 => vec![b("ZADD"), b(deadlines(name)), b((now + rng.gen_range(-5000..50_000)).to_string()), b(o)],
        5 => vec![b("ZREM"), b(deadlines(name)), b(o)],
        _ => vec![b("SET"), b(name), b(pick(rng, &["1", "5"]))],
    }
}

/// Calls of known scripts left to Lua so far.
fn lua_runs(c: &mut Conn) -> i64 {
    info_counts(c, "_lua").values().sum()
}

fn evalsha(c: &mut Conn, sha: &str, call: &Call) -> R {
    let mut argv = vec![b("EVALSHA"), b(sha), b(call.1.len().to_string())];
    argv.extend(call.1.iter().cloned());
    argv.extend(call.2.iter().cloned());
    c.call(&argv)
}

/// Two servers' clocks read a lock's PTTL a few ms apart: a reply or a deadline built from it
/// may differ by that much, and nothing else may.
const SKEW_MS: i64 = 50;

fn same_reply(rl: &R, rn: &R, ctx: &str) {
    match (rl, rn) {
        (R::Err(a), R::Err(b)) => assert_eq!(a.split(' ').next(), b.split(' ').next(), "{ctx}: {a} / {b}"),
        (R::Int(a), R::Int(b)) if *a > 1000 && *b > 1000 => {
            assert!((a - b).abs() <= SKEW_MS, "{ctx}: {a} / {b}")
        }
        _ => assert_eq!(rl, rn, "{ctx}"),
    }
}

/// The same keys, types, lists and hashes; zset members the same, scores within [`SKEW_MS`];
/// deadlines within 2 s.
fn same_keyspace(a: &mut Conn, b: &mut Conn, ctx: &str) {
    let (sa, sb) = (snapshot(a), snapshot(b));
    assert_eq!(sa.keys().collect::<Vec<_>>(), sb.keys().collect::<Vec<_>>(), "{ctx}: key sets differ");
    for (k, x) in &sa {
        let y = &sb[k];
        let key = String::from_utf8_lossy(k);
        assert_eq!(x.ty, y.ty, "{ctx}: {key}");
        if x.ty == "zset" {
            assert_eq!(
                x.content.keys().collect::<Vec<_>>(),
                y.content.keys().collect::<Vec<_>>(),
                "{ctx}: {key}"
            );
            for (m, s) in &x.content {
                let score = |v: &[u8]| String::from_utf8_lossy(v).parse::<f64>().expect("score");
                let (p, q) = (score(s), score(&y.content[m]));
                assert!(
                    (p - q).abs() <= SKEW_MS as f64,
                    "{ctx}: {key} {} {p} / {q}",
                    String::from_utf8_lossy(m)
                );
            }
        } else {
            assert_eq!(x.content, y.content, "{ctx}: {key}");
        }
        let close = (x.pexpiretime < 0 && x.pexpiretime == y.pexpiretime)
            || (x.pexpiretime - y.pexpiretime).abs() <= 2000;
        assert!(close, "{ctx}: {key} deadlines {} vs {}", x.pexpiretime, y.pexpiretime);
    }
}

#[test]
fn every_operation_matches_lua_over_random_states() {
    let lua = Server::start_opts(Opts::default().without_module());
    let native = Server::start_opts(native_opts());
    let (mut l, mut n) = (Conn::new(lua.port), Conn::new(native.port));
    load_family(&mut l);
    load_family(&mut n);
    let chans = channels();
    let mut subs: Vec<(Sub, Sub, &str)> = ["SUBSCRIBE", "SSUBSCRIBE"]
        .into_iter()
        .map(|kind| (Sub::new(lua.port, kind, &chans), Sub::new(native.port, kind, &chans), kind))
        .collect();
    // The keyspace events too: the same commands' events, in the same order.
    for c in [&mut l, &mut n] {
        cmd!(c, "CONFIG", "SET", "notify-keyspace-events", "KA");
    }
    let events = vec![b("__keyspace@0__:*")];
    let (mut el, mut en) =
        (Sub::new(lua.port, "PSUBSCRIBE", &events), Sub::new(native.port, "PSUBSCRIBE", &events));
    let scripts = family_scripts();
    assert_eq!(scripts.len(), 25);
    let mut rng = StdRng::seed_from_u64(0xfa1e);
    let deadline = Instant::now() + Duration::from_secs(90);
    for round in 0..600 {
        if Instant::now() > deadline {
            break;
        }
        let now = client_now();
        random_state(&mut rng, &mut [&mut l, &mut n], now);
        for _ in 0..6 {
            if rng.gen_bool(0.2) {
                let w = foreign_write(&mut rng, now);
                assert_eq!(l.call(&w).is_err(), n.call(&w).is_err(), "{w:?}");
            }
            let s = &scripts[rng.gen_range(0..scripts.len())];
            let name = *pick(&mut rng, &NAMES);
            let call = call_for(s.kind, name, &mut rng, now);
            let before = lua_runs(&mut n);
            let (rl, rn) = (evalsha(&mut l, &s.sha, &call), evalsha(&mut n, &s.sha, &call));
            let ctx = format!("round {round}: {} {} {}", s.kind, show(&call.1), show(&call.2));
            same_reply(&rl, &rn, &ctx);
            // Every call the script runs without an error runs natively (these states hold no
            // number Lua would write differently).
            if lua_runs(&mut n) > before {
                assert!(rl.is_err(), "{ctx}: left to Lua, which replied {rl:?}");
            }
            same_keyspace(&mut l, &mut n, &ctx);
        }
        let marker = b"__keyspace@0__:marker";
        let (kl, kn) =
            (el.until_marker(&mut l, "PUBLISH", marker), en.until_marker(&mut n, "PUBLISH", marker));
        // Valkey 9 fires `expired` where a PEXPIRE to the past deletes a key (a lease <= 0);
        // Redis and Valkey 8 fire `del`, as the native path does on every server (no key here
        // expires by itself: the states' TTLs are minutes).
        let text = |v: &[(Vec<u8>, Vec<u8>)]| -> Vec<String> {
            v.iter()
                .map(|(c, m)| {
                    let m =
                        if m.as_slice() == b"expired" { "del".into() } else { String::from_utf8_lossy(m) };
                    format!("{} {m}", String::from_utf8_lossy(c))
                })
                .collect()
        };
        assert_eq!(text(&kl), text(&kn), "round {round}: keyspace events");
        for (sl, sn, kind) in subs.iter_mut() {
            let pubcmd = if *kind == "SUBSCRIBE" { "PUBLISH" } else { "SPUBLISH" };
            let ch = &chans[0];
            let (ml, mn) = (sl.until_marker(&mut l, pubcmd, ch), sn.until_marker(&mut n, pubcmd, ch));
            assert_eq!(ml, mn, "round {round}: {kind} messages");
        }
    }
    let counts = info_counts(&mut n, "_native");
    if std::env::var_os("FAMILY_COUNTS").is_some() {
        eprintln!("native {counts:?}\nlua {:?}", info_counts(&mut n, "_lua"));
    }
    let ran: Vec<&String> = counts
        .iter()
        .filter(|(k, v)| {
            **v > 0 && ["fair", "latch", "spin", "nonreentrant"].iter().any(|p| k.starts_with(p))
        })
        .map(|(k, _)| k)
        .collect();
    assert!(ran.len() >= 24, "nearly every family operation ran natively: {ran:?}");
}

/// Natively run scripts replicate their effects exactly: a replica without the module ends with
/// the same keys (list order, zset scores, TTLs) as the master.
#[test]
fn native_runs_replicate_exactly_to_a_replica_without_the_module() {
    let master = Server::start_opts(native_opts());
    let replica = Server::start_opts(Opts::default().without_module());
    replica.replicate_from(&master);
    let (mut m, mut r) = (Conn::new(master.port), Conn::new(replica.port));
    load_family(&mut m);
    let mut rng = StdRng::seed_from_u64(11);
    let scripts = family_scripts();
    for _ in 0..60 {
        let now = client_now();
        random_state(&mut rng, &mut [&mut m], now);
        for _ in 0..6 {
            let s = &scripts[rng.gen_range(0..scripts.len())];
            let name = *pick(&mut rng, &NAMES);
            let call = call_for(s.kind, name, &mut rng, now);
            evalsha(&mut m, &s.sha, &call);
        }
    }
    assert!(info_counts(&mut m, "_native").values().sum::<i64>() > 150);
    let (mut mc, mut rc) = (master.conn(), replica.conn());
    assert!(replica_caught_up(&mut mc, &mut rc, Duration::from_secs(10)));
    same_keyspace(&mut m, &mut r, "replica");
}

fn sha(op: &str) -> String {
    family_scripts().into_iter().find(|x| x.kind == op).expect("op").sha
}

/// The fair lock's queue in action, natively: waiters queue in order with deadlines built from
/// the holder's PTTL, the head takes the freed lock and everyone behind moves up by `wait`,
/// and a waiter that gives up takes its share of the wait with it.
#[test]
fn fair_queue_deadlines_follow_the_scripts() {
    let s = Server::start_opts(native_opts());
    let mut c = Conn::new(s.port);
    load_family(&mut c);
    let now = client_now();
    let acq = |c: &mut Conn, owner: &str| {
        let call: Call = (
            "fair-acquire",
            vec![b("f1"), b(queue("f1")), b(deadlines("f1"))],
            vec![b("30000"), b(owner), b("5000"), b(now.to_string())],
        );
        evalsha(c, &sha("fair-acquire"), &call)
    };
    assert_eq!(acq(&mut c, "a:1"), R::Nil);
    let first = acq(&mut c, "b:1").int();
    assert!((29_000..=30_000).contains(&first), "{first}");
    let b_deadline = cmd!(c, "ZSCORE", deadlines("f1"), "b:1").str().parse::<i64>().expect("score");
    assert_eq!(b_deadline, first + 5000 + now);
    assert_eq!(acq(&mut c, "c:1").int(), b_deadline - now);
    let c_deadline = cmd!(c, "ZSCORE", deadlines("f1"), "c:1").str().parse::<i64>().expect("score");
    assert_eq!(c_deadline, b_deadline + 5000);
    // The holder leaves: the head is told on its own channel, then takes the lock.
    let mut sub = Sub::new(s.port, "SUBSCRIBE", &[b(format!("{}:b:1", prefix("f1")))]);
    let unlock: Call = (
        "fair-unlock-latch",
        vec![b("f1"), b(queue("f1")), b(deadlines("f1")), b(prefix("f1")), b(unlock_latch("f1", 1))],
        vec![b("0"), b("30000"), b("a:1"), b(now.to_string()), b("PUBLISH"), b("13500")],
    );
    assert_eq!(evalsha(&mut c, &sha("fair-unlock-latch"), &unlock), R::Int(1));
    let got = sub.until_marker(&mut c, "PUBLISH", format!("{}:b:1", prefix("f1")).as_bytes());
    assert_eq!(got, vec![(b(format!("{}:b:1", prefix("f1"))), b("0"))]);
    assert_eq!(acq(&mut c, "b:1"), R::Nil);
    let moved = cmd!(c, "ZSCORE", deadlines("f1"), "c:1").str().parse::<i64>().expect("score");
    assert_eq!(moved, c_deadline - 5000);
    // c gives up: it leaves both.
    let failed: Call =
        ("fair-acquirefailed", vec![b(queue("f1")), b(deadlines("f1"))], vec![b("c:1"), b("5000")]);
    assert_eq!(evalsha(&mut c, &sha("fair-acquirefailed"), &failed), R::Nil);
    assert_eq!(cmd!(c, "EXISTS", queue("f1"), deadlines("f1")).int(), 0);
    let counts = info_counts(&mut c, "_native");
    assert_eq!(counts.get("fair_acquire"), Some(&4));
    assert_eq!(counts.get("fair_unlock_latch"), Some(&1));
    assert_eq!(counts.get("fair_acquirefailed"), Some(&1));
}

/// A LOCK.ACQUIRE client waiting on `name`, once it is queued.
fn waiter(c: &mut Conn, port: u16, name: &str) -> Conn {
    let mut w = Conn::new(port);
    w.set_timeout(Duration::from_secs(10));
    w.send(&["LOCK.ACQUIRE", name, "lockstar", "30000", "WAIT", "5000"]);
    let queued = wait_for(Duration::from_secs(5), || {
        let r = cmd!(c, "LOCK.INFO", name);
        r.arr().chunks(2).any(|p| p[0].str() == "waiters" && p[1].int() == 1).then_some(())
    });
    assert!(queued.is_some(), "{name}: the waiter queued");
    w
}

/// A fair unlock, a spin unlock and a spin force unlock that free the lock hand it to the
/// head LOCK.ACQUIRE waiter inside the call; a fair acquire of a free lock that LOCK.* clients
/// wait for finds it taken by their head.
#[test]
fn freed_locks_go_to_lock_acquire_waiters() {
    let s = Server::start_opts(native_opts());
    let mut c = Conn::new(s.port);
    load_family(&mut c);
    let now = client_now().to_string();
    let fair_unlock: Call = (
        "fair-unlock-bug",
        vec![b("f1"), b(queue("f1")), b(deadlines("f1")), b(prefix("f1"))],
        vec![b("0"), b("30000"), b("r:1"), b(&now), b("PUBLISH")],
    );
    cmd!(c, "HSET", "f1", "r:1", 1);
    let mut w = waiter(&mut c, s.port, "f1");
    assert_eq!(evalsha(&mut c, &sha("fair-unlock-bug"), &fair_unlock), R::Int(1));
    assert!(!w.read().expect("granted").is_err());
    assert_eq!(cmd!(c, "HGET", "f1", "lockstar").str(), "1");
    for (op, call) in [
        ("spin-unlock", (vec![b("s1")], vec![b("30000"), b("r:1")])),
        ("spin-forceunlock", (vec![b("s1")], vec![])),
    ] {
        cmd!(c, "DEL", "s1");
        cmd!(c, "HSET", "s1", "r:1", 1);
        let mut w = waiter(&mut c, s.port, "s1");
        assert_eq!(evalsha(&mut c, &sha(op), &(op, call.0, call.1)), R::Int(1), "{op}");
        assert!(!w.read().expect("granted").is_err(), "{op}");
        assert_eq!(cmd!(c, "HGET", "s1", "lockstar").str(), "1", "{op}");
    }
    let counts = info_counts(&mut c, "_native");
    assert_eq!(counts.get("spin_unlock"), Some(&1));
    assert_eq!(counts.get("spin_forceunlock"), Some(&1));
}

/// The non-reentrant locks refuse their own owner with the error text the client sends,
/// spelled as Redis spells `redis.error_reply` (`-ERR <text>`), natively and in Lua alike.
#[test]
fn non_reentrant_reacquire_errors_match_lua() {
    let lua = Server::start_opts(Opts::default().without_module());
    let native = Server::start_opts(native_opts());
    let (mut l, mut n) = (Conn::new(lua.port), Conn::new(native.port));
    load_family(&mut l);
    load_family(&mut n);
    let now = client_now().to_string();
    for text in ["NON_REENTRANT_REACQUIRE", "WORD two words"] {
        for (op, call) in [
            ("nonreentrant-acquire", (vec![b("k")], vec![b("30000"), b("o:1"), b(text)])),
            (
                "nonreentrant-fair-acquire",
                (
                    vec![b("k"), b(queue("k")), b(deadlines("k"))],
                    vec![b("30000"), b("o:1"), b("5000"), b(&now), b(text)],
                ),
            ),
        ] {
            let call: Call = (op, call.0, call.1);
            for c in [&mut l, &mut n] {
                cmd!(c, "DEL", "k");
                assert_eq!(evalsha(c, &sha(op), &call), R::Nil);
            }
            let (rl, rn) = (evalsha(&mut l, &sha(op), &call), evalsha(&mut n, &sha(op), &call));
            assert_eq!(rl, rn, "{op} {text}");
            assert!(rn.is_err() && rn.err().contains(text.split(' ').next_back().unwrap_or("")), "{rn:?}");
        }
    }
    assert_eq!(info_counts(&mut n, "_native").get("nonreentrant_acquire"), Some(&4));
}

/// A native run checks every command on the script's path against the caller's ACL before
/// writing, with the real arguments: a user who may not ZINCRBY cannot take a fair lock with
/// waiters behind (and changes nothing), one who may not publish on the head's channel cannot
/// unlock, and a user without the latch key's write right cannot count down.
#[test]
fn native_runs_follow_the_callers_acl() {
    let s = Server::start_opts(native_opts());
    let mut c = Conn::new(s.port);
    load_family(&mut c);
    let now = client_now();
    cmd!(c, "ACL", "SETUSER", "u", "on", "nopass", "+@all", "-zincrby", "~*", "&*");
    cmd!(c, "ACL", "SETUSER", "v", "on", "nopass", "+@all", "~*", "resetchannels", "&other");
    cmd!(c, "ACL", "SETUSER", "w", "on", "nopass", "+@all", "~f*", "~redisson*", "&*");
    cmd!(c, "RPUSH", queue("f1"), "b:1");
    cmd!(c, "ZADD", deadlines("f1"), now + 100_000, "b:1");
    cmd!(c, "ZADD", deadlines("f1"), now + 200_000, "c:1");
    let take: Call = (
        "fair-acquire",
        vec![b("f1"), b(queue("f1")), b(deadlines("f1"))],
        vec![b("30000"), b("b:1"), b("5000"), b(now.to_string())],
    );
    let mut u = Conn::new(s.port);
    cmd!(u, "AUTH", "u", "x");
    let e = evalsha(&mut u, &sha("fair-acquire"), &take);
    assert!(e.is_err() && e.err().contains("zincrby"), "{e:?}");
    assert_eq!(cmd!(c, "EXISTS", "f1").int(), 0);
    assert_eq!(cmd!(c, "LLEN", queue("f1")).int(), 1, "nothing changed");
    assert_eq!(evalsha(&mut c, &sha("fair-acquire"), &take), R::Nil);
    let unlock: Call = (
        "fair-unlock-bug",
        vec![b("f1"), b(queue("f1")), b(deadlines("f1")), b(prefix("f1"))],
        vec![b("0"), b("30000"), b("b:1"), b(now.to_string()), b("PUBLISH")],
    );
    cmd!(c, "RPUSH", queue("f1"), "c:1");
    let mut v = Conn::new(s.port);
    cmd!(v, "AUTH", "v", "x");
    let e = evalsha(&mut v, &sha("fair-unlock-bug"), &unlock);
    assert!(e.is_err(), "{e:?}");
    assert_eq!(cmd!(c, "HGET", "f1", "b:1").str(), "1", "still held");
    assert_eq!(evalsha(&mut c, &sha("fair-unlock-bug"), &unlock), R::Int(1));
    cmd!(c, "SET", "g1", 2);
    let countdown: Call =
        ("latch-countdown", vec![b("g1"), b(latch_channel("g1"))], vec![b("0"), b("PUBLISH")]);
    let mut w = Conn::new(s.port);
    cmd!(w, "AUTH", "w", "x");
    let e = evalsha(&mut w, &sha("latch-countdown"), &countdown);
    assert!(e.is_err(), "{e:?}");
    assert_eq!(cmd!(c, "GET", "g1").str(), "2");
    assert_eq!(evalsha(&mut c, &sha("latch-countdown"), &countdown), R::Nil);
    assert_eq!(cmd!(c, "GET", "g1").str(), "1");
}

/// In a one-node cluster, Lua and native agree on slots: a latch named `x{t}` gets CROSSSLOT
/// (Redisson's channel always adds braces), a fair force unlock with SPUBLISH to a head's
/// channel outside the script's slot fails as the script does (after the same writes), and a normal
/// fair lock works.
#[test]
fn cluster_slots_as_for_the_script() {
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
    let (_l, mut l) = node(Opts::default().without_module());
    let (_n, mut n) = node(native_opts());
    load_family(&mut l);
    load_family(&mut n);
    let slot = |c: &mut Conn, k: &str| cmd!(c, "CLUSTER", "KEYSLOT", k).int();
    // A channel prefix in the lock's slot whose head channel is not: "p{<n>" has no closing
    // brace (the whole name is hashed), "p{<n>:h}x" hashes "<n>:h".
    let home = slot(&mut l, "{a}");
    let p = (0..200_000)
        .map(|i| format!("p{{{i}"))
        .find(|p| slot(&mut l, p) == home && slot(&mut l, &format!("{p}:h}}x")) != home)
        .expect("a prefix");
    let now = client_now().to_string();
    let mut calls: Vec<Call> = vec![
        ("latch-trysetcount", vec![b("x{t}"), b(latch_channel("x{t}"))], vec![b("1"), b("2"), b("SPUBLISH")]),
        ("latch-trysetcount", vec![b("{t}l"), b(latch_channel("{t}l"))], vec![b("1"), b("2"), b("SPUBLISH")]),
        (
            "fair-acquire",
            vec![b("{t}f"), b(queue("{t}f")), b(deadlines("{t}f"))],
            vec![b("30000"), b("o:1"), b("5000"), b(&now)],
        ),
    ];
    for c in [&mut l, &mut n] {
        cmd!(c, "HSET", "{a}", "o:1", 1);
        cmd!(c, "RPUSH", "{a}q", "h}x");
    }
    calls.push((
        "fair-forceunlock",
        vec![b("{a}"), b("{a}q"), b("{a}z"), b(&p)],
        vec![b("0"), b(&now), b("SPUBLISH")],
    ));
    for call in &calls {
        let (rl, rn) = (evalsha(&mut l, &sha(call.0), call), evalsha(&mut n, &sha(call.0), call));
        same_reply(&rl, &rn, &format!("{} {}", call.0, show(&call.1)));
        same_keyspace(&mut l, &mut n, call.0);
    }
    assert!(evalsha(&mut n, &sha("latch-trysetcount"), &calls[0]).err().contains("CROSSSLOT"));
    assert_eq!(cmd!(n, "EXISTS", "{a}").int(), 0, "the script deleted the lock before it failed");
    assert_eq!(info_counts(&mut n, "_lua").get("fair_forceunlock"), Some(&1), "left to Lua");
}

/// Hostile calls of every family script (built-in SHA1s and our own texts, any numkeys, odd
/// arguments, called as EVALSHA or LOCK.REDISSON) never crash the server or reach a panic.
#[test]
fn hostile_family_calls_never_crash_the_server() {
    const BUILTIN: [&str; 8] = [
        "8f6ed299ffd259f0539c20f89253998c0777ea75",
        "367f80bd2e300e411fb0936d9b601e5bcb3fd4b6",
        "d1ddef65ad80886b5d36e023c99930044ddd653a",
        "38060fab26b0e7c5982a5cfd7ad542e44d3da19b",
        "73ac2729af29ea9a975f95e8097f7ee9a74cce3d",
        "51b433c3cc9a6ca991b3aefec63d23490c246318",
        "3daa7be6cf69d9309ad990442e83bf25094f9b22",
        "46724422f148047badd768b1b1a3d750d86bded2",
    ];
    let mut s = Server::start_opts(native_opts());
    let mut c = Conn::new(s.port);
    load_family(&mut c);
    let mut rng = StdRng::seed_from_u64(0xbad);
    let shas: Vec<String> =
        BUILTIN.iter().map(|s| s.to_string()).chain(family_scripts().into_iter().map(|s| s.sha)).collect();
    let choices: [&[u8]; 12] = [
        b"k",
        b"{k}q",
        b"30000",
        b"0",
        b"PUBLISH",
        b"",
        b"\x00\xff",
        b"-5",
        b"SPUBLISH",
        b"1e400",
        b"9007199254740993",
        b"o:1",
    ];
    for i in 0..4000 {
        if i % 500 == 0 {
            cmd!(c, "FLUSHALL");
            cmd!(c, "RPUSH", "{k}q", "o:1", "x");
            cmd!(c, "ZADD", "{k}z", "-inf", "o:1", "nan", "y");
        }
        let mut v: Vec<Vec<u8>> = vec![if rng.gen_bool(0.7) { b("EVALSHA") } else { b("LOCK.REDISSON") }];
        v.push(b(pick(&mut rng, &shas)));
        v.push(if rng.gen_ratio(1, 6) { b("-1") } else { b(rng.gen_range(0..7).to_string()) });
        for _ in 0..rng.gen_range(0..12) {
            v.push(pick(&mut rng, &choices).to_vec());
        }
        if let R::Err(e) = c.call(&v) {
            assert!(!e.contains("internal error"), "{e}");
        }
    }
    s.assert_alive();
    let mut rc = s.conn();
    assert_eq!(stat(&mut rc, "panics_caught"), 0);
}

/// Write refusals as for the script: with `min-replicas-to-write 1` and no replica, a call whose
/// path writes gets the server's refusal and changes nothing, one whose path only reads (a busy
/// tryLock, a non-reentrant lock refusing its own owner) runs: natively and in Lua alike.
#[test]
fn write_refusals_as_for_the_script() {
    let lua = Server::start_opts(Opts::default().without_module());
    let native = Server::start_opts(native_opts());
    let (mut l, mut n) = (Conn::new(lua.port), Conn::new(native.port));
    load_family(&mut l);
    load_family(&mut n);
    let now = client_now().to_string();
    for c in [&mut l, &mut n] {
        cmd!(c, "HSET", "f1", "other:1", 1);
        cmd!(c, "HSET", "k", "o:1", 1);
        cmd!(c, "SET", "g1", 3);
        cmd!(c, "CONFIG", "SET", "min-replicas-to-write", 1);
    }
    let calls: Vec<Call> = vec![
        (
            "fair-tryacquire",
            vec![b("f1"), b(queue("f1")), b(deadlines("f1"))],
            vec![b("30000"), b("o:1"), b(&now), b("5000")],
        ),
        (
            "fair-acquire",
            vec![b("f1"), b(queue("f1")), b(deadlines("f1"))],
            vec![b("30000"), b("o:1"), b("5000"), b(&now)],
        ),
        ("latch-countdown", vec![b("g1"), b(latch_channel("g1"))], vec![b("0"), b("PUBLISH")]),
        ("nonreentrant-acquire", vec![b("k")], vec![b("30000"), b("o:1"), b("NON_REENTRANT_REACQUIRE")]),
        ("spin-forceunlock", vec![b("k")], vec![]),
    ];
    let mut refused = 0;
    for call in &calls {
        let (rl, rn) = (evalsha(&mut l, &sha(call.0), call), evalsha(&mut n, &sha(call.0), call));
        same_reply(&rl, &rn, call.0);
        refused += usize::from(rn.is_err() && rn.err().starts_with("NOREPLICAS"));
        same_keyspace(&mut l, &mut n, call.0);
    }
    assert_eq!(refused, 3, "the enqueue, the count-down and the force unlock write");
    assert_eq!(evalsha(&mut n, &sha("fair-tryacquire"), &calls[0]), R::Int(1));
}

//! `lock.redisson-scripts native` for the semaphores (spec family.md section 13): Redisson's 34
//! `RSemaphore` / `RPermitExpirableSemaphore` script texts run natively.
//!
//! Redisson's own script text may not be in this repository, so the native code paths are
//! driven through our own Lua implementation of each operation (`lua/semaphore-*.lua`,
//! `lua/pes-*.lua`, written from the research facts), registered with
//! `lock.redisson-extra-scripts` under the operation names. The same calls go to a server
//! without the module (Lua) and to a server with `native`: replies (their RESP types too),
//! keyspace (values, zset members and scores, TTLs within a tolerance) and published messages
//! must match, over random states and calls.

mod common;
use common::scripts::{assert_same_keyspace, info_counts, load_sem, native_opts, sem_scripts, show};
use common::*;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use resp::{Conn, Sub, R};
use std::time::{Duration, Instant};
use testkit::cmd;

const NAMES: [&str; 3] = ["s1", "{t}s2", "a{b"];
const NO_LEASE: &str = "922337203685477";
const IDS: [&[u8]; 5] = [b"id-a", b"id-b", b"\x00\xff\x10binary-16-bytes", b"id-d", b"id-e"];

fn zset(name: &str) -> String {
    if name.contains('{') {
        format!("{name}:timeout")
    } else {
        format!("{{{name}}}:timeout")
    }
}

fn channel(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_sc:{name}")
    } else {
        format!("redisson_sc:{{{name}}}")
    }
}

/// The clients' clock in these calls: far enough ahead of the servers' that the module's lease
/// timers (on the server clock) never return a permit during the test, so both servers see the
/// same reclaims, those the scripts make.
fn client_now() -> i64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock");
    i64::try_from(t.as_millis()).expect("ms") + 1_000_000_000
}

/// (operation, KEYS, ARGV) of a Redisson-shaped call.
type Call = (&'static str, Vec<Vec<u8>>, Vec<Vec<u8>>);

fn b(s: impl AsRef<[u8]>) -> Vec<u8> {
    s.as_ref().to_vec()
}

fn call_for(op: &'static str, name: &str, rng: &mut StdRng, now: i64) -> Call {
    let (k, z, ch) = (b(name), b(zset(name)), b(channel(name)));
    let publish = b(["PUBLISH", "publish", "SPUBLISH"][rng.gen_range(0..3)]);
    let count = b(["1", "2", "0", "3", "-1", "x", "5"][rng.gen_range(0..7)]);
    let score = b(match rng.gen_range(0..4) {
        0 => NO_LEASE.to_string(),
        1 => (now - 500).to_string(),
        _ => (now + rng.gen_range(1..100_000)).to_string(),
    });
    let id = b(IDS[rng.gen_range(0..IDS.len())]);
    let nowb = b(now.to_string());
    let ids = |rng: &mut StdRng, n: usize| -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = Vec::new();
        while v.len() < n {
            let i = b(IDS[rng.gen_range(0..IDS.len())]);
            if !v.contains(&i) || rng.gen_bool(0.1) {
                v.push(i);
            }
        }
        v
    };
    let (keys, args) = match op {
        "semaphore-tryacquire" => (vec![k], vec![count]),
        "semaphore-release-publish" | "semaphore-trysetpermits-publish" | "semaphore-addpermits-publish" => {
            (vec![k, ch], vec![count])
        }
        "semaphore-release"
        | "semaphore-releaseifexists"
        | "semaphore-trysetpermits"
        | "semaphore-addpermits" => (vec![k, ch], vec![count, publish]),
        "semaphore-trysetpermits-ttl" => {
            (vec![k, ch], vec![count, publish, b(["60000", "0", "1000"][rng.gen_range(0..3)])])
        }
        "semaphore-drain" => (vec![k], vec![]),
        "pes-tryacquire-one-publish" => (vec![k, z, ch], vec![b("1"), score, id, nowb, b(NO_LEASE)]),
        "pes-tryacquire-one" => (vec![k, z, ch], vec![b("1"), score, id, nowb, b(NO_LEASE), publish]),
        "pes-tryacquire" => {
            let n = rng.gen_range(1..4);
            let mut a = vec![b(n.to_string()), score, nowb, b(NO_LEASE), publish];
            a.extend(ids(rng, n));
            (vec![k, z, ch], a)
        }
        "pes-release-publish" => (vec![k, ch, z], vec![id, b("1"), nowb]),
        "pes-release" => (vec![k, ch, z], vec![id, b("1"), nowb, publish]),
        "pes-release-many-partial" | "pes-release-many" => {
            let n = rng.gen_range(1..4);
            let mut a = vec![b(n.to_string()), nowb, publish];
            a.extend(ids(rng, n));
            (vec![k, ch, z], a)
        }
        "pes-available-publish" | "pes-getpermits-publish" | "pes-acquired-publish" => {
            (vec![k, z, ch], vec![nowb])
        }
        "pes-available" | "pes-getpermits" | "pes-acquired" => (vec![k, z, ch], vec![nowb, publish]),
        "pes-setpermits-publish-bug" => (vec![k, ch, z], vec![count]),
        "pes-setpermits-bug" | "pes-setpermits" => (vec![k, ch, z], vec![count, publish]),
        "pes-addpermits-publish" => (vec![k, ch], vec![count]),
        "pes-addpermits" => (vec![k, ch], vec![count, publish]),
        "pes-updatelease-publish" => (vec![k, z, ch], vec![id, score, nowb]),
        "pes-updatelease" => (vec![k, z, ch], vec![id, score, nowb, publish]),
        "pes-getlease" => (vec![k, z, ch], vec![id, b(NO_LEASE), nowb, publish]),
        other => panic!("unknown op {other}"),
    };
    (op, keys, args)
}

/// Put the same random state on both servers: the count (absent, numbers, not a number, with or
/// without a TTL) and the zset (expired, live and lease-less permits).
fn random_state(rng: &mut StdRng, cs: &mut [&mut Conn], now: i64) {
    for c in cs.iter_mut() {
        cmd!(c, "FLUSHALL");
    }
    for name in NAMES {
        let value = ["", "0", "2", "5", "-1", "abc", "1.5"][rng.gen_range(0..7)];
        let ttl = rng.gen_bool(0.3);
        let mut members: Vec<(String, Vec<u8>)> = Vec::new();
        for id in IDS {
            match rng.gen_range(0..4) {
                0 => members.push(((now - rng.gen_range(1..10_000)).to_string(), b(id))),
                1 => members.push(((now + rng.gen_range(1..100_000)).to_string(), b(id))),
                2 => members.push((NO_LEASE.to_string(), b(id))),
                _ => {}
            }
        }
        for c in cs.iter_mut() {
            if !value.is_empty() {
                cmd!(c, "SET", name, value);
                if ttl {
                    cmd!(c, "PEXPIRE", name, 600_000);
                }
            }
            for (score, id) in &members {
                c.call(&[b"ZADD".to_vec(), b(zset(name)), b(score), id.clone()]);
            }
        }
    }
}

fn evalsha(c: &mut Conn, sha: &str, call: &Call) -> R {
    let mut argv = vec![b("EVALSHA"), b(sha), b(call.1.len().to_string())];
    argv.extend(call.1.iter().cloned());
    argv.extend(call.2.iter().cloned());
    c.call(&argv)
}

const OPS: usize = 31;

#[test]
fn every_operation_matches_lua_over_random_states() {
    let lua = Server::start_opts(Opts::default().without_module());
    let native = Server::start_opts(native_opts());
    let (mut l, mut n) = (Conn::new(lua.port), Conn::new(native.port));
    load_sem(&mut l);
    load_sem(&mut n);
    let chans: Vec<Vec<u8>> = NAMES.iter().map(|x| b(channel(x))).collect();
    let mut sl = Sub::new(lua.port, "SUBSCRIBE", &chans);
    let mut sn = Sub::new(native.port, "SUBSCRIBE", &chans);
    // The keyspace events too: the same commands' events, in the same order.
    for c in [&mut l, &mut n] {
        cmd!(c, "CONFIG", "SET", "notify-keyspace-events", "KA");
    }
    let events = vec![b("__keyspace@0__:*")];
    let (mut el, mut en) =
        (Sub::new(lua.port, "PSUBSCRIBE", &events), Sub::new(native.port, "PSUBSCRIBE", &events));
    let scripts = sem_scripts();
    assert_eq!(scripts.len(), OPS);
    let mut rng = StdRng::seed_from_u64(0x5e3a);
    let deadline = Instant::now() + Duration::from_secs(60);
    for round in 0..400 {
        if Instant::now() > deadline {
            break;
        }
        let now = client_now();
        random_state(&mut rng, &mut [&mut l, &mut n], now);
        let mut sent: Vec<String> = Vec::new();
        for _ in 0..6 {
            let s = &scripts[rng.gen_range(0..scripts.len())];
            let name = NAMES[rng.gen_range(0..NAMES.len())];
            let call = call_for(s.kind, name, &mut rng, now);
            let (rl, rn) = (evalsha(&mut l, &s.sha, &call), evalsha(&mut n, &s.sha, &call));
            let ctx = format!("round {round}: {} {} {}", s.kind, show(&call.1), show(&call.2));
            sent.push(format!("{ctx} -> {rl:?}"));
            match (&rl, &rn) {
                (R::Err(a), R::Err(b)) => assert_eq!(a.split(' ').next(), b.split(' ').next(), "{ctx}"),
                _ => assert_eq!(rl, rn, "{ctx}"),
            }
            assert_same_keyspace(&mut l, &mut n, 2000, &ctx);
        }
        let marker = b"__keyspace@0__:marker";
        let (kl, kn) =
            (el.until_marker(&mut l, "PUBLISH", marker), en.until_marker(&mut n, "PUBLISH", marker));
        let text = |v: &[(Vec<u8>, Vec<u8>)]| -> Vec<String> {
            v.iter()
                .map(|(c, m)| format!("{} {}", String::from_utf8_lossy(c), String::from_utf8_lossy(m)))
                .collect()
        };
        assert_eq!(text(&kl), text(&kn), "round {round}: keyspace events after {sent:#?}");
        for ch in &chans {
            let (ml, mn) = (sl.until_marker(&mut l, "PUBLISH", ch), sn.until_marker(&mut n, "PUBLISH", ch));
            assert_eq!(ml, mn, "round {round}: messages on {}", String::from_utf8_lossy(ch));
        }
    }
    let counts = info_counts(&mut n, "_native");
    let ran: Vec<&String> = counts
        .iter()
        .filter(|(k, v)| **v > 0 && (k.starts_with("pes") || k.starts_with("semaphore")))
        .map(|(k, _)| k)
        .collect();
    assert!(ran.len() >= 28, "most semaphore operations ran natively: {ran:?}");
}

#[test]
fn native_releases_grant_lock_sem_waiters_and_acquires_arm_lease_timers() {
    let s = Server::start_opts(native_opts());
    let mut c = Conn::new(s.port);
    load_sem(&mut c);
    let sha = |op: &str| sem_scripts().into_iter().find(|x| x.kind == op).expect("op").sha;
    cmd!(c, "LOCK.SEMSET", "s1", 1);
    cmd!(c, "LOCK.SEMACQUIRE", "s1", 0, 1, "holder");
    let mut w = Conn::new(s.port);
    w.set_timeout(Duration::from_secs(10));
    w.send(&["LOCK.SEMACQUIRE", "s1", "0", "1", "waiter", "WAIT", "0"]);
    let queued = wait_for(Duration::from_secs(5), || {
        let r = cmd!(c, "LOCK.SEMINFO", "s1");
        (r.arr().chunks(2).any(|p| p[0].str() == "waiters" && p[1].int() == 1)).then_some(())
    });
    assert!(queued.is_some());
    // A Redisson release of the holder's permit (PES, 3.22+) grants the waiter inside the call.
    let now = client_now().to_string();
    let call: Call = (
        "pes-release",
        vec![b("s1"), b(channel("s1")), b(zset("s1"))],
        vec![b("holder"), b("1"), b(&now), b("PUBLISH")],
    );
    assert_eq!(evalsha(&mut c, &sha("pes-release"), &call), R::Int(1));
    assert_eq!(w.read().expect("granted"), R::Nil);
    assert_eq!(cmd!(c, "GET", "s1").str(), "0");
    // A Redisson acquire with a lease on the server clock returns on time through the timer.
    cmd!(c, "LOCK.SEMRELEASE", "s1", "waiter");
    let t =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis() as i64;
    let call: Call = (
        "pes-tryacquire",
        vec![b("s1"), b(zset("s1")), b(channel("s1"))],
        vec![b("1"), b((t + 300).to_string()), b(t.to_string()), b(NO_LEASE), b("PUBLISH"), b("r-id")],
    );
    assert_eq!(evalsha(&mut c, &sha("pes-tryacquire"), &call), R::Bulk(b("OK")));
    assert_eq!(cmd!(c, "GET", "s1").str(), "0");
    let back = wait_for(Duration::from_secs(3), || (cmd!(c, "GET", "s1").str() == "1").then_some(()));
    assert!(back.is_some(), "the permit came back at its lease end");
    let counts = info_counts(&mut c, "_native");
    assert_eq!(counts.get("pes_release"), Some(&1));
    assert_eq!(counts.get("pes_tryacquire"), Some(&1));
}

/// Natively run scripts replicate their effects exactly: a replica without the module ends with
/// the same keys (values, zset members and scores, TTLs) as the master.
#[test]
fn native_runs_replicate_exactly_to_a_replica_without_the_module() {
    let master = Server::start_opts(native_opts());
    let replica = Server::start_opts(Opts::default().without_module());
    replica.replicate_from(&master);
    let (mut m, mut r) = (Conn::new(master.port), Conn::new(replica.port));
    load_sem(&mut m);
    let mut rng = StdRng::seed_from_u64(7);
    let scripts = sem_scripts();
    let now = client_now();
    random_state(&mut rng, &mut [&mut m], now);
    for _ in 0..300 {
        let s = &scripts[rng.gen_range(0..scripts.len())];
        let call = call_for(s.kind, NAMES[rng.gen_range(0..NAMES.len())], &mut rng, now);
        evalsha(&mut m, &s.sha, &call);
    }
    assert!(info_counts(&mut m, "_native").values().sum::<i64>() > 100);
    let (mut mc, mut rc) = (master.conn(), replica.conn());
    assert!(replica_caught_up(&mut mc, &mut rc, Duration::from_secs(10)));
    assert_same_keyspace(&mut m, &mut r, 2000, "replica");
}

/// A native run checks every command on the script's path against the caller's ACL before
/// writing: a user who may not ZADD gets the script's ACL error and nothing changes; a user who
/// may not publish on the channel cannot release.
#[test]
fn native_runs_follow_the_callers_acl() {
    let s = Server::start_opts(native_opts());
    let mut c = Conn::new(s.port);
    load_sem(&mut c);
    let sha = |op: &str| sem_scripts().into_iter().find(|x| x.kind == op).expect("op").sha;
    cmd!(c, "SET", "s1", 2);
    cmd!(c, "ACL", "SETUSER", "u", "on", "nopass", "+@all", "-zadd", "~*", "&*");
    cmd!(c, "ACL", "SETUSER", "v", "on", "nopass", "+@all", "~*", "resetchannels");
    let now = client_now().to_string();
    let acquire: Call = (
        "pes-tryacquire",
        vec![b("s1"), b(zset("s1")), b(channel("s1"))],
        vec![b("1"), b(NO_LEASE), b(&now), b(NO_LEASE), b("PUBLISH"), b("x")],
    );
    let mut u = Conn::new(s.port);
    cmd!(u, "AUTH", "u", "x");
    let e = evalsha(&mut u, &sha("pes-tryacquire"), &acquire);
    assert!(e.is_err() && e.err().contains("zadd"), "{e:?}");
    assert_eq!(cmd!(c, "GET", "s1").str(), "2");
    assert_eq!(cmd!(c, "EXISTS", zset("s1")).int(), 0);
    assert_eq!(evalsha(&mut c, &sha("pes-tryacquire"), &acquire), R::Bulk(b("OK")));
    let release: Call = (
        "pes-release",
        vec![b("s1"), b(channel("s1")), b(zset("s1"))],
        vec![b("x"), b("1"), b(&now), b("PUBLISH")],
    );
    let mut v = Conn::new(s.port);
    cmd!(v, "AUTH", "v", "x");
    let e = evalsha(&mut v, &sha("pes-release"), &release);
    assert!(e.is_err(), "{e:?}");
    assert_eq!(cmd!(c, "GET", "s1").str(), "1", "nothing returned");
    assert_eq!(evalsha(&mut c, &sha("pes-release"), &release), R::Int(1));
}

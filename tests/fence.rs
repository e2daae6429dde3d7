//! Fencing tokens (spec section 7): `LOCK.ACQUIRE ... FENCE` reply shapes, strictly increasing
//! tokens across release, expiry, FORCERELEASE, WAIT grants, restarts (AOF and RDB), replicas
//! without the module, Redisson `RFencedLock` clients INCRing the same key, `lock.token-ttl`,
//! and a failover that lost the old master's last writes.

mod common;
use common::*;

use testkit::cmd;

use resp::{Conn, R};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const FENCED_LUA: &str = include_str!("../clients/python/src/redislock/lua/fenced-acquire.lua");

fn token_key(k: &str) -> String {
    format!("redisson_lock_token:{{{k}}}")
}

/// `[-1, token]`: acquired; returns the token.
fn granted(r: &R) -> i64 {
    match r.arr() {
        [R::Int(-1), R::Int(t)] if *t > 0 => *t,
        other => panic!("expected [-1, token], got {other:?}"),
    }
}

/// `[pttl, -1]`: not acquired; returns the PTTL.
fn refused(r: &R) -> i64 {
    match r.arr() {
        [R::Int(p), R::Int(-1)] => *p,
        other => panic!("expected [pttl, -1], got {other:?}"),
    }
}

fn fenced(c: &mut Conn, k: &str, owner: &str, lease: i64) -> R {
    cmd!(c, "LOCK.ACQUIRE", k, owner, lease, "FENCE")
}

fn stored(c: &mut Conn, k: &str) -> Option<i64> {
    match cmd!(c, "GET", token_key(k)) {
        R::Nil => None,
        r => Some(r.str().parse().expect("token key holds an integer")),
    }
}

fn lock_info_token(c: &mut Conn, k: &str) -> i64 {
    let r = cmd!(c, "LOCK.INFO", k);
    let a = r.arr();
    let i = a.chunks(2).position(|p| p[0].bytes() == b"token").expect("LOCK.INFO token field");
    a[2 * i + 1].int()
}

fn now_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as i64
}

fn wait_gone(c: &mut Conn, key: &str) {
    let gone = wait_for(Duration::from_secs(10), || (cmd!(c, "EXISTS", key) == R::Int(0)).then_some(()));
    assert!(gone.is_some(), "{key} did not expire");
}

#[test]
fn reply_shapes_and_tokens_strictly_increasing() {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "plain", "me", 1000), R::Nil, "without FENCE nothing changes");
    assert_eq!(cmd!(c, "EXISTS", token_key("plain")), R::Int(0), "no token without FENCE");
    assert_eq!(lock_info_token(&mut c, "plain"), -1);

    let before = now_us();
    let t1 = granted(&fenced(&mut c, "k", "me", 30000));
    assert!(t1 >= before && t1 <= now_us(), "first token is the clock in µs: {t1}");
    assert_eq!(stored(&mut c, "k"), Some(t1));
    // A reentrant acquire keeps its hold's token: same reply, nothing written.
    let mut rc0 = s.conn();
    let issued = stat(&mut rc0, "tokens_issued");
    assert_eq!(granted(&fenced(&mut c, "k", "me", 30000)), t1, "reentry keeps the token");
    assert_eq!(cmd!(c, "HGET", "k", "me").str(), "2");
    assert_eq!(stored(&mut c, "k"), Some(t1), "token key unchanged");
    assert_eq!(stat(&mut rc0, "tokens_issued"), issued, "no token issued on reentry");
    // ... unless none is stored: then a new one.
    assert_eq!(cmd!(c, "DEL", token_key("k")), R::Int(1));
    let t2 = granted(&fenced(&mut c, "k", "me", 30000));
    assert!(t2 > t1, "a new token when none is stored");
    assert_eq!(stored(&mut c, "k"), Some(t2));
    assert_eq!(granted(&fenced(&mut c, "k", "me", 30000)), t2);
    assert_eq!(cmd!(c, "HGET", "k", "me").str(), "4");
    let p = refused(&fenced(&mut c, "k", "other", 30000));
    assert!(p > 29000 && p <= 30000, "pttl {p}");
    assert_eq!(stored(&mut c, "k"), Some(t2), "a refused acquire issues no token");
    assert_eq!(lock_info_token(&mut c, "k"), t2);
    // A foreign-held lock without a TTL: [-1, -1] (Redisson's shape has the same edge case).
    assert_eq!(cmd!(c, "HSET", "nottl", "them", "1"), R::Int(1));
    assert_eq!(fenced(&mut c, "nottl", "me", 1000), R::Arr(vec![R::Int(-1), R::Int(-1)]));

    // Release, FORCERELEASE, expiry, and thousands of cycles.
    let mut last = t2;
    let mut next = |c: &mut Conn, owner: &str, lease: i64| {
        let t = granted(&fenced(c, "k", owner, lease));
        assert!(t > last, "token {t} after {last}");
        last = t;
    };
    for _ in 0..3 {
        assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "me"), R::Int(0));
    }
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "me"), R::Int(1));
    next(&mut c, "a", 30000);
    assert_eq!(cmd!(c, "LOCK.FORCERELEASE", "k"), R::Int(1));
    next(&mut c, "b", 30);
    wait_gone(&mut c, "k");
    next(&mut c, "c", 30000);
    assert_eq!(cmd!(c, "DEL", "k"), R::Int(1));
    for i in 0..3000 {
        next(&mut c, &format!("o{}", i % 7), 30000);
        assert_eq!(cmd!(c, "LOCK.RELEASE", "k", format!("o{}", i % 7)), R::Int(1));
    }
    assert_eq!(stored(&mut c, "k"), Some(last));
    assert_eq!(cmd!(c, "TTL", token_key("k")), R::Int(-1), "token-ttl 0 keeps the key");
    let mut rc = s.conn();
    assert_eq!(stat(&mut rc, "tokens_issued"), 2 + 3 + 3000);
}

#[test]
fn options_in_any_order_and_refusals_change_nothing() {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    granted(&cmd!(c, "LOCK.ACQUIRE", "a", "me", 1000, "fence", "WAIT", 10));
    granted(&cmd!(c, "LOCK.ACQUIRE", "b", "me", 1000, "WAIT", 0, "FeNcE"));
    for bad in [
        vec!["FENCE", "FENCE"],
        vec!["FENCE", "WAIT"],
        vec!["FENCE", "WAIT", "1", "FENCE"],
        vec!["FENCEX"],
        vec!["WAIT", "1", "WAIT", "1", "FENCE"],
    ] {
        let mut args = vec!["LOCK.ACQUIRE", "c", "me", "1000"];
        args.extend(bad.iter());
        let r = c.call(&args.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>());
        assert_eq!(r, R::Err("ERR syntax error".into()), "{bad:?}");
    }
    let r = cmd!(c, "LOCK.ACQUIRE", "c", "me", 1000, "WAIT", "FENCE");
    assert_eq!(r.err(), "ERR timeout-ms is not an integer or out of range");
    assert_eq!(cmd!(c, "EXISTS", "c", token_key("c")), R::Int(0));

    // Token keys that cannot take a token: the lock is not taken, nothing is written.
    let cases: [(&str, &[&str], &str); 4] = [
        ("wt", &["HSET", "redisson_lock_token:{wt}", "f", "v"], "WRONGTYPE"),
        ("ls", &["RPUSH", "redisson_lock_token:{ls}", "x"], "WRONGTYPE"),
        (
            "ni",
            &["SET", "redisson_lock_token:{ni}", "12abc"],
            "ERR the lock's fencing token key does not hold an integer",
        ),
        (
            "max",
            &["SET", "redisson_lock_token:{max}", "9223372036854775807"],
            "ERR the lock's fencing token cannot grow",
        ),
    ];
    for (k, setup, err) in cases {
        let setup: Vec<Vec<u8>> = setup.iter().map(|a| a.as_bytes().to_vec()).collect();
        assert!(!c.call(&setup).is_err());
        let dump = cmd!(c, "DUMP", token_key(k));
        let r = fenced(&mut c, k, "me", 1000);
        assert!(r.err().starts_with(err), "{k}: {r:?}");
        assert_eq!(cmd!(c, "EXISTS", k), R::Int(0), "{k}: lock not taken");
        assert_eq!(cmd!(c, "DUMP", token_key(k)), dump, "{k}: token key unchanged");
        assert_eq!(cmd!(c, "LOCK.ACQUIRE", k, "me", 1000), R::Nil);
        if k == "max" {
            // A reentrant acquire keeps the stored token, which needs no room to grow.
            assert_eq!(granted(&fenced(&mut c, k, "me", 1000)), i64::MAX);
            assert_eq!(cmd!(c, "HGET", k, "me").str(), "2", "{k}: reentered");
            continue;
        }
        // A reentrant acquire is refused the same way and keeps the count.
        assert!(fenced(&mut c, k, "me", 1000).is_err());
        assert_eq!(cmd!(c, "HGET", k, "me").str(), "1", "{k}: count unchanged");
    }

    // MULTI and Lua: FENCE works, WAIT does not block.
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "m", "holder", 5000), R::Nil);
    assert_eq!(cmd!(c, "MULTI"), R::Simple("OK".into()));
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "m", "me", 1000, "WAIT", 0, "FENCE"), R::Simple("QUEUED".into()));
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "m2", "me", 1000, "FENCE"), R::Simple("QUEUED".into()));
    let r = cmd!(c, "EXEC");
    assert!(refused(&r.arr()[0]) > 4000);
    granted(&r.arr()[1]);
    let lua = "return redis.call('LOCK.ACQUIRE', KEYS[1], ARGV[1], 1000, 'WAIT', 0, 'FENCE')";
    assert!(refused(&cmd!(c, "EVAL", lua, 1, "m", "me")) > 4000);
    granted(&cmd!(c, "EVAL", lua, 1, "m3", "me"));
}

#[test]
fn wait_grants_and_handoffs_carry_tokens() {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    let t0 = granted(&fenced(&mut c, "q", "holder", 30000));
    let mut a = Conn::new(s.port);
    a.send(&[
        b"LOCK.ACQUIRE".to_vec(),
        b"q".to_vec(),
        b"A".to_vec(),
        b"30000".to_vec(),
        b"WAIT".to_vec(),
        b"10000".to_vec(),
        b"FENCE".to_vec(),
    ]);
    let mut b = Conn::new(s.port);
    b.send(&[
        b"LOCK.ACQUIRE".to_vec(),
        b"q".to_vec(),
        b"B".to_vec(),
        b"50".to_vec(),
        b"WAIT".to_vec(),
        b"10000".to_vec(),
    ]);
    let mut t = Conn::new(s.port);
    t.send(&[
        b"LOCK.ACQUIRE".to_vec(),
        b"q".to_vec(),
        b"T".to_vec(),
        b"30000".to_vec(),
        b"FENCE".to_vec(),
        b"WAIT".to_vec(),
        b"100".to_vec(),
    ]);
    let mut d = Conn::new(s.port);
    d.send(&[
        b"LOCK.ACQUIRE".to_vec(),
        b"q".to_vec(),
        b"D".to_vec(),
        b"30000".to_vec(),
        b"WAIT".to_vec(),
        b"0".to_vec(),
        b"FENCE".to_vec(),
    ]);
    let mut rc = s.conn();
    let queued = wait_for(Duration::from_secs(10), || (stat(&mut rc, "waiters") == 4).then_some(()));
    assert!(queued.is_some(), "4 waiters queued");

    // T's wait times out: [pttl, -1].
    let p = refused(&t.read().unwrap());
    assert!(p > 29000, "T timed out while the holder's lease runs: {p}");
    // Release: A is handed the lock with a token above the holder's.
    assert_eq!(cmd!(c, "LOCK.RELEASE", "q", "holder"), R::Int(1));
    let ta = granted(&a.read().unwrap());
    assert!(ta > t0);
    assert_eq!(stored(&mut c, "q"), Some(ta));
    // A releases: B (no FENCE) gets nil and no token is issued.
    assert_eq!(cmd!(a, "LOCK.RELEASE", "q", "A"), R::Int(1));
    assert_eq!(b.read().unwrap(), R::Nil);
    assert_eq!(stored(&mut c, "q"), Some(ta));
    // B's 50 ms lease expires: D gets the lock from the lease timer, with a new token.
    let td = granted(&d.read().unwrap());
    assert!(td > ta);
    assert_eq!(cmd!(c, "HGETALL", "q"), R::Arr(vec![R::Bulk(b"D".to_vec()), R::Bulk(b"1".to_vec())]));
    assert_eq!(lock_info_token(&mut c, "q"), td);

    // CLIENT UNBLOCK of a FENCE waiter: [pttl, -1].
    let mut u = Conn::new(s.port);
    let id = cmd!(u, "CLIENT", "ID").int();
    u.send(&[
        b"LOCK.ACQUIRE".to_vec(),
        b"q".to_vec(),
        b"U".to_vec(),
        b"100".to_vec(),
        b"FENCE".to_vec(),
        b"WAIT".to_vec(),
        b"0".to_vec(),
    ]);
    let queued = wait_for(Duration::from_secs(10), || (stat(&mut rc, "waiters") == 1).then_some(()));
    assert!(queued.is_some());
    assert_eq!(cmd!(c, "CLIENT", "UNBLOCK", id), R::Int(1));
    assert!(refused(&u.read().unwrap()) > 0);

    // A FENCE waiter whose token key went bad gets the error; the next waiter is served.
    let mut e = Conn::new(s.port);
    e.send(&[
        b"LOCK.ACQUIRE".to_vec(),
        b"q".to_vec(),
        b"E".to_vec(),
        b"100".to_vec(),
        b"FENCE".to_vec(),
        b"WAIT".to_vec(),
        b"0".to_vec(),
    ]);
    let mut f = Conn::new(s.port);
    f.send(&[
        b"LOCK.ACQUIRE".to_vec(),
        b"q".to_vec(),
        b"F".to_vec(),
        b"100".to_vec(),
        b"WAIT".to_vec(),
        b"0".to_vec(),
    ]);
    let queued = wait_for(Duration::from_secs(10), || (stat(&mut rc, "waiters") == 2).then_some(()));
    assert!(queued.is_some());
    assert_eq!(cmd!(c, "SET", token_key("q"), "not-a-number"), R::Simple("OK".into()));
    assert_eq!(cmd!(d, "LOCK.RELEASE", "q", "D"), R::Int(1));
    assert!(e.read().unwrap().err().contains("does not hold an integer"));
    assert_eq!(f.read().unwrap(), R::Nil);
    assert_eq!(cmd!(c, "HGETALL", "q"), R::Arr(vec![R::Bulk(b"F".to_vec()), R::Bulk(b"1".to_vec())]));
}

fn restart_keeps_tokens(aof: bool) {
    let opts = if aof { "--appendonly yes --appendfsync always" } else { "--save 3600 1" };
    let mut s = Server::start_with(opts);
    let mut c = Conn::new(s.port);
    let t1 = granted(&fenced(&mut c, "r", "me", 60000));
    // A token far ahead of the clock: after the restart only the persisted value can keep the
    // next token above it.
    let ahead = now_us() + 3_600_000_000;
    assert_eq!(cmd!(c, "SET", token_key("ahead"), ahead), R::Simple("OK".into()));
    let t2 = granted(&fenced(&mut c, "ahead", "me", 60000));
    assert_eq!(t2, ahead + 1);
    assert!(t1 < t2);
    if !aof {
        assert_eq!(cmd!(c, "SAVE"), R::Simple("OK".into()));
    }
    s.restart("");
    let mut c = Conn::new(s.port);
    assert_eq!(stored(&mut c, "ahead"), Some(t2), "token persisted");
    assert_eq!(cmd!(c, "HGET", "r", "me").str(), "1", "lock persisted");
    assert_eq!(granted(&fenced(&mut c, "r", "me", 60000)), t1, "reentry keeps the persisted token");
    assert_eq!(cmd!(c, "LOCK.FORCERELEASE", "ahead"), R::Int(1));
    let t3 = granted(&fenced(&mut c, "ahead", "me", 60000));
    assert_eq!(t3, t2 + 1, "after restart: stored + 1");
    assert_eq!(cmd!(c, "LOCK.FORCERELEASE", "r"), R::Int(1));
    let t4 = granted(&fenced(&mut c, "r", "me", 60000));
    assert!(t4 > t1);
}

#[test]
fn tokens_survive_aof_restart() {
    restart_keeps_tokens(true);
}

#[test]
fn tokens_survive_rdb_restart() {
    restart_keeps_tokens(false);
}

fn offset(c: &mut Conn, field: &str) -> i64 {
    let info = cmd!(c, "INFO", "replication").str();
    info.lines().find_map(|l| l.strip_prefix(&format!("{field}:"))).map_or(-1, |v| v.trim().parse().unwrap())
}

#[test]
fn replicas_without_the_module_receive_the_token_and_its_ttl() {
    let master = Server::start_with("--notify-keyspace-events KA");
    let replica = Server::start_opts(Opts::default().without_module());
    replica.replicate_from(&master);
    let mut m = Conn::new(master.port);
    let mut r = Conn::new(replica.port);
    let mut events = resp::Sub::new(
        master.port,
        "SUBSCRIBE",
        &[format!("__keyspace@0__:{}", token_key("k")).into_bytes()],
    );
    let t1 = granted(&fenced(&mut m, "k", "me", 30000));
    assert_eq!(cmd!(m, "CONFIG", "SET", "lock.token-ttl", 60000), R::Simple("OK".into()));
    assert_eq!(cmd!(m, "LOCK.RELEASE", "k", "me"), R::Int(1));
    let t2 = granted(&fenced(&mut m, "k", "me", 30000));
    assert!(t2 > t1);
    assert_eq!(cmd!(m, "WAIT", 1, 5000), R::Int(1));
    assert_eq!(stored(&mut r, "k"), Some(t2));
    let exp = cmd!(m, "PEXPIRETIME", token_key("k")).int();
    assert!(exp > 0);
    assert_eq!(cmd!(r, "PEXPIRETIME", token_key("k")).int(), exp, "absolute TTL replicated exactly");
    assert_eq!(cmd!(r, "PEXPIRETIME", "k"), cmd!(m, "PEXPIRETIME", "k"));
    let mut pub_ = Conn::new(master.port);
    let got: Vec<Vec<u8>> = events
        .until_marker(&mut pub_, "PUBLISH", format!("__keyspace@0__:{}", token_key("k")).as_bytes())
        .into_iter()
        .map(|m| m.1)
        .collect();
    assert_eq!(got, vec![b"set".to_vec(), b"set".to_vec(), b"expire".to_vec()], "SET's keyspace events");
    assert!(offset(&mut m, "master_repl_offset") > 0);
}

#[test]
fn interop_with_lua_rfencedlock_clients() {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    let sha = cmd!(c, "SCRIPT", "LOAD", FENCED_LUA).str();
    let lua = |c: &mut Conn, owner: &str| cmd!(c, "EVALSHA", &sha, 2, "k", token_key("k"), 30000, owner);
    // A Redisson client counts from 1 on a fresh key.
    assert_eq!(granted(&lua(&mut c, "java:1")), 1);
    assert_eq!(granted(&lua(&mut c, "java:1")), 2, "reentry INCRs too");
    assert!(refused(&fenced(&mut c, "k", "py:1", 1000)) > 0);
    assert!(refused(&lua(&mut c, "java:2")) > 0);
    assert_eq!(stored(&mut c, "k"), Some(2), "refusals touch no counter");
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "java:1"), R::Int(0));
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "java:1"), R::Int(1));
    let mut last = 2;
    for i in 0..500 {
        let t = if i % 3 == 0 {
            granted(&lua(&mut c, "java:1"))
        } else {
            granted(&fenced(&mut c, "k", "py:1", 30000))
        };
        assert!(t > last, "round {i}: {t} after {last}");
        last = t;
        let owner = if i % 3 == 0 { "java:1" } else { "py:1" };
        assert_eq!(cmd!(c, "LOCK.RELEASE", "k", owner), R::Int(1));
    }
}

#[test]
fn token_ttl_lets_keys_expire_and_tokens_still_increase() {
    let s = Server::start_opts(Opts::default().module_arg("token-ttl 100"));
    let mut c = Conn::new(s.port);
    assert_eq!(
        cmd!(c, "CONFIG", "GET", "lock.token-ttl"),
        R::Arr(vec![R::Bulk(b"lock.token-ttl".to_vec()), R::Bulk(b"100".to_vec())])
    );
    let mut last = 0;
    for round in 0..3 {
        let t = granted(&fenced(&mut c, "k", "me", 30000));
        assert!(t > last, "round {round}");
        last = t;
        let p = cmd!(c, "PTTL", token_key("k")).int();
        assert!(p > 0 && p <= 100, "token key pttl {p}");
        assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "me"), R::Int(1));
        wait_gone(&mut c, &token_key("k"));
    }
    assert!(cmd!(c, "CONFIG", "SET", "lock.token-ttl", -1).is_err());
    assert_eq!(cmd!(c, "CONFIG", "SET", "lock.token-ttl", 0), R::Simple("OK".into()));
    granted(&fenced(&mut c, "k", "me", 30000));
    assert_eq!(cmd!(c, "PTTL", token_key("k")), R::Int(-1));
    // A custom token prefix.
    assert_eq!(cmd!(c, "CONFIG", "SET", "lock.token-prefix", "fence"), R::Simple("OK".into()));
    let t = granted(&fenced(&mut c, "z", "me", 30000));
    assert_eq!(cmd!(c, "GET", "fence:{z}").str(), t.to_string());
}

#[test]
fn crossslot_names_are_refused_in_cluster_mode() {
    let s = Server::start_cluster_node("");
    let mut c = Conn::new(s.port);
    granted(&fenced(&mut c, "{t}x", "me", 1000));
    granted(&fenced(&mut c, "plain", "me", 1000));
    let r = fenced(&mut c, "a{b", "me", 1000);
    assert!(r.err().starts_with("CROSSSLOT"), "{r:?}");
    assert_eq!(cmd!(c, "EXISTS", "a{b"), R::Int(0));
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status().expect("kill");
    assert!(ok.success(), "kill -{sig} {pid}");
}

/// Resumes a stopped process even when the test fails half-way.
struct Resume(u32);
impl Drop for Resume {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg("-CONT").arg(self.0.to_string()).status();
    }
}

#[test]
fn failover_that_lost_writes_still_issues_higher_tokens() {
    let mut master = Server::start();
    let replica = Server::start();
    replica.replicate_from(&master);
    let mut m = Conn::new(master.port);
    let mut r = Conn::new(replica.port);
    // Tokens the replica receives.
    let mut issued = vec![];
    for i in 0..50 {
        issued.push(granted(&fenced(&mut m, "res", &format!("a{i}"), 30000)));
        assert_eq!(cmd!(m, "LOCK.RELEASE", "res", format!("a{i}")), R::Int(1));
        assert_eq!(cmd!(m, "INCR", "plain-counter").int(), i + 1);
    }
    assert_eq!(cmd!(m, "WAIT", 1, 5000), R::Int(1));
    let synced = *issued.last().unwrap();
    assert_eq!(stored(&mut r, "res"), Some(synced));

    // Stop the replica and cut its link: what the master writes from now on is lost.
    let rpid = replica.pid().expect("replica pid");
    signal(rpid, "STOP");
    let resume = Resume(rpid);
    assert_eq!(cmd!(m, "CLIENT", "KILL", "TYPE", "replica").int(), 1);
    let cut = wait_for(Duration::from_secs(10), || {
        cmd!(m, "INFO", "replication").str().contains("connected_slaves:0").then_some(())
    });
    assert!(cut.is_some(), "replica link not cut");
    let mut lost = vec![];
    for i in 0..20 {
        lost.push(granted(&fenced(&mut m, "res", &format!("b{i}"), 30000)));
        assert_eq!(cmd!(m, "LOCK.RELEASE", "res", format!("b{i}")), R::Int(1));
    }
    let counter_on_master = cmd!(m, "INCR", "plain-counter").int();
    let highest = *lost.last().unwrap();
    master.kill();

    // Promote the replica.
    signal(rpid, "CONT");
    drop(resume);
    let mut r = Conn::new(replica.port);
    assert_eq!(cmd!(r, "REPLICAOF", "NO", "ONE"), R::Simple("OK".into()));
    let role =
        wait_for(Duration::from_secs(10), || cmd!(r, "ROLE").arr()[0].str().eq("master").then_some(()));
    assert!(role.is_some());
    assert_eq!(stored(&mut r, "res"), Some(synced), "the promoted replica lacks the last tokens");
    assert!(synced < lost[0]);
    let next = granted(&fenced(&mut r, "res", "c", 30000));
    assert!(next > highest, "first token after failover {next} must exceed the dead master's {highest}");

    // What a plain counter does in the same failover: it hands out a number again.
    let reissued = cmd!(r, "INCR", "plain-counter").int();
    println!(
        "plain INCR counter: the dead master last issued {counter_on_master}; the promoted replica \
         issues {reissued} again (a stale holder with {reissued} would pass a fence check). \
         FENCE: dead master's last token {highest}, first token after failover {next}."
    );
    assert!(reissued <= counter_on_master, "a plain counter re-issues tokens after losing writes");
}

#[test]
fn same_owner_waiters_granted_together_share_one_token() {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    let t0 = granted(&fenced(&mut c, "g", "holder", 30000));
    let send = |owner: &str| {
        let mut w = Conn::new(s.port);
        w.send(&[
            b"LOCK.ACQUIRE".to_vec(),
            b"g".to_vec(),
            owner.as_bytes().to_vec(),
            b"30000".to_vec(),
            b"WAIT".to_vec(),
            b"10000".to_vec(),
            b"FENCE".to_vec(),
        ]);
        w
    };
    let (mut a1, mut a2) = (send("A"), send("A"));
    let mut rc = s.conn();
    let queued = wait_for(Duration::from_secs(10), || (stat(&mut rc, "waiters") == 2).then_some(()));
    assert!(queued.is_some(), "2 waiters queued");
    let issued = stat(&mut rc, "tokens_issued");
    assert_eq!(cmd!(c, "LOCK.RELEASE", "g", "holder"), R::Int(1));
    let ta = granted(&a1.read().unwrap());
    assert!(ta > t0);
    assert_eq!(granted(&a2.read().unwrap()), ta, "the second hold of A reenters: same token");
    assert_eq!(cmd!(c, "HGET", "g", "A").str(), "2");
    assert_eq!(stored(&mut c, "g"), Some(ta));
    assert_eq!(stat(&mut rc, "tokens_issued"), issued + 1, "one token for the two holds");
}

/// A lock held by another owner with no TTL (after PERSIST) gives `[-1, -1]`: its first element
/// is the PTTL (-1: no TTL), not "acquired". A token is never -1 (tokens start at 1), so the
/// second element tells: -1 means not acquired (docs/fencing.md). Nothing is written, and the
/// Python client reports it as not acquired (clients/python tests).
#[test]
fn a_lock_without_ttl_replies_minus_one_twice_and_issues_nothing() {
    let s = Server::start();
    let mut c = Conn::new(s.port);
    let t = granted(&fenced(&mut c, "k", "a", 60_000));
    assert_eq!(cmd!(c, "PERSIST", "k"), R::Int(1));
    let issued = info_int(&mut s.conn(), "lock", "lock_tokens_issued");
    let r = fenced(&mut c, "k", "b", 60_000);
    assert_eq!(r, R::Arr(vec![R::Int(-1), R::Int(-1)]), "held without a TTL");
    assert_eq!(refused(&r), -1);
    assert_eq!(stored(&mut c, "k"), Some(t), "no token written");
    assert_eq!(info_int(&mut s.conn(), "lock", "lock_tokens_issued"), issued);
    assert_eq!(cmd!(c, "HGETALL", "k"), R::Arr(vec![R::Bulk(b"a".to_vec()), R::Bulk(b"1".to_vec())]));
    // The same with WAIT that times out: the reply after the wait has the same shape.
    let r = cmd!(c, "LOCK.ACQUIRE", "k", "b", 60_000, "WAIT", 50, "FENCE");
    assert_eq!(r, R::Arr(vec![R::Int(-1), R::Int(-1)]));
}

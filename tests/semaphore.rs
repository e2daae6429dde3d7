//! The semaphore's LOCK.SEM* commands (family.md section 12): Redisson's permit-expirable
//! layout (the count string, the `{K}:timeout` zset of ids and lease ends, the `redisson_sc`
//! channel), replies, messages, errors that change nothing, expired permits returned on time
//! by the server, FIFO waiting with several permits per request and no barging, foreign writes
//! waking the queue, replication to a module-less replica, ACL on derived names, and a
//! 16-client / 4-permit stress.

mod common;
use common::*;

use resp::{Conn, Sub, R};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testkit::cmd;

const NO_LEASE: i64 = 922_337_203_685_477;
const CH: &[u8] = b"redisson_sc:{s}";
const Z: &str = "{s}:timeout";

fn started() -> (Server, Conn) {
    let s = Server::start();
    let c = Conn::new(s.port);
    (s, c)
}

/// The zset as (id, score) pairs, lowest score first.
fn held(c: &mut Conn, z: &str) -> Vec<(Vec<u8>, i64)> {
    let r = cmd!(c, "ZRANGE", z, 0, -1, "WITHSCORES");
    r.arr().chunks(2).map(|p| (p[0].bytes(), p[1].str().parse::<i64>().expect("score"))).collect()
}

fn avail(c: &mut Conn, k: &str) -> R {
    cmd!(c, "GET", k)
}

fn info(c: &mut Conn, k: &str, field: &str) -> R {
    let r = cmd!(c, "LOCK.SEMINFO", k);
    r.arr().chunks(2).find(|p| p[0].str() == field).map(|p| p[1].clone()).unwrap_or(R::Nil)
}

fn sem_stat(c: &mut Conn, field: &str) -> i64 {
    waiters::lock_stat(c, &format!("semaphore_{field}"))
}

/// A client that sent `LOCK.SEMACQUIRE k 0 n ids... WAIT ms`; its reply is read later.
fn waiting(port: u16, k: &str, ids: &[&str], ms: u64) -> Conn {
    let mut w = Conn::new(port);
    w.set_timeout(Duration::from_secs(10));
    let mut a: Vec<String> = vec!["LOCK.SEMACQUIRE".into(), k.into(), "0".into(), ids.len().to_string()];
    a.extend(ids.iter().map(|s| s.to_string()));
    a.extend(["WAIT".to_string(), ms.to_string()]);
    w.send(&a);
    w
}

fn wait_queued(c: &mut Conn, k: &str, n: i64) {
    let got = wait_for(Duration::from_secs(5), || (info(c, k, "waiters").int() == n).then_some(()));
    assert!(got.is_some(), "expected {n} waiters on {k}: {:?}", cmd!(c, "LOCK.SEMINFO", k));
}

fn replied_within(w: &mut Conn, ms: u64) -> Option<R> {
    w.read_until(Instant::now() + Duration::from_millis(ms))
}

/// Every string of a reply, depth first.
fn flat(r: &R) -> Vec<String> {
    match r {
        R::Arr(a) => a.iter().flat_map(flat).collect(),
        R::Bulk(_) | R::Simple(_) => vec![r.str()],
        _ => vec![],
    }
}

fn snapshot(c: &mut Conn) -> Vec<(Vec<u8>, R)> {
    scripts::keys(c).into_iter().map(|k| (k.clone(), c.call(&[b"DUMP".to_vec(), k]))).collect()
}

#[test]
fn permits_follow_redissons_layout_with_their_replies_and_messages() {
    let (s, mut c) = started();
    let mut sub = Sub::new(s.port, "SUBSCRIBE", &[CH.to_vec()]);
    assert_eq!(cmd!(c, "LOCK.SEMSET", "s", 3, "NX").int(), 1);
    assert_eq!(cmd!(c, "LOCK.SEMSET", "s", 9, "nx").int(), 0);
    assert_eq!(avail(&mut c, "s").str(), "3");
    // Two permits with a lease, one without.
    let t0 = cmd!(c, "TIME").arr()[0].str().parse::<i64>().unwrap() * 1000;
    assert_eq!(cmd!(c, "LOCK.SEMACQUIRE", "s", 60000, 2, "a", "b"), R::Nil);
    assert_eq!(cmd!(c, "LOCK.SEMACQUIRE", "s", 0, 1, "c"), R::Nil);
    assert_eq!(avail(&mut c, "s").str(), "0");
    let h = held(&mut c, Z);
    assert_eq!(h.len(), 3);
    assert_eq!(h[2], (b"c".to_vec(), NO_LEASE));
    assert!(h[0].1 >= t0 + 59000 && h[0].1 <= t0 + 62000, "{h:?}");
    // Busy: the ms until the earliest lease ends.
    let ms = cmd!(c, "LOCK.SEMACQUIRE", "s", 1000, 1, "d").int();
    assert!((55000..=60000).contains(&ms), "{ms}");
    // Release: counts only held ids; the new count is published.
    assert_eq!(cmd!(c, "LOCK.SEMRELEASE", "s", "a", "zz").int(), 1);
    assert_eq!(cmd!(c, "LOCK.SEMRELEASE", "s", "a").int(), 0);
    assert_eq!(avail(&mut c, "s").str(), "1");
    // Renew: a new lease end for held ids only.
    assert_eq!(cmd!(c, "LOCK.SEMRENEW", "s", 120000, "b", "a").int(), 1);
    assert!(held(&mut c, Z)[0].1 > t0 + 100000);
    assert_eq!(cmd!(c, "LOCK.SEMRENEW", "s", 0, "b").int(), 1);
    assert_eq!(held(&mut c, Z), vec![(b"b".to_vec(), NO_LEASE), (b"c".to_vec(), NO_LEASE)]);
    // Only non-expiring permits held: -1.
    assert_eq!(cmd!(c, "LOCK.SEMACQUIRE", "s", 0, 2, "d", "e").int(), -1);
    // SEMSET sets the total: 2 held, total 5 -> 3 available (published).
    assert_eq!(cmd!(c, "LOCK.SEMSET", "s", 5).int(), 1);
    assert_eq!(avail(&mut c, "s").str(), "3");
    assert_eq!(info(&mut c, "s", "total").int(), 5);
    let msgs: Vec<Vec<u8>> = sub.until_marker(&mut c, "PUBLISH", CH).into_iter().map(|m| m.1).collect();
    assert_eq!(msgs, vec![b"3".to_vec(), b"1".to_vec(), b"3".to_vec()], "NX creation, release, raise");
    // A missing semaphore has no permits; nothing is created by a failed acquire.
    assert_eq!(cmd!(c, "LOCK.SEMACQUIRE", "none", 0, 1, "x").int(), -1);
    assert_eq!(cmd!(c, "EXISTS", "none", "{none}:timeout").int(), 0);
    // The count keeps its TTL, and the zset gets it (Redisson's rule).
    cmd!(c, "PEXPIRE", "s", 50000);
    assert_eq!(cmd!(c, "LOCK.SEMACQUIRE", "s", 0, 1, "t"), R::Nil);
    assert!(cmd!(c, "PTTL", "s").int() > 40000);
    assert!(cmd!(c, "PTTL", Z).int() > 40000);
    // Names with '{' keep no extra braces; binary ids.
    assert_eq!(cmd!(c, "LOCK.SEMSET", "a{t}", 1).int(), 1);
    c.call(&[&b"LOCK.SEMACQUIRE"[..], b"a{t}", b"0", b"1", b"\x00\xff\r\n"]);
    assert_eq!(held(&mut c, "a{t}:timeout"), vec![(b"\x00\xff\r\n".to_vec(), NO_LEASE)]);
    let r = c.call(&[&b"LOCK.SEMRELEASE"[..], b"a{t}", b"\x00\xff\r\n"]);
    assert_eq!(r.int(), 1);
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let (_s, mut c) = started();
    cmd!(c, "LOCK.SEMSET", "s", 2);
    cmd!(c, "LOCK.SEMACQUIRE", "s", 0, 1, "held");
    let before = snapshot(&mut c);
    let cases: &[&[&str]] = &[
        &["LOCK.SEMSET", "s"],
        &["LOCK.SEMSET", "s", "-1"],
        &["LOCK.SEMSET", "s", "x"],
        &["LOCK.SEMSET", "s", "9007199254740992"],
        &["LOCK.SEMSET", "s", "1", "XX"],
        &["LOCK.SEMACQUIRE", "s", "0", "1"],
        &["LOCK.SEMACQUIRE", "s", "0", "0", "a"],
        &["LOCK.SEMACQUIRE", "s", "0", "2", "a"],
        &["LOCK.SEMACQUIRE", "s", "0", "1", "a", "b"],
        &["LOCK.SEMACQUIRE", "s", "0", "2", "a", "a"],
        &["LOCK.SEMACQUIRE", "s", "0", "1", ""],
        &["LOCK.SEMACQUIRE", "s", "0", "1", "held"],
        &["LOCK.SEMACQUIRE", "s", "-5", "1", "a"],
        &["LOCK.SEMACQUIRE", "s", "x", "1", "a"],
        &["LOCK.SEMACQUIRE", "s", "9223372036854775807", "1", "a"],
        &["LOCK.SEMACQUIRE", "s", "922337203685477", "1", "a"],
        &["LOCK.SEMACQUIRE", "s", "0", "1", "a", "WAIT", "-1"],
        &["LOCK.SEMACQUIRE", "s", "0", "1", "a", "WAIT", "9223372036854775807"],
        &["LOCK.SEMRELEASE", "s"],
        &["LOCK.SEMRELEASE", "s", "a", "a"],
        &["LOCK.SEMRENEW", "s", "100"],
        &["LOCK.SEMRENEW", "s", "-1", "held"],
        &["LOCK.SEMINFO"],
        &["LOCK.SEMINFO", "s", "x"],
    ];
    for args in cases {
        let r = c.call(args);
        assert!(r.is_err(), "{args:?}: {r:?}");
        assert!(r.err().starts_with("ERR"), "{args:?}: {r:?}");
    }
    assert_eq!(snapshot(&mut c), before);
    // Wrong types: the count not a string, the zset not a zset, the count not an integer.
    cmd!(c, "HSET", "h", "f", "v");
    cmd!(c, "SET", "w", "1");
    cmd!(c, "SET", "{w}:timeout", "x");
    cmd!(c, "SET", "n", "1.5");
    for k in ["h", "w"] {
        for args in [
            vec!["LOCK.SEMSET", k, "1"],
            vec!["LOCK.SEMACQUIRE", k, "0", "1", "a"],
            vec!["LOCK.SEMRELEASE", k, "a"],
            vec!["LOCK.SEMRENEW", k, "10", "a"],
            vec!["LOCK.SEMINFO", k],
        ] {
            let r = c.call(&args);
            assert!(r.err().starts_with("WRONGTYPE"), "{args:?}: {r:?}");
        }
    }
    assert!(cmd!(c, "LOCK.SEMACQUIRE", "n", 0, 1, "a").err().contains("not an integer"));
    // A count written by hand at the i64 bound: a new total would not be one exact increment.
    cmd!(c, "SET", "m", i64::MIN);
    assert!(cmd!(c, "LOCK.SEMSET", "m", 5).err().contains("out of range"));
    assert_eq!(cmd!(c, "GET", "m").str(), i64::MIN.to_string());
    assert_eq!(cmd!(c, "GET", "n").str(), "1.5");
    assert_eq!(cmd!(c, "TYPE", "{n}:timeout").str(), "none");
}

#[test]
fn expired_permits_return_on_time_without_client_activity() {
    let (s, mut c) = started();
    cmd!(c, "LOCK.SEMSET", "s", 2);
    let mut sub = Sub::new(s.port, "SUBSCRIBE", &[CH.to_vec()]);
    let t0 = Instant::now();
    assert_eq!(cmd!(c, "LOCK.SEMACQUIRE", "s", 300, 2, "a", "b"), R::Nil);
    // Nobody calls: the server's timer returns both at the deadline and publishes the count.
    let m = sub.try_next(Duration::from_secs(3)).expect("a message when the leases end");
    let dt = t0.elapsed();
    assert_eq!(m.1, b"2".to_vec());
    assert!(dt >= Duration::from_millis(290) && dt < Duration::from_millis(600), "{dt:?}");
    assert_eq!(avail(&mut c, "s").str(), "2");
    assert_eq!(cmd!(c, "EXISTS", Z).int(), 0);
    assert_eq!(sem_stat(&mut c, "expired_returned"), 2);
    // A permit a Redisson client took in Lua (its acquire's writes) returns on time as well.
    let now = cmd!(c, "TIME").arr()[0].str().parse::<i64>().unwrap() * 1000
        + cmd!(c, "TIME").arr()[1].str().parse::<i64>().unwrap() / 1000;
    let script = "redis.call('decrby', KEYS[1], 1); redis.call('zadd', KEYS[2], ARGV[1], ARGV[2]); return 1";
    let t1 = Instant::now();
    cmd!(c, "EVAL", script, 2, "s", Z, now + 300, "redisson-id");
    assert_eq!(avail(&mut c, "s").str(), "1");
    let m = sub.try_next(Duration::from_secs(3)).expect("the Lua-taken permit returns");
    assert_eq!(m.1, b"2".to_vec());
    assert!(t1.elapsed() < Duration::from_millis(700), "{:?}", t1.elapsed());
    assert_eq!(held(&mut c, Z), vec![]);
    // A permit is returned once: a Redisson client (its clock a little ahead) reclaims it first,
    // then the server's timer finds nothing left to return.
    let reclaim = "local ids = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1]); \
                   for _, id in ipairs(ids) do redis.call('zrem', KEYS[2], id) end; \
                   if #ids > 0 then redis.call('incrby', KEYS[1], #ids) end; return #ids";
    cmd!(c, "LOCK.SEMACQUIRE", "s", 400, 1, "once");
    assert_eq!(cmd!(c, "EVAL", reclaim, 2, "s", Z, now + 60000).int(), 1);
    assert_eq!(avail(&mut c, "s").str(), "2");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(avail(&mut c, "s").str(), "2", "not returned a second time");
    assert!(sub.try_next(Duration::from_millis(50)).is_none());
    // A renewed permit does not return at its old deadline.
    cmd!(c, "LOCK.SEMACQUIRE", "s", 200, 1, "r");
    cmd!(c, "LOCK.SEMRENEW", "s", 5000, "r");
    assert!(sub.try_next(Duration::from_millis(500)).is_none());
    assert_eq!(avail(&mut c, "s").str(), "1");
}

/// Leases survive a restart (AOF) and a promotion: the loaded or replicated permits return at
/// their deadline with no semaphore command sent afterwards.
#[test]
fn leases_return_on_time_after_a_restart_and_after_a_promotion() {
    let mut s = Server::start_with("--appendonly yes");
    let mut c = Conn::new(s.port);
    cmd!(c, "LOCK.SEMSET", "s", 2);
    cmd!(c, "LOCK.SEMACQUIRE", "s", 2500, 1, "a");
    s.restart("");
    let mut c = Conn::new(s.port);
    assert_eq!(avail(&mut c, "s").str(), "1", "the permit was loaded held");
    let back = wait_for(Duration::from_secs(8), || (avail(&mut c, "s").str() == "2").then_some(()));
    assert!(back.is_some(), "the loaded permit returned on time: {:?}", held(&mut c, Z));
    let master = Server::start();
    let replica = Server::start();
    replica.replicate_from(&master);
    let mut m = Conn::new(master.port);
    cmd!(m, "LOCK.SEMSET", "s", 1);
    cmd!(m, "LOCK.SEMACQUIRE", "s", 1500, 1, "b");
    let (mut mc, mut rc) = (master.conn(), replica.conn());
    assert!(replica_caught_up(&mut mc, &mut rc, Duration::from_secs(10)));
    drop(master);
    let mut r = Conn::new(replica.port);
    assert_eq!(cmd!(r, "REPLICAOF", "NO", "ONE").str(), "OK");
    let back = wait_for(Duration::from_secs(8), || (avail(&mut r, "s").str() == "1").then_some(()));
    assert!(back.is_some(), "the promoted replica returned the permit: {:?}", held(&mut r, Z));
}

#[test]
fn waiters_are_served_in_order_with_several_permits_and_nobody_barges() {
    let (s, mut c) = started();
    cmd!(c, "LOCK.SEMSET", "s", 4);
    cmd!(c, "LOCK.SEMACQUIRE", "s", 0, 4, "h1", "h2", "h3", "h4");
    let mut big = waiting(s.port, "s", &["a1", "a2", "a3"], 0);
    wait_queued(&mut c, "s", 1);
    let mut small = waiting(s.port, "s", &["b1"], 0);
    wait_queued(&mut c, "s", 2);
    assert_eq!(info(&mut c, "s", "waiting_permits").int(), 4);
    // One permit back: the head needs 3, so nobody gets it, not even the 1-permit waiter behind
    // it, nor an acquire without WAIT.
    assert_eq!(cmd!(c, "LOCK.SEMRELEASE", "s", "h1").int(), 1);
    assert!(replied_within(&mut small, 200).is_none());
    assert_eq!(cmd!(c, "LOCK.SEMACQUIRE", "s", 0, 1, "barger").int(), -1);
    assert_eq!(avail(&mut c, "s").str(), "1");
    // Two more: the head takes its 3 inside the release.
    assert_eq!(cmd!(c, "LOCK.SEMRELEASE", "s", "h2", "h3").int(), 2);
    assert_eq!(big.read().unwrap(), R::Nil);
    assert_eq!(avail(&mut c, "s").str(), "0");
    assert!(held(&mut c, Z).iter().any(|(id, _)| id == b"a3"));
    assert!(replied_within(&mut small, 200).is_none());
    assert_eq!(cmd!(c, "LOCK.SEMRELEASE", "s", "h4").int(), 1);
    assert_eq!(small.read().unwrap(), R::Nil);
    assert_eq!(sem_stat(&mut c, "handoffs"), 2);
    // A waiter's wait ends: it replies as without WAIT, and leaves the line.
    let mut t = waiting(s.port, "s", &["t1"], 150);
    let r = t.read().unwrap();
    assert_eq!(r, R::Int(-1), "only permits without lease are held");
    assert_eq!(info(&mut c, "s", "waiters").int(), 0);
    // A waiter whose id took a permit meanwhile (through a Redisson client) gets an error.
    let mut dup = waiting(s.port, "s", &["d1"], 0);
    wait_queued(&mut c, "s", 1);
    cmd!(c, "ZADD", Z, NO_LEASE, "d1");
    cmd!(c, "INCRBY", "s", 1);
    assert!(dup.read().unwrap().err().contains("already holds"));
    assert_eq!(avail(&mut c, "s").str(), "1", "nothing taken for it");
}

#[test]
fn foreign_writes_and_lease_ends_wake_the_queue() {
    let (s, mut c) = started();
    cmd!(c, "LOCK.SEMSET", "s", 1);
    cmd!(c, "LOCK.SEMACQUIRE", "s", 0, 1, "h");
    // INCRBY (Redisson's RSemaphore release)
    let mut w = waiting(s.port, "s", &["w1"], 0);
    wait_queued(&mut c, "s", 1);
    cmd!(c, "INCRBY", "s", 1);
    assert_eq!(replied_within(&mut w, 500), Some(R::Nil));
    // SET
    let mut w = waiting(s.port, "s", &["w2"], 0);
    wait_queued(&mut c, "s", 1);
    cmd!(c, "SET", "s", "1");
    assert_eq!(replied_within(&mut w, 500), Some(R::Nil));
    // A PES release script's writes: ZREM the id, INCRBY, publish.
    let mut w = waiting(s.port, "s", &["w3"], 0);
    wait_queued(&mut c, "s", 1);
    let release = "redis.call('zrem', KEYS[2], ARGV[1]); local v = redis.call('incrby', KEYS[1], 1); \
                   redis.call('publish', KEYS[3], v); return 1";
    cmd!(c, "EVAL", release, 3, "s", Z, "redisson_sc:{s}", "w2");
    assert_eq!(replied_within(&mut w, 500), Some(R::Nil));
    assert_eq!(avail(&mut c, "s").str(), "0");
    // A lease end: granted at the deadline, with nobody calling.
    cmd!(c, "LOCK.SEMRELEASE", "s", "w3");
    cmd!(c, "LOCK.SEMACQUIRE", "s", 250, 1, "lease");
    let t0 = Instant::now();
    let mut w = waiting(s.port, "s", &["w4"], 0);
    assert_eq!(w.read().unwrap(), R::Nil);
    let dt = t0.elapsed();
    assert!(dt > Duration::from_millis(200) && dt < Duration::from_millis(600), "{dt:?}");
    // DEL: the semaphore has no permits; FLUSHALL likewise; the waiter stays.
    let mut w = waiting(s.port, "s", &["w5"], 0);
    wait_queued(&mut c, "s", 1);
    cmd!(c, "FLUSHALL");
    assert!(replied_within(&mut w, 200).is_none());
    cmd!(c, "LOCK.SEMSET", "s", 1);
    assert_eq!(w.read().unwrap(), R::Nil, "SEMSET grants");
    // A type change fails the waiter.
    let mut w = waiting(s.port, "s", &["w6"], 0);
    wait_queued(&mut c, "s", 1);
    cmd!(c, "DEL", "s");
    cmd!(c, "HSET", "s", "f", "v");
    assert!(w.read().unwrap().err().starts_with("WRONGTYPE"));
}

#[test]
fn waits_end_by_timeout_unblock_disconnect_and_not_inside_multi() {
    let (s, mut c) = started();
    cmd!(c, "LOCK.SEMSET", "s", 1);
    cmd!(c, "LOCK.SEMACQUIRE", "s", 30000, 1, "h");
    let t0 = Instant::now();
    let ms = cmd!(c, "LOCK.SEMACQUIRE", "s", 0, 1, "x", "WAIT", 100).int();
    assert!(t0.elapsed() >= Duration::from_millis(95));
    assert!((29000..=30000).contains(&ms), "{ms}");
    let mut x = Conn::new(s.port);
    x.set_timeout(Duration::from_secs(10));
    let id = cmd!(x, "CLIENT", "ID").int();
    x.send(&["LOCK.SEMACQUIRE", "s", "0", "1", "x", "WAIT", "0"]);
    wait_queued(&mut c, "s", 1);
    assert_eq!(cmd!(c, "CLIENT", "UNBLOCK", id).int(), 1);
    assert!(x.read().unwrap().int() > 0);
    let y = waiting(s.port, "s", &["y"], 0);
    wait_queued(&mut c, "s", 1);
    drop(y);
    wait_queued(&mut c, "s", 0);
    assert_eq!(sem_stat(&mut c, "waits_cancelled"), 2);
    // Released with nobody waiting: the permit stays available.
    assert_eq!(cmd!(c, "LOCK.SEMRELEASE", "s", "h").int(), 1);
    assert_eq!(avail(&mut c, "s").str(), "1");
    cmd!(c, "LOCK.SEMACQUIRE", "s", 0, 1, "h");
    assert_eq!(cmd!(c, "MULTI").str(), "OK");
    cmd!(c, "LOCK.SEMACQUIRE", "s", 0, 1, "m", "WAIT", 0);
    let r = cmd!(c, "EXEC");
    assert_eq!(r.arr()[0], R::Int(-1), "answered at once inside MULTI");
}

#[test]
fn replicas_without_the_module_hold_the_same_permits() {
    let master = Server::start();
    let replica = Server::start_opts(Opts::default().without_module());
    replica.replicate_from(&master);
    let mut m = Conn::new(master.port);
    let mut r = Conn::new(replica.port);
    cmd!(m, "LOCK.SEMSET", "s", 5, "NX");
    cmd!(m, "LOCK.SEMACQUIRE", "s", 60000, 2, "a", "b");
    cmd!(m, "LOCK.SEMACQUIRE", "s", 0, 1, "c");
    cmd!(m, "LOCK.SEMACQUIRE", "s", 150, 1, "short");
    cmd!(m, "LOCK.SEMRELEASE", "s", "a");
    cmd!(m, "LOCK.SEMRENEW", "s", 90000, "b");
    cmd!(m, "LOCK.SEMSET", "s", 7);
    cmd!(m, "PEXPIRE", "s", 100000);
    cmd!(m, "LOCK.SEMACQUIRE", "s", 60000, 1, "ttl");
    // The short lease returns on the master's timer; the replica gets its effects.
    let back = wait_for(Duration::from_secs(3), || (held(&mut m, Z).len() == 3).then_some(()));
    assert!(back.is_some(), "{:?}", held(&mut m, Z));
    let (mut mc, mut rc) = (master.conn(), replica.conn());
    assert!(replica_caught_up(&mut mc, &mut rc, Duration::from_secs(10)));
    for k in ["s", Z] {
        assert_eq!(cmd!(r, "DUMP", k), cmd!(m, "DUMP", k), "{k}");
        let (pm, pr) = (cmd!(m, "PTTL", k).int(), cmd!(r, "PTTL", k).int());
        assert!((pm - pr).abs() < 2000, "{k}: {pm} vs {pr}");
    }
    assert_eq!(avail(&mut r, "s").str(), "4");
}

#[test]
fn derived_names_follow_the_users_acl() {
    let (s, mut c) = started();
    cmd!(c, "LOCK.SEMSET", "s", 2);
    // May write the count, not the zset.
    cmd!(c, "ACL", "SETUSER", "u", "on", "nopass", "+@all", "~s", "&*");
    let mut u = Conn::new(s.port);
    assert_eq!(cmd!(u, "AUTH", "u", "x").str(), "OK");
    for args in [
        vec!["LOCK.SEMACQUIRE", "s", "0", "1", "a"],
        vec!["LOCK.SEMRELEASE", "s", "a"],
        vec!["LOCK.SEMRENEW", "s", "10", "a"],
        vec!["LOCK.SEMSET", "s", "3"],
        vec!["LOCK.SEMINFO", "s"],
    ] {
        let r = u.call(&args);
        assert!(r.err().starts_with("NOPERM"), "{args:?}: {r:?}");
    }
    assert_eq!(avail(&mut c, "s").str(), "2");
    // May not publish on the channel: a release (which publishes) is refused, an acquire is not.
    cmd!(c, "ACL", "SETUSER", "v", "on", "nopass", "+@all", "~*", "resetchannels");
    let mut v = Conn::new(s.port);
    cmd!(v, "AUTH", "v", "x");
    assert_eq!(cmd!(v, "LOCK.SEMACQUIRE", "s", 0, 1, "a"), R::Nil);
    assert!(cmd!(v, "LOCK.SEMRELEASE", "s", "a").err().starts_with("NOPERM"));
    assert_eq!(held(&mut c, Z).len(), 1);
    assert!(cmd!(v, "LOCK.SEMSET", "s", 5).err().starts_with("NOPERM"));
}

#[test]
fn cluster_names_whose_zset_leaves_the_slot_are_refused() {
    let s = Server::start_cluster_node("");
    let mut c = Conn::new(s.port);
    assert_eq!(cmd!(c, "LOCK.SEMSET", "{t}x", 1).int(), 1);
    assert_eq!(cmd!(c, "LOCK.SEMACQUIRE", "{t}x", 0, 1, "a"), R::Nil);
    for name in ["a{}b", "a{b"] {
        let r = cmd!(c, "LOCK.SEMSET", name, 1);
        assert!(r.err().starts_with("CROSSSLOT"), "{name}: {r:?}");
        let r = cmd!(c, "LOCK.SEMACQUIRE", name, 0, 1, "a");
        assert!(r.err().starts_with("CROSSSLOT"), "{name}: {r:?}");
        assert_eq!(cmd!(c, "EXISTS", name), R::Int(0));
    }
}

#[test]
fn counters_in_info_and_command_docs() {
    let (_s, mut c) = started();
    cmd!(c, "LOCK.SEMSET", "s", 1);
    cmd!(c, "LOCK.SEMACQUIRE", "s", 0, 1, "a");
    cmd!(c, "LOCK.SEMACQUIRE", "s", 0, 1, "b");
    cmd!(c, "LOCK.SEMRENEW", "s", 0, "a");
    cmd!(c, "LOCK.SEMRELEASE", "s", "a");
    cmd!(c, "LOCK.SEMRELEASE", "s", "a");
    for (f, n) in [
        ("acquires", 1),
        ("acquires_contended", 1),
        ("permits_taken", 1),
        ("renewals", 1),
        ("releases", 1),
        ("releases_missed", 1),
        ("permits_released", 1),
        ("sets", 1),
    ] {
        assert_eq!(sem_stat(&mut c, f), n, "{f}");
    }
    let docs = cmd!(c, "COMMAND", "DOCS", "lock.semacquire");
    let words = flat(&docs);
    for w in ["numids", "WAIT", "multiple", "optional", "summary"] {
        assert!(words.iter().any(|x| x == w), "{w}: {words:?}");
    }
    for (name, arity) in [
        ("lock.semset", -3),
        ("lock.semacquire", -5),
        ("lock.semrelease", -3),
        ("lock.semrenew", -4),
        ("lock.seminfo", 2),
    ] {
        let info = cmd!(c, "COMMAND", "INFO", name);
        assert_eq!(info.arr()[0].arr()[1], R::Int(arity), "{name}");
    }
}

/// 16 clients, 4 permits, each taking 1 or 2 permits with WAIT: never more than 4 permits out,
/// every acquire served, and at the end all 4 back and the zset empty.
#[test]
fn sixteen_clients_share_four_permits() {
    let (s, mut c) = started();
    cmd!(c, "LOCK.SEMSET", "s", 4);
    let out = Arc::new(AtomicI64::new(0));
    let peak = Arc::new(AtomicI64::new(0));
    let port = s.port;
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let (out, peak) = (Arc::clone(&out), Arc::clone(&peak));
            std::thread::spawn(move || {
                let mut k = Conn::new(port);
                k.set_timeout(Duration::from_secs(30));
                for i in 0..40 {
                    let n = 1 + (t + i) % 2;
                    let ids: Vec<String> = (0..n).map(|j| format!("c{t}-{i}-{j}")).collect();
                    let mut a =
                        vec!["LOCK.SEMACQUIRE".to_string(), "s".into(), "10000".into(), n.to_string()];
                    a.extend(ids.iter().cloned());
                    a.extend(["WAIT".into(), "0".into()]);
                    assert_eq!(k.call(&a), R::Nil);
                    let now = out.fetch_add(n as i64, Ordering::SeqCst) + n as i64;
                    peak.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= 4, "{now} permits out");
                    std::thread::sleep(Duration::from_micros(300));
                    out.fetch_sub(n as i64, Ordering::SeqCst);
                    let mut r = vec!["LOCK.SEMRELEASE".to_string(), "s".into()];
                    r.extend(ids);
                    assert_eq!(k.call(&r).int(), n as i64);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread");
    }
    assert!(peak.load(Ordering::SeqCst) >= 3);
    assert_eq!(avail(&mut c, "s").str(), "4");
    assert_eq!(cmd!(c, "EXISTS", Z).int(), 0);
    assert_eq!(info(&mut c, "s", "waiters").int(), 0);
}

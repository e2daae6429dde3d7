//! The read-write lock's LOCK.* commands (family.md section 11): Redisson's layout (mode, reader
//! and writer fields, a timeout key per read hold, the hash TTL), replies, messages, errors,
//! fencing, replication, ACL, and FIFO waiting with reader batching and no writer starvation.

mod common;
use common::*;

use resp::{Conn, Sub, R};
use std::time::{Duration, Instant};
use testkit::cmd;

const CH: &str = "redisson_rwlock:{rw}";

fn tk(lock: &str, owner: &str, n: i64) -> String {
    if lock.contains('{') {
        format!("{lock}:{owner}:rwlock_timeout:{n}")
    } else {
        format!("{{{lock}}}:{owner}:rwlock_timeout:{n}")
    }
}

/// The hash as sorted (field, value) pairs.
fn hash(c: &mut Conn, k: &str) -> Vec<(String, String)> {
    let r = cmd!(c, "HGETALL", k);
    let a = r.arr();
    let mut out: Vec<(String, String)> = a.chunks(2).map(|p| (p[0].str(), p[1].str())).collect();
    out.sort();
    out
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = p.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    v.sort();
    v
}

fn keys(c: &mut Conn) -> Vec<String> {
    let r = cmd!(c, "KEYS", "*");
    let mut v: Vec<String> = r.arr().iter().map(R::str).collect();
    v.sort();
    v
}

fn pttl(c: &mut Conn, k: &str) -> i64 {
    cmd!(c, "PTTL", k).int()
}

fn started() -> (Server, Conn) {
    let s = Server::start();
    let c = Conn::new(s.port);
    (s, c)
}

/// A client that sent a blocking acquire; its reply is read later.
fn blocked(port: u16, key: &str, owner: &str, access: &str) -> Conn {
    let mut w = Conn::new(port);
    w.set_timeout(Duration::from_secs(10));
    w.send(&["LOCK.ACQUIRE", key, owner, "30000", "WAIT", "0", access]);
    w
}

fn rw_stat(c: &mut Conn, field: &str) -> i64 {
    waiters::lock_stat(c, &format!("rwlock_{field}"))
}

/// Wait (bounded) until `n` clients wait on the read-write lock `k` (LOCK.INFO).
fn wait_queued(c: &mut Conn, k: &str, n: i64) {
    let got = wait_for(Duration::from_secs(5), || (info_field(c, k, "waiters").int() == n).then_some(()));
    assert!(got.is_some(), "expected {n} waiters on {k}: {:?}", cmd!(c, "LOCK.INFO", k));
}

fn info_field(c: &mut Conn, k: &str, field: &str) -> R {
    let r = cmd!(c, "LOCK.INFO", k);
    let a = r.arr();
    a.chunks(2).find(|p| p[0].str() == field).map(|p| p[1].clone()).unwrap_or(R::Nil)
}

/// Whether a reply arrives within `ms`.
fn replied_within(w: &mut Conn, ms: u64) -> Option<R> {
    w.read_until(Instant::now() + Duration::from_millis(ms))
}

#[test]
fn read_holds_follow_redissons_layout() {
    let (_s, mut c) = started();
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "rw", "u:1", 10000, "READ"), R::Nil);
    assert_eq!(hash(&mut c, "rw"), pairs(&[("mode", "read"), ("u:1", "1")]));
    assert_eq!(cmd!(c, "GET", tk("rw", "u:1", 1)).str(), "1");
    let t1 = pttl(&mut c, &tk("rw", "u:1", 1));
    assert!((9000..=10000).contains(&t1), "{t1}");
    // Re-entry: a second timeout key; the hash keeps max(PTTL, lease).
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "rw", "u:1", 2000, "read"), R::Nil);
    assert_eq!(hash(&mut c, "rw"), pairs(&[("mode", "read"), ("u:1", "2")]));
    assert!(pttl(&mut c, &tk("rw", "u:1", 2)) <= 2000);
    assert!(pttl(&mut c, "rw") > 9000, "the hash keeps the longest hold");
    // Another reader joins.
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "rw", "u:2", 20000, "READ"), R::Nil);
    assert!(pttl(&mut c, "rw") > 19000);
    assert_eq!(
        keys(&mut c),
        vec!["rw".to_string(), tk("rw", "u:1", 1), tk("rw", "u:1", 2), tk("rw", "u:2", 1)]
    );
    // A name with '{' keeps no extra braces.
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "a{t}", "o", 1000, "READ"), R::Nil);
    assert_eq!(cmd!(c, "EXISTS", "a{t}:o:rwlock_timeout:1").int(), 1);
}

#[test]
fn write_holds_follow_redissons_layout() {
    let (_s, mut c) = started();
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "rw", "u:1", 10000, "WRITE"), R::Nil);
    assert_eq!(hash(&mut c, "rw"), pairs(&[("mode", "write"), ("u:1:write", "1")]));
    // Re-entry: the TTL becomes PTTL + lease (it grows, as Redisson's does).
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "rw", "u:1", 10000, "WRITE"), R::Nil);
    assert_eq!(hash(&mut c, "rw"), pairs(&[("mode", "write"), ("u:1:write", "2")]));
    let p = pttl(&mut c, "rw");
    assert!((19000..=20000).contains(&p), "{p}");
    // The writer takes read holds (downgrade); the mode stays write.
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "rw", "u:1", 5000, "READ"), R::Nil);
    assert_eq!(hash(&mut c, "rw"), pairs(&[("mode", "write"), ("u:1:write", "2"), ("u:1", "1")]));
    assert_eq!(keys(&mut c), vec!["rw".to_string(), tk("rw", "u:1", 1)]);
}

#[test]
fn readers_and_writers_exclude_each_other() {
    let (_s, mut c) = started();
    cmd!(c, "LOCK.ACQUIRE", "rw", "r", 10000, "READ");
    let p = cmd!(c, "LOCK.ACQUIRE", "rw", "w", 10000, "WRITE").int();
    assert!((9000..=10000).contains(&p), "a writer gets the PTTL: {p}");
    // A reader cannot upgrade: the PTTL without WAIT, an error with WAIT; nothing changes.
    let before = hash(&mut c, "rw");
    assert!(cmd!(c, "LOCK.ACQUIRE", "rw", "r", 10000, "WRITE").int() > 0);
    let e = cmd!(c, "LOCK.ACQUIRE", "rw", "r", 10000, "WRITE", "WAIT", 100);
    assert!(e.err().starts_with("ERR this owner holds read holds"), "{e:?}");
    assert_eq!(hash(&mut c, "rw"), before);
    // A writer keeps readers out.
    let (_s2, mut c2) = started();
    cmd!(c2, "LOCK.ACQUIRE", "rw", "w", 10000, "WRITE");
    assert!(cmd!(c2, "LOCK.ACQUIRE", "rw", "r", 10000, "READ").int() > 0);
    assert!(cmd!(c2, "LOCK.ACQUIRE", "rw", "x", 10000, "WRITE").int() > 0);
    assert_eq!(hash(&mut c2, "rw"), pairs(&[("mode", "write"), ("w:write", "1")]));
}

#[test]
fn read_release_replies_and_messages() {
    let (s, mut c) = started();
    let mut sub = Sub::new(s.port, "SUBSCRIBE", &[CH.as_bytes().to_vec()]);
    // A missing lock: nil and no message.
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "r1", "READ"), R::Nil);
    cmd!(c, "LOCK.ACQUIRE", "rw", "r1", 10000, "READ");
    cmd!(c, "LOCK.ACQUIRE", "rw", "r1", 10000, "READ");
    cmd!(c, "LOCK.ACQUIRE", "rw", "r2", 30000, "READ");
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "nobody", "READ"), R::Nil);
    // A hold dropped, others remain: 0, the hold's timeout key goes.
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "r1", "READ").int(), 0);
    assert_eq!(cmd!(c, "EXISTS", tk("rw", "r1", 2)).int(), 0);
    assert_eq!(cmd!(c, "EXISTS", tk("rw", "r1", 1)).int(), 1);
    // r1's last hold: still 0 (r2 holds), its field goes; the hash TTL follows r2's hold.
    cmd!(c, "PEXPIRE", "rw", 90000);
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "r1", "READ").int(), 0);
    assert_eq!(hash(&mut c, "rw"), pairs(&[("mode", "read"), ("r2", "1")]));
    let p = pttl(&mut c, "rw");
    assert!((28000..=30000).contains(&p), "hash TTL = the longest remaining hold: {p}");
    let mut pubc = Conn::new(s.port);
    assert!(sub.until_marker(&mut pubc, "PUBLISH", CH.as_bytes()).is_empty(), "no message yet");
    // The last reader: 1, the hash goes, message 0.
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "r2", "READ").int(), 1);
    assert!(keys(&mut c).is_empty(), "{:?}", keys(&mut c));
    let msgs = sub.until_marker(&mut pubc, "PUBLISH", CH.as_bytes());
    assert_eq!(msgs, vec![(CH.as_bytes().to_vec(), b"0".to_vec())]);
}

#[test]
fn a_read_release_frees_a_lock_whose_other_holds_expired() {
    let (_s, mut c) = started();
    cmd!(c, "LOCK.ACQUIRE", "rw", "dead", 50, "READ");
    cmd!(c, "LOCK.ACQUIRE", "rw", "live", 30000, "READ");
    let gone = wait_for(Duration::from_secs(3), || {
        (cmd!(c, "EXISTS", tk("rw", "dead", 1)).int() == 0).then_some(())
    });
    assert!(gone.is_some());
    // "dead"'s field remains, but its hold expired: live's unlock frees the lock (Redisson's rule).
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "live", "READ").int(), 1);
    assert_eq!(cmd!(c, "EXISTS", "rw").int(), 0);
}

#[test]
fn write_release_replies_and_messages() {
    let (s, mut c) = started();
    let mut sub = Sub::new(s.port, "SUBSCRIBE", &[CH.as_bytes().to_vec()]);
    let mut pubc = Conn::new(s.port);
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "w", "WRITE"), R::Nil);
    cmd!(c, "LOCK.ACQUIRE", "rw", "w", 10000, "WRITE");
    cmd!(c, "LOCK.ACQUIRE", "rw", "w", 10000, "WRITE");
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "x", "WRITE"), R::Nil);
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "w", "READ"), R::Nil, "not a reader");
    // With a lease: re-armed; the count drops.
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "w", 5000, "WRITE").int(), 0);
    assert!(pttl(&mut c, "rw") <= 5000);
    // The writer's own read hold keeps the lock in read mode: 1, no message.
    cmd!(c, "LOCK.ACQUIRE", "rw", "w", 10000, "READ");
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "w", "WRITE").int(), 1);
    assert_eq!(hash(&mut c, "rw"), pairs(&[("mode", "read"), ("w", "1")]));
    assert!(sub.until_marker(&mut pubc, "PUBLISH", CH.as_bytes()).is_empty());
    // Now others may read beside it.
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "rw", "r", 10000, "READ"), R::Nil);
    cmd!(c, "LOCK.RELEASE", "rw", "r", "READ");
    cmd!(c, "LOCK.RELEASE", "rw", "w", "READ");
    // A plain write hold freed: 1, message 1.
    cmd!(c, "LOCK.ACQUIRE", "rw", "w", 10000, "WRITE");
    sub.until_marker(&mut pubc, "PUBLISH", CH.as_bytes());
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "w", "WRITE").int(), 1);
    assert_eq!(cmd!(c, "EXISTS", "rw").int(), 0);
    assert_eq!(
        sub.until_marker(&mut pubc, "PUBLISH", CH.as_bytes()),
        vec![(CH.as_bytes().to_vec(), b"1".to_vec())]
    );
}

#[test]
fn renew_touches_only_the_owners_holds() {
    let (_s, mut c) = started();
    cmd!(c, "LOCK.ACQUIRE", "rw", "a", 2000, "READ");
    cmd!(c, "LOCK.ACQUIRE", "rw", "a", 2000, "READ");
    cmd!(c, "LOCK.ACQUIRE", "rw", "b", 2000, "READ");
    assert_eq!(cmd!(c, "LOCK.RENEW", "rw", "a", 60000, "READ").int(), 1);
    assert!(pttl(&mut c, &tk("rw", "a", 1)) > 50000);
    assert!(pttl(&mut c, &tk("rw", "a", 2)) > 50000);
    assert!(pttl(&mut c, &tk("rw", "b", 1)) <= 2000, "other owners' holds are not renewed");
    assert!(pttl(&mut c, "rw") > 50000);
    assert_eq!(cmd!(c, "LOCK.RENEW", "rw", "zz", 60000, "READ").int(), 0);
    assert_eq!(cmd!(c, "LOCK.RENEW", "rw", "a", 60000, "WRITE").int(), 0);
    assert_eq!(cmd!(c, "LOCK.RENEW", "none", "a", 60000, "READ").int(), 0);
    cmd!(c, "LOCK.ACQUIRE", "w", "x", 2000, "WRITE");
    assert_eq!(cmd!(c, "LOCK.RENEW", "w", "x", 60000, "WRITE").int(), 1);
    assert!(pttl(&mut c, "w") > 50000);
    assert_eq!(cmd!(c, "LOCK.RENEW", "w", "x", 60000, "READ").int(), 0);
}

#[test]
fn kinds_and_arguments_are_checked_before_anything_changes() {
    let (_s, mut c) = started();
    cmd!(c, "LOCK.ACQUIRE", "rw", "a", 10000, "READ");
    cmd!(c, "LOCK.ACQUIRE", "plain", "a", 10000);
    let before = (hash(&mut c, "rw"), hash(&mut c, "plain"), keys(&mut c));
    for args in [
        vec!["LOCK.ACQUIRE", "rw", "a", "10000"],
        vec!["LOCK.RELEASE", "rw", "a"],
        vec!["LOCK.RENEW", "rw", "a", "100"],
    ] {
        let e = c.call(&args);
        assert!(e.err().contains("read-write lock: add READ or WRITE"), "{args:?}: {e:?}");
    }
    for args in [
        vec!["LOCK.ACQUIRE", "plain", "a", "10000", "READ"],
        vec!["LOCK.RELEASE", "plain", "a", "WRITE"],
        vec!["LOCK.RENEW", "plain", "a", "100", "READ"],
    ] {
        let e = c.call(&args);
        assert!(e.err().contains("plain lock, not a read-write lock"), "{args:?}: {e:?}");
    }
    for (args, want) in [
        (vec!["LOCK.ACQUIRE", "rw", "a", "1", "READ", "FENCE"], "ERR syntax error"),
        (vec!["LOCK.ACQUIRE", "rw", "a", "1", "READ", "WRITE"], "ERR syntax error"),
        (vec!["LOCK.ACQUIRE", "rw", "a", "1", "READ", "READ"], "ERR syntax error"),
        (vec!["LOCK.RELEASE", "rw", "a", "READ", "WRITE"], "ERR syntax error"),
        (vec!["LOCK.RELEASE", "rw", "a", "1", "2", "READ"], "ERR syntax error"),
        (vec!["LOCK.RENEW", "rw", "a", "READ", "5", "6"], "ERR syntax error"),
        (vec!["LOCK.ACQUIRE", "rw", "a", "0", "READ"], "ERR lease-ms must be a positive integer"),
        (vec!["LOCK.ACQUIRE", "rw", "", "5", "WRITE"], "ERR owner must not be empty"),
    ] {
        assert_eq!(c.call(&args).err(), want, "{args:?}");
    }
    assert!(c.call(&["LOCK.RENEW", "rw", "a", "READ"]).err().contains("wrong number of arguments"));
    cmd!(c, "SET", "str", "x");
    assert!(cmd!(c, "LOCK.ACQUIRE", "str", "a", 100, "READ").err().starts_with("WRONGTYPE"));
    cmd!(c, "HSET", "odd", "mode", "weird");
    assert!(cmd!(c, "LOCK.ACQUIRE", "odd", "a", 100, "WRITE").err().contains("neither 'read' nor 'write'"));
    let after = (hash(&mut c, "rw"), hash(&mut c, "plain"), keys(&mut c));
    assert_eq!(before.0, after.0);
    assert_eq!(before.1, after.1);
    assert_eq!(after.2.len(), before.2.len() + 2, "only the SET and HSET of the test");
    // Case and order of the options.
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "w2", "o", 1000, "write", "FENCE").arr()[0], R::Int(-1));
    assert_eq!(cmd!(c, "LOCK.RELEASE", "w2", "o", "Write").int(), 1);
}

#[test]
fn force_release_and_info() {
    let (s, mut c) = started();
    let mut sub = Sub::new(s.port, "SUBSCRIBE", &[CH.as_bytes().to_vec()]);
    let mut pubc = Conn::new(s.port);
    cmd!(c, "LOCK.ACQUIRE", "rw", "a", 10000, "READ");
    cmd!(c, "LOCK.ACQUIRE", "rw", "a", 10000, "READ");
    cmd!(c, "LOCK.ACQUIRE", "rw", "b", 10000, "READ");
    let info = cmd!(c, "LOCK.INFO", "rw");
    let m: Vec<(String, R)> = info.arr().chunks(2).map(|p| (p[0].str(), p[1].clone())).collect();
    let names: Vec<&str> = m.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "mode",
            "readers",
            "writer",
            "write_holds",
            "pttl",
            "waiters",
            "waiting_readers",
            "waiting_writers",
            "token"
        ]
    );
    assert_eq!(m[0].1.str(), "read");
    let mut readers: Vec<(String, i64)> = m[1].1.arr().chunks(2).map(|p| (p[0].str(), p[1].int())).collect();
    readers.sort();
    assert_eq!(readers, vec![("a".to_string(), 2), ("b".to_string(), 1)]);
    assert_eq!(m[2].1, R::Nil);
    assert_eq!(m[3].1.int(), 0);
    assert!(m[4].1.int() > 9000);
    assert_eq!(cmd!(c, "LOCK.FORCERELEASE", "rw").int(), 1);
    assert!(keys(&mut c).is_empty(), "hash and every timeout key: {:?}", keys(&mut c));
    assert_eq!(
        sub.until_marker(&mut pubc, "PUBLISH", CH.as_bytes()),
        vec![(CH.as_bytes().to_vec(), b"1".to_vec())]
    );
    assert_eq!(cmd!(c, "LOCK.FORCERELEASE", "rw").int(), 0);
    cmd!(c, "LOCK.ACQUIRE", "rw", "w", 10000, "WRITE");
    assert_eq!(info_field(&mut c, "rw", "writer").str(), "w");
    assert_eq!(info_field(&mut c, "rw", "write_holds").int(), 1);
    assert_eq!(info_field(&mut c, "rw", "mode").str(), "write");
    assert_eq!(cmd!(c, "LOCK.INFO", "none"), R::Nil);
}

#[test]
fn fenced_writes_issue_increasing_tokens_shared_with_the_plain_scheme() {
    let (_s, mut c) = started();
    let t1 = cmd!(c, "LOCK.ACQUIRE", "rw", "w", 10000, "WRITE", "FENCE").arr()[1].int();
    // Re-entry keeps the hold's token.
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "rw", "w", 10000, "FENCE", "WRITE").arr()[1].int(), t1);
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "rw", "x", 10000, "WRITE", "FENCE").arr()[1].int(), -1);
    cmd!(c, "LOCK.FORCERELEASE", "rw");
    let t2 = cmd!(c, "LOCK.ACQUIRE", "rw", "x", 10000, "WRITE", "FENCE").arr()[1].int();
    assert!(t2 > t1);
    assert_eq!(cmd!(c, "GET", "redisson_lock_token:{rw}").str().parse::<i64>().unwrap(), t2);
    assert_eq!(info_field(&mut c, "rw", "token").int(), t2);
}

#[test]
fn waiting_batches_readers_and_never_starves_writers() {
    let (s, mut c) = started();
    cmd!(c, "LOCK.ACQUIRE", "rw", "w0", 30000, "WRITE");
    let mut r1 = blocked(s.port, "rw", "r1", "READ");
    wait_queued(&mut c, "rw", 1);
    let mut r2 = blocked(s.port, "rw", "r2", "READ");
    wait_queued(&mut c, "rw", 2);
    let mut w1 = blocked(s.port, "rw", "w1", "WRITE");
    wait_queued(&mut c, "rw", 3);
    let mut r3 = blocked(s.port, "rw", "r3", "READ");
    wait_queued(&mut c, "rw", 4);
    assert_eq!(info_field(&mut c, "rw", "waiting_readers").int(), 3);
    assert_eq!(info_field(&mut c, "rw", "waiting_writers").int(), 1);
    // A newcomer reader does not overtake the queue, with or without WAIT.
    assert!(cmd!(c, "LOCK.ACQUIRE", "rw", "late", 30000, "READ").int() > 0);
    // The writer leaves: r1 and r2 together (up to the writer), nobody else.
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "w0", "WRITE").int(), 1);
    assert_eq!(r1.read().unwrap(), R::Nil);
    assert_eq!(r2.read().unwrap(), R::Nil);
    assert_eq!(hash(&mut c, "rw"), pairs(&[("mode", "read"), ("r1", "1"), ("r2", "1")]));
    assert!(replied_within(&mut w1, 100).is_none());
    assert!(replied_within(&mut r3, 50).is_none(), "r3 is behind the writer");
    // While readers hold it, a new reader still queues behind the writer.
    assert!(cmd!(c, "LOCK.ACQUIRE", "rw", "late", 30000, "READ").int() > 0);
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "r1", "READ").int(), 0);
    assert!(replied_within(&mut w1, 50).is_none());
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "r2", "READ").int(), 1);
    assert_eq!(w1.read().unwrap(), R::Nil);
    assert_eq!(hash(&mut c, "rw"), pairs(&[("mode", "write"), ("w1:write", "1")]));
    assert!(replied_within(&mut r3, 50).is_none());
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "w1", "WRITE").int(), 1);
    assert_eq!(r3.read().unwrap(), R::Nil);
    assert_eq!(hash(&mut c, "rw"), pairs(&[("mode", "read"), ("r3", "1")]));
    assert_eq!(rw_stat(&mut c, "waits_granted"), 4);
    assert_eq!(rw_stat(&mut c, "handoffs"), 4);
    assert_eq!(rw_stat(&mut c, "waits_started"), 4);
}

#[test]
fn a_writer_waits_for_the_last_live_read_hold_not_for_the_hash() {
    let (s, mut c) = started();
    cmd!(c, "LOCK.ACQUIRE", "rw", "dying", 300, "READ");
    // The hash outlives the hold (as after a renewal of another client, or a Redisson quirk).
    cmd!(c, "PEXPIRE", "rw", 60000);
    let t0 = Instant::now();
    let mut w = blocked(s.port, "rw", "w", "WRITE");
    assert_eq!(w.read().unwrap(), R::Nil);
    let waited = t0.elapsed();
    assert!(waited < Duration::from_secs(5), "granted once the read hold expired: {waited:?}");
    assert_eq!(hash(&mut c, "rw"), pairs(&[("mode", "write"), ("w:write", "1")]));
    // Without a queue, a writer takes a lock whose read holds all expired at once.
    cmd!(c, "LOCK.FORCERELEASE", "rw");
    cmd!(c, "LOCK.ACQUIRE", "rw2", "dying", 50, "READ");
    cmd!(c, "PEXPIRE", "rw2", 60000);
    let gone = wait_for(Duration::from_secs(3), || {
        (cmd!(c, "EXISTS", tk("rw2", "dying", 1)).int() == 0).then_some(())
    });
    assert!(gone.is_some());
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "rw2", "w", 10000, "WRITE"), R::Nil);
    assert_eq!(hash(&mut c, "rw2"), pairs(&[("mode", "write"), ("w:write", "1")]));
    assert!(rw_stat(&mut c, "expired_holds_cleared") >= 1);
}

#[test]
fn foreign_writes_and_expiry_wake_the_queue() {
    let (s, mut c) = started();
    // DEL by someone else (a Redisson unlock in Lua, an operator).
    cmd!(c, "LOCK.ACQUIRE", "rw", "r", 30000, "READ");
    let mut w = blocked(s.port, "rw", "w", "WRITE");
    wait_queued(&mut c, "rw", 1);
    cmd!(c, "DEL", "rw");
    assert_eq!(w.read().unwrap(), R::Nil);
    // The writer's lease runs out: the readers behind it are granted together.
    let (s2, mut c2) = started();
    cmd!(c2, "LOCK.ACQUIRE", "rw", "w", 300, "WRITE");
    let mut a = blocked(s2.port, "rw", "a", "READ");
    wait_queued(&mut c2, "rw", 1);
    let mut b = blocked(s2.port, "rw", "b", "READ");
    wait_queued(&mut c2, "rw", 2);
    assert_eq!(a.read().unwrap(), R::Nil);
    assert_eq!(b.read().unwrap(), R::Nil);
    assert_eq!(hash(&mut c2, "rw"), pairs(&[("mode", "read"), ("a", "1"), ("b", "1")]));
}

#[test]
fn timeouts_reply_the_pttl_and_leave_the_queue() {
    let (s, mut c) = started();
    cmd!(c, "LOCK.ACQUIRE", "rw", "w", 30000, "WRITE");
    let mut r = Conn::new(s.port);
    r.send(&["LOCK.ACQUIRE", "rw", "r", "1000", "WAIT", "100", "READ"]);
    let p = r.read().unwrap().int();
    assert!(p > 28000, "{p}");
    r.send(&["LOCK.ACQUIRE", "rw", "f", "1000", "WAIT", "100", "WRITE", "FENCE"]);
    let got = r.read().unwrap();
    assert!(got.arr()[0].int() > 28000 && got.arr()[1].int() == -1, "{got:?}");
    assert_eq!(info_field(&mut c, "rw", "waiters").int(), 0);
    assert_eq!(rw_stat(&mut c, "waits_timed_out"), 2);
}

#[test]
fn a_fenced_waiter_gets_its_token() {
    let (s, mut c) = started();
    cmd!(c, "LOCK.ACQUIRE", "rw", "r", 30000, "READ");
    let mut w = Conn::new(s.port);
    w.send(&["LOCK.ACQUIRE", "rw", "w", "30000", "FENCE", "WAIT", "0", "WRITE"]);
    wait_queued(&mut c, "rw", 1);
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "r", "READ").int(), 1);
    let got = w.read().unwrap();
    let t = got.arr()[1].int();
    assert!(t > 0 && got.arr()[0] == R::Int(-1), "{got:?}");
    assert_eq!(cmd!(c, "GET", "redisson_lock_token:{rw}").str().parse::<i64>().unwrap(), t);
}

#[test]
fn replicas_without_the_module_hold_the_same_lock() {
    let master = Server::start();
    let replica = Server::start_opts(Opts::default().without_module());
    replica.replicate_from(&master);
    let mut m = Conn::new(master.port);
    let mut r = Conn::new(replica.port);
    cmd!(m, "LOCK.ACQUIRE", "rw", "a", 60000, "READ");
    cmd!(m, "LOCK.ACQUIRE", "rw", "a", 60000, "READ");
    cmd!(m, "LOCK.ACQUIRE", "rw", "b", 60000, "READ");
    cmd!(m, "LOCK.RELEASE", "rw", "a", "READ");
    cmd!(m, "LOCK.ACQUIRE", "w", "x", 60000, "WRITE");
    cmd!(m, "LOCK.ACQUIRE", "w", "x", 60000, "READ");
    cmd!(m, "LOCK.RELEASE", "w", "x", "WRITE");
    cmd!(m, "LOCK.ACQUIRE", "gone", "x", 60000, "READ");
    cmd!(m, "LOCK.FORCERELEASE", "gone");
    let (mut mc, mut rc) = (master.conn(), replica.conn());
    assert!(replica_caught_up(&mut mc, &mut rc, Duration::from_secs(10)));
    assert_eq!(keys(&mut r), keys(&mut m));
    for k in keys(&mut m) {
        assert_eq!(cmd!(r, "DUMP", &k), cmd!(m, "DUMP", &k), "{k}");
        let (pm, pr) = (pttl(&mut m, &k), pttl(&mut r, &k));
        assert!((pm - pr).abs() < 2000, "{k}: {pm} vs {pr}");
    }
}

#[test]
fn derived_keys_follow_the_users_acl() {
    let (_s, mut c) = started();
    // May write the lock, not the timeout keys.
    cmd!(c, "ACL", "SETUSER", "u", "on", "nopass", "+@all", "~rw", "~redisson_lock_token:*", "&*");
    let mut u = Conn::new(_s.port);
    assert_eq!(cmd!(u, "AUTH", "u", "x").str(), "OK");
    let e = cmd!(u, "LOCK.ACQUIRE", "rw", "a", 1000, "READ");
    assert!(e.err().starts_with("NOPERM"), "{e:?}");
    assert!(keys(&mut c).is_empty());
    // Writes are allowed (no derived key); a read hold's release and renewal are refused.
    assert_eq!(cmd!(u, "LOCK.ACQUIRE", "rw", "a", 1000, "WRITE"), R::Nil);
    cmd!(c, "LOCK.FORCERELEASE", "rw");
    cmd!(c, "LOCK.ACQUIRE", "rw", "a", 10000, "READ");
    assert!(cmd!(u, "LOCK.RELEASE", "rw", "a", "READ").err().starts_with("NOPERM"));
    assert!(cmd!(u, "LOCK.RENEW", "rw", "a", 100, "READ").err().starts_with("NOPERM"));
    assert!(cmd!(u, "LOCK.FORCERELEASE", "rw").err().starts_with("NOPERM"));
    assert_eq!(hash(&mut c, "rw"), pairs(&[("mode", "read"), ("a", "1")]));
    // Channel permission for a release that frees the lock.
    cmd!(c, "ACL", "SETUSER", "v", "on", "nopass", "+@all", "~*", "resetchannels");
    let mut v = Conn::new(_s.port);
    cmd!(v, "AUTH", "v", "x");
    assert!(cmd!(v, "LOCK.RELEASE", "rw", "a", "READ").err().starts_with("NOPERM"));
    assert_eq!(hash(&mut c, "rw"), pairs(&[("mode", "read"), ("a", "1")]));
}

#[test]
fn read_write_counters_in_info() {
    let (_s, mut c) = started();
    cmd!(c, "LOCK.ACQUIRE", "rw", "a", 10000, "READ");
    cmd!(c, "LOCK.ACQUIRE", "rw", "a", 10000, "READ");
    cmd!(c, "LOCK.ACQUIRE", "rw", "w", 10000, "WRITE");
    cmd!(c, "LOCK.RELEASE", "rw", "a", "READ");
    cmd!(c, "LOCK.RELEASE", "rw", "a", "READ");
    cmd!(c, "LOCK.RELEASE", "rw", "a", "READ");
    for (f, n) in [
        ("acquires_read", 2),
        ("acquires_reentrant", 1),
        ("acquires_contended", 1),
        ("releases_read", 2),
        ("releases_full", 1),
        ("releases_not_owner", 1),
    ] {
        assert_eq!(rw_stat(&mut c, f), n, "{f}");
    }
    assert_eq!(waiters::lock_stat(&mut c, "acquires_new"), 0, "plain lock counters untouched");
}

#[test]
fn cluster_names_whose_timeout_keys_leave_the_slot_are_refused() {
    let s = Server::start_cluster_node("");
    let mut c = Conn::new(s.port);
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "{t}x", "o", 1000, "READ"), R::Nil);
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "plain", "o", 1000, "READ"), R::Nil);
    for name in ["a{}b", "a{b"] {
        let r = cmd!(c, "LOCK.ACQUIRE", name, "o", 1000, "READ");
        assert!(r.err().starts_with("CROSSSLOT"), "{name}: {r:?}");
        assert_eq!(cmd!(c, "EXISTS", name), R::Int(0));
        // A write hold derives no key: it is taken.
        assert_eq!(cmd!(c, "LOCK.ACQUIRE", name, "o", 1000, "WRITE"), R::Nil);
        assert_eq!(cmd!(c, "LOCK.RELEASE", name, "o", "WRITE").int(), 1);
    }
}

#[test]
fn no_blocking_inside_multi_and_on_replicas() {
    let master = Server::start();
    let mut c = Conn::new(master.port);
    cmd!(c, "LOCK.ACQUIRE", "rw", "w", 30000, "WRITE");
    assert_eq!(cmd!(c, "MULTI").str(), "OK");
    cmd!(c, "LOCK.ACQUIRE", "rw", "r", 1000, "WAIT", 0, "READ");
    let r = cmd!(c, "EXEC");
    assert!(r.arr()[0].int() > 0, "answered at once inside MULTI: {r:?}");
    let replica = Server::start_with("--replica-read-only no");
    replica.replicate_from(&master);
    let (mut mc, mut rc) = (master.conn(), replica.conn());
    assert!(replica_caught_up(&mut mc, &mut rc, Duration::from_secs(10)));
    let mut r = Conn::new(replica.port);
    let t0 = Instant::now();
    assert!(cmd!(r, "LOCK.ACQUIRE", "rw", "r", 1000, "WAIT", 5000, "READ").int() > 0);
    assert!(t0.elapsed() < Duration::from_secs(2), "a replica answers WAIT at once");
}

#[test]
fn flushall_and_client_unblock_end_waits() {
    let (s, mut c) = started();
    cmd!(c, "LOCK.ACQUIRE", "rw", "r", 30000, "READ");
    let mut w = blocked(s.port, "rw", "w", "WRITE");
    wait_queued(&mut c, "rw", 1);
    cmd!(c, "FLUSHALL");
    assert_eq!(w.read().unwrap(), R::Nil, "granted once the flush freed the lock");
    assert_eq!(hash(&mut c, "rw"), pairs(&[("mode", "write"), ("w:write", "1")]));
    let mut x = Conn::new(s.port);
    x.set_timeout(Duration::from_secs(10));
    let id = cmd!(x, "CLIENT", "ID").int();
    x.send(&["LOCK.ACQUIRE", "rw", "x", "30000", "WAIT", "0", "READ"]);
    wait_queued(&mut c, "rw", 1);
    assert_eq!(cmd!(c, "CLIENT", "UNBLOCK", id).int(), 1);
    assert!(x.read().unwrap().int() > 0, "the PTTL at that moment");
    assert_eq!(info_field(&mut c, "rw", "waiters").int(), 0);
    assert_eq!(rw_stat(&mut c, "waits_cancelled"), 1);
}

#[test]
fn hostile_counts_and_hashes_never_stall_or_crash() {
    let (mut s, mut c) = started();
    // Counts a script or an operator could write: huge, zero, negative, not numbers.
    cmd!(c, "HSET", "rw", "mode", "read", "a", "1", "b", "999999999999", "c", "0", "d", "-5", "e", "x");
    cmd!(c, "SET", tk("rw", "a", 1), "1", "PX", 60000);
    let t0 = Instant::now();
    let r = cmd!(c, "LOCK.RELEASE", "rw", "a", "READ");
    assert!(t0.elapsed() < Duration::from_secs(1), "the walk over the holds is bounded");
    assert!(matches!(r, R::Int(0 | 1)), "{r:?}");
    // Every listed hold but a's had no live timeout key: the lock was freed.
    assert_eq!(r, R::Int(1));
    cmd!(c, "HSET", "rw", "mode", "read", "b", "9223372036854775807", "e", "x");
    assert!(cmd!(c, "LOCK.ACQUIRE", "rw", "b", 1000, "READ").is_err(), "its count cannot grow");
    assert!(cmd!(c, "LOCK.RENEW", "rw", "e", 1000, "READ").is_err());
    let t0 = Instant::now();
    cmd!(c, "HSET", "rw2", "mode", "read", "b", "999999999999");
    assert!(
        cmd!(c, "LOCK.RENEW", "rw2", "b", 1000, "READ").is_err() || t0.elapsed() < Duration::from_secs(2)
    );
    assert_eq!(cmd!(c, "LOCK.FORCERELEASE", "rw2").int(), 1);
    assert!(t0.elapsed() < Duration::from_secs(2));
    cmd!(c, "HSET", "rw3", "mode", "write", "w:write", "-1");
    assert!(cmd!(c, "LOCK.RELEASE", "rw3", "w", "WRITE").is_err());
    assert!(matches!(cmd!(c, "LOCK.INFO", "rw3"), R::Err(_) | R::Arr(_)));
    s.assert_alive();
}

#[test]
fn type_changes_renames_and_role_changes_end_waits() {
    let (s, mut c) = started();
    cmd!(c, "LOCK.ACQUIRE", "rw", "w", 30000, "WRITE");
    let mut a = blocked(s.port, "rw", "a", "READ");
    wait_queued(&mut c, "rw", 1);
    cmd!(c, "SET", "rw", "x");
    assert!(a.read().unwrap().err().starts_with("WRONGTYPE"));
    cmd!(c, "DEL", "rw");
    cmd!(c, "LOCK.ACQUIRE", "rw", "w", 30000, "WRITE");
    let mut b = blocked(s.port, "rw", "b", "WRITE");
    wait_queued(&mut c, "rw", 1);
    cmd!(c, "RENAME", "rw", "elsewhere");
    assert_eq!(b.read().unwrap(), R::Nil, "the renamed-away lock is free");
    assert_eq!(hash(&mut c, "rw"), pairs(&[("mode", "write"), ("b:write", "1")]));
    let mut d = blocked(s.port, "rw", "d", "READ");
    wait_queued(&mut c, "rw", 1);
    let other = Server::start();
    cmd!(c, "REPLICAOF", "127.0.0.1", other.port);
    let e = d.read().unwrap();
    assert!(e.err().starts_with("READONLY") || e.err().starts_with("UNBLOCKED"), "{e:?}");
}

/// A forged reader field with a long name and many holds (written with HSET by someone with write
/// access): the walks look at no more than 32 MiB of timeout-key names, so a release, a renewal
/// and a force release answer at once instead of building or hashing gigabytes of names.
#[test]
fn walks_over_long_forged_fields_are_bounded() {
    let (_s, mut c) = started();
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "rw", "me", "30000", "READ"), R::Nil);
    // 1 MiB name x 40 holds: 40 MiB of names, none of them a key.
    let long = "x".repeat(1 << 20);
    assert_eq!(cmd!(c, "HSET", "rw", &long, "40").int(), 1);
    let t0 = Instant::now();
    // Past the bound the holds count as long as the hash: the lock stays with the forged reader.
    assert_eq!(cmd!(c, "LOCK.RELEASE", "rw", "me", "READ").int(), 0);
    assert_eq!(cmd!(c, "HEXISTS", "rw", "me").int(), 0);
    assert!(pttl(&mut c, "rw") > 20_000);
    assert_eq!(cmd!(c, "EXISTS", tk("rw", "me", 1)).int(), 0);
    // A renewal by an owner with a long name renews at most the bound's worth of its holds.
    assert_eq!(cmd!(c, "HSET", "rw", &long, "100000").int(), 0);
    assert_eq!(cmd!(c, "LOCK.RENEW", "rw", &long, "30000", "READ").int(), 1);
    assert_eq!(cmd!(c, "LOCK.FORCERELEASE", "rw").int(), 1);
    assert_eq!(cmd!(c, "EXISTS", "rw").int(), 0);
    assert!(t0.elapsed() < Duration::from_secs(10), "took {:?}", t0.elapsed());
    assert_eq!(cmd!(c, "PING"), R::Simple("PONG".into()));
}

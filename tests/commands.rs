//! Every LOCK.* command and reply (spec sections 2 and 3) against a real redis-server with the module.

mod common;
use common::resp;
use common::*;

use testkit::cmd;

use resp::{Conn, Sub, R};
use std::time::Duration;

fn server() -> (Server, Conn) {
    let s = Server::start();
    let c = Conn::new(s.port);
    (s, c)
}

/// Server clock in ms (TIME).
fn now_ms(c: &mut Conn) -> i64 {
    let t = cmd!(c, "TIME");
    let a = t.arr();
    a[0].str().parse::<i64>().unwrap() * 1000 + a[1].str().parse::<i64>().unwrap() / 1000
}

fn pttl(c: &mut Conn, k: &[u8]) -> i64 {
    cmd!(c, "PTTL", k).int()
}

fn pexpiretime(c: &mut Conn, k: &[u8]) -> i64 {
    cmd!(c, "PEXPIRETIME", k).int()
}

/// HGETALL as sorted (field, value) pairs.
fn hgetall(c: &mut Conn, k: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let r = cmd!(c, "HGETALL", k);
    let a = r.arr();
    let mut v: Vec<_> = a.chunks(2).map(|p| (p[0].bytes(), p[1].bytes())).collect();
    v.sort();
    v
}

fn pairs(p: &[(&[u8], &[u8])]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v: Vec<_> = p.iter().map(|(a, b)| (a.to_vec(), b.to_vec())).collect();
    v.sort();
    v
}

/// Every key with its DUMP and absolute expiry: equal snapshots mean nothing changed.
fn keyspace(c: &mut Conn) -> Vec<(Vec<u8>, R, i64)> {
    let r = cmd!(c, "KEYS", "*");
    let mut keys: Vec<Vec<u8>> = r.arr().iter().map(R::bytes).collect();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let d = cmd!(c, "DUMP", &k);
            let t = pexpiretime(c, &k);
            (k, d, t)
        })
        .collect()
}

fn acquire(c: &mut Conn, k: &[u8], o: &[u8], lease: i64) -> R {
    cmd!(c, "LOCK.ACQUIRE", k, o, lease)
}

/// A PSUBSCRIBE * client: sees every message published anywhere.
fn all_messages(s: &Server) -> Sub {
    Sub::new(s.port, "PSUBSCRIBE", &[b"*".to_vec()])
}

fn no_messages(sub: &mut Sub, c: &mut Conn, what: &str) {
    let got = sub.until_marker(c, "PUBLISH", b"marker-channel");
    assert!(got.is_empty(), "{what}: unexpected messages {got:?}");
}

fn one_release_message(sub: &mut Sub, c: &mut Conn, key: &[u8], what: &str) {
    let got = sub.until_marker(c, "PUBLISH", b"marker-channel");
    assert_eq!(got, vec![(channel(key), b"0".to_vec())], "{what}: expected exactly one release message");
}

// ---------------------------------------------------------------------------------------------
// LOCK.ACQUIRE
// ---------------------------------------------------------------------------------------------

#[test]
fn acquire_free_lock_creates_hash_with_lease() {
    let (s, mut c) = server();
    let mut sub = all_messages(&s);
    let before = now_ms(&mut c);
    assert_eq!(acquire(&mut c, b"k", b"owner-1", 30000), R::Nil);
    let after = now_ms(&mut c);
    assert_eq!(hgetall(&mut c, b"k"), pairs(&[(b"owner-1", b"1")]));
    assert_eq!(cmd!(c, "TYPE", "k"), R::Simple("hash".into()));
    let p = pttl(&mut c, b"k");
    assert!(p > 25000 && p <= 30000, "PTTL {p}");
    let at = pexpiretime(&mut c, b"k");
    assert!(
        at >= before + 30000 && at <= after + 30000,
        "PEXPIRETIME {at} not in [{before}+30000, {after}+30000]"
    );
    no_messages(&mut sub, &mut c, "acquire");
}

#[test]
fn acquire_reentry_increments_and_resets_lease() {
    let (_s, mut c) = server();
    assert_eq!(acquire(&mut c, b"k", b"me", 100000), R::Nil);
    assert!(pttl(&mut c, b"k") > 90000);
    assert_eq!(acquire(&mut c, b"k", b"me", 50000), R::Nil);
    assert_eq!(hgetall(&mut c, b"k"), pairs(&[(b"me", b"2")]));
    let p = pttl(&mut c, b"k");
    assert!(p <= 50000 && p > 40000, "reentry must reset (here: shorten) the lease, PTTL {p}");
    // Lengthen again.
    let before = now_ms(&mut c);
    assert_eq!(acquire(&mut c, b"k", b"me", 200000), R::Nil);
    let after = now_ms(&mut c);
    assert_eq!(hgetall(&mut c, b"k"), pairs(&[(b"me", b"3")]));
    let at = pexpiretime(&mut c, b"k");
    assert!(at >= before + 200000 && at <= after + 200000, "PEXPIRETIME {at}");
}

#[test]
fn acquire_contended_replies_pttl_and_changes_nothing() {
    let (s, mut c) = server();
    assert_eq!(acquire(&mut c, b"k", b"holder", 60000), R::Nil);
    assert_eq!(acquire(&mut c, b"k", b"holder", 60000), R::Nil);
    let mut sub = all_messages(&s);
    let snap = keyspace(&mut c);
    let r = acquire(&mut c, b"k", b"other", 1000);
    let p = r.int();
    assert!(p > 50000 && p <= 60000, "contended reply must be the holder's PTTL, got {p}");
    assert!(p >= pttl(&mut c, b"k"), "reply {p} must be the PTTL at the time of the command");
    assert_eq!(keyspace(&mut c), snap, "a contended acquire must change nothing");
    assert_eq!(hgetall(&mut c, b"k"), pairs(&[(b"holder", b"2")]));
    no_messages(&mut sub, &mut c, "contended acquire");
}

#[test]
fn acquire_contended_on_key_without_ttl_replies_minus_one() {
    let (_s, mut c) = server();
    assert_eq!(cmd!(c, "HSET", "k", "other", "1"), R::Int(1));
    let snap = keyspace(&mut c);
    assert_eq!(acquire(&mut c, b"k", b"me", 1000), R::Int(-1));
    assert_eq!(keyspace(&mut c), snap);
    assert_eq!(pttl(&mut c, b"k"), -1);
}

#[test]
fn acquire_valid_option_forms() {
    let (_s, mut c) = server();
    // WAIT on a free lock grants at once; the option is case-insensitive like Redis options.
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "a", "me", 1000, "WAIT", 0), R::Nil);
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "b", "me", 1000, "wait", 10), R::Nil);
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "c", "me", 1000, "WaIt", 5000), R::Nil);
    // Reentry with WAIT is immediate as well.
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "a", "me", 1000, "WAIT", 100), R::Nil);
    assert_eq!(hgetall(&mut c, b"a"), pairs(&[(b"me", b"2")]));
    // Command names are case-insensitive.
    assert_eq!(cmd!(c, "lock.acquire", "d", "me", 1000), R::Nil);
    assert_eq!(cmd!(c, "Lock.Release", "d", "me"), R::Int(1));
    // Large but valid lease (about 31 years).
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "big", "me", "1000000000000"), R::Nil);
    assert!(pttl(&mut c, b"big") > 999_000_000_000);
    // Smallest lease.
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "tiny", "me", 1), R::Nil);
    let gone = wait_for(Duration::from_secs(5), || (cmd!(c, "EXISTS", "tiny") == R::Int(0)).then_some(()));
    assert!(gone.is_some(), "a 1 ms lease must expire");
}

// ---------------------------------------------------------------------------------------------
// LOCK.RELEASE
// ---------------------------------------------------------------------------------------------

#[test]
fn release_partial_keeps_ttl_without_lease_and_resets_it_with_lease() {
    let (s, mut c) = server();
    let mut sub = all_messages(&s);
    for _ in 0..3 {
        assert_eq!(acquire(&mut c, b"k", b"me", 100000), R::Nil);
    }
    let at = pexpiretime(&mut c, b"k");
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "me"), R::Int(0));
    assert_eq!(hgetall(&mut c, b"k"), pairs(&[(b"me", b"2")]));
    assert_eq!(pexpiretime(&mut c, b"k"), at, "without lease-ms the TTL is kept");
    let before = now_ms(&mut c);
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "me", 5000), R::Int(0));
    let after = now_ms(&mut c);
    assert_eq!(hgetall(&mut c, b"k"), pairs(&[(b"me", b"1")]));
    let at2 = pexpiretime(&mut c, b"k");
    assert!(at2 >= before + 5000 && at2 <= after + 5000, "lease-ms resets the lease: {at2}");
    no_messages(&mut sub, &mut c, "partial releases");
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "me", 5000), R::Int(1));
    assert_eq!(cmd!(c, "EXISTS", "k"), R::Int(0));
    one_release_message(&mut sub, &mut c, b"k", "last release");
}

#[test]
fn release_last_hold_deletes_and_publishes_once() {
    let (s, mut c) = server();
    let mut exact = Sub::new(s.port, "SUBSCRIBE", &[channel(b"k")]);
    let mut sub = all_messages(&s);
    assert_eq!(acquire(&mut c, b"k", b"me", 30000), R::Nil);
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "me"), R::Int(1));
    assert_eq!(cmd!(c, "EXISTS", "k"), R::Int(0));
    one_release_message(&mut sub, &mut c, b"k", "release");
    let got = exact.until_marker(&mut c, "PUBLISH", &channel(b"k"));
    assert_eq!(got, vec![(b"redisson_lock__channel:{k}".to_vec(), b"0".to_vec())]);
    // A second release of the now-free lock: nil, no message.
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "me"), R::Nil);
    no_messages(&mut sub, &mut c, "release of a free lock");
    assert_eq!(cmd!(c, "EXISTS", "k"), R::Int(0));
}

#[test]
fn release_by_non_owner_changes_nothing() {
    let (s, mut c) = server();
    let mut sub = all_messages(&s);
    // Absent key.
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "me"), R::Nil);
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "me", 1000), R::Nil);
    assert_eq!(cmd!(c, "EXISTS", "k"), R::Int(0));
    // Held by someone else (also with a second owner field present).
    assert_eq!(acquire(&mut c, b"k", b"other", 60000), R::Nil);
    let snap = keyspace(&mut c);
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "me"), R::Nil);
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "me", 10), R::Nil);
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "othe"), R::Nil);
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "other\0"), R::Nil);
    assert_eq!(keyspace(&mut c), snap);
    // Expired.
    assert_eq!(acquire(&mut c, b"gone", b"me", 1), R::Nil);
    let gone = wait_for(Duration::from_secs(5), || (cmd!(c, "EXISTS", "gone") == R::Int(0)).then_some(()));
    assert!(gone.is_some());
    assert_eq!(cmd!(c, "LOCK.RELEASE", "gone", "me"), R::Nil);
    let got = sub.until_marker(&mut c, "PUBLISH", b"marker-channel");
    // The expired lock may legitimately have been announced as free when it expired; a
    // not-owner release itself must not publish anything else.
    assert!(
        got.iter().all(|m| m == &(channel(b"gone"), b"0".to_vec())),
        "not-owner releases published {got:?}"
    );
    assert!(got.len() <= 1, "{got:?}");
}

// ---------------------------------------------------------------------------------------------
// LOCK.RENEW, LOCK.FORCERELEASE
// ---------------------------------------------------------------------------------------------

#[test]
fn renew_replies_one_for_owner_zero_otherwise() {
    let (s, mut c) = server();
    let mut sub = all_messages(&s);
    assert_eq!(acquire(&mut c, b"k", b"me", 1000), R::Nil);
    assert_eq!(acquire(&mut c, b"k", b"me", 1000), R::Nil);
    let before = now_ms(&mut c);
    assert_eq!(cmd!(c, "LOCK.RENEW", "k", "me", 90000), R::Int(1));
    let after = now_ms(&mut c);
    let at = pexpiretime(&mut c, b"k");
    assert!(at >= before + 90000 && at <= after + 90000, "RENEW sets the lease: {at}");
    assert_eq!(hgetall(&mut c, b"k"), pairs(&[(b"me", b"2")]), "RENEW does not touch the count");
    // Shorten.
    assert_eq!(cmd!(c, "LOCK.RENEW", "k", "me", 20000), R::Int(1));
    assert!(pttl(&mut c, b"k") <= 20000);
    // Other owner, absent key.
    let snap = keyspace(&mut c);
    assert_eq!(cmd!(c, "LOCK.RENEW", "k", "other", 90000), R::Int(0));
    assert_eq!(cmd!(c, "LOCK.RENEW", "absent", "me", 90000), R::Int(0));
    assert_eq!(keyspace(&mut c), snap);
    assert_eq!(cmd!(c, "EXISTS", "absent"), R::Int(0));
    no_messages(&mut sub, &mut c, "renewals");
}

#[test]
fn forcerelease_replies_one_when_present_zero_when_absent() {
    let (s, mut c) = server();
    let mut sub = all_messages(&s);
    assert_eq!(cmd!(c, "LOCK.FORCERELEASE", "k"), R::Int(0));
    no_messages(&mut sub, &mut c, "force release of an absent lock");
    for _ in 0..3 {
        assert_eq!(acquire(&mut c, b"k", b"someone", 30000), R::Nil);
    }
    assert_eq!(cmd!(c, "LOCK.FORCERELEASE", "k"), R::Int(1));
    assert_eq!(cmd!(c, "EXISTS", "k"), R::Int(0));
    one_release_message(&mut sub, &mut c, b"k", "force release");
    assert_eq!(cmd!(c, "LOCK.FORCERELEASE", "k"), R::Int(0));
    no_messages(&mut sub, &mut c, "second force release");
    // A lock with several owner fields (foreign data) and no TTL is deleted too.
    assert_eq!(cmd!(c, "HSET", "multi", "a", "1", "b", "2"), R::Int(2));
    assert_eq!(cmd!(c, "LOCK.FORCERELEASE", "multi"), R::Int(1));
    assert_eq!(cmd!(c, "EXISTS", "multi"), R::Int(0));
    one_release_message(&mut sub, &mut c, b"multi", "force release of a multi-owner hash");
}

// ---------------------------------------------------------------------------------------------
// LOCK.INFO
// ---------------------------------------------------------------------------------------------

fn check_info_map(entries: &[(R, R)], owners: &[(&[u8], i64)], lease: i64) {
    let get = |name: &str| -> &R {
        &entries
            .iter()
            .find(|(k, _)| k.bytes() == name.as_bytes())
            .unwrap_or_else(|| panic!("LOCK.INFO has no {name}: {entries:?}"))
            .1
    };
    let mut got: Vec<(Vec<u8>, i64)> = match get("owners") {
        R::Map(m) => m.iter().map(|(k, v)| (k.bytes(), v.int())).collect(),
        R::Arr(a) => a.chunks(2).map(|p| (p[0].bytes(), p[1].int())).collect(),
        other => panic!("owners is not a map: {other:?}"),
    };
    got.sort();
    let mut want: Vec<(Vec<u8>, i64)> = owners.iter().map(|(o, n)| (o.to_vec(), *n)).collect();
    want.sort();
    assert_eq!(got, want, "owners");
    let p = get("pttl").int();
    assert!(p <= lease && (lease < 0 || p > lease - 10000), "pttl {p}, lease {lease}");
    assert_eq!(get("waiters").int(), 0, "waiters");
}

fn flat_to_map(r: &R) -> Vec<(R, R)> {
    let a = r.arr();
    assert_eq!(a.len() % 2, 0, "RESP2 map must be a flat array of pairs: {r:?}");
    a.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect()
}

#[test]
fn info_resp2_flat_array_and_resp3_map() {
    let (s, mut c) = server();
    assert_eq!(cmd!(c, "LOCK.INFO", "k"), R::Nil);
    assert_eq!(acquire(&mut c, b"k", b"me", 60000), R::Nil);
    assert_eq!(acquire(&mut c, b"k", b"me", 60000), R::Nil);
    let snap = keyspace(&mut c);
    // RESP2: flat array, owners a flat array too.
    let r = cmd!(c, "LOCK.INFO", "k");
    assert!(matches!(r, R::Arr(_)), "RESP2 reply must be an array: {r:?}");
    let m = flat_to_map(&r);
    assert!(matches!(m.iter().find(|(k, _)| k.bytes() == b"owners").unwrap().1, R::Arr(_)));
    check_info_map(&m, &[(b"me", 2)], 60000);
    // Foreign hash with two owners and no TTL.
    assert_eq!(cmd!(c, "HSET", "multi", "a", "1", "b", "7"), R::Int(2));
    check_info_map(&flat_to_map(&cmd!(c, "LOCK.INFO", "multi")), &[(b"a", 1), (b"b", 7)], -1);
    assert_eq!(cmd!(c, "DEL", "multi"), R::Int(1));
    assert_eq!(keyspace(&mut c), snap, "LOCK.INFO changes nothing");

    // RESP3 on a raw connection: a real map, owners a map.
    let mut c3 = Conn::new(s.port);
    let hello = cmd!(c3, "HELLO", "3");
    assert!(matches!(hello, R::Map(_)), "HELLO 3: {hello:?}");
    assert_eq!(cmd!(c3, "LOCK.INFO", "absent"), R::Nil);
    match cmd!(c3, "LOCK.INFO", "k") {
        R::Map(m) => {
            assert!(matches!(m.iter().find(|(k, _)| k.bytes() == b"owners").unwrap().1, R::Map(_)));
            check_info_map(&m, &[(b"me", 2)], 60000);
        }
        other => panic!("RESP3 LOCK.INFO must be a map, got {other:?}"),
    }
    // RESP3 through the redis crate (?protocol=resp3).
    let client = redis::Client::open(format!("{}?protocol=resp3", s.url())).unwrap();
    let mut rc = client.get_connection().unwrap();
    let v: redis::Value = redis::cmd("LOCK.INFO").arg("k").query(&mut rc).unwrap();
    match v {
        redis::Value::Map(m) => {
            let keys: Vec<String> = m
                .iter()
                .map(|(k, _)| match k {
                    redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    redis::Value::SimpleString(s) => s.clone(),
                    other => panic!("map key {other:?}"),
                })
                .collect();
            for want in ["owners", "pttl", "waiters"] {
                assert!(keys.iter().any(|k| k == want), "{want} missing from {keys:?}");
            }
            let owners = &m
                .iter()
                .find(|(k, _)| matches!(k, redis::Value::BulkString(b) if b == b"owners"))
                .unwrap()
                .1;
            assert_eq!(
                owners,
                &redis::Value::Map(vec![(redis::Value::BulkString(b"me".to_vec()), redis::Value::Int(2))])
            );
        }
        other => panic!("RESP3 (redis crate) LOCK.INFO must be a map, got {other:?}"),
    }
    let v: redis::Value = redis::cmd("LOCK.INFO").arg("absent").query(&mut rc).unwrap();
    assert_eq!(v, redis::Value::Nil);
}

// ---------------------------------------------------------------------------------------------
// Bad input (section 3)
// ---------------------------------------------------------------------------------------------

const ARITY: &str = "ERR wrong number of arguments for '{}' command";
const LEASE_NOT_INT: &str = "ERR lease-ms is not an integer or out of range";
const LEASE_NOT_POS: &str = "ERR lease-ms must be a positive integer";
const LEASE_OVERFLOW: &str = "ERR lease-ms is too large: the deadline would overflow";
const TIMEOUT_NEG: &str = "ERR timeout-ms must not be negative";
const TIMEOUT_NOT_INT: &str = "ERR timeout-ms is not an integer or out of range";
const TIMEOUT_OVERFLOW: &str = "ERR timeout-ms is too large: the deadline would overflow";
const EMPTY_OWNER: &str = "ERR owner must not be empty";
const SYNTAX: &str = "ERR syntax error";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const CORRUPT: &str = "ERR lock hash holds a hold count that is not a positive integer";

/// Strings Redis does not accept as integers (string2ll), plus out-of-range values.
const NOT_INTEGERS: &[&[u8]] = &[
    b"abc",
    b"",
    b"+5",
    b"05",
    b" 5",
    b"5 ",
    b"5.0",
    b"-0",
    b"1.5",
    b"1e3",
    b"0x10",
    b"-",
    b"5\0",
    b"\xff",
    b"9223372036854775808",
    b"-9223372036854775809",
    b"99999999999999999999999",
];

fn args(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

fn arity(name: &str) -> String {
    ARITY.replace("{}", name)
}

/// Every malformed call with the exact error it must get.
fn bad_calls() -> Vec<(Vec<Vec<u8>>, String)> {
    let mut v: Vec<(Vec<Vec<u8>>, String)> = Vec::new();
    let mut add = |a: &[&[u8]], e: &str| v.push((args(a), e.to_string()));
    // Arity.
    add(&[b"LOCK.ACQUIRE"], &arity("lock.acquire"));
    add(&[b"LOCK.ACQUIRE", b"k"], &arity("lock.acquire"));
    add(&[b"LOCK.ACQUIRE", b"k", b"o"], &arity("lock.acquire"));
    add(&[b"LOCK.RELEASE"], &arity("lock.release"));
    add(&[b"LOCK.RELEASE", b"k"], &arity("lock.release"));
    add(&[b"LOCK.RENEW"], &arity("lock.renew"));
    add(&[b"LOCK.RENEW", b"k"], &arity("lock.renew"));
    add(&[b"LOCK.RENEW", b"k", b"o"], &arity("lock.renew"));
    add(&[b"LOCK.RENEW", b"k", b"o", b"100", b"100"], "ERR syntax error");
    add(&[b"LOCK.FORCERELEASE"], &arity("lock.forcerelease"));
    add(&[b"LOCK.FORCERELEASE", b"k", b"o"], &arity("lock.forcerelease"));
    add(&[b"LOCK.INFO"], &arity("lock.info"));
    add(&[b"LOCK.INFO", b"k", b"o"], &arity("lock.info"));
    // Non-integer leases and timeouts, in every position.
    for &n in NOT_INTEGERS {
        add(&[b"LOCK.ACQUIRE", b"k", b"o", n], LEASE_NOT_INT);
        add(&[b"LOCK.ACQUIRE", b"k", b"o", b"100", b"WAIT", n], TIMEOUT_NOT_INT);
        add(&[b"LOCK.RELEASE", b"k", b"o", n], LEASE_NOT_INT);
        add(&[b"LOCK.RENEW", b"k", b"o", n], LEASE_NOT_INT);
    }
    // lease <= 0.
    for n in [&b"0"[..], b"-1", b"-100000", b"-9223372036854775808"] {
        add(&[b"LOCK.ACQUIRE", b"k", b"o", n], LEASE_NOT_POS);
        add(&[b"LOCK.ACQUIRE", b"k", b"o", n, b"WAIT", b"10"], LEASE_NOT_POS);
        add(&[b"LOCK.RELEASE", b"k", b"o", n], LEASE_NOT_POS);
        add(&[b"LOCK.RENEW", b"k", b"o", n], LEASE_NOT_POS);
    }
    // timeout < 0.
    for n in [&b"-1"[..], b"-5000", b"-9223372036854775808"] {
        add(&[b"LOCK.ACQUIRE", b"k", b"o", b"100", b"WAIT", n], TIMEOUT_NEG);
    }
    // Deadline overflow.
    for n in [&b"9223372036854775807"[..], b"9223372036854000000", b"9223371000000000000"] {
        add(&[b"LOCK.ACQUIRE", b"k", b"o", n], LEASE_OVERFLOW);
        add(&[b"LOCK.ACQUIRE", b"k", b"o", n, b"WAIT", b"10"], LEASE_OVERFLOW);
        add(&[b"LOCK.RELEASE", b"k", b"o", n], LEASE_OVERFLOW);
        add(&[b"LOCK.RENEW", b"k", b"o", n], LEASE_OVERFLOW);
        add(&[b"LOCK.ACQUIRE", b"k", b"o", b"100", b"WAIT", n], TIMEOUT_OVERFLOW);
    }
    // Empty owner.
    add(&[b"LOCK.ACQUIRE", b"k", b"", b"100"], EMPTY_OWNER);
    add(&[b"LOCK.ACQUIRE", b"k", b"", b"100", b"WAIT", b"10"], EMPTY_OWNER);
    add(&[b"LOCK.RELEASE", b"k", b""], EMPTY_OWNER);
    add(&[b"LOCK.RELEASE", b"k", b"", b"100"], EMPTY_OWNER);
    add(&[b"LOCK.RENEW", b"k", b"", b"100"], EMPTY_OWNER);
    // Unknown, incomplete and repeated options.
    add(&[b"LOCK.ACQUIRE", b"k", b"o", b"100", b"NOPE"], SYNTAX);
    add(&[b"LOCK.ACQUIRE", b"k", b"o", b"100", b"NOPE", b"1"], SYNTAX);
    add(&[b"LOCK.ACQUIRE", b"k", b"o", b"100", b"WAIT"], SYNTAX);
    add(&[b"LOCK.ACQUIRE", b"k", b"o", b"100", b"WAITX", b"10"], SYNTAX);
    add(&[b"LOCK.ACQUIRE", b"k", b"o", b"100", b"WAIT", b"10", b"WAIT", b"10"], SYNTAX);
    add(&[b"LOCK.ACQUIRE", b"k", b"o", b"100", b"WAIT", b"10", b"wait", b"20"], SYNTAX);
    add(&[b"LOCK.ACQUIRE", b"k", b"o", b"100", b"WAIT", b"10", b"extra"], SYNTAX);
    add(&[b"LOCK.ACQUIRE", b"k", b"o", b"100", b"10"], SYNTAX);
    add(&[b"LOCK.RELEASE", b"k", b"o", b"100", b"100"], SYNTAX);
    add(&[b"LOCK.RELEASE", b"k", b"o", b"100", b"WAIT", b"1"], SYNTAX);
    v
}

type Setup = (&'static str, fn(&mut Conn));

fn setups() -> Vec<Setup> {
    vec![
        ("absent", |_c| {}),
        ("held once by o", |c| assert_eq!(acquire(c, b"k", b"o", 100000), R::Nil)),
        ("held twice by o", |c| {
            assert_eq!(acquire(c, b"k", b"o", 100000), R::Nil);
            assert_eq!(acquire(c, b"k", b"o", 100000), R::Nil);
        }),
        ("held by x", |c| assert_eq!(acquire(c, b"k", b"x", 100000), R::Nil)),
    ]
}

fn show(a: &[Vec<u8>]) -> String {
    a.iter().map(|p| format!("{:?}", String::from_utf8_lossy(p))).collect::<Vec<_>>().join(" ")
}

/// Run `call` after each setup: exact error, identical keyspace, no message anywhere.
fn assert_refused(c: &mut Conn, sub: &mut Sub, setup: &Setup, call: &[Vec<u8>], want: &str) {
    assert_eq!(cmd!(c, "FLUSHALL"), R::Simple("OK".into()));
    assert_eq!(cmd!(c, "SET", "bystander", "v", "PX", 1000000), R::Simple("OK".into()));
    (setup.1)(c);
    let snap = keyspace(c);
    let r = c.call(call);
    assert_eq!(r, R::Err(want.to_string()), "{} (lock {})", show(call), setup.0);
    assert_eq!(keyspace(c), snap, "{} changed the keyspace (lock {})", show(call), setup.0);
    let got = sub.until_marker(c, "PUBLISH", b"marker-channel");
    assert!(got.is_empty(), "{} published {got:?} (lock {})", show(call), setup.0);
}

#[test]
fn bad_input_gets_exact_error_and_changes_nothing() {
    let (mut s, mut c) = server();
    let mut sub = all_messages(&s);
    let calls = bad_calls();
    for setup in setups() {
        for (call, want) in &calls {
            assert_refused(&mut c, &mut sub, &setup, call, want);
        }
    }
    s.assert_alive();
}

#[test]
fn redis_integer_edge_cases_are_not_integers() {
    // The explicitly requested cases, each in every numeric position, on a held lock.
    let (_s, mut c) = server();
    let mut sub = all_messages(&_s);
    let setup: Setup = ("held twice by o", setups()[2].1);
    for n in [&b"+5"[..], b"05", b" 5", b"5.0", b"-0"] {
        assert_refused(&mut c, &mut sub, &setup, &args(&[b"LOCK.ACQUIRE", b"k", b"o", n]), LEASE_NOT_INT);
        assert_refused(
            &mut c,
            &mut sub,
            &setup,
            &args(&[b"LOCK.ACQUIRE", b"k", b"o", b"5", b"WAIT", n]),
            TIMEOUT_NOT_INT,
        );
        assert_refused(&mut c, &mut sub, &setup, &args(&[b"LOCK.RELEASE", b"k", b"o", n]), LEASE_NOT_INT);
        assert_refused(&mut c, &mut sub, &setup, &args(&[b"LOCK.RENEW", b"k", b"o", n]), LEASE_NOT_INT);
    }
    // And the plain forms are accepted.
    assert_eq!(cmd!(c, "FLUSHALL"), R::Simple("OK".into()));
    assert_eq!(cmd!(c, "LOCK.ACQUIRE", "k", "o", "5", "WAIT", "0"), R::Nil);
    assert_eq!(cmd!(c, "LOCK.RENEW", "k", "o", "5"), R::Int(1));
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "o", "5"), R::Int(1));
}

#[test]
fn wrongtype_for_every_command_and_non_hash_type() {
    let (_s, mut c) = server();
    let mut sub = all_messages(&_s);
    #[allow(clippy::type_complexity)]
    let types: [(&str, fn(&mut Conn)); 5] = [
        ("string", |c| assert_eq!(cmd!(c, "SET", "k", "v"), R::Simple("OK".into()))),
        ("list", |c| assert_eq!(cmd!(c, "RPUSH", "k", "o", "1"), R::Int(2))),
        ("set", |c| assert_eq!(cmd!(c, "SADD", "k", "o"), R::Int(1))),
        ("zset", |c| assert_eq!(cmd!(c, "ZADD", "k", "1", "o"), R::Int(1))),
        ("stream", |c| assert!(!cmd!(c, "XADD", "k", "*", "o", "1").is_err())),
    ];
    let calls: Vec<Vec<Vec<u8>>> = vec![
        args(&[b"LOCK.ACQUIRE", b"k", b"o", b"100"]),
        args(&[b"LOCK.ACQUIRE", b"k", b"o", b"100", b"WAIT", b"0"]),
        args(&[b"LOCK.ACQUIRE", b"k", b"o", b"100", b"WAIT", b"50"]),
        args(&[b"LOCK.RELEASE", b"k", b"o"]),
        args(&[b"LOCK.RELEASE", b"k", b"o", b"100"]),
        args(&[b"LOCK.RENEW", b"k", b"o", b"100"]),
        args(&[b"LOCK.FORCERELEASE", b"k"]),
        args(&[b"LOCK.INFO", b"k"]),
    ];
    for (name, make) in types {
        for call in &calls {
            // With and without a TTL on the foreign key.
            for ttl in [false, true] {
                assert_eq!(cmd!(c, "FLUSHALL"), R::Simple("OK".into()));
                make(&mut c);
                if ttl {
                    assert_eq!(cmd!(c, "PEXPIRE", "k", 100000), R::Int(1));
                }
                let snap = keyspace(&mut c);
                let r = c.call(call);
                assert_eq!(r, R::Err(WRONGTYPE.into()), "{} on a {name}", show(call));
                assert_eq!(keyspace(&mut c), snap, "{} on a {name} changed the keyspace", show(call));
                let got = sub.until_marker(&mut c, "PUBLISH", b"marker-channel");
                assert!(got.is_empty(), "{} on a {name} published {got:?}", show(call));
            }
        }
    }
}

#[test]
fn corrupt_hold_count_is_refused() {
    let (_s, mut c) = server();
    let mut sub = all_messages(&_s);
    let bad_counts: &[&[u8]] = &[
        b"abc",
        b"0",
        b"-3",
        b"",
        b"+1",
        b"01",
        b" 1",
        b"1 ",
        b"1.0",
        b"-0",
        b"9223372036854775808",
        b"\xff",
    ];
    let calls: Vec<Vec<Vec<u8>>> = vec![
        args(&[b"LOCK.ACQUIRE", b"k", b"me", b"100"]),
        args(&[b"LOCK.ACQUIRE", b"k", b"me", b"100", b"WAIT", b"0"]),
        args(&[b"LOCK.RELEASE", b"k", b"me"]),
        args(&[b"LOCK.RELEASE", b"k", b"me", b"100"]),
        args(&[b"LOCK.RENEW", b"k", b"me", b"100"]),
        args(&[b"LOCK.INFO", b"k"]),
    ];
    for &count in bad_counts {
        for call in &calls {
            for ttl in [false, true] {
                assert_eq!(cmd!(c, "FLUSHALL"), R::Simple("OK".into()));
                assert_eq!(cmd!(c, "HSET", "k", "me", count), R::Int(1));
                if ttl {
                    assert_eq!(cmd!(c, "PEXPIRE", "k", 100000), R::Int(1));
                }
                let snap = keyspace(&mut c);
                let r = c.call(call);
                let what = format!("{} with me={:?}", show(call), String::from_utf8_lossy(count));
                assert_eq!(r, R::Err(CORRUPT.into()), "{what}");
                assert_eq!(keyspace(&mut c), snap, "{what} changed the keyspace");
                let got = sub.until_marker(&mut c, "PUBLISH", b"marker-channel");
                assert!(got.is_empty(), "{what} published {got:?}");
            }
        }
    }
    // A count that cannot be incremented (i64::MAX) is refused by ACQUIRE without a write.
    assert_eq!(cmd!(c, "FLUSHALL"), R::Simple("OK".into()));
    assert_eq!(cmd!(c, "HSET", "k", "me", "9223372036854775807"), R::Int(1));
    let snap = keyspace(&mut c);
    let r = cmd!(c, "LOCK.ACQUIRE", "k", "me", 100);
    assert!(r.err().starts_with("ERR "), "{r:?}");
    assert_eq!(keyspace(&mut c), snap);
}

#[test]
fn oom_denies_acquire_but_not_release() {
    let (_s, mut c) = server();
    assert_eq!(acquire(&mut c, b"k", b"me", 100000), R::Nil);
    assert_eq!(acquire(&mut c, b"k", b"me", 100000), R::Nil);
    assert_eq!(cmd!(c, "CONFIG", "SET", "maxmemory-policy", "noeviction"), R::Simple("OK".into()));
    assert_eq!(cmd!(c, "CONFIG", "SET", "maxmemory", 1), R::Simple("OK".into()));
    let r = acquire(&mut c, b"new", b"me", 1000);
    assert!(r.err().starts_with("OOM"), "ACQUIRE is deny-oom: {r:?}");
    assert_eq!(cmd!(c, "EXISTS", "new"), R::Int(0));
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "me"), R::Int(0));
    assert_eq!(cmd!(c, "LOCK.RELEASE", "k", "me"), R::Int(1));
    assert_eq!(cmd!(c, "EXISTS", "k"), R::Int(0));
    assert_eq!(cmd!(c, "CONFIG", "SET", "maxmemory", 0), R::Simple("OK".into()));
}

// ---------------------------------------------------------------------------------------------
// Binary safety
// ---------------------------------------------------------------------------------------------

#[test]
fn binary_keys_and_owners() {
    let (mut s, mut c) = server();
    let mut long_owner: Vec<u8> = (0..100 * 1024).map(|i| (i * 7 % 256) as u8).collect();
    long_owner.extend_from_slice(b"\r\n\0");
    let long_key: Vec<u8> = (0..10 * 1024).map(|i| (i % 251) as u8).collect();
    let cases: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"bin\0key".to_vec(), b"own\0er".to_vec()),
        (b"\xff\xfe\x80".to_vec(), b"\xff".to_vec()),
        (b"crlf\r\nkey".to_vec(), b"o\r\n:1\r\n".to_vec()),
        (b"\0".to_vec(), b"\0".to_vec()),
        (b"br{a\0}\xff".to_vec(), b"uuid-1:42".to_vec()),
        (b"{\r\n".to_vec(), b"x y".to_vec()),
        (b"plain".to_vec(), long_owner.clone()),
        (long_key, b"o".to_vec()),
    ];
    for (key, owner) in &cases {
        let what = format!("key {:?}", String::from_utf8_lossy(&key[..key.len().min(20)]));
        let mut sub = Sub::new(s.port, "SUBSCRIBE", &[channel(key)]);
        assert_eq!(acquire(&mut c, key, owner, 60000), R::Nil, "{what}");
        assert_eq!(hgetall(&mut c, key), vec![(owner.clone(), b"1".to_vec())], "{what}");
        assert_eq!(acquire(&mut c, key, owner, 60000), R::Nil, "{what}");
        assert_eq!(cmd!(c, "HGET", key, owner), R::Bulk(b"2".to_vec()), "{what}");
        // Owners differing after a NUL, by a suffix, or as a prefix are other owners.
        let mut longer = owner.clone();
        longer.push(0);
        let shorter = owner[..owner.len() - 1].to_vec();
        for other in [&longer, &shorter] {
            if other.is_empty() {
                continue;
            }
            let p = acquire(&mut c, key, other, 1000).int();
            assert!(p > 0 && p <= 60000, "{what}: contended reply {p}");
            assert_eq!(cmd!(c, "LOCK.RELEASE", key, other), R::Nil, "{what}");
            assert_eq!(cmd!(c, "LOCK.RENEW", key, other, 1000), R::Int(0), "{what}");
        }
        let info = cmd!(c, "LOCK.INFO", key);
        check_info_map(&flat_to_map(&info), &[(owner, 2)], 60000);
        assert_eq!(cmd!(c, "LOCK.RENEW", key, owner, 50000), R::Int(1), "{what}");
        assert_eq!(cmd!(c, "LOCK.RELEASE", key, owner), R::Int(0), "{what}");
        assert_eq!(cmd!(c, "LOCK.RELEASE", key, owner), R::Int(1), "{what}");
        assert_eq!(cmd!(c, "EXISTS", key), R::Int(0), "{what}");
        let got = sub.until_marker(&mut c, "PUBLISH", &channel(key));
        assert_eq!(got, vec![(channel(key), b"0".to_vec())], "{what}");
        // FORCERELEASE publishes on the same binary channel.
        assert_eq!(acquire(&mut c, key, owner, 60000), R::Nil, "{what}");
        assert_eq!(cmd!(c, "LOCK.FORCERELEASE", key), R::Int(1), "{what}");
        let got = sub.until_marker(&mut c, "PUBLISH", &channel(key));
        assert_eq!(got, vec![(channel(key), b"0".to_vec())], "{what}");
    }
    // The `{` rule: `br{a\0}\xff` publishes on `prefix:br{a\0}\xff`, not on `prefix:{br{a\0}\xff}`.
    assert_eq!(channel(b"br{a\0}\xff"), b"redisson_lock__channel:br{a\0}\xff".to_vec());
    let mut braced = Sub::new(s.port, "SUBSCRIBE", &[b"redisson_lock__channel:{br{a\0}\xff}".to_vec()]);
    assert_eq!(acquire(&mut c, b"br{a\0}\xff", b"o", 60000), R::Nil);
    assert_eq!(cmd!(c, "LOCK.RELEASE", b"br{a\0}\xff", "o"), R::Int(1));
    let got = braced.until_marker(&mut c, "PUBLISH", b"redisson_lock__channel:{br{a\0}\xff}");
    assert!(got.is_empty(), "{got:?}");
    s.assert_alive();
}

// ---------------------------------------------------------------------------------------------
// MULTI/EXEC and Lua
// ---------------------------------------------------------------------------------------------

#[test]
fn usable_in_multi_exec_and_lua() {
    let (s, mut c) = server();
    let mut sub = all_messages(&s);
    assert_eq!(cmd!(c, "MULTI"), R::Simple("OK".into()));
    for call in [
        args(&[b"LOCK.ACQUIRE", b"k", b"me", b"60000"]),
        args(&[b"LOCK.ACQUIRE", b"k", b"me", b"60000", b"WAIT", b"0"]),
        args(&[b"LOCK.ACQUIRE", b"k", b"other", b"60000", b"WAIT", b"0"]),
        args(&[b"LOCK.RENEW", b"k", b"me", b"50000"]),
        args(&[b"LOCK.RELEASE", b"k", b"me"]),
        args(&[b"LOCK.RELEASE", b"k", b"other"]),
        args(&[b"LOCK.RELEASE", b"k", b"me"]),
        args(&[b"LOCK.FORCERELEASE", b"k"]),
        args(&[b"LOCK.INFO", b"k"]),
    ] {
        assert_eq!(c.call(&call), R::Simple("QUEUED".into()));
    }
    let r = cmd!(c, "EXEC");
    let a = r.arr();
    assert_eq!(a[0], R::Nil);
    assert_eq!(a[1], R::Nil);
    let p = a[2].int();
    assert!(p > 50000 && p <= 60000, "WAIT inside MULTI replies the PTTL at once: {p}");
    assert_eq!(a[3], R::Int(1));
    assert_eq!(a[4], R::Int(0));
    assert_eq!(a[5], R::Nil);
    assert_eq!(a[6], R::Int(1));
    assert_eq!(a[7], R::Int(0));
    assert_eq!(a[8], R::Nil);
    one_release_message(&mut sub, &mut c, b"k", "MULTI");

    let script = "return redis.call(ARGV[1], KEYS[1], unpack(ARGV, 2))";
    let ev = |c: &mut Conn, parts: &[&str]| -> R {
        let mut a: Vec<Vec<u8>> = vec![b"EVAL".to_vec(), script.into(), b"1".to_vec(), b"k".to_vec()];
        a.extend(parts.iter().map(|p| p.as_bytes().to_vec()));
        c.call(&a)
    };
    assert_eq!(ev(&mut c, &["LOCK.ACQUIRE", "me", "60000"]), R::Nil);
    assert_eq!(ev(&mut c, &["LOCK.ACQUIRE", "me", "60000"]), R::Nil);
    let p = ev(&mut c, &["LOCK.ACQUIRE", "other", "1000", "WAIT", "0"]).int();
    assert!(p > 50000 && p <= 60000, "WAIT inside Lua replies the PTTL at once: {p}");
    assert_eq!(ev(&mut c, &["LOCK.RENEW", "me", "40000"]), R::Int(1));
    assert_eq!(ev(&mut c, &["LOCK.RENEW", "other", "40000"]), R::Int(0));
    let info = ev(&mut c, &["LOCK.INFO"]);
    check_info_map(&flat_to_map(&info), &[(b"me", 2)], 40000);
    assert_eq!(ev(&mut c, &["LOCK.RELEASE", "other"]), R::Nil);
    assert_eq!(ev(&mut c, &["LOCK.RELEASE", "me"]), R::Int(0));
    no_messages(&mut sub, &mut c, "Lua partial release");
    assert_eq!(ev(&mut c, &["LOCK.RELEASE", "me"]), R::Int(1));
    one_release_message(&mut sub, &mut c, b"k", "Lua release");
    assert_eq!(ev(&mut c, &["LOCK.FORCERELEASE"]), R::Int(0));
    // Errors surface from Lua with their text.
    let r = ev(&mut c, &["LOCK.ACQUIRE", "me", "0"]);
    assert!(r.err().contains("lease-ms must be a positive integer"), "{r:?}");
    assert_eq!(cmd!(c, "EXISTS", "k"), R::Int(0));
    no_messages(&mut sub, &mut c, "Lua errors");
}

/// On 7.2+ the server measures TTLs inside MULTI/EXEC and scripts from a time snapshot taken
/// when EXEC (or the script) started, while the module sets deadlines from the clock. A PTTL
/// reply must never exceed the lease it was set with, however long the transaction has run.
#[test]
fn pttl_replies_never_exceed_the_lease_inside_a_slow_transaction() {
    let (mut s, mut c) = server();
    assert_eq!(cmd!(c, "MULTI"), R::Simple("OK".into()));
    for call in [
        args(&[b"DEBUG", b"SLEEP", b"0.05"]),
        args(&[b"LOCK.ACQUIRE", b"slow", b"me", b"60000"]),
        args(&[b"LOCK.ACQUIRE", b"slow", b"other", b"60000"]),
        args(&[b"LOCK.ACQUIRE", b"slow", b"other", b"60000", b"FENCE"]),
        args(&[b"LOCK.INFO", b"slow"]),
    ] {
        assert_eq!(c.call(&call), R::Simple("QUEUED".into()));
    }
    let r = cmd!(c, "EXEC");
    let a = r.arr();
    assert_eq!(a[1], R::Nil);
    let p = a[2].int();
    assert!(p > 50000 && p <= 60000, "contended ACQUIRE after a 50 ms sleep in MULTI: {p}");
    let f = a[3].arr();
    assert!(f[0].int() > 50000 && f[0].int() <= 60000, "FENCE reply {f:?}");
    let info = flat_to_map(&a[4]);
    let p = info.iter().find(|(k, _)| *k == R::Bulk(b"pttl".to_vec())).map(|(_, v)| v.int()).unwrap_or(-9);
    assert!(p > 50000 && p <= 60000, "LOCK.INFO pttl after a 50 ms sleep in MULTI: {p}");
    s.assert_alive();
}

//! Server-side waiting (spec section 4): FIFO order, atomic handoff, expiry handoff, frees made
//! by other commands, timeouts, cancellation, MULTI/Lua, role change, replication, scale, INFO.
//!
//! Blocked waiters use `Raw`, a minimal RESP2 client on one socket: it can send a command without
//! reading, and check for a reply with a bound without disturbing the stream (the redis crate's
//! `recv_response` drops the next reply after a read timeout). Control connections use the redis
//! crate. Every "is the waiter queued" step is confirmed with LOCK.INFO / INFO lock.

mod common;
use common::*;

use redis::Value;
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::RwLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Timing-sensitive tests take this shared; the heavy ones (10 000 clients, replica churn) take
/// it exclusively, so a latency bound is not measured while the 2-core machine is saturated.
static LOAD: RwLock<()> = RwLock::new(());

fn light() -> std::sync::RwLockReadGuard<'static, ()> {
    LOAD.read().unwrap_or_else(|p| p.into_inner())
}
/// The usual start of a light test: the shared load guard, a server, a control connection.
fn light_server() -> (std::sync::RwLockReadGuard<'static, ()>, Server, redis::Connection) {
    let g = light();
    let s = Server::start();
    let c = s.conn();
    (g, s, c)
}

fn heavy() -> std::sync::RwLockWriteGuard<'static, ()> {
    LOAD.write().unwrap_or_else(|p| p.into_inner())
}

// ---- minimal RESP2 client ---------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Nil,
    Int(i64),
    Str(String),
    Err(String),
    Arr(Vec<Reply>),
    /// The server closed the connection.
    Closed,
}

impl Reply {
    fn int(&self) -> i64 {
        match self {
            Reply::Int(i) => *i,
            other => panic!("expected an integer reply, got {other:?}"),
        }
    }
}

struct Raw {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_nodelay(true).ok();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Raw { s, buf: Vec::new() }
    }

    fn send(&mut self, args: &[&str]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        self.s.write_all(&out).expect("send");
    }

    fn cmd(&mut self, args: &[&str]) -> Reply {
        self.send(args);
        self.read()
    }

    /// Read more bytes; false on EOF. Panics on a read timeout (a missing reply).
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        match (&self.s).read(&mut chunk) {
            Ok(0) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => false,
            Err(e) => panic!("no reply within the read timeout: {e}"),
        }
    }

    fn line(&mut self) -> Option<String> {
        loop {
            if let Some(p) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let l: Vec<u8> = self.buf.drain(..p + 2).collect();
                return Some(String::from_utf8_lossy(&l[..p]).into_owned());
            }
            if !self.fill() {
                return None;
            }
        }
    }

    /// One whole reply (blocking, 30 s bound).
    fn read(&mut self) -> Reply {
        let Some(l) = self.line() else { return Reply::Closed };
        let (t, rest) = l.split_at(1);
        match t {
            "+" => Reply::Str(rest.to_string()),
            "-" => Reply::Err(rest.to_string()),
            ":" => Reply::Int(rest.parse().expect("integer reply")),
            "_" => Reply::Nil,
            "$" => {
                let n: i64 = rest.parse().expect("bulk length");
                if n < 0 {
                    return Reply::Nil;
                }
                let n = n as usize;
                while self.buf.len() < n + 2 {
                    if !self.fill() {
                        return Reply::Closed;
                    }
                }
                let b: Vec<u8> = self.buf.drain(..n + 2).collect();
                Reply::Str(String::from_utf8_lossy(&b[..n]).into_owned())
            }
            "*" => {
                let n: i64 = rest.parse().expect("array length");
                if n < 0 {
                    return Reply::Nil;
                }
                Reply::Arr((0..n).map(|_| self.read()).collect())
            }
            _ => panic!("unexpected reply line {l:?}"),
        }
    }

    /// A reply if one starts arriving within `d`, else None (nothing is consumed).
    fn poll(&mut self, d: Duration) -> Option<Reply> {
        if self.buf.is_empty() {
            self.s.set_read_timeout(Some(d)).unwrap();
            let mut chunk = [0u8; 4096];
            let r = (&self.s).read(&mut chunk);
            self.s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            match r {
                Ok(0) => return Some(Reply::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return None,
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return Some(Reply::Closed),
                Err(e) => panic!("read: {e}"),
            }
        }
        Some(self.read())
    }

    /// Connection still in sync: exactly the replies it asked for, nothing extra.
    fn assert_no_extra_reply(&mut self) {
        assert_eq!(self.cmd(&["PING"]), Reply::Str("PONG".into()), "stray reply on the connection");
    }

    fn close(self) {
        let _ = self.s.shutdown(Shutdown::Both);
    }
}

/// A client blocked (or about to be) in LOCK.ACQUIRE ... WAIT.
struct Waiter {
    raw: Raw,
    owner: String,
    key: String,
}

impl Waiter {
    fn start(port: u16, key: &str, owner: &str, lease: i64, wait: i64) -> Waiter {
        let mut raw = Raw::connect(port);
        raw.send(&["LOCK.ACQUIRE", key, owner, &lease.to_string(), "WAIT", &wait.to_string()]);
        Waiter { raw, owner: owner.to_string(), key: key.to_string() }
    }
    fn reply(&mut self) -> Reply {
        self.raw.read()
    }
    fn release(&mut self) -> Reply {
        let (k, o) = (self.key.clone(), self.owner.clone());
        self.raw.cmd(&["LOCK.RELEASE", &k, &o])
    }
}

// ---- helpers on a control connection ----------------------------------------------------------

fn acquire(c: &mut redis::Connection, key: &str, owner: &str, lease: i64) -> Option<i64> {
    redis::cmd("LOCK.ACQUIRE").arg(key).arg(owner).arg(lease).query(c).expect("LOCK.ACQUIRE")
}

fn release(c: &mut redis::Connection, key: &str, owner: &str) -> Option<i64> {
    redis::cmd("LOCK.RELEASE").arg(key).arg(owner).query(c).expect("LOCK.RELEASE")
}

fn owners(c: &mut redis::Connection, key: &str) -> BTreeMap<String, String> {
    redis::cmd("HGETALL").arg(key).query(c).expect("HGETALL")
}

fn one_owner(o: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(o.to_string(), "1".to_string())])
}

fn pttl(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(c).expect("PTTL")
}

fn pexpiretime(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME").arg(key).query(c).expect("PEXPIRETIME")
}

/// LOCK.INFO `waiters` (None when the key is absent).
fn key_waiters(c: &mut redis::Connection, key: &str) -> Option<i64> {
    let v: Value = redis::cmd("LOCK.INFO").arg(key).query(c).expect("LOCK.INFO");
    let items: Vec<(Value, Value)> = match v {
        Value::Nil => return None,
        Value::Array(a) => a.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect(),
        Value::Map(m) => m,
        other => panic!("LOCK.INFO reply {other:?}"),
    };
    for (k, v) in items {
        let name: String = redis::from_redis_value(&k).expect("field name");
        if name == "waiters" {
            return Some(redis::from_redis_value(&v).expect("waiters int"));
        }
    }
    panic!("LOCK.INFO has no waiters field");
}

/// Wait (bounded) until LOCK.INFO `key` reports `n` waiters.
fn await_key_waiters(c: &mut redis::Connection, key: &str, n: i64) {
    let mut last = None;
    let ok = wait_for(Duration::from_secs(10), || {
        last = key_waiters(c, key);
        (last == Some(n)).then_some(())
    });
    assert!(ok.is_some(), "LOCK.INFO {key} waiters: expected {n}, last seen {last:?}");
}

/// Wait (bounded) until the server-wide `lock_waiters` gauge is `n`.
fn await_total_waiters(c: &mut redis::Connection, n: i64) {
    let mut last = -1;
    let ok = wait_for(Duration::from_secs(10), || {
        last = stat(c, "waiters");
        (last == n).then_some(())
    });
    assert!(ok.is_some(), "lock_waiters: expected {n}, last seen {last}");
}

fn now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as f64 / 1000.0
}

fn channel(key: &str) -> String {
    format!("redisson_lock__channel:{{{key}}}")
}

fn subscribe(port: u16, chan: &str) -> Raw {
    let mut sub = Raw::connect(port);
    let r = sub.cmd(&["SUBSCRIBE", chan]);
    assert_eq!(r, Reply::Arr(vec![Reply::Str("subscribe".into()), Reply::Str(chan.into()), Reply::Int(1)]));
    sub
}

fn assert_release_message(sub: &mut Raw, chan: &str) {
    let m = sub.poll(Duration::from_secs(5)).expect("a release message");
    assert_eq!(
        m,
        Reply::Arr(vec![Reply::Str("message".into()), Reply::Str(chan.into()), Reply::Str("0".into())])
    );
}

fn assert_no_message(sub: &mut Raw, what: &str) {
    if let Some(m) = sub.poll(Duration::from_millis(300)) {
        panic!("{what}: unexpected pub/sub message {m:?}");
    }
}

// ---- 1. FIFO ----------------------------------------------------------------------------------

#[test]
fn fifo_order_with_ten_waiters() {
    let (_g, s, mut c) = light_server();
    let key = "fifo";
    assert_eq!(acquire(&mut c, key, "holder", 30000), None);
    let mut waiters: Vec<Waiter> = Vec::new();
    let arrival: Vec<String> = (0..10).map(|i| format!("w{i}")).collect();
    for (i, o) in arrival.iter().enumerate() {
        waiters.push(Waiter::start(s.port, key, o, 30000, 0));
        await_key_waiters(&mut c, key, i as i64 + 1);
    }
    assert_eq!(release(&mut c, key, "holder"), Some(1));
    let mut order = Vec::new();
    for step in 0..arrival.len() {
        let held = owners(&mut c, key);
        assert_eq!(held.len(), 1, "step {step}: exactly one owner, got {held:?}");
        let (o, count) = held.into_iter().next().unwrap();
        assert_eq!(count, "1", "a granted waiter starts with hold count 1");
        order.push(o.clone());
        let idx = arrival.iter().position(|a| *a == o).expect("owner is one of the waiters");
        let w = &mut waiters[idx];
        assert_eq!(w.reply(), Reply::Nil, "the granted waiter {o} is answered nil");
        assert_eq!(key_waiters(&mut c, key), Some((arrival.len() - step - 1) as i64));
        // Nobody behind it has been answered.
        for (j, other) in waiters.iter_mut().enumerate() {
            if !order.contains(&arrival[j]) {
                assert_eq!(other.raw.poll(Duration::from_millis(1)), None, "{} answered early", arrival[j]);
            }
        }
        assert_eq!(waiters[idx].release(), Reply::Int(1));
    }
    assert_eq!(order, arrival, "grants follow arrival order");
    assert!(owners(&mut c, key).is_empty(), "the last release frees the lock");
    for w in &mut waiters {
        w.raw.assert_no_extra_reply();
    }
    assert_eq!(stat(&mut c, "waiters"), 0);
    assert_eq!(stat(&mut c, "keys_with_waiters"), 0);
}

/// Waiters on the same key name in another database are a separate queue.
#[test]
fn queues_are_per_database() {
    let (_g, s, mut c) = light_server();
    let mut c3 = s.conn();
    let _: () = redis::cmd("SELECT").arg(3).query(&mut c3).unwrap();
    assert_eq!(acquire(&mut c, "k", "h0", 30000), None);
    assert_eq!(acquire(&mut c3, "k", "h3", 30000), None);
    let mut w = Raw::connect(s.port);
    assert_eq!(w.cmd(&["SELECT", "3"]), Reply::Str("OK".into()));
    w.send(&["LOCK.ACQUIRE", "k", "w3", "30000", "WAIT", "0"]);
    await_key_waiters(&mut c3, "k", 1);
    assert_eq!(key_waiters(&mut c, "k"), Some(0));
    assert_eq!(release(&mut c, "k", "h0"), Some(1));
    assert!(owners(&mut c, "k").is_empty(), "db 0's lock is free: nobody waits there");
    assert_eq!(w.poll(Duration::from_millis(200)), None, "db 3's waiter is not granted db 0's lock");
    assert_eq!(release(&mut c3, "k", "h3"), Some(1));
    assert_eq!(w.read(), Reply::Nil);
    assert_eq!(owners(&mut c3, "k"), one_owner("w3"));
}

// ---- 2. atomic handoff ------------------------------------------------------------------------

fn handoff_case(force: bool) {
    let s = Server::start();
    let mut c = s.conn();
    let mut c2 = s.conn();
    let key = if force { "hf" } else { "hr" };
    let chan = channel(key);
    let mut sub = subscribe(s.port, &chan);

    assert_eq!(acquire(&mut c, key, "A", 30000), None);
    let mut b = Waiter::start(s.port, key, "B", 7000, 0);
    await_key_waiters(&mut c, key, 1);
    let r: i64 = if force {
        redis::cmd("LOCK.FORCERELEASE").arg(key).query(&mut c).unwrap()
    } else {
        release(&mut c, key, "A").expect("release reply")
    };
    assert_eq!(r, 1);
    // Straight after that reply the lock already belongs to B.
    let p = acquire(&mut c2, key, "C", 5000);
    assert!(matches!(p, Some(t) if t > 0), "C must see the lock held (integer PTTL), got {p:?}");
    assert_eq!(owners(&mut c, key), one_owner("B"));
    let t = pttl(&mut c, key);
    assert!(t > 5000 && t <= 7000, "B's own lease (7000 ms), PTTL {t}");
    assert_eq!(b.reply(), Reply::Nil);
    assert_no_message(&mut sub, "handoff");
    assert_eq!(stat(&mut c, "handoffs"), 1);
    assert_eq!(stat(&mut c, "release_messages"), 0);

    // No waiters: the lock becomes free and exactly one message is published.
    let r = if force { b.raw.cmd(&["LOCK.FORCERELEASE", key]) } else { b.release() };
    assert_eq!(r, Reply::Int(1));
    assert_eq!(owners(&mut c, key), BTreeMap::new());
    assert_release_message(&mut sub, &chan);
    assert_no_message(&mut sub, "one free");
    assert_eq!(stat(&mut c, "release_messages"), 1);
}

#[test]
fn release_hands_off_atomically_without_publishing() {
    let _g = light();
    handoff_case(false);
}

#[test]
fn forcerelease_hands_off_atomically_without_publishing() {
    let _g = light();
    handoff_case(true);
}

/// The handoff happens inside the command even when that command runs in MULTI or a script:
/// the next command of the same transaction/script already sees the new owner.
#[test]
fn handoff_inside_multi_and_lua_is_atomic() {
    let (_g, s, mut c) = light_server();
    let chan = channel("k");
    let mut sub = subscribe(s.port, &chan);

    assert_eq!(acquire(&mut c, "k", "A", 30000), None);
    let mut b = Waiter::start(s.port, "k", "B", 30000, 0);
    await_key_waiters(&mut c, "k", 1);
    let (r, p, all): (i64, Option<i64>, BTreeMap<String, String>) = redis::pipe()
        .atomic()
        .cmd("LOCK.RELEASE")
        .arg("k")
        .arg("A")
        .cmd("LOCK.ACQUIRE")
        .arg("k")
        .arg("C")
        .arg(1000)
        .cmd("HGETALL")
        .arg("k")
        .query(&mut c)
        .unwrap();
    assert_eq!(r, 1);
    assert!(matches!(p, Some(t) if t > 0), "C in the same MULTI sees B's lock, got {p:?}");
    assert_eq!(all, one_owner("B"));
    assert_eq!(b.reply(), Reply::Nil);

    let mut d = Waiter::start(s.port, "k", "D", 30000, 0);
    await_key_waiters(&mut c, "k", 1);
    let script = "local r = redis.call('LOCK.RELEASE', KEYS[1], ARGV[1]) \
                  local p = redis.call('LOCK.ACQUIRE', KEYS[1], 'E', 1000) \
                  return {r, p, redis.call('HGETALL', KEYS[1])}";
    let v: Value = redis::cmd("EVAL").arg(script).arg(1).arg("k").arg("B").query(&mut c).unwrap();
    let Value::Array(items) = v else { panic!("script reply {v:?}") };
    assert_eq!(items[0], Value::Int(1));
    assert!(matches!(items[1], Value::Int(t) if t > 0), "E in the script sees D's lock: {:?}", items[1]);
    let all: Vec<String> = redis::from_redis_value(&items[2]).unwrap();
    assert_eq!(all, vec!["D".to_string(), "1".to_string()]);
    assert_eq!(d.reply(), Reply::Nil);
    assert_no_message(&mut sub, "handoffs in MULTI / Lua");
}

// ---- 3. expiry handoff ------------------------------------------------------------------------

#[test]
fn expiry_hands_off_promptly() {
    let (_g, s, mut c) = light_server();
    let mut lateness: Vec<f64> = Vec::new();
    let mut attempts = 0;
    while lateness.len() < 10 {
        attempts += 1;
        assert!(attempts <= 30, "could not queue a waiter before a 200 ms lease ran out in 30 attempts");
        let key = format!("exp{attempts}");
        assert_eq!(acquire(&mut c, &key, "holder", 200), None);
        let deadline = pexpiretime(&mut c, &key);
        let mut w = Waiter::start(s.port, &key, "w", 30000, 0);
        // Queued while the holder still held it? (Otherwise the waiter got a free lock: retry.)
        let queued = wait_for(Duration::from_secs(10), || match key_waiters(&mut c, &key) {
            Some(1) => Some(true),
            Some(0) | None => {
                let o = owners(&mut c, &key);
                o.contains_key("w").then_some(false)
            }
            Some(n) => panic!("{n} waiters"),
        })
        .expect("waiter queued or granted");
        let r = w.reply();
        let at = now_ms();
        assert_eq!(r, Reply::Nil, "the waiter is granted the expired lock");
        assert_eq!(owners(&mut c, &key), one_owner("w"));
        let t = pttl(&mut c, &key);
        assert!(t > 25000 && t <= 30000, "the waiter's own lease, PTTL {t}");
        if !queued {
            eprintln!("round {attempts}: waiter not queued before the lease ran out; retrying");
            continue;
        }
        let late = at - deadline as f64;
        assert!(late >= 0.0, "granted {late:.1} ms BEFORE the holder's deadline");
        lateness.push(late);
    }
    lateness.sort_by(|a, b| a.partial_cmp(b).unwrap());
    eprintln!(
        "expiry handoff lateness over {} rounds (reply time - PEXPIRETIME): min {:.2} ms, median {:.2} ms, max {:.2} ms; all: {:?}",
        lateness.len(),
        lateness[0],
        (lateness[4] + lateness[5]) / 2.0,
        lateness[9],
        lateness.iter().map(|l| format!("{l:.2}")).collect::<Vec<_>>()
    );
    assert!(lateness[9] < 100.0, "expiry handoff must be prompt; worst {:.2} ms", lateness[9]);
    assert_eq!(stat(&mut c, "grants_after_free"), 10, "one grant after expiry per measured round");
}

/// The lease timer follows lease changes made after the waiter queued: a renewal to a longer
/// lease postpones the grant, a foreign PEXPIRE to a shorter one brings it forward.
#[test]
fn lease_changes_move_the_expiry_grant() {
    let (_g, s, mut c) = light_server();
    assert_eq!(acquire(&mut c, "k", "h", 300), None);
    let mut w = Waiter::start(s.port, "k", "w", 30000, 0);
    await_key_waiters(&mut c, "k", 1);
    let r: i64 = redis::cmd("LOCK.RENEW").arg("k").arg("h").arg(30000).query(&mut c).unwrap();
    assert_eq!(r, 1);
    assert_eq!(w.raw.poll(Duration::from_millis(700)), None, "renewed: no grant at the old deadline");
    assert_eq!(owners(&mut c, "k"), one_owner("h"));
    // Redisson's watchdog/foreign scripts use PEXPIRE directly.
    let _: i64 = redis::cmd("PEXPIRE").arg("k").arg(100).query(&mut c).unwrap();
    let deadline = pexpiretime(&mut c, "k");
    assert_eq!(w.reply(), Reply::Nil);
    let late = now_ms() - deadline as f64;
    eprintln!("grant after a foreign PEXPIRE: {late:.2} ms after the deadline");
    assert!((0.0..1000.0).contains(&late), "grant {late:.2} ms after the shortened deadline");
    assert_eq!(owners(&mut c, "k"), one_owner("w"));
}

// ---- 4. frees by other commands ---------------------------------------------------------------

/// Queue "w" behind "h" on `key`, run `free`, expect w to be granted promptly.
fn freed_by(name: &str, keys: &[&str], free: impl FnOnce(&mut redis::Connection)) {
    let s = Server::start();
    let mut c = s.conn();
    let mut ws = Vec::new();
    for k in keys {
        assert_eq!(acquire(&mut c, k, "h", 30000), None);
        ws.push(Waiter::start(s.port, k, &format!("w-{k}"), 20000, 0));
        await_key_waiters(&mut c, k, 1);
    }
    let t0 = Instant::now();
    free(&mut c);
    for (k, w) in keys.iter().zip(ws.iter_mut()) {
        let r = w.raw.poll(Duration::from_millis(500));
        let el = t0.elapsed();
        assert_eq!(r, Some(Reply::Nil), "{name}: waiter on {k} granted within 500 ms (after {el:?})");
        assert_eq!(owners(&mut c, k), one_owner(&format!("w-{k}")), "{name}: {k} now belongs to the waiter");
        let t = pttl(&mut c, k);
        assert!(t > 15000 && t <= 20000, "{name}: the waiter's lease, PTTL {t}");
        w.raw.assert_no_extra_reply();
    }
    assert_eq!(stat(&mut c, "waiters"), 0, "{name}");
    assert_eq!(stat(&mut c, "keys_with_waiters"), 0, "{name}");
}

#[test]
fn del_wakes_the_waiter() {
    let _g = light();
    freed_by("DEL", &["k"], |c| assert_eq!(redis::cmd("DEL").arg("k").query::<i64>(c).unwrap(), 1));
}

#[test]
fn unlink_wakes_the_waiter() {
    let _g = light();
    freed_by("UNLINK", &["k"], |c| assert_eq!(redis::cmd("UNLINK").arg("k").query::<i64>(c).unwrap(), 1));
}

#[test]
fn hdel_of_the_last_field_wakes_the_waiter() {
    let _g = light();
    freed_by("HDEL", &["k"], |c| {
        assert_eq!(redis::cmd("HDEL").arg("k").arg("h").query::<i64>(c).unwrap(), 1)
    });
}

#[test]
fn flushall_wakes_waiters() {
    let _g = light();
    freed_by("FLUSHALL", &["k1", "k2"], |c| redis::cmd("FLUSHALL").query::<()>(c).unwrap());
}

#[test]
fn flushall_async_wakes_waiters() {
    let _g = light();
    freed_by("FLUSHALL ASYNC", &["k1", "k2"], |c| {
        redis::cmd("FLUSHALL").arg("ASYNC").query::<()>(c).unwrap()
    });
}

#[test]
fn flushdb_wakes_waiters() {
    let _g = light();
    freed_by("FLUSHDB", &["k1", "k2"], |c| redis::cmd("FLUSHDB").query::<()>(c).unwrap());
}

const REDISSON_UNLOCK: &str = "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; \
     local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
     if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; \
     else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;";

#[test]
fn redisson_lua_unlock_wakes_the_waiter() {
    let _g = light();
    freed_by("Lua unlock", &["k"], |c| {
        let r: i64 = redis::cmd("EVAL")
            .arg(REDISSON_UNLOCK)
            .arg(2)
            .arg("k")
            .arg(channel("k"))
            .arg(0)
            .arg(30000)
            .arg("h")
            .query(c)
            .unwrap();
        assert_eq!(r, 1);
    });
}

#[test]
fn rename_away_wakes_the_waiter() {
    let _g = light();
    freed_by("RENAME", &["k"], |c| {
        redis::cmd("RENAME").arg("k").arg("elsewhere").query::<()>(c).unwrap();
        assert_eq!(owners(c, "elsewhere"), one_owner("h"));
    });
}

#[test]
fn foreign_pexpire_to_the_past_wakes_the_waiter() {
    let _g = light();
    freed_by("PEXPIREAT past", &["k"], |c| {
        let r: i64 = redis::cmd("PEXPIREAT").arg("k").arg(1).query(c).unwrap();
        assert_eq!(r, 1);
    });
}

/// The key becomes a non-hash: waiters get WRONGTYPE (and are not left blocked).
fn type_change(name: &str, change: impl FnOnce(&mut redis::Connection)) {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(acquire(&mut c, "k", "h", 30000), None);
    let mut ws: Vec<Waiter> =
        (0..2).map(|i| Waiter::start(s.port, "k", &format!("w{i}"), 20000, 0)).collect();
    await_key_waiters(&mut c, "k", 2);
    change(&mut c);
    for w in &mut ws {
        match w.raw.poll(Duration::from_millis(500)) {
            Some(Reply::Err(e)) => assert!(e.starts_with("WRONGTYPE"), "{name}: error {e}"),
            other => panic!("{name}: expected a WRONGTYPE error within 500 ms, got {other:?}"),
        }
        w.raw.assert_no_extra_reply();
    }
    let v: String = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, "v", "{name}: nobody overwrote the string");
    assert_eq!(stat(&mut c, "waiters"), 0);
    assert_eq!(stat(&mut c, "waits_failed"), 2);
    assert_eq!(stat(&mut c, "waits_granted"), 0);
}

#[test]
fn set_over_the_lock_gives_waiters_wrongtype() {
    let _g = light();
    type_change("SET", |c| redis::cmd("SET").arg("k").arg("v").query::<()>(c).unwrap());
}

#[test]
fn del_then_set_in_multi_gives_waiters_wrongtype() {
    let _g = light();
    type_change("MULTI DEL SET", |c| {
        redis::pipe()
            .atomic()
            .cmd("DEL")
            .arg("k")
            .ignore()
            .cmd("SET")
            .arg("k")
            .arg("v")
            .ignore()
            .query::<()>(c)
            .unwrap()
    });
}

/// A lock freed behind the module's back (DEL inside MULTI / a script) still belongs to the head
/// waiter: a newcomer in the same transaction, before the module's deferred check runs, does
/// not overtake the queue.
#[test]
fn newcomer_does_not_overtake_waiters_after_a_foreign_free() {
    let (_g, s, mut c) = light_server();
    assert_eq!(acquire(&mut c, "k", "h", 30000), None);
    let mut w = Waiter::start(s.port, "k", "w", 20000, 0);
    await_key_waiters(&mut c, "k", 1);
    let (p,): (Option<i64>,) = redis::pipe()
        .atomic()
        .cmd("DEL")
        .arg("k")
        .ignore()
        .cmd("LOCK.ACQUIRE")
        .arg("k")
        .arg("newcomer")
        .arg(1000)
        .query(&mut c)
        .unwrap();
    assert!(matches!(p, Some(t) if t > 0), "the newcomer sees the lock held by the waiter, got {p:?}");
    assert_eq!(w.reply(), Reply::Nil);
    assert_eq!(owners(&mut c, "k"), one_owner("w"));

    let mut w2 = Waiter::start(s.port, "k", "w2", 20000, 0);
    await_key_waiters(&mut c, "k", 1);
    let p: Option<i64> = redis::cmd("EVAL")
        .arg("redis.call('DEL', KEYS[1]) return redis.call('LOCK.ACQUIRE', KEYS[1], 'newcomer', 1000)")
        .arg(1)
        .arg("k")
        .query(&mut c)
        .unwrap();
    assert!(matches!(p, Some(t) if t > 0), "script newcomer sees the lock held by w2, got {p:?}");
    assert_eq!(w2.reply(), Reply::Nil);
    assert_eq!(owners(&mut c, "k"), one_owner("w2"));
}

// ---- 5. WAIT timeouts -------------------------------------------------------------------------

#[test]
fn wait_timeout_replies_the_pttl() {
    let (_g, s, mut c) = light_server();
    assert_eq!(acquire(&mut c, "k", "h", 10000), None);
    let t0 = Instant::now();
    let mut w = Waiter::start(s.port, "k", "w", 5000, 150);
    let r = w.reply();
    let el = t0.elapsed();
    eprintln!("WAIT 150 answered after {el:?}");
    match r {
        Reply::Int(p) => assert!(p > 0 && p <= 10000, "PTTL {p}"),
        other => panic!("expected the integer PTTL, got {other:?}"),
    }
    assert!(el >= Duration::from_millis(100) && el <= Duration::from_millis(1000), "timed out after {el:?}");
    assert_eq!(owners(&mut c, "k"), one_owner("h"));
    assert_eq!(key_waiters(&mut c, "k"), Some(0));
    assert_eq!(stat(&mut c, "waits_timed_out"), 1);
    // Never granted later either.
    assert_eq!(release(&mut c, "k", "h"), Some(1));
    assert!(owners(&mut c, "k").is_empty());
    w.raw.assert_no_extra_reply();
}

#[test]
fn wait_zero_waits_until_released() {
    let (_g, s, mut c) = light_server();
    assert_eq!(acquire(&mut c, "k", "h", 10000), None);
    let mut w = Waiter::start(s.port, "k", "w", 5000, 0);
    await_key_waiters(&mut c, "k", 1);
    assert_eq!(w.raw.poll(Duration::from_millis(500)), None, "WAIT 0 has no timeout");
    assert_eq!(key_waiters(&mut c, "k"), Some(1));
    assert_eq!(release(&mut c, "k", "h"), Some(1));
    assert_eq!(w.reply(), Reply::Nil);
    assert_eq!(owners(&mut c, "k"), one_owner("w"));
    w.raw.assert_no_extra_reply();
}

/// A wait timeout racing the holder's lease expiry: whichever wins, the waiter gets exactly one
/// reply, and nil if and only if it owns the lock.
#[test]
fn timeout_racing_expiry_gives_one_consistent_reply() {
    let (_g, s, mut c) = light_server();
    let (mut granted, mut timed_out) = (0, 0);
    for round in 0..20i64 {
        let key = format!("race{round}");
        assert_eq!(acquire(&mut c, &key, "h", 100), None);
        let mut w = Waiter::start(s.port, &key, "w", 30000, 98 + round % 5);
        let r = w.reply();
        let held = owners(&mut c, &key);
        match r {
            Reply::Nil => {
                assert_eq!(held, one_owner("w"), "round {round}: nil means the waiter owns the lock");
                granted += 1;
            }
            Reply::Int(_) => {
                assert!(!held.contains_key("w"), "round {round}: timed out but owns the lock: {held:?}");
                timed_out += 1;
            }
            other => panic!("round {round}: unexpected reply {other:?}"),
        }
        w.raw.assert_no_extra_reply();
    }
    eprintln!("timeout vs expiry race: {granted} granted, {timed_out} timed out");
    assert_eq!(stat(&mut c, "waiters"), 0);
    assert!(stat(&mut c, "waits_granted") <= granted);
    assert!(stat(&mut c, "waits_timed_out") == timed_out);
}

// ---- 6. disconnected waiters ------------------------------------------------------------------

#[test]
fn closed_waiter_is_never_granted() {
    let (_g, s, mut c) = light_server();
    let chan = channel("k");
    let mut sub = subscribe(s.port, &chan);
    assert_eq!(acquire(&mut c, "k", "h", 30000), None);
    let w1 = Waiter::start(s.port, "k", "w1", 30000, 0);
    await_key_waiters(&mut c, "k", 1);
    let mut w2 = Waiter::start(s.port, "k", "w2", 30000, 0);
    await_key_waiters(&mut c, "k", 2);
    let w3 = Waiter::start(s.port, "k", "w3", 30000, 0);
    await_key_waiters(&mut c, "k", 3);

    w1.raw.close();
    await_key_waiters(&mut c, "k", 2);
    assert_eq!(release(&mut c, "k", "h"), Some(1));
    assert_eq!(w2.reply(), Reply::Nil);
    assert_eq!(owners(&mut c, "k"), one_owner("w2"), "w1 left: the lock goes to w2");

    w3.raw.close();
    await_key_waiters(&mut c, "k", 0);
    assert_eq!(w2.release(), Reply::Int(1));
    assert!(owners(&mut c, "k").is_empty(), "w3 left: the lock becomes free");
    assert_release_message(&mut sub, &chan);
    assert_eq!(stat(&mut c, "waits_cancelled"), 2);
    assert_eq!(stat(&mut c, "waits_granted"), 1);
    assert_eq!(stat(&mut c, "waiters"), 0);
    assert_eq!(stat(&mut c, "keys_with_waiters"), 0);
    // Nothing is granted later on either.
    assert_eq!(w2.raw.poll(Duration::from_millis(100)), None);
    assert!(owners(&mut c, "k").is_empty());
}

// ---- 7. CLIENT UNBLOCK ------------------------------------------------------------------------

fn unblocked_case(error: bool) {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(acquire(&mut c, "k", "h", 30000), None);
    let mut w = Raw::connect(s.port);
    let id = w.cmd(&["CLIENT", "ID"]).int();
    w.send(&["LOCK.ACQUIRE", "k", "w", "30000", "WAIT", "0"]);
    await_key_waiters(&mut c, "k", 1);
    let mut unblock = redis::cmd("CLIENT");
    unblock.arg("UNBLOCK").arg(id);
    if error {
        unblock.arg("ERROR");
    }
    let n: i64 = unblock.query(&mut c).unwrap();
    assert_eq!(n, 1, "CLIENT UNBLOCK unblocks the waiter");
    match w.read() {
        Reply::Int(p) if !error => assert!(p > 0 && p <= 30000, "PTTL {p}"),
        Reply::Err(e) if error => assert!(e.starts_with("UNBLOCKED"), "error {e}"),
        other => panic!("CLIENT UNBLOCK{}: unexpected reply {other:?}", if error { " ERROR" } else { "" }),
    }
    await_key_waiters(&mut c, "k", 0);
    assert_eq!(stat(&mut c, "waiters"), 0);
    assert_eq!(release(&mut c, "k", "h"), Some(1));
    assert!(owners(&mut c, "k").is_empty(), "the unblocked client is never granted");
    w.assert_no_extra_reply();
    assert_eq!(stat(&mut c, "waits_granted"), 0);
    assert_eq!(stat(&mut c, "waits_cancelled"), 1);
}

#[test]
fn client_unblock_timeout_replies_pttl() {
    let _g = light();
    unblocked_case(false);
}

#[test]
fn client_unblock_error_replies_error() {
    let _g = light();
    unblocked_case(true);
}

// ---- 8. MULTI / Lua never block ---------------------------------------------------------------

#[test]
fn wait_in_multi_and_lua_does_not_block() {
    let (_g, _s, mut c) = light_server();
    assert_eq!(acquire(&mut c, "k", "h", 30000), None);
    let (p,): (Option<i64>,) = redis::pipe()
        .atomic()
        .cmd("LOCK.ACQUIRE")
        .arg("k")
        .arg("w")
        .arg(1000)
        .arg("WAIT")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert!(matches!(p, Some(t) if t > 0 && t <= 30000), "MULTI: integer PTTL, got {p:?}");
    let p: Option<i64> = redis::cmd("EVAL")
        .arg("return redis.call('LOCK.ACQUIRE', KEYS[1], ARGV[1], 1000, 'WAIT', 0)")
        .arg(1)
        .arg("k")
        .arg("w")
        .query(&mut c)
        .unwrap();
    assert!(matches!(p, Some(t) if t > 0 && t <= 30000), "EVAL: integer PTTL, got {p:?}");
    let p: Option<i64> = redis::cmd("EVAL")
        .arg("return redis.call('LOCK.ACQUIRE', KEYS[1], ARGV[1], 1000, 'WAIT', 100)")
        .arg(1)
        .arg("k")
        .arg("w")
        .query(&mut c)
        .unwrap();
    assert!(matches!(p, Some(t) if t > 0), "EVAL WAIT 100: integer PTTL, got {p:?}");
    assert_eq!(stat(&mut c, "waits_started"), 0);
    assert_eq!(stat(&mut c, "waiters"), 0);
    assert_eq!(owners(&mut c, "k"), one_owner("h"));
    // Free lock: WAIT in MULTI just acquires.
    let (p,): (Option<i64>,) = redis::pipe()
        .atomic()
        .cmd("LOCK.ACQUIRE")
        .arg("free")
        .arg("w")
        .arg(1000)
        .arg("WAIT")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(p, None);
    assert_eq!(owners(&mut c, "free"), one_owner("w"));
}

// ---- 9. role change ---------------------------------------------------------------------------

#[test]
fn replicaof_fails_every_waiter() {
    let _g = light();
    let m = Server::start();
    let other = Server::start_opts(Opts::default().without_module());
    let mut c = m.conn();
    let mut ws = Vec::new();
    for k in ["a", "b"] {
        assert_eq!(acquire(&mut c, k, "h", 30000), None);
        for i in 0..3 {
            ws.push(Waiter::start(m.port, k, &format!("w{i}"), 30000, if i == 2 { 20000 } else { 0 }));
            await_key_waiters(&mut c, k, i + 1);
        }
    }
    let _: () = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(other.port).query(&mut c).unwrap();
    for w in &mut ws {
        match w.raw.poll(Duration::from_secs(10)) {
            Some(Reply::Err(e)) => {
                assert!(e.starts_with("UNBLOCKED") || e.starts_with("READONLY"), "error reply {e}")
            }
            other => panic!("waiter {} on {}: expected an error reply, got {other:?}", w.owner, w.key),
        }
    }
    await_total_waiters(&mut c, 0);
    assert_eq!(stat(&mut c, "keys_with_waiters"), 0);
    assert_eq!(stat(&mut c, "waits_granted"), 0);
}

// ---- 10. replica consistency ------------------------------------------------------------------

/// Drive one key through `rounds` rounds of: holder, 5 queued waiters, a chain of grants where
/// even waiters release (handoff) and odd waiters let a 40 ms lease expire (timer grant). Leaves
/// the key held by a waiter granted on expiry with a long lease, re-entered once.
fn churn_key(port: u16, key: String, rounds: usize) {
    let mut ctl = Raw::connect(port);
    let info_waiters = |ctl: &mut Raw| -> i64 {
        match ctl.cmd(&["LOCK.INFO", &key]) {
            Reply::Arr(a) => a.chunks(2).find(|p| p[0] == Reply::Str("waiters".into())).unwrap()[1].int(),
            Reply::Nil => -1,
            other => panic!("LOCK.INFO {other:?}"),
        }
    };
    for r in 0..rounds {
        let holder = format!("h{r}");
        assert_eq!(ctl.cmd(&["LOCK.ACQUIRE", &key, &holder, "30000"]), Reply::Nil, "{key} round {r}");
        let mut ws = Vec::new();
        for i in 0..5 {
            let lease = if i % 2 == 1 { 40 } else { 30000 };
            ws.push(Waiter::start(port, &key, &format!("w{r}-{i}"), lease, 0));
            let ok = wait_for(Duration::from_secs(20), || (info_waiters(&mut ctl) == i + 1).then_some(()));
            assert!(ok.is_some(), "{key}: waiter {i} not queued");
        }
        assert_eq!(ctl.cmd(&["LOCK.RELEASE", &key, &holder]), Reply::Int(1));
        for (i, w) in ws.iter_mut().enumerate() {
            assert_eq!(w.reply(), Reply::Nil, "{key} round {r} waiter {i}");
            if i % 2 == 0 {
                assert_eq!(w.release(), Reply::Int(1), "{key} round {r} waiter {i} release");
            }
        }
        for w in ws {
            w.raw.close();
        }
    }
    // Final state: last holder with a short lease, a long-lease waiter granted at its expiry.
    assert_eq!(ctl.cmd(&["LOCK.ACQUIRE", &key, "last-h", "200"]), Reply::Nil);
    let mut fin = Waiter::start(port, &key, "final", 600000, 0);
    let reply = fin.reply();
    assert_eq!(reply, Reply::Nil);
    assert_eq!(fin.raw.cmd(&["LOCK.ACQUIRE", &key, "final", "500000"]), Reply::Nil, "re-entry");
}

#[test]
fn replicas_match_after_many_handoffs() {
    let _g = heavy();
    let m = Server::start();
    let r1 = Server::start();
    let r2 = Server::start_opts(Opts::default().without_module());
    r1.replicate_from(&m);
    r2.replicate_from(&m);
    let keys: Vec<String> = (0..16).map(|i| format!("churn:{i}")).collect();
    let rounds = 5;
    let threads: Vec<_> = keys
        .iter()
        .cloned()
        .map(|k| {
            let port = m.port;
            std::thread::spawn(move || churn_key(port, k, rounds))
        })
        .collect();
    for t in threads {
        t.join().expect("churn thread");
    }
    let mut c = m.conn();
    let handoffs = stat(&mut c, "handoffs");
    let timer_grants = stat(&mut c, "grants_after_free");
    eprintln!("replica churn: {handoffs} handoffs, {timer_grants} grants after expiry");
    // Per round: 3 handoffs, 2 expiry grants; plus one expiry grant per key at the end.
    assert_eq!(handoffs, (keys.len() * rounds * 3) as i64);
    // (The final waiter may arrive after its 200 ms holder already expired on a slow machine.)
    let min = (keys.len() * rounds * 2) as i64;
    assert!((min..=min + keys.len() as i64).contains(&timer_grants), "timer grants {timer_grants}");
    // WAIT only covers this connection's own writes (none): compare replication offsets.
    for r in [&r1, &r2] {
        let caught_up = replica_caught_up(&mut c, &mut r.conn(), Duration::from_secs(20));
        assert!(caught_up, "replica on port {} did not reach the master's offset", r.port);
    }

    let snapshot = |con: &mut redis::Connection| -> BTreeMap<String, (BTreeMap<String, String>, i64)> {
        let mut names: Vec<String> = redis::cmd("KEYS").arg("*").query(con).unwrap();
        names.sort();
        names
            .into_iter()
            .map(|k| {
                let h = owners(con, &k);
                let d = pexpiretime(con, &k);
                (k, (h, d))
            })
            .collect()
    };
    let sm = snapshot(&mut c);
    assert_eq!(sm.len(), keys.len(), "every key is held at the end: {sm:?}");
    for (k, (h, d)) in &sm {
        assert_eq!(h, &BTreeMap::from([("final".to_string(), "2".to_string())]), "{k}");
        assert!(*d > 0, "{k} has a deadline");
    }
    assert_eq!(snapshot(&mut r1.conn()), sm, "replica with the module");
    assert_eq!(snapshot(&mut r2.conn()), sm, "replica without the module");
}

// ---- 11. scale --------------------------------------------------------------------------------

fn fd_limit() -> usize {
    let out = std::process::Command::new("sh").arg("-c").arg("ulimit -n").output().expect("ulimit -n");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(1024)
}

#[test]
fn ten_thousand_waiters_time_out_cleanly() {
    let _g = heavy();
    let limit = fd_limit();
    // Client sockets live in this process; keep headroom for the other tests' connections.
    let n = 10_000.min(limit.saturating_sub(1000)).max(2000);
    if n < 10_000 {
        eprintln!("fd limit {limit}: using {n} waiters instead of 10000");
    }
    let s = Server::start_with("--maxclients 20000");
    let mut c = s.conn();
    let nkeys = 1000;
    for k in 0..nkeys {
        assert_eq!(acquire(&mut c, &format!("scale:{k}"), "holder", 600000), None);
    }
    let maxclients: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("maxclients").query(&mut c).unwrap();
    eprintln!("server maxclients {}, fd limit {limit}, waiters {n}", maxclients[1]);
    let timed_out0 = stat(&mut c, "waits_timed_out");
    let _: () = redis::cmd("MEMORY").arg("PURGE").query(&mut c).unwrap_or(());
    let base_mem = info_int(&mut c, "memory", "used_memory");
    let base_clients = info_int(&mut c, "clients", "connected_clients");

    let t0 = Instant::now();
    let mut conns: Vec<Raw> = (0..n).map(|_| Raw::connect(s.port)).collect();
    eprintln!("{n} connections in {:?}", t0.elapsed());
    let t1 = Instant::now();
    for (i, r) in conns.iter_mut().enumerate() {
        let key = format!("scale:{}", i % nkeys);
        r.send(&["LOCK.ACQUIRE", &key, &format!("w{i}"), "30000", "WAIT", "200"]);
    }
    let peak = stat(&mut c, "waiters");
    eprintln!("{n} commands sent in {:?}; waiters right after: {peak}", t1.elapsed());
    for (i, r) in conns.iter_mut().enumerate() {
        match r.read() {
            Reply::Int(p) => assert!(p > 0, "waiter {i}: PTTL {p}"),
            other => panic!("waiter {i}: expected an integer PTTL, got {other:?}"),
        }
    }
    eprintln!("all {n} timed out; total {:?}", t1.elapsed());
    assert_eq!(stat(&mut c, "waiters"), 0);
    assert_eq!(stat(&mut c, "keys_with_waiters"), 0);
    assert_eq!(stat(&mut c, "waits_timed_out") - timed_out0, n as i64);
    assert_eq!(stat(&mut c, "waits_granted"), 0);
    for k in [0, nkeys / 2, nkeys - 1] {
        assert_eq!(owners(&mut c, &format!("scale:{k}")), one_owner("holder"));
    }
    for r in conns {
        r.close();
    }
    let mut last = 0;
    let gone = wait_for(Duration::from_secs(30), || {
        last = info_int(&mut c, "clients", "connected_clients");
        (last <= base_clients).then_some(())
    });
    assert!(gone.is_some(), "clients still connected: {last}");
    let t2 = Instant::now();
    let mut mem = 0;
    // Redis 7.0 gives every module-blocked client two clients from its module temp-client pool
    // (reply client and thread-safe-context client, ~17 KB each) and shrinks that pool by at most
    // 50 clients per 100 ms (modulesCron): after 10 000 concurrent waiters (~340 MB) it takes
    // Redis itself ~40 s to give that memory back. Bounded at 90 s.
    let back = wait_for(Duration::from_secs(90), || {
        mem = info_int(&mut c, "memory", "used_memory");
        (mem - base_mem < 4 * 1024 * 1024).then_some(())
    });
    eprintln!(
        "used_memory baseline {base_mem}, after {mem} (delta {} bytes, {:?} after the clients left)",
        mem - base_mem,
        t2.elapsed()
    );
    assert!(back.is_some(), "used_memory still {} bytes above the baseline", mem - base_mem);
}

// ---- 12. INFO counters ------------------------------------------------------------------------

#[test]
fn wait_counters_are_exact() {
    let (_g, s, mut c) = light_server();
    let expect = |c: &mut redis::Connection, want: &[(&str, i64)]| {
        let info = lock_info(c);
        for (k, v) in want {
            assert_eq!(
                info.get(*k).map(String::as_str),
                Some(v.to_string().as_str()),
                "lock_{k} in {info:?}"
            );
        }
    };
    assert_eq!(acquire(&mut c, "k", "A", 30000), None);
    let mut w1 = Waiter::start(s.port, "k", "w1", 100, 0); // granted on handoff, lease 100 ms
    await_key_waiters(&mut c, "k", 1);
    let mut w2 = Waiter::start(s.port, "k", "w2", 30000, 100); // times out
    await_key_waiters(&mut c, "k", 2);
    let w3 = Waiter::start(s.port, "k", "w3", 30000, 0); // disconnects
    await_key_waiters(&mut c, "k", 3);
    let mut w4 = Raw::connect(s.port); // CLIENT UNBLOCK
    let id4 = w4.cmd(&["CLIENT", "ID"]).int();
    w4.send(&["LOCK.ACQUIRE", "k", "w4", "30000", "WAIT", "0"]);
    await_key_waiters(&mut c, "k", 4);
    expect(&mut c, &[("waits_started", 4), ("waiters", 4), ("keys_with_waiters", 1)]);

    assert!(matches!(w2.reply(), Reply::Int(p) if p > 0));
    await_key_waiters(&mut c, "k", 3);
    w3.raw.close();
    await_key_waiters(&mut c, "k", 2);
    let n: i64 = redis::cmd("CLIENT").arg("UNBLOCK").arg(id4).query(&mut c).unwrap();
    assert_eq!(n, 1);
    assert!(matches!(w4.read(), Reply::Int(_)));
    await_key_waiters(&mut c, "k", 1);
    expect(&mut c, &[("waits_timed_out", 1), ("waits_cancelled", 2), ("waiters", 1), ("waits_granted", 0)]);

    // w5 queues behind w1; A's release hands off to w1, whose 100 ms lease expires -> w5.
    let mut w5 = Waiter::start(s.port, "k", "w5", 30000, 0);
    await_key_waiters(&mut c, "k", 2);
    assert_eq!(release(&mut c, "k", "A"), Some(1));
    assert_eq!(w1.reply(), Reply::Nil);
    assert_eq!(w5.reply(), Reply::Nil);
    assert_eq!(owners(&mut c, "k"), one_owner("w5"));
    assert_eq!(key_waiters(&mut c, "k"), Some(0));
    assert_eq!(w5.release(), Reply::Int(1));

    // A type change fails a waiter.
    assert_eq!(acquire(&mut c, "t", "A", 30000), None);
    let mut w6 = Waiter::start(s.port, "t", "w6", 30000, 0);
    await_key_waiters(&mut c, "t", 1);
    let _: () = redis::cmd("SET").arg("t").arg("v").query(&mut c).unwrap();
    assert!(matches!(w6.raw.poll(Duration::from_secs(5)), Some(Reply::Err(e)) if e.starts_with("WRONGTYPE")));

    expect(
        &mut c,
        &[
            ("waits_started", 6),
            ("waits_granted", 2),
            ("waits_timed_out", 1),
            ("waits_cancelled", 2),
            ("waits_failed", 1),
            ("handoffs", 1),
            ("grants_after_free", 1),
            ("release_messages", 1),
            ("releases_full", 2),
            ("waiters", 0),
            ("keys_with_waiters", 0),
        ],
    );
}

/// Waiters right behind the head that use the head's owner id are granted with it, as
/// reentrant holds; a different owner behind them keeps waiting until all those holds are gone.
#[test]
fn consecutive_waiters_with_the_same_owner_are_granted_together() {
    let (_g, s, mut c) = light_server();
    let key = "same-owner";
    assert_eq!(acquire(&mut c, key, "holder", 30000), None);
    let mut x = Waiter::start(s.port, key, "svc:1", 30000, 0);
    await_key_waiters(&mut c, key, 1);
    let mut y = Waiter::start(s.port, key, "svc:1", 30000, 0);
    await_key_waiters(&mut c, key, 2);
    let mut z = Waiter::start(s.port, key, "other:2", 30000, 0);
    await_key_waiters(&mut c, key, 3);
    assert_eq!(release(&mut c, key, "holder"), Some(1));
    assert_eq!(x.reply(), Reply::Nil);
    assert_eq!(y.reply(), Reply::Nil);
    assert_eq!(owners(&mut c, key), BTreeMap::from([("svc:1".to_string(), "2".to_string())]));
    assert_eq!(key_waiters(&mut c, key), Some(1), "the other owner still waits");
    assert_eq!(z.raw.poll(Duration::from_millis(50)), None);
    assert_eq!(x.release(), Reply::Int(0), "first of two holds");
    assert_eq!(z.raw.poll(Duration::from_millis(50)), None);
    assert_eq!(y.release(), Reply::Int(1), "last hold hands over");
    assert_eq!(z.reply(), Reply::Nil);
    assert_eq!(owners(&mut c, key), one_owner("other:2"));
    for w in [&mut x, &mut y, &mut z] {
        w.raw.assert_no_extra_reply();
    }
}

/// SWAPDB moves the lock away from the waiters' database: they are served at once.
#[test]
fn swapdb_wakes_waiters() {
    let (_g, s, mut c) = light_server();
    assert_eq!(acquire(&mut c, "sw", "holder", 30000), None);
    let mut w = Waiter::start(s.port, "sw", "w", 20000, 0);
    await_key_waiters(&mut c, "sw", 1);
    let _: () = redis::cmd("SWAPDB").arg(0).arg(1).query(&mut c).expect("SWAPDB");
    assert_eq!(w.raw.poll(Duration::from_millis(500)), Some(Reply::Nil), "granted after SWAPDB");
    assert_eq!(owners(&mut c, "sw"), one_owner("w"));
    let _: () = redis::cmd("SELECT").arg(1).query(&mut c).expect("SELECT");
    assert_eq!(owners(&mut c, "sw"), one_owner("holder"), "the old lock moved to db 1");
    w.raw.assert_no_extra_reply();
}

/// CLIENT PAUSE WRITE (as FAILOVER uses) keeps expired keys in place: the module must not
/// write during the pause (granting then would also re-add a key Redis still holds, which
/// aborts the server). The waiter is served once the pause ends.
#[test]
fn expiry_during_client_pause_waits_for_the_pause_to_end() {
    let (_g, mut s, mut c) = light_server();
    assert_eq!(acquire(&mut c, "p", "h", 300), None);
    let mut w = Waiter::start(s.port, "p", "w", 20000, 0);
    await_key_waiters(&mut c, "p", 1);
    let paused_at = Instant::now();
    let _: () = redis::cmd("CLIENT").arg("PAUSE").arg(1200).arg("WRITE").query(&mut c).expect("CLIENT PAUSE");
    // The lease ends at ~300 ms, inside the pause: nobody is granted while it lasts.
    let early = w.raw.poll(Duration::from_millis(900));
    assert_eq!(early, None, "granted during the pause");
    s.assert_alive();
    let r = w.raw.poll(Duration::from_millis(3000));
    assert_eq!(r, Some(Reply::Nil), "granted once the pause ended");
    assert!(paused_at.elapsed() >= Duration::from_millis(1100), "not before the pause ended");
    assert_eq!(owners(&mut c, "p"), one_owner("w"));
    w.raw.assert_no_extra_reply();
    s.assert_alive();
}

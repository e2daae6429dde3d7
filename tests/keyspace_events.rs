//! Keyspace notifications: every LOCK.* write fires the same events as the native commands it
//! stands for (HINCRBY + PEXPIRE, HINCRBY -1, DEL, PEXPIRE), so tools that watch the keyspace
//! (client-side caching, keyspace-event consumers, Redisson's own listeners) see no difference.
//!
//! Each case runs the LOCK command on one key and the native equivalent on another, in the same
//! server, and compares the two event sequences (keyspace and keyevent channels, key names
//! abstracted) instead of hard-coding them. The expected list is asserted too, to document it.

mod common;
use common::*;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// One notification with the key abstracted: ("keyspace", event) or ("keyevent", event).
type Event = (String, String);

/// A raw RESP subscriber (a plain socket, so it stays subscribed for the whole test).
struct Watch {
    r: BufReader<TcpStream>,
}

const MARKER: &str = "marker-channel";

impl Watch {
    fn new(s: &Server) -> Watch {
        let sock = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
        sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut w = Watch { r: BufReader::new(sock) };
        let pats = ["__keyspace@0__:*", "__keyevent@0__:*", MARKER];
        let mut cmd = format!("*{}\r\n$10\r\nPSUBSCRIBE\r\n", pats.len() + 1);
        for p in pats {
            cmd.push_str(&format!("${}\r\n{p}\r\n", p.len()));
        }
        w.r.get_mut().write_all(cmd.as_bytes()).unwrap();
        for p in pats {
            let confirm = w.frame();
            assert_eq!(confirm[0], b"psubscribe", "{p}");
        }
        w
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).expect("a notification within 10 s");
        assert!(l.ends_with("\r\n"), "truncated line {l:?}");
        l.truncate(l.len() - 2);
        l
    }

    /// One pushed array of strings (integers as their text).
    fn frame(&mut self) -> Vec<Vec<u8>> {
        let head = self.line();
        let n: usize =
            head.strip_prefix('*').and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{head:?}"));
        (0..n)
            .map(|_| {
                let l = self.line();
                if let Some(len) = l.strip_prefix('$') {
                    let mut b = vec![0; len.parse::<usize>().unwrap() + 2];
                    self.r.read_exact(&mut b).unwrap();
                    b.truncate(b.len() - 2);
                    b
                } else {
                    l.trim_start_matches(':').as_bytes().to_vec()
                }
            })
            .collect()
    }

    /// Next notification (channel, payload).
    fn next(&mut self) -> (String, Vec<u8>) {
        let f = self.frame();
        assert_eq!(f[0], b"pmessage", "{f:?}");
        (String::from_utf8_lossy(&f[2]).into_owned(), f[3].clone())
    }

    /// The events about `key` up to the marker published by `cmd` right after the commands:
    /// notifications are written to the subscriber in the order they are fired.
    fn drain(&mut self, cmd: &mut redis::Connection, key: &str) -> Vec<Event> {
        let _: i64 = redis::cmd("PUBLISH").arg(MARKER).arg("end").query(cmd).unwrap();
        let mut out = vec![];
        loop {
            let (ch, payload) = self.next();
            if ch == MARKER {
                return out;
            }
            if let Some(e) = abstract_key(&ch, &payload, key) {
                out.push(e);
            }
        }
    }

    /// Events about `keys` until `until` events have been seen for each, bounded by `limit`.
    fn collect_until(&mut self, keys: &[&str], until: &str, limit: Duration) -> Vec<Vec<Event>> {
        let end = Instant::now() + limit;
        let mut out = vec![vec![]; keys.len()];
        while out.iter().any(|evs| !evs.iter().any(|(kind, e)| kind == "keyevent" && e == until)) {
            assert!(Instant::now() < end, "no `{until}` events within {limit:?}: {out:?}");
            let (ch, payload) = self.next();
            for (i, k) in keys.iter().enumerate() {
                if let Some(e) = abstract_key(&ch, &payload, k) {
                    out[i].push(e);
                }
            }
        }
        out
    }
}

fn abstract_key(ch: &str, payload: &[u8], key: &str) -> Option<Event> {
    let payload = String::from_utf8_lossy(payload).into_owned();
    if let Some(k) = ch.strip_prefix("__keyspace@0__:") {
        return (k == key).then(|| ("keyspace".to_string(), payload));
    }
    if let Some(ev) = ch.strip_prefix("__keyevent@0__:") {
        return (payload == key).then(|| ("keyevent".to_string(), ev.to_string()));
    }
    None
}

/// Both channels for each event, in firing order.
fn expected(events: &[&str]) -> Vec<Event> {
    events
        .iter()
        .flat_map(|e| [("keyspace".to_string(), e.to_string()), ("keyevent".to_string(), e.to_string())])
        .collect()
}

fn run(con: &mut redis::Connection, args: &[&str]) -> redis::Value {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

struct Setup {
    s: Server,
    con: redis::Connection,
    watch: Watch,
}

/// `LOCK.ACQUIRE key owner 30000 WAIT 0` on its own connection and thread; joins to its reply.
fn spawn_waiter(s: &Server, key: &str, owner: &str) -> std::thread::JoinHandle<Option<i64>> {
    let mut con = s.conn();
    let (key, owner) = (key.to_string(), owner.to_string());
    std::thread::spawn(move || {
        redis::cmd("LOCK.ACQUIRE").arg(key).arg(owner).arg(30000).arg("WAIT").arg(0).query(&mut con).unwrap()
    })
}

fn setup() -> Setup {
    let s = Server::start();
    let mut con = s.conn();
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("notify-keyspace-events").arg("KEA").query(&mut con).unwrap();
    let watch = Watch::new(&s);
    Setup { s, con, watch }
}

impl Setup {
    /// Run `module` commands on key `m` and `native` commands on key `n`, return both event lists.
    fn compare(&mut self, module: &[&[&str]], native: &[&[&str]]) -> (Vec<Event>, Vec<Event>) {
        for c in module {
            run(&mut self.con, c);
        }
        let m = self.watch.drain(&mut self.con, "m");
        for c in native {
            run(&mut self.con, c);
        }
        let n = self.watch.drain(&mut self.con, "n");
        (m, n)
    }

    fn same(&mut self, what: &str, module: &[&[&str]], native: &[&[&str]], want: &[&str]) {
        let (m, n) = self.compare(module, native);
        assert_eq!(m, n, "{what}: LOCK events {m:?} differ from native {n:?}");
        assert_eq!(m, expected(want), "{what}");
    }
}

#[test]
fn lock_commands_fire_the_events_of_their_native_equivalents() {
    let mut t = setup();
    t.same(
        "acquire (new)",
        &[&["LOCK.ACQUIRE", "m", "me", "30000"]],
        &[&["HINCRBY", "n", "me", "1"], &["PEXPIRE", "n", "30000"]],
        &["hincrby", "expire"],
    );
    t.same(
        "acquire (reentrant)",
        &[&["LOCK.ACQUIRE", "m", "me", "30000"]],
        &[&["HINCRBY", "n", "me", "1"], &["PEXPIRE", "n", "30000"]],
        &["hincrby", "expire"],
    );
    t.same(
        "partial release keeping the lease",
        &[&["LOCK.RELEASE", "m", "me"]],
        &[&["HINCRBY", "n", "me", "-1"]],
        &["hincrby"],
    );
    t.same(
        "acquire again",
        &[&["LOCK.ACQUIRE", "m", "me", "30000"]],
        &[&["HINCRBY", "n", "me", "1"], &["PEXPIRE", "n", "30000"]],
        &["hincrby", "expire"],
    );
    t.same(
        "partial release with a lease",
        &[&["LOCK.RELEASE", "m", "me", "20000"]],
        &[&["HINCRBY", "n", "me", "-1"], &["PEXPIRE", "n", "20000"]],
        &["hincrby", "expire"],
    );
    t.same("renew", &[&["LOCK.RENEW", "m", "me", "40000"]], &[&["PEXPIRE", "n", "40000"]], &["expire"]);
    // The native equivalent of a full release is DEL (Redisson's unlock script first runs
    // HINCRBY -1, so it fires `hincrby` then `del`; the module fires only `del`).
    t.same("full release", &[&["LOCK.RELEASE", "m", "me"]], &[&["DEL", "n"]], &["del"]);
    t.same(
        "force release",
        &[&["LOCK.ACQUIRE", "m", "me", "30000"], &["LOCK.FORCERELEASE", "m"]],
        &[&["HINCRBY", "n", "me", "1"], &["PEXPIRE", "n", "30000"], &["DEL", "n"]],
        &["hincrby", "expire", "del"],
    );
    // Nothing written, nothing fired: contended acquire, not-owner release, missed renew, INFO,
    // force release of a free lock, refused input.
    run(&mut t.con, &["LOCK.ACQUIRE", "m", "holder", "30000"]);
    run(&mut t.con, &["HINCRBY", "n", "holder", "1"]);
    run(&mut t.con, &["PEXPIRE", "n", "30000"]);
    t.watch.drain(&mut t.con, "m");
    t.same(
        "no-ops",
        &[
            &["LOCK.ACQUIRE", "m", "me", "30000"],
            &["LOCK.RELEASE", "m", "me"],
            &["LOCK.RENEW", "m", "me", "30000"],
            &["LOCK.INFO", "m"],
            &["LOCK.FORCERELEASE", "free"],
            &["LOCK.RELEASE", "free", "me"],
        ],
        &[&["HEXISTS", "n", "me"], &["PTTL", "n"]],
        &[],
    );
    for bad in [
        &["LOCK.ACQUIRE", "m", "me", "0"][..],
        &["LOCK.ACQUIRE", "m", "holder", "30000", "NOPE", "1"],
        &["LOCK.RELEASE", "m", "holder", "-1"],
        &["LOCK.RENEW", "m", "holder", "x"],
    ] {
        let r: redis::RedisResult<redis::Value> = {
            let mut c = redis::cmd(bad[0]);
            for a in &bad[1..] {
                c.arg(*a);
            }
            c.query(&mut t.con)
        };
        assert!(r.is_err(), "{bad:?} must be refused");
    }
    assert_eq!(t.watch.drain(&mut t.con, "m"), vec![], "refused commands fired events");
    t.s.assert_alive();
}

#[test]
fn handoff_fires_del_then_the_new_holders_events() {
    let mut t = setup();
    run(&mut t.con, &["LOCK.ACQUIRE", "m", "first", "30000"]);
    run(&mut t.con, &["HINCRBY", "n", "first", "1"]);
    run(&mut t.con, &["PEXPIRE", "n", "30000"]);
    t.watch.drain(&mut t.con, "m");
    // A waiter on another connection.
    let handle = spawn_waiter(&t.s, "m", "second");
    let queued = wait_for(Duration::from_secs(10), || (stat(&mut t.con, "waiters") == 1).then_some(()));
    assert!(queued.is_some(), "the waiter never queued");
    let (m, n) = t.compare(
        &[&["LOCK.RELEASE", "m", "first"]],
        &[&["DEL", "n"], &["HINCRBY", "n", "second", "1"], &["PEXPIRE", "n", "30000"]],
    );
    assert_eq!(m, n, "handoff events {m:?} vs native {n:?}");
    assert_eq!(m, expected(&["del", "hincrby", "expire"]));
    assert_eq!(handle.join().unwrap(), None, "the waiter got the lock");
    let owner: i64 = redis::cmd("HGET").arg("m").arg("second").query(&mut t.con).unwrap();
    assert_eq!(owner, 1);
}

#[test]
fn an_expiring_lease_fires_expired_like_a_native_key() {
    let mut t = setup();
    run(&mut t.con, &["LOCK.ACQUIRE", "m", "me", "50"]);
    run(&mut t.con, &["HINCRBY", "n", "me", "1"]);
    run(&mut t.con, &["PEXPIRE", "n", "50"]);
    // Both expire (active expiry, or lazily on access): `expired` on both channels, nothing else.
    let evs = t.watch.collect_until(&["m", "n"], "expired", Duration::from_secs(10));
    assert_eq!(evs[0], expected(&["hincrby", "expire", "expired"]), "LOCK key");
    assert_eq!(evs[0], evs[1], "LOCK key vs native key");
    let exists: i64 = redis::cmd("EXISTS").arg("m").arg("n").query(&mut t.con).unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn expiry_with_a_waiter_fires_expired_then_the_grant() {
    let mut t = setup();
    run(&mut t.con, &["LOCK.ACQUIRE", "m", "first", "100"]);
    t.watch.drain(&mut t.con, "m");
    let handle = spawn_waiter(&t.s, "m", "second");
    assert_eq!(handle.join().unwrap(), None, "the waiter got the lock when the lease ran out");
    let evs = t.watch.drain(&mut t.con, "m");
    assert_eq!(evs, expected(&["expired", "hincrby", "expire"]), "events of an expiry handed to a waiter");
    let owner: i64 = redis::cmd("HGET").arg("m").arg("second").query(&mut t.con).unwrap();
    assert_eq!(owner, 1);
}
